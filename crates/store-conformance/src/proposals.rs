//! Checks for [`ProposalStore`]: one per rule of its contract, and a race.
//!
//! Run them all with [`proposal_store_conformance_tests!`](crate::proposal_store_conformance_tests).
//! Each check makes an actor and runs of its own (named with a random
//! suffix), so checks may share one store.

use std::sync::Arc;
use std::time::Duration;

use countersign_approval_core::{
    ActorId, Approval, ApprovalId, ApproveError, ApproverId, ConsumeOutcome, DecisionOutcome,
    MAX_LISTED_PROPOSALS, PageBinding, PageSnapshot, Proposal, ProposalId, ProposalState,
    ProposalStatus, ProposalStore, ProposeError, RunId, StoredGrant, StoredProposal, SystemClock,
    Timestamp,
};
use countersign_approval_core::{AttemptId, Clock};

use crate::failure::CheckFailure;
use crate::fixtures::{Fixtures, TTL, TTL_MS, unique_actor_and_runs};

/// The names of the proposal checks, in the order the macro runs them.
pub const PROPOSAL_CHECKS: &[&str] = &[
    "unknown_proposal_is_unknown",
    "proposal_round_trips_every_field",
    "duplicate_proposal_is_refused",
    "approve_issues_exactly_the_proposed_grant",
    "a_second_decision_changes_nothing",
    "a_grant_not_for_the_proposal_is_refused",
    "an_existing_grant_id_is_refused",
    "expired_proposal_cannot_be_decided",
    "stopping_a_run_ends_its_proposals",
    "stopping_an_actor_ends_its_proposals",
    "pending_lists_one_run_oldest_first",
    "concurrent_decisions_issue_one_grant",
];

/// A PNG signature and a few bytes: stores keep screenshots as bytes and
/// must give back exactly these.
const SCREENSHOT: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\x00\x01";

struct Cx<'a> {
    check: &'static str,
    store: &'a dyn ProposalStore,
    fx: Fixtures,
    t0: Timestamp,
    actor: ActorId,
    runs: [RunId; 2],
    approver: ApproverId,
}

