//! Who is looking: the host's authentication, asked on every request.

use async_trait::async_trait;
use axum::http::request::Parts;
use countersign_approval_core::{ActorId, ApproverId, RunId};

/// The host's authentication of the people (or systems) who decide
/// proposals. The pages keep no users, passwords or sessions of their own:
/// every request is passed to [`approver`](Approvers::approver), and
/// whoever it names is the [`ApproverId`] recorded in the grant
/// ([`Approval::approver`](countersign_approval_core::Approval::approver))
/// and in the proposal's decision.
///
/// Implement it over whatever the host already uses: a session cookie, a
/// header set by an authenticating reverse proxy, a bearer token. The
/// request's method, URI, headers and extensions are in `request` (an
/// extension a host middleware inserted is a good way to hand over a user
/// the host already looked up).
///
/// ```
/// use countersign_approval_core::ApproverId;
/// use countersign_approval_web::{Approvers, Parts, async_trait};
///
/// /// Trusts the user name an authenticating proxy put in `x-user`.
/// struct ProxyUser;
///
/// #[async_trait]
/// impl Approvers for ProxyUser {
///     async fn approver(&self, request: &Parts) -> Option<ApproverId> {
///         let name = request.headers.get("x-user")?.to_str().ok()?;
///         ApproverId::new(format!("user:{name}")).ok()
///     }
/// }
/// ```
#[async_trait]
pub trait Approvers: Send + Sync {
    /// Who sent `request`, or `None` when it is not authenticated (the page
    /// then answers `401` and shows nothing).
    async fn approver(&self, request: &Parts) -> Option<ApproverId>;

    /// Whether `approver` may see and decide the proposals of `run` of
    /// `actor`, and stop that run. Asked on every page of a run or of one
    /// of its proposals, before anything of it is shown or changed; `false`
    /// answers `403` (for a proposal, one that names nothing of it: not its
    /// run, actor or action).
    ///
    /// The default lets every authenticated approver review every run:
    /// override it when approvers may only decide for some actors or runs.
    async fn may_review(&self, approver: &ApproverId, actor: &ActorId, run: &RunId) -> bool {
        let _ = (approver, actor, run);
        true
    }
}

#[async_trait]
impl<A: Approvers + ?Sized> Approvers for std::sync::Arc<A> {
    async fn approver(&self, request: &Parts) -> Option<ApproverId> {
        (**self).approver(request).await
    }

    async fn may_review(&self, approver: &ApproverId, actor: &ActorId, run: &RunId) -> bool {
        (**self).may_review(approver, actor, run).await
    }
}
