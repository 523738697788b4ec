//! The host's side: issuing a grant for exactly the action a call will make.

use std::time::Duration;

use countersign_approval_core::{Approval, ApprovalError, ApproverId, IssueError, PageBinding};
use countersign_canonical_policy::Denial;
use serde_json::Value;

use crate::context::Context;
use crate::navigation::NAVIGATE_METHOD;

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
    /// The page binds no target element for an action that names one, and
    /// the context does not
    /// [accept grants without an element](crate::ContextBuilder::accept_grants_without_element).
    #[error(
        "the page binds no target element for `{method}`; approve from the backend's snapshot of the action (for chromium, `Tab::approval`), or opt in with `accept_grants_without_element`"
    )]
    NoElementBound {
        /// The action's method.
        method: String,
    },
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
    issue_grant_with(context, url, action, ttl, &GrantOptions::default()).await
}

/// What a grant carries beyond its binding: who approved it, a note, its
/// failed-attempt limit and the page it is bound to. All optional; the
/// default is no approver, no note, the default attempt limit and no page.
///
/// ```
/// use countersign_act_tool::GrantOptions;
/// use countersign_act_tool::approval::ApproverId;
///
/// let options = GrantOptions::default()
///     .approved_by(ApproverId::new("user:42")?)
///     .note("checked the amount")
///     .attempt_limit(3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct GrantOptions {
    approver: Option<ApproverId>,
    note: Option<String>,
    attempt_limit: Option<u32>,
    page: Option<PageBinding>,
}

impl GrantOptions {
    /// Records `approver` (from the host's own authentication, never from
    /// the model) as having approved the grant at the context's `now`.
    pub fn approved_by(mut self, approver: ApproverId) -> Self {
        self.approver = Some(approver);
        self
    }

    /// An approver note (at most 1024 bytes, no control characters).
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// Mismatched calls that lock the grant (1 to 100; default 5).
    pub fn attempt_limit(mut self, limit: u32) -> Self {
        self.attempt_limit = Some(limit);
        self
    }

    /// Binds the grant to `page` (see [`issue_page_grant`]).
    pub fn page(mut self, page: PageBinding) -> Self {
        self.page = Some(page);
        self
    }
}

/// As [`issue_grant`], with the approver, note, attempt limit and page of
/// `options`.
pub async fn issue_grant_with(
    context: &Context,
    url: &str,
    action: &Value,
    ttl: Duration,
    options: &GrantOptions,
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
    let mut approval = match &options.page {
        Some(page) => {
            // A page with no element for an action on a target binds the
            // document only: the easy path must not be the unsafe one.
            if page.element.is_none()
                && action.method() != NAVIGATE_METHOD
                && !context.accepts_grants_without_element()
            {
                return Err(GrantError::NoElementBound {
                    method: action.method().to_owned(),
                });
            }
            approval.bound_to_page(page)?
        }
        None => approval,
    };
    if let Some(approver) = &options.approver {
        let approved_at = approval.issued_at;
        approval = approval.approved_by(approver.clone(), approved_at)?;
    }
    if let Some(note) = &options.note {
        approval = approval.with_note(note.clone())?;
    }
    if let Some(limit) = options.attempt_limit {
        approval = approval.with_attempt_limit(limit)?;
    }
    store.issue(approval.clone()).await?;
    tracing::info!(
        approval_id = %approval.id,
        actor = %approval.actor_id,
        run = %approval.run_id,
        approver = approval.approver.as_ref().map(|a| a.id.as_str()),
        expires_at = approval.expires_at.as_millis(),
        "approval issued",
    );
    Ok(approval)
}

/// As [`issue_grant`], and binds the grant to `page`: the browser session,
/// tab and document revision the host observed when it approved (a live
/// backend reports them), and the target element the person saw. Act
/// performs the grant only while the backend's current page shows that
/// document; on any other page the call is `APPROVAL_STALE` and the grant
/// stays unused. The backend re-reads the element before each input event
/// and refuses, `APPROVAL_STALE`, if it is no longer what was approved.
///
/// `page` is the backend's [`PageSnapshot`](countersign_approval_core::PageSnapshot) of the action the person
/// approved, as it is (for Chromium, `Tab::approval`), or its
/// [`PageBinding`]. A page without an element (a bare observation, or a
/// snapshot that found no target) is refused for any method but
/// `navigate`, with [`GrantError::NoElementBound`], unless the context
/// [accepts grants without an element](crate::ContextBuilder::accept_grants_without_element).
pub async fn issue_page_grant(
    context: &Context,
    page: &(impl AsRef<PageBinding> + ?Sized),
    url: &str,
    action: &Value,
    ttl: Duration,
) -> Result<Approval, GrantError> {
    issue_grant_with(
        context,
        url,
        action,
        ttl,
        &GrantOptions::default().page(page.as_ref().clone()),
    )
    .await
}
