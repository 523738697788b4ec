//! A person approves what a model proposed, on the approval page.
//!
//! `cargo run --example approve` starts the approval page on loopback; a
//! scripted model proposes one click; the program prints a sign-in link
//! and waits. Open it in a browser, look at exactly what the grant would
//! bind, and press Approve: the model learns the decision and acts, once.
//! Deny, or let the proposal expire, and it does not.
//!
//! `cargo run --example approve -- --auto-approve` does the same without a
//! person: the program signs in and presses Approve through the page
//! itself (the same GET and POST a browser sends).
//!
//! The host's authentication here is a one-time sign-in link that sets a
//! session cookie: the approval page keeps no users of its own, it asks the
//! host's `Approvers` who is looking.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use countersign::act::{Context, Toolset};
use countersign::approval::{ActorId, ApprovalId, RunId};
use countersign::backend::fake::FakeBackend;
use countersign::policy::{Policy, StaticResolver};
use countersign::store::memory::{InMemoryApprovalStore, InMemoryOperationStore};
use countersign_approval_web::ApprovalPages;
use countersign_examples::{DemoSession, approve_through_the_page, sign_in_route};
use serde_json::{Value, json};

/// What the program prints, line by line; `announce` gets the sign-in link
/// as soon as there is one.
pub async fn scenario(
    auto_approve: bool,
    announce: impl Fn(&str),
) -> Result<Vec<String>, Box<dyn Error>> {
    let mut lines = Vec::new();
    let store = Arc::new(InMemoryApprovalStore::new());
    let operations = Arc::new(InMemoryOperationStore::new());
    let backend = FakeBackend::new();
    let policy = Policy::builder()
        .allow_host("docs.example.com")
        .resolver(StaticResolver::answering_all(["93.184.216.34".parse()?]))
        .build()?;
    let context = Context::builder()
        .actor_id(ActorId::new("demo-actor")?)
        .run_id(RunId::new("demo-run")?)
        .backend(backend.clone())
        .source_policy(policy)
        .operation_store(operations.clone())
        .proposal_store(store.clone())
        .proposal_ttl(Duration::from_secs(10 * 60))
        .build()?;
    let model = Toolset::new(context).with_act().with_propose();

    // The scripted model proposes one click.
    let click = json!({
        "url": "https://docs.example.com/",
        "method": "click",
        "selector": "a#docs",
        "description": "open the documentation",
    });
    let proposed = model.call("browser_propose", &click).await?;
    let proposal_id = proposed["proposal_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    lines.push(format!("browser_propose: {}", text(&proposed["status"])));

    // The host mounts the approval pages beside its own sign-in route.
    let secret = ApprovalId::generate()?
        .as_str()
        .trim_start_matches("apr_")
        .to_owned();
    let landing = format!("/approvals/proposals/{proposal_id}");
    let pages = ApprovalPages::builder(
        store.clone(),
        DemoSession {
            secret: secret.clone(),
        },
    )
    .grant_ttl(Duration::from_secs(120))
    .build()?;
    let app = sign_in_route(secret.clone(), landing.clone()).nest("/approvals", pages.router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let server = tokio::spawn(axum::serve(listener, app.clone()).into_future());
    announce(&format!(
        "open http://{address}/sign-in/{secret} to review proposal {proposal_id} (it expires in 10 minutes)"
    ));

    if auto_approve {
        approve_through_the_page(&app, &secret, &landing).await?;
    }

    // The model asks for the decision until there is one.
    let status_call = json!({"proposal_id": proposal_id});
    let status = loop {
        let status = model.call("browser_proposal_status", &status_call).await?;
        if status["status"] != "pending" {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    lines.push(format!(
        "browser_proposal_status: {}",
        text(&status["status"])
    ));
    if status["status"] == "approved" {
        let mut act = click.clone();
        act["approval_id"] = status["approval_id"].clone();
        let first = model.call("browser_act", &act).await?;
        lines.push(format!("browser_act: {}", outcome(&first)));
        let again = model.call("browser_act", &act).await?;
        lines.push(format!("browser_act again: {}", outcome(&again)));
        let record = operations.records()?.into_iter().next();
        let approver = record
            .and_then(|r| r.approver_id)
            .map(|a| a.to_string())
            .unwrap_or_else(|| "nobody".to_owned());
        lines.push(format!("approved by: {approver}"));
    }
    lines.push(format!("clicks performed: {}", backend.len()));
    server.abort();
    Ok(lines)
}

/// A JSON string's text (`?` for anything else).
fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("?")
}

/// `ok`, or the error code.
fn outcome(result: &Value) -> String {
    match result["status"].as_str() {
        Some("ok") => "ok".to_owned(),
        _ => result["error"]["code"].as_str().unwrap_or("?").to_owned(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let auto_approve = std::env::args().skip(1).any(|arg| arg == "--auto-approve");
    let lines = scenario(auto_approve, |line| println!("{line}")).await?;
    for line in lines {
        println!("{line}");
    }
    Ok(())
}
