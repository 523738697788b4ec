//! The live walkthrough, offline: a page served on 127.0.0.2, headless
//! Chromium behind an in-process egress guard, one click approved from the
//! tab's snapshot of it (the page the browser shows and the button on it)
//! and performed through Act, then a replay and a reload refused.
//!
//! ```text
//! cargo run --example live
//! ```
//!
//! Needs Chromium at `/usr/bin/chromium` (Debian's `chromium` package), or
//! the binary named by `COUNTERSIGN_CHROMIUM`.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use countersign::prelude::*;
use countersign::serde_json::json;
use countersign_backend_chromium::running_as_root;
use countersign_backend_chromium::{Chromium, ChromiumOptions, DEFAULT_EXECUTABLE, Tab};
use countersign_egress_guard::EgressGuard;
use countersign_examples::outcome;

/// A button that counts the clicks a user makes (trusted events only).
const PAGE: &str = r#"<!doctype html>
<button id="count">count</button> <output id="clicks">0</output>
<script>
  const clicks = document.getElementById("clicks");
  document.getElementById("count").addEventListener("click", (e) => {
    if (e.isTrusted) clicks.textContent = String(Number(clicks.textContent) + 1);
  });
</script>"#;

async fn clicks_on_the_page(tab: &Tab) -> Result<String, Box<dyn Error>> {
    let text = tab
        .inspect("function () { return document.getElementById('clicks').textContent; }")
        .await?;
    Ok(text.as_str().unwrap_or("?").to_owned())
}

/// Runs the walkthrough and returns the lines it prints (the `live_output`
/// test checks them).
pub async fn scenario() -> Result<Vec<String>, Box<dyn Error>> {
    let mut lines = Vec::new();

    // The site, on a loopback address of its own.
    let listener = tokio::net::TcpListener::bind(("127.0.0.2", 0)).await?;
    let site = format!("http://{}/", listener.local_addr()?);
    let app = Router::new().route("/", get(|| async { Html(PAGE) }));
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The host's policy allows exactly that address, and the browser
    // reaches the network only through a guard applying the same policy.
    let policy = Policy::builder()
        .allow_host("127.0.0.2")
        .allow_schemes(["http"])
        .allow_special_use("127.0.0.2/32")
        .resolver(StaticResolver::new())
        .build()?;
    let guard = EgressGuard::bind(policy.clone(), "127.0.0.1:0".parse()?).await?;
    let executable =
        std::env::var("COUNTERSIGN_CHROMIUM").unwrap_or_else(|_| DEFAULT_EXECUTABLE.to_owned());
    let mut options = ChromiumOptions::new()
        .executable(executable)
        .egress_proxy(format!("http://{}", guard.local_addr()));
    if running_as_root() {
        options = options.no_sandbox();
    }
    let chromium = Chromium::launch(options).await?;
    let session = chromium.new_session(policy.clone()).await?;
    let tab = session
        .open(&policy.authorize_destination(&site).await?)
        .await?;
    lines.push(format!(
        "clicks on the page: {}",
        clicks_on_the_page(&tab).await?
    ));

    let approvals = Arc::new(InMemoryApprovalStore::new());
    let context = Context::builder()
        .actor_id(ActorId::new("demo-actor")?)
        .run_id(RunId::new("demo-run")?)
        .backend(tab.backend())
        .source_policy(policy.clone())
        .operation_store(InMemoryOperationStore::new())
        .approval_store(approvals.clone())
        .build()?;
    let act = Toolset::new(context.clone()).enable_act().clone();

    // The host shows a person the proposed click as the page stands (the
    // picture, and the button as the browser names it) and, once they
    // approve, issues a grant from that snapshot: bound to this document
    // and to the button they saw.
    let url = policy.authorize_destination(&site).await?;
    let click = json!({"method": "click", "selector": "#count"});
    let action = policy.authorize_action(&click)?;
    let snapshot = tab.approval(&url, &action).await?;
    let grant =
        issue_page_grant(&context, &snapshot, &site, &click, Duration::from_secs(60)).await?;
    let call = json!({"url": site, "approval_id": grant.id.as_str(), "method": "click", "selector": "#count"});

    lines.push(format!(
        "click: {}",
        outcome(&act.execute_json(&call).await)
    ));
    lines.push(format!(
        "clicks on the page: {}",
        clicks_on_the_page(&tab).await?
    ));
    lines.push(format!(
        "replay: {}",
        outcome(&act.execute_json(&call).await)
    ));

    // A second approval, then the page reloads before the model acts.
    let snapshot = tab.approval(&url, &action).await?;
    let grant =
        issue_page_grant(&context, &snapshot, &site, &click, Duration::from_secs(60)).await?;
    tab.navigate(&url).await?;
    let call = json!({"url": site, "approval_id": grant.id.as_str(), "method": "click", "selector": "#count"});
    lines.push(format!(
        "after a reload: {}",
        outcome(&act.execute_json(&call).await)
    ));
    let unused = approvals
        .get(&grant.id)
        .await?
        .is_some_and(|g| g.state == GrantState::Active);
    lines.push(format!("that approval still unused: {unused}"));
    lines.push(format!(
        "clicks on the reloaded page: {}",
        clicks_on_the_page(&tab).await?
    ));

    chromium.close().await?;
    Ok(lines)
}

fn main() -> Result<(), Box<dyn Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for line in runtime.block_on(scenario())? {
        println!("{line}");
    }
    Ok(())
}
