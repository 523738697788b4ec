//! The approvers of the configuration, and the sign-in link that sets
//! their session cookie.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use countersign_approval_core::ApproverId;
use countersign_approval_web::TokenApprovers;

use crate::config::ApproverConfig;

/// The approvers of the configuration: a secret token each, sent as a
/// bearer token or in the cookie the sign-in link sets.
pub(crate) fn config_approvers(config: &[ApproverConfig]) -> Result<TokenApprovers, String> {
    config
        .iter()
        .try_fold(TokenApprovers::new(), |approvers, a| {
            let id = ApproverId::new(a.name.as_str())
                .map_err(|e| format!("the approver `{}` is not usable: {e}", a.name))?;
            if id.is_reserved() {
                return Err(format!(
                    "the approver `{}` is not usable: names that start with `rule:` or `standing:` are kept for rules and standing grants",
                    a.name
                ));
            }
            Ok(approvers.with(a.token.clone(), id))
        })
}

/// Where a sign-in link may send the approver afterwards.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct SignInQuery {
    next: Option<String>,
}

/// A valid sign-in link sets the approver's session cookie, and sends the
/// approver on to `next` when it is a path of the approval pages
/// (`/approvals/…`); anywhere else is not a place the link can send them.
pub(crate) async fn sign_in(
    State(approvers): State<Arc<TokenApprovers>>,
    Path(given): Path<String>,
    Query(query): Query<SignInQuery>,
) -> Response {
    if approvers.approver_for(&given).is_none() {
        return (StatusCode::FORBIDDEN, "this sign-in link is not valid").into_response();
    }
    let next = query.next.filter(|next| approval_path(next));
    let mut response = match &next {
        Some(next) => Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header(header::LOCATION, next.as_str())
            .body(Body::empty())
            .unwrap_or_default(),
        None => Html(
            "<!doctype html><title>signed in</title><p>Signed in. Open the approval link the agent \
             shows you (…/approvals/proposals/…).</p>",
        )
        .into_response(),
    };
    if let Ok(cookie) = approvers.session_cookie(&given).parse() {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// Whether `next` is a path of the approval pages on this origin: no
/// scheme, no other host (`//…`), no way out of `/approvals/`.
fn approval_path(next: &str) -> bool {
    (next == "/approvals" || next.starts_with("/approvals/"))
        && !next.contains("..")
        && !next.contains('\\')
        && next
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/-_.?=&".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approver_named_like_a_rule_is_refused() {
        let approver = |name: &str| ApproverConfig {
            name: name.to_owned(),
            token: "0123456789abcdef".to_owned(),
        };
        assert!(config_approvers(&[approver("alice")]).is_ok());
        assert_eq!(
            config_approvers(&[approver("rule:default.pays")])
                .err()
                .as_deref(),
            Some(
                "the approver `rule:default.pays` is not usable: names that start with `rule:` or `standing:` are kept for rules and standing grants"
            )
        );
    }
}
