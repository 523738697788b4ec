//! The host's side: issuing a grant for exactly the action a call will make.

use std::time::Duration;

use countersign_approval_core::{Approval, ApprovalError, IssueError, PageBinding};
use countersign_canonical_policy::Denial;
use serde_json::Value;

use crate::Context;

/// [`issue_grant`] failed; no grant was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    /// The context has no approval store.
    #[error("no approval store is configured")]
    NoApprovalStore,
    /// The policy refused the URL or the action.
    #[error("policy refused the grant: {0}")]
    Denied(#[from] Denial),
    /// The grant could not be built (bad ttl, no randomness).
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// The store refused or failed.
    #[error(transparent)]
    Issue(#[from] IssueError),
}

/// Authorises `url` and `action` with the context's policy and issues a
/// grant for them, for the context's actor and run, valid from
/// `context.now()` for `ttl` (more than zero, at most 24 hours).
///
/// `action` is the JSON object a call will carry: `method`, `selector`,
/// optional `description` and `arguments`. The grant binds their canonical
/// form, so the model's call must canonicalise to the same action.
pub async fn issue_grant(
    context: &Context,
    url: &str,
    action: &Value,
    ttl: Duration,
) -> Result<Approval, GrantError> {
    issue(context, url, action, ttl, None).await
}

/// As [`issue_grant`], and binds the grant to `page`: the browser session,
/// tab and document revision the host observed when it approved (a live
/// backend reports them). Act performs the grant only while the backend's
/// current page is that page; on any other page the call is
/// `APPROVAL_STALE` and the grant stays unused.
pub async fn issue_page_grant(
    context: &Context,
    page: &PageBinding,
    url: &str,
    action: &Value,
    ttl: Duration,
) -> Result<Approval, GrantError> {
    issue(context, url, action, ttl, Some(page)).await
}

async fn issue(
    context: &Context,
    url: &str,
    action: &Value,
    ttl: Duration,
    page: Option<&PageBinding>,
) -> Result<Approval, GrantError> {
    let store = context
        .approval_store()
        .ok_or(GrantError::NoApprovalStore)?;
    let policy = context.source_policy();
    let url = policy.authorize_destination(url).await?;
    let action = policy.authorize_action(action)?;
    let approval = Approval::for_action(
        context.actor_id().clone(),
        context.run_id().clone(),
        &url,
        &action,
        ttl,
        context.now(),
    )?;
    let approval = match page {
        Some(page) => approval.bound_to_page(page)?,
        None => approval,
    };
    store.issue(approval.clone()).await?;
    tracing::info!(
        approval_id = %approval.id,
        actor = %approval.actor_id,
        run = %approval.run_id,
        expires_at = approval.expires_at.as_millis(),
        "approval issued",
    );
    Ok(approval)
}
