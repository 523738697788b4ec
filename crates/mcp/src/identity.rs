//! Who is calling: the host's authentication, never a tool argument.

use std::collections::HashMap;

use async_trait::async_trait;
use countersign_approval_core::{ActorId, RunId};
use countersign_approval_web::same_secret;

/// The actor and run a caller acts as. It comes from the launch
/// configuration (stdio) or from the host's [`Tokens`] (HTTP); no tool
/// argument can name or change it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The actor the grants are bound to.
    pub actor: ActorId,
    /// The run the grants are bound to.
    pub run: RunId,
}

impl Identity {
    /// The identity of `actor` in `run`.
    pub fn new(actor: ActorId, run: RunId) -> Self {
        Identity { actor, run }
    }
}

/// The host's verification of the bearer tokens MCP clients send over
/// HTTP (`Authorization: Bearer <token>`).
///
/// The server keeps no users of its own: every request's token is passed
/// to [`identify`](Tokens::identify), and the identity it answers is the
/// (actor, run) the request acts as. `None` answers `401` and nothing
/// else.
///
/// ```
/// use countersign_approval_core::{ActorId, RunId};
/// use countersign_mcp::{Identity, Tokens, async_trait};
///
/// /// One agent, one run, one secret (compare in constant time in real code).
/// struct OneAgent(String);
///
/// #[async_trait]
/// impl Tokens for OneAgent {
///     async fn identify(&self, token: &str) -> Option<Identity> {
///         (token == self.0).then(|| {
///             Some(Identity::new(ActorId::new("agent").ok()?, RunId::new("run-1").ok()?))
///         })?
///     }
/// }
/// ```
#[async_trait]
pub trait Tokens: Send + Sync {
    /// The identity `token` stands for, or `None` when it stands for none.
    async fn identify(&self, token: &str) -> Option<Identity>;
}

#[async_trait]
impl<T: Tokens + ?Sized> Tokens for std::sync::Arc<T> {
    async fn identify(&self, token: &str) -> Option<Identity> {
        (**self).identify(token).await
    }
}

/// A fixed table of bearer tokens, each standing for one identity: what
/// the `countersign-mcp` binary's configuration file holds.
#[derive(Clone, Default)]
pub struct StaticTokens {
    tokens: HashMap<String, Identity>,
}

impl std::fmt::Debug for StaticTokens {
    // The tokens are secrets: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticTokens")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl StaticTokens {
    /// An empty table (every token refused).
    pub fn new() -> Self {
        StaticTokens::default()
    }

    /// Adds `token`, standing for `identity`.
    pub fn with(mut self, token: impl Into<String>, identity: Identity) -> Self {
        self.tokens.insert(token.into(), identity);
        self
    }
}

#[async_trait]
impl Tokens for StaticTokens {
    async fn identify(&self, token: &str) -> Option<Identity> {
        // Every entry is compared, matching or not, so the time taken says
        // nothing of which one matched.
        let mut found = None;
        for (secret, identity) in &self.tokens {
            if same_secret(token, secret) {
                found = Some(identity.clone());
            }
        }
        found
    }
}
