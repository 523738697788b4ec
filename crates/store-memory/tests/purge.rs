#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Retention purges of the in-memory stores drop exactly the records past
//! their window and nothing else.

mod common;

use std::time::Duration;

use countersign_approval_core::{
    ActorId, Approval, ApprovalStore, AttemptId, ConsumeOutcome, GivenApprovalId, GrantState,
    OperationId, OperationLog, OperationRecord, OutcomeCode, RevokeOutcome, RunId, Timestamp,
};
use countersign_store_memory::{DEFAULT_RETENTION, InMemoryApprovalStore, InMemoryOperationStore};

const HOUR: Duration = Duration::from_secs(3_600);
const T0: u64 = 1_700_000_000_000;

fn at(millis: u64) -> Timestamp {
    Timestamp::from_millis(T0 + millis)
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

/// Issues a grant valid from `issued` for `ttl_ms`.
async fn issue(store: &InMemoryApprovalStore, issued: u64, ttl_ms: u64) -> Approval {
    let (actor, run, url, action) = common::fixtures().await;
    let approval = Approval::for_action(
        actor,
        run,
        &url,
        &action,
        Duration::from_millis(ttl_ms),
        at(issued),
    )
    .unwrap();
    store.issue(approval.clone()).await.unwrap();
    approval
}

#[test]
fn purge_drops_exactly_the_grants_past_expiry_plus_retention() {
    block_on(async {
        let store = InMemoryApprovalStore::new();
        assert_eq!(store.purge(at(0), HOUR).unwrap(), 0, "empty store");
        assert!(store.is_empty().unwrap());

        // Three grants expiring at 60 s: active, revoked, consumed.
        let active = issue(&store, 0, 60_000).await;
        let revoked = issue(&store, 0, 60_000).await;
        let consumed = issue(&store, 0, 60_000).await;
        assert_eq!(
            store.revoke(&revoked.id).await.unwrap(),
            RevokeOutcome::Revoked
        );
        let attempt = AttemptId::generate().unwrap();
        assert_eq!(
            store
                .consume_once(&consumed.id, &consumed.binding(), at(10_000), &attempt)
                .await
                .unwrap(),
            ConsumeOutcome::Consumed { replay: false }
        );
        // One expiring at 2 h, one at 24 h.
        let later = issue(&store, 0, 2 * 3_600_000).await;
        let longest = issue(&store, 0, 24 * 3_600_000).await;
        assert_eq!(store.len().unwrap(), 5);

        // Before the first window closes nothing goes.
        let first_window = 60_000 + 3_600_000;
        assert_eq!(store.purge(at(first_window - 1), HOUR).unwrap(), 0);
        assert_eq!(store.len().unwrap(), 5);

        // At expires_at + retention the three 60 s grants go, whatever their state.
        assert_eq!(store.purge(at(first_window), HOUR).unwrap(), 3);
        assert_eq!(store.len().unwrap(), 2);
        for gone in [&active, &revoked, &consumed] {
            assert_eq!(store.get(&gone.id).await.unwrap(), None);
            assert_eq!(
                store
                    .consume_once(&gone.id, &gone.binding(), at(first_window), &attempt)
                    .await
                    .unwrap(),
                ConsumeOutcome::Unknown
            );
        }
        let kept = store.get(&later.id).await.unwrap().unwrap();
        assert_eq!(kept.approval, later);
        assert_eq!(kept.state, GrantState::Active);

        // Purging again at the same time is a no-op.
        assert_eq!(store.purge(at(first_window), HOUR).unwrap(), 0);

        // Retention zero: a grant goes as soon as it is expired.
        assert_eq!(
            store.purge(at(2 * 3_600_000 - 1), Duration::ZERO).unwrap(),
            0
        );
        assert_eq!(store.purge(at(2 * 3_600_000), Duration::ZERO).unwrap(), 1);
        assert_eq!(store.get(&later.id).await.unwrap(), None);

        // The default retention keeps the 24 h grant 15 minutes past its
        // expiry.
        let day = 24 * 3_600_000;
        let retention = 15 * 60_000;
        assert_eq!(DEFAULT_RETENTION, Duration::from_millis(retention));
        assert_eq!(
            store
                .purge(at(day + retention - 1), DEFAULT_RETENTION)
                .unwrap(),
            0
        );
        assert!(store.get(&longest.id).await.unwrap().is_some());
        assert_eq!(
            store.purge(at(day + retention), DEFAULT_RETENTION).unwrap(),
            1
        );
        assert!(store.is_empty().unwrap());
    });
}

#[test]
fn purge_counts_many_grants_exactly() {
    block_on(async {
        let store = InMemoryApprovalStore::new();
        // Grant n expires at (n + 1) seconds.
        for n in 0..100 {
            issue(&store, 0, (n + 1) * 1_000).await;
        }
        // With one second of retention, at 51 s the grants expiring at 1..=50 s go.
        assert_eq!(store.purge(at(51_000), Duration::from_secs(1)).unwrap(), 50);
        assert_eq!(store.len().unwrap(), 50);
        assert_eq!(store.purge(at(51_500), Duration::from_secs(1)).unwrap(), 0);
        assert_eq!(
            store.purge(at(200_000), Duration::MAX).unwrap(),
            0,
            "a window that saturates keeps everything"
        );
        assert_eq!(
            store.purge(at(101_000), Duration::from_secs(1)).unwrap(),
            50
        );
        assert!(store.is_empty().unwrap());
    });
}

fn record(finished: u64) -> OperationRecord {
    OperationRecord {
        operation_id: OperationId::generate().unwrap(),
        actor_id: ActorId::new("actor").unwrap(),
        run_id: RunId::new("run").unwrap(),
        approval_id: GivenApprovalId::from_text(&format!("apr_{finished}")),
        url: None,
        action_digest: None,
        approver_id: None,
        outcome: OutcomeCode::ApprovalRequired,
        reason: "approval id is missing".to_owned(),
        started_at: at(finished.saturating_sub(5)),
        finished_at: at(finished),
    }
}

#[test]
fn operation_purge_drops_exactly_the_records_past_retention_and_keeps_order() {
    block_on(async {
        let log = InMemoryOperationStore::new();
        assert_eq!(log.purge(at(0), HOUR).unwrap(), 0);
        // Finished at 0, 10, 20, ... 90 s, written out of order.
        for finished in [30, 0, 90, 10, 60, 20, 80, 40, 70, 50] {
            log.record(record(finished * 1_000)).await.unwrap();
        }
        assert_eq!(log.len().unwrap(), 10);

        let retention = Duration::from_secs(30);
        // At 65 s: records finished at or before 35 s go (0, 10, 20, 30).
        assert_eq!(log.purge(at(65_000), retention).unwrap(), 4);
        let left: Vec<u64> = log
            .records()
            .unwrap()
            .iter()
            .map(|r| (r.finished_at.as_millis() - T0) / 1_000)
            .collect();
        assert_eq!(left, [90, 60, 80, 40, 70, 50], "order of writing is kept");

        // The boundary: finished_at + retention == now goes, one ms earlier stays.
        assert_eq!(log.purge(at(69_999), retention).unwrap(), 0);
        assert_eq!(log.purge(at(70_000), retention).unwrap(), 1);
        assert_eq!(log.len().unwrap(), 5);

        assert_eq!(log.purge(at(120_000), retention).unwrap(), 5);
        assert!(log.is_empty().unwrap());
        assert_eq!(log.purge(at(120_000), retention).unwrap(), 0);
    });
}

#[test]
fn purge_works_in_bounded_steps_oldest_expiry_first() {
    block_on(async {
        let store = InMemoryApprovalStore::new();
        // Grant n expires at (100 - n) seconds: issue order is not expiry order.
        let mut grants = Vec::new();
        for n in 0..100u64 {
            grants.push(issue(&store, 0, (100 - n) * 1_000).await);
        }
        let now = at(200_000);
        assert_eq!(
            store.purge_some(now, HOUR, 10).unwrap(),
            0,
            "inside the window"
        );
        let now = at(101_000);
        assert_eq!(store.purge_some(now, Duration::ZERO, 10).unwrap(), 10);
        assert_eq!(store.len().unwrap(), 90);
        // The ten that went are the ten earliest expiries (issued last).
        for gone in &grants[90..] {
            assert_eq!(store.get(&gone.id).await.unwrap(), None);
        }
        for kept in &grants[..90] {
            assert!(store.get(&kept.id).await.unwrap().is_some());
        }
        // A limit of zero drops nothing; the rest goes in one purge.
        assert_eq!(store.purge_some(now, Duration::ZERO, 0).unwrap(), 0);
        assert_eq!(store.purge(now, Duration::ZERO).unwrap(), 90);
        assert!(store.is_empty().unwrap());
    });
}

#[test]
fn purge_in_many_batches_drops_every_grant_past_its_window() {
    block_on(async {
        let store = InMemoryApprovalStore::new();
        let batches = countersign_store_memory::PURGE_BATCH * 2 + 7;
        for _ in 0..batches {
            issue(&store, 0, 1_000).await;
        }
        let keep = issue(&store, 0, 10_000).await;
        assert_eq!(
            store.purge(at(1_000), Duration::ZERO).unwrap(),
            batches,
            "a purge keeps going until every grant past its window is gone"
        );
        assert_eq!(store.len().unwrap(), 1);
        assert!(store.get(&keep.id).await.unwrap().is_some());
    });
}
