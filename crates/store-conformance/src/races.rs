//! Race checks: many tasks on one grant at once, on a multi-thread runtime,
//! released together by a barrier.

use std::sync::Arc;

use countersign_approval_core::{
    AbandonOutcome, Approval, ApprovalId, ApprovalStore, AttemptId, Binding, Clock, ConsumeOutcome,
    GrantState, RevokeOutcome, StaleReason, StoreError, SystemClock, Timestamp,
};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::Barrier;
use tokio::task::JoinHandle;

use crate::failure::CheckFailure;
use crate::fixtures::{Fixtures, TTL};

/// How hard the race checks push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaceConfig {
    /// Grants raced one after another in each check (default 200).
    pub grants: usize,
    /// Concurrent consumes on each grant (default 64).
    pub contenders: usize,
    /// Concurrent revokes on each grant when revokes race consumes (default 4).
    pub revokers: usize,
    /// Concurrent consumes on each grant when revokes race consumes (default 4).
    pub consumers: usize,
}

impl Default for RaceConfig {
    fn default() -> Self {
        RaceConfig {
            grants: 200,
            contenders: 64,
            revokers: 4,
            consumers: 4,
        }
    }
}

macro_rules! race_names {
    (scenarios [$($scenario:ident),* $(,)?] races [$($race:ident),* $(,)?]) => {
        /// The name of every race check, in the order the macro lists them.
        pub const RACE_CHECKS: &[&str] = &[$(stringify!($race)),*];
    };
}
crate::__for_each_check!([race_names]);

struct Race {
    check: &'static str,
    store: Arc<dyn ApprovalStore>,
    fx: Fixtures,
    t0: Timestamp,
}

impl Race {
    async fn new(
        check: &'static str,
        store: Arc<dyn ApprovalStore>,
        config: &RaceConfig,
    ) -> Result<Race, CheckFailure> {
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(RuntimeFlavor::MultiThread) => {}
            _ => {
                return Err(CheckFailure::new(
                    check,
                    "race checks need a multi-thread tokio runtime so contenders run in parallel: \
                     use #[tokio::test(flavor = \"multi_thread\")] or the store_conformance_tests! macro",
                ));
            }
        }
        if config.grants == 0
            || config.contenders < 2
            || config.revokers == 0
            || config.consumers == 0
        {
            return Err(CheckFailure::new(
                check,
                "race config needs at least one grant, two contenders, one revoker and one consumer",
            ));
        }
        Ok(Race {
            check,
            fx: Fixtures::new(check).await?,
            store,
            t0: SystemClock.now(),
        })
    }

    fn fail(&self, message: impl Into<String>) -> CheckFailure {
        CheckFailure::new(self.check, message)
    }

    fn attempt(&self) -> Result<AttemptId, CheckFailure> {
        AttemptId::generate()
            .map_err(|e| self.fail(format!("could not generate an attempt id: {e}")))
    }

    async fn issue(&self) -> Result<(ApprovalId, Binding), CheckFailure> {
        let approval = Approval::for_action(
            self.fx.actors[0].clone(),
            self.fx.runs[0].clone(),
            &self.fx.urls[0],
            &self.fx.actions[0],
            TTL,
            self.t0,
        )
        .map_err(|e| self.fail(format!("could not build a grant: {e}")))?;
        let (id, binding) = (approval.id.clone(), approval.binding());
        self.store
            .issue(approval)
            .await
            .map_err(|e| self.fail(format!("issuing a new grant failed: {e}")))?;
        Ok((id, binding))
    }

    fn spawn_consume(
        &self,
        barrier: &Arc<Barrier>,
        id: &ApprovalId,
        binding: &Binding,
        attempt: AttemptId,
    ) -> JoinHandle<(AttemptId, Result<ConsumeOutcome, StoreError>)> {
        let (store, barrier, id, binding) = (
            Arc::clone(&self.store),
            Arc::clone(barrier),
            id.clone(),
            binding.clone(),
        );
        let now = self.t0.saturating_add(std::time::Duration::from_millis(1));
        tokio::spawn(async move {
            barrier.wait().await;
            let answer = store.consume_once(&id, &binding, now, &attempt).await;
            (attempt, answer)
        })
    }

    fn spawn_revoke(
        &self,
        barrier: &Arc<Barrier>,
        id: &ApprovalId,
    ) -> JoinHandle<Result<RevokeOutcome, StoreError>> {
        let (store, barrier, id) = (Arc::clone(&self.store), Arc::clone(barrier), id.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            store.revoke(&id).await
        })
    }

    fn spawn_abandon(
        &self,
        barrier: &Arc<Barrier>,
        id: &ApprovalId,
        attempt: AttemptId,
    ) -> JoinHandle<Result<AbandonOutcome, StoreError>> {
        let (store, barrier, id) = (Arc::clone(&self.store), Arc::clone(barrier), id.clone());
        let now = self.t0.saturating_add(std::time::Duration::from_millis(2));
        tokio::spawn(async move {
            barrier.wait().await;
            store.abandon(&id, &attempt, now).await
        })
    }

    async fn join<T>(&self, handle: JoinHandle<T>) -> Result<T, CheckFailure> {
        handle
            .await
            .map_err(|e| self.fail(format!("a contender task did not finish: {e}")))
    }

    async fn expect_state(
        &self,
        grant: usize,
        id: &ApprovalId,
        expected: GrantState,
    ) -> Result<(), CheckFailure> {
        let stored =
            self.store.get(id).await.map_err(|e| {
                self.fail(format!("grant {grant}: get failed with a store error: {e}"))
            })?;
        match stored {
            Some(grant_now) if grant_now.state == expected => Ok(()),
            Some(grant_now) => Err(self.fail(format!(
                "grant {grant}: after the race get answered state {:?}, expected {expected:?}",
                grant_now.state
            ))),
            None => Err(self.fail(format!(
                "grant {grant}: after the race get answered None, expected {expected:?}"
            ))),
        }
    }
}

