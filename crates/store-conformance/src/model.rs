//! The model-based property test: random sequences of issue, revoke, get,
//! consume, abandon, stops and resumes of runs and actors, and clock
//! advances, run against the store and against
//! [`ReferenceModel`], an independent implementation of the contract over
//! plain data. Any difference in any answer fails the check, and proptest
//! shrinks the sequence to a minimal one that shows it.
//!
//! The model is written from the contract's words, not from
//! `countersign_approval_core::decide_consume`, so a defect shared by the
//! store and that helper still shows.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, Approval, ApprovalId, ApprovalStore, ApproverId, AttemptId, Binding, Clock,
    ConsumeOutcome, GrantState, IssueError, ResumeOutcome, RevokeOutcome, StaleReason, StopOutcome,
    StoredGrant, SystemClock, Timestamp,
};
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Just, Union};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use proptest_state_machine::ReferenceStateMachine;

use crate::failure::CheckFailure;
pub use crate::fixtures::BindingField;
use crate::fixtures::{Fixtures, describe_difference};

/// The name of the model-based check, as [`CheckFailure::check`] reports it.
pub const MODEL_CHECK: &str = "model_matches_reference";

const CHECK: &str = MODEL_CHECK;

/// Most grants one generated sequence issues.
pub const MAX_GRANTS: usize = 6;
/// How many distinct attempt ids one sequence uses; few, so attempts repeat
/// and replays happen.
pub const ATTEMPTS: usize = 4;

// The model keeps abandoned attempts as bits of a u8 and never reaches the
// store's bound on them.
const _: () =
    assert!(ATTEMPTS <= 8 && ATTEMPTS < countersign_approval_core::MAX_ABANDONED_ATTEMPTS);

/// How long and how hard the model check runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    /// Random sequences to try (default 64).
    pub cases: u32,
    /// Longest sequence, in transitions (default 40).
    pub max_transitions: usize,
    /// A fixed seed for the random generator, to replay a run; `None` picks
    /// a fresh one each time.
    pub seed: Option<u64>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            cases: 64,
            max_transitions: 40,
            seed: None,
        }
    }
}

impl ModelConfig {
    /// The defaults, overridden by the environment variables
    /// `COUNTERSIGN_CONFORMANCE_CASES`, `COUNTERSIGN_CONFORMANCE_TRANSITIONS`
    /// and `COUNTERSIGN_CONFORMANCE_SEED` when set.
    pub fn from_env() -> Result<ModelConfig, CheckFailure> {
        fn read<T: std::str::FromStr>(name: &str) -> Result<Option<T>, CheckFailure> {
            match std::env::var(name) {
                Err(_) => Ok(None),
                Ok(text) => text.trim().parse().map(Some).map_err(|_| {
                    CheckFailure::new(
                        CHECK,
                        format!("{name} must be a non-negative integer, got `{text}`"),
                    )
                }),
            }
        }
        let mut config = ModelConfig::default();
        if let Some(cases) = read("COUNTERSIGN_CONFORMANCE_CASES")? {
            config.cases = cases;
        }
        if let Some(max) = read("COUNTERSIGN_CONFORMANCE_TRANSITIONS")? {
            config.max_transitions = max;
        }
        config.seed = read("COUNTERSIGN_CONFORMANCE_SEED")?;
        Ok(config)
    }
}

/// A binding as indexes into the kit's two actors, runs, URLs and actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BindingChoice {
    /// 0 or 1.
    pub actor: usize,
    /// 0 or 1.
    pub run: usize,
    /// 0 or 1.
    pub url: usize,
    /// 0 or 1.
    pub action: usize,
}

impl BindingChoice {
    /// This binding with `field` switched to the other value.
    pub fn with_other(self, field: BindingField) -> BindingChoice {
        let mut other = self;
        let slot = match field {
            BindingField::Actor => &mut other.actor,
            BindingField::Run => &mut other.run,
            BindingField::Url => &mut other.url,
            BindingField::Action => &mut other.action,
        };
        *slot = 1 - (*slot).min(1);
        other
    }
}

/// Which grant a call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The n-th grant the sequence issued.
    Grant(usize),
    /// A fresh id that was never issued.
    Unknown,
}

/// What a consume asks for, relative to the grant's own binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Exactly the grant's binding.
    Matching,
    /// The grant's binding with one field switched.
    Mismatch(BindingField),
}