impl<'a> Cx<'a> {
    async fn new(
        check: &'static str,
        store: &'a dyn ProposalStore,
    ) -> Result<Cx<'a>, CheckFailure> {
        let (actor, runs) = unique_actor_and_runs(check)?;
        Ok(Cx {
            check,
            store,
            fx: Fixtures::new(check).await?,
            t0: SystemClock.now(),
            actor,
            runs,
            approver: ApproverId::new("approver-carol")
                .map_err(|e| CheckFailure::new(check, format!("setup: {e}")))?,
        })
    }

    fn fail(&self, message: impl Into<String>) -> CheckFailure {
        CheckFailure::new(self.check, message)
    }

    fn at(&self, millis: u64) -> Timestamp {
        self.t0.saturating_add(Duration::from_millis(millis))
    }

    /// A proposal in `run` (first fixture URL, action `action`), made at
    /// `at` for [`TTL`], not stored yet.
    fn proposal(&self, run: usize, action: usize, at: Timestamp) -> Result<Proposal, CheckFailure> {
        Proposal::for_action(
            self.actor.clone(),
            self.runs[run].clone(),
            &self.fx.urls[0],
            &self.fx.actions[action],
            TTL,
            at,
        )
        .map_err(|e| self.fail(format!("could not build a proposal: {e}")))
    }

    /// `proposal` with a snapshot of an element-bound page.
    fn observed(&self, proposal: Proposal) -> Result<Proposal, CheckFailure> {
        proposal
            .observed(PageSnapshot {
                page: PageBinding {
                    session_id: "session-1".to_owned(),
                    target_id: "target-1".to_owned(),
                    page_revision: "revision-1".to_owned(),
                    element: Some(crate::fixtures::element(self.check)?),
                },
                screenshot_png: Some(SCREENSHOT.to_vec()),
                target_found: true,
            })
            .map_err(|e| self.fail(format!("could not attach a snapshot: {e}")))
    }

    async fn propose(&self, proposal: &Proposal) -> Result<(), CheckFailure> {
        self.store.propose(proposal.clone()).await.map_err(|e| {
            self.fail(format!(
                "proposing a new proposal `{}` failed: {e}",
                proposal.id
            ))
        })
    }

    fn grant(&self, proposal: &Proposal, now: Timestamp) -> Result<Approval, CheckFailure> {
        proposal
            .grant(TTL, now, Some(self.approver.clone()))
            .map_err(|e| self.fail(format!("could not build the proposal's grant: {e}")))
    }

    async fn get(
        &self,
        step: &str,
        id: &ProposalId,
    ) -> Result<Option<StoredProposal>, CheckFailure> {
        self.store.get_proposal(id).await.map_err(|e| {
            self.fail(format!(
                "{step}: get_proposal failed with a store error: {e}"
            ))
        })
    }

    async fn expect_state(
        &self,
        step: &str,
        proposal: &Proposal,
        state: ProposalState,
    ) -> Result<(), CheckFailure> {
        let answer = self.get(step, &proposal.id).await?;
        let expected = Some(StoredProposal {
            proposal: proposal.clone(),
            state,
        });
        if answer == expected {
            return Ok(());
        }
        Err(self.fail(match answer {
            None => format!("{step}: get_proposal answered None for `{}`", proposal.id),
            Some(got) if got.proposal != *proposal => format!(
                "{step}: get_proposal answered proposal `{}` with fields other than proposed",
                proposal.id
            ),
            Some(got) => format!(
                "{step}: proposal `{}` is in state {:?}, expected {:?}",
                proposal.id,
                got.state,
                expected.map(|e| e.state)
            ),
        }))
    }

    async fn approve(
        &self,
        step: &str,
        id: &ProposalId,
        grant: &Approval,
        now: Timestamp,
    ) -> Result<Result<DecisionOutcome, ApproveError>, CheckFailure> {
        match self.store.approve_proposal(id, grant.clone(), now).await {
            Err(ApproveError::Store(e)) => Err(self.fail(format!(
                "{step}: approve_proposal failed with a store error: {e}"
            ))),
            answer => Ok(answer),
        }
    }

    async fn approve_expecting(
        &self,
        step: &str,
        id: &ProposalId,
        grant: &Approval,
        now: Timestamp,
        expected: DecisionOutcome,
    ) -> Result<(), CheckFailure> {
        match self.approve(step, id, grant, now).await? {
            Ok(answer) if answer == expected => Ok(()),
            answer => Err(self.fail(format!(
                "{step}: approve_proposal answered {answer:?}, expected {expected:?}"
            ))),
        }
    }

    async fn deny_expecting(
        &self,
        step: &str,
        id: &ProposalId,
        now: Timestamp,
        expected: DecisionOutcome,
    ) -> Result<(), CheckFailure> {
        let answer = self
            .store
            .deny_proposal(id, Some(&self.approver), now)
            .await
            .map_err(|e| {
                self.fail(format!(
                    "{step}: deny_proposal failed with a store error: {e}"
                ))
            })?;
        if answer == expected {
            Ok(())
        } else {
            Err(self.fail(format!(
                "{step}: deny_proposal answered {answer:?}, expected {expected:?}"
            )))
        }
    }

    /// Expects no grant with `id`.
    async fn no_grant(&self, step: &str, id: &ApprovalId) -> Result<(), CheckFailure> {
        match self.store.get(id).await {
            Ok(None) => Ok(()),
            Ok(Some(grant)) => Err(self.fail(format!(
                "{step}: grant `{id}` exists in state {:?}, expected no grant",
                grant.state
            ))),
            Err(e) => Err(self.fail(format!("{step}: get failed with a store error: {e}"))),
        }
    }

    async fn pending(
        &self,
        step: &str,
        run: usize,
        now: Timestamp,
    ) -> Result<Vec<ProposalId>, CheckFailure> {
        let listed = self
            .store
            .pending_proposals(&self.actor, &self.runs[run], now)
            .await
            .map_err(|e| {
                self.fail(format!(
                    "{step}: pending_proposals failed with a store error: {e}"
                ))
            })?;
        Ok(listed.into_iter().map(|p| p.proposal.id).collect())
    }

    fn approved(&self, grant: &Approval, at: Timestamp) -> ProposalState {
        ProposalState::Approved {
            approval_id: grant.id.clone(),
            by: Some(self.approver.clone()),
            at,
        }
    }
}

