#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The kit can fail: each deliberately broken store is caught by the checks
//! named for its defect, and only a sound store passes everything.
//! The race checks get stores whose calls meet at a [`Rendezvous`], which
//! forces the interleaving that exposes a non-atomic consume on every run,
//! however the threads are scheduled.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, AttemptId, Binding,
    ConsumeOutcome, GrantState, IssueError, ResumeOutcome, RevokeOutcome, RunId, StaleReason,
    StopOutcome, StoreError, StoredGrant, Timestamp, decide_abandon, decide_consume, decide_revoke,
};
use countersign_store_conformance::{
    CheckFailure, MODEL_CHECK, ModelConfig, RACE_CHECKS, RaceConfig, SCENARIO_CHECKS,
    check_against_model, races, scenarios,
};
use support::Rendezvous;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// A correct store, to show the scaffolding itself is sound.
    None,
    /// Reads the grant, then writes the new state in a second step: not
    /// atomic.
    CheckThenMark,
    /// A mismatching consume marks the grant consumed.
    BurnsOnMismatch,
    /// `get` marks an active grant consumed (and answers the state before).
    ReadsConsume,
    /// Expiry is never checked.
    IgnoresExpiry,
    /// `abandon` undoes the attempt's consume but does not remember the
    /// attempt, so its late consume still succeeds.
    ForgetsAbandonedAttempts,
    /// A stop refuses new grants but consumes never look at it.
    StopDoesNotFenceConsumes,
    /// Mismatches are never counted, so no grant ever locks.
    NoAttemptCap,
    /// The record keeps the page but not the bound element.
    DropsElement,
}

/// Stop fences: (generation, stopped) per run and per actor, and the
/// generations each grant was issued in.
#[derive(Default)]
struct Fences {
    runs: HashMap<(ActorId, RunId), (u64, bool)>,
    actors: HashMap<ActorId, (u64, bool)>,
    issued_in: HashMap<ApprovalId, (u64, u64)>,
}

impl Fences {
    fn current(&self, approval: &Approval) -> (u64, u64) {
        let run = self
            .runs
            .get(&(approval.actor_id.clone(), approval.run_id.clone()))
            .map_or(0, |f| f.0);
        let actor = self.actors.get(&approval.actor_id).map_or(0, |f| f.0);
        (run, actor)
    }

    fn is_stopped(&self, approval: &Approval) -> bool {
        self.issued_in.get(&approval.id) != Some(&self.current(approval))
    }
}

/// The race check whose contention is not on one grant (each grant is
/// consumed once, racing a stop of its run): a call there has no other
/// call on its grant to wait for, so its store has no rendezvous.
const RACE_WITHOUT_RENDEZVOUS: &str = "stop_racing_consumes_orders_every_consume";

struct TestStore {
    defect: Defect,
    grants: Mutex<HashMap<ApprovalId, StoredGrant>>,
    abandoned: Mutex<HashMap<ApprovalId, Vec<AttemptId>>>,
    fences: Mutex<Fences>,
    /// On in the stores race checks get: a non-atomic consume that would
    /// write waits between its read and its write until another call on the
    /// grant has read it or finished, and a revoke waits until some call
    /// has, so it lands between a consume's read and its write.
    rendezvous: Rendezvous<ApprovalId>,
}