/// One step of a generated sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// Issue a new grant valid for `ttl_ms` from now.
    Issue {
        /// What it binds.
        binding: BindingChoice,
        /// Its lifetime.
        ttl_ms: u64,
        /// Whether it carries an approver note.
        note: bool,
        /// Whether it names an approver.
        approver: bool,
        /// Its failed-attempt limit (small, so grants lock).
        attempt_limit: u32,
    },
    /// Issue a different grant under the id of the n-th one.
    IssueDuplicate {
        /// Which grant's id.
        grant: usize,
    },
    /// Revoke.
    Revoke(Target),
    /// Read.
    Get(Target),
    /// Consume.
    Consume {
        /// Which grant.
        target: Target,
        /// Which binding.
        request: Request,
        /// Which of the [`ATTEMPTS`] attempt ids.
        attempt: usize,
    },
    /// Abandon (give back) an attempt.
    Abandon {
        /// Which grant.
        target: Target,
        /// Which of the [`ATTEMPTS`] attempt ids.
        attempt: usize,
    },
    /// Stop a run of one of the two actors.
    StopRun {
        /// 0 or 1.
        actor: usize,
        /// 0 or 1.
        run: usize,
    },
    /// Stop one of the two actors.
    StopActor {
        /// 0 or 1.
        actor: usize,
    },
    /// Resume a run.
    ResumeRun {
        /// 0 or 1.
        actor: usize,
        /// 0 or 1.
        run: usize,
    },
    /// Resume an actor.
    ResumeActor {
        /// 0 or 1.
        actor: usize,
    },
    /// Move the clock forward.
    Advance {
        /// By how much.
        ms: u64,
    },
    /// Move the clock to a grant's `expires_at` (or one millisecond before),
    /// unless it is already past it.
    AdvanceToExpiry {
        /// Which grant.
        grant: usize,
        /// Stop at `expires_at - 1` instead.
        minus_one: bool,
    },
}

/// A grant's state in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelGrantState {
    /// Neither revoked nor consumed.
    Active,
    /// Revoked.
    Revoked,
    /// Locked after its attempt limit of mismatches.
    Locked,
    /// Consumed at `at` (milliseconds from the sequence's start) by attempt
    /// number `by`.
    Consumed {
        /// When.
        at: u64,
        /// Which attempt.
        by: usize,
    },
}

/// A grant in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelGrant {
    /// What it binds.
    pub binding: BindingChoice,
    /// The first instant (milliseconds from the sequence's start) it is expired.
    pub expires_at: u64,
    /// Its state.
    pub state: ModelGrantState,
    /// The attempts abandoned on it, one bit per attempt number.
    pub abandoned: u8,
    /// Mismatched presentations so far.
    pub failed: u32,
    /// Its failed-attempt limit.
    pub attempt_limit: u32,
    /// Its run's and its actor's stop count when it was issued.
    pub issued_in: (u32, u32),
}

impl ModelGrant {
    fn is_abandoned(&self, attempt: usize) -> bool {
        self.abandoned & (1 << (attempt % ATTEMPTS)) != 0
    }
}

/// A run's or an actor's stops: how many so far, and whether it is
/// stopped now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelFence {
    /// Stops so far.
    pub stops: u32,
    /// Stopped, not resumed since.
    pub stopped: bool,
}

/// The model: the clock, the grants issued so far, and the stop fences of
/// the two actors and their two runs each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelState {
    /// Milliseconds since the sequence started.
    pub now: u64,
    /// Grants in the order they were issued.
    pub grants: Vec<ModelGrant>,
    /// Run fences, by actor then run.
    pub runs: [[ModelFence; 2]; 2],
    /// Actor fences.
    pub actors: [ModelFence; 2],
}

/// What the contract says a store answers to one transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// `issue` succeeds.
    Issued,
    /// `issue` answers `AlreadyExists` and changes nothing.
    AlreadyExists,
    /// `issue` answers `Stopped` and stores nothing.
    IssueStopped,
    /// `stop_run` or `stop_actor` answers this.
    Stop(StopOutcome),
    /// `resume_run` or `resume_actor` answers this.
    Resume(ResumeOutcome),
    /// `revoke` answers this.
    Revoke(RevokeOutcome),
    /// `get` answers this grant (or `None`).
    Get(Option<ModelGrant>),
    /// `consume_once` answers this.
    Consume(ConsumeOutcome),
    /// `abandon` answers this.
    Abandon(AbandonOutcome),
    /// Only the clock moved; the store is not called.
    ClockMoved,
}