/// An id never proposed: `get_proposal` answers `None`, both decisions
/// `Unknown`, and nothing is created.
pub async fn unknown_proposal_is_unknown(store: &dyn ProposalStore) -> Result<(), CheckFailure> {
    let cx = Cx::new("unknown_proposal_is_unknown", store).await?;
    let never_stored = cx.proposal(0, 0, cx.t0)?;
    let grant = cx.grant(&never_stored, cx.t0)?;
    if cx
        .get("get of an unknown id", &never_stored.id)
        .await?
        .is_some()
    {
        return Err(cx.fail("get_proposal of an id never proposed answered a proposal"));
    }
    cx.approve_expecting(
        "approve of an unknown id",
        &never_stored.id,
        &grant,
        cx.t0,
        DecisionOutcome::Unknown,
    )
    .await?;
    cx.no_grant("after approving an unknown id", &grant.id)
        .await?;
    cx.deny_expecting(
        "deny of an unknown id",
        &never_stored.id,
        cx.t0,
        DecisionOutcome::Unknown,
    )
    .await?;
    if cx
        .get("get after deciding an unknown id", &never_stored.id)
        .await?
        .is_some()
    {
        return Err(cx.fail("deciding an unknown id created a proposal"));
    }
    Ok(())
}

/// Every field, the snapshot and its screenshot bytes included, reads back
/// unchanged, with and without a snapshot, with and without a bound element
/// (one full of quotes, non-ASCII and bidi characters in two frames); reads
/// change nothing.
pub async fn proposal_round_trips_every_field(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("proposal_round_trips_every_field", store).await?;
    let plain = cx.proposal(0, 1, cx.t0)?;
    let observed = cx.observed(cx.proposal(0, 0, cx.at(1))?)?;
    let mut unseen = cx.observed(cx.proposal(1, 0, cx.at(2))?)?;
    if let Some(snapshot) = unseen.snapshot.as_mut() {
        snapshot.screenshot_png = None;
        snapshot.target_found = false;
        snapshot.page.element = None;
    }
    for proposal in [&plain, &observed, &unseen] {
        cx.propose(proposal).await?;
        for read in 0..3 {
            cx.expect_state(
                &format!("read {read} of `{}`", proposal.id),
                proposal,
                ProposalState::Pending,
            )
            .await?;
        }
    }
    Ok(())
}

/// A second proposal with an id already present is `AlreadyExists` and the
/// first is left as it was, also once decided.
pub async fn duplicate_proposal_is_refused(store: &dyn ProposalStore) -> Result<(), CheckFailure> {
    let cx = Cx::new("duplicate_proposal_is_refused", store).await?;
    let first = cx.proposal(0, 0, cx.t0)?;
    cx.propose(&first).await?;
    let mut other = cx.proposal(1, 1, cx.at(5))?;
    other.id = first.id.clone();
    for step in [
        "duplicate of a pending proposal",
        "duplicate of a denied proposal",
    ] {
        match store.propose(other.clone()).await {
            Err(ProposeError::AlreadyExists(id)) if id == first.id => {}
            answer => {
                return Err(cx.fail(format!(
                    "{step}: propose answered {answer:?}, expected AlreadyExists(`{}`)",
                    first.id
                )));
            }
        }
        if step.contains("pending") {
            cx.expect_state(step, &first, ProposalState::Pending)
                .await?;
            cx.deny_expecting(step, &first.id, cx.at(10), DecisionOutcome::Denied)
                .await?;
        } else {
            let denied = ProposalState::Denied {
                by: Some(cx.approver.clone()),
                at: cx.at(10),
            };
            cx.expect_state(step, &first, denied).await?;
        }
    }
    Ok(())
}

