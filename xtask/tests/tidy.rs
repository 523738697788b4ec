//! Tidy checks: project conventions that would otherwise rot, run as ordinary tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.sort();
    dirs
}

const CRATES: &[&str] = &[
    "act-tool",
    "approval-core",
    "approval-web",
    "backend-chromium",
    "backend-fake",
    "canonical-policy",
    "countersign",
    "egress-guard",
    "mcp",
    "store-conformance",
    "store-memory",
    "store-postgres",
    "store-redis",
];

/// The directory of the unpublished package that holds the examples
/// needing a browser or a web server (`countersign-examples`).
const EXAMPLES: &str = "examples";

#[test]
fn the_workspace_holds_exactly_the_designed_crates() {
    let names: Vec<String> = crate_dirs()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut expected: Vec<&str> = CRATES.to_vec();
    expected.push(EXAMPLES);
    expected.sort_unstable();
    assert_eq!(names, expected);
}

/// `cargo run --example simulate` builds every dev-dependency of the facade:
/// the examples that need a browser or a web server live in their own
/// package, which is never published and never packaged.
#[test]
fn the_facade_examples_need_no_browser_or_web_server() {
    let facade = read("crates/countersign/Cargo.toml");
    let dev = facade
        .split("[dev-dependencies]")
        .nth(1)
        .unwrap_or("")
        .split("\n[")
        .next()
        .unwrap();
    let dev_dependencies: Vec<&str> = dev
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split(['.', ' ', '=']).next().unwrap())
        .collect();
    assert_eq!(dev_dependencies, ["tokio"]);
    let listed = |dir: &str| {
        let mut names: Vec<String> = fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(listed("crates/countersign/examples"), ["simulate.rs"]);
    assert_eq!(
        listed("crates/examples/examples"),
        ["approve.rs", "browse.rs", "live.rs"]
    );

    let examples = read("crates/examples/Cargo.toml");
    assert!(examples.contains("name = \"countersign-examples\""));
    assert!(examples.contains("\npublish = false\n"));
    let xtask = read("xtask/src/main.rs");
    let lines: Vec<&str> = xtask.lines().map(str::trim).collect();
    assert!(
        lines
            .windows(2)
            .any(|pair| pair == ["\"--exclude\",", "\"countersign-examples\","]),
        "cargo package must exclude countersign-examples"
    );
}

#[test]
fn the_readme_crate_table_lists_every_crate() {
    let readme = read("README.md");
    for dir in crate_dirs() {
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap();
        let row = format!(
            "| [`{name}`](crates/{}) |",
            dir.file_name().unwrap().to_string_lossy()
        );
        assert!(
            readme.contains(&row),
            "the README's crate table lacks `{row}`"
        );
    }
}

#[test]
fn every_crate_is_publishable_on_its_own() {
    for dir in crate_dirs() {
        if dir.ends_with(EXAMPLES) {
            continue;
        }
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = dir.display();
        for key in [
            "description",
            "license.workspace = true",
            "repository.workspace = true",
            "keywords.workspace = true",
            "rust-version.workspace = true",
            "readme",
        ] {
            assert!(manifest.contains(key), "{name}/Cargo.toml lacks `{key}`");
        }
        assert!(
            manifest.contains("[lints]\nworkspace = true"),
            "{name}/Cargo.toml does not use the workspace lints"
        );
        assert!(
            !manifest.contains("publish = false"),
            "{name} must be publishable"
        );
        assert!(dir.join("README.md").exists(), "{name} has no README.md");
        let lib = fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(
            lib.trim_start().starts_with("//!") && lib.contains("```"),
            "{name}: crate docs must open with an example"
        );
    }
}

#[test]
fn internal_dependencies_carry_a_version() {
    let manifest = read("Cargo.toml");
    let internal: Vec<&str> = manifest
        .lines()
        .filter(|l| l.starts_with("countersign"))
        .collect();
    assert_eq!(
        internal.len(),
        CRATES.len(),
        "one workspace dependency per crate"
    );
    for line in internal {
        assert!(
            line.contains("path = \"crates/") && line.contains("version = \""),
            "`{line}` needs both a path and a version"
        );
    }
}

#[test]
fn no_redis_type_escapes_the_redis_store() {
    for dir in crate_dirs() {
        if dir.ends_with("store-redis") {
            continue;
        }
        for entry in walk(&dir.join("src")) {
            let text = fs::read_to_string(&entry).unwrap();
            assert!(
                !names_redis_crate(&text),
                "{} names a redis type; only store-redis may",
                entry.display()
            );
        }
    }
}

