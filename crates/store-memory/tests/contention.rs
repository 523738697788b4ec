#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The in-memory store under heavy contention from many OS threads and many
//! tasks at once: every grant has exactly one winner.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use countersign_approval_core::{
    Approval, ApprovalId, ApprovalStore, AttemptId, Binding, ConsumeOutcome, GrantState,
    RevokeOutcome, StaleReason, Timestamp,
};
use countersign_store_memory::InMemoryApprovalStore;

const THREADS: usize = 16;
const GRANTS: usize = 600;

fn now() -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000)
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Issues `count` grants with the same binding.
fn grants(store: &InMemoryApprovalStore, count: usize) -> Vec<(ApprovalId, Binding)> {
    current_thread().block_on(async {
        let (actor, run, url, action) = common::fixtures().await;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let approval = Approval::for_action(
                actor.clone(),
                run.clone(),
                &url,
                &action,
                Duration::from_secs(60),
                now(),
            )
            .unwrap();
            out.push((approval.id.clone(), approval.binding()));
            store.issue(approval).await.unwrap();
        }
        out
    })
}

#[test]
fn many_threads_consume_each_grant_exactly_once() {
    let store = Arc::new(InMemoryApprovalStore::new());
    let grants = Arc::new(grants(&store, GRANTS));
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (store, grants, barrier) = (store.clone(), grants.clone(), barrier.clone());
            std::thread::spawn(move || {
                let runtime = current_thread();
                let attempt = AttemptId::generate().unwrap();
                barrier.wait();
                let mut won = Vec::new();
                // Each thread walks the grants from a different starting point.
                for step in 0..GRANTS {
                    let (id, binding) = &grants[(step + thread * GRANTS / THREADS) % GRANTS];
                    let answer = runtime
                        .block_on(store.consume_once(id, binding, now(), &attempt))
                        .unwrap();
                    match answer {
                        ConsumeOutcome::Consumed { replay: false } => won.push(id.clone()),
                        ConsumeOutcome::Stale(StaleReason::Consumed) => {}
                        other => panic!("unexpected answer {other:?}"),
                    }
                }
                (attempt, won)
            })
        })
        .collect();

    let mut winners: HashMap<ApprovalId, AttemptId> = HashMap::new();
    for handle in handles {
        let (attempt, won) = handle.join().unwrap();
        for id in won {
            assert!(
                winners.insert(id.clone(), attempt.clone()).is_none(),
                "grant {id} was won twice"
            );
        }
    }
    assert_eq!(winners.len(), GRANTS, "every grant has exactly one winner");
    let runtime = current_thread();
    for (id, _) in grants.iter() {
        let stored = runtime.block_on(store.get(id)).unwrap().unwrap();
        match stored.state {
            GrantState::Consumed { by, .. } => assert_eq!(by, winners[id]),
            other => panic!("grant {id} ended {other:?}"),
        }
    }
}

#[test]
fn threads_and_tasks_racing_revokes_and_consumes_have_one_winner_per_grant() {
    let store = Arc::new(InMemoryApprovalStore::new());
    let grants = Arc::new(grants(&store, GRANTS));
    // OS threads consume while tasks on a multi-thread runtime revoke.
    let consumers = THREADS / 2;
    let barrier = Arc::new(Barrier::new(consumers + 1));
    let consumer_handles: Vec<_> = (0..consumers)
        .map(|thread| {
            let (store, grants, barrier) = (store.clone(), grants.clone(), barrier.clone());
            std::thread::spawn(move || {
                let runtime = current_thread();
                let attempt = AttemptId::generate().unwrap();
                barrier.wait();
                let mut won = Vec::new();
                for step in 0..GRANTS {
                    let (id, binding) = &grants[(step + thread * 37) % GRANTS];
                    match runtime
                        .block_on(store.consume_once(id, binding, now(), &attempt))
                        .unwrap()
                    {
                        ConsumeOutcome::Consumed { replay: false } => won.push(id.clone()),
                        ConsumeOutcome::Stale(StaleReason::Consumed | StaleReason::Revoked) => {}
                        other => panic!("unexpected consume answer {other:?}"),
                    }
                }
                won
            })
        })
        .collect();

    let tasks = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let revoked: Vec<ApprovalId> = tasks.block_on(async {
        barrier.wait();
        let mut handles = Vec::new();
        for task in 0..64 {
            let (store, grants) = (store.clone(), grants.clone());
            handles.push(tokio::spawn(async move {
                let mut won = Vec::new();
                for step in 0..GRANTS / 8 {
                    let (id, _) = &grants[(task * 7 + step * 8) % GRANTS];
                    match store.revoke(id).await.unwrap() {
                        RevokeOutcome::Revoked => won.push(id.clone()),
                        RevokeOutcome::AlreadyRevoked | RevokeOutcome::AlreadyConsumed => {}
                        RevokeOutcome::Unknown => panic!("grant {id} unknown"),
                    }
                    tokio::task::yield_now().await;
                }
                won
            }));
        }
        let mut all = Vec::new();
        for handle in handles {
            all.extend(handle.await.unwrap());
        }
        all
    });

    let mut winners: HashMap<ApprovalId, &str> = HashMap::new();
    for id in revoked {
        assert!(winners.insert(id, "revoke").is_none(), "revoked twice");
    }
    for handle in consumer_handles {
        for id in handle.join().unwrap() {
            if let Some(previous) = winners.insert(id.clone(), "consume") {
                panic!("grant {id} was won by a consume and by a {previous}");
            }
        }
    }
    // Every grant was consumed by someone or revoked, never both.
    assert_eq!(winners.len(), GRANTS);
    let runtime = current_thread();
    for (id, winner) in &winners {
        let state = runtime.block_on(store.get(id)).unwrap().unwrap().state;
        match (*winner, state) {
            ("revoke", GrantState::Revoked) | ("consume", GrantState::Consumed { .. }) => {}
            (winner, state) => panic!("grant {id} won by {winner} but ended {state:?}"),
        }
    }
}