/// `config.contenders` concurrent consumes (distinct attempts, matching
/// binding) on each of `config.grants` grants: exactly one answers
/// `Consumed { replay: false }`, all others `Stale(Consumed)`, and the grant
/// ends consumed by the winner.
pub async fn concurrent_consumes_have_one_winner(
    store: Arc<dyn ApprovalStore>,
    config: &RaceConfig,
) -> Result<(), CheckFailure> {
    let race = Race::new("concurrent_consumes_have_one_winner", store, config).await?;
    for grant in 0..config.grants {
        let (id, binding) = race.issue().await?;
        let barrier = Arc::new(Barrier::new(config.contenders));
        let mut handles = Vec::with_capacity(config.contenders);
        for _ in 0..config.contenders {
            handles.push(race.spawn_consume(&barrier, &id, &binding, race.attempt()?));
        }
        let mut winners = Vec::new();
        for handle in handles {
            let (attempt, answer) = race.join(handle).await?;
            match answer {
                Ok(ConsumeOutcome::Consumed { replay: false }) => winners.push(attempt),
                Ok(ConsumeOutcome::Stale(StaleReason::Consumed)) => {}
                Ok(other) => {
                    return Err(race.fail(format!(
                        "grant {grant}: a concurrent consume answered {other:?}, expected \
                         Consumed {{ replay: false }} or Stale(Consumed)"
                    )));
                }
                Err(e) => {
                    return Err(race.fail(format!(
                        "grant {grant}: a concurrent consume failed with a store error: {e}"
                    )));
                }
            }
        }
        let winner = match winners.as_slice() {
            [winner] => winner.clone(),
            _ => {
                return Err(race.fail(format!(
                    "grant {grant} of {}: {} of {} concurrent consumes by distinct attempts won, \
                     expected exactly one (consume_once is not atomic)",
                    config.grants,
                    winners.len(),
                    config.contenders
                )));
            }
        };
        race.expect_state(
            grant,
            &id,
            GrantState::Consumed {
                at: race.t0.saturating_add(std::time::Duration::from_millis(1)),
                by: winner,
            },
        )
        .await?;
    }
    Ok(())
}

