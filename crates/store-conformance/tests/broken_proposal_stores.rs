#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The proposal checks can fail: each deliberately broken proposal store is
//! caught by the checks named for its defect, and the sound one passes all.
//! The race check gets a store whose non-atomic approvals wait at a
//! [`Rendezvous`] between their read and their write, so it catches them on
//! every run, however the threads are scheduled.

mod support;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, ApproveError, ApproverId,
    AttemptId, Binding, ConsumeOutcome, DecisionOutcome, IssueError, Proposal, ProposalId,
    ProposalState, ProposalStore, ProposeError, ResumeOutcome, RevokeOutcome, RunId, StopOutcome,
    StoreError, StoredGrant, StoredProposal, Timestamp,
};
use countersign_store_conformance::{CheckFailure, PROPOSAL_CHECKS, proposals};
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
}

struct Broken {
    inner: InMemoryApprovalStore,
    defect: Defect,
    /// On in the store the race check gets, off in the one the sequential
    /// checks get (a lone call would wait for nobody).
    rendezvous: Rendezvous<ProposalId>,
}

impl Broken {
    fn new(defect: Defect, rendezvous: Rendezvous<ProposalId>) -> Self {
        Broken {
            inner: InMemoryApprovalStore::new(),
            defect,
            rendezvous,
        }
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
        let store = Broken::new(defect, Rendezvous::off());
        let racing = Arc::new(Broken::new(defect, Rendezvous::on()));
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
        ];
        racing
            .rendezvous
            .assert_never_timed_out("concurrent_decisions_issue_one_grant");
        assert_eq!(results.len(), PROPOSAL_CHECKS.len());
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