impl ModelState {
    /// Applies `transition` to the model and returns what the store must
    /// answer to it.
    pub fn step(&mut self, transition: &Transition) -> Expected {
        match *transition {
            Transition::Issue {
                binding,
                ttl_ms,
                attempt_limit,
                ..
            } => {
                let run = self.runs[binding.actor % 2][binding.run % 2];
                let actor = self.actors[binding.actor % 2];
                if run.stopped || actor.stopped {
                    return Expected::IssueStopped;
                }
                self.grants.push(ModelGrant {
                    binding,
                    expires_at: self.now.saturating_add(ttl_ms),
                    state: ModelGrantState::Active,
                    abandoned: 0,
                    failed: 0,
                    attempt_limit,
                    issued_in: (run.stops, actor.stops),
                });
                Expected::Issued
            }
            Transition::IssueDuplicate { .. } => Expected::AlreadyExists,
            Transition::Revoke(target) => {
                let stopped = self.is_stopped(target);
                let Some(grant) = self.grant_mut(target) else {
                    return Expected::Revoke(RevokeOutcome::Unknown);
                };
                Expected::Revoke(match grant.state {
                    ModelGrantState::Active if stopped => RevokeOutcome::AlreadyRevoked,
                    ModelGrantState::Active => {
                        grant.state = ModelGrantState::Revoked;
                        RevokeOutcome::Revoked
                    }
                    ModelGrantState::Revoked | ModelGrantState::Locked => {
                        RevokeOutcome::AlreadyRevoked
                    }
                    ModelGrantState::Consumed { .. } => RevokeOutcome::AlreadyConsumed,
                })
            }
            Transition::Get(target) => Expected::Get(self.grant_mut(target).map(|g| *g)),
            Transition::Consume {
                target,
                request,
                attempt,
            } => {
                let now = self.now;
                let stopped = self.is_stopped(target);
                let Some(grant) = self.grant_mut(target) else {
                    return Expected::Consume(ConsumeOutcome::Unknown);
                };
                let asked = match request {
                    Request::Matching => grant.binding,
                    Request::Mismatch(field) => grant.binding.with_other(field),
                };
                let same_binding = asked == grant.binding;
                if grant.is_abandoned(attempt) {
                    return Expected::Consume(ConsumeOutcome::Stale(StaleReason::Abandoned));
                }
                if stopped {
                    return Expected::Consume(ConsumeOutcome::Stale(StaleReason::Stopped));
                }
                Expected::Consume(match grant.state {
                    ModelGrantState::Revoked => ConsumeOutcome::Stale(StaleReason::Revoked),
                    ModelGrantState::Locked => ConsumeOutcome::Stale(StaleReason::Locked),
                    ModelGrantState::Consumed { by, .. } if by == attempt && same_binding => {
                        ConsumeOutcome::Consumed { replay: true }
                    }
                    ModelGrantState::Consumed { .. } => {
                        ConsumeOutcome::Stale(StaleReason::Consumed)
                    }
                    ModelGrantState::Active if now >= grant.expires_at => {
                        ConsumeOutcome::Stale(StaleReason::Expired)
                    }
                    ModelGrantState::Active if !same_binding => {
                        grant.failed += 1;
                        if grant.failed >= grant.attempt_limit {
                            grant.state = ModelGrantState::Locked;
                            ConsumeOutcome::Stale(StaleReason::Locked)
                        } else {
                            ConsumeOutcome::Stale(StaleReason::Mismatch)
                        }
                    }
                    ModelGrantState::Active => {
                        grant.state = ModelGrantState::Consumed {
                            at: now,
                            by: attempt,
                        };
                        ConsumeOutcome::Consumed { replay: false }
                    }
                })
            }
            Transition::Abandon { target, attempt } => {
                let now = self.now;
                let stopped = self.is_stopped(target);
                let Some(grant) = self.grant_mut(target) else {
                    return Expected::Abandon(AbandonOutcome::Unknown);
                };
                // The model never holds more than ATTEMPTS (< the bound)
                // abandoned attempts, so the bound is not modelled here; the
                // `abandoned_attempts_are_bounded` scenario checks it.
                if stopped {
                    return Expected::Abandon(AbandonOutcome::Stopped);
                }
                if matches!(
                    grant.state,
                    ModelGrantState::Revoked | ModelGrantState::Locked
                ) {
                    return Expected::Abandon(AbandonOutcome::Revoked);
                }
                grant.abandoned |= 1 << (attempt % ATTEMPTS);
                let mut restored = false;
                match grant.state {
                    ModelGrantState::Consumed { by, .. } if by == attempt => {
                        grant.state = ModelGrantState::Active;
                        restored = true;
                    }
                    ModelGrantState::Consumed { .. } => {
                        return Expected::Abandon(AbandonOutcome::ConsumedByOther);
                    }
                    _ => {}
                }
                Expected::Abandon(if now >= grant.expires_at {
                    AbandonOutcome::Expired
                } else {
                    AbandonOutcome::Usable { restored }
                })
            }
            Transition::StopRun { actor, run } => {
                let (a, r) = (actor % 2, run % 2);
                let now = self.now;
                let before = self.runs[a][r];
                let stopped_grants = (0..self.grants.len())
                    .filter(|&g| {
                        let grant = self.grants[g];
                        grant.binding.actor % 2 == a
                            && grant.binding.run % 2 == r
                            && grant.state == ModelGrantState::Active
                            && now < grant.expires_at
                            && !self.is_stopped(Target::Grant(g))
                    })
                    .count() as u64;
                self.runs[a][r] = ModelFence {
                    stops: before.stops + 1,
                    stopped: true,
                };
                Expected::Stop(StopOutcome {
                    stopped_grants,
                    stopped_standing: 0,
                    was_stopped: before.stopped,
                })
            }
            Transition::StopActor { actor } => {
                let a = actor % 2;
                let now = self.now;
                let before = self.actors[a];
                let stopped_grants = (0..self.grants.len())
                    .filter(|&g| {
                        let grant = self.grants[g];
                        grant.binding.actor % 2 == a
                            && grant.state == ModelGrantState::Active
                            && now < grant.expires_at
                            && !self.is_stopped(Target::Grant(g))
                    })
                    .count() as u64;
                self.actors[a] = ModelFence {
                    stops: before.stops + 1,
                    stopped: true,
                };
                Expected::Stop(StopOutcome {
                    stopped_grants,
                    stopped_standing: 0,
                    was_stopped: before.stopped,
                })
            }
            Transition::ResumeRun { actor, run } => {
                let fence = &mut self.runs[actor % 2][run % 2];
                Expected::Resume(resume(fence))
            }
            Transition::ResumeActor { actor } => {
                let fence = &mut self.actors[actor % 2];
                Expected::Resume(resume(fence))
            }
            Transition::Advance { ms } => {
                self.now = self.now.saturating_add(ms);
                Expected::ClockMoved
            }
            Transition::AdvanceToExpiry { grant, minus_one } => {
                if let Some(grant) = self.grants.get(grant) {
                    let to = grant.expires_at.saturating_sub(u64::from(minus_one));
                    self.now = self.now.max(to);
                }
                Expected::ClockMoved
            }
        }
    }

