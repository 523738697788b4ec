//! Standing grants in Redis: rules 8 to 14 of the [`ProposalStore`]
//! contract, each state change of one standing grant one Lua script.
//!
//! A standing grant lives in its actor's slot, beside the actor's and its
//! run's stop fences, so that a use and a stop of its run are ordered one
//! before the other, on a single server and on Redis Cluster alike:
//!
//! ```text
//! {prefix}:{a<tag>}:standing:<id>      string: the standing grant, one record (standing format 1)
//! {prefix}:{a<tag>}:standings:<run id> zset: the run's standing grants, by issued_at, then id
//! {prefix}:sid:{<id>}                  string: the actor tag of standing grant <id> (its own slot)
//! ```
//!
//! The record keeps the run's and the actor's fence generations at issue,
//! read by the issue script from the fences the grant scripts use: a stop
//! moves them on, and every standing grant issued before it gives no use
//! again. Use, give-back and revoke first read and validate the record,
//! then write only if its fixed fields still have the fingerprint of the
//! ones the library validated, so a record the store cannot read back is
//! refused and never written; every answer is checked against
//! [`decide_use`] or [`decide_give_back`] applied to the record as the
//! script saw it. The pointer, claimed first (and never overwritten), keeps
//! ids unique over all actors and lets the calls that know only the id find
//! the slot.
//!
//! [`ProposalStore`]: countersign_approval_core::ProposalStore

use countersign_approval_core::{
    AbandonOutcome, ActorId, AttemptId, GiveBackDecision, IssueError, RunId, StandingGrant,
    StandingId, StandingKey, StandingRevokeOutcome, StandingState, StoreError, StoredStanding,
    Timestamp, UseDecision, UseOutcome, decide_give_back, decide_use,
};
use redis::Value;

use crate::keys::Slot;
use crate::pointer::{Created, NewRecord};
use crate::reply::{
    MAX_READS, Reply, Seen, corrupt_reply, disagreement, found_reply, kept_changing, parse_seen,
    unexpected_reply,
};
use crate::scripts::GrantScript;
use crate::standing_record::{self, Decoded};
use crate::store::RedisApprovalStore;

/// A standing grant as the get script read it and the library validated it.
struct Read {
    /// The record, in its stored state.
    decoded: Decoded,
    /// The fingerprint of its fixed fields, which a write script checks
    /// before it writes.
    fingerprint: String,
    /// Whether its run or actor was stopped since it was issued.
    stopped: bool,
}

/// What a write script on one standing grant answered.
struct Written {
    /// The slot it lives in.
    slot: Slot,
    /// Its key.
    key: String,
    /// The script's status word.
    status: String,
    /// The record as the script saw it before the call.
    before: Decoded,
    /// What the script saw besides the record.
    seen: Seen,
    /// The `WAIT` reply, with a durability option.
    wait: Option<Value>,
}

/// `stored` as a caller sees it: `Stopped` when it was active and its run
/// or actor was stopped since it was issued (a state stores never write).
fn shown(mut stored: StoredStanding, stopped: bool) -> StoredStanding {
    stored.state = stored.state.shown(stopped);
    stored
}

/// The status the use script answers for what `decision` rules, so that
/// its answer is checked against it: the outcome and, for a mismatch or a
/// lock, whether the count of failed attempts moved.
fn use_status(decision: &UseDecision) -> String {
    let counted = decision.failed_attempts.is_some();
    match decision.outcome {
        UseOutcome::Used { replay: false, .. } => "used".to_owned(),
        UseOutcome::Used { replay: true, .. } => "replay".to_owned(),
        UseOutcome::Stale(reason) => match reason.as_str() {
            "locked" if decision.state.is_some() => "locked".to_owned(),
            "mismatch" if !counted => "held_mismatch".to_owned(),
            word => format!("stale_{word}"),
        },
        UseOutcome::Unknown => "unknown".to_owned(),
    }
}

