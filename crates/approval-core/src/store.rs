//! The approval-store and proposal-store traits and their errors
//! (the infrastructure failure itself is `store_error.rs`).

use async_trait::async_trait;

use crate::store_error::StoreError;
use crate::{
    abandon::AbandonOutcome, control::ResumeOutcome, control::StopOutcome, grant::Approval,
    grant::Binding, grant::ConsumeOutcome, grant::RevokeOutcome, grant::StoredGrant, ids::ActorId,
    ids::ApprovalId, ids::ApproverId, ids::AttemptId, ids::ProposalId, ids::RunId, ids::StandingId,
    proposal::ApproveError, proposal::DecisionOutcome, proposal::Proposal, proposal::ProposeError,
    proposal::StoredProposal, standing::StandingGrant, standing::StandingKey,
    standing::StandingRevokeOutcome, standing::StoredStanding, standing::UseOutcome,
    time::Timestamp,
};

/// [`ApprovalStore::issue`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IssueError {
    /// A grant with this id already exists; it was left untouched.
    #[error("approval `{0}` already exists")]
    AlreadyExists(ApprovalId),
    /// A standing grant with this id already exists; it was left untouched.
    #[error("standing grant `{0}` already exists")]
    StandingExists(StandingId),
    /// The grant's run or actor is stopped; nothing was stored. The host
    /// resumes it with [`ApprovalStore::resume_run`] or
    /// [`ApprovalStore::resume_actor`].
    #[error("the grant's run or actor is stopped: resume it before issuing")]
    Stopped,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where grants live, and the one place a grant is consumed.