    /// Whether the grant's run or actor was stopped since it was issued.
    pub fn is_stopped(&self, target: Target) -> bool {
        let Target::Grant(g) = target else {
            return false;
        };
        let Some(grant) = self.grants.get(g) else {
            return false;
        };
        let (actor, run) = (grant.binding.actor % 2, grant.binding.run % 2);
        grant.issued_in != (self.runs[actor][run].stops, self.actors[actor].stops)
    }

    fn grant_mut(&mut self, target: Target) -> Option<&mut ModelGrant> {
        match target {
            Target::Grant(n) => self.grants.get_mut(n),
            Target::Unknown => None,
        }
    }
}

fn resume(fence: &mut ModelFence) -> ResumeOutcome {
    if fence.stopped {
        fence.stopped = false;
        ResumeOutcome::Resumed
    } else {
        ResumeOutcome::NotStopped
    }
}

/// The reference state machine that generates sequences and predicts every
/// answer.
#[derive(Debug, Clone, Copy)]
pub struct ReferenceModel;

fn field() -> impl Strategy<Value = BindingField> {
    proptest::sample::select(BindingField::ALL.to_vec())
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        3 => Just(Request::Matching),
        2 => field().prop_map(Request::Mismatch),
    ]
}

impl ReferenceStateMachine for ReferenceModel {
    type State = ModelState;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<ModelState> {
        Just(ModelState::default()).boxed()
    }

