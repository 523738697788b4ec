#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The proposal checks can fail: each deliberately broken proposal store is
//! caught by the checks named for its defect, and the sound one passes all.

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// A correct store (the memory store behind the wrapper).
    None,
    /// A decided proposal is decided again: a second approve issues a
    /// second grant.
    DecidesTwice,
    /// Reads the proposal, yields, then issues the grant without recording
    /// the decision: check-then-act.
    CheckThenIssue,
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
        if self.defect == Defect::CheckThenIssue {
            let Some(stored) = self.inner.get_proposal(id).await? else {
                return Ok(DecisionOutcome::Unknown);
            };
            if stored.state != ProposalState::Pending || stored.proposal.is_expired_at(now) {
                return self.inner.approve_proposal(id, approval, now).await;
            }
            tokio::task::yield_now().await;
            return match self.inner.issue(approval).await {
                Ok(()) => Ok(DecisionOutcome::Approved),
                Err(IssueError::Stopped) => Ok(DecisionOutcome::Stopped),
                Err(e) => Err(ApproveError::Store(StoreError::unavailable(e.to_string()))),
            };
        }
        let answer = self
            .inner
            .approve_proposal(id, approval.clone(), now)
            .await?;
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
        self.inner.deny_proposal(id, by, now).await
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
        let store = Arc::new(Broken {
            inner: InMemoryApprovalStore::new(),
            defect,
        });
        let s: &dyn ProposalStore = &*store;
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
            proposals::concurrent_decisions_issue_one_grant(store.clone()).await,
        ];
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