///
/// # Contract
///
/// Every implementation, whatever it stores grants in, must behave as
/// follows; `countersign-store-conformance` checks each rule.
///
/// 1. **`issue`** stores a new grant in state `Active` with no failed
///    attempts. An id already present is [`IssueError::AlreadyExists`]; the
///    existing grant is never overwritten, whatever its state. A grant
///    whose run or actor is stopped (rule 9) is [`IssueError::Stopped`] and
///    nothing is stored; an id already present answers `AlreadyExists`
///    even then. Every field of the [`Approval`] is kept and read
///    back unchanged (approver, attempt limit and page binding included).
/// 2. **`revoke`** turns an `Active` grant `Revoked` and answers
///    [`RevokeOutcome::Revoked`]; a revoked, locked or stopped grant
///    answers `AlreadyRevoked` (and stays as it is), a consumed one
///    `AlreadyConsumed` (and stays consumed), a missing id `Unknown`.
///    Revoking an expired, unused grant revokes it.
/// 3. **`get`** returns the grant, its state and its count of failed
///    attempts, or `None`. A grant that was active when its run or actor
///    was stopped reads [`GrantState::Stopped`](crate::GrantState::Stopped).
///    Reads never change state: any number of reads leave a grant
///    consumable.
/// 4. **`consume_once`** is one atomic check-and-mark, evaluated in this
///    order:
///    1. no grant with this id ⇒ [`ConsumeOutcome::Unknown`];
///    2. `attempt` was abandoned (rule 8) ⇒ `Stale(Abandoned)`;
///    3. the grant's run or actor was stopped since it was issued (rule 9)
///       ⇒ `Stale(Stopped)` — also for a retry of a consume applied before
///       the stop, whose caller never saw `Consumed` and so never acted;
///    4. revoked ⇒ `Stale(Revoked)`; locked ⇒ `Stale(Locked)`;
///    5. consumed ⇒ `Consumed { replay: true }` when it was consumed by this
///       same `attempt` and `binding` equals the grant's binding, otherwise
///       `Stale(Consumed)`;
///    6. `now >= expires_at` ⇒ `Stale(Expired)`;
///    7. any field of `binding` (actor, run, URL, action digest) differs
///       from the grant's ⇒ the grant's count of failed attempts grows by
///       one; below its [`attempt_limit`](crate::Approval::attempt_limit)
///       the answer is `Stale(Mismatch)` and the grant **stays usable** (a
///       single mismatch never burns it); reaching the limit turns it
///       `Locked` for good and answers `Stale(Locked)`. Since a matching
///       consume uses the grant up, the count is never reset;
///    8. otherwise the grant becomes `Consumed { at: now, by: attempt }` ⇒
///       `Consumed { replay: false }`.
///
///    Atomic means: among any number of concurrent calls on one grant, from
///    any number of threads, processes or hosts, at most one sees
///    `Consumed { replay: false }`; and a `revoke` racing a consume is
///    ordered entirely before or after it (exactly one of them wins).
/// 5. Time comes from the caller's `now`; a store does not consult its own
///    clock for expiry.
/// 6. Infrastructure failures are [`StoreError`], never an outcome. A store
///    never reports `Consumed` unless it has recorded the consume, and
///    never reports any outcome for a record it cannot read as one of its
///    own (that is [`StoreError::Corrupt`]).
/// 7. A retry of `consume_once` with the same attempt id after an error
///    whose effect is unknown is safe: if the first call was applied, the
///    retry answers `Consumed { replay: true }` (unless the attempt was
///    abandoned in between: then `Stale(Abandoned)`).
/// 8. **`abandon`** gives back a consume that was never acted on: one
///    whose answer was lost (a caller that never saw `Consumed` never acted
///    on it), or one whose action the backend refused before dispatching
///    anything. It is one atomic step,
///    ordered entirely before or after any consume or revoke of the grant,
///    and follows [`decide_abandon`](crate::decide_abandon):
///    1. no grant with this id ⇒ [`AbandonOutcome::Unknown`], nothing is
///       created;
///    2. revoked ⇒ `Revoked`, nothing changes;
///    3. the grant remembers `attempt` as abandoned, for as long as it keeps
///       the grant, so that **no later `consume_once` by that attempt ever
///       succeeds** — also one sent before the abandon that reaches the
///       store after it (it answers `Stale(Abandoned)`);
///    4. consumed by `attempt` ⇒ the grant is `Active` again (the consume
///       is undone); consumed by another attempt ⇒ `ConsumedByOther`, the
///       grant stays consumed;
///    5. the answer is `Expired` when `now >= expires_at`, otherwise
///       `Usable { restored }`, `restored` telling whether this call undid a
///       consume.
///
///    A grant remembers at most
///    [`MAX_ABANDONED_ATTEMPTS`](crate::MAX_ABANDONED_ATTEMPTS) attempts:
///    abandoning one more revokes it (answer `Revoked`), or leaves it
///    consumed when another attempt consumed it (`ConsumedByOther`).
///    Abandon is idempotent: repeating it changes nothing more, and answers
///    the grant's state then (`Usable { restored: false }` after a first
///    `Usable { restored: true }`), so a caller may retry it after an error.
///    A grant whose run or actor was stopped answers `Stopped` and nothing
///    changes; a locked grant answers `Revoked`.
/// 9. **`stop_run`** stops a run: every grant of that actor and run issued
///    before the call returns can never be consumed again (it reads
///    `Stopped` if it was active), and `issue` for that run answers
///    [`IssueError::Stopped`] until **`resume_run`**; resuming lets new
///    grants be issued, never revives a stopped one. **`stop_actor`** does
///    the same for every run of the actor, including runs that have no
///    grant yet, until **`resume_actor`**. A stop is atomic with respect to
///    consumes: a consume ordered before it may have succeeded, every
///    consume ordered after it (every one that starts after the stop
///    returned) answers `Stale(Stopped)`, and none is both. It answers how
///    many grants were usable until then (active and unexpired at `now`)
///    and are now stopped; stopping again answers 0 and `was_stopped`.
///
/// The trait is object safe: hosts hold an `Arc<dyn ApprovalStore>`.
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Stores a new grant; never overwrites.
    async fn issue(&self, approval: Approval) -> Result<(), IssueError>;

    /// Revokes a grant that has not been consumed.
    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError>;

    /// Reads a grant and its state without changing it.
    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError>;

    /// Atomically checks the grant against `binding` at `now` and marks it
    /// consumed by `attempt`; see the contract for the order of checks.
    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError>;

    /// Gives back the consume of `attempt` whose answer was lost: afterwards
    /// that attempt can never consume the grant, and if it had, the grant is
    /// active again; see rule 8 of the contract.
    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError>;

    /// Stops `run` of `actor`: none of its grants can be consumed any more,
    /// and none can be issued until [`resume_run`](ApprovalStore::resume_run);
    /// see rule 9 of the contract.
    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError>;

    /// Stops every run of `actor`, present and future, until
    /// [`resume_actor`](ApprovalStore::resume_actor); see rule 9.
    async fn stop_actor(&self, actor: &ActorId, now: Timestamp) -> Result<StopOutcome, StoreError>;

    /// Lets grants be issued for a stopped run again; stopped grants stay
    /// stopped.
    async fn resume_run(&self, actor: &ActorId, run: &RunId) -> Result<ResumeOutcome, StoreError>;

    /// Lets grants be issued for a stopped actor's runs again; stopped
    /// grants stay stopped, and runs stopped one by one stay stopped.
    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError>;
}