/// The status the give-back script answers for what `decision` rules.
fn give_back_status(decision: &GiveBackDecision) -> &'static str {
    match decision.outcome {
        AbandonOutcome::Stopped => "stopped",
        AbandonOutcome::Revoked if decision.state == Some(StandingState::Revoked) => "retired",
        AbandonOutcome::Revoked => "revoked",
        AbandonOutcome::Expired => "expired",
        AbandonOutcome::Usable { restored: true } => "restored",
        AbandonOutcome::Usable { restored: false } => "usable",
        // Never ruled for a standing grant that exists.
        AbandonOutcome::ConsumedByOther | AbandonOutcome::Unknown => "",
    }
}

/// Reads the record a write script's reply carries (as it was before the
/// call) and what the script saw, strictly.
fn reply_before(
    script: GrantScript,
    id: &StandingId,
    key: &str,
    reply: &Reply,
) -> Result<(Decoded, Seen), StoreError> {
    match reply.items.as_slice() {
        [Value::BulkString(raw), seen] => Ok((
            standing_record::decode(Some(id), key, raw)?,
            parse_seen(script, key, Some(seen))?,
        )),
        _ => Err(unexpected_reply(script, key)),
    }
}

impl RedisApprovalStore {
    /// Reads standing grant `id` in `slot` with the get script and
    /// validates all of it (`None` when the slot holds no such grant): a
    /// record the store cannot read back is [`StoreError::Corrupt`] here,
    /// before any script may write to it.
    async fn read_standing_in(
        &self,
        slot: &Slot,
        id: &StandingId,
    ) -> Result<Option<Read>, StoreError> {
        let script = GrantScript::GetStanding;
        let key = slot.standing_key(id);
        let args: [&[u8]; 2] = [id.as_str().as_bytes(), slot.prefix.as_bytes()];
        let reply = self.run_read(script, &[&key], &args).await?;
        let Some(found) = found_reply(script, &key, reply)? else {
            return Ok(None);
        };
        let decoded = standing_record::decode(Some(id), &key, &found.raw)?;
        if !slot.holds(&decoded.stored.grant.actor_id) {
            return Err(StoreError::corrupt(
                key,
                "the standing grant's actor is not the actor of its slot",
            ));
        }
        Ok(Some(Read {
            decoded,
            fingerprint: found.fingerprint,
            stopped: found.stopped,
        }))
    }

    /// Finds standing grant `id` and reads it: in `hint` (the slot a use's
    /// key names), else in the slot its pointer names. `None` when it is in
    /// neither.
    async fn locate_standing(
        &self,
        id: &StandingId,
        hint: Option<&Slot>,
    ) -> Result<Option<(Slot, Read)>, StoreError> {
        if let Some(slot) = hint
            && let Some(read) = self.read_standing_in(slot, id).await?
        {
            return Ok(Some((slot.clone(), read)));
        }
        let Some(tag) = self.read_pointer(&self.standing_pointer_key(id)).await? else {
            return Ok(None);
        };
        if hint.is_some_and(|slot| slot.tag == tag) {
            return Ok(None);
        }
        let slot = self.slot_of_tag(tag);
        let read = self.read_standing_in(&slot, id).await?;
        Ok(read.map(|read| (slot, read)))
    }

