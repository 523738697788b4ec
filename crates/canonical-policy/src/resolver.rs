//! Name resolution, as a trait so the policy itself does no I/O.

use std::collections::BTreeMap;
use std::net::IpAddr;

use async_trait::async_trait;

/// A resolver failure. The policy denies on any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ResolveError {
    message: String,
}

impl ResolveError {
    /// A failure with a lower-case message, e.g. `lookup timed out after 2s`.
    pub fn new(message: impl Into<String>) -> Self {
        ResolveError {
            message: message.into(),
        }
    }
}

/// Turns a host name into addresses.
///
/// `host` is the ASCII (punycode) lower-case name the URL parser produced,
/// without a trailing dot. Errors, timeouts and empty answers all make the
/// policy deny; an implementation should bound its own running time.
#[async_trait]
pub trait Resolver: Send + Sync {
    /// Every address `host` resolves to.
    async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError>;
}

/// A resolver with fixed answers, for tests and offline simulations.
///
/// ```
/// use countersign_canonical_policy::StaticResolver;
///
/// let resolver = StaticResolver::new()
///     .with_host("docs.example.com", ["93.184.216.34".parse().unwrap()]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    answers: BTreeMap<String, Vec<IpAddr>>,
    fallback: Option<Vec<IpAddr>>,
    failing: bool,
}

impl StaticResolver {
    /// A resolver that knows no name: every lookup fails.
    pub fn new() -> Self {
        Self::default()
    }

    /// A resolver that answers `addresses` for every name.
    pub fn answering_all(addresses: impl IntoIterator<Item = IpAddr>) -> Self {
        StaticResolver {
            fallback: Some(addresses.into_iter().collect()),
            ..Self::default()
        }
    }

    /// A resolver whose every lookup fails, for testing the failure path.
    pub fn failing() -> Self {
        StaticResolver {
            failing: true,
            ..Self::default()
        }
    }

    /// Answers `addresses` for `host` (compared case-insensitively, one
    /// trailing dot ignored).
    pub fn with_host(mut self, host: &str, addresses: impl IntoIterator<Item = IpAddr>) -> Self {
        self.answers.insert(
            normalise(host).into_owned(),
            addresses.into_iter().collect(),
        );
        self
    }
}

fn normalise(host: &str) -> std::borrow::Cow<'_, str> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(host.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(host)
    }
}

#[async_trait]
impl Resolver for StaticResolver {
    async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        if self.failing {
            return Err(ResolveError::new("resolver is set to fail"));
        }
        if let Some(found) = self.answers.get(normalise(host).as_ref()) {
            return Ok(found.clone());
        }
        self.fallback
            .clone()
            .ok_or_else(|| ResolveError::new(format!("no answer configured for `{host}`")))
    }
}

#[cfg(feature = "system-resolver")]
pub use system::SystemResolver;

#[cfg(feature = "system-resolver")]
mod system {
    use crate::resolver::{ResolveError, Resolver};
    use async_trait::async_trait;
    use std::net::IpAddr;
    use std::time::Duration;

    /// Resolves through the operating system (tokio's `lookup_host`), giving
    /// up after a timeout. Needs a tokio runtime with the time driver.
    #[derive(Debug, Clone)]
    pub struct SystemResolver {
        timeout: Duration,
    }

    impl SystemResolver {
        /// The default lookup timeout.
        pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

        /// A resolver with [`DEFAULT_TIMEOUT`](Self::DEFAULT_TIMEOUT).
        pub fn new() -> Self {
            SystemResolver {
                timeout: Self::DEFAULT_TIMEOUT,
            }
        }

        /// A resolver that gives up after `timeout`.
        pub fn with_timeout(timeout: Duration) -> Self {
            SystemResolver { timeout }
        }
    }

    impl Default for SystemResolver {
        fn default() -> Self {
            Self::new()
        }
    }

    #[async_trait]
    impl Resolver for SystemResolver {
        async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
            let lookup = tokio::net::lookup_host((host, 0));
            match tokio::time::timeout(self.timeout, lookup).await {
                Err(_) => Err(ResolveError::new(format!(
                    "lookup timed out after {}ms",
                    self.timeout.as_millis()
                ))),
                Ok(Err(e)) => Err(ResolveError::new(format!("lookup failed: {e}"))),
                Ok(Ok(addrs)) => Ok(addrs.map(|a| a.ip()).collect()),
            }
        }
    }
}
