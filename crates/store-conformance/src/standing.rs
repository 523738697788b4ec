//! Checks for standing grants (counted grants), rules 8 to 14 of the
//! [`ProposalStore`] contract: one per rule, and a race of many concurrent
//! uses of grants with a few uses each.
//!
//! Run them with [`proposal_store_conformance_tests!`](crate::proposal_store_conformance_tests),
//! which runs them beside the proposal checks. Each check makes an actor and
//! runs of its own, so checks may share one store.

use std::sync::Arc;
use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, ApprovalId, Approver, ApproverId, AttemptId, Clock, IssueError,
    MAX_ABANDONED_ATTEMPTS, ProposalStore, RunId, StaleReason, StandingGrant, StandingId,
    StandingKey, StandingRevokeOutcome, StandingScope, StandingState, StopOutcome, StoredStanding,
    SystemClock, Timestamp, UseOutcome,
};

use crate::failure::CheckFailure;

/// The names of the standing-grant checks, in the order the macro runs them.
pub const STANDING_CHECKS: &[&str] = &[
    "standing_round_trips_and_counts_down",
    "duplicate_standing_is_refused",
    "standing_use_checks_in_order",
    "give_back_frees_the_use",
    "only_give_backs_of_taken_uses_count",
    "stopping_a_run_ends_its_standing_grants",
    "standing_grants_lists_usable_oldest_first",
    "concurrent_uses_never_exceed_the_count",
];

/// Contenders in each round of the race.
pub const USE_CONTENDERS: usize = 16;
/// Uses each raced standing grant carries.
pub const RACED_USES: u32 = 3;
/// Rounds of the race, each on a fresh standing grant.
const USE_ROUNDS: usize = 20;
/// Lifetime of every standing grant the checks issue.
const TTL: Duration = Duration::from_secs(600);

struct Cx<'a> {
    check: &'static str,
    store: &'a dyn ProposalStore,
    t0: Timestamp,
    actor: ActorId,
    runs: [RunId; 2],
    scopes: [StandingScope; 2],
}

impl<'a> Cx<'a> {
    fn new(check: &'static str, store: &'a dyn ProposalStore) -> Result<Cx<'a>, CheckFailure> {
        let fail = |e: &dyn std::fmt::Display| CheckFailure::new(check, format!("setup: {e}"));
        let unique = ApprovalId::generate().map_err(|e| fail(&e))?;
        let name = |what: &str| format!("{check}-{what}-{unique}");
        let scope = |path: &str, name: &str| {
            StandingScope::from_facts(
                &format!("https://shop.example.com{path}?page=2"),
                "click",
                "button",
                name,
            )
            .map_err(|e| fail(&e))
        };
        Ok(Cx {
            check,
            store,
            t0: SystemClock.now(),
            actor: ActorId::new(name("actor")).map_err(|e| fail(&e))?,
            runs: [
                RunId::new(name("run-a")).map_err(|e| fail(&e))?,
                RunId::new(name("run-b")).map_err(|e| fail(&e))?,
            ],
            scopes: [
                scope("/results", "Next page")?,
                scope("/results", "Buy now")?,
            ],
        })
    }

    fn fail(&self, message: impl Into<String>) -> CheckFailure {
        CheckFailure::new(self.check, message)
    }

    fn at(&self, millis: u64) -> Timestamp {
        self.t0.saturating_add(Duration::from_millis(millis))
    }

    fn standing(&self, run: usize, uses: u32) -> Result<StandingGrant, CheckFailure> {
        let approver = Approver {
            id: ApproverId::new("approver-carol").map_err(|e| self.fail(e.to_string()))?,
            approved_at: self.t0,
        };
        StandingGrant::new(
            self.actor.clone(),
            self.runs[run].clone(),
            &self.scopes[0],
            uses,
            TTL,
            self.t0,
            approver,
        )
        .map_err(|e| self.fail(format!("setup: {e}")))
    }

    async fn issue(&self, grant: &StandingGrant) -> Result<(), CheckFailure> {
        self.store
            .issue_standing(grant.clone())
            .await
            .map_err(|e| self.fail(format!("issue_standing failed: {e}")))
    }

    async fn get(&self, step: &str, id: &StandingId) -> Result<StoredStanding, CheckFailure> {
        self.store
            .get_standing(id)
            .await
            .map_err(|e| self.fail(format!("{step}: get_standing failed: {e}")))?
            .ok_or_else(|| self.fail(format!("{step}: get_standing answered None")))
    }

    async fn use_one(
        &self,
        id: &StandingId,
        key: &StandingKey,
        at: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, CheckFailure> {
        self.store
            .use_standing(id, key, at, attempt)
            .await
            .map_err(|e| self.fail(format!("use_standing failed: {e}")))
    }

    async fn expect_use(
        &self,
        step: &str,
        id: &StandingId,
        key: &StandingKey,
        at: Timestamp,
        attempt: &AttemptId,
        expected: UseOutcome,
    ) -> Result<(), CheckFailure> {
        let got = self.use_one(id, key, at, attempt).await?;
        if got != expected {
            return Err(self.fail(format!(
                "{step}: use answered {got:?}, expected {expected:?}"
            )));
        }
        Ok(())
    }
}

