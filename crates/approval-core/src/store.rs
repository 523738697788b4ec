//! The approval-store trait and its errors.

use async_trait::async_trait;

use crate::{
    Approval, ApprovalId, AttemptId, Binding, ConsumeOutcome, RevokeOutcome, StoredGrant, Timestamp,
};

/// An infrastructure failure of a store. Callers fail closed: a store error
/// is never taken as permission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached or refused the request (connection
    /// lost, server loading, cluster moving slots). The operation may or may
    /// not have been applied.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What went wrong.
        message: String,
    },
    /// No answer in time. The operation may or may not have been applied.
    #[error("store timed out: {message}")]
    Timeout {
        /// What timed out.
        message: String,
    },
    /// The write was applied on the primary but fewer replicas than required
    /// confirmed it; it may be lost on failover.
    #[error("write not confirmed by enough replicas: wanted {wanted}, got {confirmed}")]
    DurabilityUnconfirmed {
        /// Replicas required.
        wanted: u32,
        /// Replicas that confirmed.
        confirmed: u32,
    },
    /// A stored record is malformed or was not written by this library.
    #[error("record `{key}` is corrupt: {message}")]
    Corrupt {
        /// The record's id or key.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// The store cannot do what the contract needs (for example a server
    /// that cannot run scripts).
    #[error("store unsupported: {message}")]
    Unsupported {
        /// What is missing.
        message: String,
    },
    /// A record is too large or otherwise cannot be stored.
    #[error("store rejected the record: {message}")]
    Rejected {
        /// Why.
        message: String,
    },
}

impl StoreError {
    /// Whether repeating the same call (with the same attempt id, for a
    /// consume) may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable { .. }
                | StoreError::Timeout { .. }
                | StoreError::DurabilityUnconfirmed { .. }
        )
    }

    /// Shorthand for [`StoreError::Unavailable`].
    pub fn unavailable(message: impl Into<String>) -> Self {
        StoreError::Unavailable {
            message: message.into(),
        }
    }

    /// Shorthand for [`StoreError::Corrupt`].
    pub fn corrupt(key: impl Into<String>, message: impl Into<String>) -> Self {
        StoreError::Corrupt {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// [`ApprovalStore::issue`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IssueError {
    /// A grant with this id already exists; it was left untouched.
    #[error("approval `{0}` already exists")]
    AlreadyExists(ApprovalId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where grants live, and the one place a grant is consumed.
///
/// # Contract
///
/// Every implementation, whatever it stores grants in, must behave as
/// follows; `countersign-store-conformance` checks each rule.
///
/// 1. **`issue`** stores a new grant in state `Active`. An id already
///    present is [`IssueError::AlreadyExists`]; the existing grant is never
///    overwritten, whatever its state.
/// 2. **`revoke`** turns an `Active` grant `Revoked` and answers
///    [`RevokeOutcome::Revoked`]; a revoked grant answers `AlreadyRevoked`,
///    a consumed one `AlreadyConsumed` (and stays consumed), a missing id
///    `Unknown`. Revoking an expired, unused grant revokes it.
/// 3. **`get`** returns the grant and its state, or `None`. Reads never
///    change state: any number of reads leave a grant consumable.
/// 4. **`consume_once`** is one atomic check-and-mark, evaluated in this
///    order:
///    1. no grant with this id ⇒ [`ConsumeOutcome::Unknown`];
///    2. revoked ⇒ `Stale(Revoked)`;
///    3. consumed ⇒ `Consumed { replay: true }` when it was consumed by this
///       same `attempt` and `binding` equals the grant's binding, otherwise
///       `Stale(Consumed)`;
///    4. `now >= expires_at` ⇒ `Stale(Expired)`;
///    5. any field of `binding` (actor, run, URL, action digest) differs
///       from the grant's ⇒ `Stale(Mismatch)`, and the grant **stays
///       usable**: a mismatch never burns it;
///    6. otherwise the grant becomes `Consumed { at: now, by: attempt }` ⇒
///       `Consumed { replay: false }`.
///
///    Atomic means: among any number of concurrent calls on one grant, from
///    any number of threads, processes or hosts, at most one sees
///    `Consumed { replay: false }`; and a `revoke` racing a consume is
///    ordered entirely before or after it (exactly one of them wins).
/// 5. Time comes from the caller's `now`; a store does not consult its own
///    clock for expiry.
/// 6. Infrastructure failures are [`StoreError`], never an outcome. A store
///    never reports `Consumed` unless it has recorded the consume, and
///    never reports any outcome for a record it cannot read as one of its
///    own (that is [`StoreError::Corrupt`]).
/// 7. A retry of `consume_once` with the same attempt id after an error
///    whose effect is unknown is safe: if the first call was applied, the
///    retry answers `Consumed { replay: true }`.
///
/// The trait is object safe: hosts hold an `Arc<dyn ApprovalStore>`.
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Stores a new grant; never overwrites.
    async fn issue(&self, approval: Approval) -> Result<(), IssueError>;

    /// Revokes a grant that has not been consumed.
    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError>;

    /// Reads a grant and its state without changing it.
    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError>;

    /// Atomically checks the grant against `binding` at `now` and marks it
    /// consumed by `attempt`; see the contract for the order of checks.
    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError>;
}

#[async_trait]
impl<S: ApprovalStore + ?Sized> ApprovalStore for std::sync::Arc<S> {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        (**self).issue(approval).await
    }
    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        (**self).revoke(id).await
    }
    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        (**self).get(id).await
    }
    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        (**self).consume_once(id, binding, now, attempt).await
    }
}
