//! Scenario checks for the host controls: stopping runs and actors (rule 9
//! of the store contract) and the failed-attempt cap (rule 4, step 7).
//!
//! Each check stops actors and runs of its own, named with a random
//! suffix, so it never stops anything another check uses, even on a store
//! shared between checks.

use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalStore, ApproverId, ConsumeOutcome,
    DEFAULT_ATTEMPT_LIMIT, GrantState, IssueError, ResumeOutcome, RevokeOutcome, RunId,
    StaleReason, StopOutcome, Timestamp,
};

use crate::fixtures::{Ctx, TTL};
use crate::{failure::CheckFailure, model::BindingField};

const OK: ConsumeOutcome = ConsumeOutcome::Consumed { replay: false };
const STOPPED: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Stopped);
const LOCKED: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Locked);
const MISMATCH: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Mismatch);
const EXPIRED: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Expired);
const CONSUMED: ConsumeOutcome = ConsumeOutcome::Stale(StaleReason::Consumed);

/// An actor and its runs, unique to one check.
struct Owner {
    actor: ActorId,
    runs: [RunId; 3],
}

impl Ctx<'_> {
    fn owner(&self, label: &str) -> Result<Owner, CheckFailure> {
        let unique = self.unknown_id()?;
        let name = |what: &str| format!("{label}-{what}-{unique}");
        let fail = |e: countersign_approval_core::InvalidHostId| {
            self.fail(format!("could not build an id: {e}"))
        };
        Ok(Owner {
            actor: ActorId::new(name("actor")).map_err(fail)?,
            runs: [
                RunId::new(name("run-a")).map_err(fail)?,
                RunId::new(name("run-b")).map_err(fail)?,
                RunId::new(name("run-c")).map_err(fail)?,
            ],
        })
    }

    /// A grant for `actor` in `run` (the first fixture URL and action),
    /// issued at `issued_at` for `ttl`, not stored yet.
    fn grant_in(
        &self,
        actor: &ActorId,
        run: &RunId,
        issued_at: Timestamp,
        ttl: Duration,
    ) -> Result<Approval, CheckFailure> {
        Approval::for_action(
            actor.clone(),
            run.clone(),
            &self.fx.urls[0],
            &self.fx.actions[0],
            ttl,
            issued_at,
        )
        .map_err(|e| self.fail(format!("could not build a grant: {e}")))
    }

    /// Issues a fresh grant for `actor` in `run`, valid from `t0` for [`TTL`].
    async fn issue_in(&self, actor: &ActorId, run: &RunId) -> Result<Approval, CheckFailure> {
        let grant = self.grant_in(actor, run, self.t0, TTL)?;
        self.issue(&grant).await?;
        Ok(grant)
    }

    async fn stop_run(
        &self,
        step: &str,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
        expected: StopOutcome,
    ) -> Result<(), CheckFailure> {
        let answer =
            self.store.stop_run(actor, run, now).await.map_err(|e| {
                self.fail(format!("{step}: stop_run failed with a store error: {e}"))
            })?;
        self.expect(step, "stop_run", answer, expected)
    }

    async fn stop_actor(
        &self,
        step: &str,
        actor: &ActorId,
        now: Timestamp,
        expected: StopOutcome,
    ) -> Result<(), CheckFailure> {
        let answer =
            self.store.stop_actor(actor, now).await.map_err(|e| {
                self.fail(format!("{step}: stop_actor failed with a store error: {e}"))
            })?;
        self.expect(step, "stop_actor", answer, expected)
    }

    async fn resume_run(
        &self,
        step: &str,
        actor: &ActorId,
        run: &RunId,
        expected: ResumeOutcome,
    ) -> Result<(), CheckFailure> {
        let answer =
            self.store.resume_run(actor, run).await.map_err(|e| {
                self.fail(format!("{step}: resume_run failed with a store error: {e}"))
            })?;
        self.expect(step, "resume_run", answer, expected)
    }

    async fn resume_actor(
        &self,
        step: &str,
        actor: &ActorId,
        expected: ResumeOutcome,
    ) -> Result<(), CheckFailure> {
        let answer = self.store.resume_actor(actor).await.map_err(|e| {
            self.fail(format!(
                "{step}: resume_actor failed with a store error: {e}"
            ))
        })?;
        self.expect(step, "resume_actor", answer, expected)
    }

    /// Issues `approval` and expects `IssueError::Stopped`, with nothing stored.
    async fn issue_refused_as_stopped(
        &self,
        step: &str,
        approval: &Approval,
    ) -> Result<(), CheckFailure> {
        match self.store.issue(approval.clone()).await {
            Err(IssueError::Stopped) => {}
            Ok(()) => {
                return Err(self.fail(format!(
                    "{step}: issue accepted a grant of a stopped run, expected Stopped"
                )));
            }
            Err(other) => {
                return Err(self.fail(format!(
                    "{step}: issue answered `{other}`, expected Stopped"
                )));
            }
        }
        let stored = self.get(step, &approval.id).await?;
        if stored.is_some() {
            return Err(self.fail(format!(
                "{step}: a refused issue stored the grant `{}`",
                approval.id
            )));
        }
        Ok(())
    }
}