/// Approving stores exactly the proposal's grant (page-bound to the
/// observed page, with the approver) and records the decision; the grant
/// is consumable with the proposal's binding.
pub async fn approve_issues_exactly_the_proposed_grant(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("approve_issues_exactly_the_proposed_grant", store).await?;
    for observed in [false, true] {
        let mut proposal = cx.proposal(0, usize::from(observed), cx.t0)?;
        if observed {
            proposal = cx.observed(proposal)?;
        }
        cx.propose(&proposal).await?;
        let now = cx.at(1_000);
        let grant = cx.grant(&proposal, now)?;
        cx.approve_expecting(
            "approve",
            &proposal.id,
            &grant,
            now,
            DecisionOutcome::Approved,
        )
        .await?;
        cx.expect_state("after approve", &proposal, cx.approved(&grant, now))
            .await?;
        let stored = store
            .get(&grant.id)
            .await
            .map_err(|e| cx.fail(format!("get of the grant failed: {e}")))?;
        if stored != Some(StoredGrant::issued(grant.clone())) {
            return Err(cx.fail(format!(
                "the grant `{}` of an approved proposal reads {stored:?}, expected it active as issued",
                grant.id
            )));
        }
        if grant.approver.as_ref().map(|a| &a.id) != Some(&cx.approver) {
            return Err(cx.fail("the proposal's grant does not name its approver"));
        }
        let attempt = AttemptId::generate().map_err(|e| cx.fail(e.to_string()))?;
        let consumed = store
            .consume_once(&grant.id, &proposal.binding(), cx.at(2_000), &attempt)
            .await
            .map_err(|e| cx.fail(format!("consume failed: {e}")))?;
        if consumed != (ConsumeOutcome::Consumed { replay: false }) {
            return Err(cx.fail(format!(
                "consuming the approved grant with the proposal's binding answered {consumed:?}"
            )));
        }
        let shown = cx.get("status", &proposal.id).await?;
        if shown.map(|s| s.status_at(cx.at(TTL_MS + 1))) != Some(ProposalStatus::Approved) {
            return Err(cx.fail("an approved proposal does not show as approved after its expiry"));
        }
    }
    Ok(())
}

/// Once decided, any further decision answers `AlreadyDecided` with the
/// first decision and stores nothing: no second grant.
pub async fn a_second_decision_changes_nothing(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("a_second_decision_changes_nothing", store).await?;
    let approved = cx.proposal(0, 0, cx.t0)?;
    cx.propose(&approved).await?;
    let first = cx.grant(&approved, cx.at(1))?;
    cx.approve_expecting(
        "first approve",
        &approved.id,
        &first,
        cx.at(1),
        DecisionOutcome::Approved,
    )
    .await?;
    let state = cx.approved(&first, cx.at(1));
    let second = cx.grant(&approved, cx.at(2))?;
    cx.approve_expecting(
        "second approve",
        &approved.id,
        &second,
        cx.at(2),
        DecisionOutcome::AlreadyDecided(state.clone()),
    )
    .await?;
    cx.no_grant("after a second approve", &second.id).await?;
    cx.deny_expecting(
        "deny after approve",
        &approved.id,
        cx.at(3),
        DecisionOutcome::AlreadyDecided(state.clone()),
    )
    .await?;
    cx.expect_state("after approve, approve, deny", &approved, state)
        .await?;

    let denied = cx.proposal(0, 1, cx.t0)?;
    cx.propose(&denied).await?;
    cx.deny_expecting("first deny", &denied.id, cx.at(4), DecisionOutcome::Denied)
        .await?;
    let state = ProposalState::Denied {
        by: Some(cx.approver.clone()),
        at: cx.at(4),
    };
    let late = cx.grant(&denied, cx.at(5))?;
    cx.approve_expecting(
        "approve after deny",
        &denied.id,
        &late,
        cx.at(5),
        DecisionOutcome::AlreadyDecided(state.clone()),
    )
    .await?;
    cx.no_grant("after approving a denied proposal", &late.id)
        .await?;
    cx.deny_expecting(
        "second deny",
        &denied.id,
        cx.at(6),
        DecisionOutcome::AlreadyDecided(state.clone()),
    )
    .await?;
    cx.expect_state("after deny, approve, deny", &denied, state)
        .await
}