impl TestStore {
    fn new(defect: Defect) -> Self {
        TestStore {
            defect,
            grants: Mutex::new(HashMap::new()),
            abandoned: Mutex::new(HashMap::new()),
            fences: Mutex::new(Fences::default()),
            rendezvous: Rendezvous::off(),
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

    /// Whether consumes and abandons see `approval` as stopped.
    fn stopped_for_consume(&self, approval: &Approval) -> bool {
        self.defect != Defect::StopDoesNotFenceConsumes
            && self.fences.lock().unwrap().is_stopped(approval)
    }

    fn apply(&self, grant: &mut StoredGrant, decision: countersign_approval_core::ConsumeDecision) {
        if let Some(next) = decision.state {
            grant.state = next;
        }
        if let Some(failed) = decision.failed_attempts
            && self.defect != Defect::NoAttemptCap
        {
            grant.failed_attempts = failed;
        }
    }

    fn revoke_atomically(&self, id: &ApprovalId) -> RevokeOutcome {
        let mut grants = self.grants.lock().unwrap();
        let Some(grant) = grants.get_mut(id) else {
            return RevokeOutcome::Unknown;
        };
        let mut shown = grant.state.clone();
        if shown == GrantState::Active && self.fences.lock().unwrap().is_stopped(&grant.approval) {
            shown = GrantState::Stopped;
        }
        let (outcome, next) = decide_revoke(&shown);
        if let Some(next) = next {
            grant.state = next;
        }
        outcome
    }

    fn consume_atomically(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> ConsumeOutcome {
        let abandoned = self.abandoned(id);
        let mut grants = self.grants.lock().unwrap();
        let Some(grant) = grants.get_mut(id) else {
            return ConsumeOutcome::Unknown;
        };
        let mut seen = grant.clone();
        if self.defect == Defect::IgnoresExpiry {
            seen.approval.expires_at = Timestamp::from_millis(u64::MAX);
        }
        let stopped = self.stopped_for_consume(&grant.approval);
        let decision = decide_consume(&seen, &abandoned, stopped, binding, now, attempt);
        let outcome = decision.outcome;
        self.apply(grant, decision);
        if self.defect == Defect::BurnsOnMismatch
            && outcome == ConsumeOutcome::Stale(StaleReason::Mismatch)
        {
            grant.state = GrantState::Consumed {
                at: now,
                by: attempt.clone(),
            };
        }
        outcome
    }

    fn abandon_atomically(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> AbandonOutcome {
        let mut grants = self.grants.lock().unwrap();
        let Some(grant) = grants.get_mut(id) else {
            return AbandonOutcome::Unknown;
        };
        let stopped = self.stopped_for_consume(&grant.approval);
        let mut abandoned = self.abandoned.lock().unwrap();
        let list = abandoned.entry(id.clone()).or_default();
        let decision = decide_abandon(grant, list, stopped, now, attempt);
        if decision.remember && self.defect != Defect::ForgetsAbandonedAttempts {
            list.push(attempt.clone());
        }
        if let Some(next) = decision.state {
            grant.state = next;
        }
        decision.outcome
    }

    /// Counts the usable grants `selects` picks and stops them, holding the
    /// grants lock throughout so no consume lands in between.
    fn stop(
        &self,
        now: Timestamp,
        selects: impl Fn(&Approval) -> bool,
        fence_of: impl FnOnce(&mut Fences) -> &mut (u64, bool),
    ) -> StopOutcome {
        let grants = self.grants.lock().unwrap();
        let mut fences = self.fences.lock().unwrap();
        let stopped_grants = grants
            .values()
            .filter(|g| {
                g.state == GrantState::Active
                    && !g.approval.is_expired_at(now)
                    && selects(&g.approval)
                    && !fences.is_stopped(&g.approval)
            })
            .count() as u64;
        let fence = fence_of(&mut fences);
        let was_stopped = fence.1;
        *fence = (fence.0 + 1, true);
        StopOutcome {
            stopped_grants,
            stopped_standing: 0,
            was_stopped,
        }
    }
}

#[async_trait]
impl ApprovalStore for TestStore {
    async fn issue(&self, mut approval: Approval) -> Result<(), IssueError> {
        if self.defect == Defect::DropsElement {
            approval.element = None;
        }
        let mut grants = self.grants.lock().unwrap();
        if grants.contains_key(&approval.id) {
            return Err(IssueError::AlreadyExists(approval.id));
        }
        let mut fences = self.fences.lock().unwrap();
        let run = fences
            .runs
            .get(&(approval.actor_id.clone(), approval.run_id.clone()))
            .copied()
            .unwrap_or_default();
        let actor = fences
            .actors
            .get(&approval.actor_id)
            .copied()
            .unwrap_or_default();
        if run.1 || actor.1 {
            return Err(IssueError::Stopped);
        }
        fences
            .issued_in
            .insert(approval.id.clone(), (run.0, actor.0));
        grants.insert(approval.id.clone(), StoredGrant::issued(approval));
        Ok(())
    }

    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        // Waits until some call on the grant has arrived: in a race of
        // revokes and consumes that is a consume that has read the grant, so
        // no revoke goes before every read, and one racing a non-atomic
        // consume lands between its read and its write.
        self.rendezvous.wait_for(id, 1).await;
        let outcome = self.revoke_atomically(id);
        self.rendezvous.arrive(id);
        Ok(outcome)
    }

    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        let mut grants = self.grants.lock().unwrap();
        let Some(grant) = grants.get_mut(id) else {
            return Ok(None);
        };
        let mut answer = grant.clone();
        if answer.state == GrantState::Active
            && self.fences.lock().unwrap().is_stopped(&answer.approval)
        {
            answer.state = GrantState::Stopped;
        }
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
        if self.defect == Defect::CheckThenMark {
            let read = self.grants.lock().unwrap().get(id).cloned();
            let Some(grant) = read else {
                self.rendezvous.arrive(id);
                return Ok(ConsumeOutcome::Unknown);
            };
            let abandoned = self.abandoned(id);
            let stopped = self.stopped_for_consume(&grant.approval);
            let decision = decide_consume(&grant, &abandoned, stopped, binding, now, attempt);
            let writes = decision.state.is_some() || decision.failed_attempts.is_some();
            self.rendezvous.arrive_after_read(id, writes).await;
            let outcome = decision.outcome;
            if let Some(stored) = self.grants.lock().unwrap().get_mut(id) {
                self.apply(stored, decision);
            }
            return Ok(outcome);
        }
        let outcome = self.consume_atomically(id, binding, now, attempt);
        self.rendezvous.arrive(id);
        Ok(outcome)
    }

    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let outcome = self.abandon_atomically(id, attempt, now);
        self.rendezvous.arrive(id);
        Ok(outcome)
    }

    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        Ok(self.stop(
            now,
            |a| a.actor_id == *actor && a.run_id == *run,
            |fences| fences.runs.entry((actor.clone(), run.clone())).or_default(),
        ))
    }