fn stop(stopped_grants: u64, was_stopped: bool) -> StopOutcome {
    StopOutcome {
        stopped_grants,
        stopped_standing: 0,
        was_stopped,
    }
}

/// `stop_run` stops exactly the usable grants of that run (and counts
/// them): they answer `Stale(Stopped)` — even a retry of a consume applied
/// before the stop — and read `Stopped`; a consumed grant stays consumed, an
/// expired one is not counted; other runs and actors are untouched; a
/// second stop counts nothing; revoke, abandon and mismatches change
/// nothing on a stopped grant.
pub async fn stop_run_stops_its_grants_and_only_them(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("stop_run_stops_its_grants_and_only_them", store).await?;
    let (a, b) = (cx.owner("a")?, cx.owner("b")?);
    let (run, other_run) = (&a.runs[0], &a.runs[1]);
    let first = cx.issue_in(&a.actor, run).await?;
    let second = cx.issue_in(&a.actor, run).await?;
    let short = cx.grant_in(&a.actor, run, cx.t0, Duration::from_millis(1_000))?;
    cx.issue(&short).await?;
    let used = cx.issue_in(&a.actor, run).await?;
    let same_actor = cx.issue_in(&a.actor, other_run).await?;
    let same_run_name = cx.issue_in(&b.actor, run).await?;
    let other_actor = cx.issue_in(&b.actor, &b.runs[0]).await?;
    let attempt = cx.attempt()?;
    cx.consume(
        "consume before the stop",
        &used.id,
        &used.binding(),
        cx.at(10),
        &attempt,
        OK,
    )
    .await?;

    cx.stop_run(
        "stop of the run (two usable grants; one consumed, one expired)",
        &a.actor,
        run,
        cx.at(5_000),
        stop(2, false),
    )
    .await?;
    for (what, grant) in [("first", &first), ("second", &second)] {
        cx.consume(
            &format!("matching consume of the {what} grant after the stop"),
            &grant.id,
            &grant.binding(),
            cx.at(5_010),
            &cx.attempt()?,
            STOPPED,
        )
        .await?;
        cx.stored(
            &format!("the {what} grant after the stop"),
            grant,
            GrantState::Stopped,
        )
        .await?;
    }
    cx.consume(
        "retry, after the stop, of a consume applied before it",
        &used.id,
        &used.binding(),
        cx.at(5_020),
        &attempt,
        STOPPED,
    )
    .await?;
    cx.stored(
        "the grant consumed before the stop",
        &used,
        GrantState::Consumed {
            at: cx.at(10),
            by: attempt.clone(),
        },
    )
    .await?;
    cx.stored(
        "the grant that expired before the stop",
        &short,
        GrantState::Stopped,
    )
    .await?;
    let wrong = cx.fx.mismatched(&second.binding(), BindingField::Url);
    cx.consume(
        "mismatched consume of a stopped grant (counts no failed attempt)",
        &second.id,
        &wrong,
        cx.at(5_030),
        &cx.attempt()?,
        STOPPED,
    )
    .await?;
    cx.revoke(
        "revoke of a stopped grant",
        &second.id,
        RevokeOutcome::AlreadyRevoked,
    )
    .await?;
    cx.abandon(
        "abandon on a stopped grant",
        &first.id,
        &cx.attempt()?,
        cx.at(5_040),
        AbandonOutcome::Stopped,
    )
    .await?;
    cx.stored(
        "the stopped grant after revoke, abandon and a mismatch",
        &second,
        GrantState::Stopped,
    )
    .await?;

    for (what, grant) in [
        ("another run of the same actor", &same_actor),
        ("another actor's run of the same name", &same_run_name),
        ("another actor", &other_actor),
    ] {
        cx.consume(
            &format!("consume of a grant of {what}"),
            &grant.id,
            &grant.binding(),
            cx.at(5_050),
            &cx.attempt()?,
            OK,
        )
        .await?;
    }
    cx.stop_run(
        "a second stop of the same run",
        &a.actor,
        run,
        cx.at(5_060),
        stop(0, true),
    )
    .await
}