/// `config.contenders` concurrent retries of one attempt (same binding) on
/// each of `config.grants` grants: exactly one answers
/// `Consumed { replay: false }`, all others `Consumed { replay: true }`.
pub async fn concurrent_retries_of_one_attempt_have_one_winner(
    store: Arc<dyn ApprovalStore>,
    config: &RaceConfig,
) -> Result<(), CheckFailure> {
    let race = Race::new(
        "concurrent_retries_of_one_attempt_have_one_winner",
        store,
        config,
    )
    .await?;
    for grant in 0..config.grants {
        let (id, binding) = race.issue().await?;
        let attempt = race.attempt()?;
        let barrier = Arc::new(Barrier::new(config.contenders));
        let handles: Vec<_> = (0..config.contenders)
            .map(|_| race.spawn_consume(&barrier, &id, &binding, attempt.clone()))
            .collect();
        let mut first = 0usize;
        for handle in handles {
            match race.join(handle).await?.1 {
                Ok(ConsumeOutcome::Consumed { replay: false }) => first += 1,
                Ok(ConsumeOutcome::Consumed { replay: true }) => {}
                Ok(other) => {
                    return Err(race.fail(format!(
                        "grant {grant}: a concurrent retry of one attempt answered {other:?}, \
                         expected Consumed {{ replay: false }} or Consumed {{ replay: true }}"
                    )));
                }
                Err(e) => {
                    return Err(race.fail(format!(
                        "grant {grant}: a concurrent retry failed with a store error: {e}"
                    )));
                }
            }
        }
        if first != 1 {
            return Err(race.fail(format!(
                "grant {grant} of {}: {first} of {} concurrent retries of one attempt answered \
                 Consumed {{ replay: false }}, expected exactly one",
                config.grants, config.contenders
            )));
        }
        race.expect_state(
            grant,
            &id,
            GrantState::Consumed {
                at: race.t0.saturating_add(std::time::Duration::from_millis(1)),
                by: attempt,
            },
        )
        .await?;
    }
    Ok(())
}

/// `config.revokers` revokes racing `config.consumers` consumes (distinct
/// attempts) on each of `config.grants` grants: exactly one call wins —
/// either one revoke answers `Revoked` (every consume then answers
/// `Stale(Revoked)`, the other revokes `AlreadyRevoked`) or one consume
/// answers `Consumed { replay: false }` (the other consumes `Stale(Consumed)`,
/// every revoke `AlreadyConsumed`) — and the stored state agrees.
pub async fn revoke_racing_consume_has_one_winner(
    store: Arc<dyn ApprovalStore>,
    config: &RaceConfig,
) -> Result<(), CheckFailure> {
    let race = Race::new("revoke_racing_consume_has_one_winner", store, config).await?;
    for grant in 0..config.grants {
        let (id, binding) = race.issue().await?;
        let barrier = Arc::new(Barrier::new(config.revokers + config.consumers));
        let mut revokes = Vec::with_capacity(config.revokers);
        let mut consumes = Vec::with_capacity(config.consumers);
        // Alternate which side is spawned first so neither always starts ahead.
        for n in 0..config.revokers.max(config.consumers) {
            let revoke_first = (grant + n) % 2 == 0;
            if revoke_first && n < config.revokers {
                revokes.push(race.spawn_revoke(&barrier, &id));
            }
            if n < config.consumers {
                consumes.push(race.spawn_consume(&barrier, &id, &binding, race.attempt()?));
            }
            if !revoke_first && n < config.revokers {
                revokes.push(race.spawn_revoke(&barrier, &id));
            }
        }
        let mut revoke_answers = Vec::with_capacity(config.revokers);
        for handle in revokes {
            match race.join(handle).await? {
                Ok(answer) => revoke_answers.push(answer),
                Err(e) => {
                    return Err(race.fail(format!(
                        "grant {grant}: a racing revoke failed with a store error: {e}"
                    )));
                }
            }
        }
        let mut consume_answers = Vec::with_capacity(config.consumers);
        for handle in consumes {
            match race.join(handle).await? {
                (attempt, Ok(answer)) => consume_answers.push((attempt, answer)),
                (_, Err(e)) => {
                    return Err(race.fail(format!(
                        "grant {grant}: a racing consume failed with a store error: {e}"
                    )));
                }
            }
        }
        let revoked = revoke_answers
            .iter()
            .filter(|a| **a == RevokeOutcome::Revoked)
            .count();
        let consumed: Vec<&AttemptId> = consume_answers
            .iter()
            .filter(|(_, a)| *a == ConsumeOutcome::Consumed { replay: false })
            .map(|(attempt, _)| attempt)
            .collect();
        let describe = || {
            format!(
                "revokes answered {revoke_answers:?}, consumes answered {:?}",
                consume_answers.iter().map(|(_, a)| a).collect::<Vec<_>>()
            )
        };
        let expected_state = match (revoked, consumed.as_slice()) {
            (1, []) => {
                let others_ok = revoke_answers
                    .iter()
                    .all(|a| matches!(a, RevokeOutcome::Revoked | RevokeOutcome::AlreadyRevoked))
                    && consume_answers
                        .iter()
                        .all(|(_, a)| *a == ConsumeOutcome::Stale(StaleReason::Revoked));
                if !others_ok {
                    return Err(race.fail(format!(
                        "grant {grant}: a revoke won but the other calls disagree: {}",
                        describe()
                    )));
                }
                GrantState::Revoked
            }
            (0, [winner]) => {
                let others_ok = revoke_answers
                    .iter()
                    .all(|a| *a == RevokeOutcome::AlreadyConsumed)
                    && consume_answers.iter().all(|(_, a)| {
                        matches!(
                            a,
                            ConsumeOutcome::Consumed { replay: false }
                                | ConsumeOutcome::Stale(StaleReason::Consumed)
                        )
                    });
                if !others_ok {
                    return Err(race.fail(format!(
                        "grant {grant}: a consume won but the other calls disagree: {}",
                        describe()
                    )));
                }
                GrantState::Consumed {
                    at: race.t0.saturating_add(std::time::Duration::from_millis(1)),
                    by: (*winner).clone(),
                }
            }
            (revoked, consumed) => {
                return Err(race.fail(format!(
                    "grant {grant} of {}: {revoked} revokes answered Revoked and {} consumes \
                     answered Consumed {{ replay: false }}, expected exactly one winner in all \
                     ({})",
                    config.grants,
                    consumed.len(),
                    describe()
                )));
            }
        };
        race.expect_state(grant, &id, expected_state).await?;
    }
    Ok(())
}