/// A grant that differs from the proposal in actor, run, URL, action,
/// page or bound element is `NotForProposal`; the proposal stays pending,
/// no grant stored.
pub async fn a_grant_not_for_the_proposal_is_refused(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("a_grant_not_for_the_proposal_is_refused", store).await?;
    let proposal = cx.observed(cx.proposal(0, 0, cx.t0)?)?;
    cx.propose(&proposal).await?;
    let now = cx.at(1);
    let exact = cx.grant(&proposal, now)?;
    let mut wrong = Vec::new();
    let mut other_actor = exact.clone();
    other_actor.actor_id = cx.fx.actors[1].clone();
    wrong.push(("another actor", other_actor));
    let mut other_run = exact.clone();
    other_run.run_id = cx.runs[1].clone();
    wrong.push(("another run", other_run));
    let mut other_url = exact.clone();
    other_url.url = cx.fx.urls[1].as_str().to_owned();
    wrong.push(("another url", other_url));
    let mut other_action = exact.clone();
    other_action.action = cx.fx.actions[1].clone();
    other_action.action_digest = cx.fx.actions[1].digest();
    wrong.push(("another action", other_action));
    let mut no_page = exact.clone();
    no_page.session_id = None;
    no_page.page_revision = None;
    wrong.push(("no page", no_page));
    let mut other_page = exact.clone();
    other_page.page_revision = Some("revision-2".to_owned());
    wrong.push(("another page revision", other_page));
    let mut no_element = exact.clone();
    no_element.element = None;
    wrong.push(("no element", no_element));
    let mut other_element = exact.clone();
    other_element.element = Some(crate::fixtures::largest_element(cx.check)?);
    wrong.push(("another element", other_element));
    for (what, grant) in wrong {
        match cx.approve(what, &proposal.id, &grant, now).await? {
            Err(ApproveError::NotForProposal) => {}
            answer => {
                return Err(cx.fail(format!(
                    "approving with a grant for {what} answered {answer:?}, expected NotForProposal"
                )));
            }
        }
        cx.no_grant(what, &grant.id).await?;
        cx.expect_state(what, &proposal, ProposalState::Pending)
            .await?;
    }
    cx.approve_expecting(
        "the exact grant",
        &proposal.id,
        &exact,
        now,
        DecisionOutcome::Approved,
    )
    .await
}

/// A grant id already present is `GrantExists`: the proposal stays
/// pending and the existing grant untouched.
pub async fn an_existing_grant_id_is_refused(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("an_existing_grant_id_is_refused", store).await?;
    let proposal = cx.proposal(0, 0, cx.t0)?;
    cx.propose(&proposal).await?;
    let existing = Approval::for_action(
        cx.actor.clone(),
        cx.runs[1].clone(),
        &cx.fx.urls[1],
        &cx.fx.actions[1],
        TTL,
        cx.t0,
    )
    .map_err(|e| cx.fail(format!("could not build a grant: {e}")))?;
    store
        .issue(existing.clone())
        .await
        .map_err(|e| cx.fail(format!("issuing a grant failed: {e}")))?;
    let mut clashing = cx.grant(&proposal, cx.at(1))?;
    clashing.id = existing.id.clone();
    match cx
        .approve("clashing grant id", &proposal.id, &clashing, cx.at(1))
        .await?
    {
        Err(ApproveError::GrantExists(id)) if id == existing.id => {}
        answer => {
            return Err(cx.fail(format!(
                "approving with a grant id already present answered {answer:?}, expected GrantExists"
            )));
        }
    }
    cx.expect_state("after the clash", &proposal, ProposalState::Pending)
        .await?;
    let stored = store
        .get(&existing.id)
        .await
        .map_err(|e| cx.fail(format!("get failed: {e}")))?;
    if stored != Some(StoredGrant::issued(existing)) {
        return Err(cx.fail("a clashing approve changed the existing grant"));
    }
    Ok(())
}

/// At and after `expires_at` neither decision is taken (`Expired`), the
/// proposal stays pending (showing as expired) and is no longer listed;
/// one millisecond before, it is decidable.
pub async fn expired_proposal_cannot_be_decided(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("expired_proposal_cannot_be_decided", store).await?;
    let late = cx.proposal(0, 0, cx.t0)?;
    let on_time = cx.proposal(0, 1, cx.t0)?;
    cx.propose(&late).await?;
    cx.propose(&on_time).await?;
    let expiry = cx.at(TTL_MS);
    let grant = cx.grant(&late, expiry)?;
    cx.approve_expecting(
        "approve at expiry",
        &late.id,
        &grant,
        expiry,
        DecisionOutcome::Expired,
    )
    .await?;
    cx.no_grant("after approving at expiry", &grant.id).await?;
    cx.deny_expecting("deny at expiry", &late.id, expiry, DecisionOutcome::Expired)
        .await?;
    cx.expect_state("after deciding at expiry", &late, ProposalState::Pending)
        .await?;
    let shown = cx.get("status", &late.id).await?;
    if shown.map(|s| s.status_at(expiry)) != Some(ProposalStatus::Expired) {
        return Err(cx.fail("an undecided proposal does not show as expired at its expiry"));
    }
    if !cx.pending("list at expiry", 0, expiry).await?.is_empty() {
        return Err(cx.fail("pending_proposals lists proposals at their expiry"));
    }
    let just_before = cx.at(TTL_MS - 1);
    let grant = cx.grant(&on_time, just_before)?;
    cx.approve_expecting(
        "approve 1 ms before expiry",
        &on_time.id,
        &grant,
        just_before,
        DecisionOutcome::Approved,
    )
    .await
}

