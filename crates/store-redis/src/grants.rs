//! The grant half of the store: [`ApprovalStore`] on Redis. Each call is
//! one script in the grant's slot; consume and revoke first find and
//! validate the record (unless the slot cache already did), and every
//! answer that writes is checked against the library's own rules.

use std::sync::Arc;

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, AttemptId, Binding,
    ConsumeDecision, ConsumeOutcome, GrantState, IssueError, MAX_ATTEMPT_LIMIT, NotificationEvent,
    ResumeOutcome, RevokeOutcome, RunId, StaleReason, StopOutcome, StoreError, StoredGrant,
    Timestamp, decide_abandon, decide_consume, decide_revoke,
};
use redis::Value;

use crate::keys::Slot;
use crate::pointer::Claim;
use crate::record::{self, Head, ISSUE_TOKEN_BYTES};
use crate::reply::{
    MAX_READS, Reply, Seen, corrupt_reply, disagreement, kept_changing, parse_flag, parse_seen,
    text, unexpected_reply,
};
use crate::scripts::GrantScript;
use crate::store::RedisApprovalStore;

/// A grant as the get script read it and the library validated it.
struct Read {
    /// The grant, in its stored state.
    grant: StoredGrant,
    /// The fingerprint of its fixed fields (see [`read_in`](RedisApprovalStore::read_in)).
    fingerprint: String,
    /// Whether its run or actor was stopped since it was issued.
    stopped: bool,
}

/// What one run of the consume or revoke script came to.
enum Attempt<T> {
    /// The script answered, and the answer checked out.
    Done(T),
    /// The record's fixed fields are not those of the fingerprint given:
    /// nothing was written; read the record again.
    Changed,
    /// No record under the key: nothing was written.
    Unknown,
}

/// 128 bits from the OS random source.
pub(crate) fn issue_token() -> Result<[u8; ISSUE_TOKEN_BYTES], StoreError> {
    let mut bytes = [0u8; ISSUE_TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::unavailable(format!("os random source failed: {e}")))?;
    Ok(bytes)
}

/// Refuses a grant the store could not hold before anything is sent:
/// `issue` and an approval of a proposal, which issues its grant, alike.
pub(crate) fn check_grant(approval: &Approval) -> Result<(), StoreError> {
    if approval.action_digest != approval.action.digest() {
        return Err(StoreError::Rejected {
            message: "action digest does not match the action".to_owned(),
        });
    }
    if !(1..=MAX_ATTEMPT_LIMIT).contains(&approval.attempt_limit) {
        return Err(StoreError::Rejected {
            message: format!(
                "attempt limit must be 1 to {MAX_ATTEMPT_LIMIT}, got {}",
                approval.attempt_limit
            ),
        });
    }
    Ok(())
}

/// The record a reply carries (as it was before the call), the attempts
/// abandoned on it and what the script saw, read strictly.
fn reply_record(
    script: GrantScript,
    id: &ApprovalId,
    key: &str,
    reply: &Reply,
) -> Result<(StoredGrant, Vec<AttemptId>, Seen), StoreError> {
    reply_record_after(script, id, key, reply, None)
}

/// [`reply_record`], reading only what follows `head` when the record
/// starts with it (see [`record::decode_after_head`]).
fn reply_record_after(
    script: GrantScript,
    id: &ApprovalId,
    key: &str,
    reply: &Reply,
    head: Option<&Head>,
) -> Result<(StoredGrant, Vec<AttemptId>, Seen), StoreError> {
    match reply.items.as_slice() {
        [Value::BulkString(raw), seen] => {
            let decoded = match head.and_then(|head| record::decode_after_head(key, raw, head)) {
                Some(decoded) => decoded,
                None => record::decode(id, key, raw)?,
            };
            Ok((
                decoded.grant,
                decoded.abandoned,
                parse_seen(script, key, Some(seen))?,
            ))
        }
        _ => Err(StoreError::corrupt(
            key,
            format!("the {} script replied without the record", script.name()),
        )),
    }
}