/// A stopped run refuses `issue` (`IssueError::Stopped`, nothing stored)
/// until `resume_run`; resuming lets new grants work but never revives a
/// grant stopped before; a stop of a run without grants stops its future
/// grants; resuming a run that is not stopped answers `NotStopped`.
pub async fn stopped_run_refuses_issue_until_resumed(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("stopped_run_refuses_issue_until_resumed", store).await?;
    let owner = cx.owner("o")?;
    let (run, other_run) = (&owner.runs[0], &owner.runs[1]);
    cx.resume_run(
        "resume of a run never stopped",
        &owner.actor,
        run,
        ResumeOutcome::NotStopped,
    )
    .await?;
    let old = cx.issue_in(&owner.actor, run).await?;
    cx.stop_run(
        "stop of the run",
        &owner.actor,
        run,
        cx.at(10),
        stop(1, false),
    )
    .await?;
    let refused = cx.grant_in(&owner.actor, run, cx.at(20), TTL)?;
    cx.issue_refused_as_stopped("issue in the stopped run", &refused)
        .await?;
    cx.issue_in(&owner.actor, other_run).await?;
    cx.resume_run(
        "resume of the stopped run",
        &owner.actor,
        run,
        ResumeOutcome::Resumed,
    )
    .await?;
    cx.resume_run(
        "a second resume",
        &owner.actor,
        run,
        ResumeOutcome::NotStopped,
    )
    .await?;
    cx.consume(
        "consume of a grant stopped before the resume",
        &old.id,
        &old.binding(),
        cx.at(30),
        &cx.attempt()?,
        STOPPED,
    )
    .await?;
    cx.stored(
        "the grant stopped before the resume",
        &old,
        GrantState::Stopped,
    )
    .await?;
    let fresh = cx.issue_in(&owner.actor, run).await?;
    cx.stop_run(
        "stop again: only the grant issued after the resume is usable",
        &owner.actor,
        run,
        cx.at(40),
        stop(1, false),
    )
    .await?;
    cx.resume_run("resume again", &owner.actor, run, ResumeOutcome::Resumed)
        .await?;
    let newest = cx.issue_in(&owner.actor, run).await?;
    cx.consume(
        "consume of a grant issued after the second resume",
        &newest.id,
        &newest.binding(),
        cx.at(50),
        &cx.attempt()?,
        OK,
    )
    .await?;
    cx.stored(
        "the grant stopped by the second stop",
        &fresh,
        GrantState::Stopped,
    )
    .await?;

    // A run stopped before it has any grant.
    let later = &owner.runs[2];
    cx.stop_run(
        "stop of a run without grants",
        &owner.actor,
        later,
        cx.at(60),
        stop(0, false),
    )
    .await?;
    let early = cx.grant_in(&owner.actor, later, cx.at(70), TTL)?;
    cx.issue_refused_as_stopped("issue in a run stopped before its first grant", &early)
        .await
}

