//! One actor, run, URL and action, shared by the tests of this crate.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use countersign_approval_core::policy::{Action, AuthorizedUrl, Policy, StaticResolver};
use countersign_approval_core::{ActorId, RunId};

/// Actor `actor`, run `run`, `https://shop.example.com/cart` and a click on `#buy`.
pub fn fixtures() -> (ActorId, RunId, AuthorizedUrl, Action) {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async {
            let policy = Policy::builder()
                .allow_host("shop.example.com")
                .resolver(StaticResolver::answering_all(["93.184.216.34"
                    .parse()
                    .unwrap()]))
                .build()
                .unwrap();
            let url = policy
                .authorize_destination("https://shop.example.com/cart")
                .await
                .unwrap();
            let action = policy
                .authorize_action(&serde_json::json!({"method": "click", "selector": "#buy"}))
                .unwrap();
            (
                ActorId::new("actor").unwrap(),
                RunId::new("run").unwrap(),
                url,
                action,
            )
        })
}
