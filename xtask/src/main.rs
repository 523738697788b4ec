//! Project automation: `cargo xtask ci` runs exactly what CI runs.
//!
//! ```text
//! cargo xtask ci            fmt check, clippy, tests (incl. doc tests), docs, cargo-deny,
//!                           packaging of every crate, quick benchmarks
//! cargo xtask test          the workspace tests with all features
//! cargo xtask bench [--quick]  benchmarks against same-run baselines (writes docs/benchmarks.md)
//! cargo xtask redis         starts a throw-away redis-server on a free loopback port
//! ```

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

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
    run(
        &env::var("CARGO").unwrap_or_else(|_| "cargo".into()),
        args,
        &[],
    )
}

fn ci() -> Result<(), String> {
    cargo(&["fmt", "--all", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ])?;
    test()?;
    run(
        &env::var("CARGO").unwrap_or_else(|_| "cargo".into()),
        &["doc", "--workspace", "--all-features", "--no-deps"],
        &[(
            "RUSTDOCFLAGS",
            "-D warnings -D rustdoc::broken_intra_doc_links",
        )],
    )?;
    cargo(&["deny", "check", "licenses", "bans", "sources"])?;
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
    ])?;
    bench(&["--quick".to_owned()])?;
    eprintln!("\nxtask ci: all checks passed");
    Ok(())
}

fn test() -> Result<(), String> {
    cargo(&["test", "--workspace", "--all-features"])
}

fn bench(args: &[String]) -> Result<(), String> {
    let quick = args.iter().any(|a| a == "--quick");
    let mut cargo_args = vec!["run", "--release", "--package", "countersign-bench", "--"];
    if quick {
        cargo_args.push("--quick");
    }
    if !root().join("bench/Cargo.toml").exists() {
        eprintln!("xtask bench: no benchmark harness yet, skipping");
        return Ok(());
    }
    cargo(&cargo_args)
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
