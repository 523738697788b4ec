//! Process-local stores for countersign.
//!
//! [`InMemoryApprovalStore`] keeps grants in a mutex-guarded map: every
//! operation is one short critical section with no `await` inside, so it is
//! atomic under any mix of threads and tasks. It is process-local: a host
//! with several worker processes needs a durable store.
//!
//! ```
//! use std::time::Duration;
//! use countersign_approval_core::{
//!     ActorId, Approval, ApprovalStore, AttemptId, ConsumeOutcome, RunId, StaleReason, Timestamp,
//! };
//! use countersign_approval_core::policy::{Policy, StaticResolver};
//! use countersign_store_memory::InMemoryApprovalStore;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let policy = Policy::builder()
//!     .allow_host("docs.example.com")
//!     .resolver(StaticResolver::answering_all(["93.184.216.34".parse().unwrap()]))
//!     .build()?;
//! let url = policy.authorize_destination("https://docs.example.com/").await?;
//! let action = policy.authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))?;
//! let (actor, run) = (ActorId::new("demo-actor")?, RunId::new("demo-run")?);
//! let now = Timestamp::from_millis(1_000);
//!
//! let store = InMemoryApprovalStore::new();
//! let approval = Approval::for_action(actor, run, &url, &action, Duration::from_secs(60), now)?;
//! let (id, binding) = (approval.id.clone(), approval.binding());
//! store.issue(approval).await?;
//!
//! let attempt = AttemptId::generate()?;
//! assert_eq!(store.consume_once(&id, &binding, now, &attempt).await?, ConsumeOutcome::Consumed { replay: false });
//! let other = AttemptId::generate()?;
//! assert_eq!(store.consume_once(&id, &binding, now, &other).await?, ConsumeOutcome::Stale(StaleReason::Consumed));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

mod expiry;
mod fences;
mod oplog;
mod outbox;
mod standing;

pub use oplog::InMemoryOperationStore;

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, ApproveError, ApproverId,
    AttemptId, Binding, ClaimedNotification, ConsumeOutcome, Decision, DecisionOutcome, GrantState,
    IssueError, MAX_LISTED_PROPOSALS, NotificationEvent, NotificationOutbox, PageSnapshot,
    Proposal, ProposalId, ProposalState, ProposalStore, ProposeError, ResumeOutcome, RevokeOutcome,
    RunId, StandingGrant, StandingId, StandingKey, StandingRevokeOutcome, StopOutcome, StoreError,
    StoredGrant, StoredProposal, StoredStanding, Timestamp, UseOutcome, decide_abandon,
    decide_consume, decide_proposal, decide_revoke,
};

/// The default time a record is kept after it can no longer be used: long
/// enough for a retry of a lost consume reply or an abandon (seconds) and
/// for a model coming back to be told "stale" rather than "unknown"
/// (minutes). Audit has its own log ([`InMemoryOperationStore`]).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(15 * 60);

/// Most grants one step of [`InMemoryApprovalStore::purge`] drops while it
/// holds the store's lock; between steps consumes go on.
pub const PURGE_BATCH: usize = 1_024;

/// Locks `mutex`, failing closed when another thread panicked while holding it:
/// the map may be half-updated, so no answer from it can be trusted.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> Result<MutexGuard<'_, T>, StoreError> {
    mutex
        .lock()
        .map_err(|_| StoreError::unavailable("in-memory store is poisoned by a panic"))
}

/// One grant, the attempts given back on it, and the generations of its
/// run and actor when it was issued.
#[derive(Debug)]
struct Entry {
    grant: StoredGrant,
    abandoned: Vec<AttemptId>,
    run_generation: u64,
    actor_generation: u64,
}

/// One proposal and the generations of its run and actor when it was made.
#[derive(Debug)]
struct ProposalEntry {
    stored: StoredProposal,
    run_generation: u64,
    actor_generation: u64,
    /// The last instant it matters: its expiry, or its grant's when that is
    /// later (rule 6 of the proposal contract).
    kept_until: Timestamp,
}

#[derive(Debug, Default)]
struct Grants {
    entries: HashMap<ApprovalId, Entry>,
    /// Every held grant by expiry: a purge takes the oldest without walking
    /// the store. A grant is consumed only before it expires, so its
    /// expiry is also the last instant it mattered.
    by_expiry: BTreeSet<(Timestamp, ApprovalId)>,
    /// The stop fences of runs and actors.
    fences: fences::Fences,
    proposals: HashMap<ProposalId, ProposalEntry>,
    /// Every held proposal by the last instant it matters, for purges.
    proposals_by_expiry: BTreeSet<(Timestamp, ProposalId)>,
    /// Standing grants, and by expiry for purges.
    standing: standing::StandingGrants,
    /// Notification events, when the store records them.
    outbox: Option<outbox::Outbox>,
}

