//! A store's infrastructure failure: what every store call can fail with,
//! and what the records of other modules (a proposal's, a grant's) name,
//! kept apart from the store traits so those modules need not import them.

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
