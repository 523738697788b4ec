//! A backend that refused before dispatching anything: the consume is given
//! back with the same attempt id; a backend that may have acted keeps the
//! grant consumed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{FlakyStore, Harness, TTL, URL, bound_page, call_for, click, policy};
use countersign_act_tool::approval::{
    AbandonOutcome, ActorId, ApprovalStore, GrantState, OutcomeCode, RunId, StoreError,
};
use countersign_act_tool::{Act, Context, RetryPolicy, issue_grant, issue_page_grant};
use countersign_backend_fake::FakeBackend;

fn flaky() -> (Arc<FlakyStore>, Harness) {
    let store = Arc::new(FlakyStore::new(StoreError::unavailable("connection reset")));
    let h = Harness::with_store(Some(store.clone()));
    (store, h)
}

#[tokio::test]
async fn nothing_dispatched_gives_the_grant_back_for_one_later_call() {
    let (store, h) = flaky();
    let grant = h.grant_click().await;
    let call = call_for(URL, grant.id.as_str(), &click());
    h.backend.fail_before_dispatch(true);
    h.backend.fail_next();

    let refused = h.expect_refused(&call, "BACKEND_FAILED").await;
    assert_eq!(
        refused["error"]["message"],
        "backend refused before acting; nothing was performed; the approval is still usable"
    );
    let record = h.last_record();
    assert_eq!(record.outcome, OutcomeCode::BackendFailed);
    assert_eq!(
        record.reason,
        "backend refused before dispatching: fake backend was told to fail before dispatching; \
         abandon: restored"
    );
    // Given back once, with the attempt id that consumed it.
    let attempts = store.attempts();
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        store.abandons(),
        vec![(
            attempts[0].clone(),
            Ok(AbandonOutcome::Usable { restored: true })
        )]
    );
    let stored = store.get(&grant.id).await.unwrap().unwrap();
    assert_eq!(stored.state, GrantState::Active);
    assert!(h.backend.is_empty());
    assert_eq!(h.backend.failures(), 1);

    // A new call uses it, once, with a new attempt id.
    h.expect_ok(&call).await;
    assert_eq!(h.backend.len(), 1);
    let attempts = store.attempts();
    assert_eq!(attempts.len(), 2);
    assert_ne!(attempts[0], attempts[1]);
    let again = h.expect_refused(&call, "APPROVAL_STALE").await;
    assert_eq!(again["error"]["message"], "approval was already used");
    assert_eq!(h.backend.len(), 1);
    assert_eq!(store.abandons().len(), 1);
}

#[tokio::test]
async fn a_backend_that_may_have_acted_keeps_the_grant_consumed() {
    let (store, h) = flaky();
    let grant = h.grant_click().await;
    let call = call_for(URL, grant.id.as_str(), &click());
    h.backend.fail_next(); // the default: the backend may have acted
    let refused = h.expect_refused(&call, "BACKEND_FAILED").await;
    assert_eq!(
        refused["error"]["message"],
        "backend failed to perform the action; the approval was used up"
    );
    assert!(store.abandons().is_empty(), "nothing is given back");
    let stored = store.get(&grant.id).await.unwrap().unwrap();
    assert!(matches!(stored.state, GrantState::Consumed { .. }));
    h.expect_refused(&call, "APPROVAL_STALE").await;
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn a_give_back_that_fails_is_bounded_and_says_the_approval_may_be_used_up() {
    let store = Arc::new(FlakyStore::new(StoreError::unavailable("connection reset")));
    let backend = FakeBackend::new();
    let context = Context::builder()
        .actor_id(ActorId::new("actor-1").unwrap())
        .run_id(RunId::new("run-1").unwrap())
        .backend(backend.clone())
        .source_policy(policy())
        .operation_store(countersign_store_memory::InMemoryOperationStore::new())
        .approval_store(store.clone())
        .consume_retry(RetryPolicy::no_retry())
        .abandon_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let grant = issue_grant(&context, URL, &click(), Duration::from_secs(60))
        .await
        .unwrap();
    backend.fail_before_dispatch(true);
    backend.fail_next();
    store.fail_abandons(usize::MAX);
    let started = std::time::Instant::now();
    let result = Act::new(context)
        .execute_json(&call_for(URL, grant.id.as_str(), &click()))
        .await;
    assert_eq!(result["error"]["code"], "BACKEND_FAILED");
    assert_eq!(
        result["error"]["message"],
        "backend refused before acting; nothing was performed; the approval may have been used up"
    );
    let abandons = store.abandons();
    assert!(abandons.len() >= 2, "retried: {abandons:?}");
    let attempt = &store.attempts()[0];
    assert!(
        abandons
            .iter()
            .all(|(a, answer)| a == attempt && answer.is_err())
    );
    // Bounded: a 300 ms budget, however loaded the machine, ends well within a minute.
    assert!(started.elapsed() < Duration::from_secs(60));
    let stored = store.get(&grant.id).await.unwrap().unwrap();
    assert!(matches!(stored.state, GrantState::Consumed { .. }));
}

#[tokio::test]
async fn a_page_bound_grant_is_given_back_too() {
    let h = Harness::new();
    let page = bound_page("r1");
    h.backend.set_page(Some(page.clone()));
    let grant = issue_page_grant(&h.context, &page, URL, &click(), TTL)
        .await
        .unwrap();
    let call = call_for(URL, grant.id.as_str(), &click());
    h.backend.fail_before_dispatch(true);
    h.backend.fail_next();
    h.expect_refused(&call, "BACKEND_FAILED").await;
    let stored = h.store().get(&grant.id).await.unwrap().unwrap();
    assert_eq!(stored.state, GrantState::Active);
    h.expect_ok(&call).await;
    assert_eq!(h.backend.len(), 1);
}