    fn transitions(state: &ModelState) -> BoxedStrategy<Transition> {
        let n = state.grants.len();
        let mut options: Vec<(u32, BoxedStrategy<Transition>)> = Vec::new();
        let issue_weight = if n == 0 {
            8
        } else if n < MAX_GRANTS {
            3
        } else {
            0
        };
        if issue_weight > 0 {
            let binding = (0..2usize, 0..2usize, 0..2usize, 0..2usize).prop_map(
                |(actor, run, url, action)| BindingChoice {
                    actor,
                    run,
                    url,
                    action,
                },
            );
            options.push((
                issue_weight,
                (
                    binding,
                    1u64..=5_000,
                    any::<bool>(),
                    any::<bool>(),
                    prop_oneof![Just(1u32), Just(2), Just(3), Just(5)],
                )
                    .prop_map(|(binding, ttl_ms, note, approver, attempt_limit)| {
                        Transition::Issue {
                            binding,
                            ttl_ms,
                            note,
                            approver,
                            attempt_limit,
                        }
                    })
                    .boxed(),
            ));
        }
        options.push((1, Just(Transition::Revoke(Target::Unknown)).boxed()));
        options.push((1, Just(Transition::Get(Target::Unknown)).boxed()));
        options.push((
            1,
            (request(), 0..ATTEMPTS)
                .prop_map(|(request, attempt)| Transition::Consume {
                    target: Target::Unknown,
                    request,
                    attempt,
                })
                .boxed(),
        ));
        options.push((
            1,
            (0..ATTEMPTS)
                .prop_map(|attempt| Transition::Abandon {
                    target: Target::Unknown,
                    attempt,
                })
                .boxed(),
        ));
        options.push((
            2,
            (0u64..=3_000)
                .prop_map(|ms| Transition::Advance { ms })
                .boxed(),
        ));
        options.push((
            1,
            (0..2usize, 0..2usize)
                .prop_map(|(actor, run)| Transition::StopRun { actor, run })
                .boxed(),
        ));
        options.push((
            1,
            (0..2usize, 0..2usize)
                .prop_map(|(actor, run)| Transition::ResumeRun { actor, run })
                .boxed(),
        ));
        options.push((
            1,
            prop_oneof![
                (0..2usize).prop_map(|actor| Transition::StopActor { actor }),
                (0..2usize).prop_map(|actor| Transition::ResumeActor { actor }),
            ]
            .boxed(),
        ));
        if n > 0 {
            options.push((
                1,
                (0..n)
                    .prop_map(|grant| Transition::IssueDuplicate { grant })
                    .boxed(),
            ));
            options.push((
                1,
                (0..n)
                    .prop_map(|g| Transition::Revoke(Target::Grant(g)))
                    .boxed(),
            ));
            options.push((
                2,
                (0..n)
                    .prop_map(|g| Transition::Get(Target::Grant(g)))
                    .boxed(),
            ));
            options.push((
                6,
                (0..n, request(), 0..ATTEMPTS)
                    .prop_map(|(g, request, attempt)| Transition::Consume {
                        target: Target::Grant(g),
                        request,
                        attempt,
                    })
                    .boxed(),
            ));
            options.push((
                2,
                (0..n, 0..ATTEMPTS)
                    .prop_map(|(g, attempt)| Transition::Abandon {
                        target: Target::Grant(g),
                        attempt,
                    })
                    .boxed(),
            ));
            options.push((
                2,
                (0..n, any::<bool>())
                    .prop_map(|(grant, minus_one)| Transition::AdvanceToExpiry { grant, minus_one })
                    .boxed(),
            ));
        }
        let consumed: Vec<(usize, usize)> = state
            .grants
            .iter()
            .enumerate()
            .filter_map(|(g, grant)| match grant.state {
                ModelGrantState::Consumed { by, .. } => Some((g, by)),
                _ => None,
            })
            .collect();
        if !consumed.is_empty() {
            // Retries by the attempt that consumed the grant: replays.
            options.push((
                3,
                (proptest::sample::select(consumed.clone()), request())
                    .prop_map(|((g, by), request)| Transition::Consume {
                        target: Target::Grant(g),
                        request,
                        attempt: by,
                    })
                    .boxed(),
            ));
            // Abandons of the attempt that consumed the grant: restores.
            options.push((
                2,
                proptest::sample::select(consumed)
                    .prop_map(|(g, by)| Transition::Abandon {
                        target: Target::Grant(g),
                        attempt: by,
                    })
                    .boxed(),
            ));
        }
        Union::new_weighted(options).boxed()
    }

    fn apply(mut state: ModelState, transition: &Transition) -> ModelState {
        let _ = state.step(transition);
        state
    }

    fn preconditions(state: &ModelState, transition: &Transition) -> bool {
        let n = state.grants.len();
        let names_existing = |target: &Target| match target {
            Target::Grant(g) => *g < n,
            Target::Unknown => true,
        };
        match transition {
            Transition::Issue { .. } => n < MAX_GRANTS,
            Transition::IssueDuplicate { grant } | Transition::AdvanceToExpiry { grant, .. } => {
                *grant < n
            }
            Transition::Revoke(target) | Transition::Get(target) => names_existing(target),
            Transition::Consume {
                target, attempt, ..
            }
            | Transition::Abandon { target, attempt } => {
                names_existing(target) && *attempt < ATTEMPTS
            }
            Transition::StopRun { actor, run } | Transition::ResumeRun { actor, run } => {
                *actor < 2 && *run < 2
            }
            Transition::StopActor { actor } | Transition::ResumeActor { actor } => *actor < 2,
            Transition::Advance { .. } => true,
        }
    }
}

