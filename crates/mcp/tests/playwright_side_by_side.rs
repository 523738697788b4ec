//! The same Playwright MCP call sequence, from the official TypeScript
//! SDK over stdio, against the real `@playwright/mcp` (npm, on Debian's
//! Chromium) and against `countersign-mcp --playwright-compat` (headless
//! Chromium behind the egress guard): once with an `auto` rule deciding,
//! once with a person approving on the approval page from the link the
//! call's progress notification carries. The site records what it
//! received; the three records must be the same, and the tool lists must
//! agree on every tool countersign performs.
//!
//! Needs `chromium` on `PATH` and `npm ci` in `tests/node` and
//! `tests/playwright` (`cargo xtask ci` does both; without
//! `COUNTERSIGN_MCP_NODE` a missing package skips, saying so).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::response::Html;
use axum::routing::get;
use countersign_backend_chromium::running_as_root;
use serde_json::{Value, json};

const APPROVER_TOKEN: &str = "approver-token-0123456789";

/// The pages, and the record of what they received: each beacon and each
/// search, in order.
struct Site {
    url: String,
    port: u16,
    record: Arc<Mutex<Vec<String>>>,
    _runtime: tokio::runtime::Runtime,
}

const FIRST: &str = r#"<!doctype html><title>shop</title>
<script>function beacon(what) { fetch("/event?kind=" + encodeURIComponent(what)); }</script>
<button onclick="beacon('click')">Count</button>
<button ondblclick="beacon('dblclick')">Double</button>
<button oncontextmenu="beacon('contextmenu'); return false">Menu</button>
<button onclick="if (event.shiftKey) beacon('shift click')">Shifted</button>
<input aria-label="Keys" onkeydown="if (!event.ctrlKey && !event.metaKey) beacon('key ' + event.key)">
<form action="/search" method="get">
  <input name="q" aria-label="Query">
  <label><input type="checkbox" name="gift"> Gift</label>
  <select name="size" aria-label="Size"><option value="s">Small</option><option value="m">Medium</option></select>
  <button type="submit">Search</button>
</form>"#;

impl Site {
    fn serve() -> Site {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.2:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let record = Arc::new(Mutex::new(Vec::new()));
        type Seen = State<Arc<Mutex<Vec<String>>>>;
        let app = axum::Router::new()
            .route("/", get(|| async { Html(FIRST) }))
            .route(
                "/event",
                get(
                    |State(seen): Seen, Query(query): Query<Vec<(String, String)>>| async move {
                        let kind = query
                            .into_iter()
                            .find(|(k, _)| k == "kind")
                            .map(|(_, v)| v)
                            .unwrap_or_default();
                        seen.lock().unwrap().push(kind);
                        ""
                    },
                ),
            )
            .route(
                "/search",
                get(
                    |State(seen): Seen, Query(query): Query<Vec<(String, String)>>| async move {
                        let fields: Vec<String> =
                            query.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        seen.lock()
                            .unwrap()
                            .push(format!("search {}", fields.join(" ")));
                        Html("<!doctype html><title>results</title><h1>Results</h1>")
                    },
                ),
            )
            .route(
                "/record",
                get(|State(seen): Seen| async move {
                    let record = serde_json::to_string(&*seen.lock().unwrap()).unwrap();
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        record,
                    )
                }),
            )
            .with_state(Arc::clone(&record));
        runtime.spawn(async move { axum::serve(listener, app).await });
        Site {
            url: format!("http://127.0.0.2:{port}/"),
            port,
            record,
            _runtime: runtime,
        }
    }

    fn clear(&self) {
        self.record.lock().unwrap().clear();
    }

    /// countersign-mcp's configuration for this site: `extra` decides
    /// who approves.
    fn config(&self, extra: &str) -> tempfile::NamedTempFile {
        let text = format!(
            r#"
[policy]
allow_hosts = ["127.0.0.2"]
schemes = ["http"]
special_use = ["127.0.0.2/32"]
ports = [{port}]

[backend]
kind = "chromium"
sandbox = {sandbox}

[http]
listen = "127.0.0.1:0"

[stdio]
actor = "playwright-agent"
run = "side-by-side"

[[approvers]]
name = "carol"
token = "{APPROVER_TOKEN}"

[compat]
playwright = true
approval_wait_secs = 60
{extra}
"#,
            port = self.port,
            sandbox = !running_as_root(),
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }
}

/// An `auto` rule for every kind of element the sequence touches, on the
/// site's host.
const AUTO_RULE: &str = r#"
[[rules]]
id = "shop-inputs"
tier = "auto"
reason = "the test shop's controls"
hosts = ["127.0.0.2"]
roles = ["button", "textbox", "checkbox", "combobox"]
"#;

