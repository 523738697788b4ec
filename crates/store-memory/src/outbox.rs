//! The notification outbox, kept under the store's one lock so that an
//! event is recorded in the same step as what it tells of.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use countersign_approval_core::{
    ClaimedNotification, EventId, FINISHED_EVENT_RETENTION, NotificationEvent, StoreError,
    Timestamp,
};

/// One waiting event.
#[derive(Debug)]
struct Slot {
    event: NotificationEvent,
    /// When it is next claimable: its due time, or when its claim lapses.
    claimable_at: Timestamp,
    /// The order it was recorded in: ties of `claimable_at` go by it, so a
    /// proposal's events recorded in one millisecond come in order.
    sequence: u64,
    attempt: u32,
}

/// Waiting events, by when each is next claimable, and the ids of
/// finished ones.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    waiting: HashMap<EventId, Slot>,
    by_claimable: BTreeSet<(Timestamp, u64, EventId)>,
    recorded: u64,
    finished: HashMap<EventId, Timestamp>,
    finished_by_time: BTreeSet<(Timestamp, EventId)>,
}

impl Outbox {
    /// Rule 2 of the outbox contract.
    pub(crate) fn schedule(&mut self, event: NotificationEvent, due_at: Timestamp) -> bool {
        if self.waiting.contains_key(&event.id) || self.finished.contains_key(&event.id) {
            return false;
        }
        self.recorded += 1;
        let sequence = self.recorded;
        self.by_claimable
            .insert((due_at, sequence, event.id.clone()));
        self.waiting.insert(
            event.id.clone(),
            Slot {
                event,
                claimable_at: due_at,
                sequence,
                attempt: 0,
            },
        );
        true
    }

    /// Records an event due at once (rule 1).
    pub(crate) fn record(&mut self, event: NotificationEvent) {
        let due_at = event.occurred_at;
        self.schedule(event, due_at);
    }

    /// Rule 3.
    pub(crate) fn claim_due(
        &mut self,
        now: Timestamp,
        lease: Duration,
        limit: usize,
    ) -> Vec<ClaimedNotification> {
        self.forget_finished(now);
        let claimable: Vec<(Timestamp, u64, EventId)> = self
            .by_claimable
            .iter()
            .take_while(|(at, _, _)| *at <= now)
            .take(limit)
            .cloned()
            .collect();
        let claimed_until = now.saturating_add(lease);
        let mut claimed = Vec::with_capacity(claimable.len());
        for key in claimable {
            self.by_claimable.remove(&key);
            let (_, sequence, id) = key;
            let Some(slot) = self.waiting.get_mut(&id) else {
                continue;
            };
            slot.attempt = slot.attempt.saturating_add(1);
            slot.claimable_at = claimed_until;
            self.by_claimable.insert((claimed_until, sequence, id));
            claimed.push(ClaimedNotification {
                event: slot.event.clone(),
                attempt: slot.attempt,
                claimed_until,
            });
        }
        claimed
    }

    /// Rule 4.
    pub(crate) fn finish(&mut self, claim: &ClaimedNotification, now: Timestamp) -> bool {
        let id = &claim.event.id;
        if !self.holds(claim) {
            return false;
        }
        if let Some(slot) = self.waiting.remove(id) {
            self.by_claimable
                .remove(&(slot.claimable_at, slot.sequence, id.clone()));
        }
        self.finished.insert(id.clone(), now);
        self.finished_by_time.insert((now, id.clone()));
        true
    }

    /// Rule 5.
    pub(crate) fn retry_at(&mut self, claim: &ClaimedNotification, at: Timestamp) -> bool {
        if !self.holds(claim) {
            return false;
        }
        let id = &claim.event.id;
        if let Some(slot) = self.waiting.get_mut(id) {
            self.by_claimable
                .remove(&(slot.claimable_at, slot.sequence, id.clone()));
            slot.claimable_at = at;
            self.by_claimable.insert((at, slot.sequence, id.clone()));
        }
        true
    }

    /// Whether `claim` is its event's latest claim.
    fn holds(&self, claim: &ClaimedNotification) -> bool {
        self.waiting
            .get(&claim.event.id)
            .is_some_and(|slot| slot.attempt == claim.attempt)
    }

    fn forget_finished(&mut self, now: Timestamp) {
        let horizon = now.saturating_sub(FINISHED_EVENT_RETENTION);
        while let Some((at, id)) = self.finished_by_time.first().cloned() {
            if at > horizon {
                break;
            }
            self.finished_by_time.remove(&(at, id.clone()));
            self.finished.remove(&id);
        }
    }
}

/// What a store without an outbox answers.
pub(crate) fn no_outbox() -> StoreError {
    StoreError::Unsupported {
        message: "this store records no notifications: build it with `with_notification_outbox`"
            .to_owned(),
    }
}
