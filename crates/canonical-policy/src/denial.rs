//! Why the policy refused a destination or an action.

use std::net::IpAddr;

/// The code every [`Denial`] carries on the tool's JSON surface.
pub const NOT_AUTHORIZED: &str = "NOT_AUTHORIZED";

/// A refusal by the [`Policy`](crate::Policy). Its `Display` says precisely
/// what was refused; its [`code`](Denial::code) is always `NOT_AUTHORIZED`.
///
/// Messages quote user input in backticks, escaped and then cut to 64
/// characters (a cut ends in `…`); the resolver's error text is quoted the
/// same way. They may be shown to a model, so they never carry argument
/// values, which can hold secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Denial {
    /// The URL did not parse with the WHATWG parser.
    #[error("url could not be parsed: {reason}")]
    UnparsableUrl {
        /// What the parser said.
        reason: String,
    },
    /// The scheme is not in the allowed set.
    #[error("scheme `{scheme}` is not allowed")]
    SchemeNotAllowed {
        /// The scheme as parsed, lower-case (escaped and cut).
        scheme: String,
    },
    /// The URL carries a user name or password.
    #[error("url must not carry a user name or password")]
    UserinfoPresent,
    /// The URL has no host.
    #[error("url has no host")]
    HostMissing,
    /// The host is not on the allow-list.
    #[error("host `{host}` is not allowed")]
    HostNotAllowed {
        /// The host as the parser sees it, trailing dot removed (escaped and cut).
        host: String,
    },
    /// The port is not on the port allow-list.
    #[error("port `{port}` is not allowed")]
    PortNotAllowed {
        /// The effective port (explicit or the scheme's default).
        port: u16,
    },
    /// The resolver failed or timed out.
    #[error("host `{host}` could not be resolved: {reason}")]
    ResolutionFailed {
        /// The host that was looked up (escaped and cut).
        host: String,
        /// What the resolver said (escaped and cut).
        reason: String,
    },
    /// The resolver answered with no address.
    #[error("host `{host}` resolved to no address")]
    NoAddresses {
        /// The host that was looked up (escaped and cut).
        host: String,
    },
    /// The host is, or resolved to, an address that is not public.
    #[error("host `{host}` has non-public address `{address}`")]
    NonPublicAddress {
        /// The host as parsed (escaped and cut).
        host: String,
        /// The first non-public address found.
        address: IpAddr,
    },
    /// The proposed action is not a well-formed action.
    #[error("action is invalid: {reason}")]
    InvalidAction {
        /// What is wrong, naming the field.
        reason: String,
    },
    /// The action's method is not in the allowed set.
    #[error("method `{method}` is not allowed")]
    MethodNotAllowed {
        /// The method after trimming and lower-casing (escaped and cut).
        method: String,
    },
}

impl Denial {
    /// The code shown to a model: always `NOT_AUTHORIZED`.
    pub fn code(&self) -> &'static str {
        NOT_AUTHORIZED
    }

    pub(crate) fn invalid_action(reason: impl Into<String>) -> Self {
        Denial::InvalidAction {
            reason: reason.into(),
        }
    }
}
