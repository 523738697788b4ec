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

/// When every test's clock starts.
pub const START: countersign_approval_core::Timestamp =
    countersign_approval_core::Timestamp::from_millis(1_800_000_000_000);

/// An in-memory store with its outbox on, and the injected clock.
pub struct Host {
    pub store: std::sync::Arc<countersign_store_memory::InMemoryApprovalStore>,
    pub clock: countersign_approval_core::ManualClock,
}

impl Host {
    pub fn new() -> Host {
        Host {
            store: std::sync::Arc::new(
                countersign_store_memory::InMemoryApprovalStore::new().with_notification_outbox(),
            ),
            clock: countersign_approval_core::ManualClock::new(START),
        }
    }

    /// A worker over this store and clock, linking each proposal to
    /// `https://approve.example.com/proposals/<id>` and `link_suffix`.
    pub fn worker(
        &self,
        notifiers: Vec<std::sync::Arc<dyn countersign_notify::ProposalNotifier>>,
        options: countersign_notify::WorkerOptions,
        link_suffix: &'static str,
    ) -> countersign_notify::NotificationWorker {
        countersign_notify::NotificationWorker::new(
            self.store.clone(),
            notifiers,
            std::sync::Arc::new(self.clock.clone()),
            std::sync::Arc::new(move |id| {
                format!("https://approve.example.com/proposals/{id}{link_suffix}")
            }),
            options,
        )
    }
}
