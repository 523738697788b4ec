//! A refusal on its way to a tool's result, shared by the Act and browse
//! tools so that both word and record a refusal the same way.

use countersign_approval_core::{AbandonOutcome, OutcomeCode, StaleReason, StoreError};
use countersign_rules::Rule;

/// A refusal on its way to the result: `message` is for the model,
/// `reason` for the operation record and the log.
pub(crate) struct Refusal {
    pub(crate) code: OutcomeCode,
    pub(crate) message: String,
    pub(crate) reason: String,
}

impl Refusal {
    pub(crate) fn new(code: OutcomeCode, message: impl Into<String>) -> Self {
        let message = message.into();
        Refusal {
            code,
            reason: message.clone(),
            message,
        }
    }

    pub(crate) fn with_reason(
        code: OutcomeCode,
        message: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Refusal {
            code,
            message: message.into(),
            reason: reason.into(),
        }
    }
}

impl Refusal {
    /// A `deny` rule refused the call: the model reads the rule's reason,
    /// the record also its id.
    pub(crate) fn by_rule(rule: &Rule) -> Self {
        Refusal::with_reason(
            OutcomeCode::NotAuthorized,
            format!("the host's rules refuse this action: {}", rule.reason()),
            format!("refused by rule `{}`: {}", rule.id(), rule.reason()),
        )
    }
}

/// Why the tool gave a consume back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum GaveUp {
    /// The store failed, or answered what a first try cannot be answered.
    StoreFailed,
    /// The backend refused before dispatching anything.
    NotDispatched,
    /// The backend refused before dispatching anything because the page or
    /// its target is no longer what the grant binds.
    TargetChanged,
}

impl GaveUp {
    pub(crate) fn code(self) -> OutcomeCode {
        match self {
            GaveUp::StoreFailed => OutcomeCode::StoreUnavailable,
            GaveUp::NotDispatched => OutcomeCode::BackendFailed,
            GaveUp::TargetChanged => OutcomeCode::ApprovalStale,
        }
    }
}

/// What the model learns of a grant the store found stale.
pub(crate) fn stale_message(reason: StaleReason) -> &'static str {
    match reason {
        StaleReason::Revoked => "approval was revoked",
        StaleReason::Consumed => "approval was already used",
        StaleReason::Expired => "approval has expired",
        StaleReason::Mismatch => "approval does not match this actor, run, url or action",
        StaleReason::Abandoned => "approval attempt was given up; call again",
        StaleReason::Locked => {
            "approval is locked after too many calls that did not match it; the host must issue a new approval"
        }
        StaleReason::Stopped => "the host stopped this run; none of its approvals can be used",
    }
}

/// What the model learns after a consume the tool gave up on was given
/// back: why, that nothing was performed, and whether the approval can
/// still be used.
pub(crate) fn given_back_message(
    gave_up: GaveUp,
    abandon: &Result<AbandonOutcome, StoreError>,
) -> String {
    let why = match gave_up {
        GaveUp::StoreFailed => "approval store is unavailable",
        GaveUp::NotDispatched => "backend refused before acting",
        GaveUp::TargetChanged => {
            "the page or its target changed since approval; the backend refused before acting"
        }
    };
    let approval = match abandon {
        Ok(AbandonOutcome::Usable { .. }) => "the approval is still usable",
        Ok(AbandonOutcome::ConsumedByOther) => "the approval was used by another call",
        Ok(AbandonOutcome::Expired) => "the approval has expired",
        Ok(AbandonOutcome::Revoked) => "the approval was revoked",
        Ok(AbandonOutcome::Stopped) => "the host stopped this run",
        Ok(AbandonOutcome::Unknown) => "the approval id is unknown",
        Err(_) => "the approval may have been used up",
    };
    format!("{why}; nothing was performed; {approval}")
}