fn attempt(check: &'static str) -> Result<AttemptId, CheckFailure> {
    AttemptId::generate().map_err(|e| CheckFailure::new(check, format!("setup: {e}")))
}

/// Rules 8, 9 and 11: a grant with 3 uses reads back as issued, gives
/// exactly 3 uses to 3 attempts (remaining 2, 1, 0), refuses a 4th as
/// spent, answers a retry of a winner as a replay, and reads back the 3
/// attempts in order.
pub async fn standing_round_trips_and_counts_down(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let check = "standing_round_trips_and_counts_down";
    let cx = Cx::new(check, store)?;
    let grant = cx.standing(0, 3)?;
    cx.issue(&grant).await?;
    let read = cx.get("after issue", &grant.id).await?;
    if read != StoredStanding::issued(grant.clone()) {
        return Err(cx.fail(format!(
            "after issue: read back {read:?}, expected {:?}",
            StoredStanding::issued(grant.clone())
        )));
    }
    let key = grant.key();
    let attempts = [attempt(check)?, attempt(check)?, attempt(check)?];
    for (n, a) in attempts.iter().enumerate() {
        let remaining = 2 - u32::try_from(n).unwrap_or(0);
        let step = format!("use {}", n + 1);
        cx.expect_use(
            &step,
            &grant.id,
            &key,
            cx.at(1),
            a,
            UseOutcome::Used {
                remaining,
                replay: false,
            },
        )
        .await?;
    }
    cx.expect_use(
        "a 4th attempt",
        &grant.id,
        &key,
        cx.at(2),
        &attempt(check)?,
        UseOutcome::Stale(StaleReason::Consumed),
    )
    .await?;
    cx.expect_use(
        "a retry of the 2nd attempt",
        &grant.id,
        &key,
        cx.at(3),
        &attempts[1],
        UseOutcome::Used {
            remaining: 0,
            replay: true,
        },
    )
    .await?;
    let read = cx.get("after the uses", &grant.id).await?;
    if read.used_by != attempts || read.state != StandingState::Active || read.remaining() != 0 {
        return Err(cx.fail(format!(
            "after 3 uses and a refused 4th: read {:?} used by {:?}, expected Active used by {attempts:?}",
            read.state, read.used_by
        )));
    }
    Ok(())
}

/// Rule 8: an id already present is refused and the first grant stays.
pub async fn duplicate_standing_is_refused(store: &dyn ProposalStore) -> Result<(), CheckFailure> {
    let cx = Cx::new("duplicate_standing_is_refused", store)?;
    let grant = cx.standing(0, 2)?;
    cx.issue(&grant).await?;
    let taken = attempt(cx.check)?;
    cx.expect_use(
        "first use",
        &grant.id,
        &grant.key(),
        cx.at(1),
        &taken,
        UseOutcome::Used {
            remaining: 1,
            replay: false,
        },
    )
    .await?;
    let mut again = cx.standing(1, 50)?;
    again.id = grant.id.clone();
    match store.issue_standing(again).await {
        Err(IssueError::StandingExists(id)) if id == grant.id => {}
        other => {
            return Err(cx.fail(format!(
                "a second issue with the same id answered {other:?}, expected StandingExists"
            )));
        }
    }
    let read = cx.get("after the refused issue", &grant.id).await?;
    if read.grant != grant || read.used_by != [taken] {
        return Err(cx.fail(format!(
            "the first grant changed after a refused issue: {read:?}"
        )));
    }
    Ok(())
}

