//! Clients nobody here wrote against the `countersign-mcp` binary, over
//! stdio and Streamable HTTP: the official MCP Python SDK (`mcp` on PyPI)
//! and TypeScript SDK (`@modelcontextprotocol/sdk` on npm). The fake
//! backend (a page model from `[[backend.pages]]`) for the full flow on
//! both transports; headless Chromium behind the egress guard, on the
//! demo's real page, for the Python SDK over HTTP (Chromium must be
//! installed: `chromium` on `PATH`, as CI has it).
//!
//! The Python SDK lives in a virtual environment that `cargo xtask ci`
//! creates (`target/mcp-venv`) and names in `COUNTERSIGN_MCP_PYTHON`; the
//! TypeScript SDK in `tests/node/node_modules`, which `cargo xtask ci`
//! fills with `npm ci` and names in `COUNTERSIGN_MCP_NODE`. Without those
//! variables a test runs when its SDK is there and is skipped (saying so)
//! when it is not; with them, a missing SDK fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use countersign_backend_chromium::running_as_root;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use countersign_act_tool::{Context, ToolFormat, Toolset};
use countersign_approval_core::{ActorId, RunId};
use countersign_backend_fake::FakeBackend;
use countersign_canonical_policy::{Policy, StaticResolver};
use countersign_mcp::McpServer;
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::Value;

const CLIENT_TOKEN: &str = "client-token-0123456789";
const APPROVER_TOKEN: &str = "approver-token-0123456789";

/// The TypeScript SDK's test package, when its modules are installed.
fn node_package() -> Option<PathBuf> {
    support::npm_package(
        "tests/node",
        "node_modules/@modelcontextprotocol/sdk",
        "TypeScript MCP SDK",
    )
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/client.py")
}

/// The page the fake backend shows (the demo page's model).
const SITE: &str = "http://127.0.0.2:9/";

fn config() -> tempfile::NamedTempFile {
    config_with("")
}

