//! A store whose every call is timed into
//! [`STORE_CALL`](crate::measure::STORE_CALL), by store and operation:
//! wrap the host's store once, and every crate that calls it is measured.

use std::future::Future;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::abandon::AbandonOutcome;
use crate::control::{ResumeOutcome, StopOutcome};
use crate::grant::{Approval, Binding, ConsumeOutcome, RevokeOutcome, StoredGrant};
use crate::ids::{ActorId, ApprovalId, ApproverId, AttemptId, ProposalId, RunId, StandingId};
use crate::measure;
use crate::notify::{ClaimedNotification, NotificationEvent, NotificationOutbox};
use crate::proposal::{ApproveError, DecisionOutcome, Proposal, ProposeError, StoredProposal};
use crate::standing::{
    StandingGrant, StandingKey, StandingRevokeOutcome, StoredStanding, UseOutcome,
};
use crate::store::{ApprovalStore, IssueError, ProposalStore};
use crate::store_error::StoreError;
use crate::time::Timestamp;

/// `inner`, every call of it timed as `store`'s (`memory`, `redis`,
/// `postgres`, or the host's own name): a decorator in the manner of a
/// tower layer, answering exactly what `inner` answers.
///
/// ```
/// use countersign_approval_core::{ApprovalId, ApprovalStore, TimedStore};
/// # use countersign_approval_core::*;
/// # struct Empty;
/// # #[async_trait::async_trait]
/// # impl ApprovalStore for Empty {
/// #     async fn issue(&self, _: Approval) -> Result<(), IssueError> { Ok(()) }
/// #     async fn revoke(&self, _: &ApprovalId) -> Result<RevokeOutcome, StoreError> { Ok(RevokeOutcome::Unknown) }
/// #     async fn get(&self, _: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> { Ok(None) }
/// #     async fn consume_once(&self, _: &ApprovalId, _: &Binding, _: Timestamp, _: &AttemptId) -> Result<ConsumeOutcome, StoreError> { Ok(ConsumeOutcome::Unknown) }
/// #     async fn abandon(&self, _: &ApprovalId, _: &AttemptId, _: Timestamp) -> Result<AbandonOutcome, StoreError> { Ok(AbandonOutcome::Unknown) }
/// #     async fn stop_run(&self, _: &ActorId, _: &RunId, _: Timestamp) -> Result<StopOutcome, StoreError> { unimplemented!() }
/// #     async fn stop_actor(&self, _: &ActorId, _: Timestamp) -> Result<StopOutcome, StoreError> { unimplemented!() }
/// #     async fn resume_run(&self, _: &ActorId, _: &RunId) -> Result<ResumeOutcome, StoreError> { Ok(ResumeOutcome::NotStopped) }
/// #     async fn resume_actor(&self, _: &ActorId) -> Result<ResumeOutcome, StoreError> { Ok(ResumeOutcome::NotStopped) }
/// # }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = TimedStore::new(Empty, "memory");
/// let id = ApprovalId::parse("apr_00000000000000000000000000000000").unwrap();
/// // Timed into `countersign_store_call_seconds{store="memory",operation="get"}`
/// // when a recorder is installed; the answer is the inner store's.
/// assert_eq!(store.get(&id).await, Ok(None));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct TimedStore<S> {
    inner: S,
    store: &'static str,
}

impl<S> TimedStore<S> {
    /// `inner`, timed as `store`'s calls.
    pub fn new(inner: S, store: &'static str) -> Self {
        TimedStore { inner, store }
    }

    /// The store it wraps.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    async fn timed<T>(&self, operation: &'static str, call: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let answer = call.await;
        measure::store_call(self.store, operation, started.elapsed());
        answer
    }
}

#[async_trait]
impl<S: ApprovalStore> ApprovalStore for TimedStore<S> {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        self.timed("issue", self.inner.issue(approval)).await
    }
    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        self.timed("revoke", self.inner.revoke(id)).await
    }
    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        self.timed("get", self.inner.get(id)).await
    }
    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        self.timed(
            "consume_once",
            self.inner.consume_once(id, binding, now, attempt),
        )
        .await
    }
    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        self.timed("abandon", self.inner.abandon(id, attempt, now))
            .await
    }
    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        self.timed("stop_run", self.inner.stop_run(actor, run, now))
            .await
    }
    async fn stop_actor(&self, actor: &ActorId, now: Timestamp) -> Result<StopOutcome, StoreError> {
        self.timed("stop_actor", self.inner.stop_actor(actor, now))
            .await
    }
    async fn resume_run(&self, actor: &ActorId, run: &RunId) -> Result<ResumeOutcome, StoreError> {
        self.timed("resume_run", self.inner.resume_run(actor, run))
            .await
    }
    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError> {
        self.timed("resume_actor", self.inner.resume_actor(actor))
            .await
    }
}

#[async_trait]
impl<S: ProposalStore> ProposalStore for TimedStore<S> {
    async fn propose(&self, proposal: Proposal) -> Result<(), ProposeError> {
        self.timed("propose", self.inner.propose(proposal)).await
    }
    async fn get_proposal(&self, id: &ProposalId) -> Result<Option<StoredProposal>, StoreError> {
        self.timed("get_proposal", self.inner.get_proposal(id))
            .await
    }
    async fn pending_proposals(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredProposal>, StoreError> {
        self.timed(
            "pending_proposals",
            self.inner.pending_proposals(actor, run, now),
        )
        .await
    }
    async fn approve_proposal(
        &self,
        id: &ProposalId,
        approval: Approval,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError> {
        self.timed(
            "approve_proposal",
            self.inner.approve_proposal(id, approval, now),
        )
        .await
    }
    async fn deny_proposal(
        &self,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError> {
        self.timed("deny_proposal", self.inner.deny_proposal(id, by, now))
            .await
    }
    async fn issue_standing(&self, grant: StandingGrant) -> Result<(), IssueError> {
        self.timed("issue_standing", self.inner.issue_standing(grant))
            .await
    }
    async fn get_standing(&self, id: &StandingId) -> Result<Option<StoredStanding>, StoreError> {
        self.timed("get_standing", self.inner.get_standing(id))
            .await
    }
    async fn standing_grants(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError> {
        self.timed(
            "standing_grants",
            self.inner.standing_grants(actor, run, now),
        )
        .await
    }
    async fn use_standing(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError> {
        self.timed(
            "use_standing",
            self.inner.use_standing(id, key, now, attempt),
        )
        .await
    }
    async fn give_back_use(
        &self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        self.timed("give_back_use", self.inner.give_back_use(id, attempt, now))
            .await
    }
    async fn revoke_standing(&self, id: &StandingId) -> Result<StandingRevokeOutcome, StoreError> {
        self.timed("revoke_standing", self.inner.revoke_standing(id))
            .await
    }
}

#[async_trait]
impl<S: NotificationOutbox> NotificationOutbox for TimedStore<S> {
    async fn schedule(
        &self,
        event: NotificationEvent,
        due_at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.timed("schedule", self.inner.schedule(event, due_at))
            .await
    }
    async fn claim_due(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedNotification>, StoreError> {
        self.timed("claim_due", self.inner.claim_due(now, lease, limit))
            .await
    }
    async fn finish(
        &self,
        claim: &ClaimedNotification,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.timed("finish", self.inner.finish(claim, now)).await
    }
    async fn retry_at(
        &self,
        claim: &ClaimedNotification,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.timed("retry_at", self.inner.retry_at(claim, at)).await
    }
}
