//! A refusal on its way to a tool's result, shared by the Act and browse
//! tools so that both word and record a refusal the same way.

use countersign_approval_core::OutcomeCode;

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
