//! Checks for [`NotificationOutbox`]: one per rule of its contract, and a
//! race.
//!
//! Run them all with [`outbox_conformance_tests!`](crate::outbox_conformance_tests).
//! An outbox is one queue per store, so each check needs a store of its
//! own whose outbox is empty (for a shared server, a fresh namespace).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use countersign_approval_core::{
    ActorId, ApproverId, Clock, DecisionOutcome, EventId, NotificationEvent, NotificationOutbox,
    Proposal, ProposalStore, ProposeError, RunId, SystemClock, Timestamp,
};

use crate::failure::CheckFailure;
use crate::fixtures::{Fixtures, TTL, unique_actor_and_runs};

/// A store that keeps proposals and records their notifications.
pub trait OutboxStore: ProposalStore + NotificationOutbox {}

impl<T: ProposalStore + NotificationOutbox + ?Sized> OutboxStore for T {}

/// The names of the outbox checks, in the order the macro runs them.
pub const OUTBOX_CHECKS: &[&str] = &[
    "steps_record_their_events_once",
    "schedule_is_idempotent_by_event_id",
    "claims_hold_for_their_lease_then_lapse",
    "a_retry_comes_back_at_its_time",
    "claims_come_in_order_up_to_the_limit",
    "concurrent_claims_hand_each_event_once",
    "outbox_sequences_match_the_model",
];

/// How long a check's claims hold.
const LEASE: Duration = Duration::from_secs(30);
/// Claims at most this many events at once in the checks.
const LIMIT: usize = 100;

struct Cx<'a> {
    check: &'static str,
    store: &'a dyn OutboxStore,
    fx: Fixtures,
    t0: Timestamp,
    actor: ActorId,
    runs: [RunId; 2],
}

impl<'a> Cx<'a> {
    async fn new(check: &'static str, store: &'a dyn OutboxStore) -> Result<Cx<'a>, CheckFailure> {
        let (actor, runs) = unique_actor_and_runs(check)?;
        Ok(Cx {
            check,
            store,
            fx: Fixtures::new(check).await?,
            t0: SystemClock.now(),
            actor,
            runs,
        })
    }

    fn fail(&self, message: impl Into<String>) -> CheckFailure {
        CheckFailure::new(self.check, message)
    }

    fn at(&self, millis: u64) -> Timestamp {
        self.t0.saturating_add(Duration::from_millis(millis))
    }

    fn proposal(&self, run: usize, at: Timestamp) -> Result<Proposal, CheckFailure> {
        Proposal::for_action(
            self.actor.clone(),
            self.runs[run].clone(),
            &self.fx.urls[0],
            &self.fx.actions[0],
            TTL,
            at,
        )
        .map_err(|e| self.fail(format!("could not build a proposal: {e}")))
    }

    /// An event of a made-up stop, due at `due`, to schedule.
    fn event(&self, n: u64) -> NotificationEvent {
        NotificationEvent::run_stopped(&self.actor, Some(&self.runs[1]), self.at(n))
    }

    async fn claim(
        &self,
        now: Timestamp,
    ) -> Result<Vec<countersign_approval_core::ClaimedNotification>, CheckFailure> {
        self.store
            .claim_due(now, LEASE, LIMIT)
            .await
            .map_err(|e| self.fail(format!("claim_due failed: {e}")))
    }

    async fn schedule(
        &self,
        event: NotificationEvent,
        due: Timestamp,
    ) -> Result<bool, CheckFailure> {
        self.store
            .schedule(event, due)
            .await
            .map_err(|e| self.fail(format!("schedule failed: {e}")))
    }
}

fn ids(claims: &[countersign_approval_core::ClaimedNotification]) -> Vec<EventId> {
    claims.iter().map(|c| c.event.id.clone()).collect()
}

