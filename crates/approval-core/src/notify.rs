//! Notification events and the outbox they wait in: a store records an
//! event in the same step as what it tells of (a proposal made, decided,
//! its run stopped), and a delivery worker drains the outbox at least once,
//! across restarts and processes. Nothing here decides anything: an event
//! is recorded only after its step committed, and delivering it changes no
//! proposal, grant or run.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    ids::ActorId, ids::EventId, ids::ProposalId, ids::RunId, proposal::Proposal,
    store_error::StoreError, time::Timestamp,
};

/// How long after its delivery an event's id is remembered, so that
/// scheduling it again (a worker that crashed after delivering and
/// before finishing re-schedules the time-driven events) adds nothing.
pub const FINISHED_EVENT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// What happened, as receivers read it (`type` of a webhook's body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum NotificationKind {
    /// A proposal waits for a decision.
    Created,
    /// A pending proposal expires soon (a host-set lead before its expiry).
    Expiring,
    /// A proposal was approved or denied, by a person, a rule or a standing
    /// grant.
    Decided,
    /// Nobody decided in time.
    Expired,
    /// A run, or every run of an actor, was stopped.
    RunStopped,
}

impl NotificationKind {
    /// Every kind, in the order events of one proposal happen.
    pub const ALL: [NotificationKind; 5] = [
        NotificationKind::Created,
        NotificationKind::Expiring,
        NotificationKind::Decided,
        NotificationKind::Expired,
        NotificationKind::RunStopped,
    ];

    /// `proposal.created`, `proposal.expiring`, `proposal.decided`,
    /// `proposal.expired` or `run.stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationKind::Created => "proposal.created",
            NotificationKind::Expiring => "proposal.expiring",
            NotificationKind::Decided => "proposal.decided",
            NotificationKind::Expired => "proposal.expired",
            NotificationKind::RunStopped => "run.stopped",
        }
    }

    /// The kind [`as_str`](Self::as_str) names; `None` for anything else.
    pub fn parse(text: &str) -> Option<NotificationKind> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

impl fmt::Display for NotificationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing that happened, as the outbox holds it: ids only. Whoever
/// delivers it reads the proposal for what to say, so an event never holds
/// an argument value or a picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationEvent {
    /// Derived from what happened: the same event recorded twice has one
    /// id.
    pub id: EventId,
    /// What happened.
    pub kind: NotificationKind,
    /// Whose proposal or run.
    pub actor_id: ActorId,
    /// The run; `None` when every run of the actor was stopped.
    pub run_id: Option<RunId>,
    /// The proposal; `None` for [`NotificationKind::RunStopped`].
    pub proposal_id: Option<ProposalId>,
    /// When it happened (for an expiry, when it is due).
    pub occurred_at: Timestamp,
}

impl NotificationEvent {
    fn of_proposal(proposal: &Proposal, kind: NotificationKind, at: Timestamp) -> Self {
        NotificationEvent {
            id: EventId::of_subject(&format!("{kind}/{}", proposal.id)),
            kind,
            actor_id: proposal.actor_id.clone(),
            run_id: Some(proposal.run_id.clone()),
            proposal_id: Some(proposal.id.clone()),
            occurred_at: at,
        }
    }

    /// `proposal` was made.
    pub fn created(proposal: &Proposal) -> Self {
        Self::of_proposal(proposal, NotificationKind::Created, proposal.proposed_at)
    }

    /// `proposal` expires `lead` from now (due `lead` before its expiry).
    pub fn expiring(proposal: &Proposal, lead: Duration) -> Self {
        let at = proposal.expires_at.saturating_sub(lead);
        Self::of_proposal(proposal, NotificationKind::Expiring, at)
    }

    /// `proposal` was decided at `at`; a proposal is decided once, so this
    /// event has one id per proposal.
    pub fn decided(proposal: &Proposal, at: Timestamp) -> Self {
        Self::of_proposal(proposal, NotificationKind::Decided, at)
    }

    /// Nobody decided `proposal` before its expiry.
    pub fn expired(proposal: &Proposal) -> Self {
        Self::of_proposal(proposal, NotificationKind::Expired, proposal.expires_at)
    }