/// `stop_actor` stops every run of the actor, present and future, and
/// counts its usable grants (not those a run stop stopped already);
/// `resume_actor` lets its runs issue again, except runs stopped one by
/// one; other actors are untouched.
pub async fn stop_actor_stops_every_run(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("stop_actor_stops_every_run", store).await?;
    let (a, b) = (cx.owner("a")?, cx.owner("b")?);
    let in_first = cx.issue_in(&a.actor, &a.runs[0]).await?;
    let in_second = cx.issue_in(&a.actor, &a.runs[1]).await?;
    let stopped_first = cx.issue_in(&a.actor, &a.runs[2]).await?;
    let elsewhere = cx.issue_in(&b.actor, &b.runs[0]).await?;
    cx.stop_run(
        "stop of one run first",
        &a.actor,
        &a.runs[2],
        cx.at(5),
        stop(1, false),
    )
    .await?;
    cx.stop_actor(
        "stop of the actor (two usable grants left)",
        &a.actor,
        cx.at(10),
        stop(2, false),
    )
    .await?;
    for (what, grant) in [("first", &in_first), ("second", &in_second)] {
        cx.consume(
            &format!("consume in the actor's {what} run after the stop"),
            &grant.id,
            &grant.binding(),
            cx.at(20),
            &cx.attempt()?,
            STOPPED,
        )
        .await?;
        cx.stored(
            &format!("the grant of the {what} run"),
            grant,
            GrantState::Stopped,
        )
        .await?;
    }
    cx.stored(
        "the grant of the run stopped on its own",
        &stopped_first,
        GrantState::Stopped,
    )
    .await?;
    let new_run = cx.grant_in(
        &a.actor,
        &RunId::new(format!("{}-new", a.runs[0])).map_err(|e| cx.fail(e.to_string()))?,
        cx.at(30),
        TTL,
    )?;
    cx.issue_refused_as_stopped("issue in a new run of the stopped actor", &new_run)
        .await?;
    cx.consume(
        "consume of another actor's grant",
        &elsewhere.id,
        &elsewhere.binding(),
        cx.at(40),
        &cx.attempt()?,
        OK,
    )
    .await?;
    cx.stop_actor(
        "a second stop of the actor",
        &a.actor,
        cx.at(50),
        stop(0, true),
    )
    .await?;
    cx.resume_actor("resume of the actor", &a.actor, ResumeOutcome::Resumed)
        .await?;
    cx.resume_actor(
        "resume of an actor never stopped",
        &b.actor,
        ResumeOutcome::NotStopped,
    )
    .await?;
    cx.issue(&new_run).await?;
    cx.consume(
        "consume of a grant issued after the actor resumed",
        &new_run.id,
        &new_run.binding(),
        cx.at(60),
        &cx.attempt()?,
        OK,
    )
    .await?;
    cx.consume(
        "consume of a grant stopped by the actor stop, after the resume",
        &in_first.id,
        &in_first.binding(),
        cx.at(70),
        &cx.attempt()?,
        STOPPED,
    )
    .await?;
    let in_stopped_run = cx.grant_in(&a.actor, &a.runs[2], cx.at(80), TTL)?;
    cx.issue_refused_as_stopped(
        "issue in a run stopped on its own, after the actor resumed",
        &in_stopped_run,
    )
    .await
}