    /// Runs the write `script` on standing grant `id` (found as
    /// [`locate_standing`](Self::locate_standing) finds it): its arguments
    /// are the id, the slot prefix, the fingerprint of the fixed fields
    /// just validated and the retention, then `args`. A record whose fixed
    /// fields changed in between is read again, a few times at most.
    /// `None` when there is no such standing grant.
    async fn write_standing(
        &self,
        script: GrantScript,
        id: &StandingId,
        hint: Option<&Slot>,
        args: &[&[u8]],
    ) -> Result<Option<Written>, StoreError> {
        let mut last_key = self.standing_pointer_key(id);
        for _ in 0..MAX_READS {
            let Some((slot, read)) = self.locate_standing(id, hint).await? else {
                return Ok(None);
            };
            let key = slot.standing_key(id);
            let mut all: Vec<&[u8]> = vec![
                id.as_str().as_bytes(),
                slot.prefix.as_bytes(),
                read.fingerprint.as_bytes(),
                self.retention_ms.as_bytes(),
            ];
            all.extend_from_slice(args);
            let (reply, wait) = self.run(script, &[&key], &all, true).await?;
            match reply.status.as_str() {
                "changed" if reply.bare() => {
                    last_key = key;
                    continue;
                }
                "unknown" if reply.bare() => return Ok(None),
                "corrupt" => return Err(corrupt_reply(&key, &reply)),
                _ => {}
            }
            let (before, seen) = reply_before(script, id, &key, &reply)?;
            return Ok(Some(Written {
                slot,
                key,
                status: reply.status,
                before,
                seen,
                wait,
            }));
        }
        Err(kept_changing(&last_key, "standing grant"))
    }

    /// After a write that `wrote` (or not): its pointer follows the
    /// record's new expiry, and enough replicas confirmed what it wrote.
    async fn settle(
        &self,
        id: &StandingId,
        written: Written,
        wrote: bool,
    ) -> Result<(), StoreError> {
        if let Some(at) = written.seen.moved {
            let key = self.standing_pointer_key(id);
            self.keep_pointer_or_warn(&key, &written.slot.tag, at, "a standing grant")
                .await;
        }
        if wrote {
            self.confirm(written.wait)?;
        }
        Ok(())
    }

    /// [`issue_standing`](countersign_approval_core::ProposalStore::issue_standing).
    pub(crate) async fn put_standing(&self, grant: StandingGrant) -> Result<(), IssueError> {
        // Refused before anything is sent: a standing grant this store
        // could not read back as it was given.
        let record = standing_record::encode_new(&grant)?;
        let slot = self.slot(&grant.actor_id);
        let keep_from = grant
            .expires_at
            .max(grant.issued_at)
            .as_millis()
            .to_string();

        let keys = [
            slot.standing_key(&grant.id),
            slot.actor_fence_key(),
            slot.run_fence_key(&grant.run_id),
            slot.standings_key(&grant.run_id),
        ];
        let issued_at = grant.issued_at.as_millis().to_string();
        let args: [&[u8]; 7] = [
            grant.id.as_str().as_bytes(),
            slot.prefix.as_bytes(),
            grant.run_id.as_str().as_bytes(),
            self.retention_ms.as_bytes(),
            keep_from.as_bytes(),
            issued_at.as_bytes(),
            &record,
        ];
        let created = self
            .create(NewRecord {
                pointer: self.standing_pointer_key(&grant.id),
                slot: &slot,
                keep_from: &keep_from,
                script: GrantScript::IssueStanding,
                stored: "issued",
                keys: &keys,
                args: &args,
                what: "a standing grant",
            })
            .await?;
        match created {
            Created::Stored => Ok(()),
            Created::Exists => Err(IssueError::StandingExists(grant.id)),
            Created::Stopped => Err(IssueError::Stopped),
        }
    }

    /// [`get_standing`](countersign_approval_core::ProposalStore::get_standing).
    pub(crate) async fn read_standing(
        &self,
        id: &StandingId,
    ) -> Result<Option<StoredStanding>, StoreError> {
        Ok(self
            .locate_standing(id, None)
            .await?
            .map(|(_, read)| shown(read.decoded.stored, read.stopped)))
    }