/// Rule 11, in order: unknown; another actor, run or scope is a mismatch
/// that takes no use and locks the grant at its limit; expiry at the
/// boundary; revoked (rule 13) and locked are stale for good.
pub async fn standing_use_checks_in_order(store: &dyn ProposalStore) -> Result<(), CheckFailure> {
    let check = "standing_use_checks_in_order";
    let cx = Cx::new(check, store)?;
    let unknown = StandingId::generate().map_err(|e| cx.fail(e.to_string()))?;
    let grant = cx
        .standing(0, 5)?
        .with_attempt_limit(3)
        .map_err(|e| cx.fail(e.to_string()))?;
    let key = grant.key();
    cx.expect_use(
        "an unknown id",
        &unknown,
        &key,
        cx.at(1),
        &attempt(check)?,
        UseOutcome::Unknown,
    )
    .await?;
    cx.issue(&grant).await?;
    let other_actor =
        ActorId::new(format!("{}-other", cx.actor)).map_err(|e| cx.fail(e.to_string()))?;
    let mismatches = [
        (
            "another run",
            StandingKey {
                run_id: cx.runs[1].clone(),
                ..key.clone()
            },
        ),
        (
            "another scope",
            StandingKey {
                scope: cx.scopes[1].clone(),
                ..key.clone()
            },
        ),
    ];
    for (step, wrong) in &mismatches {
        cx.expect_use(
            step,
            &grant.id,
            wrong,
            cx.at(1),
            &attempt(check)?,
            UseOutcome::Stale(StaleReason::Mismatch),
        )
        .await?;
    }
    let read = cx.get("after two mismatches", &grant.id).await?;
    if read.failed_attempts != 2 || !read.used_by.is_empty() || read.state != StandingState::Active
    {
        return Err(cx.fail(format!(
            "after two mismatches: {} failed attempts, {} uses, {:?}; expected 2, 0, Active",
            read.failed_attempts,
            read.used_by.len(),
            read.state
        )));
    }
    cx.expect_use(
        "another actor, the 3rd mismatch",
        &grant.id,
        &StandingKey {
            actor_id: other_actor,
            ..key.clone()
        },
        cx.at(1),
        &attempt(check)?,
        UseOutcome::Stale(StaleReason::Locked),
    )
    .await?;
    cx.expect_use(
        "a matching use of the locked grant",
        &grant.id,
        &key,
        cx.at(1),
        &attempt(check)?,
        UseOutcome::Stale(StaleReason::Locked),
    )
    .await?;

    let expiring = cx.standing(0, 2)?;
    cx.issue(&expiring).await?;
    let ttl = u64::try_from(TTL.as_millis()).unwrap_or(u64::MAX);
    cx.expect_use(
        "one millisecond before expiry",
        &expiring.id,
        &expiring.key(),
        cx.at(ttl - 1),
        &attempt(check)?,
        UseOutcome::Used {
            remaining: 1,
            replay: false,
        },
    )
    .await?;
    cx.expect_use(
        "at expiry",
        &expiring.id,
        &expiring.key(),
        cx.at(ttl),
        &attempt(check)?,
        UseOutcome::Stale(StaleReason::Expired),
    )
    .await?;

    let revoked = cx.standing(0, 2)?;
    cx.issue(&revoked).await?;
    let outcomes = [
        store.revoke_standing(&revoked.id).await,
        store.revoke_standing(&revoked.id).await,
        store.revoke_standing(&unknown).await,
    ];
    let expected = [
        StandingRevokeOutcome::Revoked,
        StandingRevokeOutcome::AlreadyEnded,
        StandingRevokeOutcome::Unknown,
    ];
    for (got, want) in outcomes.into_iter().zip(expected) {
        match got {
            Ok(got) if got == want => {}
            other => return Err(cx.fail(format!("revoke answered {other:?}, expected {want:?}"))),
        }
    }
    cx.expect_use(
        "a revoked grant",
        &revoked.id,
        &revoked.key(),
        cx.at(1),
        &attempt(check)?,
        UseOutcome::Stale(StaleReason::Revoked),
    )
    .await?;
    let read = cx.get("after revoke", &revoked.id).await?;
    if read.state != StandingState::Revoked {
        return Err(cx.fail(format!("a revoked grant reads {:?}", read.state)));
    }
    Ok(())
}