    async fn stop_actor(&self, actor: &ActorId, now: Timestamp) -> Result<StopOutcome, StoreError> {
        Ok(self.stop(
            now,
            |a| a.actor_id == *actor,
            |fences| fences.actors.entry(actor.clone()).or_default(),
        ))
    }

    async fn resume_run(&self, actor: &ActorId, run: &RunId) -> Result<ResumeOutcome, StoreError> {
        let mut fences = self.fences.lock().unwrap();
        Ok(resume(fences.runs.get_mut(&(actor.clone(), run.clone()))))
    }

    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError> {
        let mut fences = self.fences.lock().unwrap();
        Ok(resume(fences.actors.get_mut(actor)))
    }
}

fn resume(fence: Option<&mut (u64, bool)>) -> ResumeOutcome {
    match fence {
        Some(fence) if fence.1 => {
            fence.1 = false;
            ResumeOutcome::Resumed
        }
        _ => ResumeOutcome::NotStopped,
    }
}

/// Runs one race check on a fresh store with `defect` (with a rendezvous
/// unless the check is [`RACE_WITHOUT_RENDEZVOUS`]) and fails the test if a
/// call gave up waiting at the rendezvous.
fn race(
    check: &str,
    defect: Defect,
    run: impl FnOnce(Arc<TestStore>) -> Result<(), CheckFailure>,
) -> Result<(), CheckFailure> {
    assert!(RACE_CHECKS.contains(&RACE_WITHOUT_RENDEZVOUS));
    let store = Arc::new(TestStore {
        rendezvous: if check == RACE_WITHOUT_RENDEZVOUS {
            Rendezvous::off()
        } else {
            Rendezvous::on()
        },
        ..TestStore::new(defect)
    });
    let result = run(Arc::clone(&store));
    store.rendezvous.assert_never_timed_out(check);
    result
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
                (stringify!($name), race(stringify!($name), defect, |store| runtime().block_on(async {
                    races::$name(store, config).await
                }))),
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
    let failures = run_all(Defect::CheckThenMark, &RaceConfig::default());
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
    model(Defect::CheckThenMark).unwrap();
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

#[test]
fn a_stop_that_does_not_fence_consumes_is_caught() {
    let failures = run_all(Defect::StopDoesNotFenceConsumes, &RaceConfig::default());
    assert_fails(
        &failures,
        &[
            "stop_run_stops_its_grants_and_only_them",
            "stopped_run_refuses_issue_until_resumed",
            "stop_actor_stops_every_run",
            "stop_racing_consumes_orders_every_consume",
        ],
    );
    let message = failures["stop_run_stops_its_grants_and_only_them"].to_string();
    assert!(message.contains("Stopped"), "unexpected message: {message}");
    let model = model(Defect::StopDoesNotFenceConsumes).unwrap_err();
    assert_eq!(model.check(), MODEL_CHECK);
}

#[test]
fn a_store_without_the_attempt_cap_is_caught() {
    let failures = run_all(Defect::NoAttemptCap, &RaceConfig::default());
    assert_fails(
        &failures,
        &[
            "failed_attempts_lock_the_grant",
            "concurrent_mismatches_lock_once",
        ],
    );
    let model = model(Defect::NoAttemptCap).unwrap_err();
    assert_eq!(model.check(), MODEL_CHECK);
}

#[test]
fn a_store_that_drops_the_bound_element_is_caught() {
    let failures = run_all(Defect::DropsElement, &RaceConfig::default());
    assert_fails(
        &failures,
        &[
            "get_round_trips_grant_and_state",
            "every_field_at_its_maximum",
        ],
    );
    let message = failures["get_round_trips_grant_and_state"].to_string();
    assert!(
        message.contains("element: got None, expected Some("),
        "unexpected message: {message}"
    );
    // The model's grants bind no page.
    model(Defect::DropsElement).unwrap();
}
