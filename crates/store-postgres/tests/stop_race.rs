//! An emergency stop racing consumes: 64 tasks sharing one store (a pool of
//! 64 connections) consume the 500 grants of one run (every task walks every
//! grant, from its own starting point) while another task stops the run
//! through a store of its own (the host's control path, its connection
//! already open), at READ COMMITTED, REPEATABLE READ and SERIALIZABLE.
//!
//! Every `ok` was consumed (its `consumed_at`, the caller's clock when the
//! consume began) before `stop_run` returned; no consume that began after
//! `stop_run` returned answered `ok`; the `ok`s and the stop's count add up
//! to the 500 grants; and the stop does not wait for the consumes to run
//! out (consumes queue behind it). The three levels run one after the
//! other.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use countersign_approval_core::{
    ActorId, ApprovalStore, AttemptId, ConsumeOutcome, GrantState, RunId, StaleReason, Timestamp,
};
use support::{Isolation, grant, now, options_for, shared_server};

const TASKS: usize = 64;
const GRANTS: usize = 500;
/// The stop begins once this many grants were consumed.
const STOP_AFTER_OKS: usize = GRANTS / 4;
const TTL: Duration = Duration::from_secs(600);

/// One consume as a task saw it.
struct Seen {
    grant: usize,
    attempt: AttemptId,
    /// The caller's clock when it began: the consume's `now`.
    at: Timestamp,
    began: Instant,
    ended: Instant,
    outcome: ConsumeOutcome,
}

/// One race at a time: the three share the test server (and the machine).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn race(isolation: Isolation) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let options = options_for(shared_server(), "stop_race", isolation);
    let store = Arc::new(
        countersign_store_postgres::PostgresApprovalStore::connect(
            options.clone().pool_size(TASKS),
        )
        .await
        .unwrap(),
    );
    let control = countersign_store_postgres::PostgresApprovalStore::connect(options)
        .await
        .unwrap();
    let (actor, run) = (
        ActorId::new(support::ACTOR).unwrap(),
        RunId::new(support::RUN).unwrap(),
    );
    let t0 = now();
    let mut grants = Vec::with_capacity(GRANTS);
    for _ in 0..GRANTS {
        let approval = grant("button#stop", TTL, t0).await;
        store.issue(approval.clone()).await.unwrap();
        grants.push(approval);
    }
    let grants = Arc::new(grants);
    let oks = Arc::new(AtomicUsize::new(0));

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (store, grants, oks) = (store.clone(), grants.clone(), oks.clone());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::with_capacity(GRANTS);
            let start = task * 7919 % GRANTS;
            for k in 0..GRANTS {
                let n = (start + k) % GRANTS;
                let approval = &grants[n];
                let attempt = AttemptId::generate().unwrap();
                let at = now();
                let began = Instant::now();
                let outcome = store
                    .consume_once(&approval.id, &approval.binding(), at, &attempt)
                    .await
                    .unwrap_or_else(|e| panic!("grant {n}: a consume failed: {e}"));
                let ended = Instant::now();
                if outcome == (ConsumeOutcome::Consumed { replay: false }) {
                    oks.fetch_add(1, Ordering::SeqCst);
                }
                seen.push(Seen {
                    grant: n,
                    attempt,
                    at,
                    began,
                    ended,
                    outcome,
                });
            }
            seen
        }));
    }

    while oks.load(Ordering::SeqCst) < STOP_AFTER_OKS {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let stop_began = Instant::now();
    let stopped = control.stop_run(&actor, &run, now()).await.unwrap();
    let stop_returned = Instant::now();
    let stop_returned_at = now();
    let oks_at_return = oks.load(Ordering::SeqCst);

    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("no consumer panicked"));
    }
    assert_eq!(all.len(), TASKS * GRANTS);

    let mut winner: Vec<Option<&Seen>> = vec![None; GRANTS];
    let (mut after_return, mut stale_stopped, mut stale_consumed) = (0, 0, 0);
    for seen in &all {
        if seen.began > stop_returned {
            after_return += 1;
            assert_eq!(
                seen.outcome,
                ConsumeOutcome::Stale(StaleReason::Stopped),
                "grant {}: a consume that began after stop_run returned",
                seen.grant
            );
        }
        match seen.outcome {
            ConsumeOutcome::Consumed { replay: false } => {
                assert!(
                    winner[seen.grant].replace(seen).is_none(),
                    "grant {}: two oks",
                    seen.grant
                );
                assert!(seen.began < stop_returned, "grant {}", seen.grant);
            }
            ConsumeOutcome::Stale(StaleReason::Stopped) => {
                stale_stopped += 1;
                assert!(
                    seen.ended > stop_began,
                    "grant {}: stopped before the stop began",
                    seen.grant
                );
            }
            ConsumeOutcome::Stale(StaleReason::Consumed) => stale_consumed += 1,
            other => panic!("grant {}: unexpected {other:?}", seen.grant),
        }
    }
    let ok = winner.iter().filter(|w| w.is_some()).count();
    eprintln!(
        "stop race at {isolation:?}: {} consumes by {TASKS} tasks on {GRANTS} grants; stop_run \
         took {:?} with {} oks when it began and {oks_at_return} when it returned; {ok} ok, \
         {} stopped by it, {stale_stopped} Stale(Stopped) ({after_return} begun after it \
         returned), {stale_consumed} Stale(Consumed)",
        all.len(),
        stop_returned - stop_began,
        STOP_AFTER_OKS,
        stopped.stopped_grants,
    );
    assert!(!stopped.was_stopped);
    assert_eq!(
        ok as u64 + stopped.stopped_grants,
        GRANTS as u64,
        "the oks and the stop's count add up"
    );
    assert!(
        after_return > 0,
        "some consumes began after the stop returned"
    );
    assert!(
        ok < GRANTS,
        "the stop waited for the consumes to run out instead of stopping them"
    );

    // The store agrees: each ok's grant is consumed by it, at its `now`,
    // before the stop returned; every other grant reads Stopped.
    for (n, approval) in grants.iter().enumerate() {
        let stored = store.get(&approval.id).await.unwrap().unwrap();
        match winner[n] {
            Some(seen) => {
                assert_eq!(
                    stored.state,
                    GrantState::Consumed {
                        at: seen.at,
                        by: seen.attempt.clone()
                    },
                    "grant {n}"
                );
                assert!(seen.at <= stop_returned_at, "grant {n}: consumed_at");
            }
            None => assert_eq!(stored.state, GrantState::Stopped, "grant {n}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_run_racing_64_consumers_at_read_committed() {
    race(Isolation::ReadCommitted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_run_racing_64_consumers_at_repeatable_read() {
    race(Isolation::RepeatableRead).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_run_racing_64_consumers_at_serializable() {
    race(Isolation::Serializable).await;
}
