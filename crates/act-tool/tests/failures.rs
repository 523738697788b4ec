//! Store and backend failures: retries with one attempt id, fail closed,
//! a consumed grant stays consumed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{BrokenLog, FlakyStore, Harness, URL, call_for, click, policy};
use countersign_act_tool::approval::{
    AbandonOutcome, ActorId, ApprovalStore, ConsumeOutcome, GrantState, OutcomeCode, RunId,
    StoreError,
};
use countersign_act_tool::{Act, Context, RetryPolicy, issue_grant};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryApprovalStore;

fn flaky(error: StoreError) -> (Arc<FlakyStore>, Harness) {
    let store = Arc::new(FlakyStore::new(error));
    let h = Harness::with_store(Some(store.clone()));
    (store, h)
}

fn all_same<T: PartialEq + std::fmt::Debug>(items: &[T]) {
    assert!(items.windows(2).all(|w| w[0] == w[1]), "{items:?}");
}

#[tokio::test]
async fn backend_failure_is_backend_failed_and_the_grant_stays_consumed() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let call = call_for(URL, grant.id.as_str(), &click());
    h.backend.fail_next();
    let result = h.run(&call).await;
    assert_eq!(result["status"], "error");
    assert_eq!(result["error"]["code"], "BACKEND_FAILED");
    assert_eq!(
        result["error"]["message"],
        "backend failed to perform the action; the approval was used up"
    );
    assert!(h.backend.is_empty());
    assert_eq!(h.backend.failures(), 1);
    let record = h.last_record();
    assert_eq!(record.outcome, OutcomeCode::BackendFailed);
    assert_eq!(
        record.reason,
        "backend failed: fake backend was told to fail"
    );

    let stored = h.store().get(&grant.id).await.unwrap().unwrap();
    assert!(matches!(stored.state, GrantState::Consumed { .. }));
    let again = h.expect_refused(&call, "APPROVAL_STALE").await;
    assert_eq!(again["error"]["message"], "approval was already used");
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn retryable_errors_are_retried_with_the_same_attempt_id() {
    let (store, h) = flaky(StoreError::unavailable("connection reset"));
    let grant = h.grant_click().await;
    store.fail_before(2);
    let result = h
        .expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
    assert_eq!(result["status"], "ok");
    let attempts = store.attempts();
    assert_eq!(attempts.len(), 3);
    all_same(&attempts);
    assert_eq!(h.records().len(), 1);
}

#[tokio::test]
async fn always_failing_store_is_store_unavailable_and_performs_nothing() {
    let (store, h) = flaky(StoreError::Timeout {
        message: "no reply in 1s".into(),
    });
    let grant = h.grant_click().await;
    store.fail_before(usize::MAX);
    let result = h
        .expect_refused(
            &call_for(URL, grant.id.as_str(), &click()),
            "STORE_UNAVAILABLE",
        )
        .await;
    assert_eq!(
        result["error"]["message"],
        "approval store is unavailable; nothing was performed; the approval is still usable"
    );
    let attempts = store.attempts();
    assert_eq!(attempts.len(), 3, "bounded by the retry policy");
    all_same(&attempts);
    assert!(h.backend.is_empty());
    let record = h.last_record();
    assert_eq!(
        record.reason,
        "consume failed after 3 tries: store timed out: no reply in 1s; abandon: usable"
    );
    // The attempt the tool gave up on was given back, once.
    let abandons = store.abandons();
    assert_eq!(abandons.len(), 1);
    assert_eq!(abandons[0].0, attempts[0]);
    // The grant was never touched: once the store recovers it works.
    store.fail_before(0);
    h.expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
}

