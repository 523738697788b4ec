#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! N uses authorise at most N under concurrency, for any N and any number
//! of contenders: all start together at a barrier, and exactly
//! `min(N, contenders)` take a use. 64 cases in CI;
//! `COUNTERSIGN_STANDING_CASES` sets more.

use std::sync::Arc;
use std::time::Duration;

use countersign_approval_core::{
    ActorId, Approver, ApproverId, AttemptId, ProposalStore, RunId, StaleReason, StandingGrant,
    StandingScope, Timestamp, UseOutcome,
};
use countersign_store_memory::InMemoryApprovalStore;
use proptest::prelude::*;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn race(uses: u32, contenders: usize) -> usize {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = Arc::new(InMemoryApprovalStore::new());
        let scope = StandingScope::from_facts(
            "https://shop.example.com/results",
            "click",
            "button",
            "Next page",
        )
        .unwrap();
        let approver = Approver {
            id: ApproverId::new("carol").unwrap(),
            approved_at: T0,
        };
        let grant = StandingGrant::new(
            ActorId::new("actor").unwrap(),
            RunId::new("run").unwrap(),
            &scope,
            uses,
            Duration::from_secs(60),
            T0,
            approver,
        )
        .unwrap();
        let (id, key) = (grant.id.clone(), grant.key());
        store.issue_standing(grant).await.unwrap();
        let start = Arc::new(tokio::sync::Barrier::new(contenders));
        let tasks: Vec<_> = (0..contenders)
            .map(|_| {
                let (store, start, id, key) =
                    (store.clone(), start.clone(), id.clone(), key.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    let attempt = AttemptId::generate().unwrap();
                    store.use_standing(&id, &key, T0, &attempt).await.unwrap()
                })
            })
            .collect();
        let mut used = 0;
        for task in tasks {
            match task.await.unwrap() {
                UseOutcome::Used { replay: false, .. } => used += 1,
                UseOutcome::Stale(StaleReason::Consumed) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        let stored = store.get_standing(&id).await.unwrap().unwrap();
        assert_eq!(stored.used_by.len(), used);
        used
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("COUNTERSIGN_STANDING_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(64)
    ))]

    #[test]
    fn n_uses_authorise_at_most_n_under_concurrency(uses in 1u32..=8, contenders in 1usize..=24) {
        prop_assert_eq!(race(uses, contenders), (uses as usize).min(contenders));
    }
}
