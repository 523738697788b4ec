//! The workspace's test binaries, built once and run one by one (or a few
//! at a time), each timed, so `cargo xtask ci` can say where its time goes.
//!
//! A test binary runs as `cargo test` runs it: from its package's
//! directory, with `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME` set. Binaries
//! that start servers pick free loopback ports of their own, so several
//! can run at once; tests inside one binary keep sharing what they share.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One compiled test binary.
pub struct TestBinary {
    /// The executable cargo built.
    executable: PathBuf,
    /// Its package's directory, the working directory `cargo test` uses.
    package_dir: PathBuf,
    /// Its package's name.
    package: String,
    /// `lib`, `bin <name>` or `test <name>`, for the report.
    target: String,
}

/// Builds every test binary of the workspace with all features (what
/// `cargo test --workspace --all-features` builds) and lists them.
pub fn build(cargo: &str, root: &Path) -> Result<Vec<TestBinary>, String> {
    let args = [
        "test",
        "--workspace",
        "--all-features",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ];
    eprintln!("\n$ {cargo} {}", args.join(" "));
    let output = Command::new(cargo)
        .args(args)
        .env(
            crate::settings::INCREMENTAL.0,
            crate::settings::INCREMENTAL.1,
        )
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start `{cargo}`: {e}"))?;
    if !output.status.success() {
        return Err(format!("building the tests failed with {}", output.status));
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let is_test = message["profile"]["test"].as_bool() == Some(true);
        let (Some(executable), true) = (message["executable"].as_str(), is_test) else {
            continue;
        };
        let manifest = message["manifest_path"].as_str().unwrap_or_default();
        let package_dir = Path::new(manifest)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| root.to_path_buf());
        let package = message["package_id"]
            .as_str()
            .and_then(package_name)
            .unwrap_or_default();
        let kind = message["target"]["kind"][0].as_str().unwrap_or("test");
        let name = message["target"]["name"].as_str().unwrap_or_default();
        let target = match kind {
            "lib" | "proc-macro" => "lib".to_owned(),
            other => format!("{other} {name}"),
        };
        binaries.push(TestBinary {
            executable: PathBuf::from(executable),
            package_dir,
            package,
            target,
        });
    }
    if binaries.is_empty() {
        return Err("cargo built no test binaries".into());
    }
    Ok(binaries)
}

/// The package name in a cargo package id, either
/// `path+file:///…/crates/act-tool#countersign-act-tool@0.1.0` or the older
/// `countersign-act-tool 0.1.0 (path+file:///…)`.
fn package_name(id: &str) -> Option<String> {
    if let Some((_, tail)) = id.rsplit_once('#') {
        let name = tail.split('@').next()?;
        // `…/crates/xtask#0.0.0`: the name is the directory's.
        if name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            let path = id.rsplit_once('#')?.0;
            return path.rsplit('/').next().map(str::to_owned);
        }
        return Some(name.to_owned());
    }
    id.split(' ').next().map(str::to_owned)
}

/// What one binary's run came to.
struct Ran {
    label: String,
    took: Duration,
    passed: bool,
    output: String,
}

/// Runs `binaries`, `jobs` at a time, with `env`; prints each one's wall
/// time as it ends, the slowest at the end, and the output of every one
/// that failed.
pub fn run(binaries: &[TestBinary], env: &[(&str, String)], jobs: usize) -> Result<(), String> {
    let queue: Mutex<VecDeque<&TestBinary>> = Mutex::new(binaries.iter().collect());
    let ran: Mutex<Vec<Ran>> = Mutex::new(Vec::new());
    eprintln!(
        "\nxtask: running {} test binaries, {jobs} at a time",
        binaries.len()
    );
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let next = queue
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .pop_front();
                    let Some(binary) = next else { break };
                    let one = run_one(binary, env, jobs == 1);
                    eprintln!(
                        "{} {:>6.1}s  {}",
                        if one.passed { "ok    " } else { "FAILED" },
                        one.took.as_secs_f64(),
                        one.label
                    );
                    ran.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(one);
                }
            });
        }
    });
    let mut ran = ran
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    ran.sort_by_key(|one| std::cmp::Reverse(one.took));
    eprintln!("\nxtask: the slowest test binaries");
    for one in ran.iter().take(12) {
        eprintln!("  {:>6.1}s  {}", one.took.as_secs_f64(), one.label);
    }
    let failed: Vec<&Ran> = ran.iter().filter(|one| !one.passed).collect();
    for one in &failed {
        eprintln!("\n---- {} ----\n{}", one.label, one.output);
    }
    if failed.is_empty() {
        Ok(())
    } else {
        let names: Vec<&str> = failed.iter().map(|one| one.label.as_str()).collect();
        Err(format!("test binaries failed: {}", names.join(", ")))
    }
}

/// Runs one binary; with `stream`, its output goes straight to the
/// terminal (one at a time), else it is kept for the report.
fn run_one(binary: &TestBinary, env: &[(&str, String)], stream: bool) -> Ran {
    let label = format!("{} ({})", binary.package, binary.target);
    let mut command = Command::new(&binary.executable);
    command
        .current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env("CARGO_PKG_NAME", &binary.package)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let started = Instant::now();
    if stream {
        eprintln!("\n     Running {label}");
        let status = command.status();
        return Ran {
            label,
            took: started.elapsed(),
            passed: status.is_ok_and(|s| s.success()),
            output: String::new(),
        };
    }
    let output = command.output();
    let took = started.elapsed();
    match output {
        Ok(output) => Ran {
            label,
            took,
            passed: output.status.success(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        },
        Err(error) => Ran {
            label,
            took,
            passed: false,
            output: format!("could not start it: {error}"),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn package_names_come_from_either_id_format() {
        assert_eq!(
            package_name("path+file:///w/crates/act-tool#countersign-act-tool@0.1.0").as_deref(),
            Some("countersign-act-tool")
        );
        assert_eq!(
            package_name("path+file:///w/xtask#0.0.0").as_deref(),
            Some("xtask")
        );
        assert_eq!(
            package_name("countersign-act-tool 0.1.0 (path+file:///w/crates/act-tool)").as_deref(),
            Some("countersign-act-tool")
        );
    }
}