#[tokio::test]
async fn non_retryable_errors_are_not_retried() {
    let (store, h) = flaky(StoreError::corrupt("apr_x", "bad hash"));
    let grant = h.grant_click().await;
    store.fail_before(1);
    h.expect_refused(
        &call_for(URL, grant.id.as_str(), &click()),
        "STORE_UNAVAILABLE",
    )
    .await;
    assert_eq!(store.attempts().len(), 1);
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn a_lost_reply_then_a_replay_is_ok_with_one_record() {
    let (store, h) = flaky(StoreError::unavailable("reply lost"));
    let grant = h.grant_click().await;
    store.apply_then_fail(1);
    h.expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
    assert_eq!(h.backend.len(), 1);
    let attempts = store.attempts();
    assert_eq!(attempts.len(), 2);
    all_same(&attempts);
    let answers = store.answers();
    assert!(answers[0].is_err());
    assert_eq!(
        answers[1].as_ref().unwrap(),
        &ConsumeOutcome::Consumed { replay: true }
    );
    // Another call is a different attempt: stale.
    h.expect_refused(
        &call_for(URL, grant.id.as_str(), &click()),
        "APPROVAL_STALE",
    )
    .await;
    assert_eq!(h.backend.len(), 1);
}

#[tokio::test]
async fn a_lost_reply_with_no_retry_left_is_given_back() {
    let store = Arc::new(FlakyStore::new(StoreError::unavailable("reply lost")));
    let h = Harness::build(
        Some(store.clone()),
        "actor-1",
        "run-1",
        RetryPolicy::no_retry(),
    );
    let grant = h.grant_click().await;
    store.apply_then_fail(1);
    h.expect_refused(
        &call_for(URL, grant.id.as_str(), &click()),
        "STORE_UNAVAILABLE",
    )
    .await;
    assert!(h.backend.is_empty());
    assert_eq!(
        h.last_record().reason,
        "consume failed after 1 tries: store unavailable: reply lost; abandon: restored"
    );
    // The consume was applied, then given back: the next call performs it,
    // once, and no later call performs it again.
    h.expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
    h.expect_refused(
        &call_for(URL, grant.id.as_str(), &click()),
        "APPROVAL_STALE",
    )
    .await;
    assert_eq!(h.backend.len(), 1);
}

#[tokio::test]
async fn backoff_waits_between_tries() {
    let store = Arc::new(FlakyStore::new(StoreError::unavailable("down")));
    let h = Harness::build(
        Some(store.clone()),
        "actor-1",
        "run-1",
        RetryPolicy::new(3, Duration::from_millis(20)),
    );
    let grant = h.grant_click().await;
    store.fail_before(2);
    let started = std::time::Instant::now();
    h.expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
    // 20 ms after the first failure, 40 ms after the second.
    assert!(started.elapsed() >= Duration::from_millis(60));
}

#[tokio::test]
async fn a_failing_operation_log_does_not_change_the_outcome() {
    let backend = FakeBackend::new();
    let store = Arc::new(InMemoryApprovalStore::new());
    let context = Context::builder()
        .actor_id(ActorId::new("actor-1").unwrap())
        .run_id(RunId::new("run-1").unwrap())
        .backend(backend.clone())
        .source_policy(policy())
        .operation_store(BrokenLog)
        .approval_store(store.clone())
        .build()
        .unwrap();
    let grant = issue_grant(&context, URL, &click(), Duration::from_secs(60))
        .await
        .unwrap();
    let act = Act::new(context);
    let call = call_for(URL, grant.id.as_str(), &click());
    assert_eq!(act.execute_json(&call).await["status"], "ok");
    assert_eq!(
        act.execute_json(&call).await["error"]["code"],
        "APPROVAL_STALE"
    );
    assert_eq!(backend.len(), 1);
}

/// A store that claims every consume is a replay: a contract breach the
/// tool must not take as permission on a first try.
struct ReplayingStore(InMemoryApprovalStore);

#[async_trait::async_trait]
impl ApprovalStore for ReplayingStore {
    async fn issue(
        &self,
        approval: countersign_act_tool::approval::Approval,
    ) -> Result<(), countersign_act_tool::approval::IssueError> {
        self.0.issue(approval).await
    }
    async fn revoke(
        &self,
        id: &countersign_act_tool::approval::ApprovalId,
    ) -> Result<countersign_act_tool::approval::RevokeOutcome, StoreError> {
        self.0.revoke(id).await
    }
    async fn get(
        &self,
        id: &countersign_act_tool::approval::ApprovalId,
    ) -> Result<Option<countersign_act_tool::approval::StoredGrant>, StoreError> {
        self.0.get(id).await
    }
    async fn consume_once(
        &self,
        _id: &countersign_act_tool::approval::ApprovalId,
        _binding: &countersign_act_tool::approval::Binding,
        _now: countersign_act_tool::approval::Timestamp,
        _attempt: &countersign_act_tool::approval::AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        Ok(ConsumeOutcome::Consumed { replay: true })
    }
    async fn abandon(
        &self,
        id: &countersign_act_tool::approval::ApprovalId,
        attempt: &countersign_act_tool::approval::AttemptId,
        now: countersign_act_tool::approval::Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        self.0.abandon(id, attempt, now).await
    }
    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: countersign_act_tool::approval::Timestamp,
    ) -> Result<countersign_act_tool::approval::StopOutcome, StoreError> {
        self.0.stop_run(actor, run, now).await
    }
    async fn stop_actor(
        &self,
        actor: &ActorId,
        now: countersign_act_tool::approval::Timestamp,
    ) -> Result<countersign_act_tool::approval::StopOutcome, StoreError> {
        self.0.stop_actor(actor, now).await
    }
    async fn resume_run(
        &self,
        actor: &ActorId,
        run: &RunId,
    ) -> Result<countersign_act_tool::approval::ResumeOutcome, StoreError> {
        self.0.resume_run(actor, run).await
    }
    async fn resume_actor(
        &self,
        actor: &ActorId,
    ) -> Result<countersign_act_tool::approval::ResumeOutcome, StoreError> {
        self.0.resume_actor(actor).await
    }
}