impl Grants {
    /// Records `event` in the outbox, when the store keeps one.
    fn notify(&mut self, event: impl FnOnce() -> NotificationEvent) {
        if let Some(outbox) = &mut self.outbox {
            outbox.record(event());
        }
    }

    fn outbox(&mut self) -> Result<&mut outbox::Outbox, StoreError> {
        self.outbox.as_mut().ok_or_else(outbox::no_outbox)
    }
}

impl Grants {
    /// Whether the grant's run or actor was stopped since it was issued.
    fn is_stopped(&self, entry: &Entry) -> bool {
        let approval = &entry.grant.approval;
        self.fences.stopped_since(
            &approval.actor_id,
            &approval.run_id,
            entry.run_generation,
            entry.actor_generation,
        )
    }

    fn is_proposal_stopped(&self, entry: &ProposalEntry) -> bool {
        let proposal = &entry.stored.proposal;
        self.fences.stopped_since(
            &proposal.actor_id,
            &proposal.run_id,
            entry.run_generation,
            entry.actor_generation,
        )
    }

    /// Issues `approval` under the caller's hold of the lock (rule 1).
    fn issue_locked(&mut self, approval: Approval) -> Result<(), IssueError> {
        if self.entries.contains_key(&approval.id) {
            return Err(IssueError::AlreadyExists(approval.id));
        }
        let run = self.fences.run(&approval.actor_id, &approval.run_id);
        let actor = self.fences.actor(&approval.actor_id);
        if run.stopped || actor.stopped {
            return Err(IssueError::Stopped);
        }
        self.by_expiry
            .insert((approval.expires_at, approval.id.clone()));
        self.entries.insert(
            approval.id.clone(),
            Entry {
                grant: StoredGrant::issued(approval),
                abandoned: Vec::new(),
                run_generation: run.generation,
                actor_generation: actor.generation,
            },
        );
        Ok(())
    }

    /// The grant as `get` shows it: an active grant that was stopped reads
    /// `Stopped`.
    fn shown(&self, entry: &Entry) -> StoredGrant {
        let mut grant = entry.grant.clone();
        grant.state = self.shown_state(entry);
        grant
    }

    /// The state `get` shows, without copying the grant.
    fn shown_state(&self, entry: &Entry) -> GrantState {
        match &entry.grant.state {
            GrantState::Active if self.is_stopped(entry) => GrantState::Stopped,
            state => state.clone(),
        }
    }

    /// Grants usable at `now` (active, unexpired, not stopped) for which
    /// `selects` holds.
    fn usable(&self, now: Timestamp, selects: impl Fn(&Approval) -> bool) -> u64 {
        let count = self
            .entries
            .values()
            .filter(|entry| {
                entry.grant.state == GrantState::Active
                    && !entry.grant.approval.is_expired_at(now)
                    && selects(&entry.grant.approval)
                    && !self.is_stopped(entry)
            })
            .count();
        u64::try_from(count).unwrap_or(u64::MAX)
    }
}

/// Grants in process memory. Cheap to share behind an `Arc`.
///
/// A stop counts the grants it stops by walking every grant held: stops
/// are rare, and this store holds one process's grants.
#[derive(Debug, Default)]
pub struct InMemoryApprovalStore {
    grants: Mutex<Grants>,
}