/// On each of `config.grants` grants, an abandon of attempt A races A's own
/// (late) consume and `config.consumers` consumes by other attempts. A
/// caller performs only on `Consumed { replay: false }` and never once it
/// abandoned the attempt, so: at most one other attempt wins, the grant
/// never ends consumed by A, and every answer fits one order of the calls —
/// A's consume won only if the abandon then undid it
/// (`Usable { restored: true }`), the abandon answered `ConsumedByOther`
/// only if another attempt won, and with no winner among the others they
/// all lost to A and the grant ends active. A last consume of A after the
/// race answers `Stale(Abandoned)` and changes nothing.
pub async fn abandon_racing_consumes_never_performs_twice(
    store: Arc<dyn ApprovalStore>,
    config: &RaceConfig,
) -> Result<(), CheckFailure> {
    let race = Race::new(
        "abandon_racing_consumes_never_performs_twice",
        store,
        config,
    )
    .await?;
    for grant in 0..config.grants {
        let (id, binding) = race.issue().await?;
        let abandoned = race.attempt()?;
        let barrier = Arc::new(Barrier::new(config.consumers + 2));
        // Alternate which of A's two calls is spawned first.
        let (late, abandon) = if grant % 2 == 0 {
            let late = race.spawn_consume(&barrier, &id, &binding, abandoned.clone());
            (late, race.spawn_abandon(&barrier, &id, abandoned.clone()))
        } else {
            let abandon = race.spawn_abandon(&barrier, &id, abandoned.clone());
            (
                race.spawn_consume(&barrier, &id, &binding, abandoned.clone()),
                abandon,
            )
        };
        let others: Vec<_> = (0..config.consumers)
            .map(|_| Ok(race.spawn_consume(&barrier, &id, &binding, race.attempt()?)))
            .collect::<Result<_, CheckFailure>>()?;
        let late = match race.join(late).await?.1 {
            Ok(answer) => answer,
            Err(e) => {
                return Err(race.fail(format!(
                    "grant {grant}: the abandoned attempt's consume failed with a store error: {e}"
                )));
            }
        };
        let abandon = race.join(abandon).await?.map_err(|e| {
            race.fail(format!(
                "grant {grant}: the racing abandon failed with a store error: {e}"
            ))
        })?;
        let mut other_answers = Vec::with_capacity(config.consumers);
        let mut winners = Vec::new();
        for handle in others {
            match race.join(handle).await? {
                (attempt, Ok(answer)) => {
                    if answer == (ConsumeOutcome::Consumed { replay: false }) {
                        winners.push(attempt);
                    }
                    other_answers.push(answer);
                }
                (_, Err(e)) => {
                    return Err(race.fail(format!(
                        "grant {grant}: a racing consume failed with a store error: {e}"
                    )));
                }
            }
        }
        let describe = || {
            format!(
                "the abandoned attempt's consume answered {late:?}, the abandon {abandon:?}, \
                 the other consumes {other_answers:?}"
            )
        };
        let late_won = late == ConsumeOutcome::Consumed { replay: false };
        let consistent = matches!(
            late,
            ConsumeOutcome::Consumed { replay: false }
                | ConsumeOutcome::Stale(StaleReason::Abandoned | StaleReason::Consumed)
        ) && late_won == (abandon == AbandonOutcome::Usable { restored: true })
            && matches!(
                abandon,
                AbandonOutcome::Usable { .. } | AbandonOutcome::ConsumedByOther
            )
            && (abandon != AbandonOutcome::ConsumedByOther || winners.len() == 1)
            && other_answers.iter().all(|a| {
                matches!(
                    a,
                    ConsumeOutcome::Consumed { replay: false }
                        | ConsumeOutcome::Stale(StaleReason::Consumed)
                )
            });
        if !consistent && winners.len() <= 1 {
            return Err(race.fail(format!(
                "grant {grant}: the answers fit no order of the calls ({})",
                describe()
            )));
        }
        let expected_state = match winners.as_slice() {
            [winner] => GrantState::Consumed {
                at: race.t0.saturating_add(std::time::Duration::from_millis(1)),
                by: winner.clone(),
            },
            [] if late_won => GrantState::Active,
            [] => {
                return Err(race.fail(format!(
                    "grant {grant}: no attempt won although the abandoned attempt did not hold \
                     the grant ({})",
                    describe()
                )));
            }
            many => {
                return Err(race.fail(format!(
                    "grant {grant} of {}: {} other attempts answered Consumed {{ replay: false }}, \
                     expected at most one performance ({})",
                    config.grants,
                    many.len(),
                    describe()
                )));
            }
        };
        race.expect_state(grant, &id, expected_state.clone())
            .await?;
        // One more late consume of A, arriving after everything: refused as
        // abandoned, and nothing changes.
        let later = race.t0.saturating_add(std::time::Duration::from_millis(3));
        let answer = race
            .store
            .consume_once(&id, &binding, later, &abandoned)
            .await
            .map_err(|e| race.fail(format!("grant {grant}: the last late consume failed: {e}")))?;
        if answer != ConsumeOutcome::Stale(StaleReason::Abandoned) {
            return Err(race.fail(format!(
                "grant {grant}: a late consume of the abandoned attempt after the race answered \
                 {answer:?}, expected Stale(Abandoned)"
            )));
        }
        race.expect_state(grant, &id, expected_state).await?;
    }
    Ok(())
}