    /// [`standing_grants`](countersign_approval_core::ProposalStore::standing_grants).
    pub(crate) async fn list_standing(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError> {
        let listed = self.run_list(
            GrantScript::ListStanding,
            (actor, run),
            Slot::standings_key,
            now,
        );
        let (key, records) = listed.await?;
        let mut usable = Vec::with_capacity(records.len());
        for raw in records {
            let stored = standing_record::decode(None, &key, &raw)?.stored;
            let grant = &stored.grant;
            if grant.actor_id != *actor || grant.run_id != *run {
                return Err(StoreError::corrupt(
                    key,
                    "the standing index lists a grant of another actor or run",
                ));
            }
            // The script listed only usable ones (its fences say none is
            // stopped); this keeps the list right even if it did not.
            if stored.is_usable_at(now) {
                usable.push(stored);
            }
        }
        Ok(usable)
    }

    /// [`use_standing`](countersign_approval_core::ProposalStore::use_standing).
    pub(crate) async fn take_use(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError> {
        let script = GrantScript::UseStanding;
        let now_text = now.as_millis().to_string();
        let args: [&[u8]; 5] = [
            now_text.as_bytes(),
            attempt.as_str().as_bytes(),
            key.actor_id.as_str().as_bytes(),
            key.run_id.as_str().as_bytes(),
            key.scope.as_str().as_bytes(),
        ];
        // The key names the actor, so the grant is in its slot, unless the
        // key's actor is not the grant's (then the pointer tells).
        let hint = self.slot(&key.actor_id);
        let Some(written) = self.write_standing(script, id, Some(&hint), &args).await? else {
            return Ok(UseOutcome::Unknown);
        };
        let Decoded { stored, abandoned } = &written.before;
        let decision = decide_use(stored, abandoned, written.seen.stopped, key, now, attempt);
        if written.status != use_status(&decision) {
            return Err(disagreement(&written.key, script, "standing grant"));
        }
        let wrote = matches!(
            written.status.as_str(),
            "used" | "replay" | "locked" | "stale_mismatch"
        );
        self.settle(id, written, wrote).await?;
        Ok(decision.outcome)
    }

    /// [`give_back_use`](countersign_approval_core::ProposalStore::give_back_use).
    pub(crate) async fn give_back(
        &self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let script = GrantScript::GiveBack;
        let now_text = now.as_millis().to_string();
        let args: [&[u8]; 2] = [now_text.as_bytes(), attempt.as_str().as_bytes()];
        let Some(written) = self.write_standing(script, id, None, &args).await? else {
            return Ok(AbandonOutcome::Unknown);
        };
        let Decoded { stored, abandoned } = &written.before;
        let decision = decide_give_back(stored, abandoned, written.seen.stopped, now, attempt);
        let ruled = give_back_status(&decision);
        if ruled.is_empty() || written.status != ruled {
            return Err(disagreement(&written.key, script, "standing grant"));
        }
        // Every answer but an untouched stopped or revoked grant wrote.
        let wrote = !matches!(ruled, "stopped" | "revoked");
        self.settle(id, written, wrote).await?;
        Ok(decision.outcome)
    }

    /// [`revoke_standing`](countersign_approval_core::ProposalStore::revoke_standing).
    pub(crate) async fn end_standing(
        &self,
        id: &StandingId,
    ) -> Result<StandingRevokeOutcome, StoreError> {
        let script = GrantScript::RevokeStanding;
        let Some(written) = self.write_standing(script, id, None, &[]).await? else {
            return Ok(StandingRevokeOutcome::Unknown);
        };
        let state = shown(written.before.stored.clone(), written.seen.stopped).state;
        let outcome = match written.status.as_str() {
            "revoked" => StandingRevokeOutcome::Revoked,
            "already_ended" => StandingRevokeOutcome::AlreadyEnded,
            _ => return Err(unexpected_reply(script, &written.key)),
        };
        let revokes = state == StandingState::Active;
        if revokes != (outcome == StandingRevokeOutcome::Revoked) {
            return Err(disagreement(&written.key, script, "standing grant"));
        }
        self.settle(id, written, revokes).await?;
        Ok(outcome)
    }
}
