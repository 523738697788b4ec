//! The notification outbox on Redis: each actor's events wait in its own
//! slot (see `lua/outbox_prelude.lua`), written by the very script of the
//! step they tell of, so that a step and its event are one atomic write
//! also on Redis Cluster. A directory in a slot of its own
//! (`{prefix}:{notify}`) says which actors may have due events: a step
//! registers its actor before it runs and hints the directory after, and a
//! claim walks the due actors, claims in each actor's slot, then settles
//! the actor's entry. A step whose hint never came (its process died in
//! between, or the directory's node did not answer) is found by the sweep,
//! which every claiming process runs at its first claim and then every
//! [`OUTBOX_SWEEP_INTERVAL`] over the registered actors.

use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::{
    ClaimedNotification, FINISHED_EVENT_RETENTION, NotificationEvent, NotificationOutbox,
    ProposalId, RunId, StoreError, Timestamp,
};
use redis::Value;

use crate::keys::Slot;
use crate::outbox_state::OutboxState;
use crate::reply::{corrupt_reply, text, unexpected_reply};
use crate::scripts::GrantScript;
use crate::store::RedisApprovalStore;

/// How often a claiming process sweeps the registered actors for outboxes
/// the directory does not list.
pub const OUTBOX_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// Scores are doubles: times past 2^53 ms (year 285,000) are held there.
const LATEST_SCORE: u64 = (1 << 53) - 1;

/// The event a step's script records, as its three arguments (all empty
/// when the store keeps no outbox).
pub(crate) struct StepEvent {
    id: String,
    body: String,
    due: String,
}

impl StepEvent {
    /// No event: the store keeps no outbox.
    fn none() -> StepEvent {
        StepEvent {
            id: String::new(),
            body: String::new(),
            due: String::new(),
        }
    }

    fn of(event: &NotificationEvent, due_at: Timestamp) -> StepEvent {
        StepEvent {
            id: event.id.as_str().to_owned(),
            body: encode_body(event),
            due: score(due_at),
        }
    }

    /// The three arguments the step scripts take: id, body, due.
    pub(crate) fn args(&self) -> [&[u8]; 3] {
        [
            self.id.as_bytes(),
            self.body.as_bytes(),
            self.due.as_bytes(),
        ]
    }
}

/// `at` as a score: Unix milliseconds, at most [`LATEST_SCORE`].
fn score(at: Timestamp) -> String {
    at.as_millis().min(LATEST_SCORE).to_string()
}

/// The event as the outbox holds it: its fields but the id, as JSON.
fn encode_body(event: &NotificationEvent) -> String {
    serde_json::json!({
        "kind": event.kind.as_str(),
        "actor": event.actor_id.as_str(),
        "run": event.run_id.as_ref().map(RunId::as_str),
        "proposal": event.proposal_id.as_ref().map(ProposalId::as_str),
        "at": event.occurred_at.as_millis(),
    })
    .to_string()
}

/// Reads back the event `id` of `slot` from `body`, strictly.
fn decode_event(slot: &Slot, id: &str, body: &str) -> Result<NotificationEvent, StoreError> {
    let corrupt = |what: &str| StoreError::corrupt(id, format!("notification {what}"));
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|_| corrupt("body is not JSON"))?;
    let field = |name: &str| value.get(name).filter(|v| !v.is_null());
    let text_of = |name: &str| field(name).map(|v| v.as_str().ok_or_else(|| corrupt(name)));
    let kind = text_of("kind").ok_or_else(|| corrupt("kind is missing"))??;
    let actor = text_of("actor").ok_or_else(|| corrupt("actor is missing"))??;
    let run = text_of("run").transpose()?;
    let proposal = text_of("proposal").transpose()?;
    let at = field("at")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| corrupt("time is not a number"))?;
    let event = NotificationEvent::from_stored(id, kind, actor, run, proposal, at)
        .map_err(|reason| corrupt(&reason))?;
    if !slot.holds(&event.actor_id) {
        return Err(corrupt("actor is not the actor of its slot"));
    }
    Ok(event)
}

