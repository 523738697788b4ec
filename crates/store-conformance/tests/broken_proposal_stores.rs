#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The proposal checks can fail: each deliberately broken proposal store is
//! caught by the checks named for its defect, and the sound one passes all.
//! The race check gets a store whose non-atomic approvals wait at a
//! [`Rendezvous`] between their read and their write, so it catches them on
//! every run, however the threads are scheduled.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, ApproveError, ApproverId,
    AttemptId, Binding, ConsumeOutcome, DecisionOutcome, IssueError, Proposal, ProposalId,
    ProposalState, ProposalStore, ProposeError, ResumeOutcome, RevokeOutcome, RunId, StaleReason,
    StandingGrant, StandingId, StandingKey, StandingRevokeOutcome, StopOutcome, StoreError,
    StoredGrant, StoredProposal, StoredStanding, Timestamp, UseOutcome, decide_use,
};
use countersign_store_conformance::{
    CheckFailure, PROPOSAL_CHECKS, STANDING_CHECKS, proposals, standing,
};
use countersign_store_memory::InMemoryApprovalStore;
use support::Rendezvous;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// A correct store (the memory store behind the wrapper).
    None,
    /// A decided proposal is decided again: a second approve issues a
    /// second grant.
    DecidesTwice,
    /// Reads the proposal, then issues the grant without recording the
    /// decision: check-then-act.
    CheckThenIssue,
    /// Reads the proposal, then issues the grant and records the decision
    /// as a second step that does not look at what the read saw: when
    /// another approval was recorded since the read, this one's record is
    /// lost but its grant stays and it answers `Approved`. One call at a
    /// time it answers exactly as a sound store.
    CheckThenIssueAndRecord,
    /// Screenshots are not kept.
    DropsScreenshots,
    /// A proposal stopped with its run is approved anyway once the run is
    /// resumed.
    StopForgottenOnResume,
    /// The record keeps the observed page but not its bound element.
    DropsElement,
    /// A standing grant gives one use more than it carries.
    UseCountOffByOne,
    /// A use reads the count, then writes it as a second step: concurrent
    /// uses all read the same count. One call at a time it counts right.
    UseCountReadThenWritten,
    /// A use is answered but never recorded.
    UseNotRecorded,
    /// Every give-back counts towards the limit, also one of an attempt
    /// that holds no use: an outage costs the person's approval.
    CountsGiveBacksOfNoUse,
}

struct Broken {
    inner: InMemoryApprovalStore,
    defect: Defect,
    /// On in the store the race check gets, off in the one the sequential
    /// checks get (a lone call would wait for nobody).
    rendezvous: Rendezvous<ProposalId>,
    /// The same for uses of standing grants.
    uses: Rendezvous<StandingId>,
    /// The standing grants that gave their one use too many.
    extra_use_given: Mutex<HashSet<StandingId>>,
    /// Give-backs of no use so far, by standing grant.
    give_backs_of_no_use: Mutex<HashMap<StandingId, usize>>,
}

impl Broken {
    fn new(
        defect: Defect,
        rendezvous: Rendezvous<ProposalId>,
        uses: Rendezvous<StandingId>,
    ) -> Self {
        Broken {
            inner: InMemoryApprovalStore::new(),
            defect,
            rendezvous,
            uses,
            extra_use_given: Mutex::new(HashSet::new()),
            give_backs_of_no_use: Mutex::new(HashMap::new()),
        }
    }