fn run_scenarios(node: &Path, server: Value, site: &str, approver: Option<&str>) -> Value {
    let mut command = Command::new("node");
    command
        .current_dir(node)
        .arg("playwright_scenarios.mjs")
        .arg(server.to_string())
        .arg(site);
    if let Some(token) = approver {
        command.arg(token);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the scenarios failed:\n{stdout}\n{stderr}"
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromium"))
        .find(|candidate| candidate.is_file())
}

/// What the site must have received from the sequence, whoever ran it.
fn expected_record() -> Value {
    json!([
        "click",
        "dblclick",
        "contextmenu",
        "shift click",
        "key ArrowDown",
        "search q=hello gift=on size=m",
        "click"
    ])
}

#[test]
fn the_same_calls_have_the_same_effects_as_playwright_mcp() {
    let (Some(node), Some(playwright)) = (
        support::npm_package(
            "tests/node",
            "node_modules/@modelcontextprotocol/sdk",
            "TypeScript MCP SDK",
        ),
        support::npm_package(
            "tests/playwright",
            "node_modules/@playwright/mcp",
            "Playwright MCP",
        ),
    ) else {
        return;
    };
    let chromium = chromium().expect("chromium on PATH (cargo xtask ci installs it)");
    let site = Site::serve();
    // Where Playwright writes the snapshots it links to instead of showing.
    let output = tempfile::tempdir().unwrap();

    let mut args = vec![
        playwright
            .join("node_modules/@playwright/mcp/cli.js")
            .display()
            .to_string(),
        "--headless".to_owned(),
        "--isolated".to_owned(),
        "--output-dir".to_owned(),
        output.path().display().to_string(),
        "--executable-path".to_owned(),
        chromium.display().to_string(),
    ];
    if running_as_root() {
        args.push("--no-sandbox".to_owned());
    }
    let real = run_scenarios(
        &node,
        json!({"command": "node", "args": args}),
        &site.url,
        None,
    );
    assert_eq!(real["record"], expected_record(), "{real}");
    site.clear();

    let binary = env!("CARGO_BIN_EXE_countersign-mcp");
    let auto = site.config(AUTO_RULE);
    let by_rule = run_scenarios(
        &node,
        json!({"command": binary, "args": ["--stdio", "--config", auto.path()]}),
        &site.url,
        None,
    );
    assert_eq!(by_rule["record"], expected_record(), "{by_rule}");
    assert_eq!(by_rule["progress"], 0, "nobody waits for a rule");
    site.clear();

    let person = site.config("");
    let by_person = run_scenarios(
        &node,
        json!({"command": binary, "args": ["--stdio", "--config", person.path()]}),
        &site.url,
        Some(APPROVER_TOKEN),
    );
    assert_eq!(by_person["record"], expected_record(), "{by_person}");
    // Eleven state-changing calls, each approved once, from its
    // notification.
    assert_eq!(by_person["approved"], 11, "{by_person}");

    for ours in [&by_rule, &by_person] {
        let outcomes = |report: &Value| -> Vec<(String, bool)> {
            report["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| (s["step"].as_str().unwrap().to_owned(), s["isError"] == true))
                .collect()
        };
        assert_eq!(outcomes(ours), outcomes(&real), "{ours}\n{real}");
        // The same words, each naming the ref its own server gave.
        let stale = |report: &Value| {
            let error = report["steps"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["step"] == "stale ref")
                .unwrap()["error"]
                .as_str()
                .unwrap()
                .to_owned();
            error.replace(report["stale_ref"].as_str().unwrap(), "<ref>")
        };
        assert_eq!(stale(ours), stale(&real));
        assert_eq!(ours["found"], real["found"]);
        assert_eq!(ours["tabs"], 1);
        for tool in ours["tools"].as_array().unwrap() {
            let theirs = real["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == tool["name"])
                .unwrap_or_else(|| panic!("{tool} is not Playwright's"));
            assert_eq!(theirs["required"], tool["required"], "{}", tool["name"]);
        }
    }
}

/// A call waiting for a person that its client cancels performs nothing,
/// then or after the person approves; the same call made again performs
/// it once, with the approval already given.
#[test]
fn a_cancelled_wait_performs_nothing_until_the_call_is_made_again() {
    let Some(node) = support::npm_package(
        "tests/node",
        "node_modules/@modelcontextprotocol/sdk",
        "TypeScript MCP SDK",
    ) else {
        return;
    };
    chromium().expect("chromium on PATH (cargo xtask ci installs it)");
    let site = Site::serve();
    let person = site.config("");
    let output = Command::new("node")
        .current_dir(&node)
        .arg("playwright_cancel.mjs")
        .arg(env!("CARGO_BIN_EXE_countersign-mcp"))
        .arg(person.path())
        .arg(&site.url)
        .arg(APPROVER_TOKEN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    // The SDK rejects the aborted request with its own error.
    assert_eq!(report["cancelled_call"], "rejected: McpError", "{report}");
    assert_eq!(report["link"], true);
    assert_eq!(report["after_cancel"], json!([]), "{report}");
    assert_eq!(report["retry_error"], false, "{report}");
    assert_eq!(report["retry_decided_by"], "person");
    // Exactly one click: had the cancelled wait acted (at any time), the
    // retry would have found the grant used and asked again, or the site
    // would count two.
    assert_eq!(report["after_retry"], json!(["click"]), "{report}");
}