/// Mismatched presentations count: below the grant's `attempt_limit` each
/// answers `Stale(Mismatch)`; the one that reaches it locks the grant
/// (`Stale(Locked)`, state `Locked`), and a matching consume then answers
/// `Stale(Locked)`. Expired, consumed and locked grants count nothing more;
/// a matching consume below the limit consumes and keeps the count; the
/// default limit is 5.
pub async fn failed_attempts_lock_the_grant(store: &dyn ApprovalStore) -> Result<(), CheckFailure> {
    let cx = Ctx::new("failed_attempts_lock_the_grant", store).await?;
    let limited = cx
        .grant_at(cx.t0)?
        .with_attempt_limit(3)
        .map_err(|e| cx.fail(format!("could not set the attempt limit: {e}")))?;
    cx.issue(&limited).await?;
    let binding = limited.binding();
    for (n, field) in [BindingField::Url, BindingField::Action]
        .into_iter()
        .enumerate()
    {
        cx.consume(
            &format!("mismatch {} of 3 ({})", n + 1, field.as_str()),
            &limited.id,
            &cx.fx.mismatched(&binding, field),
            cx.at(10),
            &cx.attempt()?,
            MISMATCH,
        )
        .await?;
        cx.stored_with_failures(
            &format!("the grant after {} mismatches", n + 1),
            &limited,
            GrantState::Active,
            u32::try_from(n + 1).unwrap_or(u32::MAX),
        )
        .await?;
    }
    cx.consume(
        "mismatch 3 of 3 (actor): locks the grant",
        &limited.id,
        &cx.fx.mismatched(&binding, BindingField::Actor),
        cx.at(20),
        &cx.attempt()?,
        LOCKED,
    )
    .await?;
    cx.consume(
        "a matching consume of the locked grant",
        &limited.id,
        &binding,
        cx.at(30),
        &cx.attempt()?,
        LOCKED,
    )
    .await?;
    cx.consume(
        "a further mismatch on the locked grant",
        &limited.id,
        &cx.fx.mismatched(&binding, BindingField::Run),
        cx.at(31),
        &cx.attempt()?,
        LOCKED,
    )
    .await?;
    cx.revoke(
        "revoke of the locked grant",
        &limited.id,
        RevokeOutcome::AlreadyRevoked,
    )
    .await?;
    cx.abandon(
        "abandon on the locked grant",
        &limited.id,
        &cx.attempt()?,
        cx.at(32),
        AbandonOutcome::Revoked,
    )
    .await?;
    cx.stored_with_failures("the locked grant", &limited, GrantState::Locked, 3)
        .await?;

    // The default limit, and a match below it.
    let default = cx.issue_grant().await?;
    if default.attempt_limit != DEFAULT_ATTEMPT_LIMIT {
        return Err(cx.fail(format!(
            "a new grant's attempt limit is {}, expected {DEFAULT_ATTEMPT_LIMIT}",
            default.attempt_limit
        )));
    }
    let wrong = cx.fx.mismatched(&default.binding(), BindingField::Url);
    for n in 1..DEFAULT_ATTEMPT_LIMIT {
        cx.consume(
            &format!("mismatch {n} under the default limit"),
            &default.id,
            &wrong,
            cx.at(40),
            &cx.attempt()?,
            MISMATCH,
        )
        .await?;
    }
    let attempt = cx.attempt()?;
    cx.consume(
        "a matching consume one mismatch below the limit",
        &default.id,
        &default.binding(),
        cx.at(50),
        &attempt,
        OK,
    )
    .await?;
    cx.consume(
        "a mismatch after the consume (no count)",
        &default.id,
        &wrong,
        cx.at(60),
        &cx.attempt()?,
        CONSUMED,
    )
    .await?;
    cx.stored_with_failures(
        "the consumed grant keeps its count",
        &default,
        GrantState::Consumed {
            at: cx.at(50),
            by: attempt,
        },
        DEFAULT_ATTEMPT_LIMIT - 1,
    )
    .await?;

    // Expiry comes before the count.
    let once = cx
        .grant_at(cx.t0)?
        .with_attempt_limit(1)
        .map_err(|e| cx.fail(format!("could not set the attempt limit: {e}")))?;
    cx.issue(&once).await?;
    cx.consume(
        "a mismatch on an expired grant (no count)",
        &once.id,
        &cx.fx.mismatched(&once.binding(), BindingField::Action),
        cx.at(crate::fixtures::TTL_MS),
        &cx.attempt()?,
        EXPIRED,
    )
    .await?;
    cx.stored("the expired grant", &once, GrantState::Active)
        .await?;
    cx.consume(
        "the first mismatch under a limit of 1 locks",
        &once.id,
        &cx.fx.mismatched(&once.binding(), BindingField::Action),
        cx.at(10),
        &cx.attempt()?,
        LOCKED,
    )
    .await?;
    cx.stored_with_failures("the grant locked at once", &once, GrantState::Locked, 1)
        .await
}

/// The approver (id and time) and the attempt limit are kept and read back
/// exactly, for a grant with and without a page binding and note.
pub async fn approver_and_attempt_limit_round_trip(
    store: &dyn ApprovalStore,
) -> Result<(), CheckFailure> {
    let cx = Ctx::new("approver_and_attempt_limit_round_trip", store).await?;
    let approver = ApproverId::new("approver «ü» \"quoted\" \\ back`tick`")
        .map_err(|e| cx.fail(format!("could not build an approver id: {e}")))?;
    let approved = cx
        .grant_at(cx.t0)?
        .approved_by(
            approver.clone(),
            cx.t0.saturating_sub(Duration::from_secs(5)),
        )
        .and_then(|a| a.with_attempt_limit(countersign_approval_core::MAX_ATTEMPT_LIMIT))
        .map_err(|e| cx.fail(format!("could not build the grant: {e}")))?;
    cx.issue(&approved).await?;
    cx.stored("an approved grant", &approved, GrantState::Active)
        .await?;
    let same_instant = cx
        .grant_at(cx.t0)?
        .approved_by(approver, cx.t0)
        .and_then(|a| a.with_note("approved in the review queue"))
        .map_err(|e| cx.fail(format!("could not build the grant: {e}")))?;
    cx.issue(&same_instant).await?;
    let attempt = cx.attempt()?;
    cx.consume(
        "consume of the approved grant",
        &same_instant.id,
        &same_instant.binding(),
        cx.at(10),
        &attempt,
        OK,
    )
    .await?;
    cx.stored(
        "the consumed approved grant",
        &same_instant,
        GrantState::Consumed {
            at: cx.at(10),
            by: attempt,
        },
    )
    .await
}