    /// Reads back an event a store recorded, from the text of its parts:
    /// its id, kind name ([`NotificationKind::as_str`]), actor, run,
    /// proposal and Unix milliseconds. The reason (for a
    /// [`StoreError::Corrupt`]) when a part is not what a store writes: an
    /// id of another shape, an unknown kind, a stop that names a proposal,
    /// another event that names no proposal or no run.
    pub fn from_stored(
        id: &str,
        kind: &str,
        actor: &str,
        run: Option<&str>,
        proposal: Option<&str>,
        occurred_at: u64,
    ) -> Result<NotificationEvent, String> {
        let id = EventId::parse(id).ok_or("id is not an event id")?;
        let kind = NotificationKind::parse(kind).ok_or(format!("kind `{kind}` is unknown"))?;
        let actor_id = ActorId::new(actor).map_err(|_| "actor is not an actor id")?;
        let run_id = run
            .map(|run| RunId::new(run).map_err(|_| "run is not a run id"))
            .transpose()?;
        let proposal_id = proposal
            .map(|p| ProposalId::parse(p).ok_or("proposal is not a proposal id"))
            .transpose()?;
        // A stop names no proposal; every other event names one, and its run.
        let shaped = match kind {
            NotificationKind::RunStopped => proposal_id.is_none(),
            _ => proposal_id.is_some() && run_id.is_some(),
        };
        if !shaped {
            return Err("names the wrong ids for its kind".to_owned());
        }
        Ok(NotificationEvent {
            id,
            kind,
            actor_id,
            run_id,
            proposal_id,
            occurred_at: Timestamp::from_millis(occurred_at),
        })
    }

    /// `run` of `actor` (every run when `None`) was stopped at `at`. A run
    /// stopped, resumed and stopped again at another instant is another
    /// event.
    pub fn run_stopped(actor: &ActorId, run: Option<&RunId>, at: Timestamp) -> Self {
        // Lengths first, so that no actor and run text reads as another pair.
        let run_text = run.map_or("", RunId::as_str);
        let subject = format!(
            "{}/{}:{}/{}:{}/{}",
            NotificationKind::RunStopped,
            actor.as_str().len(),
            actor.as_str(),
            run.map_or(0, |r| r.as_str().len() + 1),
            run_text,
            at.as_millis()
        );
        NotificationEvent {
            id: EventId::of_subject(&subject),
            kind: NotificationKind::RunStopped,
            actor_id: actor.clone(),
            run_id: run.cloned(),
            proposal_id: None,
            occurred_at: at,
        }
    }
}

/// An event a worker claimed from the outbox: its own until
/// `claimed_until`, then any worker's again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedNotification {
    /// The event.
    pub event: NotificationEvent,
    /// Which claim of the event this is, from 1: a retry is the next.
    pub attempt: u32,
    /// When the claim lapses.
    pub claimed_until: Timestamp,
}

