//! The delivery worker: claims due events from a store's outbox, tells
//! every notifier, and finishes or retries each event. It runs beside the
//! decisions, never inside one: a notifier that errors, panics, hangs or is
//! down delays its own notices and nothing else.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign_approval_core::{
    ClaimedNotification, Clock, EventId, NotificationEvent, NotificationKind, NotificationOutbox,
    ProposalState, ProposalStore, StoreError,
    measure::{self, NotificationResult},
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::notice::{ApprovalLink, ProposalNotice};
use crate::{NotifyError, ProposalNotifier};

/// A store the worker can drain: proposals and their outbox.
pub trait NotifyingStore: ProposalStore + NotificationOutbox {}

impl<T: ProposalStore + NotificationOutbox + ?Sized> NotifyingStore for T {}

/// How the worker paces itself.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// How long before a pending proposal's expiry the "expiring soon"
    /// notice goes out (2 minutes).
    pub expiring_lead: Duration,
    /// How long a claim holds before another worker may take the event over
    /// (60 s): longer than a delivery may take.
    pub lease: Duration,
    /// Events claimed at once (32).
    pub batch: usize,
    /// How often the outbox is looked at (200 ms).
    pub poll_every: Duration,
    /// How long one notifier may take for one notice (10 s): then it counts
    /// as failed, and the notice is retried.
    pub delivery_timeout: Duration,
    /// The first retry's delay (1 s), doubled for each further attempt up
    /// to `max_backoff`.
    pub first_backoff: Duration,
    /// The longest delay between attempts (5 minutes).
    pub max_backoff: Duration,
    /// Attempts before a notice is given up and logged (12: about half an
    /// hour of retries).
    pub max_attempts: u32,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            expiring_lead: Duration::from_secs(120),
            lease: Duration::from_secs(60),
            batch: 32,
            poll_every: Duration::from_millis(200),
            delivery_timeout: Duration::from_secs(10),
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            max_attempts: 12,
        }
    }
}

impl WorkerOptions {
    /// These options with "expiring soon" sent `lead` before expiry.
    pub fn expiring_lead(mut self, lead: Duration) -> Self {
        self.expiring_lead = lead;
        self
    }

    /// These options with each notifier given at most `timeout` a notice.
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.delivery_timeout = timeout;
        self
    }

    /// These options with retries after `first`, doubling up to `max`.
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.first_backoff = first;
        self.max_backoff = max;
        self
    }

    /// These options looking at the outbox every `every`.
    pub fn poll_every(mut self, every: Duration) -> Self {
        self.poll_every = every;
        self
    }

    /// The delay before attempt `attempt + 1`.
    fn backoff_after(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(20);
        self.first_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff)
    }
}

/// What one pass over the outbox did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryRound {
    /// Events every notifier took.
    pub delivered: usize,
    /// Events with nothing left to say (an expiry notice of a proposal
    /// decided since), finished unsent.
    pub skipped: usize,
    /// Events put back for a retry.
    pub retried: usize,
    /// Events given up: a notifier refused them for good, or every attempt
    /// failed.
    pub given_up: usize,
}

/// Drains a store's outbox into notifiers, at least once.
pub struct NotificationWorker {
    store: Arc<dyn NotifyingStore>,
    notifiers: Vec<Arc<dyn ProposalNotifier>>,
    clock: Arc<dyn Clock>,
    link: ApprovalLink,
    options: WorkerOptions,
    /// Which notifiers took each event this process is still retrying, so a
    /// retry tells only the others.
    told: Mutex<HashMap<EventId, BTreeSet<usize>>>,
}

