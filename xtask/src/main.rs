//! Project automation: `cargo xtask ci` runs exactly what CI runs.
//!
//! ```text
//! cargo xtask ci            fmt check, clippy, tests (incl. doc tests), each published
//!                           crate's tests checked alone with its default features, the
//!                           policy crate's tests with serde_json's `arbitrary_precision`, docs,
//!                           cargo-deny, packaging of every crate, quick benchmarks
//! ```
//!
//! On a fresh machine `cargo xtask ci` installs what it needs and is missing:
//! cargo-deny (`cargo install --locked cargo-deny`) and, when run as root
//! with `apt-get`, `redis-server` and `redis-cli` (Debian's `redis-server`
//! and `redis-tools`), Chromium (Debian's `chromium`) and the PostgreSQL
//! server binaries (Debian's `postgresql`); otherwise it stops first,
//! saying what to install. It also creates `target/mcp-venv`, a Python
//! virtual environment with the official MCP SDK that countersign-mcp's
//! tests drive the server with, and runs `npm ci` for the TypeScript SDK
//! they drive it with too and for the MCP conformance suite they run
//! against it.
//!
//! ```text
//! cargo xtask test          the workspace tests with all features
//! cargo xtask bench [--quick]  benchmarks against same-run baselines (writes docs/benchmarks.md)
//! cargo xtask redis         starts a throw-away redis-server on a free loopback port
//! ```

mod settings;
mod test_binaries;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("test") => test(),
        Some("bench") => bench(&args[1..]),
        Some("redis") => redis(),
        _ => {
            eprintln!("usage: cargo xtask <ci | test | bench [--quick] | redis>");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Result<(), String> {
    eprintln!("\n$ {} {}", program, args.join(" "));
    let status = Command::new(program)
        .args(args)
        .env(settings::INCREMENTAL.0, settings::INCREMENTAL.1)
        .envs(envs.iter().copied())
        .current_dir(root())
        .status()
        .map_err(|e| format!("could not start `{program}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}` failed with {status}",
            args.join(" ")
        ))
    }
}

fn cargo(args: &[&str]) -> Result<(), String> {
    run(&cargo_program(), args, &[])
}

/// Whether `program --version` runs.
fn installed(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `program` runs from `PATH` (or its own path) or from
/// `<versioned_in>/<version>/bin/`.
fn found(program: &str, versioned_in: Option<&str>) -> bool {
    installed(program, &[])
        || versioned_in
            .and_then(|dir| std::fs::read_dir(dir).ok())
            .is_some_and(|versions| {
                versions.flatten().any(|version| {
                    let path = version.path().join("bin").join(program);
                    installed(&path.to_string_lossy(), &[])
                })
            })
}

fn cargo_program() -> String {
    env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// A program the tests need, and the Debian packages that bring it.
struct NeededProgram {
    /// What is looked for on `PATH` (or at this path).
    programs: &'static [&'static str],
    /// A directory whose versioned subdirectories also hold the programs,
    /// in `<dir>/<version>/bin` (Debian's layout for PostgreSQL).
    versioned_in: Option<&'static str>,
    /// Debian's packages that install it.
    packages: &'static [&'static str],
    /// Who needs it, for the message.
    why: &'static str,
}

/// What the tests need beyond cargo, and where it comes from.
const NEEDED_PROGRAMS: &[NeededProgram] = &[
    NeededProgram {
        programs: &["redis-server", "redis-cli"],
        versioned_in: None,
        packages: &["redis-server", "redis-tools"],
        why: "the Redis store's tests (they start their own servers on loopback ports)",
    },
    NeededProgram {
        programs: &["/usr/bin/chromium"],
        versioned_in: None,
        packages: &["chromium"],
        why: "the live backend's and the egress guard's tests (headless Chromium)",
    },
    NeededProgram {
        programs: &["initdb", "pg_ctl", "pgbench"],
        versioned_in: Some("/usr/lib/postgresql"),
        packages: &["postgresql"],
        why: "the PostgreSQL store's tests and benchmarks (they start their own servers on loopback ports, as the `postgres` user under root)",
    },
];