impl InMemoryApprovalStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// This store, recording notification events in an outbox that a
    /// delivery worker drains ([`NotificationOutbox`]). Off by default: an
    /// outbox nobody drains only grows.
    pub fn with_notification_outbox(self) -> Self {
        if let Ok(mut grants) = self.grants.lock() {
            grants.outbox.get_or_insert_with(outbox::Outbox::default);
        }
        self
    }

    /// How many grants are held, in any state.
    pub fn len(&self) -> Result<usize, StoreError> {
        Ok(lock(&self.grants)?.entries.len())
    }

    /// Whether no grant is held.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(lock(&self.grants)?.entries.is_empty())
    }

    /// Drops every grant that stopped mattering more than `retention`
    /// before `now`: one whose `expires_at + retention` is at or before
    /// `now` (a grant is consumed only before it expires, so that covers
    /// consumed ones). Returns how many were dropped.
    ///
    /// It never holds the lock for more than [`PURGE_BATCH`] grants: the
    /// work is proportional to what it drops, not to the store's size, and
    /// consumes go on between batches. Stop fences are kept (one small
    /// entry per run or actor ever stopped), so a stop is never forgotten.
    ///
    /// A purged id is unknown afterwards, so purge only past the grant's
    /// expiry: an expired grant can never be consumed again anyway.
    pub fn purge(&self, now: Timestamp, retention: Duration) -> Result<usize, StoreError> {
        let mut dropped = 0;
        loop {
            let step = self.purge_some(now, retention, PURGE_BATCH)?;
            dropped += step;
            if step < PURGE_BATCH {
                return Ok(dropped);
            }
        }
    }

    /// One bounded step of [`purge`](Self::purge): drops at most `limit`
    /// of the grants that `purge` would drop, oldest expiry first, under
    /// one short hold of the lock. Returns how many it dropped.
    pub fn purge_some(
        &self,
        now: Timestamp,
        retention: Duration,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let mut grants = lock(&self.grants)?;
        let Grants {
            entries,
            by_expiry,
            proposals,
            proposals_by_expiry,
            standing,
            ..
        } = &mut *grants;
        let dropped = expiry::drop_oldest(by_expiry, now, retention, limit, |id| {
            entries.remove(&id);
        });
        // Proposals go in the same bounded step: a purge never holds the
        // lock for more than `limit` records of each kind.
        expiry::drop_oldest(proposals_by_expiry, now, retention, limit, |id| {
            proposals.remove(&id);
        });
        standing.purge(now, retention, limit);
        Ok(dropped)
    }
}

#[async_trait]
impl ApprovalStore for InMemoryApprovalStore {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        lock(&self.grants)?.issue_locked(approval)
    }

    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        let mut grants = lock(&self.grants)?;
        let Some(entry) = grants.entries.get(id) else {
            return Ok(RevokeOutcome::Unknown);
        };
        let (outcome, next) = decide_revoke(&grants.shown_state(entry));
        if let (Some(next), Some(entry)) = (next, grants.entries.get_mut(id)) {
            entry.grant.state = next;
        }
        Ok(outcome)
    }

    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        let grants = lock(&self.grants)?;
        Ok(grants.entries.get(id).map(|entry| grants.shown(entry)))
    }

    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        let mut grants = lock(&self.grants)?;
        // One lookup, held mutably beside the fences: consumes serialise on
        // this lock, so hashing the id twice would be paid by every one.
        let Grants {
            entries, fences, ..
        } = &mut *grants;
        let Some(entry) = entries.get_mut(id) else {
            return Ok(ConsumeOutcome::Unknown);
        };
        let approval = &entry.grant.approval;
        let stopped = fences.stopped_since(
            &approval.actor_id,
            &approval.run_id,
            entry.run_generation,
            entry.actor_generation,
        );
        let decision = decide_consume(
            &entry.grant,
            &entry.abandoned,
            stopped,
            binding,
            now,
            attempt,
        );
        if let Some(next) = decision.state {
            entry.grant.state = next;
        }
        if let Some(failed) = decision.failed_attempts {
            entry.grant.failed_attempts = failed;
        }
        Ok(decision.outcome)
    }

    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let mut grants = lock(&self.grants)?;
        let Some(entry) = grants.entries.get(id) else {
            return Ok(AbandonOutcome::Unknown);
        };
        let stopped = grants.is_stopped(entry);
        let decision = decide_abandon(&entry.grant, &entry.abandoned, stopped, now, attempt);
        if let Some(entry) = grants.entries.get_mut(id) {
            if decision.remember {
                entry.abandoned.push(attempt.clone());
            }
            if let Some(next) = decision.state {
                entry.grant.state = next;
            }
        }
        Ok(decision.outcome)
    }

    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        let mut grants = lock(&self.grants)?;
        let stopped_grants = grants.usable(now, |a| a.actor_id == *actor && a.run_id == *run);
        let stopped_standing = grants.standing.usable(&grants.fences, now, |g| {
            g.actor_id == *actor && g.run_id == *run
        });
        let fence = grants
            .fences
            .runs
            .entry(actor.clone())
            .or_default()
            .entry(run.clone())
            .or_default();
        let outcome = fence.stop(stopped_grants, stopped_standing);
        grants.notify(|| NotificationEvent::run_stopped(actor, Some(run), now));
        Ok(outcome)
    }

    async fn stop_actor(&self, actor: &ActorId, now: Timestamp) -> Result<StopOutcome, StoreError> {
        let mut grants = lock(&self.grants)?;
        let stopped_grants = grants.usable(now, |a| a.actor_id == *actor);
        let stopped_standing = grants
            .standing
            .usable(&grants.fences, now, |g| g.actor_id == *actor);
        let fence = grants.fences.actors.entry(actor.clone()).or_default();
        let outcome = fence.stop(stopped_grants, stopped_standing);
        grants.notify(|| NotificationEvent::run_stopped(actor, None, now));
        Ok(outcome)
    }

    async fn resume_run(&self, actor: &ActorId, run: &RunId) -> Result<ResumeOutcome, StoreError> {
        let mut grants = lock(&self.grants)?;
        Ok(fences::resume(
            grants
                .fences
                .runs
                .get_mut(actor)
                .and_then(|runs| runs.get_mut(run)),
        ))
    }

    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError> {
        let mut grants = lock(&self.grants)?;
        Ok(fences::resume(grants.fences.actors.get_mut(actor)))
    }
}