/// [`config`] with `extra` tables appended.
fn config_with(extra: &str) -> tempfile::NamedTempFile {
    let text = format!(
        r#"
[[backend.pages]]
url = "{SITE}"
title = "countersign demo"
elements = [
  {{ role = "heading", name = "countersign demo", tag = "h1" }},
  {{ role = "button", name = "count", selector = "button#count", tag = "button" }},
]

[policy]
allow_hosts = ["127.0.0.2"]
schemes = ["http"]
special_use = ["127.0.0.2/32"]

[http]
listen = "127.0.0.1:0"

[stdio]
actor = "py-agent"
run = "py-run"

[[tokens]]
token = "{CLIENT_TOKEN}"
actor = "py-agent"
run = "py-run"

[[approvers]]
name = "py-approver"
token = "{APPROVER_TOKEN}"
{extra}"#
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

/// The tool list the server must publish: the toolset's own definitions
/// under the same policy.
fn expected_tools() -> Value {
    let policy = Policy::builder()
        .allow_host("127.0.0.2")
        .allow_schemes(["http"])
        .allow_special_use("127.0.0.2/32")
        .resolver(StaticResolver::new())
        .build()
        .unwrap();
    let context = Context::builder()
        .actor_id(ActorId::new("py-agent").unwrap())
        .run_id(RunId::new("py-run").unwrap())
        .backend(FakeBackend::new())
        .source_policy(policy)
        .operation_store(InMemoryOperationStore::new())
        .proposal_store(Arc::new(InMemoryApprovalStore::new()))
        .build()
        .unwrap();
    let toolset = Toolset::new(context)
        .with_browse()
        .with_act()
        .with_propose();
    let tools = serde_json::to_value(McpServer::tools(&toolset)).unwrap();
    // Byte for byte: each tool's name, description and input schema are the
    // toolset's JSON Schema definition, serialised the same way.
    let definitions = toolset.definitions_for(ToolFormat::JsonSchema);
    assert_eq!(tools.as_array().unwrap().len(), definitions.len());
    for (tool, definition) in tools.as_array().unwrap().iter().zip(&definitions) {
        assert_eq!(tool["name"], definition.name.as_str());
        assert_eq!(tool["description"], definition.description.as_str());
        assert_eq!(
            serde_json::to_string(&tool["inputSchema"]).unwrap(),
            serde_json::to_string(&definition.parameters).unwrap()
        );
    }
    tools
}

fn run_client(python: &PathBuf, args: &[&str]) -> Value {
    run_script(Command::new(python).arg(script()), args)
}

fn run_node(package: &Path, args: &[&str]) -> Value {
    run_script(
        Command::new("node").current_dir(package).arg("client.mjs"),
        args,
    )
}

fn run_script(command: &mut Command, args: &[&str]) -> Value {
    let output = command.args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the client failed:\n{stdout}\n{stderr}"
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}

/// What both transports must show.
fn check_flow(report: &Value) {
    assert_eq!(
        report["tools"],
        expected_tools(),
        "tools/list differs from the toolset's definitions"
    );
    let annotations = |name: &str| {
        report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["annotations"].clone())
            .unwrap()
    };
    assert_eq!(annotations("browser_act")["destructiveHint"], true);
    assert_eq!(annotations("browser_act")["openWorldHint"], true);
    assert_eq!(annotations("browser_proposal_status")["readOnlyHint"], true);
    assert_eq!(annotations("browser_observe")["readOnlyHint"], true);
    assert_eq!(annotations("browser_navigate")["openWorldHint"], true);
    assert_eq!(report["navigate"], "ok");
    assert_eq!(report["observe"], "ok");
    assert_eq!(
        report["elicited"],
        serde_json::json!([["url", true]]),
        "the client was not asked to open the approval link"
    );
    assert_eq!(report["act_while_pending"], "APPROVAL_REQUIRED");
    assert_eq!(
        report["status_after_accept"], "pending",
        "accepting the elicitation approved something"
    );
    assert_eq!(report["act"], "ok");
    assert_eq!(report["replay"], "APPROVAL_STALE");
    assert_eq!(report["actions"], 1);
    assert_eq!(report["unknown_tool"], -32602);
    assert_eq!(report["missing_arguments"], "NOT_AUTHORIZED");
    assert_eq!(report["no_arguments"], "NOT_AUTHORIZED");
    assert_eq!(report["extra_argument"], "NOT_AUTHORIZED");
    assert_eq!(report["wrong_type"], "NOT_AUTHORIZED");
    assert_eq!(report["huge_selector"], "NOT_AUTHORIZED");
    assert_ne!(report["huge_payload"], "answered");
    assert_eq!(report["after_bad_input"], "approved");
    assert_eq!(report["actions_at_end"], 1);
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        support::stop_gracefully(&mut self.0);
    }
}

#[test]
fn python_sdk_over_stdio() {
    let Some(python) = support::python() else {
        return;
    };
    let config = config();
    let report = run_client(
        &python,
        &[
            "stdio",
            env!("CARGO_BIN_EXE_countersign-mcp"),
            config.path().to_str().unwrap(),
            APPROVER_TOKEN,
            SITE,
        ],
    );
    check_flow(&report);
    assert_eq!(report["title_after_act"], "countersign demo");
}

/// The binary serving `config` over HTTP, and its MCP endpoint.
fn http_server(config: &tempfile::NamedTempFile) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign-mcp"))
        .args(["--config", config.path().to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Server(child);
    let mut lines = BufReader::new(stderr).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| {
            line.strip_prefix("MCP endpoint (Streamable HTTP): ")
                .map(str::to_owned)
        })
        .expect("the server printed no MCP endpoint");
    (server, url)
}

/// What the TypeScript client must see (a shorter flow than Python's).
fn check_node_flow(report: &Value) {
    assert_eq!(
        report["tools"],
        expected_tools(),
        "tools/list differs from the toolset's definitions"
    );
    assert_eq!(report["navigate"], "ok");
    assert_eq!(report["observe"], "ok");
    assert_eq!(report["act_while_pending"], "APPROVAL_REQUIRED");
    assert_eq!(report["act"], "ok");
    assert_eq!(report["replay"], "APPROVAL_STALE");
    assert_eq!(report["unknown_tool"], -32602);
    assert_eq!(report["extra_argument"], "NOT_AUTHORIZED");
    assert_eq!(report["actions"], 1);
}