/// The concrete side of one sequence: the grants and attempt ids behind the
/// model's indexes.
struct Harness<'a> {
    store: &'a dyn ApprovalStore,
    fx: &'a Fixtures,
    start: Timestamp,
    approvals: Vec<Approval>,
    attempts: Vec<AttemptId>,
}

fn case_error(message: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(message.into())
}

impl Harness<'_> {
    fn at(&self, millis: u64) -> Timestamp {
        self.start.saturating_add(Duration::from_millis(millis))
    }

    fn id(&self, target: Target) -> Result<ApprovalId, TestCaseError> {
        match target {
            Target::Grant(g) if g < self.approvals.len() => Ok(self.approvals[g].id.clone()),
            _ => ApprovalId::generate().map_err(|e| case_error(format!("no random id: {e}"))),
        }
    }

    fn expected_grant(
        &self,
        model: &ModelState,
        g: usize,
        grant: &ModelGrant,
    ) -> Result<StoredGrant, TestCaseError> {
        let approval = self
            .approvals
            .get(g)
            .cloned()
            .ok_or_else(|| case_error(format!("internal: grant {g} was never issued")))?;
        let state = match grant.state {
            ModelGrantState::Active if model.is_stopped(Target::Grant(g)) => GrantState::Stopped,
            ModelGrantState::Active => GrantState::Active,
            ModelGrantState::Revoked => GrantState::Revoked,
            ModelGrantState::Locked => GrantState::Locked,
            ModelGrantState::Consumed { at, by } => GrantState::Consumed {
                at: self.at(at),
                by: self.attempts[by % ATTEMPTS].clone(),
            },
        };
        Ok(StoredGrant {
            approval,
            state,
            failed_attempts: grant.failed,
        })
    }

    /// Runs `transition` on the store; `before` is the model before it,
    /// `expected` what the model says the store answers.
    async fn run(
        &mut self,
        before: &ModelState,
        transition: &Transition,
        expected: &Expected,
    ) -> Result<(), String> {
        let now = self.at(before.now);
        match (transition, expected) {
            (
                Transition::Issue {
                    binding,
                    ttl_ms,
                    note,
                    approver,
                    attempt_limit,
                },
                expected @ (Expected::Issued | Expected::IssueStopped),
            ) => {
                let fx = self.fx;
                let mut approval = Approval::for_action(
                    fx.actors[binding.actor % 2].clone(),
                    fx.runs[binding.run % 2].clone(),
                    &fx.urls[binding.url % 2],
                    &fx.actions[binding.action % 2],
                    Duration::from_millis(*ttl_ms),
                    now,
                )
                .and_then(|a| a.with_attempt_limit(*attempt_limit))
                .map_err(|e| format!("could not build a grant: {e}"))?;
                if *note {
                    approval = approval
                        .with_note(format!("approved by model step {}", self.approvals.len()))
                        .map_err(|e| format!("could not add a note: {e}"))?;
                }
                if *approver {
                    let id = ApproverId::new(format!("approver {}", self.approvals.len()))
                        .map_err(|e| format!("could not build an approver id: {e}"))?;
                    approval = approval
                        .approved_by(id, now)
                        .map_err(|e| format!("could not name the approver: {e}"))?;
                }
                match (self.store.issue(approval.clone()).await, expected) {
                    (Ok(()), Expected::Issued) => {
                        self.approvals.push(approval);
                        Ok(())
                    }
                    (Err(IssueError::Stopped), Expected::IssueStopped) => {
                        match self.store.get(&approval.id).await {
                            Ok(None) => Ok(()),
                            Ok(Some(_)) => Err("a refused issue stored the grant".to_owned()),
                            Err(e) => Err(format!("get failed with a store error: {e}")),
                        }
                    }
                    (answer, expected) => Err(format!(
                        "issue of a new grant answered {answer:?}, the model expected {expected:?}"
                    )),
                }
            }
            (Transition::IssueDuplicate { grant }, Expected::AlreadyExists) => {
                let Some(original) = self.approvals.get(*grant) else {
                    return Ok(());
                };
                let mut changed = original.clone();
                changed.actor_id = self.fx.actors[1].clone();
                changed.action = self.fx.actions[1].clone();
                changed.action_digest = self.fx.actions[1].digest();
                changed.issued_at = now;
                changed.expires_at = now.saturating_add(Duration::from_secs(3_600));
                changed.approver_note = Some("an attempt to overwrite".to_owned());
                match self.store.issue(changed).await {
                    Err(IssueError::AlreadyExists(id)) if id == original.id => Ok(()),
                    Ok(()) => Err(
                        "issue over an existing id succeeded, expected AlreadyExists".to_owned(),
                    ),
                    Err(other) => Err(format!(
                        "issue over an existing id answered `{other}`, expected AlreadyExists"
                    )),
                }
            }
            (Transition::Revoke(target), Expected::Revoke(outcome)) => {
                let id = self.id(*target).map_err(|e| e.to_string())?;
                judged("revoke", self.store.revoke(&id).await, outcome)
            }
            (Transition::Get(target), Expected::Get(grant)) => {
                let id = self.id(*target).map_err(|e| e.to_string())?;
                let answer = self
                    .store
                    .get(&id)
                    .await
                    .map_err(|e| format!("get failed with a store error: {e}"))?;
                let want = match (target, grant) {
                    (Target::Grant(g), Some(grant)) => Some(
                        self.expected_grant(before, *g, grant)
                            .map_err(|e| e.to_string())?,
                    ),
                    _ => None,
                };
                if answer == want {
                    Ok(())
                } else {
                    Err(format!(
                        "{} (the model's expectation)",
                        describe_difference(&answer, &want)
                    ))
                }
            }
            (
                Transition::Consume {
                    target,
                    request,
                    attempt,
                },
                Expected::Consume(outcome),
            ) => {
                let id = self.id(*target).map_err(|e| e.to_string())?;
                let base = match target {
                    Target::Grant(g) if *g < self.approvals.len() => self.approvals[*g].binding(),
                    _ => default_binding(self.fx),
                };
                let binding = match request {
                    Request::Matching => base,
                    Request::Mismatch(field) => self.fx.mismatched(&base, *field),
                };
                let attempt = &self.attempts[attempt % ATTEMPTS];
                judged(
                    "consume_once",
                    self.store.consume_once(&id, &binding, now, attempt).await,
                    outcome,
                )
            }
            (Transition::Abandon { target, attempt }, Expected::Abandon(outcome)) => {
                let id = self.id(*target).map_err(|e| e.to_string())?;
                let attempt = &self.attempts[attempt % ATTEMPTS];
                judged(
                    "abandon",
                    self.store.abandon(&id, attempt, now).await,
                    outcome,
                )
            }
            (Transition::StopRun { actor, run }, Expected::Stop(outcome)) => judged(
                "stop_run",
                self.store
                    .stop_run(&self.fx.actors[actor % 2], &self.fx.runs[run % 2], now)
                    .await,
                outcome,
            ),
            (Transition::StopActor { actor }, Expected::Stop(outcome)) => judged(
                "stop_actor",
                self.store.stop_actor(&self.fx.actors[actor % 2], now).await,
                outcome,
            ),
            (Transition::ResumeRun { actor, run }, Expected::Resume(outcome)) => judged(
                "resume_run",
                self.store
                    .resume_run(&self.fx.actors[actor % 2], &self.fx.runs[run % 2])
                    .await,
                outcome,
            ),
            (Transition::ResumeActor { actor }, Expected::Resume(outcome)) => judged(
                "resume_actor",
                self.store.resume_actor(&self.fx.actors[actor % 2]).await,
                outcome,
            ),
            (Transition::Advance { .. } | Transition::AdvanceToExpiry { .. }, _) => Ok(()),
            (transition, expected) => Err(format!(
                "internal: the model answered {expected:?} to {transition:?}"
            )),
        }
    }

    /// After the sequence: every grant reads exactly as the model holds it.
    async fn compare_all(&self, model: &ModelState) -> Result<(), String> {
        for (g, grant) in model.grants.iter().enumerate() {
            let want = self
                .expected_grant(model, g, grant)
                .map_err(|e| e.to_string())?;
            let answer =
                self.store.get(&want.approval.id).await.map_err(|e| {
                    format!("final get of grant {g} failed with a store error: {e}")
                })?;
            let want = Some(want);
            if answer != want {
                return Err(format!(
                    "after the sequence, grant {g}: {} (the model's expectation)",
                    describe_difference(&answer, &want)
                ));
            }
        }
        Ok(())
    }
}

