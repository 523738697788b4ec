#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The kit can fail: each deliberately broken store is caught by the checks
//! named for its defect, and only a sound store passes everything.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, Approval, ApprovalId, ApprovalStore, AttemptId, Binding, ConsumeOutcome,
    GrantState, IssueError, RevokeOutcome, StaleReason, StoreError, StoredGrant, Timestamp,
    decide_abandon, decide_consume, decide_revoke,
};
use countersign_store_conformance::{
    CheckFailure, MODEL_CHECK, ModelConfig, RACE_CHECKS, RaceConfig, SCENARIO_CHECKS,
    check_against_model, races, scenarios,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// A correct store, to show the scaffolding itself is sound.
    None,
    /// Reads the grant, yields, then writes the new state: not atomic.
    CheckThenMarkWithYield,
    /// A mismatching consume marks the grant consumed.
    BurnsOnMismatch,
    /// `get` marks an active grant consumed (and answers the state before).
    ReadsConsume,
    /// Expiry is never checked.
    IgnoresExpiry,
    /// `abandon` undoes the attempt's consume but does not remember the
    /// attempt, so its late consume still succeeds.
    ForgetsAbandonedAttempts,
}

struct TestStore {
    defect: Defect,
    grants: Mutex<HashMap<ApprovalId, StoredGrant>>,
    abandoned: Mutex<HashMap<ApprovalId, Vec<AttemptId>>>,
}

impl TestStore {
    fn new(defect: Defect) -> Self {
        TestStore {
            defect,
            grants: Mutex::new(HashMap::new()),
            abandoned: Mutex::new(HashMap::new()),
        }
    }

    fn abandoned(&self, id: &ApprovalId) -> Vec<AttemptId> {
        self.abandoned
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .unwrap_or_default()
    }
}

#[async_trait]
impl ApprovalStore for TestStore {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        let mut grants = self.grants.lock().unwrap();
        if grants.contains_key(&approval.id) {
            return Err(IssueError::AlreadyExists(approval.id));
        }
        grants.insert(
            approval.id.clone(),
            StoredGrant {
                approval,
                state: GrantState::Active,
            },
        );
        Ok(())
    }

    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        let mut grants = self.grants.lock().unwrap();
        let Some(grant) = grants.get_mut(id) else {
            return Ok(RevokeOutcome::Unknown);
        };
        let (outcome, next) = decide_revoke(&grant.state);
        if let Some(next) = next {
            grant.state = next;
        }
        Ok(outcome)
    }

    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        let mut grants = self.grants.lock().unwrap();
        let Some(grant) = grants.get_mut(id) else {
            return Ok(None);
        };
        let answer = grant.clone();
        if self.defect == Defect::ReadsConsume && grant.state == GrantState::Active {
            grant.state = GrantState::Consumed {
                at: grant.approval.issued_at,
                by: AttemptId::parse("att_reader").unwrap(),
            };
        }
        Ok(Some(answer))
    }

    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        if self.defect == Defect::CheckThenMarkWithYield {
            let Some(grant) = self.grants.lock().unwrap().get(id).cloned() else {
                return Ok(ConsumeOutcome::Unknown);
            };
            let abandoned = self.abandoned(id);
            let (outcome, next) = decide_consume(&grant, &abandoned, binding, now, attempt);
            tokio::task::yield_now().await;
            if let Some(next) = next
                && let Some(stored) = self.grants.lock().unwrap().get_mut(id)
            {
                stored.state = next;
            }
            return Ok(outcome);
        }
        let abandoned = self.abandoned(id);
        let mut grants = self.grants.lock().unwrap();
        let Some(grant) = grants.get_mut(id) else {
            return Ok(ConsumeOutcome::Unknown);
        };
        let mut seen = grant.clone();
        if self.defect == Defect::IgnoresExpiry {
            seen.approval.expires_at = Timestamp::from_millis(u64::MAX);
        }
        let (outcome, next) = decide_consume(&seen, &abandoned, binding, now, attempt);
        if let Some(next) = next {
            grant.state = next;
        }
        if self.defect == Defect::BurnsOnMismatch
            && outcome == ConsumeOutcome::Stale(StaleReason::Mismatch)
        {
            grant.state = GrantState::Consumed {
                at: now,
                by: attempt.clone(),
            };
        }
        Ok(outcome)
    }

    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let mut grants = self.grants.lock().unwrap();
        let Some(grant) = grants.get_mut(id) else {
            return Ok(AbandonOutcome::Unknown);
        };
        let mut abandoned = self.abandoned.lock().unwrap();
        let list = abandoned.entry(id.clone()).or_default();
        let decision = decide_abandon(grant, list, now, attempt);
        if decision.remember && self.defect != Defect::ForgetsAbandonedAttempts {
            list.push(attempt.clone());
        }
        if let Some(next) = decision.state {
            grant.state = next;
        }
        Ok(decision.outcome)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs every scenario and race check on a fresh store with `defect`;