/// After `stop_run`, no proposal made before can be approved (`Stopped`,
/// no grant), also after `resume_run`; a denial is still recorded;
/// proposing in the stopped run is `Stopped`; after the resume a new
/// proposal can be approved. Other runs are untouched.
pub async fn stopping_a_run_ends_its_proposals(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("stopping_a_run_ends_its_proposals", store).await?;
    let stopped = cx.proposal(0, 0, cx.t0)?;
    let denied = cx.proposal(0, 1, cx.t0)?;
    let elsewhere = cx.proposal(1, 0, cx.t0)?;
    for p in [&stopped, &denied, &elsewhere] {
        cx.propose(p).await?;
    }
    store
        .stop_run(&cx.actor, &cx.runs[0], cx.at(1))
        .await
        .map_err(|e| cx.fail(format!("stop_run failed: {e}")))?;
    if !cx
        .pending("list of a stopped run", 0, cx.at(2))
        .await?
        .is_empty()
    {
        return Err(cx.fail("pending_proposals lists proposals of a stopped run"));
    }
    let grant = cx.grant(&stopped, cx.at(2))?;
    cx.approve_expecting(
        "approve in a stopped run",
        &stopped.id,
        &grant,
        cx.at(2),
        DecisionOutcome::Stopped,
    )
    .await?;
    cx.no_grant("after approving in a stopped run", &grant.id)
        .await?;
    cx.deny_expecting(
        "deny in a stopped run",
        &denied.id,
        cx.at(2),
        DecisionOutcome::Denied,
    )
    .await?;
    match store.propose(cx.proposal(0, 0, cx.at(3))?).await {
        Err(ProposeError::Stopped) => {}
        answer => {
            return Err(cx.fail(format!(
                "propose in a stopped run answered {answer:?}, expected Stopped"
            )));
        }
    }
    store
        .resume_run(&cx.actor, &cx.runs[0])
        .await
        .map_err(|e| cx.fail(format!("resume_run failed: {e}")))?;
    let grant = cx.grant(&stopped, cx.at(4))?;
    cx.approve_expecting(
        "approve after resume",
        &stopped.id,
        &grant,
        cx.at(4),
        DecisionOutcome::Stopped,
    )
    .await?;
    cx.no_grant("after approving a stopped proposal after resume", &grant.id)
        .await?;
    cx.expect_state("the stopped proposal", &stopped, ProposalState::Pending)
        .await?;
    let fresh = cx.proposal(0, 0, cx.at(5))?;
    cx.propose(&fresh).await?;
    let grant = cx.grant(&fresh, cx.at(6))?;
    cx.approve_expecting(
        "approve of a proposal made after resume",
        &fresh.id,
        &grant,
        cx.at(6),
        DecisionOutcome::Approved,
    )
    .await?;
    let grant = cx.grant(&elsewhere, cx.at(6))?;
    cx.approve_expecting(
        "approve in another run",
        &elsewhere.id,
        &grant,
        cx.at(6),
        DecisionOutcome::Approved,
    )
    .await
}

/// `stop_actor` ends the proposals of every run of the actor, also after
/// `resume_actor`; proposing for the actor is `Stopped` until resumed.
pub async fn stopping_an_actor_ends_its_proposals(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("stopping_an_actor_ends_its_proposals", store).await?;
    let first = cx.proposal(0, 0, cx.t0)?;
    let second = cx.proposal(1, 1, cx.t0)?;
    cx.propose(&first).await?;
    cx.propose(&second).await?;
    store
        .stop_actor(&cx.actor, cx.at(1))
        .await
        .map_err(|e| cx.fail(format!("stop_actor failed: {e}")))?;
    match store.propose(cx.proposal(1, 0, cx.at(2))?).await {
        Err(ProposeError::Stopped) => {}
        answer => {
            return Err(cx.fail(format!(
                "propose for a stopped actor answered {answer:?}, expected Stopped"
            )));
        }
    }
    store
        .resume_actor(&cx.actor)
        .await
        .map_err(|e| cx.fail(format!("resume_actor failed: {e}")))?;
    for proposal in [&first, &second] {
        let grant = cx.grant(proposal, cx.at(3))?;
        cx.approve_expecting(
            "approve after the actor's stop",
            &proposal.id,
            &grant,
            cx.at(3),
            DecisionOutcome::Stopped,
        )
        .await?;
        cx.no_grant("after approving a stopped actor's proposal", &grant.id)
            .await?;
    }
    Ok(())
}