/// Rule 1: a proposal made, approved, denied, a run and an actor stopped
/// each record one event; a decision that changes nothing and a proposal
/// refused record none.
pub async fn steps_record_their_events_once(store: &dyn OutboxStore) -> Result<(), CheckFailure> {
    let cx = Cx::new("steps_record_their_events_once", store).await?;
    let approved = cx.proposal(0, cx.at(1))?;
    let denied = cx.proposal(0, cx.at(2))?;
    for proposal in [&approved, &denied] {
        store
            .propose(proposal.clone())
            .await
            .map_err(|e| cx.fail(format!("propose failed: {e}")))?;
    }
    let approver = ApproverId::new("approver-carol").map_err(|e| cx.fail(e.to_string()))?;
    let grant = approved
        .grant(TTL, cx.at(3), Some(approver.clone()))
        .map_err(|e| cx.fail(format!("could not build the grant: {e}")))?;
    let outcome = store
        .approve_proposal(&approved.id, grant, cx.at(3))
        .await
        .map_err(|e| cx.fail(format!("approve failed: {e}")))?;
    if outcome != DecisionOutcome::Approved {
        return Err(cx.fail(format!("approve answered {outcome:?}")));
    }
    let outcome = store
        .deny_proposal(&denied.id, Some(&approver), cx.at(4))
        .await
        .map_err(|e| cx.fail(format!("deny failed: {e}")))?;
    if outcome != DecisionOutcome::Denied {
        return Err(cx.fail(format!("deny answered {outcome:?}")));
    }
    // Decisions that change nothing record nothing.
    let again = store
        .deny_proposal(&approved.id, Some(&approver), cx.at(5))
        .await
        .map_err(|e| cx.fail(format!("a second decision failed: {e}")))?;
    if !matches!(again, DecisionOutcome::AlreadyDecided(_)) {
        return Err(cx.fail(format!("a second decision answered {again:?}")));
    }
    store
        .stop_run(&cx.actor, &cx.runs[0], cx.at(6))
        .await
        .map_err(|e| cx.fail(format!("stop_run failed: {e}")))?;
    // A proposal the stop refuses records nothing.
    match store.propose(cx.proposal(0, cx.at(7))?).await {
        Err(ProposeError::Stopped) => {}
        other => return Err(cx.fail(format!("a proposal in a stopped run answered {other:?}"))),
    }
    store
        .stop_actor(&cx.actor, cx.at(8))
        .await
        .map_err(|e| cx.fail(format!("stop_actor failed: {e}")))?;

    let expected = [
        NotificationEvent::created(&approved),
        NotificationEvent::created(&denied),
        NotificationEvent::decided(&approved, cx.at(3)),
        NotificationEvent::decided(&denied, cx.at(4)),
        NotificationEvent::run_stopped(&cx.actor, Some(&cx.runs[0]), cx.at(6)),
        NotificationEvent::run_stopped(&cx.actor, None, cx.at(8)),
    ];
    // Nothing is due before its step.
    let early = cx.claim(cx.at(0)).await?;
    if !early.is_empty() {
        return Err(cx.fail(format!("{} events were due before any step", early.len())));
    }
    let claimed = cx.claim(cx.at(8)).await?;
    let events: Vec<NotificationEvent> = claimed.iter().map(|c| c.event.clone()).collect();
    if events != expected {
        return Err(cx.fail(format!(
            "recorded {events:?}, expected in this order {expected:?}"
        )));
    }
    if let Some(claim) = claimed.iter().find(|c| c.attempt != 1) {
        return Err(cx.fail(format!("a first claim counted attempt {}", claim.attempt)));
    }
    Ok(())
}

/// Rule 2 (and 4): an event id is added once, also after it finished.
pub async fn schedule_is_idempotent_by_event_id(
    store: &dyn OutboxStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("schedule_is_idempotent_by_event_id", store).await?;
    let event = cx.event(1);
    if !cx.schedule(event.clone(), cx.at(10)).await? {
        return Err(cx.fail("a new event was not added"));
    }
    // Again, even due at another time: nothing changes.
    if cx.schedule(event.clone(), cx.at(0)).await? {
        return Err(cx.fail("an event scheduled twice was added twice"));
    }
    let claimed = cx.claim(cx.at(10)).await?;
    if ids(&claimed) != [event.id.clone()] {
        return Err(cx.fail(format!(
            "claimed {:?}, expected the one event",
            ids(&claimed)
        )));
    }
    let finished = store
        .finish(&claimed[0], cx.at(11))
        .await
        .map_err(|e| cx.fail(format!("finish failed: {e}")))?;
    if !finished {
        return Err(cx.fail("finishing the latest claim answered false"));
    }
    if cx.schedule(event.clone(), cx.at(12)).await? {
        return Err(cx.fail("a finished event was added again within the retention"));
    }
    let later = cx.claim(cx.at(20_000)).await?;
    if !later.is_empty() {
        return Err(cx.fail(format!("a finished event was claimed again: {later:?}")));
    }
    Ok(())
}