#[async_trait]
impl<S: ApprovalStore + ?Sized> ApprovalStore for std::sync::Arc<S> {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        (**self).issue(approval).await
    }
    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        (**self).revoke(id).await
    }
    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        (**self).get(id).await
    }
    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        (**self).consume_once(id, binding, now, attempt).await
    }
    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        (**self).abandon(id, attempt, now).await
    }
    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        (**self).stop_run(actor, run, now).await
    }
    async fn stop_actor(&self, actor: &ActorId, now: Timestamp) -> Result<StopOutcome, StoreError> {
        (**self).stop_actor(actor, now).await
    }
    async fn resume_run(&self, actor: &ActorId, run: &RunId) -> Result<ResumeOutcome, StoreError> {
        (**self).resume_run(actor, run).await
    }
    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError> {
        (**self).resume_actor(actor).await
    }
}

/// Where proposals live: a store that keeps grants keeps the proposals they
/// are approved from, so that approving one and issuing its grant is one
/// atomic step.
///
/// # Contract
///
/// Every implementation must behave as follows (and as an
/// [`ApprovalStore`]); `countersign-store-conformance` checks each rule.
///
/// 1. **`propose`** stores a new proposal, pending, every field kept and
///    read back unchanged (the snapshot and its screenshot included). An id
///    already present is [`ProposeError::AlreadyExists`] and the existing
///    proposal is untouched. A proposal whose run or actor is stopped
///    ([`ApprovalStore::stop_run`], [`ApprovalStore::stop_actor`]) is
///    [`ProposeError::Stopped`] and nothing is stored.
/// 2. **`get_proposal`** returns the proposal and its state, or `None`;
///    reads never change anything.
/// 3. **`pending_proposals`** lists the proposals of one actor and run that
///    are pending and unexpired at `now`, and whose run and actor were not
///    stopped since they were made, oldest first (by `proposed_at`, then
///    id), at most [`MAX_LISTED_PROPOSALS`](crate::MAX_LISTED_PROPOSALS).
///    A listed proposal may come without its screenshot
///    (`snapshot.screenshot_png` `None`, everything else as stored), so a
///    list stays small; `get_proposal` always returns it.
/// 4. **`approve_proposal`** is one atomic step that follows
///    [`decide_proposal`](crate::decide_proposal):
///    1. no proposal with this id ⇒ [`DecisionOutcome::Unknown`];
///    2. a grant that does not approve exactly the proposal
///       ([`Proposal::is_approved_by`]) ⇒ [`ApproveError::NotForProposal`],
///       nothing changes;
///    3. decided before ⇒ `AlreadyDecided(state)`, nothing changes (no
///       second grant, whichever decision is asked for);
///    4. `now >= expires_at` ⇒ `Expired`, nothing changes;
///    5. its run or actor was stopped since it was proposed (also when
///       resumed since) ⇒ `Stopped`, nothing changes and no grant exists;
///    6. otherwise the grant is issued (as by [`ApprovalStore::issue`]; a
///       grant id already present is [`ApproveError::GrantExists`] and
///       nothing changes) **and** the proposal becomes `Approved` with that
///       grant's id, its approver and `now` ⇒ `Approved`. Both or neither:
///       among any number of concurrent decisions on one proposal exactly
///       one is taken, so at most one grant is ever issued for it.
/// 5. **`deny_proposal`** follows the same order (unknown, decided,
///    expired), then the proposal becomes `Denied` by `by` at `now` ⇒
///    `Denied` — also in a stopped run.
/// 6. Time comes from the caller's `now`, as for grants; infrastructure
///    failures are [`StoreError`], never an outcome; a record the store
///    cannot read as one of its own is [`StoreError::Corrupt`].
/// 7. A proposal is kept at least until it expires, and a decided one at
///    least as long as the store keeps the grant issued for it.
///
/// **Standing grants** (counted grants: "this, up to N times, until T";
/// see [`StandingGrant`]) live beside the proposals they are approved from:
///
/// 8. **`issue_standing`** stores a new standing grant, active, no use
///    taken, every field read back unchanged by **`get_standing`**; an id
///    already present is [`IssueError::StandingExists`] (the existing one
///    untouched), a stopped run or actor [`IssueError::Stopped`] (nothing
///    stored), as for grants.
/// 9. **`get_standing`** returns it with its state, the attempts that took
///    a use and its failed attempts, or `None`; reads change nothing. One
///    whose run or actor was stopped since it was issued reads
///    [`StandingState::Stopped`](crate::StandingState::Stopped).
/// 10. **`standing_grants`** lists the standing grants of one actor and run
///     usable at `now` (active, not stopped, unexpired, uses left), oldest
///     first (by `issued_at`, then id), at most
///     [`MAX_LISTED_PROPOSALS`](crate::MAX_LISTED_PROPOSALS).
/// 11. **`use_standing`** is one atomic check-and-count that follows
///     [`decide_use`](crate::decide_use): among any number of concurrent
///     uses of one standing grant with N uses, at most N distinct attempts
///     ever see `Used { replay: false }`, each use is recorded before it is
///     answered, and a retry by an attempt that holds a use answers
///     `Used { replay: true }` without taking another. A use ordered after
///     a `stop_run`/`stop_actor` or a `revoke_standing` answers `Stale`.
/// 12. **`give_back_use`** gives back the use of an attempt that never
///     acted, atomically, following [`decide_give_back`](crate::decide_give_back):
///     an attempt that holds a use has it freed and never takes a use
///     again; an attempt that holds none changes nothing (a use of it that
///     arrives later may take a use no act performs), so only give-backs
///     of uses that were taken count towards
///     [`MAX_ABANDONED_ATTEMPTS`](crate::MAX_ABANDONED_ATTEMPTS). Unknown
///     ids answer [`AbandonOutcome::Unknown`]. Idempotent.
/// 13. **`revoke_standing`** ends an active standing grant for good
///     ([`StandingRevokeOutcome::Revoked`], also when spent or expired);
///     revoked, locked or stopped ⇒ `AlreadyEnded`; missing ⇒ `Unknown`.
///     Grants it approved earlier stay as they are: the act that presents
///     one also needs a use, which a revoked standing grant never gives.
/// 14. A standing grant is kept at least until it expires.
#[async_trait]
pub trait ProposalStore: ApprovalStore {
    /// Stores a new pending proposal; never overwrites.
    async fn propose(&self, proposal: Proposal) -> Result<(), ProposeError>;