/// Installs cargo-deny and the programs of [`NEEDED_PROGRAMS`] when they
/// are missing, or says precisely what to install.
fn require_tools() -> Result<(), String> {
    if !installed(&cargo_program(), &["deny"]) {
        eprintln!("xtask ci: cargo-deny is missing; installing it");
        cargo(&["install", "--locked", "cargo-deny"]).map_err(|e| {
            format!(
                "{e}; cargo-deny is required: install it with `cargo install --locked cargo-deny`"
            )
        })?;
    }
    let missing: Vec<&NeededProgram> = NEEDED_PROGRAMS
        .iter()
        .filter(|needed| {
            needed
                .programs
                .iter()
                .any(|program| !found(program, needed.versioned_in))
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let packages: Vec<&str> = missing
        .iter()
        .flat_map(|needed| needed.packages.iter().copied())
        .collect();
    if !root || !installed("apt-get", &[]) {
        let what: Vec<String> = missing
            .iter()
            .map(|needed| format!("{} for {}", needed.programs.join(" and "), needed.why))
            .collect();
        return Err(format!(
            "required and missing: {}; install them, e.g. `apt-get install {}` on Debian",
            what.join("; "),
            packages.join(" ")
        ));
    }
    eprintln!("xtask ci: installing {}", packages.join(" "));
    run("apt-get", &["update", "-qq"], &[])?;
    let mut args = vec!["install", "-y", "-qq"];
    args.extend(packages);
    run("apt-get", &args, &[("DEBIAN_FRONTEND", "noninteractive")])
}

/// The policy crate's tests (the digest vectors among them) with
/// serde_json's `arbitrary_precision` feature on. In the workspace's own
/// target directory: cargo keeps artifacts of different features apart, so
/// only `serde_json` and what depends on it are built again, and nothing of
/// the main build is rebuilt afterwards.
fn test_arbitrary_precision() -> Result<(), String> {
    run(
        &cargo_program(),
        &[
            "test",
            "--package",
            "countersign-canonical-policy",
            "--features",
            "serde_json/arbitrary_precision",
        ],
        &[],
    )
}

fn ci() -> Result<(), String> {
    require_tools()?;
    let mut phases = Phases::default();
    let outcome = ci_phases(&mut phases);
    phases.summary();
    outcome?;
    eprintln!("\nxtask ci: all checks passed");
    Ok(())
}

/// Every check of `cargo xtask ci` after the tools, in order, each timed.
fn ci_phases(phases: &mut Phases) -> Result<(), String> {
    phases.time("tools for the tests (venv, npm)", || {
        mcp_python()?;
        mcp_node()
    })?;
    phases.time("fmt", || cargo(&["fmt", "--all", "--check"]))?;
    phases.time("clippy", || {
        cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ])
    })?;
    let python = mcp_python()?;
    let binaries = phases.time("build the tests", || {
        test_binaries::build(&cargo_program(), &root())
    })?;
    let env = test_env(&python);
    phases.time("run the tests", || {
        test_binaries::run(&binaries, &env, test_jobs())
    })?;
    phases.time("doc tests", || {
        run(
            &cargo_program(),
            &["test", "--workspace", "--all-features", "--doc"],
            &borrowed(&env),
        )
    })?;
    phases.time(
        "each published crate's tests, default features",
        build_published_tests_alone,
    )?;
    phases.time(
        "policy tests with arbitrary_precision",
        test_arbitrary_precision,
    )?;
    phases.time("rustdoc", || {
        run(
            &cargo_program(),
            &["doc", "--workspace", "--all-features", "--no-deps"],
            &[(
                "RUSTDOCFLAGS",
                "-D warnings -D rustdoc::broken_intra_doc_links",
            )],
        )
    })?;
    phases.time("cargo-deny", || {
        cargo(&["deny", "check", "licenses", "bans", "sources"])
    })?;
    phases.time("packaging", || {
        forget_packaged_sources()?;
        cargo(&[
            "package",
            "--workspace",
            "--allow-dirty",
            "--exclude",
            "xtask",
            // The benchmark harness reads the Redis store's scripts from the
            // source tree and is never published.
            "--exclude",
            "countersign-bench",
            // The examples that need a browser or a web server: `publish =
            // false`, which `cargo package --workspace` still packages.
            "--exclude",
            "countersign-examples",
        ])
    })?;
    phases.time("bench --quick", quick_bench)
}

/// How many test binaries `cargo xtask ci` runs at once:
/// `COUNTERSIGN_TEST_JOBS`, else 1.
fn test_jobs() -> usize {
    env::var("COUNTERSIGN_TEST_JOBS")
        .ok()
        .and_then(|jobs| jobs.parse().ok())
        .filter(|jobs| *jobs > 0)
        .unwrap_or(1)
}