/// A proposal as a list shows it: without its screenshot, which can be
/// megabytes (the contract lets a list leave it out).
fn listed(stored: &StoredProposal) -> StoredProposal {
    let p = &stored.proposal;
    let proposal = Proposal {
        id: p.id.clone(),
        actor_id: p.actor_id.clone(),
        run_id: p.run_id.clone(),
        url: p.url.clone(),
        action: p.action.clone(),
        action_digest: p.action_digest,
        proposed_at: p.proposed_at,
        expires_at: p.expires_at,
        snapshot: p.snapshot.as_ref().map(|snapshot| PageSnapshot {
            page: snapshot.page.clone(),
            screenshot_png: None,
            target_found: snapshot.target_found,
        }),
    };
    StoredProposal {
        proposal,
        state: stored.state.clone(),
    }
}

#[async_trait]
impl ProposalStore for InMemoryApprovalStore {
    async fn propose(&self, proposal: Proposal) -> Result<(), ProposeError> {
        let mut grants = lock(&self.grants)?;
        if grants.proposals.contains_key(&proposal.id) {
            return Err(ProposeError::AlreadyExists(proposal.id));
        }
        let run = grants.fences.run(&proposal.actor_id, &proposal.run_id);
        let actor = grants.fences.actor(&proposal.actor_id);
        if run.stopped || actor.stopped {
            return Err(ProposeError::Stopped);
        }
        let kept_until = proposal.expires_at;
        grants.notify(|| NotificationEvent::created(&proposal));
        grants
            .proposals_by_expiry
            .insert((kept_until, proposal.id.clone()));
        grants.proposals.insert(
            proposal.id.clone(),
            ProposalEntry {
                stored: StoredProposal::pending(proposal),
                run_generation: run.generation,
                actor_generation: actor.generation,
                kept_until,
            },
        );
        Ok(())
    }

    async fn get_proposal(&self, id: &ProposalId) -> Result<Option<StoredProposal>, StoreError> {
        let grants = lock(&self.grants)?;
        Ok(grants.proposals.get(id).map(|entry| entry.stored.clone()))
    }

