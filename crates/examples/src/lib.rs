//! The countersign examples that need a browser or a web server, in a
//! package of their own so that the facade's `simulate` example builds
//! without the DevTools client, the egress guard, axum and their
//! dependencies. The examples are the content:
//!
//! ```text
//! cargo run --example live      # headless Chromium, offline
//! cargo run --example browse    # the model's eyes on headless Chromium, approved on the page
//! cargo run --example approve   # the approval page, a person approves
//! ```
//!
//! They run from the workspace root as written; `-p countersign-examples`
//! names the package explicitly. The package is never published. This
//! library holds what two examples share: the demo's stand-in for the
//! host's authentication ([`DemoSession`], [`sign_in_route`]) and what a
//! person's browser does on the approval page ([`approve_through_the_page`]).

use std::error::Error;

use axum::Router;
use axum::body::Body;
use axum::extract::Path;
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use countersign::approval::ApproverId;
use countersign::serde_json::Value;
use countersign_approval_web::{Approvers, Parts, TokenApprovers, async_trait};
use tower::ServiceExt;

/// The session cookie the sign-in link sets.
pub const COOKIE: &str = "countersign-demo-session";
/// Who the demo's one signed-in person is.
pub const APPROVER: &str = "demo-approver";

/// The demo's authentication: whoever holds the session secret (from the
/// one-time sign-in link) is [`APPROVER`].
pub struct DemoSession {
    /// The secret the sign-in link carries.
    pub secret: String,
}

impl DemoSession {
    /// The demo's sign-in as the approval pages' ready token approvers:
    /// the session secret, in [`COOKIE`] (never as a bearer token), is
    /// [`APPROVER`].
    fn approvers(&self) -> Option<TokenApprovers> {
        let approver = ApproverId::new(APPROVER).ok()?;
        Some(
            TokenApprovers::new()
                .cookie_name(COOKIE)
                .without_bearer()
                .with(self.secret.clone(), approver),
        )
    }
}

#[async_trait]
impl Approvers for DemoSession {
    async fn approver(&self, request: &Parts) -> Option<ApproverId> {
        self.approvers()?.approver(request).await
    }
}

/// The host's own route: a valid sign-in link sets the session cookie and
/// sends the browser to the proposal.
pub fn sign_in_route(secret: String, landing: String) -> Router {
    let approvers = DemoSession { secret }.approvers();
    Router::new().route(
        "/sign-in/{secret}",
        get(move |Path(given): Path<String>| {
            let (approvers, landing) = (approvers.clone(), landing.clone());
            async move {
                let Some(approvers) =
                    approvers.filter(|approvers| approvers.approver_for(&given).is_some())
                else {
                    return (StatusCode::FORBIDDEN, "this sign-in link is not valid")
                        .into_response();
                };
                Response::builder()
                    .status(StatusCode::SEE_OTHER)
                    .header(header::LOCATION, landing)
                    .header(header::SET_COOKIE, approvers.session_cookie(&given))
                    .body(Body::empty())
                    .unwrap_or_default()
            }
        }),
    )
}

/// What a person's browser does: sign in, open the proposal, press
/// Approve (a same-origin form post carrying the form's token).
pub async fn approve_through_the_page(
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

/// `ok`, or the error code of a refused call: one word per tool answer,
/// for the examples' printed lines.
pub fn outcome(result: &Value) -> String {
    result["error"]["code"]
        .as_str()
        .or_else(|| result["status"].as_str())
        .unwrap_or("no status")
        .to_owned()
}