/// returns the failures by check name.
fn run_all(defect: Defect, config: &RaceConfig) -> HashMap<&'static str, CheckFailure> {
    macro_rules! scenario {
        ($($name:ident),* $(,)?) => {
            vec![$(
                (stringify!($name), {
                    let store = TestStore::new(defect);
                    runtime().block_on(async { scenarios::$name(&store).await })
                }),
            )*]
        };
    }
    macro_rules! race {
        ($($name:ident),* $(,)?) => {
            vec![$(
                (stringify!($name), runtime().block_on(async {
                    races::$name(Arc::new(TestStore::new(defect)), config).await
                })),
            )*]
        };
    }
    macro_rules! every_check {
        (scenarios [$($s:ident),* $(,)?] races [$($r:ident),* $(,)?]) => {{
            let mut results = scenario![$($s),*];
            results.extend(race![$($r),*]);
            results
        }};
    }
    let results = countersign_store_conformance::__for_each_check!([every_check]);
    assert_eq!(
        results.len(),
        SCENARIO_CHECKS.len() + RACE_CHECKS.len(),
        "this test must run every scenario and race check"
    );
    let mut failures = HashMap::new();
    for (name, result) in results {
        if let Err(failure) = result {
            assert_eq!(failure.check(), name, "a failure must name its own check");
            assert!(!failure.message().is_empty());
            failures.insert(name, failure);
        }
    }
    failures
}

fn model(defect: Defect) -> Result<(), CheckFailure> {
    check_against_model(
        || async move { TestStore::new(defect) },
        &ModelConfig::default(),
    )
}

fn assert_fails(failures: &HashMap<&'static str, CheckFailure>, names: &[&str]) {
    for name in names {
        assert!(
            failures.contains_key(name),
            "check `{name}` should have failed; failures were: {:#?}",
            failures.values().collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_sound_store_passes_every_check() {
    let failures = run_all(Defect::None, &RaceConfig::default());
    assert!(
        failures.is_empty(),
        "{:#?}",
        failures.values().collect::<Vec<_>>()
    );
    model(Defect::None).unwrap();
}

#[test]
fn non_atomic_check_then_mark_is_caught_by_the_race_checks() {
    let failures = run_all(Defect::CheckThenMarkWithYield, &RaceConfig::default());
    assert_fails(
        &failures,
        &[
            "concurrent_consumes_have_one_winner",
            "concurrent_retries_of_one_attempt_have_one_winner",
            "revoke_racing_consume_has_one_winner",
        ],
    );
    // Run one at a time the store answers correctly: only races can tell.
    for caught in failures.keys() {
        assert!(
            RACE_CHECKS.contains(caught),
            "`{caught}` is not a race check"
        );
    }
    let message = failures["concurrent_consumes_have_one_winner"].to_string();
    assert!(
        message.contains("expected exactly one"),
        "unexpected message: {message}"
    );
    model(Defect::CheckThenMarkWithYield).unwrap();
}

#[test]
fn burning_the_grant_on_mismatch_is_caught() {
    let failures = run_all(Defect::BurnsOnMismatch, &RaceConfig::default());
    assert_fails(
        &failures,
        &[
            "actor_mismatch_is_stale_and_does_not_burn",
            "run_mismatch_is_stale_and_does_not_burn",
            "url_mismatch_is_stale_and_does_not_burn",
            "action_mismatch_is_stale_and_does_not_burn",
        ],
    );
    let message = failures["url_mismatch_is_stale_and_does_not_burn"].to_string();
    assert!(
        message.contains("must not burn"),
        "unexpected message: {message}"
    );
    let model = model(Defect::BurnsOnMismatch).unwrap_err();
    assert_eq!(model.check(), MODEL_CHECK);
    assert!(model.message().contains("minimal failing sequence"));
}

#[test]
fn reads_that_consume_are_caught() {
    let failures = run_all(Defect::ReadsConsume, &RaceConfig::default());
    assert_fails(&failures, &["reads_never_consume"]);
    let model = model(Defect::ReadsConsume).unwrap_err();
    assert_eq!(model.check(), MODEL_CHECK);
}

#[test]
fn ignoring_expiry_is_caught() {
    let failures = run_all(Defect::IgnoresExpiry, &RaceConfig::default());
    assert_fails(
        &failures,
        &[
            "expired_grant_is_stale_expired",
            "expiry_boundary",
            "expiry_is_checked_before_mismatch",
        ],
    );
    let message = failures["expiry_boundary"].to_string();
    assert!(
        message.contains("consume at expires_at") && message.contains("Expired"),
        "unexpected message: {message}"
    );
    let model = model(Defect::IgnoresExpiry).unwrap_err();
    assert_eq!(model.check(), MODEL_CHECK);
}

#[test]
fn forgetting_abandoned_attempts_is_caught() {
    let failures = run_all(Defect::ForgetsAbandonedAttempts, &RaceConfig::default());
    assert_fails(
        &failures,
        &[
            "abandon_of_own_consume_restores_the_grant",
            "late_consume_of_abandoned_attempt_never_consumes",
            "abandon_outcomes",
            "abandoned_attempts_are_bounded",
            "abandon_racing_consumes_never_performs_twice",
        ],
    );
    let message = failures["late_consume_of_abandoned_attempt_never_consumes"].to_string();
    assert!(
        message.contains("Abandoned"),
        "unexpected message: {message}"
    );
    let model = model(Defect::ForgetsAbandonedAttempts).unwrap_err();
    assert_eq!(model.check(), MODEL_CHECK);
}