    async fn pending_proposals(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredProposal>, StoreError> {
        let grants = lock(&self.grants)?;
        let mut pending: Vec<&ProposalEntry> = grants
            .proposals
            .values()
            .filter(|entry| {
                let stored = &entry.stored;
                stored.proposal.actor_id == *actor
                    && stored.proposal.run_id == *run
                    && stored.state == ProposalState::Pending
                    && !stored.proposal.is_expired_at(now)
                    && !grants.is_proposal_stopped(entry)
            })
            .collect();
        pending.sort_by(|a, b| {
            let (a, b) = (&a.stored.proposal, &b.stored.proposal);
            (a.proposed_at, &a.id).cmp(&(b.proposed_at, &b.id))
        });
        Ok(pending
            .into_iter()
            .take(MAX_LISTED_PROPOSALS)
            .map(|entry| listed(&entry.stored))
            .collect())
    }

    async fn approve_proposal(
        &self,
        id: &ProposalId,
        approval: Approval,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError> {
        let mut grants = lock(&self.grants)?;
        let Some(entry) = grants.proposals.get(id) else {
            return Ok(DecisionOutcome::Unknown);
        };
        if !entry.stored.proposal.is_approved_by(&approval) {
            return Err(ApproveError::NotForProposal);
        }
        let stopped = grants.is_proposal_stopped(entry);
        let decision = decide_proposal(&entry.stored, Decision::Approve(&approval), stopped, now);
        let Some(next) = decision.state else {
            return Ok(decision.outcome);
        };
        let grant_expires_at = approval.expires_at;
        match grants.issue_locked(approval) {
            Ok(()) => {}
            Err(IssueError::AlreadyExists(id)) => return Err(ApproveError::GrantExists(id)),
            // The fences were read under this same lock: a stop since the
            // proposal was made answered `Stopped` above, and a stop now
            // would be one too.
            Err(IssueError::Stopped) => return Ok(DecisionOutcome::Stopped),
            Err(IssueError::Store(error)) => return Err(ApproveError::Store(error)),
            Err(other) => {
                return Err(ApproveError::Store(StoreError::unavailable(format!(
                    "issuing the grant failed: {other}"
                ))));
            }
        }
        let Grants {
            proposals,
            proposals_by_expiry,
            outbox,
            ..
        } = &mut *grants;
        if let Some(entry) = proposals.get_mut(id) {
            if let Some(outbox) = outbox {
                outbox.record(NotificationEvent::decided(&entry.stored.proposal, now));
            }
            entry.stored.state = next;
            if grant_expires_at > entry.kept_until {
                proposals_by_expiry.remove(&(entry.kept_until, id.clone()));
                entry.kept_until = grant_expires_at;
                proposals_by_expiry.insert((grant_expires_at, id.clone()));
            }
        }
        Ok(decision.outcome)
    }

    async fn deny_proposal(
        &self,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError> {
        let mut grants = lock(&self.grants)?;
        let Some(entry) = grants.proposals.get(id) else {
            return Ok(DecisionOutcome::Unknown);
        };
        let stopped = grants.is_proposal_stopped(entry);
        let decision = decide_proposal(&entry.stored, Decision::Deny(by), stopped, now);
        let Grants {
            proposals, outbox, ..
        } = &mut *grants;
        if let (Some(next), Some(entry)) = (decision.state, proposals.get_mut(id)) {
            if let Some(outbox) = outbox {
                outbox.record(NotificationEvent::decided(&entry.stored.proposal, now));
            }
            entry.stored.state = next;
        }
        Ok(decision.outcome)
    }

    async fn issue_standing(&self, grant: StandingGrant) -> Result<(), IssueError> {
        let grants = &mut *lock(&self.grants)?;
        grants.standing.issue(&grants.fences, grant)
    }

    async fn get_standing(&self, id: &StandingId) -> Result<Option<StoredStanding>, StoreError> {
        let grants = lock(&self.grants)?;
        Ok(grants.standing.get(&grants.fences, id))
    }

    async fn standing_grants(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError> {
        let grants = lock(&self.grants)?;
        Ok(grants
            .standing
            .usable_of_run(&grants.fences, actor, run, now))
    }

    async fn use_standing(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError> {
        let grants = &mut *lock(&self.grants)?;
        Ok(grants
            .standing
            .use_one(&grants.fences, id, key, now, attempt))
    }

    async fn give_back_use(
        &self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let grants = &mut *lock(&self.grants)?;
        Ok(grants.standing.give_back(&grants.fences, id, attempt, now))
    }

    async fn revoke_standing(&self, id: &StandingId) -> Result<StandingRevokeOutcome, StoreError> {
        let grants = &mut *lock(&self.grants)?;
        Ok(grants.standing.revoke(&grants.fences, id))
    }
}

#[async_trait]
impl NotificationOutbox for InMemoryApprovalStore {
    async fn schedule(
        &self,
        event: NotificationEvent,
        due_at: Timestamp,
    ) -> Result<bool, StoreError> {
        Ok(lock(&self.grants)?.outbox()?.schedule(event, due_at))
    }

    async fn claim_due(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedNotification>, StoreError> {
        Ok(lock(&self.grants)?.outbox()?.claim_due(now, lease, limit))
    }

    async fn finish(
        &self,
        claim: &ClaimedNotification,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        Ok(lock(&self.grants)?.outbox()?.finish(claim, now))
    }

    async fn retry_at(
        &self,
        claim: &ClaimedNotification,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        Ok(lock(&self.grants)?.outbox()?.retry_at(claim, at))
    }
}