/// Rules 3 and 4: a claim holds for its lease, then the event is claimable
/// again as the next attempt, and only the latest claim finishes it.
pub async fn claims_hold_for_their_lease_then_lapse(
    store: &dyn OutboxStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("claims_hold_for_their_lease_then_lapse", store).await?;
    let event = cx.event(1);
    cx.schedule(event.clone(), cx.at(100)).await?;
    if !cx.claim(cx.at(99)).await?.is_empty() {
        return Err(cx.fail("an event was claimed before it was due"));
    }
    let first = cx.claim(cx.at(100)).await?;
    let lease_ms = u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX);
    match first.as_slice() {
        [claim] if claim.attempt == 1 && claim.claimed_until == cx.at(100 + lease_ms) => {}
        other => return Err(cx.fail(format!("the first claim was {other:?}"))),
    }
    if !cx.claim(cx.at(100 + lease_ms - 1)).await?.is_empty() {
        return Err(cx.fail("a claimed event was claimed again within its lease"));
    }
    let second = cx.claim(cx.at(100 + lease_ms)).await?;
    match second.as_slice() {
        [claim] if claim.attempt == 2 && claim.event == event => {}
        other => return Err(cx.fail(format!("the claim after the lease was {other:?}"))),
    }
    let stale = store
        .finish(&first[0], cx.at(100 + lease_ms))
        .await
        .map_err(|e| cx.fail(format!("finish failed: {e}")))?;
    if stale {
        return Err(cx.fail("a lapsed claim finished the event"));
    }
    let latest = store
        .finish(&second[0], cx.at(100 + lease_ms))
        .await
        .map_err(|e| cx.fail(format!("finish failed: {e}")))?;
    if !latest {
        return Err(cx.fail("the latest claim did not finish the event"));
    }
    if !cx.claim(cx.at(100 + 3 * lease_ms)).await?.is_empty() {
        return Err(cx.fail("a finished event was claimed again"));
    }
    Ok(())
}

/// Rule 5: a retried event is unclaimed and due at its new time, with its
/// attempts kept; a lapsed claim cannot retry it.
pub async fn a_retry_comes_back_at_its_time(store: &dyn OutboxStore) -> Result<(), CheckFailure> {
    let cx = Cx::new("a_retry_comes_back_at_its_time", store).await?;
    cx.schedule(cx.event(1), cx.at(10)).await?;
    let first = cx.claim(cx.at(10)).await?;
    let [claim] = first.as_slice() else {
        return Err(cx.fail(format!("claimed {first:?}, expected one event")));
    };
    let retried = store
        .retry_at(claim, cx.at(50))
        .await
        .map_err(|e| cx.fail(format!("retry_at failed: {e}")))?;
    if !retried {
        return Err(cx.fail("the latest claim could not retry"));
    }
    if !cx.claim(cx.at(49)).await?.is_empty() {
        return Err(cx.fail("a retried event was claimed before its time"));
    }
    let second = cx.claim(cx.at(50)).await?;
    match second.as_slice() {
        [again] if again.attempt == 2 => {}
        other => return Err(cx.fail(format!("the retried claim was {other:?}"))),
    }
    let stale = store
        .retry_at(claim, cx.at(60))
        .await
        .map_err(|e| cx.fail(format!("retry_at failed: {e}")))?;
    if stale {
        return Err(cx.fail("a lapsed claim retried the event"));
    }
    Ok(())
}

/// Rule 3: earliest first, then in the order scheduled, at most `limit`.
/// Six events of one instant: a store that orders them by anything else
/// (their ids are hashes) passes by chance once in 720 runs.
pub async fn claims_come_in_order_up_to_the_limit(
    store: &dyn OutboxStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("claims_come_in_order_up_to_the_limit", store).await?;
    let last = cx.event(100);
    cx.schedule(last.clone(), cx.at(30)).await?;
    let same_instant: Vec<NotificationEvent> = (0..6).map(|n| cx.event(n)).collect();
    for event in same_instant.iter().rev() {
        cx.schedule(event.clone(), cx.at(10)).await?;
    }
    let middle = cx.event(50);
    cx.schedule(middle.clone(), cx.at(20)).await?;
    let claimed = store
        .claim_due(cx.at(30), LEASE, 7)
        .await
        .map_err(|e| cx.fail(format!("claim_due failed: {e}")))?;
    let mut expected: Vec<EventId> = same_instant.iter().rev().map(|e| e.id.clone()).collect();
    expected.push(middle.id);
    if ids(&claimed) != expected {
        return Err(cx.fail(format!(
            "claimed {:?}, expected {expected:?}",
            ids(&claimed)
        )));
    }
    let rest = cx.claim(cx.at(30)).await?;
    if ids(&rest) != [last.id] {
        return Err(cx.fail(format!("then claimed {:?}, expected the last", ids(&rest))));
    }
    Ok(())
}