/// A reply item as a list.
fn list(value: &Value) -> Option<&[Value]> {
    match value {
        Value::Array(items) => Some(items),
        _ => None,
    }
}

/// A score as Redis answers it (`"1796681652627"`, or `""` for none) as
/// milliseconds.
fn parse_score(text: &str) -> Option<u64> {
    let value: f64 = text.parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some(value as u64)
}

impl RedisApprovalStore {
    fn outbox_state(&self) -> Result<&OutboxState, StoreError> {
        self.outbox.as_ref().ok_or_else(|| StoreError::Unsupported {
            message: "this store records no notifications: connect it with \
                      `notification_outbox(true)`"
                .to_owned(),
        })
    }

    /// The directory's keys: the due index and the known actors.
    fn directory_keys(&self) -> [String; 2] {
        let slot = format!("{}:{{notify}}", self.prefix());
        [format!("{slot}:due"), format!("{slot}:actors")]
    }

    /// Runs one directory call.
    async fn directory(&self, args: &[&[u8]]) -> Result<crate::reply::Reply, StoreError> {
        let keys = self.directory_keys();
        let keys = [keys[0].as_str(), keys[1].as_str()];
        let (reply, _) = self
            .run(GrantScript::OutboxDirectory, &keys, args, false)
            .await?;
        Ok(reply)
    }

    /// The event a step of `slot`'s actor records (`event` builds it), once
    /// the actor is registered in the directory; none without an outbox.
    /// A registration that fails fails the step before it runs: a step
    /// whose event no sweep could find is never taken.
    pub(crate) async fn step_event(
        &self,
        slot: &Slot,
        event: impl FnOnce() -> NotificationEvent,
    ) -> Result<StepEvent, StoreError> {
        let Some(state) = &self.outbox else {
            return Ok(StepEvent::none());
        };
        self.register(state, slot).await?;
        let event = event();
        Ok(StepEvent::of(&event, event.occurred_at))
    }

    async fn register(&self, state: &OutboxState, slot: &Slot) -> Result<(), StoreError> {
        if state.registered(&slot.tag) {
            return Ok(());
        }
        let reply = self.directory(&[b"register", slot.tag.as_bytes()]).await?;
        if reply.status != "ok" {
            return Err(unexpected_reply(GrantScript::OutboxDirectory, "register"));
        }
        state.remember(&slot.tag);
        Ok(())
    }

    /// After a step recorded `event`: tells the directory. A failure is
    /// logged, never the step's: the step is done, and the sweep finds the
    /// event.
    pub(crate) async fn hint_step(&self, slot: &Slot, event: &StepEvent) {
        if !event.id.is_empty() {
            self.hint_logged(slot, &event.id, &event.due).await;
        }
    }

    /// Hints the directory that event `id` of `slot` is due at `due`; a
    /// failure is logged (the next sweep finds the event).
    async fn hint_logged(&self, slot: &Slot, id: &str, due: &str) {
        if let Err(error) = self.hint(&slot.tag, due).await {
            tracing::warn!(
                target: "countersign_store_redis",
                event_id = %id,
                error = %error,
                "the outbox directory did not take a hint; the next sweep finds its event"
            );
        }
    }

    async fn hint(&self, tag: &str, due: &str) -> Result<(), StoreError> {
        let reply = self
            .directory(&[b"hint", tag.as_bytes(), due.as_bytes()])
            .await?;
        if reply.status == "ok" {
            Ok(())
        } else {
            Err(unexpected_reply(GrantScript::OutboxDirectory, "hint"))
        }
    }

    /// Runs one outbox call in `slot`.
    async fn outbox_call(
        &self,
        slot: &Slot,
        (call, args): (&[u8], &[&[u8]]),
        durable: bool,
    ) -> Result<(crate::reply::Reply, String), StoreError> {
        let key = format!("{}:outbox", slot.prefix);
        let mut all: Vec<&[u8]> = Vec::with_capacity(args.len() + 2);
        all.push(call);
        all.push(slot.prefix.as_bytes());
        all.extend_from_slice(args);
        let (reply, wait) = self
            .run(GrantScript::Outbox, &[key.as_str()], &all, durable)
            .await?;
        if reply.status == "corrupt" {
            return Err(corrupt_reply(&key, &reply));
        }
        if durable {
            self.confirm(wait)?;
        }
        Ok((reply, key))
    }