/// The outcome a consume script's status names, and whether the call
/// wrote a new state (`Some`) or a new count of failed attempts.
fn consume_status(status: &str) -> Option<ConsumeOutcome> {
    Some(match status {
        "consumed" => ConsumeOutcome::Consumed { replay: false },
        "replay" => ConsumeOutcome::Consumed { replay: true },
        "stale_revoked" => ConsumeOutcome::Stale(StaleReason::Revoked),
        "stale_consumed" => ConsumeOutcome::Stale(StaleReason::Consumed),
        "stale_expired" => ConsumeOutcome::Stale(StaleReason::Expired),
        "stale_mismatch" => ConsumeOutcome::Stale(StaleReason::Mismatch),
        "stale_abandoned" => ConsumeOutcome::Stale(StaleReason::Abandoned),
        "stale_stopped" => ConsumeOutcome::Stale(StaleReason::Stopped),
        "stale_locked" | "locked" => ConsumeOutcome::Stale(StaleReason::Locked),
        _ => return None,
    })
}

/// Whether a consume script's answer is exactly what [`decide_consume`]
/// rules for the record it read: the outcome, and the write (a new state,
/// a new count of failed attempts) the status names.
fn consume_agrees(status: &str, outcome: ConsumeOutcome, decision: &ConsumeDecision) -> bool {
    let writes_state = matches!(status, "consumed" | "locked");
    let counts = matches!(status, "stale_mismatch" | "locked");
    decision.outcome == outcome
        && decision.state.is_some() == writes_state
        && decision.failed_attempts.is_some() == counts
        && (status != "locked" || decision.state == Some(GrantState::Locked))
}

impl RedisApprovalStore {
    /// The slot and validated fingerprint of grant `id`, when this store
    /// has both, and the head of its record when this store issued it.
    fn cached_fingerprint(&self, id: &ApprovalId) -> Option<(Slot, String, Option<Arc<Head>>)> {
        let (tag, fingerprint, head) = self.slots.validated(id)?;
        Some((self.slot_of_tag(tag), fingerprint, head))
    }

    /// Reads grant `id` in `slot` with the get script and validates all of
    /// it (`None` when the slot holds no such grant): a record the store
    /// cannot read back is [`StoreError::Corrupt`] here, before any script
    /// may write to it. Returns the record, the fingerprint of its fixed
    /// fields, which consume and revoke hand to their script so that it
    /// writes only to this very record, and whether it is stopped.
    async fn read_in(&self, slot: &Slot, id: &ApprovalId) -> Result<Option<Read>, StoreError> {
        let key = slot.grant_key(id);
        let reply = self
            .run_read(
                GrantScript::Get,
                &[&key],
                &[id.as_str().as_bytes(), slot.prefix.as_bytes()],
            )
            .await?;
        match (reply.status.as_str(), reply.items.as_slice()) {
            ("missing", []) => Ok(None),
            ("corrupt", [_] | [_, _]) => Err(corrupt_reply(&key, &reply)),
            ("found", [Value::BulkString(raw), fingerprint, seen]) => {
                let fingerprint = text(fingerprint)
                    .ok_or_else(|| unexpected_reply(GrantScript::Get, &key))?
                    .to_owned();
                let seen = parse_seen(GrantScript::Get, &key, Some(seen))?;
                if seen.moved.is_some() {
                    return Err(unexpected_reply(GrantScript::Get, &key));
                }
                let grant = record::decode(id, &key, raw)?.grant;
                Ok(Some(Read {
                    grant,
                    fingerprint,
                    stopped: seen.stopped,
                }))
            }
            _ => Err(unexpected_reply(GrantScript::Get, &key)),
        }
    }

    /// The tag that grant `id`'s pointer names, or `None` without one.
    async fn pointer_tag(&self, id: &ApprovalId) -> Result<Option<String>, StoreError> {
        self.read_pointer(&self.pointer_key(id)).await
    }