#[test]
fn typescript_sdk_over_stdio() {
    let Some(package) = node_package() else {
        return;
    };
    let config = config();
    let report = run_node(
        &package,
        &[
            "stdio",
            env!("CARGO_BIN_EXE_countersign-mcp"),
            config.path().to_str().unwrap(),
            APPROVER_TOKEN,
            SITE,
        ],
    );
    check_node_flow(&report);
}

#[test]
fn typescript_sdk_over_streamable_http() {
    let Some(package) = node_package() else {
        return;
    };
    let config = config();
    let (server, url) = http_server(&config);
    let report = run_node(
        &package,
        &["http", &url, CLIENT_TOKEN, APPROVER_TOKEN, SITE],
    );
    drop(server);
    check_node_flow(&report);
    assert_eq!(report["terminated"], "closed");
}

#[test]
fn python_sdk_over_streamable_http() {
    let Some(python) = support::python() else {
        return;
    };
    let config = config();
    let (server, url) = http_server(&config);
    let report = run_client(&python, &["http", &url, CLIENT_TOKEN, APPROVER_TOKEN, SITE]);
    drop(server);
    check_flow(&report);
    assert_eq!(report["title_after_act"], "countersign demo");
    // The SDK closes its session with a DELETE and warns of any answer but
    // 200 and 204.
    assert_eq!(report["transport_warnings"], serde_json::json!([]));
    assert_eq!(report["duplicate_key"], serde_json::json!([400, -32600]));
    assert_eq!(
        report["unauthenticated"],
        serde_json::json!([401, "", 401, ""])
    );
    // 413 and nothing of the SDK's: the server reads (and drops) the rest
    // of the body before it answers, so the answer arrives before a reset.
    assert_eq!(report["huge_body"], 413, "{}", report["huge_body"]);
    let concurrent: Vec<&str> = report["concurrent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(concurrent.len(), 16);
    assert_eq!(
        concurrent.iter().filter(|o| **o == "ok").count(),
        1,
        "{concurrent:?}"
    );
    assert!(
        concurrent
            .iter()
            .filter(|o| **o != "ok")
            .all(|o| *o == "APPROVAL_STALE")
    );
    assert_eq!(report["concurrent_actions"], 1);
}

/// `countersign-mcp --demo --backend …`, and what it printed.
struct Demo {
    server: Server,
    lines: Vec<String>,
    stderr: tempfile::NamedTempFile,
}

impl Drop for Demo {
    fn drop(&mut self) {
        // A failed test shows whether the server was still running, and
        // what it said.
        if std::thread::panicking() {
            eprintln!(
                "the demo server: {:?}\n{}",
                self.server.0.try_wait(),
                std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
            );
        }
    }
}

impl Demo {
    fn start(backend: &str) -> Demo {
        let stderr = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_countersign-mcp"))
            .args(["--demo", "--backend", backend])
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr.reopen().unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let server = Server(child);
        let mut reader = BufReader::new(stdout).lines();
        let lines = reader
            .by_ref()
            .map_while(Result::ok)
            .take_while(|line| !line.starts_with("press Ctrl-C"))
            .collect();
        // Kept open and read to the end: a write to a closed pipe would
        // end the server (or a child of it) in the middle of the test.
        std::thread::spawn(move || reader.for_each(drop));
        Demo {
            server,
            lines,
            stderr,
        }
    }

    fn value(&self, prefix: &str) -> String {
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {:?}", self.lines))
            .trim()
            .to_owned()
    }
}

/// The same flow on real Chromium behind the egress guard, on the demo's
/// page, which counts the clicks it receives itself: one navigate, one
/// observe, a proposal by ref, an accepted elicitation that approves
/// nothing, an approval on the page, one `ok`, one `APPROVAL_STALE`, and
/// exactly one click on the page.
#[test]
fn python_sdk_on_live_chromium() {
    let Some(python) = support::python() else {
        return;
    };
    let demo = Demo::start("chromium");
    assert!(
        demo.lines
            .contains(&"backend: chromium, behind the egress guard".to_owned()),
        "{:?}",
        demo.lines
    );
    let url = demo.value("MCP endpoint (Streamable HTTP): ");
    let token = demo.value("MCP bearer token: ");
    let approver = demo.value("approver sign-in: ");
    let approver = approver.rsplit('/').next().unwrap();
    let site = demo.value("demo site: ");
    let report = run_client(&python, &["live", &url, &token, approver, &site]);
    check_flow(&report);
    assert_eq!(report["title"], "countersign demo");
    assert_eq!(report["title_after_act"], "countersign demo: 1 click");
    // A button 2,500 px down a long page, which the model cannot scroll
    // to: the proposal scrolls it into view, the act clicks it once.
    assert_eq!(report["far_proposed"], "pending");
    assert_eq!(report["far_act"], "ok");
    assert_eq!(report["far_clicks"], 1);
    assert_eq!(report["far_title"], "countersign demo: counted far down");
}

/// A page on 127.0.0.2 whose image comes from a second port of the same
/// address, which the policy does not allow; how often each port was hit.
struct Beacon {
    page: String,
    page_hits: Arc<std::sync::atomic::AtomicUsize>,
    beacon_hits: Arc<std::sync::atomic::AtomicUsize>,
    page_port: u16,
    _runtime: tokio::runtime::Runtime,
}

impl Beacon {
    fn serve() -> Beacon {
        use axum::routing::get;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (page_hits, beacon_hits) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (page_listener, beacon_listener) = runtime.block_on(async {
            (
                tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap(),
                tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap(),
            )
        });
        let page_port = page_listener.local_addr().unwrap().port();
        let beacon_port = beacon_listener.local_addr().unwrap().port();
        let hits = Arc::clone(&page_hits);
        let page = axum::Router::new().route(
            "/",
            get(move || {
                hits.fetch_add(1, Ordering::SeqCst);
                async move {
                    axum::response::Html(format!(
                        "<!doctype html><title>beacon</title><button id=\"count\">count</button>\
                         <img src=\"http://127.0.0.2:{beacon_port}/pixel.png\" alt=\"\">"
                    ))
                }
            }),
        );
        let hits = Arc::clone(&beacon_hits);
        let beacon = axum::Router::new().route(
            "/pixel.png",
            get(move || {
                hits.fetch_add(1, Ordering::SeqCst);
                async { "" }
            }),
        );
        runtime.spawn(async move { axum::serve(page_listener, page).await });
        runtime.spawn(async move { axum::serve(beacon_listener, beacon).await });
        Beacon {
            page: format!("http://127.0.0.2:{page_port}/"),
            page_hits,
            beacon_hits,
            page_port,
            _runtime: runtime,
        }
    }

    fn config(&self, guard: bool) -> tempfile::NamedTempFile {
        let text = format!(
            r#"
[policy]
allow_hosts = ["127.0.0.2"]
schemes = ["http"]
special_use = ["127.0.0.2/32"]
ports = [{port}]

[backend]
kind = "chromium"
guard = {guard}
sandbox = {sandbox}

[http]
listen = "127.0.0.1:0"

[[tokens]]
token = "{CLIENT_TOKEN}"
actor = "py-agent"
run = "py-run"
"#,
            port = self.page_port,
            sandbox = !running_as_root(),
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }
}

/// The binary's Chromium goes through the egress guard built from the
/// policy: a page the policy allows loads, its image from a port the
/// policy does not allow never reaches that port. With `guard = false`
/// (written in the file) the same image is fetched: the guard is what
/// stopped it.
#[test]
fn the_binary_chromium_goes_through_the_egress_guard() {
    use std::sync::atomic::Ordering;
    let Some(python) = support::python() else {
        return;
    };
    let beacon = Beacon::serve();
    for (guard, expected) in [(true, 0), (false, 1)] {
        let config = beacon.config(guard);
        let (server, url) = http_server(&config);
        let before = beacon.page_hits.load(Ordering::SeqCst);
        let report = run_client(&python, &["propose", &url, CLIENT_TOKEN, &beacon.page]);
        drop(server);
        assert_eq!(report["navigate"], "ok");
        assert!(report["approval_url"].as_str().is_some());
        assert_eq!(beacon.page_hits.load(Ordering::SeqCst), before + 1);
        assert_eq!(
            beacon.beacon_hits.load(Ordering::SeqCst),
            expected,
            "guard = {guard}"
        );
    }
}

#[test]
fn a_configured_webhook_hears_of_a_proposal_with_its_link() {
    let Some((receiver, secret_file)) = support::Receiver::with_secret_file() else {
        return;
    };
    let Some(python) = support::python() else {
        return;
    };
    let config = config_with(&format!(
        r#"
[[notify]]
kind = "webhook"
url = "http://127.0.0.1:{}/hooks/countersign"
secret_file = "{}"

[notifications]
expiring_lead_secs = 60
"#,
        receiver.port,
        secret_file.path().display()
    ));
    let (server, url) = http_server(&config);
    let report = run_client(&python, &["propose", &url, CLIENT_TOKEN, SITE]);
    let line = receiver
        .lines
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the webhook heard nothing");
    drop(server);
    let got: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(got["verified"], true, "{got}");
    let data = &got["payload"]["data"];
    assert_eq!(got["payload"]["type"], "proposal.created");
    assert_eq!(data["approval_url"], report["approval_url"]);
    assert_eq!(
        data["summary"]["sentence"],
        "py-agent wants to click the button “count” on 127.0.0.2:9"
    );
    assert_eq!(data["actor_id"], "py-agent");
    assert_eq!(got["id"], data["event_id"]);
}

/// One proposal through the Python SDK's high-level `Client`, as a new user
/// would make it, with `mode` (`auto` negotiates 2026-07-28, `legacy`
/// 2025-11-25) over `transport`: the client that declared URL-mode
/// elicitation is offered the approval link exactly once, its `accept`
/// approves nothing, and the run holds exactly the one proposal (on
/// 2026-07-28 the SDK's retry after the `input_required` result makes no
/// second one).
fn elicit_once(mode: &str, transport: &str) {
    let Some(python) = support::python() else {
        return;
    };
    let config = config();
    // Kept running until the client is done.
    let server = (transport == "http").then(|| http_server(&config));
    let mut args = vec!["elicit", mode, transport];
    match &server {
        Some((_, url)) => args.extend([url.as_str(), CLIENT_TOKEN]),
        None => args.extend([
            env!("CARGO_BIN_EXE_countersign-mcp"),
            config.path().to_str().unwrap(),
        ]),
    }
    args.extend([APPROVER_TOKEN, SITE]);
    let report = run_client(&python, &args);
    let version = if mode == "auto" {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    assert_eq!(report["protocol_version"], version, "{report}");
    assert_eq!(report["proposed"], "pending", "{report}");
    assert_eq!(
        report["elicited"],
        serde_json::json!([["url", true]]),
        "{report}"
    );
    assert_eq!(report["status_after_accept"], "pending", "{report}");
    assert_eq!(report["proposal_count"], 1, "{report}");
    assert_eq!(report["proposals"], true, "{report}");
    if mode == "auto" {
        // Invalid params: the request state is not one this server gave.
        assert_eq!(report["forged_state"], -32602, "{report}");
    }
}

#[test]
fn the_link_is_elicited_once_on_2026_07_28_over_stdio() {
    elicit_once("auto", "stdio");
}

#[test]
fn the_link_is_elicited_once_on_2026_07_28_over_http() {
    elicit_once("auto", "http");
}

#[test]
fn the_link_is_elicited_once_on_2025_11_25_over_stdio() {
    elicit_once("legacy", "stdio");
}

#[test]
fn the_link_is_elicited_once_on_2025_11_25_over_http() {
    elicit_once("legacy", "http");
}