/// `pending_proposals` lists exactly the run's pending, unexpired
/// proposals, oldest first (then by id), at most
/// [`MAX_LISTED_PROPOSALS`]; decided, expired and other runs' are not listed.
pub async fn pending_lists_one_run_oldest_first(
    store: &dyn ProposalStore,
) -> Result<(), CheckFailure> {
    let cx = Cx::new("pending_lists_one_run_oldest_first", store).await?;
    let newest = cx.proposal(0, 0, cx.at(300))?;
    let oldest = cx.proposal(0, 1, cx.at(100))?;
    let mut tied = [
        cx.proposal(0, 0, cx.at(200))?,
        cx.proposal(0, 1, cx.at(200))?,
    ];
    tied.sort_by(|a, b| a.id.cmp(&b.id));
    let decided = cx.proposal(0, 0, cx.at(150))?;
    let other_run = cx.proposal(1, 0, cx.at(50))?;
    let short = Proposal::for_action(
        cx.actor.clone(),
        cx.runs[0].clone(),
        &cx.fx.urls[1],
        &cx.fx.actions[0],
        Duration::from_millis(500),
        cx.at(10),
    )
    .map_err(|e| cx.fail(format!("could not build a proposal: {e}")))?;
    for p in [
        &newest, &oldest, &tied[0], &tied[1], &decided, &other_run, &short,
    ] {
        cx.propose(p).await?;
    }
    cx.deny_expecting("deny one", &decided.id, cx.at(400), DecisionOutcome::Denied)
        .await?;
    let listed = cx.pending("list", 0, cx.at(1_000)).await?;
    let expected = vec![
        oldest.id.clone(),
        tied[0].id.clone(),
        tied[1].id.clone(),
        newest.id.clone(),
    ];
    if listed != expected {
        return Err(cx.fail(format!(
            "pending_proposals answered {listed:?}, expected {expected:?} (oldest first, then by id; decided, expired and other runs left out)"
        )));
    }
    let before_expiry = cx
        .pending("list before the short one expires", 0, cx.at(400))
        .await?;
    if before_expiry.first() != Some(&short.id) {
        return Err(cx.fail(format!(
            "pending_proposals before the short proposal expired answered {before_expiry:?}, expected it first"
        )));
    }
    // The bound: one more than the limit is not listed.
    let bulk = cx.runs[1].clone();
    for i in 0..=MAX_LISTED_PROPOSALS {
        let p = Proposal::for_action(
            cx.actor.clone(),
            bulk.clone(),
            &cx.fx.urls[0],
            &cx.fx.actions[0],
            TTL,
            cx.at(1_000 + u64::try_from(i).unwrap_or(u64::MAX)),
        )
        .map_err(|e| cx.fail(format!("could not build a proposal: {e}")))?;
        cx.propose(&p).await?;
    }
    let listed = cx.pending("list of a full run", 1, cx.at(5_000)).await?;
    if listed.len() != MAX_LISTED_PROPOSALS || listed.first() != Some(&other_run.id) {
        return Err(cx.fail(format!(
            "pending_proposals of a run with {} pending answered {} (first {:?}), expected the oldest {MAX_LISTED_PROPOSALS}",
            MAX_LISTED_PROPOSALS + 2,
            listed.len(),
            listed.first()
        )));
    }
    Ok(())
}

/// How many proposals the race decides, and how many contenders each.
const RACED_PROPOSALS: usize = 40;
const CONTENDERS: usize = 24;

/// Whether `contender` denies in `round` (the others approve).
///
/// Rounds alternate in pairs between approvals only and approvals mixed
/// with denials (every fourth contender). Approvals-only rounds matter: a
/// denial that goes first leaves every approval a plain `AlreadyDecided`,
/// and the last contender to reach the start barrier releases it and goes
/// on running on its thread, so on a busy machine it often does go first.
/// A store whose approvals are not atomic with each other could then pass
/// every mixed round. In mixed rounds which contender denies moves every
/// four rounds, so the last one spawned is not always a denial.
fn denies(round: usize, contender: usize) -> bool {
    round % 4 >= 2 && (contender + round / 4) % 4 == 3
}

