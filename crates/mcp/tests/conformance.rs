//! The MCP conformance suite (`@modelcontextprotocol/conformance`, the
//! protocol's own server scenarios) against the `countersign-mcp` binary
//! over Streamable HTTP, fake backend.
//!
//! The suite lives in `tests/conformance/node_modules`, which `cargo xtask
//! ci` fills with `npm ci` (pinned by the committed lock file) before
//! setting `COUNTERSIGN_MCP_NODE`. Without that variable the test runs when
//! the suite is installed and is skipped (saying so) when it is not; with
//! it, a missing suite fails.
//!
//! Every scenario the suite runs must pass, except those listed in
//! `tests/conformance/expected-failures.yml`, each with its reason; a
//! listed scenario that passes fails the test too, so the list only ever
//! names what still fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use serde_json::Value;

const CLIENT_TOKEN: &str = "conformance-token-0123456789";
const APPROVER_TOKEN: &str = "conformance-approver-0123456789";

/// The suite's package, when `npm ci` has installed it.
fn suite() -> Option<PathBuf> {
    support::npm_package(
        "tests/conformance",
        "node_modules/@modelcontextprotocol/conformance/dist/index.js",
        "MCP conformance suite",
    )
}

/// The scenarios expected to fail, each with its reason, from the
/// baseline file (the suite's own `--expected-failures` format, one
/// `  - name  # reason` line per scenario).
fn baseline(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut entries = BTreeMap::new();
    let mut in_server = false;
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            in_server = line.trim_end() == "server:";
            continue;
        }
        assert!(in_server, "a baseline entry outside `server:`: `{line}`");
        let entry = line
            .trim_start()
            .strip_prefix("- ")
            .unwrap_or_else(|| panic!("not a baseline entry: `{line}`"));
        let (name, reason) = entry
            .split_once('#')
            .unwrap_or_else(|| panic!("a baseline entry without its reason: `{line}`"));
        let (name, reason) = (name.trim(), reason.trim());
        assert!(
            !reason.is_empty(),
            "a baseline entry without its reason: `{line}`"
        );
        assert!(
            entries.insert(name.to_owned(), reason.to_owned()).is_none(),
            "`{name}` is in the baseline twice"
        );
    }
    entries
}

/// Each scenario's checks as the suite saved them (`-o`):
/// `server-<scenario>-<timestamp>/checks.json`.
fn results(dir: &Path) -> BTreeMap<String, Vec<Value>> {
    // `2026-12-01T23-12-00-000Z`: an ISO time with `:` and `.` replaced.
    const STAMP: usize = "-2026-12-01T23-12-00-000Z".len();
    let mut results = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let scenario = name
            .strip_prefix("server-")
            .and_then(|rest| rest.get(..rest.len().checked_sub(STAMP)?))
            .unwrap_or_else(|| panic!("an unexpected result directory `{name}`"));
        let checks: Vec<Value> =
            serde_json::from_slice(&std::fs::read(entry.path().join("checks.json")).unwrap())
                .unwrap();
        assert!(
            results.insert(scenario.to_owned(), checks).is_none(),
            "`{scenario}` ran twice"
        );
    }
    results
}

/// A scenario fails as the suite's baseline check counts it: any check
/// `FAILURE` or `WARNING`.
fn failed(checks: &[Value]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| c["status"] == "FAILURE" || c["status"] == "WARNING")
        .map(|c| {
            format!(
                "{} {}: {}",
                c["status"].as_str().unwrap_or_default(),
                c["id"].as_str().unwrap_or_default(),
                c["errorMessage"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn config() -> tempfile::NamedTempFile {
    let text = format!(
        r#"
[policy]
allow_hosts = ["127.0.0.2"]
schemes = ["http"]
special_use = ["127.0.0.2/32"]

[http]
listen = "127.0.0.1:0"

[[tokens]]
token = "{CLIENT_TOKEN}"
actor = "conformance-agent"
run = "conformance-run"

[[approvers]]
name = "conformance-approver"
token = "{APPROVER_TOKEN}"
"#
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        support::stop_gracefully(&mut self.0);
    }
}

/// The binary serving `config`, its MCP endpoint, and its stderr as it
/// comes (read to the end by a thread, so the server never writes into a
/// closed pipe).
fn serve(config: &tempfile::NamedTempFile) -> (Server, String, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign-mcp"))
        .args(["--config", config.path().to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Server(child);
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let url = lines
        .iter()
        .find_map(|line| {
            line.strip_prefix("MCP endpoint (Streamable HTTP): ")
                .map(str::to_owned)
        })
        .expect("the server printed no MCP endpoint");
    (server, url, lines)
}

#[test]
fn the_conformance_suite_passes_but_for_the_baseline() {
    let Some(package) = suite() else { return };
    let baseline_file = package.join("expected-failures.yml");
    let expected = baseline(&baseline_file);
    let config = config();
    let (server, url, server_log) = serve(&config);
    let out = tempfile::tempdir().unwrap();
    let mut suite = Command::new("node")
        .current_dir(&package)
        .args([
            "--import",
            "./auth.mjs",
            "node_modules/@modelcontextprotocol/conformance/dist/index.js",
            "server",
            // Pending scenarios too: each one that fails is in the baseline.
            "--suite",
            "all",
            "--url",
            &url,
            "--expected-failures",
            baseline_file.to_str().unwrap(),
            "-o",
            out.path().to_str().unwrap(),
        ])
        .env("COUNTERSIGN_MCP_TOKEN", CLIENT_TOKEN)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = suite.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut stdout = String::new();
    suite
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = suite.wait().unwrap();
    let stderr = errors.join().unwrap();
    drop(server);
    let server_log: Vec<String> = server_log.try_iter().collect();
    let context = || {
        format!(
            "\n--- suite stdout ---\n{stdout}\n--- suite stderr ---\n{stderr}\n--- server stderr ---\n{}",
            server_log.join("\n")
        )
    };

    let results = results(out.path());
    assert!(
        results.contains_key("server-initialize") && results.contains_key("tools-list"),
        "the suite ran no scenarios: {:?}{}",
        results.keys().collect::<Vec<_>>(),
        context()
    );
    let mut unexpected = Vec::new();
    let mut stale = Vec::new();
    for (scenario, checks) in &results {
        let failures = failed(checks);
        match (failures.is_empty(), expected.contains_key(scenario)) {
            (false, false) => unexpected.push(format!("{scenario}: {}", failures.join("; "))),
            (true, true) => stale.push(scenario.clone()),
            _ => {}
        }
    }
    let not_run: Vec<&String> = expected
        .keys()
        .filter(|name| !results.contains_key(*name))
        .collect();
    assert!(
        unexpected.is_empty() && stale.is_empty() && not_run.is_empty(),
        "newly failing (not in the baseline): {unexpected:#?}\nin the baseline but passing now (remove them): {stale:?}\nin the baseline but not run by this suite version: {not_run:?}{}",
        context()
    );
    // The suite's own baseline check agrees.
    assert!(
        status.success(),
        "the suite's baseline check failed ({status}){}",
        context()
    );
    eprintln!(
        "conformance: {} scenarios, {} pass, {} in the baseline",
        results.len(),
        results.len() - expected.len(),
        expected.len()
    );
}