/// Whether `text` names a path in the `redis` crate (`redis::…`), as opposed to
/// one ending in `redis` such as `countersign_store_redis::…`.
fn names_redis_crate(text: &str) -> bool {
    text.match_indices("redis::").any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn no_tokio_postgres_type_escapes_the_postgres_store() {
    for dir in crate_dirs() {
        if dir.ends_with("store-postgres") {
            continue;
        }
        for entry in walk(&dir.join("src")) {
            let text = fs::read_to_string(&entry).unwrap();
            assert!(
                !text.contains("tokio_postgres") && !text.contains("deadpool_postgres"),
                "{} names a tokio-postgres type; only store-postgres may",
                entry.display()
            );
        }
    }
}

#[test]
fn the_redis_check_tells_the_crate_from_its_wrapper() {
    assert!(names_redis_crate("fn f(e: redis::RedisError) {}"));
    assert!(names_redis_crate("redis::cmd(\"GET\")"));
    assert!(!names_redis_crate("pub use countersign_store_redis::*;"));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn the_docs_exist() {
    for doc in [
        "README.md",
        "docs/guide.md",
        "docs/security-model.md",
        "docs/architecture.md",
        "docs/writing-a-store.md",
        "docs/redis.md",
        "docs/postgres.md",
        "docs/benchmarks.md",
    ] {
        assert!(!read(doc).trim().is_empty(), "{doc} is empty");
    }
}

#[test]
fn the_readme_gives_the_two_commands_and_ci_runs_the_test_one() {
    let readme = read("README.md");
    assert!(readme.contains("cargo run --example simulate"));
    assert!(readme.contains("cargo xtask ci"));
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == "cargo xtask ci"),
        ".ci/run must run the README's test command"
    );
}

#[test]
fn the_benchmark_report_names_its_command() {
    let report = read("docs/benchmarks.md");
    assert!(report.contains("`cargo xtask bench`"));
}

#[test]
fn every_doc_with_rust_code_is_compiled_as_a_doc_test() {
    let sources: String = crate_dirs()
        .iter()
        .map(|dir| fs::read_to_string(dir.join("src/lib.rs")).unwrap())
        .collect();
    let mut docs: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root().join("README.md"));
    for doc in docs {
        let text = fs::read_to_string(&doc).unwrap();
        if !text.contains("```rust") {
            continue;
        }
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        let included = if name == "README.md" {
            sources.contains("include_str!(\"../../../README.md\")")
        } else {
            sources.contains(&format!("include_str!(\"../../../docs/{name}\")"))
        };
        assert!(
            included,
            "{name} has rust code that no crate compiles as a doc test"
        );
    }
}

/// The README's test command is the whole of CI: `.ci/run` installs nothing
/// itself, so `cargo xtask ci` must bring (or clearly require) every tool
/// on a fresh machine, and it checks for them before the first build.
#[test]
fn ci_is_the_readme_command_and_it_installs_what_it_needs() {
    let ci_run = read(".ci/run");
    let commands: Vec<&str> = ci_run
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(commands.last(), Some(&"cargo xtask ci"));
    for forbidden in ["apt-get", "cargo install", "redis"] {
        assert!(
            !commands.iter().any(|c| c.contains(forbidden)),
            ".ci/run must leave `{forbidden}` to `cargo xtask ci`"
        );
    }
    assert!(read("README.md").contains("```sh\ncargo xtask ci\n```"));

    let xtask = read("xtask/src/main.rs");
    let body = xtask
        .split("fn ci() -> Result<(), String> {")
        .nth(1)
        .unwrap();
    let first = body.lines().map(str::trim).find(|l| !l.is_empty()).unwrap();
    assert_eq!(
        first, "require_tools()?;",
        "tools are checked before any build"
    );
    for needed in [
        r#"cargo(&["install", "--locked", "cargo-deny"])"#,
        r#"programs: &["redis-server", "redis-cli"]"#,
        r#"packages: &["redis-server", "redis-tools"]"#,
        r#"programs: &["/usr/bin/chromium"]"#,
        r#"packages: &["chromium"]"#,
        r#"programs: &["initdb", "pg_ctl", "pgbench"]"#,
        r#"versioned_in: Some("/usr/lib/postgresql")"#,
        r#"packages: &["postgresql"]"#,
        r#"vec!["install", "-y", "-qq"]"#,
        "test_arbitrary_precision",
        r#""serde_json/arbitrary_precision""#,
    ] {
        assert!(xtask.contains(needed), "xtask ci lacks {needed}");
    }
}