    /// The slots grant `id` may live in, best first: the one this store
    /// remembers, else `first`; then, only if the grant is not there, the
    /// one its pointer names.
    fn first_slot(&self, id: &ApprovalId, first: Option<Slot>) -> Option<Slot> {
        self.slots
            .tag(id)
            .map(|tag| self.slot_of_tag(tag))
            .or(first)
    }

    /// Finds grant `id` and reads it: in the remembered slot or `first`,
    /// else in the slot its pointer names. `None` when it is in neither.
    async fn locate(
        &self,
        id: &ApprovalId,
        first: Option<Slot>,
    ) -> Result<Option<(Slot, Read)>, StoreError> {
        let mut tried = None;
        if let Some(slot) = self.first_slot(id, first) {
            if let Some(read) = self.read_in(&slot, id).await? {
                self.slots.remember(id, &slot.tag, Some(&read.fingerprint));
                return Ok(Some((slot, read)));
            }
            tried = Some(slot.tag);
        }
        let Some(tag) = self.pointer_tag(id).await? else {
            return Ok(None);
        };
        if tried.as_deref() == Some(tag.as_str()) {
            return Ok(None);
        }
        let slot = self.slot_of_tag(tag);
        let read = self.read_in(&slot, id).await?;
        if let Some(read) = &read {
            self.slots.remember(id, &slot.tag, Some(&read.fingerprint));
        }
        Ok(read.map(|read| (slot, read)))
    }

    /// After a call moved grant `id`'s expiry to `at`: its pointer is kept
    /// as long. Best effort: the call's outcome stands whatever this answers.
    async fn keep_grant_pointer(&self, id: &ApprovalId, slot: &Slot, at: u64) {
        let key = self.pointer_key(id);
        self.keep_pointer_or_warn(&key, &slot.tag, at, "a grant")
            .await;
    }
}

impl RedisApprovalStore {
    /// Stops `run` (`Some`) or every run of `actor`: one script in the
    /// actor's slot.
    async fn stop(
        &self,
        actor: &ActorId,
        run: Option<&RunId>,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        let slot = self.slot(actor);
        let event = self
            .step_event(&slot, || NotificationEvent::run_stopped(actor, run, now))
            .await?;
        let now_text = now.as_millis().to_string();
        let (actor_fence, runs) = (slot.actor_fence_key(), slot.runs_key());
        let (mut keys, mut args) = (
            vec![actor_fence.clone(), runs],
            vec![
                run.map_or("actor", |_| "run").to_owned(),
                now_text,
                slot.prefix.clone(),
            ],
        );
        if let Some(run) = run {
            keys.push(slot.run_fence_key(run));
            keys.push(slot.live_key(run));
        }
        args.push(run.map_or("", RunId::as_str).to_owned());
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut args: Vec<&[u8]> = args.iter().map(String::as_bytes).collect();
        args.extend(event.args());
        let (reply, wait) = self.run(GrantScript::Stop, &keys, &args, true).await?;
        let fence = keys.get(2).copied().unwrap_or(&actor_fence);
        let outcome = match (reply.status.as_str(), reply.items.as_slice()) {
            ("stopped", [count, was, standing]) => {
                let number = |item| text(item).and_then(|c| c.parse::<u64>().ok());
                let parsed = number(count)
                    .zip(text(was).and_then(parse_flag))
                    .zip(number(standing));
                let ((stopped_grants, was_stopped), stopped_standing) =
                    parsed.ok_or_else(|| unexpected_reply(GrantScript::Stop, fence))?;
                StopOutcome {
                    stopped_grants,
                    stopped_standing,
                    was_stopped,
                }
            }
            ("corrupt", [_] | [_, _]) => return Err(corrupt_reply(fence, &reply)),
            _ => return Err(unexpected_reply(GrantScript::Stop, fence)),
        };
        self.hint_step(&slot, &event).await;
        tracing::info!(
            target: "countersign_store_redis",
            actor_id = %actor,
            run_id = run.map(RunId::as_str),
            stopped_grants = outcome.stopped_grants,
            stopped_standing = outcome.stopped_standing,
            was_stopped = outcome.was_stopped,
            "{}",
            if run.is_some() { "stopped a run" } else { "stopped an actor" }
        );
        self.confirm(wait)?;
        Ok(outcome)
    }