/// Many concurrent decisions (approvals with distinct grants, and denials)
/// on each of many proposals — half the rounds approvals only, half mixed
/// with denials: exactly one is taken per proposal, every other answers
/// `AlreadyDecided` with it, and at most one grant exists.
pub async fn concurrent_decisions_issue_one_grant(
    store: Arc<dyn ProposalStore>,
) -> Result<(), CheckFailure> {
    let check = "concurrent_decisions_issue_one_grant";
    if tokio::runtime::Handle::current().runtime_flavor()
        != tokio::runtime::RuntimeFlavor::MultiThread
    {
        return Err(CheckFailure::new(
            check,
            "race checks need a multi-thread tokio runtime",
        ));
    }
    let cx = Cx::new(check, &*store).await?;
    let now = cx.at(1);
    for round in 0..RACED_PROPOSALS {
        let proposal = cx.proposal(round % 2, round % 2, cx.t0)?;
        cx.propose(&proposal).await?;
        let start = Arc::new(tokio::sync::Barrier::new(CONTENDERS));
        let mut tasks = Vec::new();
        let mut grants = Vec::new();
        for contender in 0..CONTENDERS {
            let grant = cx.grant(&proposal, now)?;
            grants.push(grant.id.clone());
            let (store, start, id) = (Arc::clone(&store), Arc::clone(&start), proposal.id.clone());
            let approver = cx.approver.clone();
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                if denies(round, contender) {
                    store
                        .deny_proposal(&id, Some(&approver), now)
                        .await
                        .map_err(|e| e.to_string())
                } else {
                    store
                        .approve_proposal(&id, grant, now)
                        .await
                        .map_err(|e| e.to_string())
                }
            }));
        }
        let mut taken = Vec::new();
        let mut already = Vec::new();
        for (contender, task) in tasks.into_iter().enumerate() {
            let answer = task
                .await
                .map_err(|e| cx.fail(format!("a contender panicked: {e}")))?
                .map_err(|e| cx.fail(format!("a contender failed: {e}")))?;
            match answer {
                DecisionOutcome::Approved | DecisionOutcome::Denied => {
                    taken.push((contender, answer))
                }
                DecisionOutcome::AlreadyDecided(state) => already.push((contender, state)),
                other => {
                    return Err(cx.fail(format!(
                        "round {round}: a contender answered {other:?}, expected a decision or AlreadyDecided"
                    )));
                }
            }
        }
        if taken.len() != 1 {
            return Err(cx.fail(format!(
                "round {round}: {} of {CONTENDERS} concurrent decisions were taken, expected exactly one",
                taken.len()
            )));
        }
        let mut existing = 0;
        for id in &grants {
            if store
                .get(id)
                .await
                .map_err(|e| cx.fail(format!("get failed: {e}")))?
                .is_some()
            {
                existing += 1;
            }
        }
        let expected = usize::from(taken[0].1 == DecisionOutcome::Approved);
        if existing != expected {
            return Err(cx.fail(format!(
                "round {round}: {existing} grants exist after the race, expected {expected}"
            )));
        }
        let state = cx
            .get("after the race", &proposal.id)
            .await?
            .map(|s| s.state);
        let consistent = match (&taken[0], &state) {
            (
                (winner, DecisionOutcome::Approved),
                Some(ProposalState::Approved { approval_id, .. }),
            ) => grants.get(*winner) == Some(approval_id),
            ((_, DecisionOutcome::Denied), Some(ProposalState::Denied { .. })) => true,
            _ => false,
        };
        if !consistent {
            return Err(cx.fail(format!(
                "round {round}: the proposal reads {state:?}, which is not the decision taken ({:?})",
                taken[0].1
            )));
        }
        if let Some((contender, seen)) = already
            .iter()
            .find(|(_, seen)| Some(seen) != state.as_ref())
        {
            return Err(cx.fail(format!(
                "round {round}: contender {contender} answered AlreadyDecided({seen:?}), but the decision taken is {state:?}"
            )));
        }
    }
    Ok(())
}