/// Rule 12: giving back frees the use for another attempt and never lets
/// the given-back attempt take one again; repeating it changes nothing;
/// an unknown id is `Unknown`.
pub async fn give_back_frees_the_use(store: &dyn ProposalStore) -> Result<(), CheckFailure> {
    let check = "give_back_frees_the_use";
    let cx = Cx::new(check, store)?;
    let grant = cx.standing(0, 1)?;
    cx.issue(&grant).await?;
    let key = grant.key();
    let first = attempt(check)?;
    cx.expect_use(
        "first use",
        &grant.id,
        &key,
        cx.at(1),
        &first,
        UseOutcome::Used {
            remaining: 0,
            replay: false,
        },
    )
    .await?;
    let answers = [
        store.give_back_use(&grant.id, &first, cx.at(2)).await,
        store.give_back_use(&grant.id, &first, cx.at(2)).await,
    ];
    let expected = [
        AbandonOutcome::Usable { restored: true },
        AbandonOutcome::Usable { restored: false },
    ];
    for (got, want) in answers.into_iter().zip(expected) {
        match got {
            Ok(got) if got == want => {}
            other => {
                return Err(cx.fail(format!("give back answered {other:?}, expected {want:?}")));
            }
        }
    }
    cx.expect_use(
        "the given-back attempt again",
        &grant.id,
        &key,
        cx.at(3),
        &first,
        UseOutcome::Stale(StaleReason::Abandoned),
    )
    .await?;
    let second = attempt(check)?;
    cx.expect_use(
        "another attempt",
        &grant.id,
        &key,
        cx.at(3),
        &second,
        UseOutcome::Used {
            remaining: 0,
            replay: false,
        },
    )
    .await?;
    let read = cx.get("after give back and reuse", &grant.id).await?;
    if read.used_by != [second] {
        return Err(cx.fail(format!(
            "after give back and reuse: used by {:?}",
            read.used_by
        )));
    }
    let unknown = StandingId::generate().map_err(|e| cx.fail(e.to_string()))?;
    match store.give_back_use(&unknown, &first, cx.at(3)).await {
        Ok(AbandonOutcome::Unknown) => Ok(()),
        other => Err(cx.fail(format!("give back of an unknown id answered {other:?}"))),
    }
}

/// Rule 12's limit: give-backs of attempts that hold no use (an outage
/// through which an agent retries one act) change nothing and never
/// revoke, however many; give-backs of taken uses are remembered, and the
/// one past [`MAX_ABANDONED_ATTEMPTS`] revokes the grant and frees its use.
pub async fn only_give_backs_of_taken_uses_count(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let check = "only_give_backs_of_taken_uses_count";
    let cx = Cx::new(check, store)?;
    let grant = cx.standing(0, 2)?;
    cx.issue(&grant).await?;
    let key = grant.key();
    let give_back = |attempt: AttemptId, expected: AbandonOutcome, step: String| {
        let (cx, id) = (&cx, grant.id.clone());
        async move {
            match store.give_back_use(&id, &attempt, cx.at(1)).await {
                Ok(got) if got == expected => Ok(()),
                other => Err(cx.fail(format!(
                    "{step}: give back answered {other:?}, expected {expected:?}"
                ))),
            }
        }
    };
    for n in 0..MAX_ABANDONED_ATTEMPTS + 4 {
        give_back(
            attempt(check)?,
            AbandonOutcome::Usable { restored: false },
            format!("give-back {n} of no use"),
        )
        .await?;
    }
    let read = cx.get("after give-backs of no use", &grant.id).await?;
    if read.state != StandingState::Active || !read.used_by.is_empty() {
        return Err(cx.fail(format!(
            "after give-backs of no use: {:?}, used by {:?}",
            read.state, read.used_by
        )));
    }
    let used = UseOutcome::Used {
        remaining: 1,
        replay: false,
    };
    for n in 0..MAX_ABANDONED_ATTEMPTS {
        let taker = attempt(check)?;
        cx.expect_use(&format!("use {n}"), &grant.id, &key, cx.at(1), &taker, used)
            .await?;
        give_back(
            taker,
            AbandonOutcome::Usable { restored: true },
            format!("give-back {n} of a taken use"),
        )
        .await?;
    }
    let last = attempt(check)?;
    cx.expect_use("the last use", &grant.id, &key, cx.at(1), &last, used)
        .await?;
    give_back(
        last,
        AbandonOutcome::Revoked,
        "one give-back of a taken use too many".to_owned(),
    )
    .await?;
    let read = cx.get("after the limit", &grant.id).await?;
    if read.state != StandingState::Revoked || !read.used_by.is_empty() {
        return Err(cx.fail(format!(
            "after the limit: {:?}, used by {:?}",
            read.state, read.used_by
        )));
    }
    cx.expect_use(
        "after the limit",
        &grant.id,
        &key,
        cx.at(1),
        &attempt(check)?,
        UseOutcome::Stale(StaleReason::Revoked),
    )
    .await
}

