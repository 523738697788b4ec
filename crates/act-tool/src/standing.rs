//! Standing grants in the tools: a proposal in a standing grant's scope is
//! approved at once, and each act with such a grant takes one of its uses.

use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, AttemptId, OutcomeCode, ProposalStore, StaleReason, StandingId, StandingKey,
    StandingScope, StoredStanding, UseOutcome,
};

use crate::context::Context;
use crate::refusal::Refusal;

/// The oldest usable standing grant of the context's run whose scope is
/// `scope`. A store failure answers none: a person decides.
pub(crate) async fn covering(
    context: &Context,
    store: &dyn ProposalStore,
    scope: &StandingScope,
) -> Option<StoredStanding> {
    let listed = store
        .standing_grants(context.actor_id(), context.run_id(), context.now())
        .await;
    match listed {
        Ok(listed) => listed
            .into_iter()
            .find(|stored| stored.grant.scope == *scope),
        Err(error) => {
            tracing::warn!(%error, "countersign: standing grants could not be read; a person decides");
            None
        }
    }
}

/// How long the grant a standing grant approves lasts: the proposal's
/// time, never past the standing grant's end.
pub(crate) fn grant_ttl(context: &Context, standing: &StoredStanding) -> Option<Duration> {
    let left = standing
        .grant
        .expires_at
        .as_millis()
        .checked_sub(context.now().as_millis())
        .filter(|&ms| ms > 0)?;
    Some(context.proposal_ttl().min(Duration::from_millis(left)))
}

/// One use a standing grant gave an act.
#[derive(Debug, Clone)]
pub(crate) struct TakenUse {
    pub(crate) standing: StandingId,
    pub(crate) remaining: u32,
}

impl TakenUse {
    /// What the operation record says of the use.
    pub(crate) fn record_note(&self) -> String {
        let uses = if self.remaining == 1 { "use" } else { "uses" };
        format!(
            "standing grant `{}`: {} {uses} left",
            self.standing, self.remaining
        )
    }
}

fn spent_message(reason: StaleReason) -> &'static str {
    match reason {
        StaleReason::Consumed => "the standing approval has no uses left",
        StaleReason::Expired => "the standing approval has expired",
        StaleReason::Revoked => "the standing approval was revoked",
        StaleReason::Stopped => "the host stopped this run; none of its approvals can be used",
        StaleReason::Locked => "the standing approval is locked after calls that did not match it",
        StaleReason::Mismatch | StaleReason::Abandoned => {
            "the standing approval does not cover this action"
        }
    }
}

/// Takes one use of `standing` for the act `attempt`, whose grant that
/// attempt has consumed. `scope` is the consumed grant's own scope (`None`
/// for a grant bound to no element), so the store refuses a grant outside
/// the standing one.
pub(crate) async fn take_use(
    context: &Context,
    scope: Option<StandingScope>,
    standing: &StandingId,
    attempt: &AttemptId,
) -> Result<TakenUse, Refusal> {
    let Some(store) = context.proposal_store() else {
        return Err(Refusal::new(
            OutcomeCode::ApprovalStale,
            "a standing approval needs the proposal store; nothing was performed",
        ));
    };
    let scope = scope.ok_or_else(|| {
        Refusal::new(
            OutcomeCode::ApprovalStale,
            spent_message(StaleReason::Mismatch),
        )
    })?;
    let key = StandingKey {
        actor_id: context.actor_id().clone(),
        run_id: context.run_id().clone(),
        scope,
    };
    match store
        .use_standing(standing, &key, context.now(), attempt)
        .await
    {
        Ok(UseOutcome::Used { remaining, .. }) => Ok(TakenUse {
            standing: standing.clone(),
            remaining,
        }),
        Ok(UseOutcome::Stale(reason)) => Err(Refusal::with_reason(
            OutcomeCode::ApprovalStale,
            format!("{}; nothing was performed", spent_message(reason)),
            format!(
                "standing grant `{standing}` gave no use: {}",
                reason.as_str()
            ),
        )),
        Ok(UseOutcome::Unknown) => Err(Refusal::new(
            OutcomeCode::ApprovalStale,
            "the standing approval is gone; nothing was performed",
        )),
        Err(error) => {
            // The use may have been taken: give it back, so it is never
            // counted for an act that did not happen.
            give_back_use(context, standing, attempt).await;
            Err(Refusal::with_reason(
                OutcomeCode::StoreUnavailable,
                "approval store is unavailable; nothing was performed",
                format!("taking a standing use failed: {error}"),
            ))
        }
    }
}

/// Gives back the use `attempt` took, for an act that dispatched nothing.
/// A failure is logged: the use stays counted, which allows fewer acts,
/// never more.
pub(crate) async fn give_back_use(context: &Context, standing: &StandingId, attempt: &AttemptId) {
    let Some(store) = context.proposal_store() else {
        return;
    };
    match store.give_back_use(standing, attempt, context.now()).await {
        Ok(AbandonOutcome::Usable { .. } | AbandonOutcome::Expired) => {}
        Ok(other) => {
            tracing::info!(standing = %standing, outcome = ?other, "countersign: a standing use given back");
        }
        Err(error) => {
            tracing::warn!(standing = %standing, %error, "countersign: a standing use could not be given back; it stays counted");
        }
    }
}