/// Compares a store's answer to one call with the model's expectation.
fn judged<T: PartialEq + std::fmt::Debug>(
    call: &str,
    answer: Result<T, countersign_approval_core::StoreError>,
    expected: &T,
) -> Result<(), String> {
    match answer {
        Ok(answer) if answer == *expected => Ok(()),
        Ok(answer) => Err(format!(
            "{call} answered {answer:?}, the model expected {expected:?}"
        )),
        Err(e) => Err(format!("{call} failed with a store error: {e}")),
    }
}

/// The binding of the first fixture actor, run, URL and action.
fn default_binding(fx: &Fixtures) -> Binding {
    Binding::new(&fx.actors[0], &fx.runs[0], &fx.urls[0], &fx.actions[0])
}

async fn run_sequence(
    store: &dyn ApprovalStore,
    fx: &Fixtures,
    transitions: &[Transition],
    seen: Option<&Arc<AtomicUsize>>,
) -> Result<(), TestCaseError> {
    let attempts = (0..ATTEMPTS)
        .map(|_| AttemptId::generate())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| case_error(format!("no random attempt id: {e}")))?;
    let mut harness = Harness {
        store,
        fx,
        start: SystemClock.now(),
        approvals: Vec::new(),
        attempts,
    };
    let mut model = ModelState::default();
    for (n, transition) in transitions.iter().enumerate() {
        if let Some(seen) = seen {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        let before = model.clone();
        let expected = model.step(transition);
        harness
            .run(&before, transition, &expected)
            .await
            .map_err(|why| case_error(format!("step {} ({transition:?}): {why}", n + 1)))?;
    }
    harness.compare_all(&model).await.map_err(case_error)
}