#[tokio::test]
async fn a_replay_answer_to_a_first_try_fails_closed() {
    let h = Harness::with_store(Some(Arc::new(ReplayingStore(InMemoryApprovalStore::new()))));
    let grant = h.grant_click().await;
    h.expect_refused(
        &call_for(URL, grant.id.as_str(), &click()),
        "STORE_UNAVAILABLE",
    )
    .await;
    assert_eq!(
        h.last_record().reason,
        "store answered a replay for a new attempt; abandon: usable"
    );
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn a_consume_applied_but_unanswered_is_given_back_and_the_grant_stays_usable() {
    let (store, h) = flaky(StoreError::Timeout {
        message: "no reply in 250ms".into(),
    });
    let grant = h.grant_click().await;
    // Every try is applied, and every answer is lost.
    store.apply_then_fail(3);
    let call = call_for(URL, grant.id.as_str(), &click());
    let result = h.expect_refused(&call, "STORE_UNAVAILABLE").await;
    assert_eq!(
        result["error"]["message"],
        "approval store is unavailable; nothing was performed; the approval is still usable"
    );
    assert!(h.backend.is_empty());
    assert_eq!(
        h.last_record().reason,
        "consume failed after 3 tries: store timed out: no reply in 250ms; abandon: restored"
    );
    let stored = h.store().get(&grant.id).await.unwrap().unwrap();
    assert_eq!(stored.state, GrantState::Active, "the consume was undone");
    // The abandoned attempt's late consume can never use it...
    let attempt = store.attempts()[0].clone();
    let late = store
        .inner
        .consume_once(&grant.id, &grant.binding(), h.context.now(), &attempt)
        .await
        .unwrap();
    assert_eq!(
        late,
        ConsumeOutcome::Stale(countersign_act_tool::approval::StaleReason::Abandoned)
    );
    // ... and the next call performs it, once.
    h.expect_ok(&call).await;
    assert_eq!(h.backend.len(), 1);
}

#[tokio::test]
async fn a_failing_abandon_is_bounded_and_says_the_approval_may_be_used_up() {
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
    store.apply_then_fail(1);
    store.fail_abandons(usize::MAX);
    let act = Act::new(context);
    let started = std::time::Instant::now();
    let result = act
        .execute_json(&call_for(URL, grant.id.as_str(), &click()))
        .await;
    assert_eq!(result["error"]["code"], "STORE_UNAVAILABLE");
    assert_eq!(
        result["error"]["message"],
        "approval store is unavailable; nothing was performed; the approval may have been used up"
    );
    let abandons = store.abandons();
    assert!(abandons.len() >= 2, "retried: {abandons:?}");
    assert!(abandons.iter().all(|(_, answer)| answer.is_err()));
    // Bounded: a 300 ms budget, however loaded the machine, ends well within a minute.
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(backend.is_empty());
    let stored = store.get(&grant.id).await.unwrap().unwrap();
    assert!(matches!(stored.state, GrantState::Consumed { .. }));
}

#[tokio::test]
async fn give_back_outcomes_are_told_truthfully() {
    // Another call consumed the grant between the failed consume and the abandon.
    let (store, h) = flaky(StoreError::corrupt("apr_x", "bad hash"));
    let grant = h.grant_click().await;
    store.fail_before(1);
    store
        .inner
        .consume_once(
            &grant.id,
            &grant.binding(),
            h.context.now(),
            &countersign_act_tool::approval::AttemptId::generate().unwrap(),
        )
        .await
        .unwrap();
    let result = h
        .expect_refused(
            &call_for(URL, grant.id.as_str(), &click()),
            "STORE_UNAVAILABLE",
        )
        .await;
    assert_eq!(
        result["error"]["message"],
        "approval store is unavailable; nothing was performed; the approval was used by another call"
    );
    // A revoked grant.
    let grant = h.grant_click().await;
    h.store().revoke(&grant.id).await.unwrap();
    store.fail_before(1);
    let result = h
        .expect_refused(
            &call_for(URL, grant.id.as_str(), &click()),
            "STORE_UNAVAILABLE",
        )
        .await;
    assert_eq!(
        result["error"]["message"],
        "approval store is unavailable; nothing was performed; the approval was revoked"
    );
    assert!(h.backend.is_empty());
}