/// Consumes of a run's grants by many tasks while the run is stopped: every
/// consume that started after `stop_run` returned answers `Stale(Stopped)`,
/// none that ended before the stop began does, every grant ends either
/// consumed by an `ok` consume or stopped, and the stop counts exactly the
/// grants no consume had taken (`ok` + `stopped_grants` = grants).
pub async fn stop_racing_consumes_orders_every_consume(
    store: Arc<dyn ApprovalStore>,
    config: &RaceConfig,
) -> Result<(), CheckFailure> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Instant;

    let race = Race::new("stop_racing_consumes_orders_every_consume", store, config).await?;
    let unique =
        ApprovalId::generate().map_err(|e| race.fail(format!("could not generate an id: {e}")))?;
    let actor = countersign_approval_core::ActorId::new(format!("stop-race-{unique}"))
        .map_err(|e| race.fail(e.to_string()))?;
    let run = countersign_approval_core::RunId::new(format!("stop-race-run-{unique}"))
        .map_err(|e| race.fail(e.to_string()))?;
    let mut grants = Vec::with_capacity(config.grants);
    for _ in 0..config.grants {
        let approval = Approval::for_action(
            actor.clone(),
            run.clone(),
            &race.fx.urls[0],
            &race.fx.actions[0],
            TTL,
            race.t0,
        )
        .map_err(|e| race.fail(format!("could not build a grant: {e}")))?;
        race.store
            .issue(approval.clone())
            .await
            .map_err(|e| race.fail(format!("issuing a new grant failed: {e}")))?;
        grants.push(approval);
    }
    let grants = Arc::new(grants);
    let next = Arc::new(AtomicUsize::new(0));
    let stop_began = Arc::new(AtomicBool::new(false));
    type Answer = (usize, Instant, Instant, Result<ConsumeOutcome, StoreError>);
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::new(Mutex::new(Vec::new()));
    let now = race.t0.saturating_add(std::time::Duration::from_millis(1));
    let workers = (config.consumers * 4).max(2);
    let mut handles = Vec::new();
    for _ in 0..workers {
        let (store, grants, next, stop_began, answers) = (
            Arc::clone(&race.store),
            Arc::clone(&grants),
            Arc::clone(&next),
            Arc::clone(&stop_began),
            Arc::clone(&answers),
        );
        handles.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                let Some(grant) = grants.get(n) else {
                    return Ok::<(), String>(());
                };
                // The second half waits for the stop to begin, so the stop
                // lands among consumes.
                while n >= grants.len() / 2 && !stop_began.load(Ordering::SeqCst) {
                    tokio::task::yield_now().await;
                }
                let attempt = AttemptId::generate().map_err(|e| e.to_string())?;
                let started = Instant::now();
                let answer = store
                    .consume_once(&grant.id, &grant.binding(), now, &attempt)
                    .await;
                let ended = Instant::now();
                answers
                    .lock()
                    .map_err(|_| "answers poisoned".to_owned())?
                    .push((n, started, ended, answer));
                tokio::task::yield_now().await;
            }
        }));
    }
    while next.load(Ordering::SeqCst) < grants.len() / 2 {
        tokio::task::yield_now().await;
    }
    let stop_start = Instant::now();
    stop_began.store(true, Ordering::SeqCst);
    let stopped = race
        .store
        .stop_run(&actor, &run, now)
        .await
        .map_err(|e| race.fail(format!("stop_run failed with a store error: {e}")))?;
    let stop_end = Instant::now();
    for handle in handles {
        race.join(handle)
            .await?
            .map_err(|e| race.fail(format!("a consumer failed: {e}")))?;
    }
    let answers = answers
        .lock()
        .map_err(|_| race.fail("answers poisoned"))?
        .drain(..)
        .collect::<Vec<_>>();
    let mut ok = vec![false; grants.len()];
    for (n, started, ended, answer) in &answers {
        match answer {
            Ok(ConsumeOutcome::Consumed { replay: false }) => {
                if *started > stop_end {
                    return Err(race.fail(format!(
                        "grant {n}: a consume that started after stop_run returned answered ok"
                    )));
                }
                ok[*n] = true;
            }
            Ok(ConsumeOutcome::Stale(StaleReason::Stopped)) => {
                if *ended < stop_start {
                    return Err(race.fail(format!(
                        "grant {n}: a consume that ended before the stop began answered Stale(Stopped)"
                    )));
                }
            }
            Ok(other) => {
                return Err(race.fail(format!(
                    "grant {n}: a racing consume answered {other:?}, expected ok or Stale(Stopped)"
                )));
            }
            Err(e) => {
                return Err(race.fail(format!(
                    "grant {n}: a racing consume failed with a store error: {e}"
                )));
            }
        }
    }
    let oks = ok.iter().filter(|o| **o).count() as u64;
    if oks + stopped.stopped_grants != grants.len() as u64 || stopped.was_stopped {
        return Err(race.fail(format!(
            "{oks} consumes answered ok and the stop answered {stopped:?}: expected the stop to \
             count exactly the {} grants no consume took, and the run not stopped before",
            grants.len() as u64 - oks.min(grants.len() as u64)
        )));
    }
    for (n, grant) in grants.iter().enumerate() {
        let stored = race
            .store
            .get(&grant.id)
            .await
            .map_err(|e| race.fail(format!("grant {n}: get failed with a store error: {e}")))?
            .map(|g| g.state);
        let fits = match &stored {
            Some(GrantState::Consumed { .. }) => ok[n],
            Some(GrantState::Stopped) => !ok[n],
            _ => false,
        };
        if !fits {
            return Err(race.fail(format!(
                "grant {n}: after the race get answered {stored:?}, its consume answered {}",
                if ok[n] { "ok" } else { "no ok" }
            )));
        }
        let late = race
            .store
            .consume_once(&grant.id, &grant.binding(), now, &race.attempt()?)
            .await
            .map_err(|e| race.fail(format!("grant {n}: a late consume failed: {e}")))?;
        if late != ConsumeOutcome::Stale(StaleReason::Stopped) {
            return Err(race.fail(format!(
                "grant {n}: a consume after the stop answered {late:?}, expected Stale(Stopped)"
            )));
        }
    }
    Ok(())
}