/// Rules 8, 9 and 11 with a stop: `stop_run` ends the run's standing grants
/// (read `Stopped`, uses `Stale(Stopped)`, also after a resume) and only
/// them, and counts in `stopped_standing` those it ended that were usable
/// (not the spent or revoked one, not one of another run, none a second
/// time); a stopped run refuses new ones until resumed; `stop_actor` ends
/// and counts every run's.
pub async fn stopping_a_run_ends_its_standing_grants(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let check = "stopping_a_run_ends_its_standing_grants";
    let cx = Cx::new(check, store)?;
    let stopped = cx.standing(0, 3)?;
    let other = cx.standing(1, 3)?;
    let (spent, revoked) = (cx.standing(0, 1)?, cx.standing(0, 3)?);
    for grant in [&stopped, &other, &spent, &revoked] {
        cx.issue(grant).await?;
    }
    cx.expect_use(
        "spending a grant",
        &spent.id,
        &spent.key(),
        cx.at(1),
        &attempt(check)?,
        UseOutcome::Used {
            remaining: 0,
            replay: false,
        },
    )
    .await?;
    store
        .revoke_standing(&revoked.id)
        .await
        .map_err(|e| cx.fail(format!("revoke_standing failed: {e}")))?;
    let counted = |step: &str, outcome: Result<StopOutcome, _>, standing: u64| {
        let outcome = outcome.map_err(|e| cx.fail(format!("{step} failed: {e}")))?;
        if (outcome.stopped_grants, outcome.stopped_standing) != (0, standing) {
            return Err(cx.fail(format!(
                "{step} answered {outcome:?}, expected 0 grants and {standing} standing grants"
            )));
        }
        Ok(())
    };
    counted(
        "stop_run",
        store.stop_run(&cx.actor, &cx.runs[0], cx.at(1)).await,
        1,
    )?;
    counted(
        "stop_run again",
        store.stop_run(&cx.actor, &cx.runs[0], cx.at(1)).await,
        0,
    )?;
    cx.expect_use(
        "a use after stop_run",
        &stopped.id,
        &stopped.key(),
        cx.at(2),
        &attempt(check)?,
        UseOutcome::Stale(StaleReason::Stopped),
    )
    .await?;
    match store.issue_standing(cx.standing(0, 3)?).await {
        Err(IssueError::Stopped) => {}
        other => {
            return Err(cx.fail(format!(
                "issue in a stopped run answered {other:?}, expected Stopped"
            )));
        }
    }
    store
        .resume_run(&cx.actor, &cx.runs[0])
        .await
        .map_err(|e| cx.fail(format!("resume_run failed: {e}")))?;
    cx.expect_use(
        "a use after resume_run",
        &stopped.id,
        &stopped.key(),
        cx.at(3),
        &attempt(check)?,
        UseOutcome::Stale(StaleReason::Stopped),
    )
    .await?;
    if cx.get("after resume", &stopped.id).await?.state != StandingState::Stopped {
        return Err(cx.fail("a standing grant of a stopped run does not read Stopped"));
    }
    let fresh = cx.standing(0, 1)?;
    cx.issue(&fresh).await?;
    cx.expect_use(
        "the other run",
        &other.id,
        &other.key(),
        cx.at(3),
        &attempt(check)?,
        UseOutcome::Used {
            remaining: 2,
            replay: false,
        },
    )
    .await?;
    counted("stop_actor", store.stop_actor(&cx.actor, cx.at(4)).await, 2)?;
    for (step, grant) in [
        ("after stop_actor, the other run", &other),
        ("after stop_actor, a grant issued after resume", &fresh),
    ] {
        cx.expect_use(
            step,
            &grant.id,
            &grant.key(),
            cx.at(5),
            &attempt(check)?,
            UseOutcome::Stale(StaleReason::Stopped),
        )
        .await?;
    }
    Ok(())
}

