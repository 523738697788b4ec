//! `countersign-mcp --demo` starts on a fresh machine, says how to connect,
//! and what it says works: with the fake backend, the official Python MCP
//! SDK navigates to the demo page, observes it, proposes a click by ref,
//! has it approved on the page and acts once; with Chromium, the approval
//! page it leads to is what docs/images/mcp-demo-approval.png shows
//! (`COUNTERSIGN_MCP_SCREENSHOT=write` rewrites that file).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use countersign_backend_chromium::running_as_root;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The Python SDK's interpreter (see sdk_clients.rs), or `None` to skip.
fn python() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("COUNTERSIGN_MCP_PYTHON") {
        return Some(PathBuf::from(path));
    }
    let default =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-venv/bin/python");
    if default.exists() {
        return Some(default);
    }
    eprintln!("SKIPPED: no Python MCP SDK; `cargo xtask ci` creates it");
    None
}

/// The demo, running, and the lines it printed before `press Ctrl-C`.
struct Demo {
    child: Child,
    lines: Vec<String>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        support::stop_gracefully(&mut self.child);
    }
}

impl Demo {
    fn start(args: &[&str]) -> Demo {
        let mut child = Command::new(env!("CARGO_BIN_EXE_countersign-mcp"))
            .arg("--demo")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap()).lines();
        let lines = reader
            .by_ref()
            .map_while(Result::ok)
            .take_while(|line| !line.starts_with("press Ctrl-C"))
            .collect();
        // Read to the end, so that no later write meets a closed pipe.
        std::thread::spawn(move || reader.for_each(drop));
        Demo { child, lines }
    }

    fn value(&self, prefix: &str) -> String {
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {:?}", self.lines))
            .trim()
            .to_owned()
    }

    /// The approver's secret, the tail of the sign-in link.
    fn approver(&self) -> String {
        let link = self.value("approver sign-in: ");
        link.rsplit('/').next().unwrap().to_owned()
    }
}

/// Runs the Python SDK client and returns its report.
fn client(python: &PathBuf, args: &[&str]) -> serde_json::Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/client.py");
    let output = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}

/// One HTTP/1.1 exchange; the status line and headers, lower-cased.
fn get(url: &str, headers: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut stream = TcpStream::connect(authority).unwrap();
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.to_lowercase()
}

#[test]
fn the_demo_prints_working_links() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign-mcp"))
        .arg("--demo")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines: Vec<String> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .take_while(|line| !line.starts_with("press Ctrl-C"))
        .collect();
    let value = |prefix: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {lines:?}"))
            .trim()
            .to_owned()
    };
    let endpoint = value("MCP endpoint (Streamable HTTP): ");
    let sign_in = value("approver sign-in: ");
    let site = value("demo site: ");
    assert!(value("MCP bearer token: ").len() >= 16);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("claude mcp add --transport http"))
    );

    assert!(get(&site, "").starts_with("http/1.1 200"));
    let signed_in = get(&sign_in, "");
    assert!(signed_in.starts_with("http/1.1 200"), "{signed_in}");
    assert!(signed_in.contains("set-cookie: countersign-approver="));
    let refused = get(&endpoint, "");
    assert!(refused.starts_with("http/1.1 401"), "{refused}");
    let clicks = get(&format!("{site}clicks"), "");
    assert!(clicks.ends_with("{\"clicks\":0}"), "{clicks}");

    // The sign-in link sends the approver on to an approval page, and
    // nowhere else.
    let onward = get(&format!("{sign_in}?next=/approvals/proposals/prp_x"), "");
    assert!(onward.starts_with("http/1.1 303"), "{onward}");
    assert!(onward.contains("\r\nlocation: /approvals/proposals/prp_x\r\n"));
    assert!(onward.contains("set-cookie: countersign-approver="));
    for elsewhere in [
        "//evil.example/",
        "https://evil.example/",
        "/approvals/../mcp",
        "/mcp",
    ] {
        let stayed = get(&format!("{sign_in}?next={elsewhere}"), "");
        assert!(stayed.starts_with("http/1.1 200"), "{elsewhere}: {stayed}");
        assert!(!stayed.contains("location:"), "{elsewhere}: {stayed}");
    }
    support::stop_gracefully(&mut child);
}

