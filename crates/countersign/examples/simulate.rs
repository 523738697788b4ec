//! The seed walkthrough, offline: one host-approved click performed by the
//! fake backend, then the refusals a model meets.
//!
//! ```text
//! cargo run --example simulate
//! ```
//!
//! Prints `ok` and the approval id, then one line per refused call, then
//! how many actions the fake backend recorded (exactly the one that was
//! approved) and how many operation records were written (one per call).

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use countersign::prelude::*;
use countersign::serde_json::{Value, json};

/// `ok`, or the error code of a refused call.
fn outcome(result: &Value) -> String {
    result["error"]["code"]
        .as_str()
        .or_else(|| result["status"].as_str())
        .unwrap_or("no status")
        .to_owned()
}

/// Runs the scenario and returns the lines `main` prints.
pub async fn scenario() -> Result<Vec<String>, Box<dyn Error>> {
    let mut lines = Vec::new();

    // The host's side: a policy for one host, answered offline; in-memory
    // stores; the fake backend; a clock the scenario can move.
    let policy = Policy::builder()
        .allow_host("docs.example.com")
        .resolver(StaticResolver::answering_all(["93.184.216.34".parse()?]))
        .build()?;
    let approvals = Arc::new(InMemoryApprovalStore::new());
    let operations = Arc::new(InMemoryOperationStore::new());
    let backend = FakeBackend::new();
    let clock = ManualClock::new(SystemClock.now());
    let context = Context::builder()
        .actor_id(ActorId::new("demo-actor")?)
        .run_id(RunId::new("demo-run")?)
        .backend(backend.clone())
        .source_policy(policy)
        .operation_store(operations.clone())
        .approval_store(approvals.clone())
        .clock(clock.clone())
        .build()?;

    // The host approves exactly one click, for its own actor and run.
    let url = context
        .source_policy()
        .authorize_destination("https://docs.example.com/")
        .await?;
    let click = json!({"method": "click", "selector": "a#docs"});
    let action = context.source_policy().authorize_action(&click)?;
    let approval = Approval::for_action(
        context.actor_id().clone(),
        context.run_id().clone(),
        &url,
        &action,
        Duration::from_secs(60),
        context.now(),
    )?;
    approvals.issue(approval.clone()).await?;

    // Act is opt-in: the host enables it for this context.
    let mut tools = Toolset::new(context.clone());
    let act = tools.enable_act();

    // The model's tool call, as JSON.
    let call = |url: &str, approval_id: &str| json!({"url": url, "approval_id": approval_id, "method": "click", "selector": "a#docs"});
    let result = act
        .execute_json(&call(url.as_str(), approval.id.as_str()))
        .await;
    lines.push(outcome(&result));
    lines.push(
        result["locator"]["approval_id"]
            .as_str()
            .unwrap_or("no approval id")
            .to_owned(),
    );

    // The same call again: the grant is used up.
    let replay = act
        .execute_json(&call(url.as_str(), approval.id.as_str()))
        .await;
    lines.push(format!("replay: {}", outcome(&replay)));

    // An id the host never issued.
    let unknown = ApprovalId::generate()?;
    let result = act
        .execute_json(&call(url.as_str(), unknown.as_str()))
        .await;
    lines.push(format!("unknown id: {}", outcome(&result)));

    // A host the policy does not allow.
    let result = act
        .execute_json(&call("https://evil.example.net/", approval.id.as_str()))
        .await;
    lines.push(format!("another host: {}", outcome(&result)));

    // A grant the host revoked before use.
    let revoked = issue_grant(&context, url.as_str(), &click, Duration::from_secs(60)).await?;
    approvals.revoke(&revoked.id).await?;
    let result = act
        .execute_json(&call(url.as_str(), revoked.id.as_str()))
        .await;
    lines.push(format!("revoked: {}", outcome(&result)));

    // A grant past its expiry.
    let expiring = issue_grant(&context, url.as_str(), &click, Duration::from_secs(60)).await?;
    clock.advance(Duration::from_secs(61));
    let result = act
        .execute_json(&call(url.as_str(), expiring.id.as_str()))
        .await;
    lines.push(format!("expired: {}", outcome(&result)));

    lines.push(format!("fake backend records: {}", backend.len()));
    lines.push(format!("operation records: {}", operations.len()?));
    Ok(lines)
}

fn main() -> Result<(), Box<dyn Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for line in runtime.block_on(scenario())? {
        println!("{line}");
    }
    Ok(())
}