/// The outbox of notification events a store keeps beside its proposals.
///
/// # Contract
///
/// Every implementation must behave as follows;
/// `countersign-store-conformance` checks each rule
/// (`outbox_conformance_tests!`).
///
/// 1. **Recorded with its step.** A store whose outbox is on records, in
///    the same atomic step and only when the step changed something: a
///    [`NotificationEvent::created`] for each proposal stored by
///    `propose`; a [`NotificationEvent::decided`] for each proposal that
///    `approve_proposal` or `deny_proposal` decided (`Approved` or
///    `Denied`, never an outcome that changed nothing); a
///    [`NotificationEvent::run_stopped`] for each `stop_run` (`Some(run)`)
///    and `stop_actor` (`None`). Each is due at once (at its
///    `occurred_at`). A store that fails the step records nothing.
/// 2. **`schedule`** adds `event`, due at `due_at`, unless an event with
///    its id is in the outbox or finished within
///    [`FINISHED_EVENT_RETENTION`]: `true` when added, `false` otherwise
///    (nothing changes).
/// 3. **`claim_due`** claims up to `limit` events due at `now` (`due_at <=
///    now`) that are unclaimed or whose claim lapsed (`claimed_until <=
///    now`), in the order they became claimable (due, or lapsed), then in
///    the order they were recorded or scheduled (so that a proposal's
///    events of one millisecond, created then decided, come in order). Each claim counts one
///    attempt and holds until `now + lease`. Among concurrent claims, an
///    event is handed to one claimer per attempt. A store that shards its
///    outbox by actor (Redis Cluster keeps each actor's events in the
///    actor's slot) keeps this order among each actor's events, and
///    claims across actors roughly by time.
/// 4. **`finish`** removes the event of `claim` for good when `claim` is
///    still its latest claim (`true`); a claim that lapsed and was
///    claimed again since changes nothing (`false`). A finished event's
///    id is remembered for [`FINISHED_EVENT_RETENTION`] after `now`
///    (rule 2).
/// 5. **`retry_at`** makes the event of `claim`, when `claim` is still its
///    latest claim, unclaimed and due at `at` (`true`); otherwise nothing
///    changes (`false`). Attempts are kept.
/// 6. Infrastructure failures are [`StoreError`]; an event the store
///    cannot read as one of its own is [`StoreError::Corrupt`]. A store
///    built without an outbox answers every call
///    [`StoreError::Unsupported`].
#[async_trait]
pub trait NotificationOutbox: Send + Sync {
    /// Adds an event unless its id is known; see rule 2.
    async fn schedule(
        &self,
        event: NotificationEvent,
        due_at: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Claims the events due at `now`; see rule 3.
    async fn claim_due(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedNotification>, StoreError>;

    /// Removes a delivered (or given-up) event at `now`; see rule 4.
    async fn finish(&self, claim: &ClaimedNotification, now: Timestamp)
    -> Result<bool, StoreError>;

    /// Puts an event back, due at `at`; see rule 5.
    async fn retry_at(
        &self,
        claim: &ClaimedNotification,
        at: Timestamp,
    ) -> Result<bool, StoreError>;
}

#[async_trait]
impl<T: NotificationOutbox + ?Sized> NotificationOutbox for std::sync::Arc<T> {
    async fn schedule(
        &self,
        event: NotificationEvent,
        due_at: Timestamp,
    ) -> Result<bool, StoreError> {
        (**self).schedule(event, due_at).await
    }
    async fn claim_due(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedNotification>, StoreError> {
        (**self).claim_due(now, lease, limit).await
    }
    async fn finish(
        &self,
        claim: &ClaimedNotification,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        (**self).finish(claim, now).await
    }
    async fn retry_at(
        &self,
        claim: &ClaimedNotification,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        (**self).retry_at(claim, at).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_back_from_their_names() {
        for kind in NotificationKind::ALL {
            assert_eq!(NotificationKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(NotificationKind::parse("proposal.approved"), None);
    }

    #[test]
    fn stored_events_read_back_only_in_their_shape() {
        let actor = ActorId::new("a").unwrap();
        let run = RunId::new("r").unwrap();
        let stop = NotificationEvent::run_stopped(&actor, Some(&run), Timestamp::from_millis(9));
        let read = |kind: &str, run: Option<&str>, proposal: Option<&str>| {
            NotificationEvent::from_stored(stop.id.as_str(), kind, "a", run, proposal, 9)
        };
        assert_eq!(read("run.stopped", Some("r"), None), Ok(stop.clone()));
        let proposal = "prp_0123456789abcdef0123456789abcdef";
        assert_eq!(
            read("run.stopped", Some("r"), Some(proposal)).unwrap_err(),
            "names the wrong ids for its kind"
        );
        assert_eq!(
            read("proposal.created", None, Some(proposal)).unwrap_err(),
            "names the wrong ids for its kind"
        );
        assert!(read("proposal.created", Some("r"), Some(proposal)).is_ok());
        assert_eq!(
            read("proposal.approved", Some("r"), None).unwrap_err(),
            "kind `proposal.approved` is unknown"
        );
        assert_eq!(
            NotificationEvent::from_stored("evt x", "run.stopped", "a", None, None, 9).unwrap_err(),
            "id is not an event id"
        );
    }

    #[test]
    fn a_stop_names_its_actor_run_and_instant() {
        let actor = ActorId::new("a/b").unwrap();
        let other_actor = ActorId::new("a").unwrap();
        let run = RunId::new("c").unwrap();
        let other_run = RunId::new("b/c").unwrap();
        let at = Timestamp::from_millis(7);
        let id = |actor: &ActorId, run: Option<&RunId>, at| {
            NotificationEvent::run_stopped(actor, run, at).id
        };
        let one = id(&actor, Some(&run), at);
        assert_eq!(one, id(&actor, Some(&run), at));
        assert!(one.as_str().starts_with("evt_") && one.as_str().len() == 36);
        // `a/b` + `c` is not `a` + `b/c`, nor the actor's stop, nor a later
        // stop of the same run.
        assert_ne!(one, id(&other_actor, Some(&other_run), at));
        assert_ne!(one, id(&actor, None, at));
        assert_ne!(one, id(&actor, Some(&run), Timestamp::from_millis(8)));
    }
}