/// The fake backend shows a model of the demo's page: the same navigate,
/// observe, propose by ref, approve and act as on the live page (and the
/// rest of the HTTP flow), on the demo's own configuration.
#[test]
fn the_demo_flow_works_on_the_fake_backend() {
    let Some(python) = python() else { return };
    let demo = Demo::start(&[]);
    assert!(
        demo.lines
            .contains(&"backend: fake, with the configured pages".to_owned())
    );
    let site = demo.value("demo site: ");
    let report = client(
        &python,
        &[
            "http",
            &demo.value("MCP endpoint (Streamable HTTP): "),
            &demo.value("MCP bearer token: "),
            &demo.approver(),
            &site,
        ],
    );
    assert_eq!(report["navigate"], "ok");
    assert_eq!(report["observe"], "ok");
    assert_eq!(report["title"], "countersign demo");
    assert_eq!(report["status_after_accept"], "pending");
    assert_eq!(report["act_while_pending"], "APPROVAL_REQUIRED");
    assert_eq!(report["act"], "ok");
    assert_eq!(report["replay"], "APPROVAL_STALE");
    assert_eq!(report["actions"], 1);
    assert_eq!(report["actions_at_end"], 1);
    assert_eq!(report["concurrent_actions"], 1);
    // The fake clicks nothing: the real page counted no click.
    let clicks = get(&format!("{site}clicks"), "");
    assert!(clicks.ends_with("{\"clicks\":0}"), "{clicks}");
}

/// A chromium backend that cannot start stops the server at start-up,
/// naming the option to change.
#[test]
fn a_missing_chromium_is_named_at_start_up() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "[policy]\nallow_hosts = [\"127.0.0.2\"]\n[http]\nlisten = \"127.0.0.1:0\"\n\
         [backend]\nkind = \"chromium\"\nchromium_path = \"/nonexistent/chromium\"\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_countersign-mcp"))
        .args(["--config", config.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "countersign-mcp: `backend.chromium_path` is `/nonexistent/chromium`, which is not a file: install Chromium there or name its binary\n"
    );
    // `--backend` is the demo's; a file names its own.
    let output = Command::new(env!("CARGO_BIN_EXE_countersign-mcp"))
        .args([
            "--config",
            config.path().to_str().unwrap(),
            "--backend",
            "fake",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).starts_with(
        "error: the argument '--config <FILE>' cannot be used with '--backend <BACKEND>'"
    ));
}

/// The approval page an MCP client's proposal leads to, on the live
/// backend: the page's screenshot with the button outlined, and Approve.
/// Saved as a PNG by headless Chromium signed in through the demo's link.
#[test]
fn the_demo_approval_page_on_chromium() {
    let Some(python) = python() else { return };
    let demo = Demo::start(&["--backend", "chromium"]);
    let site = demo.value("demo site: ");
    let report = client(
        &python,
        &[
            "propose",
            &demo.value("MCP endpoint (Streamable HTTP): "),
            &demo.value("MCP bearer token: "),
            &site,
        ],
    );
    let approval_url = report["approval_url"].as_str().unwrap();
    let path = &approval_url[approval_url.find("/approvals/").unwrap()..];
    let link = format!("{}?next={path}", demo.value("approver sign-in: "));
    let out = tempfile::tempdir().unwrap();
    let png = out.path().join("approval.png");
    let mut chromium = Command::new("chromium");
    chromium.args([
        "--headless",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1000,2200",
        &format!("--user-data-dir={}", out.path().join("profile").display()),
        &format!("--screenshot={}", png.display()),
    ]);
    if running_as_root() {
        chromium.arg("--no-sandbox");
    }
    let shot = chromium.arg(&link).output().unwrap();
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    if std::env::var("COUNTERSIGN_MCP_SCREENSHOT").as_deref() == Ok("write") {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/images/mcp-demo-approval.png");
        std::fs::write(docs, bytes).unwrap();
    }
}