    /// Resumes the fence at `key`.
    async fn resume(&self, key: &str, what: &str) -> Result<ResumeOutcome, StoreError> {
        let (reply, wait) = self
            .run(
                GrantScript::Resume,
                &[key],
                &[self.retention_ms.as_bytes()],
                true,
            )
            .await?;
        let outcome = match (reply.status.as_str(), reply.items.as_slice()) {
            ("resumed", []) => ResumeOutcome::Resumed,
            ("not_stopped", []) => return Ok(ResumeOutcome::NotStopped),
            ("corrupt", [_] | [_, _]) => return Err(corrupt_reply(key, &reply)),
            _ => return Err(unexpected_reply(GrantScript::Resume, key)),
        };
        tracing::info!(target: "countersign_store_redis", fence = key, "resumed {what}");
        self.confirm(wait)?;
        Ok(outcome)
    }
}

impl RedisApprovalStore {
    /// Runs the consume script on grant `id` in `slot`, writing only if its
    /// fixed fields still have `fingerprint`, and checks its answer against
    /// the rules (reading the record it replies past `head`, when this
    /// store issued it and it starts with it).
    #[allow(clippy::too_many_arguments)]
    async fn consume_in(
        &self,
        slot: &Slot,
        fingerprint: &str,
        head: Option<&Head>,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<Attempt<ConsumeOutcome>, StoreError> {
        let key = slot.grant_key(id);
        let now_text = now.as_millis().to_string();
        let args: [&[u8]; 10] = [
            id.as_str().as_bytes(),
            now_text.as_bytes(),
            attempt.as_str().as_bytes(),
            binding.actor_id.as_str().as_bytes(),
            binding.run_id.as_str().as_bytes(),
            binding.url.as_bytes(),
            binding.action_digest.as_bytes(),
            self.retention_ms.as_bytes(),
            fingerprint.as_bytes(),
            slot.prefix.as_bytes(),
        ];
        let (reply, wait) = self.run(GrantScript::Consume, &[&key], &args, true).await?;
        let status = reply.status.as_str();
        let outcome = match status {
            "changed" if reply.bare() => return Ok(Attempt::Changed),
            "unknown" if reply.bare() => return Ok(Attempt::Unknown),
            "corrupt" => return Err(corrupt_reply(&key, &reply)),
            _ => consume_status(status)
                .ok_or_else(|| unexpected_reply(GrantScript::Consume, &key))?,
        };
        // The script saw a record with the very fixed fields validated
        // before; the library's own rules, applied to the record as the
        // script saw it, must reach its outcome.
        let (before, abandoned, seen) =
            reply_record_after(GrantScript::Consume, id, &key, &reply, head)?;
        let decision = decide_consume(&before, &abandoned, seen.stopped, binding, now, attempt);
        if !consume_agrees(status, outcome, &decision) {
            return Err(disagreement(&key, GrantScript::Consume, "record"));
        }
        if let Some(at) = seen.moved {
            self.keep_grant_pointer(id, slot, at).await;
        }
        if let ConsumeOutcome::Consumed { .. } = outcome {
            self.confirm(wait)?;
        }
        Ok(Attempt::Done(outcome))
    }

    /// Runs the revoke script on grant `id` in `slot`, writing only if its
    /// fixed fields still have `fingerprint`, and checks its answer against
    /// the rules.
    async fn revoke_in(
        &self,
        slot: &Slot,
        fingerprint: &str,
        id: &ApprovalId,
    ) -> Result<Attempt<RevokeOutcome>, StoreError> {
        let key = slot.grant_key(id);
        let args: [&[u8]; 4] = [
            id.as_str().as_bytes(),
            self.retention_ms.as_bytes(),
            fingerprint.as_bytes(),
            slot.prefix.as_bytes(),
        ];
        let (reply, wait) = self.run(GrantScript::Revoke, &[&key], &args, true).await?;
        let outcome = match reply.status.as_str() {
            "changed" if reply.bare() => return Ok(Attempt::Changed),
            "unknown" if reply.bare() => return Ok(Attempt::Unknown),
            "corrupt" => return Err(corrupt_reply(&key, &reply)),
            "revoked" => RevokeOutcome::Revoked,
            "already_revoked" => RevokeOutcome::AlreadyRevoked,
            "already_consumed" => RevokeOutcome::AlreadyConsumed,
            _ => return Err(unexpected_reply(GrantScript::Revoke, &key)),
        };
        let (before, _, seen) = reply_record(GrantScript::Revoke, id, &key, &reply)?;
        let state = match before.state {
            GrantState::Active if seen.stopped => GrantState::Stopped,
            state => state,
        };
        if decide_revoke(&state).0 != outcome {
            return Err(disagreement(&key, GrantScript::Revoke, "record"));
        }
        if let Some(at) = seen.moved {
            self.keep_grant_pointer(id, slot, at).await;
        }
        // Every answer but a consumed or stopped grant wrote.
        if outcome != RevokeOutcome::AlreadyConsumed && !seen.stopped {
            self.confirm(wait)?;
        }
        Ok(Attempt::Done(outcome))
    }
}

#[async_trait]
impl ApprovalStore for RedisApprovalStore {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        check_grant(&approval)?;
        let slot = self.slot(&approval.actor_id);
        let token = issue_token()?;
        // The caller's "now" of an issue is the grant's issued_at.
        let keep_from = approval
            .expires_at
            .max(approval.issued_at)
            .as_millis()
            .to_string();

