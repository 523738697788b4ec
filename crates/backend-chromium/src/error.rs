//! Why launching, observing or driving Chromium failed, and the one
//! vocabulary of refusals the checks before input give.

/// Launching Chromium, opening a page or observing it failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChromiumError {
    /// No egress proxy was given and the host did not opt out with
    /// [`ChromiumOptions::allow_unproxied_egress`](crate::ChromiumOptions::allow_unproxied_egress).
    #[error(
        "refusing to launch chromium without an egress proxy; set one, or opt out explicitly with `allow_unproxied_egress`"
    )]
    NoEgressProxy,
    /// The egress proxy address is not a proxy URL Chromium accepts.
    #[error("egress proxy `{proxy}` is invalid: {reason}")]
    InvalidEgressProxy {
        /// The address as given.
        proxy: String,
        /// Why it was refused.
        reason: String,
    },
    /// A flag the host added with
    /// [`ChromiumOptions::arg`](crate::ChromiumOptions::arg) would reopen a
    /// way around the egress proxy or undo a setting the backend relies on.
    #[error("refusing chromium flag `{flag}`: {reason}")]
    RefusedFlag {
        /// The flag as given.
        flag: String,
        /// Why it was refused.
        reason: String,
    },
    /// The browser could not be started or reached.
    #[error("could not launch chromium `{executable}`: {reason}")]
    Launch {
        /// The binary that was run.
        executable: String,
        /// What went wrong.
        reason: String,
    },
    /// A DevTools command failed.
    #[error("chromium did not answer `{command}`: {reason}")]
    Protocol {
        /// The command, e.g. `Page.getFrameTree`.
        command: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The page is at a URL the policy refuses, so it cannot be observed.
    #[error("the page is at a url the policy refuses: {reason}")]
    PageNotAllowed {
        /// The policy's denial.
        reason: String,
    },
    /// A page script raised an error.
    #[error("page script failed: {0}")]
    Script(String),
}

impl ChromiumError {
    pub(crate) fn protocol(command: &'static str, error: impl std::fmt::Display) -> Self {
        ChromiumError::Protocol {
            command,
            reason: error.to_string(),
        }
    }
}

/// Why an action was not (fully) performed; becomes the backend's message.
pub(crate) type Refused = String;

/// Shortens user text quoted in a message.
pub(crate) fn quoted(text: &str) -> String {
    const LIMIT: usize = 64;
    let shown: String = text
        .chars()
        .take(LIMIT)
        .collect::<String>()
        .escape_debug()
        .to_string();
    if text.chars().count() > LIMIT {
        format!("{shown}…")
    } else {
        shown
    }
}

/// A DevTools command that failed, as a refusal: the same words as
/// [`ChromiumError::Protocol`].
pub(crate) fn protocol(command: &'static str, error: impl std::fmt::Display) -> Refused {
    ChromiumError::protocol(command, error).to_string()
}
