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

/// Where operation records go, and the queries a host asks of them.
///
/// # Contract
///
/// `countersign-store-conformance` checks each rule (`operation_log_conformance_tests!`).
///
/// 1. **`record`** keeps one record per call, exactly as given: no call's
///    record is lost or kept twice, whatever the concurrency, and a
///    resend of the same record (same operation id) after an error keeps
///    it once.
/// 2. **`records_for_run`** answers every record still held for that run,
///    in the order they were recorded; an unknown run answers none.
/// 3. **`record_for_operation`** answers the record of that operation id,
///    or `None` when there is none (never recorded, or past retention).
/// 4. A log is **bounded**: it keeps at most the newest records up to the
///    limit its host sets (and may drop records older than a retention
///    time); a record it dropped is gone from both queries.
/// 5. Failures are [`StoreError`]s; the caller's outcome stands (the Act
///    tool reports a failed write through `tracing` and answers as it
///    would have).
#[async_trait]
pub trait OperationLog: Send + Sync {
    /// Appends one record.
    async fn record(&self, record: OperationRecord) -> Result<(), StoreError>;

    /// Every record held for `run`, oldest first.
    async fn records_for_run(&self, run: &RunId) -> Result<Vec<OperationRecord>, StoreError>;

    /// The record of operation `id`, if held.
    async fn record_for_operation(
        &self,
        id: &OperationId,
    ) -> Result<Option<OperationRecord>, StoreError>;
}

#[async_trait]
impl<L: OperationLog + ?Sized> OperationLog for std::sync::Arc<L> {
    async fn record(&self, record: OperationRecord) -> Result<(), StoreError> {
        (**self).record(record).await
    }
    async fn records_for_run(&self, run: &RunId) -> Result<Vec<OperationRecord>, StoreError> {
        (**self).records_for_run(run).await
    }
    async fn record_for_operation(
        &self,
        id: &OperationId,
    ) -> Result<Option<OperationRecord>, StoreError> {
        (**self).record_for_operation(id).await
    }
}