/// Rule 10: only usable grants of the one actor and run, oldest first.
pub async fn standing_grants_lists_usable_oldest_first(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let check = "standing_grants_lists_usable_oldest_first";
    let cx = Cx::new(check, store)?;
    let mut issued = Vec::new();
    for offset in [30u64, 10, 20] {
        let mut grant = cx.standing(0, 1)?;
        grant.issued_at = cx.at(offset);
        grant.expires_at = cx.at(offset).saturating_add(TTL);
        cx.issue(&grant).await?;
        issued.push(grant);
    }
    let spent = cx.standing(0, 1)?;
    let revoked = cx.standing(0, 1)?;
    let elsewhere = cx.standing(1, 1)?;
    for grant in [&spent, &revoked, &elsewhere] {
        cx.issue(grant).await?;
    }
    cx.expect_use(
        "spending one",
        &spent.id,
        &spent.key(),
        cx.at(40),
        &attempt(check)?,
        UseOutcome::Used {
            remaining: 0,
            replay: false,
        },
    )
    .await?;
    store
        .revoke_standing(&revoked.id)
        .await
        .map_err(|e| cx.fail(format!("revoke failed: {e}")))?;
    let listed = store
        .standing_grants(&cx.actor, &cx.runs[0], cx.at(50))
        .await
        .map_err(|e| cx.fail(format!("standing_grants failed: {e}")))?;
    let ids: Vec<&StandingId> = listed.iter().map(|s| &s.grant.id).collect();
    let expected = vec![&issued[1].id, &issued[2].id, &issued[0].id];
    if ids != expected {
        return Err(cx.fail(format!(
            "listed {ids:?}, expected {expected:?} (oldest first, usable only, this run only)"
        )));
    }
    Ok(())
}

/// Rule 11 under concurrency: in each of 20 rounds, 16 distinct attempts
/// use one grant of 3 uses at once; exactly 3 answer `Used { replay:
/// false }`, the rest `Stale(Consumed)`, and the grant reads exactly those 3
/// attempts.
pub async fn concurrent_uses_never_exceed_the_count(
    store: Arc<dyn ProposalStore>,
) -> Result<(), CheckFailure> {
    let check = "concurrent_uses_never_exceed_the_count";
    if tokio::runtime::Handle::current().runtime_flavor()
        != tokio::runtime::RuntimeFlavor::MultiThread
    {
        return Err(CheckFailure::new(
            check,
            "race checks need a multi-thread tokio runtime",
        ));
    }
    let cx = Cx::new(check, &*store)?;
    for round in 0..USE_ROUNDS {
        let grant = cx.standing(round % 2, RACED_USES)?;
        cx.issue(&grant).await?;
        let start = Arc::new(tokio::sync::Barrier::new(USE_CONTENDERS));
        let mut tasks = Vec::new();
        for _ in 0..USE_CONTENDERS {
            let a = attempt(check)?;
            let (store, start, id, key, now) = (
                Arc::clone(&store),
                Arc::clone(&start),
                grant.id.clone(),
                grant.key(),
                cx.at(1),
            );
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                let answer = store.use_standing(&id, &key, now, &a).await;
                (a, answer.map_err(|e| e.to_string()))
            }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            let (a, answer) = task
                .await
                .map_err(|e| cx.fail(format!("a contender panicked: {e}")))?;
            match answer.map_err(|e| cx.fail(format!("a contender failed: {e}")))? {
                UseOutcome::Used { replay: false, .. } => winners.push(a),
                UseOutcome::Stale(StaleReason::Consumed) => {}
                other => {
                    return Err(cx.fail(format!(
                        "round {round}: a contender answered {other:?}, expected Used or Stale(Consumed)"
                    )));
                }
            }
        }
        if winners.len() != RACED_USES as usize {
            return Err(cx.fail(format!(
                "round {round}: {} of {USE_CONTENDERS} concurrent uses of a grant with {RACED_USES} uses succeeded, expected exactly {RACED_USES}",
                winners.len()
            )));
        }
        let mut used = cx.get("after the race", &grant.id).await?.used_by;
        used.sort();
        winners.sort();
        if used != winners {
            return Err(cx.fail(format!(
                "round {round}: the grant reads uses by {used:?}, but the winners were {winners:?}"
            )));
        }
    }
    Ok(())
}
