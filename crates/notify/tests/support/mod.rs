//! What both notification test files set up.

// Each test file uses some of these.
#![allow(clippy::unwrap_used, dead_code)]

use countersign_approval_core::policy::{Policy, StaticResolver};

/// A policy allowing `shop.example.com`, resolved to a public address.
pub fn shop_policy() -> Policy {
    Policy::builder()
        .allow_host("shop.example.com")
        .resolver(StaticResolver::answering_all([std::net::IpAddr::from([
            93, 184, 216, 34,
        ])]))
        .build()
        .unwrap()
}

/// Stores, for `demo-agent` in `run-7`, a proposal to fill `selector` on
/// `url` with `value`, made at `now` and pending for `ttl`.
pub async fn propose_fill(
    store: &dyn countersign_approval_core::ProposalStore,
    url: &str,
    selector: &str,
    value: &str,
    ttl: std::time::Duration,
    now: countersign_approval_core::Timestamp,
) -> countersign_approval_core::Proposal {
    let policy = shop_policy();
    let url = policy.authorize_destination(url).await.unwrap();
    let action = policy
        .authorize_action(&serde_json::json!({
            "method": "fill", "selector": selector, "arguments": {"value": value}
        }))
        .unwrap();
    let proposal = countersign_approval_core::Proposal::for_action(
        countersign_approval_core::ActorId::new("demo-agent").unwrap(),
        countersign_approval_core::RunId::new("run-7").unwrap(),
        &url,
        &action,
        ttl,
        now,
    )
    .unwrap();
    store.propose(proposal.clone()).await.unwrap();
    proposal
}