        // 1. The id is claimed for this actor's slot: ids are unique over
        //    every actor, and get, revoke and abandon find the slot by it.
        let pointer = self.pointer_key(&approval.id);
        let (claim, pointer_wait) = self.claim_pointer(&pointer, &slot.tag, &keep_from).await?;
        let claimed = match claim {
            Claim::Claimed => true,
            Claim::Same => false,
            Claim::Taken => return Err(IssueError::AlreadyExists(approval.id)),
        };
        self.slots.remember(&approval.id, &slot.tag, None);

        // 2. The grant, in one step with the check of its fences.
        let key = slot.grant_key(&approval.id);
        let (actor_fence, run_fence) =
            (slot.actor_fence_key(), slot.run_fence_key(&approval.run_id));
        let (live, runs) = (slot.live_key(&approval.run_id), slot.runs_key());
        let record = record::encode_new(&approval, &token);
        let expires_at = approval.expires_at.as_millis().to_string();
        let args: [&[u8]; 8] = [
            &token,
            self.retention_ms.as_bytes(),
            keep_from.as_bytes(),
            approval.id.as_str().as_bytes(),
            approval.run_id.as_str().as_bytes(),
            expires_at.as_bytes(),
            slot.prefix.as_bytes(),
            &record,
        ];
        let keys = [
            key.as_str(),
            actor_fence.as_str(),
            run_fence.as_str(),
            live.as_str(),
            runs.as_str(),
        ];
        let (reply, wait) = self.run(GrantScript::Issue, &keys, &args, true).await?;
        match (reply.status.as_str(), reply.items.as_slice()) {
            ("issued", items @ ([] | [_])) => {
                // A new record: its fixed fields are the ones just encoded
                // from a checked `Approval` (and the generations the script
                // read), so their fingerprint is a validated one. A resent
                // call's reply names none.
                if let [fingerprint] = items {
                    let fingerprint = text(fingerprint)
                        .filter(|f| f.len() == 40)
                        .ok_or_else(|| unexpected_reply(GrantScript::Issue, &key))?;
                    self.slots
                        .remember(&approval.id, &slot.tag, Some(fingerprint));
                    self.slots
                        .remember_head(&approval.id, Head::new(record, approval.clone()));
                }
                self.confirm(pointer_wait)?;
                Ok(self.confirm(wait)?)
            }
            ("exists", []) => Err(IssueError::AlreadyExists(approval.id)),
            ("stopped", []) => {
                if claimed {
                    // Nothing is stored: the claim goes too (best effort; a
                    // pointer left behind names a slot without the grant).
                    self.release_pointer(&pointer, &slot.tag, "an issue refused as stopped")
                        .await;
                }
                Err(IssueError::Stopped)
            }
            ("corrupt", _) => Err(corrupt_reply(&key, &reply).into()),
            _ => Err(unexpected_reply(GrantScript::Issue, &key).into()),
        }
    }

    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        // One round trip when this store validated the grant's fixed
        // fields before (it issued or read it).
        if let Some((slot, fingerprint, _)) = self.cached_fingerprint(id) {
            match self.revoke_in(&slot, &fingerprint, id).await? {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Changed | Attempt::Unknown => self.slots.forget(id),
            }
        }
        let mut last_key = self.pointer_key(id);
        for _ in 0..MAX_READS {
            // Every check that can refuse the record runs here, before the
            // script may mark it; the script writes only if its fixed fields
            // are unchanged.
            let Some((slot, read)) = self.locate(id, None).await? else {
                return Ok(RevokeOutcome::Unknown);
            };
            match self.revoke_in(&slot, &read.fingerprint, id).await? {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Changed => {
                    self.slots.forget(id);
                    last_key = slot.grant_key(id);
                }
                Attempt::Unknown => return Ok(RevokeOutcome::Unknown),
            }
        }
        Err(kept_changing(&last_key, "record"))
    }

    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        Ok(self.locate(id, None).await?.map(|(_, read)| {
            let mut grant = read.grant;
            if read.stopped && grant.state == GrantState::Active {
                grant.state = GrantState::Stopped;
            }
            grant
        }))
    }

    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        // One round trip when this store validated the grant's fixed
        // fields before (it issued or read it): the script writes only if
        // they are still exactly those. The slot is the grant's own, so a
        // binding naming another actor is counted there.
        if let Some((slot, fingerprint, head)) = self.cached_fingerprint(id) {
            match self
                .consume_in(
                    &slot,
                    &fingerprint,
                    head.as_deref(),
                    id,
                    binding,
                    now,
                    attempt,
                )
                .await?
            {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Changed | Attempt::Unknown => self.slots.forget(id),
            }
        }
        // The binding names the actor, so the grant is in its slot, unless
        // the binding's actor is not the grant's (then the pointer tells).
        let hint = self.slot(&binding.actor_id);
        let mut last_key = hint.grant_key(id);
        for _ in 0..MAX_READS {
            // Every check that can refuse the record runs here, before the
            // script may mark it; the script writes only if its fixed fields
            // are unchanged.
            let Some((slot, read)) = self.locate(id, Some(hint.clone())).await? else {
                return Ok(ConsumeOutcome::Unknown);
            };
            match self
                .consume_in(&slot, &read.fingerprint, None, id, binding, now, attempt)
                .await?
            {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Changed => {
                    self.slots.forget(id);
                    last_key = slot.grant_key(id);
                }
                Attempt::Unknown => return Ok(ConsumeOutcome::Unknown),
            }
        }
        Err(kept_changing(&last_key, "record"))
    }

    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let now_text = now.as_millis().to_string();
        // The slot this store remembers (the consume it gives back found
        // it), else the pointer's: an abandon right after a consume that got
        // no answer goes out at once, behind it on the same connection.
        let mut slot = self.first_slot(id, None);
        let mut from_pointer = false;
        let (slot, reply, wait) = loop {
            let current = match slot.take() {
                Some(current) => current,
                None => match self.pointer_tag(id).await? {
                    Some(tag) => {
                        from_pointer = true;
                        self.slot_of_tag(tag)
                    }
                    None => return Ok(AbandonOutcome::Unknown),
                },
            };
            let key = current.grant_key(id);
            let args: [&[u8]; 5] = [
                id.as_str().as_bytes(),
                now_text.as_bytes(),
                attempt.as_str().as_bytes(),
                self.retention_ms.as_bytes(),
                current.prefix.as_bytes(),
            ];
            // At once: behind the consume it gives back, on the client that
            // carried it, even while that client is being replaced.
            let (reply, wait) = self
                .run_with(GrantScript::Abandon, &[&key], &args, true, true)
                .await?;
            if reply.status == "unknown" && reply.bare() {
                if from_pointer {
                    return Ok(AbandonOutcome::Unknown);
                }
                // Not where this store remembered it: ask the pointer, once.
                match self.pointer_tag(id).await? {
                    Some(tag) if tag != current.tag => {
                        from_pointer = true;
                        slot = Some(self.slot_of_tag(tag));
                        continue;
                    }
                    _ => return Ok(AbandonOutcome::Unknown),
                }
            }
            break (current, reply, wait);
        };
        let key = slot.grant_key(id);
        let outcome = match reply.status.as_str() {
            "corrupt" => return Err(corrupt_reply(&key, &reply)),
            "restored" => AbandonOutcome::Usable { restored: true },
            "usable" => AbandonOutcome::Usable { restored: false },
            "consumed_by_other" => AbandonOutcome::ConsumedByOther,
            "expired" => AbandonOutcome::Expired,
            "revoked" | "retired" => AbandonOutcome::Revoked,
            "stopped" => AbandonOutcome::Stopped,
            _ => return Err(unexpected_reply(GrantScript::Abandon, &key)),
        };
        self.slots.remember(id, &slot.tag, None);
        let (before, abandoned, seen) = reply_record(GrantScript::Abandon, id, &key, &reply)?;
        let decision = decide_abandon(&before, &abandoned, seen.stopped, now, attempt);
        // `retired` is the revoke that a full list causes: it must be exactly that.
        let retired = reply.status == "retired";
        if decision.outcome != outcome || retired != (decision.state == Some(GrantState::Revoked)) {
            return Err(disagreement(&key, GrantScript::Abandon, "record"));
        }
        if let Some(at) = seen.moved {
            self.keep_grant_pointer(id, &slot, at).await;
        }
        // Every answer but an untouched revoked or stopped grant wrote.
        let untouched = matches!(outcome, AbandonOutcome::Revoked | AbandonOutcome::Stopped);
        if !untouched || retired {
            self.confirm(wait)?;
        }
        Ok(outcome)
    }

    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        self.stop(actor, Some(run), now).await
    }

    async fn stop_actor(&self, actor: &ActorId, now: Timestamp) -> Result<StopOutcome, StoreError> {
        self.stop(actor, None, now).await
    }

    async fn resume_run(&self, actor: &ActorId, run: &RunId) -> Result<ResumeOutcome, StoreError> {
        self.resume(&self.run_fence_key(actor, run), "a run").await
    }

    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError> {
        self.resume(&self.actor_fence_key(actor), "an actor").await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn consume_answers_agree_with_the_rules_only_when_they_write_what_the_rules_say() {
        let decision = |outcome, state, failed| ConsumeDecision {
            outcome,
            state,
            failed_attempts: failed,
        };
        let locked = ConsumeOutcome::Stale(StaleReason::Locked);
        let lock = decision(locked, Some(GrantState::Locked), Some(5));
        assert!(consume_agrees("locked", locked, &lock));
        assert!(!consume_agrees("stale_locked", locked, &lock));
        let already = decision(locked, None, None);
        assert!(consume_agrees("stale_locked", locked, &already));
        assert!(!consume_agrees("locked", locked, &already));
        let mismatch = ConsumeOutcome::Stale(StaleReason::Mismatch);
        assert!(consume_agrees(
            "stale_mismatch",
            mismatch,
            &decision(mismatch, None, Some(1))
        ));
        assert!(!consume_agrees(
            "stale_mismatch",
            mismatch,
            &decision(mismatch, None, None)
        ));
    }
}
