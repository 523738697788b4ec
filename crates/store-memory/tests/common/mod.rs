//! What the store-memory tests share: one authorised URL and action, and the
//! host ids that grants for them bind.

use countersign_approval_core::policy::{Action, AuthorizedUrl, Policy, StaticResolver};
use countersign_approval_core::{ActorId, RunId};

/// The actor, run, canonical URL and action every test grant binds.
pub async fn fixtures() -> (ActorId, RunId, AuthorizedUrl, Action) {
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
}
