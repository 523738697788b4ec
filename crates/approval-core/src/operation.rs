//! The operation log: one record per Act call, allowed or denied.

use std::fmt;

use async_trait::async_trait;
use countersign_canonical_policy::ActionDigest;

use crate::{ActorId, OperationId, RunId, StoreError, Timestamp};

/// The outcome of one Act call, as the model sees its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutcomeCode {
    /// The action was performed.
    Ok,
    /// No approval store, or a missing, malformed or unknown approval id.
    ApprovalRequired,
    /// The grant is expired, revoked, consumed, or does not match the request.
    ApprovalStale,
    /// The policy refused the URL or action, or the call was malformed.
    NotAuthorized,
    /// The approval store failed; nothing was performed.
    StoreUnavailable,
    /// The grant was consumed but the backend failed to perform the action.
    BackendFailed,
}

impl OutcomeCode {
    /// `ok` or the error code, e.g. `APPROVAL_STALE`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeCode::Ok => "ok",
            OutcomeCode::ApprovalRequired => "APPROVAL_REQUIRED",
            OutcomeCode::ApprovalStale => "APPROVAL_STALE",
            OutcomeCode::NotAuthorized => "NOT_AUTHORIZED",
            OutcomeCode::StoreUnavailable => "STORE_UNAVAILABLE",
            OutcomeCode::BackendFailed => "BACKEND_FAILED",
        }
    }

    /// Every code, in a fixed order.
    pub const ALL: [OutcomeCode; 6] = [
        OutcomeCode::Ok,
        OutcomeCode::ApprovalRequired,
        OutcomeCode::ApprovalStale,
        OutcomeCode::NotAuthorized,
        OutcomeCode::StoreUnavailable,
        OutcomeCode::BackendFailed,
    ];
}

impl fmt::Display for OutcomeCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the log keeps of one Act call. Argument values are never kept:
/// they may be secrets typed into forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRecord {
    /// The call's id (`op_…`).
    pub operation_id: OperationId,
    /// The host's actor.
    pub actor_id: ActorId,
    /// The host's run.
    pub run_id: RunId,
    /// The approval id exactly as the model gave it, if it gave a string.
    pub approval_id: Option<String>,
    /// The canonical URL, when the policy accepted it.
    pub url: Option<String>,
    /// The action digest, when the policy accepted the action.
    pub action_digest: Option<ActionDigest>,
    /// The outcome.
    pub outcome: OutcomeCode,
    /// Why, in lower-case words (empty for `ok`).
    pub reason: String,
    /// When the call started.
    pub started_at: Timestamp,
    /// When it ended.
    pub finished_at: Timestamp,
}

/// Where operation records go.
#[async_trait]
pub trait OperationLog: Send + Sync {
    /// Appends one record.
    async fn record(&self, record: OperationRecord) -> Result<(), StoreError>;
}

#[async_trait]
impl<L: OperationLog + ?Sized> OperationLog for std::sync::Arc<L> {
    async fn record(&self, record: OperationRecord) -> Result<(), StoreError> {
        (**self).record(record).await
    }
}