    /// The non-atomic uses: read the standing grant, decide on what was
    /// read, wait (under a race) until every contender has read, then write —
    /// or, for [`Defect::UseNotRecorded`], never write.
    async fn use_after_reading(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError> {
        let Some(read) = self.inner.get_standing(id).await? else {
            return Ok(UseOutcome::Unknown);
        };
        let decision = decide_use(&read, &[], false, key, now, attempt);
        // Under the race every contender reads before any writes: the
        // interleaving that loses updates, forced.
        self.uses.arrive(id);
        if decision.record_use {
            self.uses.wait_for(id, standing::USE_CONTENDERS).await;
        }
        if decision.record_use && self.defect == Defect::UseCountReadThenWritten {
            self.inner.use_standing(id, key, now, attempt).await?;
        }
        Ok(decision.outcome)
    }

    /// The non-atomic approvals: read the proposal, then write in separate
    /// steps. Under a race, one that would decide waits between the two
    /// until another decision on the proposal has read it or finished.
    async fn approve_after_reading(
        &self,
        id: &ProposalId,
        approval: Approval,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError> {
        let read = self.inner.get_proposal(id).await?;
        let decides = read.as_ref().is_some_and(|stored| {
            stored.state == ProposalState::Pending && !stored.proposal.is_expired_at(now)
        });
        self.rendezvous.arrive_after_read(id, decides).await;
        if !decides {
            return self.inner.approve_proposal(id, approval, now).await;
        }
        if self.defect == Defect::CheckThenIssueAndRecord {
            // One inner step issues and records when nothing was decided
            // since the read. Otherwise the record is lost, but a store that
            // issues before it records has issued this call's grant already:
            // issue it all the same.
            let answer = self
                .inner
                .approve_proposal(id, approval.clone(), now)
                .await?;
            if !matches!(answer, DecisionOutcome::AlreadyDecided(_)) {
                return Ok(answer);
            }
        }
        match self.inner.issue(approval).await {
            Ok(()) => Ok(DecisionOutcome::Approved),
            Err(IssueError::Stopped) => Ok(DecisionOutcome::Stopped),
            Err(e) => Err(ApproveError::Store(StoreError::unavailable(e.to_string()))),
        }
    }
}

#[async_trait]
impl ApprovalStore for Broken {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        self.inner.issue(approval).await
    }
    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        self.inner.revoke(id).await
    }
    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        self.inner.get(id).await
    }
    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        self.inner.consume_once(id, binding, now, attempt).await
    }
    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        self.inner.abandon(id, attempt, now).await
    }
    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        self.inner.stop_run(actor, run, now).await
    }
    async fn stop_actor(&self, actor: &ActorId, now: Timestamp) -> Result<StopOutcome, StoreError> {
        self.inner.stop_actor(actor, now).await
    }
    async fn resume_run(&self, actor: &ActorId, run: &RunId) -> Result<ResumeOutcome, StoreError> {
        self.inner.resume_run(actor, run).await
    }
    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError> {
        self.inner.resume_actor(actor).await
    }
}

