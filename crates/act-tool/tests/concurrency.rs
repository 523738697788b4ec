//! Concurrent calls on one grant: exactly one performs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::{Harness, URL, call_for, click};
use countersign_act_tool::approval::OutcomeCode;
use tokio::sync::Barrier;

async fn race(contenders: usize) {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let call = Arc::new(call_for(URL, grant.id.as_str(), &click()));
    let barrier = Arc::new(Barrier::new(contenders));
    let mut tasks = Vec::new();
    for _ in 0..contenders {
        let (act, call, barrier) = (h.act.clone(), call.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            act.execute_json(&call).await
        }));
    }
    let mut ok = 0;
    let mut stale = 0;
    for task in tasks {
        let result = task.await.unwrap();
        match result["status"].as_str().unwrap() {
            "ok" => ok += 1,
            _ => {
                assert_eq!(result["error"]["code"], "APPROVAL_STALE", "{result}");
                stale += 1;
            }
        }
    }
    assert_eq!(ok, 1, "exactly one contender performs");
    assert_eq!(stale, contenders - 1);
    assert_eq!(
        h.backend.len(),
        1,
        "the backend recorded exactly one action"
    );
    let records = h.records();
    assert_eq!(records.len(), contenders, "one operation record per call");
    assert_eq!(
        records
            .iter()
            .filter(|r| r.outcome == OutcomeCode::Ok)
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_concurrent_calls_one_ok() {
    for _ in 0..50 {
        race(2).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_calls_one_ok() {
    for _ in 0..10 {
        race(64).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_from_two_acts_sharing_a_store() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let call = Arc::new(call_for(URL, grant.id.as_str(), &click()));
    // A second Act for the same actor and run (e.g. another worker) sharing the store.
    let twin = h.as_other("actor-1", "run-1");
    let mut tasks = Vec::new();
    for i in 0..32 {
        let act = if i % 2 == 0 {
            h.act.clone()
        } else {
            twin.clone()
        };
        let call = call.clone();
        tasks.push(tokio::spawn(async move { act.execute_json(&call).await }));
    }
    let mut ok = 0;
    for task in tasks {
        if task.await.unwrap()["status"] == "ok" {
            ok += 1;
        }
    }
    assert_eq!(ok, 1);
    assert_eq!(h.backend.len(), 1);
}