/// Whether the model check ran or was skipped because the factory gave no
/// store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    Passed,
    Skipped,
}

fn runtime(check: &'static str) -> Result<tokio::runtime::Runtime, CheckFailure> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(CheckFailure::new(
            check,
            "this check runs its own tokio runtime: call it from a plain #[test], not from inside a runtime",
        ));
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CheckFailure::new(check, format!("could not start a tokio runtime: {e}")))
}

pub(crate) fn run_optional<F, Fut, S>(factory: F, config: &ModelConfig) -> Result<Ran, CheckFailure>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<S>>,
    S: ApprovalStore,
{
    let rt = runtime(CHECK)?;
    if rt.block_on(factory()).is_none() {
        return Ok(Ran::Skipped);
    }
    let fx = rt.block_on(Fixtures::new(CHECK))?;
    let proptest_config = Config {
        cases: config.cases,
        failure_persistence: None,
        max_shrink_iters: 4_096,
        // Whatever PROPTEST_* variables say: the store and runtime live in
        // this process, and a slow store must not turn into a spurious failure.
        fork: false,
        timeout: 0,
        ..Config::default()
    };
    let mut runner = match config.seed {
        Some(seed) => {
            let mut bytes = [0u8; 32];
            for chunk in bytes.chunks_mut(8) {
                chunk.copy_from_slice(&seed.to_le_bytes());
            }
            TestRunner::new_with_rng(
                proptest_config,
                TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
            )
        }
        None => TestRunner::new(proptest_config),
    };
    let strategy = ReferenceModel::sequential_strategy(1..=config.max_transitions.max(1));
    let result = runner.run(&strategy, |(_, transitions, seen)| {
        rt.block_on(async {
            let Some(store) = factory().await else {
                return Err(case_error("the store factory gave no store mid-run"));
            };
            run_sequence(&store, &fx, &transitions, seen.as_ref()).await
        })
    });
    match result {
        Ok(()) => Ok(Ran::Passed),
        Err(TestError::Fail(reason, (_, transitions, _))) => {
            let steps: Vec<String> = transitions
                .iter()
                .enumerate()
                .map(|(n, t)| format!("  {}. {t:?}", n + 1))
                .collect();
            Err(CheckFailure::new(
                CHECK,
                format!(
                    "a generated sequence failed: {reason}\nminimal failing sequence ({} steps):\n{}",
                    transitions.len(),
                    steps.join("\n")
                ),
            ))
        }
        Err(TestError::Abort(reason)) => Err(CheckFailure::new(
            CHECK,
            format!("the model check was aborted: {reason}"),
        )),
    }
}

/// Runs `config.cases` random sequences of at most `config.max_transitions`
/// steps, each on a fresh store from `factory`, comparing every answer and
/// the final state of every grant with [`ReferenceModel`]. On a difference,
/// proptest shrinks the sequence and the failure lists the minimal one.
///
/// It starts its own multi-thread tokio runtime (the factory's future runs
/// on it), so call it from a plain `#[test]`, not from inside a runtime.
pub fn check_against_model<F, Fut, S>(factory: F, config: &ModelConfig) -> Result<(), CheckFailure>
where
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
    S: ApprovalStore,
{
    let optional = || {
        let made = factory();
        async move { Some(made.await) }
    };
    run_optional(optional, config).map(|_| ())
}
