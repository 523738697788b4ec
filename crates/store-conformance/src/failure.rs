//! The error every check returns when a store breaks the contract.

use std::fmt;

/// A conformance check found the store breaking the contract (or could not
/// run).
///
/// [`Display`](fmt::Display) and [`Debug`](fmt::Debug) print the same
/// readable text, so a `#[test]` returning `Result<(), CheckFailure>` names
/// the check and the defect.
#[derive(Clone, PartialEq, Eq)]
pub struct CheckFailure {
    check: &'static str,
    message: String,
}

impl CheckFailure {
    /// A failure of the check named `check` (the name of its function).
    pub fn new(check: &'static str, message: impl Into<String>) -> Self {
        CheckFailure {
            check,
            message: message.into(),
        }
    }

    /// The name of the check that failed, e.g. `reads_never_consume`.
    pub fn check(&self) -> &'static str {
        self.check
    }

    /// What went wrong, in lower-case words.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "store conformance check `{}` failed: {}",
            self.check, self.message
        )
    }
}

impl fmt::Debug for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for CheckFailure {}