/// `limit + 11` concurrent mismatched consumes on each grant (limit 5):
/// exactly `limit - 1` answer `Stale(Mismatch)`, the others `Stale(Locked)`;
/// the grant ends locked with exactly `limit` failed attempts, never
/// consumed, and a matching consume then answers `Stale(Locked)`.
pub async fn concurrent_mismatches_lock_once(
    store: Arc<dyn ApprovalStore>,
    config: &RaceConfig,
) -> Result<(), CheckFailure> {
    use crate::model::BindingField;
    const LIMIT: u32 = 5;
    let race = Race::new("concurrent_mismatches_lock_once", store, config).await?;
    let contenders = LIMIT as usize + 11;
    for grant in 0..config.grants.min(50) {
        let (id, binding) = race.issue().await?;
        let barrier = Arc::new(Barrier::new(contenders));
        let handles: Vec<_> = (0..contenders)
            .map(|i| {
                let field = BindingField::ALL[i % BindingField::ALL.len()];
                let wrong = race.fx.mismatched(&binding, field);
                Ok(race.spawn_consume(&barrier, &id, &wrong, race.attempt()?))
            })
            .collect::<Result<_, CheckFailure>>()?;
        let (mut mismatches, mut locked) = (0u32, 0u32);
        for handle in handles {
            match race.join(handle).await?.1 {
                Ok(ConsumeOutcome::Stale(StaleReason::Mismatch)) => mismatches += 1,
                Ok(ConsumeOutcome::Stale(StaleReason::Locked)) => locked += 1,
                Ok(other) => {
                    return Err(race.fail(format!(
                        "grant {grant}: a mismatched consume answered {other:?}"
                    )));
                }
                Err(e) => {
                    return Err(race.fail(format!(
                        "grant {grant}: a mismatched consume failed with a store error: {e}"
                    )));
                }
            }
        }
        if mismatches != LIMIT - 1 {
            return Err(race.fail(format!(
                "grant {grant}: {mismatches} of {contenders} concurrent mismatches answered \
                 Stale(Mismatch) and {locked} Stale(Locked), expected exactly {} Stale(Mismatch)",
                LIMIT - 1
            )));
        }
        let stored =
            race.store.get(&id).await.map_err(|e| {
                race.fail(format!("grant {grant}: get failed with a store error: {e}"))
            })?;
        match stored {
            Some(g) if g.state == GrantState::Locked && g.failed_attempts == LIMIT => {}
            other => {
                return Err(race.fail(format!(
                    "grant {grant}: after the race get answered {:?} with {:?} failed attempts, \
                     expected Locked with {LIMIT}",
                    other.as_ref().map(|g| g.state.clone()),
                    other.as_ref().map(|g| g.failed_attempts)
                )));
            }
        }
        let matching = race
            .store
            .consume_once(
                &id,
                &binding,
                race.t0.saturating_add(std::time::Duration::from_millis(2)),
                &race.attempt()?,
            )
            .await
            .map_err(|e| race.fail(format!("grant {grant}: the matching consume failed: {e}")))?;
        if matching != ConsumeOutcome::Stale(StaleReason::Locked) {
            return Err(race.fail(format!(
                "grant {grant}: a matching consume of the locked grant answered {matching:?}"
            )));
        }
    }
    Ok(())
}