/// The environment every test run gets: the MCP SDKs and the stores the
/// MCP tests drive.
fn test_env(python: &str) -> Vec<(&'static str, String)> {
    vec![
        ("COUNTERSIGN_MCP_PYTHON", python.to_owned()),
        ("COUNTERSIGN_MCP_NODE", "1".to_owned()),
        ("COUNTERSIGN_MCP_STORES", "1".to_owned()),
    ]
}

/// `pairs` as `run` takes them.
fn borrowed<'a>(pairs: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// How long each phase of `cargo xtask ci` took.
#[derive(Default)]
struct Phases {
    done: Vec<(&'static str, Duration, bool)>,
}

/// A run past this much time is close to CI's limit: the summary warns.
const CI_WARN_AFTER: Duration = Duration::from_secs(30 * 60);

impl Phases {
    /// Runs `phase`, noting its wall time and whether it passed.
    fn time<T>(
        &mut self,
        name: &'static str,
        phase: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, String> {
        let started = Instant::now();
        let outcome = phase();
        self.done.push((name, started.elapsed(), outcome.is_ok()));
        outcome
    }

    /// Prints each phase's wall time and the total; warns past
    /// [`CI_WARN_AFTER`].
    fn summary(&self) {
        let total: Duration = self.done.iter().map(|(_, took, _)| *took).sum();
        eprintln!("\nxtask ci: wall time by phase");
        for (name, took, passed) in &self.done {
            let mark = if *passed { "" } else { "  (failed)" };
            eprintln!("  {:>7}  {name}{mark}", minutes(*took));
        }
        eprintln!("  {:>7}  total", minutes(total));
        if total > CI_WARN_AFTER {
            eprintln!(
                "xtask ci: warning: the run took {}, more than {}; CI's limit is 90 minutes",
                minutes(total),
                minutes(CI_WARN_AFTER)
            );
        }
    }
}

/// `m:ss`.
fn minutes(took: Duration) -> String {
    let seconds = took.as_secs();
    format!("{}:{:02}", seconds / 60, seconds % 60)
}

/// Removes the sources of this workspace's crates that an earlier
/// `cargo package --workspace` unpacked into `$CARGO_HOME/registry/src`.
///
/// Verifying a package builds it against the other packaged crates through
/// a local registry, and cargo unpacks each of them into a directory of
/// `registry/src` named after that registry (`-<hash>`) and after the crate
/// and version only. A later run of the same version finds the directory
/// and reuses it, so it would verify against an older copy of our own
/// code. Only our own crates in such local-registry directories are
/// removed; crates.io's sources are left alone.
fn forget_packaged_sources() -> Result<(), String> {
    let home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(home) = home else {
        return Ok(());
    };
    let Ok(registries) = std::fs::read_dir(home.join("registry").join("src")) else {
        return Ok(());
    };
    for registry in registries.flatten() {
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let Ok(crates) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for unpacked in crates.flatten() {
            if unpacked
                .file_name()
                .to_string_lossy()
                .starts_with("countersign")
            {
                std::fs::remove_dir_all(unpacked.path()).map_err(|e| {
                    format!(
                        "could not remove the stale packaged sources `{}`: {e}",
                        unpacked.path().display()
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// The workspace's crates that are published (`publish` not `false`), by
/// name, from `cargo metadata`.
fn published_crates() -> Result<Vec<String>, String> {
    let output = Command::new(cargo_program())
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("could not start `cargo metadata`: {e}"))?;
    if !output.status.success() {
        return Err(format!("`cargo metadata` failed with {}", output.status));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("`cargo metadata` printed no JSON: {e}"))?;
    let packages = metadata["packages"]
        .as_array()
        .ok_or("`cargo metadata` listed no packages")?;
    Ok(packages
        .iter()
        // `publish = false` reads as an empty list of registries.
        .filter(|package| package["publish"].as_array().is_none_or(|r| !r.is_empty()))
        .filter_map(|package| package["name"].as_str().map(str::to_owned))
        .collect())
}

/// Compiles (`cargo check`) each published crate's tests on its own with
/// its default features, as someone who picks that one crate builds them;
/// checking finds what would not compile without linking. The workspace
/// build unifies features across crates, so a test that needs an opt-in
/// feature would build there and fail here; such tests name it in
/// `required-features`.
fn build_published_tests_alone() -> Result<(), String> {
    for name in published_crates()? {
        cargo(&["check", "--package", &name, "--tests"])?;
    }
    Ok(())
}

fn test() -> Result<(), String> {
    let python = mcp_python()?;
    mcp_node()?;
    run(
        &cargo_program(),
        &["test", "--workspace", "--all-features"],
        &borrowed(&test_env(&python)),
    )
}

/// The Node packages of countersign-mcp's tests, each pinned by its
/// committed lock file: the official MCP TypeScript SDK (the client tests),
/// the MCP conformance suite (its server scenarios) and Playwright MCP
/// (whose tool list the Playwright-compatible tools are pinned against).
const MCP_NODE_PACKAGES: &[&str] = &[
    "crates/mcp/tests/node",
    "crates/mcp/tests/conformance",
    "crates/mcp/tests/playwright",
];

/// Installs [`MCP_NODE_PACKAGES`] as their lock files pin them (`npm ci`).
fn mcp_node() -> Result<(), String> {
    if !installed("npm", &[]) {
        return Err("npm is required for countersign-mcp's TypeScript client and conformance tests: install Node.js 20 or later".into());
    }
    for package in MCP_NODE_PACKAGES {
        let package = root().join(package);
        run(
            "npm",
            &[
                "ci",
                "--no-audit",
                "--no-fund",
                "--prefix",
                &package.to_string_lossy(),
            ],
            // Playwright's packages never fetch a browser: the tests use
            // Debian's Chromium.
            &[("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")],
        )?;
    }
    Ok(())
}

/// The official MCP Python SDK, pinned, that countersign-mcp's tests drive
/// the server with.
const MCP_PYTHON_SDK: &str = "mcp==2.3.0";

/// The Standard Webhooks reference library, which the notification tests'
/// receiver verifies signatures with (an implementation not ours).
const STANDARD_WEBHOOKS: &str = "standardwebhooks==1.3.0";

/// The Prometheus Python client, whose parser reads the metrics tests'
/// scrape (an implementation not ours).
const PROMETHEUS_CLIENT: &str = "prometheus-client==0.26.0";

/// The interpreter of `target/mcp-venv`, created with [`MCP_PYTHON_SDK`],
/// [`STANDARD_WEBHOOKS`] and [`PROMETHEUS_CLIENT`] installed when one is missing (and, as root with `apt-get`, Debian's
/// `python3-venv` first when `python3 -m venv` cannot run).
fn mcp_python() -> Result<String, String> {
    let venv = root().join("target").join("mcp-venv");
    let python = venv.join("bin").join("python");
    let python_text = python.to_string_lossy().into_owned();
    let ready = Command::new(&python)
        .args(["-c", "import mcp, standardwebhooks, prometheus_client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ready {
        return Ok(python_text);
    }
    let venv_text = venv.to_string_lossy().into_owned();
    if run("python3", &["-m", "venv", &venv_text], &[]).is_err() {
        if !installed("apt-get", &[]) {
            return Err("`python3 -m venv` failed: install Python 3 with its venv module (Debian's `python3-venv`)".into());
        }
        run("apt-get", &["update", "-qq"], &[])?;
        run(
            "apt-get",
            &["install", "-y", "-qq", "python3", "python3-venv"],
            &[("DEBIAN_FRONTEND", "noninteractive")],
        )?;
        run("python3", &["-m", "venv", &venv_text], &[])?;
    }
    run(
        &python_text,
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            MCP_PYTHON_SDK,
            STANDARD_WEBHOOKS,
            PROMETHEUS_CLIENT,
        ],
        &[],
    )?;
    Ok(python_text)
}

fn bench(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "--quick") {
        return quick_bench();
    }
    cargo(&["run", "--release", "--package", "countersign-bench"])
}

/// `bench --quick` checks that every benchmark still runs; it asserts no
/// timing, so it needs no release build. Built in the test build's profile
/// and with its features, it reuses every artifact that build made, and
/// only the harness itself is compiled and linked.
fn quick_bench() -> Result<(), String> {
    cargo(&["build", "--workspace", "--all-features", "--bins"])?;
    let harness = target_dir().join("debug").join("countersign-bench");
    run(&harness.to_string_lossy(), &["--quick"], &[])
}

/// Where cargo builds: `CARGO_TARGET_DIR`, else `target/` in the workspace.
fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

fn redis() -> Result<(), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free loopback port: {e}"))?
        .port()
        .to_string();
    eprintln!("redis-server on 127.0.0.1:{port} (ctrl-c stops it; nothing is saved)");
    run(
        "redis-server",
        &[
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        &[],
    )
}