/// Rule 3 under contention: concurrent claimers, started together, hand
/// out every event exactly once.
pub async fn concurrent_claims_hand_each_event_once(
    store: Arc<dyn OutboxStore>,
) -> Result<(), CheckFailure> {
    const EVENTS: u64 = 40;
    const CLAIMERS: usize = 8;
    let cx = Cx::new("concurrent_claims_hand_each_event_once", &*store).await?;
    for n in 0..EVENTS {
        cx.schedule(cx.event(n), cx.at(1)).await?;
    }
    let now = cx.at(2);
    let barrier = Arc::new(tokio::sync::Barrier::new(CLAIMERS));
    let mut tasks = Vec::new();
    for _ in 0..CLAIMERS {
        let (store, barrier) = (store.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut mine = Vec::new();
            // Bounded: a store that hands events out again forever fails
            // the count below instead of hanging.
            for _ in 0..EVENTS {
                let claimed = store.claim_due(now, LEASE, 3).await?;
                if claimed.is_empty() {
                    break;
                }
                mine.extend(claimed.into_iter().map(|c| c.event.id));
                tokio::task::yield_now().await;
            }
            Ok::<_, countersign_approval_core::StoreError>(mine)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let mine = task
            .await
            .map_err(|e| cx.fail(format!("a claimer panicked: {e}")))?
            .map_err(|e| cx.fail(format!("claim_due failed: {e}")))?;
        all.extend(mine);
    }
    let distinct: BTreeSet<&EventId> = all.iter().collect();
    if all.len() != EVENTS as usize || distinct.len() != all.len() {
        return Err(cx.fail(format!(
            "{} claims of {} distinct events, expected each of {EVENTS} once",
            all.len(),
            distinct.len()
        )));
    }
    Ok(())
}

/// One step of a generated outbox sequence; times are milliseconds after
/// the check's start.
#[derive(Debug, Clone)]
enum Step {
    Schedule { event: u64, due: u64 },
    Claim { at: u64, limit: usize },
    Finish { claim: usize, at: u64 },
    Retry { claim: usize, at: u64 },
}

fn step_strategy() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        (0u64..6, 0u64..30).prop_map(|(event, due)| Step::Schedule { event, due }),
        (0u64..60, 1usize..4).prop_map(|(at, limit)| Step::Claim { at, limit }),
        (0usize..8, 0u64..60).prop_map(|(claim, at)| Step::Finish { claim, at }),
        (0usize..8, 0u64..60).prop_map(|(claim, at)| Step::Retry { claim, at }),
    ]
}

/// The contract as a few lines over a list: what every outbox must answer.
#[derive(Default)]
struct OutboxModel {
    /// Waiting events: id, when claimable, recording order, attempts.
    waiting: Vec<(EventId, u64, u64, u32)>,
    finished: BTreeSet<EventId>,
    recorded: u64,
}

impl OutboxModel {
    fn schedule(&mut self, id: &EventId, due: u64) -> bool {
        if self.finished.contains(id) || self.waiting.iter().any(|w| w.0 == *id) {
            return false;
        }
        self.recorded += 1;
        self.waiting.push((id.clone(), due, self.recorded, 0));
        true
    }

    /// (id, attempt, claimed until) of each claimed event, in order.
    fn claim(&mut self, at: u64, lease: u64, limit: usize) -> Vec<(EventId, u32, u64)> {
        self.waiting.sort_by_key(|w| (w.1, w.2));
        let mut claimed = Vec::new();
        for entry in self.waiting.iter_mut().filter(|w| w.1 <= at).take(limit) {
            entry.3 += 1;
            entry.1 = at + lease;
            claimed.push((entry.0.clone(), entry.3, at + lease));
        }
        claimed
    }

    fn holds(&self, id: &EventId, attempt: u32) -> Option<usize> {
        self.waiting
            .iter()
            .position(|w| w.0 == *id && w.3 == attempt)
    }

    fn finish(&mut self, id: &EventId, attempt: u32) -> bool {
        let Some(index) = self.holds(id, attempt) else {
            return false;
        };
        self.waiting.remove(index);
        self.finished.insert(id.clone());
        true
    }

