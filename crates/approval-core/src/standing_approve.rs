//! A person's "approve up to N times until T" on a pending proposal: the
//! standing grant and the proposal's own approval, in that order.

use std::time::Duration;

use crate::{
    grant::Approver, standing::StandingError, standing::StandingGrant, standing::StandingScope,
    time::Timestamp,
};

/// [`approve_standing`] failed before or while deciding; nothing is
/// usable that was not before.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StandingApproveError {
    /// No pending proposal has this id in the store.
    #[error("no such proposal")]
    UnknownProposal,
    /// The proposal bound no element: a standing grant covers element
    /// facts, never a guess.
    #[error("a standing approval needs a proposal bound to an element")]
    NoElement,
    /// The uses, the lifetime or the scope are out of bounds.
    #[error(transparent)]
    Invalid(#[from] StandingError),
    /// The grant for the proposal could not be made.
    #[error("the grant could not be made: {0}")]
    Grant(#[from] crate::grant::ApprovalError),
    /// Issuing the standing grant failed (a stopped run, the store).
    #[error(transparent)]
    Issue(#[from] crate::store::IssueError),
    /// Approving the proposal failed.
    #[error(transparent)]
    Approve(#[from] crate::proposal::ApproveError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store_error::StoreError),
}

/// What a person's "approve up to N times until T" decides: the proposal's
/// outcome and, when it was approved, the standing grant that approved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingApproval {
    /// The proposal's decision.
    pub outcome: crate::proposal::DecisionOutcome,
    /// The standing grant, when the proposal was approved.
    pub standing: Option<StandingGrant>,
}

/// Approves the pending proposal `id` for up to `uses` acts in its scope
/// until `now + ttl`: issues the standing grant (approved by `approver`),
/// then approves the proposal itself with a grant approved by
/// `standing:<id>`, so that its own act takes the first of the `uses`.
/// The proposal's grant lasts `grant_ttl`, never past the standing grant.
///
/// When the proposal cannot be approved (decided, expired, stopped), the
/// standing grant is revoked before the answer, so it never covers
/// anything.
pub async fn approve_standing(
    store: &dyn crate::store::ProposalStore,
    id: &crate::ids::ProposalId,
    uses: u32,
    ttl: Duration,
    grant_ttl: Duration,
    approver: Approver,
    now: Timestamp,
) -> Result<StandingApproval, StandingApproveError> {
    let stored = store
        .get_proposal(id)
        .await?
        .ok_or(StandingApproveError::UnknownProposal)?;
    let proposal = &stored.proposal;
    let element = proposal
        .bound_element()
        .ok_or(StandingApproveError::NoElement)?;
    let scope = StandingScope::of(&proposal.url, proposal.action.method(), element)?;
    let standing = StandingGrant::new(
        proposal.actor_id.clone(),
        proposal.run_id.clone(),
        &scope,
        uses,
        ttl,
        now,
        approver,
    )?;
    let grant = proposal.grant(
        grant_ttl.min(ttl),
        now,
        Some(crate::ids::ApproverId::for_standing(&standing.id)),
    )?;
    store.issue_standing(standing.clone()).await?;
    let outcome = match store.approve_proposal(id, grant, now).await {
        Ok(outcome) => outcome,
        Err(error) => {
            store.revoke_standing(&standing.id).await?;
            return Err(error.into());
        }
    };
    if outcome != crate::proposal::DecisionOutcome::Approved {
        store.revoke_standing(&standing.id).await?;
        return Ok(StandingApproval {
            outcome,
            standing: None,
        });
    }
    Ok(StandingApproval {
        outcome,
        standing: Some(standing),
    })
}
