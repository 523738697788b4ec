//! The operation log: one record per Act call, allowed or denied.

use std::fmt;

use async_trait::async_trait;
use countersign_canonical_policy::{ActionDigest, quote_untrusted};

use crate::{
    ids::ActorId, ids::ApprovalId, ids::ApproverId, ids::OperationId, ids::RunId,
    store_error::StoreError, time::Timestamp,
};

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

/// The approval id a call gave, as an operation record keeps it: bounded,
/// whatever the model sent.
///
/// A string of an id's shape (`[A-Za-z0-9_-]{1,128}`) is kept as given;
/// any other string only as its length and an escaped prefix of at most
/// 64 characters; a value of another JSON type only as that type.
///
/// ```
/// use countersign_approval_core::GivenApprovalId;
///
/// let id = GivenApprovalId::from_text("apr_0123");
/// assert_eq!(id.to_string(), "apr_0123");
/// assert!(id.well_formed().is_some());
///
/// let hostile = format!("apr\n\u{202e}{}", "x".repeat(100_000));
/// let kept = GivenApprovalId::from_text(&hostile);
/// assert_eq!(kept.to_string(), format!("<malformed id of 100007 bytes: `apr\\n\\u{{202e}}{}…`>", "x".repeat(51)));
///
/// assert_eq!(GivenApprovalId::not_a_string("number").to_string(), "<number, not a string>");
/// assert_eq!(GivenApprovalId::Absent.to_string(), "<none>");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GivenApprovalId {
    /// The call gave no approval id (absent, or `null`).
    Absent,
    /// A string with the shape of an id, exactly as given.
    WellFormed(ApprovalId),
    /// A string without the shape of an id; built by
    /// [`from_text`](GivenApprovalId::from_text).
    #[non_exhaustive]
    Malformed {
        /// Its length in UTF-8 bytes.
        bytes: usize,
        /// Its start, escaped and cut as every quoted untrusted text is
        /// (see `countersign_canonical_policy::quote_untrusted`).
        prefix: String,
    },
    /// A JSON value that is not a string; built by
    /// [`not_a_string`](GivenApprovalId::not_a_string).
    #[non_exhaustive]
    NotAString {
        /// Its JSON type: `number`, `boolean`, `array` or `object`.
        json_type: &'static str,
    },
}

impl GivenApprovalId {
    /// A string id as the model gave it: kept when it has an id's shape,
    /// otherwise reduced to its length and a bounded, escaped prefix.
    pub fn from_text(text: &str) -> Self {
        match ApprovalId::parse(text) {
            Some(id) => GivenApprovalId::WellFormed(id),
            None => GivenApprovalId::Malformed {
                bytes: text.len(),
                prefix: quote_untrusted(text),
            },
        }
    }

    /// An id given as a JSON value of another type, e.g. `number`.
    pub fn not_a_string(json_type: &'static str) -> Self {
        GivenApprovalId::NotAString { json_type }
    }

    /// A malformed id rebuilt from the parts an operation log stored:
    /// `bytes` and `prefix` exactly as [`from_text`](GivenApprovalId::from_text)
    /// made them.
    pub fn malformed(bytes: usize, prefix: String) -> Self {
        GivenApprovalId::Malformed { bytes, prefix }
    }

    /// The id, when the call gave one of an id's shape.
    pub fn well_formed(&self) -> Option<&ApprovalId> {
        match self {
            GivenApprovalId::WellFormed(id) => Some(id),
            _ => None,
        }
    }
}

impl fmt::Display for GivenApprovalId {
    /// The id itself, or `<none>`, `<malformed id of N bytes: `…`>`,
    /// `<number, not a string>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GivenApprovalId::Absent => f.write_str("<none>"),
            GivenApprovalId::WellFormed(id) => f.write_str(id.as_str()),
            GivenApprovalId::Malformed { bytes, prefix } => {
                write!(f, "<malformed id of {bytes} bytes: `{prefix}`>")
            }
            GivenApprovalId::NotAString { json_type } => {
                write!(f, "<{json_type}, not a string>")
            }
        }
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
    /// The approval id the model gave, bounded (see [`GivenApprovalId`]).
    pub approval_id: GivenApprovalId,
    /// The canonical URL, when the policy accepted it.
    pub url: Option<String>,
    /// The action digest, when the policy accepted the action.
    pub action_digest: Option<ActionDigest>,
    /// Who approved the grant the call used (ok, or a backend failure after
    /// the consume), as the grant records it; `None` when no grant was used
    /// or the grant names no approver.
    pub approver_id: Option<ApproverId>,
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
