//! URL and action canonicalisation, the destination policy and action
//! digests for countersign.
//!
//! A model proposes a destination and an action; the host's [`Policy`]
//! turns each into a canonical form or a [`Denial`]. The canonical URL and
//! the action's [`ActionDigest`] are what a grant binds.
//!
//! ```
//! use countersign_canonical_policy::{Policy, StaticResolver};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let policy = Policy::builder()
//!     .allow_host("docs.example.com")
//!     .resolver(StaticResolver::answering_all(["93.184.216.34".parse().unwrap()]))
//!     .build()?;
//!
//! let url = policy.authorize_destination("HTTPS://Docs.Example.COM.").await?;
//! assert_eq!(url.to_string(), "https://docs.example.com/");
//!
//! let action = policy.authorize_action(&serde_json::json!({
//!     "method": " Click ", "selector": "a#docs"
//! }))?;
//! assert_eq!(action.description(), "click a#docs");
//! assert_eq!(
//!     action.digest().to_hex(),
//!     "cecff7f76758bc956b845d97c1ea48bd3a553050b866370981447cdfad0f998d"
//! );
//!
//! let refused = policy.authorize_destination("https://docs.example.com@evil.com/").await;
//! assert_eq!(refused.unwrap_err().code(), "NOT_AUTHORIZED");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! The policy does no I/O of its own: names are resolved through the
//! [`Resolver`] trait. [`StaticResolver`] serves tests and offline use; the
//! `system-resolver` feature adds `SystemResolver`.

mod action;
mod address;
mod denial;
mod policy;
mod resolver;

pub use action::{
    Action, ActionDigest, DEFAULT_METHODS, InvalidDigest, MAX_ARGUMENT_KEY_BYTES,
    MAX_ARGUMENT_VALUE_BYTES, MAX_ARGUMENTS, MAX_DESCRIPTION_BYTES, MAX_SAFE_INTEGER,
    MAX_SELECTOR_BYTES, QUOTED_CHARS, quote_untrusted,
};
pub use address::{
    ADDRESS_TABLE_DATE, GLOBAL_UNICAST_V6, NAT64_WELL_KNOWN, NON_PUBLIC_V4,
    NON_PUBLIC_V6_IN_GLOBAL, PUBLIC_V4_EXCEPTIONS, PUBLIC_V6_EXCEPTIONS, is_public, is_public_v4,
    is_public_v6,
};
pub use denial::{Denial, NOT_AUTHORIZED};
pub use policy::{AuthorizedUrl, Policy, PolicyBuildError, PolicyBuilder};
#[cfg(feature = "system-resolver")]
pub use resolver::SystemResolver;
pub use resolver::{ResolveError, Resolver, StaticResolver};
