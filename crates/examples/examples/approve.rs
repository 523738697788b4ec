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

use axum::Router;
use axum::body::Body;
use axum::extract::Path;
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use countersign::act::{Context, Toolset};
use countersign::approval::{ActorId, ApprovalId, ApproverId, RunId};
use countersign::backend::fake::FakeBackend;
use countersign::policy::{Policy, StaticResolver};
use countersign::store::memory::{InMemoryApprovalStore, InMemoryOperationStore};
use countersign_approval_web::{ApprovalPages, Approvers, Parts, async_trait};
use serde_json::{Value, json};
use tower::ServiceExt;

/// The session cookie the sign-in link sets.
const COOKIE: &str = "countersign-demo-session";
/// Who the demo's one signed-in person is.
const APPROVER: &str = "demo-approver";

/// The demo's authentication: whoever holds the session secret (from the
/// one-time sign-in link) is [`APPROVER`].
struct DemoSession {
    secret: String,
}

/// Compares without an early exit, so the time taken says nothing of how
/// much of a guess matched.
fn same_secret(given: &str, secret: &str) -> bool {
    given.len() == secret.len()
        && given
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

#[async_trait]
impl Approvers for DemoSession {
    async fn approver(&self, request: &Parts) -> Option<ApproverId> {
        let cookies = request.headers.get(header::COOKIE)?.to_str().ok()?;
        let given = cookies
            .split(';')
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == COOKIE)
            .map(|(_, value)| value)?;
        if same_secret(given, &self.secret) {
            ApproverId::new(APPROVER).ok()
        } else {
            None
        }
    }
}

/// The host's own route: a valid sign-in link sets the session cookie and
/// sends the browser to the proposal.
fn sign_in_route(secret: String, landing: String) -> Router {
    Router::new().route(
        "/sign-in/{secret}",
        get(move |Path(given): Path<String>| {
            let (secret, landing) = (secret.clone(), landing.clone());
            async move {
                if !same_secret(&given, &secret) {
                    return (StatusCode::FORBIDDEN, "this sign-in link is not valid")
                        .into_response();
                }
                Response::builder()
                    .status(StatusCode::SEE_OTHER)
                    .header(header::LOCATION, landing)
                    .header(
                        header::SET_COOKIE,
                        format!("{COOKIE}={secret}; HttpOnly; SameSite=Strict; Path=/"),
                    )
                    .body(Body::empty())
                    .unwrap_or_default()
            }
        }),
    )
}

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

/// What a person's browser does: sign in, open the proposal, press
/// Approve (a same-origin form post carrying the form's token).
async fn approve_through_the_page(
    app: &Router,
    secret: &str,
    landing: &str,
) -> Result<(), Box<dyn Error>> {
    let cookie = format!("{COOKIE}={secret}");
    let page = app
        .clone()
        .oneshot(
            Request::get(landing)
                .header(header::COOKIE, &cookie)
                .body(Body::empty())?,
        )
        .await?;
    let html = axum::body::to_bytes(page.into_body(), 1 << 20).await?;
    let html = String::from_utf8_lossy(&html);
    // The first form on the page is Approve; its token is the first one.
    let form = html
        .split("class=\"approve\"")
        .nth(1)
        .ok_or("the proposal page has no approve form")?;
    let action = attribute_before(&html, "class=\"approve\"", "action=\"")
        .ok_or("the approve form has no action")?;
    let token = form
        .split("name=\"token\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .ok_or("the approve form has no token")?;
    let posted = app
        .clone()
        .oneshot(
            Request::post(action.replace("&amp;", "&"))
                .header(header::COOKIE, &cookie)
                .header("sec-fetch-site", "same-origin")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(format!("token={token}&note=")))?,
        )
        .await?;
    if posted.status() != StatusCode::SEE_OTHER {
        return Err(format!("approving answered {}", posted.status()).into());
    }
    Ok(())
}

/// The value of the attribute starting with `prefix` in the tag that holds
/// `marker`.
fn attribute_before<'a>(html: &'a str, marker: &str, prefix: &str) -> Option<&'a str> {
    let at = html.find(marker)?;
    let tag_start = html[..at].rfind('<')?;
    let tag = &html[tag_start..at];
    let value = tag.split(prefix).nth(1)?;
    value.split('"').next()
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
