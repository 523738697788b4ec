//! `--demo`: a site on loopback with one button, and the configuration
//! that serves it, the approval pages and the MCP endpoint with fresh
//! tokens.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::Html;
use axum::routing::get;
use clap::ValueEnum;
use countersign_approval_core::ApprovalId;
use countersign_backend_chromium::running_as_root;
use countersign_mcp::http::MCP_PATH;

use crate::config::{self, Config};

/// What `--demo` acts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DemoBackend {
    /// The fake backend, showing a model of the demo page.
    Fake,
    /// Headless Chromium behind the egress guard.
    Chromium,
}

/// What the demo prints.
pub(crate) struct Demo {
    site: String,
    client_token: String,
    approver_token: String,
}

impl Demo {
    pub(crate) fn instructions(&self, public: &str) -> Vec<String> {
        vec![
            format!("demo site: {}", self.site),
            format!("demo site clicks: {}clicks", self.site),
            format!("approver sign-in: {public}/sign-in/{}", self.approver_token),
            format!("MCP bearer token: {}", self.client_token),
            "connect (Claude Code):".to_owned(),
            format!(
                "  claude mcp add --transport http countersign {public}{MCP_PATH} --header \"Authorization: Bearer {}\"",
                self.client_token
            ),
            format!(
                "then ask the agent to open {} and press the `count` button; open the approval_url it shows after signing in above (or add `?next=/approvals/proposals/<id>` to the sign-in link)",
                self.site
            ),
            "press Ctrl-C to stop".to_owned(),
        ]
    }
}

/// A random secret (128 bits from the OS).
fn secret() -> Result<String, String> {
    ApprovalId::generate()
        .map(|id| id.as_str().trim_start_matches("apr_").to_owned())
        .map_err(|e| format!("no randomness: {e}"))
}

/// The demo site's page: a button that counts the clicks a person (or
/// the browser's input events) makes, in the page, its title and at the
/// site's `/clicks`. A script's synthetic click counts nothing.
const DEMO_PAGE: &str = r#"<!doctype html><title>countersign demo</title>
<h1>countersign demo</h1>
<p>Clicks so far: <output id="clicks">0</output></p>
<button id="count">count</button>
<script>
  let clicks = 0;
  document.getElementById("count").addEventListener("click", (event) => {
    if (!event.isTrusted) return;
    clicks += 1;
    document.getElementById("clicks").textContent = String(clicks);
    document.title = "countersign demo: " + clicks + (clicks === 1 ? " click" : " clicks");
    fetch("/clicks", { method: "POST" });
  });
</script>"#;

/// A long page of the demo site whose one button sits 2,500 px down, out
/// of the first view, and counts at `/clicks` as the first page's does: a
/// proposal scrolls it into view for its snapshot, as the act does.
const LONG_PAGE: &str = r#"<!doctype html><title>countersign demo: a long page</title>
<h1>A long page</h1>
<div style="height: 2500px">The button is further down.</div>
<button id="far">count far down</button>
<script>
  document.getElementById("far").addEventListener("click", (event) => {
    if (!event.isTrusted) return;
    document.title = "countersign demo: counted far down";
    fetch("/clicks", { method: "POST" });
  });
</script>"#;

/// The demo's site and configuration. The site is on 127.0.0.2 where the
/// system has it (Linux), so it has an address of its own that the policy
/// can allow alone, else on 127.0.0.1 (macOS); its port is the only one
/// allowed either way, so the approval pages and the MCP endpoint are never
/// a target. The fake backend shows a model of the same page (title,
/// `button#count`), so the same calls work on either backend.
pub(crate) async fn demo_config(backend: DemoBackend) -> Result<(Config, Demo), String> {
    let listener = match tokio::net::TcpListener::bind(("127.0.0.2", 0)).await {
        Ok(listener) => listener,
        Err(_) => tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| format!("cannot serve the demo site on loopback: {e}"))?,
    };
    let site: SocketAddr = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;
    let (ip, port) = (site.ip(), site.port());
    let clicks = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&clicks);
    let page = Router::new()
        .route("/", get(|| async { Html(DEMO_PAGE) }))
        .route("/long", get(|| async { Html(LONG_PAGE) }))
        .route(
            "/clicks",
            get(move || {
                let clicks = Arc::clone(&clicks);
                async move {
                    let body = serde_json::json!({ "clicks": clicks.load(Ordering::SeqCst) });
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        body.to_string(),
                    )
                }
            })
            .post(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::NO_CONTENT }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, page).await });
    let (client_token, approver_token) = (secret()?, secret()?);
    let site_url = format!("http://{site}/");
    let backend_table = match backend {
        DemoBackend::Fake => format!(
            r#"
[[backend.pages]]
url = "{site_url}"
title = "countersign demo"
elements = [
  {{ role = "heading", name = "countersign demo", tag = "h1" }},
  {{ role = "button", name = "count", selector = "button#count", tag = "button" }},
]
"#
        ),
        // Chromium refuses its sandbox as root; the demo runs where the
        // examples run, so it drops the sandbox there as they do.
        DemoBackend::Chromium => format!(
            "\n[backend]\nkind = \"chromium\"\nsandbox = {}\n",
            !running_as_root()
        ),
    };
    let text = format!(
        r#"
[policy]
allow_hosts = ["{ip}"]
schemes = ["http"]
special_use = ["{ip}/32"]
ports = [{port}]

[http]
listen = "127.0.0.1:0"

[stdio]
actor = "demo-agent"
run = "demo-run"

[[tokens]]
token = "{client_token}"
actor = "demo-agent"
run = "demo-run"

[[approvers]]
name = "demo-approver"
token = "{approver_token}"
{backend_table}"#
    );
    let config = config::parse(&text)?;
    Ok((
        config,
        Demo {
            site: site_url,
            client_token,
            approver_token,
        },
    ))
}
