//! Giving back a consume whose answer was lost: the rules of
//! [`ApprovalStore::abandon`](crate::ApprovalStore::abandon).

use crate::{grant::GrantState, grant::StoredGrant, ids::AttemptId, time::Timestamp};

/// Most attempts one grant remembers as abandoned. Abandoning one more
/// attempt than this revokes the grant (or, when another attempt consumed
/// it, leaves it consumed for good), so the list stays bounded and no
/// abandoned attempt is ever forgotten.
pub const MAX_ABANDONED_ATTEMPTS: usize = 16;

/// The answer of [`ApprovalStore::abandon`](crate::ApprovalStore::abandon):
/// the grant's state after the call, as far as the caller can still use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AbandonOutcome {
    /// The grant is active and not expired: another attempt may consume it.
    /// `restored` is true when this attempt had consumed the grant and this
    /// call undid that consume (a repeat of the call answers `false`).
    Usable {
        /// Whether this call turned a consume by this attempt back into `Active`.
        restored: bool,
    },
    /// Another attempt consumed the grant; it stays consumed.
    ConsumedByOther,
    /// The grant is expired at the caller's `now` (a consume by this attempt
    /// was undone all the same).
    Expired,
    /// The grant is revoked: by the host, locked after too many failed
    /// attempts, or revoked by this call because [`MAX_ABANDONED_ATTEMPTS`]
    /// attempts were already abandoned.
    Revoked,
    /// The grant's run or actor was stopped: nothing changes, and no
    /// attempt can consume the grant again.
    Stopped,
    /// No grant has this id.
    Unknown,
}

impl AbandonOutcome {
    /// Whether another attempt may still consume the grant.
    pub fn is_usable(self) -> bool {
        matches!(self, AbandonOutcome::Usable { .. })
    }

    /// A lower-case phrase for logs and operation records.
    pub fn as_str(self) -> &'static str {
        match self {
            AbandonOutcome::Usable { restored: true } => "restored",
            AbandonOutcome::Usable { restored: false } => "usable",
            AbandonOutcome::ConsumedByOther => "consumed by another attempt",
            AbandonOutcome::Expired => "expired",
            AbandonOutcome::Revoked => "revoked",
            AbandonOutcome::Stopped => "stopped",
            AbandonOutcome::Unknown => "unknown",
        }
    }
}

/// What one abandon does to one grant, as [`decide_abandon`] rules it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbandonDecision {
    /// The answer.
    pub outcome: AbandonOutcome,
    /// The grant's new state, when it changes.
    pub state: Option<GrantState>,
    /// Whether the attempt must be added to the grant's abandoned list.
    pub remember: bool,
}

/// Applies the abandon rules of the store contract to one existing grant,
/// its list of abandoned attempts, whether its run or actor was stopped
/// since it was issued, and the caller's `now`. In order:
///
/// 1. stopped ⇒ `Stopped`, nothing changes (a stopped grant is never
///    consumed again, by any attempt);
///    revoked or locked ⇒ `Revoked`, nothing changes (a revoked grant is
///    never consumed again);
/// 2. `attempt` is not in the list and the list already holds
///    [`MAX_ABANDONED_ATTEMPTS`]: consumed by another attempt ⇒
///    `ConsumedByOther`, nothing changes (that consume can no longer be
///    undone, see 3); otherwise the grant becomes `Revoked` ⇒ `Revoked`;
/// 3. otherwise `attempt` joins the list (if not already in it), then:
///    consumed by `attempt` ⇒ the grant becomes `Active` again, and the
///    outcome is `Expired` at or after `expires_at`, else
///    `Usable { restored: true }`; consumed by another attempt ⇒
///    `ConsumedByOther`; active ⇒ `Expired` or `Usable { restored: false }`.
///
/// A store without the grant answers [`AbandonOutcome::Unknown`] without
/// calling this.
pub fn decide_abandon(
    grant: &StoredGrant,
    abandoned: &[AttemptId],
    stopped: bool,
    now: Timestamp,
    attempt: &AttemptId,
) -> AbandonDecision {
    let unchanged = |outcome| AbandonDecision {
        outcome,
        state: None,
        remember: false,
    };
    if stopped {
        return unchanged(AbandonOutcome::Stopped);
    }
    let consumed_by_this = match &grant.state {
        GrantState::Stopped => return unchanged(AbandonOutcome::Stopped),
        GrantState::Revoked | GrantState::Locked => return unchanged(AbandonOutcome::Revoked),
        GrantState::Consumed { by, .. } => by == attempt,
        GrantState::Active => false,
    };
    let known = abandoned.contains(attempt);
    if !known && abandoned.len() >= MAX_ABANDONED_ATTEMPTS {
        if matches!(grant.state, GrantState::Consumed { .. }) && !consumed_by_this {
            return unchanged(AbandonOutcome::ConsumedByOther);
        }
        return AbandonDecision {
            outcome: AbandonOutcome::Revoked,
            state: Some(GrantState::Revoked),
            remember: false,
        };
    }
    let expired = grant.approval.is_expired_at(now);
    let (outcome, state) = match &grant.state {
        GrantState::Consumed { .. } if !consumed_by_this => (AbandonOutcome::ConsumedByOther, None),
        _ if expired => (
            AbandonOutcome::Expired,
            consumed_by_this.then_some(GrantState::Active),
        ),
        _ => (
            AbandonOutcome::Usable {
                restored: consumed_by_this,
            },
            consumed_by_this.then_some(GrantState::Active),
        ),
    };
    AbandonDecision {
        outcome,
        state,
        remember: !known,
    }
}