#[async_trait]
impl ProposalStore for Broken {
    async fn propose(&self, mut proposal: Proposal) -> Result<(), ProposeError> {
        if let (Defect::DropsScreenshots, Some(snapshot)) =
            (self.defect, proposal.snapshot.as_mut())
        {
            snapshot.screenshot_png = None;
        }
        if let (Defect::DropsElement, Some(snapshot)) = (self.defect, proposal.snapshot.as_mut()) {
            snapshot.page.element = None;
        }
        self.inner.propose(proposal).await
    }
    async fn get_proposal(&self, id: &ProposalId) -> Result<Option<StoredProposal>, StoreError> {
        self.inner.get_proposal(id).await
    }
    async fn pending_proposals(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredProposal>, StoreError> {
        self.inner.pending_proposals(actor, run, now).await
    }
    async fn approve_proposal(
        &self,
        id: &ProposalId,
        approval: Approval,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError> {
        if matches!(
            self.defect,
            Defect::CheckThenIssue | Defect::CheckThenIssueAndRecord
        ) {
            return self.approve_after_reading(id, approval, now).await;
        }
        let answer = self.inner.approve_proposal(id, approval.clone(), now).await;
        self.rendezvous.arrive(id);
        let answer = answer?;
        let reissue = matches!(
            (&answer, self.defect),
            (DecisionOutcome::AlreadyDecided(_), Defect::DecidesTwice)
                | (DecisionOutcome::Stopped, Defect::StopForgottenOnResume)
        );
        if reissue && self.inner.issue(approval).await.is_ok() {
            return Ok(DecisionOutcome::Approved);
        }
        Ok(answer)
    }
    async fn deny_proposal(
        &self,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError> {
        let answer = self.inner.deny_proposal(id, by, now).await;
        self.rendezvous.arrive(id);
        answer
    }
    async fn issue_standing(&self, grant: StandingGrant) -> Result<(), IssueError> {
        self.inner.issue_standing(grant).await
    }
    async fn get_standing(&self, id: &StandingId) -> Result<Option<StoredStanding>, StoreError> {
        self.inner.get_standing(id).await
    }
    async fn standing_grants(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError> {
        self.inner.standing_grants(actor, run, now).await
    }
    async fn use_standing(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError> {
        if matches!(
            self.defect,
            Defect::UseCountReadThenWritten | Defect::UseNotRecorded
        ) {
            return self.use_after_reading(id, key, now, attempt).await;
        }
        let answer = self.inner.use_standing(id, key, now, attempt).await;
        self.uses.arrive(id);
        let answer = answer?;
        if self.defect == Defect::UseCountOffByOne
            && answer == UseOutcome::Stale(StaleReason::Consumed)
            && self.extra_use_given.lock().unwrap().insert(id.clone())
        {
            return Ok(UseOutcome::Used {
                remaining: 0,
                replay: false,
            });
        }
        Ok(answer)
    }
    async fn give_back_use(
        &self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        if self.defect == Defect::CountsGiveBacksOfNoUse {
            let holds = self
                .inner
                .get_standing(id)
                .await?
                .is_some_and(|stored| stored.used_by.contains(attempt));
            if !holds {
                let past_the_limit = {
                    let mut counts = self.give_backs_of_no_use.lock().unwrap();
                    let count = counts.entry(id.clone()).or_default();
                    *count += 1;
                    *count > countersign_approval_core::MAX_ABANDONED_ATTEMPTS
                };
                if past_the_limit {
                    self.inner.revoke_standing(id).await?;
                    return Ok(AbandonOutcome::Revoked);
                }
            }
        }
        self.inner.give_back_use(id, attempt, now).await
    }
    async fn revoke_standing(&self, id: &StandingId) -> Result<StandingRevokeOutcome, StoreError> {
        self.inner.revoke_standing(id).await
    }
}

/// Runs every proposal check against a fresh store with `defect` and
/// returns the failures by check name.
fn run_all(defect: Defect) -> HashMap<&'static str, CheckFailure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = Broken::new(defect, Rendezvous::off(), Rendezvous::off());
        let racing = Arc::new(Broken::new(defect, Rendezvous::on(), Rendezvous::on()));
        let s: &dyn ProposalStore = &store;
        let results = [
            proposals::unknown_proposal_is_unknown(s).await,
            proposals::proposal_round_trips_every_field(s).await,
            proposals::duplicate_proposal_is_refused(s).await,
            proposals::approve_issues_exactly_the_proposed_grant(s).await,
            proposals::a_second_decision_changes_nothing(s).await,
            proposals::a_grant_not_for_the_proposal_is_refused(s).await,
            proposals::an_existing_grant_id_is_refused(s).await,
            proposals::expired_proposal_cannot_be_decided(s).await,
            proposals::stopping_a_run_ends_its_proposals(s).await,
            proposals::stopping_an_actor_ends_its_proposals(s).await,
            proposals::pending_lists_one_run_oldest_first(s).await,
            proposals::concurrent_decisions_issue_one_grant(racing.clone()).await,
            standing::standing_round_trips_and_counts_down(s).await,
            standing::duplicate_standing_is_refused(s).await,
            standing::standing_use_checks_in_order(s).await,
            standing::give_back_frees_the_use(s).await,
            standing::only_give_backs_of_taken_uses_count(s).await,
            standing::stopping_a_run_ends_its_standing_grants(s).await,
            standing::standing_grants_lists_usable_oldest_first(s).await,
            standing::concurrent_uses_never_exceed_the_count(racing.clone()).await,
        ];
        racing
            .rendezvous
            .assert_never_timed_out("concurrent_decisions_issue_one_grant");
        racing
            .uses
            .assert_never_timed_out("concurrent_uses_never_exceed_the_count");
        assert_eq!(results.len(), PROPOSAL_CHECKS.len() + STANDING_CHECKS.len());
        results
            .into_iter()
            .filter_map(Result::err)
            .map(|failure| (failure.check(), failure))
            .collect()
    })
}

fn assert_fails_exactly(defect: Defect, names: &[&str]) {
    let failures = run_all(defect);
    let mut failed: Vec<&str> = failures.keys().copied().collect();
    failed.sort_unstable();
    let mut expected = names.to_vec();
    expected.sort_unstable();
    assert_eq!(failed, expected, "{defect:?}: {failures:#?}");
}

#[test]
fn a_sound_proposal_store_passes_every_check() {
    assert_fails_exactly(Defect::None, &[]);
}

#[test]
fn deciding_twice_is_caught() {
    assert_fails_exactly(
        Defect::DecidesTwice,
        &[
            "a_second_decision_changes_nothing",
            "concurrent_decisions_issue_one_grant",
        ],
    );
}

#[test]
fn check_then_issue_is_caught() {
    let failures = run_all(Defect::CheckThenIssue);
    for name in [
        "approve_issues_exactly_the_proposed_grant",
        "a_second_decision_changes_nothing",
        "concurrent_decisions_issue_one_grant",
    ] {
        assert!(failures.contains_key(name), "{name} passed: {failures:#?}");
    }
    // Round 0 races approvals only: every one reads the proposal pending.
    let message = failures["concurrent_decisions_issue_one_grant"].to_string();
    assert!(
        message.contains("round 0: 24 of 24 concurrent decisions were taken"),
        "unexpected message: {message}"
    );
}

#[test]
fn check_then_issue_and_record_is_caught_by_the_race_alone() {
    let failures = run_all(Defect::CheckThenIssueAndRecord);
    let mut failed: Vec<&str> = failures.keys().copied().collect();
    failed.sort_unstable();
    // One call at a time it is sound: only the race can tell.
    assert_eq!(
        failed,
        ["concurrent_decisions_issue_one_grant"],
        "{failures:#?}"
    );
    let message = failures["concurrent_decisions_issue_one_grant"].to_string();
    assert!(
        message.contains("round 0:") && message.contains("concurrent decisions were taken"),
        "unexpected message: {message}"
    );
}

#[test]
fn dropping_screenshots_is_caught() {
    assert_fails_exactly(
        Defect::DropsScreenshots,
        &[
            "proposal_round_trips_every_field",
            "approve_issues_exactly_the_proposed_grant",
            "a_grant_not_for_the_proposal_is_refused",
        ],
    );
}

#[test]
fn forgetting_a_stop_on_resume_is_caught() {
    assert_fails_exactly(
        Defect::StopForgottenOnResume,
        &[
            "stopping_a_run_ends_its_proposals",
            "stopping_an_actor_ends_its_proposals",
        ],
    );
}

#[test]
fn dropping_the_bound_element_is_caught() {
    assert_fails_exactly(
        Defect::DropsElement,
        &[
            "proposal_round_trips_every_field",
            "approve_issues_exactly_the_proposed_grant",
            "a_grant_not_for_the_proposal_is_refused",
        ],
    );
}

#[test]
fn a_use_too_many_is_caught() {
    assert_fails_exactly(
        Defect::UseCountOffByOne,
        &[
            "standing_round_trips_and_counts_down",
            "concurrent_uses_never_exceed_the_count",
        ],
    );
}

#[test]
fn a_count_read_then_written_is_caught() {
    let failures = run_all(Defect::UseCountReadThenWritten);
    let message = failures["concurrent_uses_never_exceed_the_count"].to_string();
    // Every contender reads the grant unused, so every one takes a use.
    assert!(
        message.contains("round 0: 16 of 16 concurrent uses of a grant with 3 uses succeeded"),
        "unexpected message: {message}"
    );
}

#[test]
fn a_use_not_recorded_is_caught() {
    // Every check that reads a grant back after a use, and the race.
    assert_fails_exactly(
        Defect::UseNotRecorded,
        &[
            "concurrent_uses_never_exceed_the_count",
            "duplicate_standing_is_refused",
            "give_back_frees_the_use",
            "only_give_backs_of_taken_uses_count",
            "standing_grants_lists_usable_oldest_first",
            "standing_round_trips_and_counts_down",
            "standing_use_checks_in_order",
            "stopping_a_run_ends_its_standing_grants",
        ],
    );
}

#[test]
fn counting_give_backs_of_no_use_is_caught() {
    assert_fails_exactly(
        Defect::CountsGiveBacksOfNoUse,
        &["only_give_backs_of_taken_uses_count"],
    );
}
