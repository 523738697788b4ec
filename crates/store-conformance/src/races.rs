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

use crate::CheckFailure;
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