    /// Reads a proposal and its state without changing them.
    async fn get_proposal(&self, id: &ProposalId) -> Result<Option<StoredProposal>, StoreError>;

    /// The decidable proposals of one run, oldest first; see rule 3.
    async fn pending_proposals(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredProposal>, StoreError>;

    /// Approves a pending proposal and issues `approval`, its grant, in one
    /// atomic step; see rule 4.
    async fn approve_proposal(
        &self,
        id: &ProposalId,
        approval: Approval,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError>;

    /// Denies a pending proposal; see rule 5.
    async fn deny_proposal(
        &self,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError>;

    /// Stores a new standing grant; never overwrites. See rule 8.
    async fn issue_standing(&self, grant: StandingGrant) -> Result<(), IssueError>;

    /// Reads a standing grant without changing it; see rule 9.
    async fn get_standing(&self, id: &StandingId) -> Result<Option<StoredStanding>, StoreError>;

    /// The usable standing grants of one run, oldest first; see rule 10.
    async fn standing_grants(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError>;

    /// Atomically takes one use of a standing grant for `attempt`; see
    /// rule 11.
    async fn use_standing(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError>;

    /// Gives back the use `attempt` took and never acted on; see rule 12.
    async fn give_back_use(
        &self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError>;

    /// Ends a standing grant; see rule 13.
    async fn revoke_standing(&self, id: &StandingId) -> Result<StandingRevokeOutcome, StoreError>;
}

#[async_trait]
impl<S: ProposalStore + ?Sized> ProposalStore for std::sync::Arc<S> {
    async fn propose(&self, proposal: Proposal) -> Result<(), ProposeError> {
        (**self).propose(proposal).await
    }
    async fn get_proposal(&self, id: &ProposalId) -> Result<Option<StoredProposal>, StoreError> {
        (**self).get_proposal(id).await
    }
    async fn pending_proposals(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredProposal>, StoreError> {
        (**self).pending_proposals(actor, run, now).await
    }
    async fn approve_proposal(
        &self,
        id: &ProposalId,
        approval: Approval,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError> {
        (**self).approve_proposal(id, approval, now).await
    }
    async fn deny_proposal(
        &self,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError> {
        (**self).deny_proposal(id, by, now).await
    }
    async fn issue_standing(&self, grant: StandingGrant) -> Result<(), IssueError> {
        (**self).issue_standing(grant).await
    }
    async fn get_standing(&self, id: &StandingId) -> Result<Option<StoredStanding>, StoreError> {
        (**self).get_standing(id).await
    }
    async fn standing_grants(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError> {
        (**self).standing_grants(actor, run, now).await
    }
    async fn use_standing(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError> {
        (**self).use_standing(id, key, now, attempt).await
    }
    async fn give_back_use(
        &self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        (**self).give_back_use(id, attempt, now).await
    }
    async fn revoke_standing(&self, id: &StandingId) -> Result<StandingRevokeOutcome, StoreError> {
        (**self).revoke_standing(id).await
    }
}