    fn retry(&mut self, id: &EventId, attempt: u32, at: u64) -> bool {
        let Some(index) = self.holds(id, attempt) else {
            return false;
        };
        self.waiting[index].1 = at;
        true
    }
}

/// Runs `steps` on `store` and on the model; the first answer that
/// differs fails the case.
async fn run_steps(store: &dyn OutboxStore, steps: &[Step]) -> Result<(), String> {
    let cx = Cx::new("outbox_sequences_match_the_model", store)
        .await
        .map_err(|e| e.to_string())?;
    let lease_ms = 5;
    let lease = Duration::from_millis(lease_ms);
    let mut model = OutboxModel::default();
    let mut claims: Vec<countersign_approval_core::ClaimedNotification> = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        let at = |ms: u64| cx.at(ms);
        let differs = |what: String| Err(format!("step {index} ({step:?}): {what}"));
        match step {
            Step::Schedule { event, due } => {
                let event = cx.event(*event);
                let expected = model.schedule(&event.id, *due);
                let got = store
                    .schedule(event, at(*due))
                    .await
                    .map_err(|e| e.to_string())?;
                if got != expected {
                    return differs(format!("schedule answered {got}, the contract {expected}"));
                }
            }
            Step::Claim { at: now, limit } => {
                let expected = model.claim(*now, lease_ms, *limit);
                let got = store
                    .claim_due(at(*now), lease, *limit)
                    .await
                    .map_err(|e| e.to_string())?;
                let seen: Vec<(EventId, u32, u64)> = got
                    .iter()
                    .map(|c| {
                        let until = c
                            .claimed_until
                            .as_millis()
                            .saturating_sub(cx.t0.as_millis());
                        (c.event.id.clone(), c.attempt, until)
                    })
                    .collect();
                if seen != expected {
                    return differs(format!("claimed {seen:?}, the contract {expected:?}"));
                }
                claims.extend(got);
            }
            Step::Finish { claim, at: now } => {
                let Some(claim) = claims.get(claim % claims.len().max(1)) else {
                    continue;
                };
                let expected = model.finish(&claim.event.id, claim.attempt);
                let got = store
                    .finish(claim, at(*now))
                    .await
                    .map_err(|e| e.to_string())?;
                if got != expected {
                    return differs(format!("finish answered {got}, the contract {expected}"));
                }
            }
            Step::Retry { claim, at: when } => {
                let Some(claim) = claims.get(claim % claims.len().max(1)) else {
                    continue;
                };
                let expected = model.retry(&claim.event.id, claim.attempt, *when);
                let got = store
                    .retry_at(claim, at(*when))
                    .await
                    .map_err(|e| e.to_string())?;
                if got != expected {
                    return differs(format!("retry_at answered {got}, the contract {expected}"));
                }
            }
        }
    }
    Ok(())
}

/// Generated sequences of schedule, claim, finish and retry (128 cases of
/// up to 40 steps, six events, a 5 ms lease), each on a fresh store, give
/// the answers the contract's model gives. Shrunk to the shortest failing
/// sequence.
pub fn outbox_sequences_match_the_model<F, Fut, S>(factory: F) -> Result<(), CheckFailure>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<S>>,
    S: OutboxStore + 'static,
{
    use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
    const CHECK: &str = "outbox_sequences_match_the_model";
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CheckFailure::new(CHECK, format!("no runtime: {e}")))?;
    if rt.block_on(factory()).is_none() {
        eprintln!("{CHECK}: skipped, the store factory gave no store");
        return Ok(());
    }
    let mut runner = TestRunner::new(Config {
        cases: 128,
        failure_persistence: None,
        fork: false,
        timeout: 0,
        ..Config::default()
    });
    let strategy = proptest::collection::vec(step_strategy(), 1..40);
    let result = runner.run(&strategy, |steps| {
        rt.block_on(async {
            let Some(store) = factory().await else {
                return Err(TestCaseError::fail("the store factory gave no store"));
            };
            run_steps(&store, &steps).await.map_err(TestCaseError::fail)
        })
    });
    match result {
        Ok(()) => Ok(()),
        Err(TestError::Fail(reason, steps)) => Err(CheckFailure::new(
            CHECK,
            format!("{reason}; the shortest failing sequence: {steps:?}"),
        )),
        Err(TestError::Abort(reason)) => Err(CheckFailure::new(CHECK, reason.to_string())),
    }
}