    /// Sweeps the registered actors when this process never did or did
    /// [`OUTBOX_SWEEP_INTERVAL`] ago: each actor whose outbox holds an event is
    /// hinted at its earliest.
    async fn sweep_when_due(&self, state: &OutboxState) -> Result<(), StoreError> {
        if !state.begin_sweep(OUTBOX_SWEEP_INTERVAL) {
            return Ok(());
        }
        let swept = self.sweep().await;
        if swept.is_err() {
            state.sweep_failed();
        }
        swept
    }

    async fn sweep(&self) -> Result<(), StoreError> {
        let unexpected = || unexpected_reply(GrantScript::OutboxDirectory, "actors");
        let mut cursor = "0".to_owned();
        loop {
            let reply = self.directory(&[b"actors", cursor.as_bytes()]).await?;
            let (next, tags) = match (reply.status.as_str(), reply.items.as_slice()) {
                ("actors", [next, tags]) => (
                    text(next).ok_or_else(unexpected)?.to_owned(),
                    list(tags).ok_or_else(unexpected)?,
                ),
                _ => return Err(unexpected()),
            };
            for tag in tags {
                let tag = text(tag).ok_or_else(unexpected)?;
                let slot = self.slot_of_tag(tag.to_owned());
                let (reply, key) = self.outbox_call(&slot, (b"head", &[]), false).await?;
                let head = match (reply.status.as_str(), reply.items.as_slice()) {
                    ("head", [head]) => text(head)
                        .ok_or_else(|| unexpected_reply(GrantScript::Outbox, &key))?
                        .to_owned(),
                    _ => return Err(unexpected_reply(GrantScript::Outbox, &key)),
                };
                if !head.is_empty() {
                    self.hint(&slot.tag, &head).await?;
                }
            }
            if next == "0" {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// Claims up to `limit` due events of the actor `tag` names.
    async fn claim_in(
        &self,
        tag: &str,
        now: Timestamp,
        claimed_until: Timestamp,
        limit: usize,
    ) -> Result<(Vec<(u64, ClaimedNotification)>, String), StoreError> {
        let slot = self.slot_of_tag(tag.to_owned());
        let horizon = score(now.saturating_sub(FINISHED_EVENT_RETENTION));
        let (now_text, until_text, limit_text) =
            (score(now), score(claimed_until), limit.to_string());
        let (reply, key) = self
            .outbox_call(
                &slot,
                (
                    b"claim",
                    &[
                        now_text.as_bytes(),
                        until_text.as_bytes(),
                        limit_text.as_bytes(),
                        horizon.as_bytes(),
                    ],
                ),
                false,
            )
            .await?;
        let unexpected = || unexpected_reply(GrantScript::Outbox, &key);
        let (claimed, next) = match (reply.status.as_str(), reply.items.as_slice()) {
            ("claimed", [claimed, next]) => (
                list(claimed).ok_or_else(unexpected)?,
                text(next).ok_or_else(unexpected)?.to_owned(),
            ),
            _ => return Err(unexpected()),
        };
        if claimed.len() > limit {
            return Err(unexpected());
        }
        let mut out = Vec::with_capacity(claimed.len());
        for item in claimed {
            let fields: Vec<&str> = list(item)
                .ok_or_else(unexpected)?
                .iter()
                .map(|f| text(f).ok_or_else(unexpected))
                .collect::<Result<_, _>>()?;
            let [id, attempt, body, was] = fields.as_slice() else {
                return Err(unexpected());
            };
            let event = decode_event(&slot, id, body)?;
            let attempt = attempt
                .parse::<u32>()
                .ok()
                .filter(|a| *a >= 1)
                .ok_or_else(|| StoreError::corrupt(*id, "notification attempt is out of range"))?;
            let was = parse_score(was).ok_or_else(unexpected)?;
            out.push((
                was,
                ClaimedNotification {
                    event,
                    attempt,
                    claimed_until,
                },
            ));
        }
        Ok((out, next))
    }

    /// Finishes or retries (`call`) the event of `claim` at `at`.
    async fn change_claimed(
        &self,
        call: &[u8],
        claim: &ClaimedNotification,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.outbox_state()?;
        let slot = self.slot(&claim.event.actor_id);
        let (attempt, at) = (claim.attempt.to_string(), score(at));
        let (reply, key) = self
            .outbox_call(
                &slot,
                (
                    call,
                    &[
                        claim.event.id.as_str().as_bytes(),
                        attempt.as_bytes(),
                        at.as_bytes(),
                    ],
                ),
                false,
            )
            .await?;
        match (reply.status.as_str(), reply.bare()) {
            ("done", true) => {
                if call == b"retry" {
                    // Due again, perhaps before the time the directory
                    // holds for the actor (at the latest, when the claim
                    // would have lapsed).
                    self.hint_logged(&slot, claim.event.id.as_str(), &at).await;
                }
                Ok(true)
            }
            ("not_held", true) => Ok(false),
            _ => Err(unexpected_reply(GrantScript::Outbox, &key)),
        }
    }
}

#[async_trait]
impl NotificationOutbox for RedisApprovalStore {
    async fn schedule(
        &self,
        event: NotificationEvent,
        due_at: Timestamp,
    ) -> Result<bool, StoreError> {
        let state = self.outbox_state()?;
        let slot = self.slot(&event.actor_id);
        self.register(state, &slot).await?;
        let step = StepEvent::of(&event, due_at);
        let [id, body, due] = step.args();
        let (reply, key) = self
            .outbox_call(&slot, (b"schedule", &[id, body, due]), true)
            .await?;
        match (reply.status.as_str(), reply.bare()) {
            ("added", true) => {
                self.hint_step(&slot, &step).await;
                Ok(true)
            }
            ("known", true) => Ok(false),
            _ => Err(unexpected_reply(GrantScript::Outbox, &key)),
        }
    }

    async fn claim_due(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedNotification>, StoreError> {
        let state = self.outbox_state()?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.sweep_when_due(state).await?;
        let unexpected = || unexpected_reply(GrantScript::OutboxDirectory, "due");
        let (now_text, limit_text) = (score(now), limit.to_string());
        let reply = self
            .directory(&[b"due", now_text.as_bytes(), limit_text.as_bytes()])
            .await?;
        let due = match (reply.status.as_str(), reply.items.as_slice()) {
            ("due", [due]) => list(due).ok_or_else(unexpected)?,
            _ => return Err(unexpected()),
        };
        let claimed_until = now.saturating_add(lease);
        let mut claimed: Vec<(u64, ClaimedNotification)> = Vec::new();
        for entry in due {
            let remaining = limit.saturating_sub(claimed.len());
            if remaining == 0 {
                break;
            }
            let fields = list(entry).ok_or_else(unexpected)?;
            let [tag, count] = fields else {
                return Err(unexpected());
            };
            let (tag, count) = (
                text(tag).ok_or_else(unexpected)?,
                text(count).ok_or_else(unexpected)?,
            );
            let (mine, next) = self.claim_in(tag, now, claimed_until, remaining).await?;
            claimed.extend(mine);
            let reply = self
                .directory(&[b"settle", tag.as_bytes(), count.as_bytes(), next.as_bytes()])
                .await?;
            if reply.status != "ok" {
                return Err(unexpected_reply(GrantScript::OutboxDirectory, "settle"));
            }
        }
        // Each actor's events come in order; across actors, by when each
        // became claimable (a stable sort keeps each actor's order).
        claimed.sort_by_key(|(was, _)| *was);
        Ok(claimed.into_iter().map(|(_, claim)| claim).collect())
    }

    async fn finish(
        &self,
        claim: &ClaimedNotification,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.change_claimed(b"finish", claim, now).await
    }

    async fn retry_at(
        &self,
        claim: &ClaimedNotification,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.change_claimed(b"retry", claim, at).await
    }
}