impl std::fmt::Debug for NotificationWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotificationWorker")
            .field("notifiers", &self.notifiers.len())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl NotificationWorker {
    /// A worker draining `store` into `notifiers`, linking each proposal
    /// with `link`.
    pub fn new(
        store: Arc<dyn NotifyingStore>,
        notifiers: Vec<Arc<dyn ProposalNotifier>>,
        clock: Arc<dyn Clock>,
        link: ApprovalLink,
        options: WorkerOptions,
    ) -> Self {
        NotificationWorker {
            store,
            notifiers,
            clock,
            link,
            options,
            told: Mutex::new(HashMap::new()),
        }
    }

    /// One pass: claims the due events and delivers each.
    pub async fn deliver_due(&self) -> Result<DeliveryRound, StoreError> {
        let now = self.clock.now();
        let claims = self
            .store
            .claim_due(now, self.options.lease, self.options.batch)
            .await?;
        let mut round = DeliveryRound::default();
        for claim in claims {
            self.deliver(claim, &mut round).await?;
        }
        Ok(round)
    }

    /// Runs [`deliver_due`](Self::deliver_due) every
    /// [`poll_every`](WorkerOptions::poll_every) until the handle is
    /// stopped or dropped. A store error is logged and tried again next
    /// time.
    pub fn spawn(self) -> WorkerHandle {
        let (stop, mut stopped) = watch::channel(false);
        let every = self.options.poll_every;
        let task = tokio::spawn(async move {
            loop {
                match self.deliver_due().await {
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "notification outbox unavailable"),
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stopped.changed() => return,
                }
            }
        });
        WorkerHandle { stop, task }
    }

    async fn deliver(
        &self,
        claim: ClaimedNotification,
        round: &mut DeliveryRound,
    ) -> Result<(), StoreError> {
        let event = &claim.event;
        let stored = match &event.proposal_id {
            Some(id) => self.store.get_proposal(id).await?,
            None => None,
        };
        let pending = stored
            .as_ref()
            .is_some_and(|s| s.state == ProposalState::Pending);
        if matches!(
            event.kind,
            NotificationKind::Created | NotificationKind::Expiring | NotificationKind::Expired
        ) && !pending
        {
            // Decided (or gone) since: nobody needs to be asked, and nothing
            // expires. A rule's or a standing grant's decision, taken with
            // the proposal, is told by its own decided notice.
            self.finish(&claim).await?;
            measure::notification(event.kind, NotificationResult::Skipped);
            round.skipped += 1;
            return Ok(());
        }
        if event.kind == NotificationKind::Created
            && let Some(stored) = &stored
        {
            // Before the created notice is finished, so a crash in between
            // schedules them again (their ids make that harmless).
            let proposal = &stored.proposal;
            let expiring = NotificationEvent::expiring(proposal, self.options.expiring_lead);
            if expiring.occurred_at > proposal.proposed_at {
                let due = expiring.occurred_at;
                self.store.schedule(expiring, due).await?;
            }
            let expired = NotificationEvent::expired(proposal);
            let due = expired.occurred_at;
            self.store.schedule(expired, due).await?;
        }
        let notice = ProposalNotice::new(event.clone(), stored.as_ref(), &self.link);
        match self.tell_all(&notice).await {
            Told::All => {
                self.finish(&claim).await?;
                measure::notification(event.kind, NotificationResult::Delivered);
                round.delivered += 1;
            }
            Told::Refused => {
                self.finish(&claim).await?;
                measure::notification(event.kind, NotificationResult::GivenUp);
                round.given_up += 1;
            }
            Told::NotYet if claim.attempt >= self.options.max_attempts => {
                tracing::error!(
                    event_id = %event.id,
                    kind = %event.kind,
                    attempts = claim.attempt,
                    "notification given up after every attempt failed"
                );
                self.finish(&claim).await?;
                measure::notification(event.kind, NotificationResult::GivenUp);
                round.given_up += 1;
            }
            Told::NotYet => {
                let at = self
                    .clock
                    .now()
                    .saturating_add(self.options.backoff_after(claim.attempt));
                self.store.retry_at(&claim, at).await?;
                measure::notification(event.kind, NotificationResult::Retried);
                round.retried += 1;
            }
        }
        Ok(())
    }

    async fn finish(&self, claim: &ClaimedNotification) -> Result<(), StoreError> {
        if let Ok(mut told) = self.told.lock() {
            told.remove(&claim.event.id);
        }
        self.store.finish(claim, self.clock.now()).await.map(|_| ())
    }

    /// Tells every notifier that has not taken `notice` yet, each in a task
    /// of its own bounded by the delivery timeout, so that a panic or a
    /// hang stays with its notifier.
    async fn tell_all(&self, notice: &ProposalNotice) -> Told {
        let id = notice.event.id.clone();
        let already = self
            .told
            .lock()
            .map(|told| told.get(&id).cloned().unwrap_or_default())
            .unwrap_or_default();
        let mut refused = false;
        let mut not_yet = false;
        let mut took = already.clone();
        for (index, notifier) in self.notifiers.iter().enumerate() {
            if already.contains(&index) {
                continue;
            }
            let (notifier, shared) = (notifier.clone(), notice.clone());
            let task = tokio::spawn(async move { notifier.notify(&shared).await });
            let name = self.notifiers[index].name();
            match tokio::time::timeout(self.options.delivery_timeout, task).await {
                Ok(Ok(Ok(()))) => {
                    took.insert(index);
                }
                Ok(Ok(Err(NotifyError::Refused(message)))) => {
                    tracing::warn!(notifier = name, event_id = %id, %message, "notification refused for good");
                    took.insert(index);
                    refused = true;
                }
                Ok(Ok(Err(error))) => {
                    tracing::warn!(notifier = name, event_id = %id, %error, "notification failed; will retry");
                    not_yet = true;
                }
                Ok(Err(join)) => {
                    tracing::error!(notifier = name, event_id = %id, error = %join, "notifier panicked; will retry");
                    not_yet = true;
                }
                Err(_) => {
                    tracing::warn!(notifier = name, event_id = %id, "notifier timed out; will retry");
                    not_yet = true;
                }
            }
        }
        if not_yet {
            if let Ok(mut told) = self.told.lock() {
                told.insert(id, took);
            }
            return Told::NotYet;
        }
        if refused { Told::Refused } else { Told::All }
    }
}

enum Told {
    All,
    Refused,
    NotYet,
}

/// A running worker; dropping it stops the worker at its next pause (the
/// stop signal's sender goes with it).
#[derive(Debug)]
pub struct WorkerHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl WorkerHandle {
    /// Stops the worker after the pass it is in, and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}
