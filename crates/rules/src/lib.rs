//! Rules that decide who approves a proposed browser action, on the facts
//! of its target element: a rule approves it at once (`auto`), a person
//! decides (`person`, today's approval page), or it is refused (`deny`).
//!
//! A rule matches on the destination's host and the action's method, and
//! on what the backend's snapshot read of the target element: its role and
//! accessible name from the accessibility tree, its tag and input type,
//! where its form submits and how, where its link leads (host, path and
//! query, as the browser resolved them), whether the
//! action submits a form and what kinds of field it would send. The
//! strongest matching tier decides: any `deny`, then `person`, then
//! `auto`; with none matching, a person decides. An action whose target
//! was not found is never `auto`.
//!
//! Rules decide only on what the policy already accepted (they take its
//! [`AuthorizedUrl`](countersign_canonical_policy::AuthorizedUrl) and
//! [`Action`](countersign_canonical_policy::Action)), so they narrow and
//! never widen it. A rule-approved grant is the ordinary one: single use,
//! bound to the element, recorded as approved by `rule:<id>`.
//!
//! ```
//! use std::collections::BTreeMap;
//! use countersign_approval_core::{ElementIdentity, FrameIdentity};
//! use countersign_canonical_policy::{Policy, StaticResolver};
//! use countersign_rules::{ProposedTarget, Rule, RuleSet, Tier};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let rules = RuleSet::builder()
//!     .rule(Rule::deny("no-admin", "the agent never touches the admin console")
//!         .hosts(["admin.example.com"]))
//!     .default_pack(["docs.example.com"])
//!     .build()?;
//!
//! let policy = Policy::builder()
//!     .allow_host("docs.example.com")
//!     .resolver(StaticResolver::answering_all(["93.184.216.34".parse()?]))
//!     .build()?;
//! let url = policy.authorize_destination("https://docs.example.com/guide").await?;
//! let action = policy.authorize_action(&serde_json::json!({"method": "click", "selector": "a#next"}))?;
//! let link = |name: &str, href: &str| ElementIdentity::new(
//!     "link", name, "a", name,
//!     BTreeMap::from([("href".to_owned(), href.to_owned())]),
//!     vec![FrameIdentity::new("https://docs.example.com", "D0C")],
//! );
//!
//! let next = link("Next", "https://docs.example.com/guide/2")?;
//! let decided = rules.decide(ProposedTarget { url: &url, action: &action, element: Some(&next) });
//! assert_eq!(decided.tier, Tier::Auto);
//! assert_eq!(decided.approver().map(|a| a.to_string()), Some("rule:default.same-host-link".to_owned()));
//!
//! // A person rule of the pack wins over the auto rule: a plain link is
//! // judged by where it leads, which here does the deed.
//! let delete = link("Your data", "https://docs.example.com/account/delete")?;
//! let decided = rules.decide(ProposedTarget { url: &url, action: &action, element: Some(&delete) });
//! assert_eq!((decided.tier, decided.rule.map(|r| r.id())), (Tier::Person, Some("default.deed-in-path")));
//!
//! // No element found: never auto.
//! let decided = rules.decide(ProposedTarget { url: &url, action: &action, element: None });
//! assert_eq!((decided.tier, decided.rule), (Tier::Person, None));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

#[cfg(feature = "serde")]
mod config;
mod facts;
mod index;
mod pack;
mod pattern;
mod rule;
mod set;

#[cfg(feature = "serde")]
pub use config::{AllowedWriteConfig, DefaultPackConfig, RuleConfig, RulesConfig};
pub use countersign_approval_core::RULE_APPROVER_PREFIX;
pub use facts::ProposedTarget;
pub use pack::{DEFAULT_PACK, PackRule};
pub use pattern::HostPattern;
pub use rule::{Rule, Tier};
pub use set::{
    DEFAULT_AUTO_GRANT_TTL, Decision, MAX_REASON_BYTES, MAX_RULE_ID_BYTES, MAX_RULES, RuleError,
    RuleSet, RuleSetBuilder,
};
