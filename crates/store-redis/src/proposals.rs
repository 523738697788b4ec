//! Proposals in Redis: the [`ProposalStore`] half of the store.
//!
//! A proposal lives in its actor's slot, beside the actor's grants and stop
//! fences, so that approving it and issuing its grant is one Lua script:
//!
//! ```text
//! {prefix}:{a<tag>}:proposal:<id>     string: the proposal, one record (proposal format 2)
//! {prefix}:{a<tag>}:pending:<run id>  zset: the run's undecided proposals, oldest first
//! {prefix}:pid:{<id>}                 string: the actor tag of proposal <id> (its own slot)
//! ```
//!
//! The record keeps the run's and the actor's fence generations at
//! propose, read by the propose script from the fences the grant scripts
//! use: a stop moves them on, and every proposal made before it can never
//! be approved. The pointer, claimed first (and never overwritten), keeps
//! ids unique over all actors and lets `get_proposal`, `approve_proposal`
//! and `deny_proposal`, which know only the id, find the slot.

use async_trait::async_trait;
use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApproveError, ApproverId, AttemptId, Decision,
    DecisionOutcome, IssueError, NotificationEvent, Proposal, ProposalId, ProposalState,
    ProposalStore, ProposeError, RunId, StandingGrant, StandingId, StandingKey,
    StandingRevokeOutcome, StoreError, StoredProposal, StoredStanding, Timestamp, UseOutcome,
    decide_proposal,
};
use redis::Value;

use crate::grants::{check_grant, issue_token};
use crate::keys::Slot;
use crate::pointer::{Claim, Created, NewRecord};
use crate::proposal_record;
use crate::record;
use crate::reply::{
    MAX_READS, Reply, Seen, corrupt_reply, disagreement, found_reply, kept_changing, parse_seen,
    unexpected_reply,
};
use crate::scripts::GrantScript;
use crate::store::RedisApprovalStore;

/// How much of a record the get script hands back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadMode {
    /// The whole record, screenshot included.
    Full,
    /// The head alone: everything but the screenshot.
    Head,
}

impl ReadMode {
    fn word(self) -> &'static [u8] {
        match self {
            ReadMode::Full => b"full",
            ReadMode::Head => b"head",
        }
    }
}

/// A proposal as the get script read it and the library validated it.
struct Read {
    /// The proposal in its stored state (without its screenshot when read
    /// with [`ReadMode::Head`]).
    stored: StoredProposal,
    /// The fingerprint of its fixed fields, which a decision script checks
    /// before it writes.
    fingerprint: String,
    /// Whether its run or actor was stopped since it was made.
    stopped: bool,
}

/// The claim of a grant's pointer an approval made, released again when
/// the approval stored nothing.
struct GrantClaim {
    key: String,
    tag: String,
    /// Whether this call wrote the pointer (not just found it naming the slot).
    claimed: bool,
    /// Whether the pointer must stay: the grant may be stored (the approve
    /// script answered that it stored it or that the id is taken, or its
    /// answer never came).
    keep: bool,
    wait: Option<Value>,
}

/// What a decision script's answer came to.
enum Answer {
    /// The outcome, agreeing with the rules.
    Outcome(DecisionOutcome),
    /// The rules would approve, but the grant id is taken.
    GrantExists,
}

/// Reads a decision script's answer: the proposal's head as the script saw
/// it and what it saw, and checks the status against what
/// [`decide_proposal`] rules for that proposal, as the grant code checks
/// consume answers against `decide_consume`.
fn read_answer(
    script: GrantScript,
    id: &ProposalId,
    key: &str,
    reply: &Reply,
    decision: Decision<'_>,
    now: Timestamp,
) -> Result<(Answer, Seen), StoreError> {
    let status = reply.status.as_str();
    let (head, seen) = match reply.items.as_slice() {
        [head, seen] => (head, seen),
        [head, _fingerprint, seen] if status == "approved" => (head, seen),
        _ => return Err(unexpected_reply(script, key)),
    };
    let Value::BulkString(head) = head else {
        return Err(unexpected_reply(script, key));
    };
    let before = proposal_record::decode_head(Some(id), key, head)?;
    let seen = parse_seen(script, key, Some(seen))?;
    if seen.moved.is_some() && status != "approved" {
        return Err(unexpected_reply(script, key));
    }
    let ruled = decide_proposal(&before, decision, seen.stopped, now);
    let approve = matches!(decision, Decision::Approve(_));
    let agrees = match (status, &ruled.outcome) {
        ("approved" | "grant_exists", DecisionOutcome::Approved) => approve,
        ("denied", DecisionOutcome::Denied) => !approve,
        ("decided", DecisionOutcome::AlreadyDecided(_))
        | ("expired", DecisionOutcome::Expired)
        | ("stopped", DecisionOutcome::Stopped) => true,
        _ => false,
    };
    if !agrees {
        return Err(disagreement(key, script, "proposal"));
    }
    let answer = if status == "grant_exists" {
        Answer::GrantExists
    } else {
        Answer::Outcome(ruled.outcome)
    };
    Ok((answer, seen))
}

/// Marks whether the grant pointer an approval claimed must stay (see
/// [`GrantClaim::keep`]), once it claimed one.
fn set_keep(claim: &mut Option<GrantClaim>, keep: bool) {
    if let Some(claim) = claim.as_mut() {
        claim.keep = keep;
    }
}

impl RedisApprovalStore {
    /// The slot that proposal `id`'s pointer names, or `None` without one.
    async fn proposal_slot(&self, id: &ProposalId) -> Result<Option<Slot>, StoreError> {
        let key = self.proposal_pointer_key(id);
        Ok(self
            .read_pointer(&key)
            .await?
            .map(|tag| self.slot_of_tag(tag)))
    }

    /// Releases the grant pointer an approval claimed, if it claimed one
    /// and stored nothing under it.
    async fn release_grant_claim(&self, claim: Option<&GrantClaim>) {
        if let Some(claim) = claim.filter(|c| c.claimed && !c.keep) {
            self.release_pointer(&claim.key, &claim.tag, "a grant an approval did not issue")
                .await;
        }
    }

    /// After an approval moved the proposal's expiry to `at`: its pointer is
    /// kept as long. Best effort: the approval stands whatever this answers.
    async fn keep_proposal_pointer(&self, id: &ProposalId, slot: &Slot, at: u64) {
        let key = self.proposal_pointer_key(id);
        self.keep_pointer_or_warn(&key, &slot.tag, at, "a proposal")
            .await;
    }

    /// Reads proposal `id` in `slot` with the get script and validates it
    /// (`None` when the slot holds no such proposal): a record the store
    /// cannot read back is [`StoreError::Corrupt`] here, before any script
    /// may write to it.
    async fn read_proposal(
        &self,
        slot: &Slot,
        id: &ProposalId,
        mode: ReadMode,
    ) -> Result<Option<Read>, StoreError> {
        let script = GrantScript::GetProposal;
        let key = slot.proposal_key(id);
        let reply = self
            .run_read(
                script,
                &[&key],
                &[id.as_str().as_bytes(), slot.prefix.as_bytes(), mode.word()],
            )
            .await?;
        let Some(found) = found_reply(script, &key, reply)? else {
            return Ok(None);
        };
        let stored = match mode {
            ReadMode::Full => proposal_record::decode(id, &key, &found.raw)?,
            ReadMode::Head => proposal_record::decode_head(Some(id), &key, &found.raw)?,
        };
        // Every key of a decision is in the actor's slot.
        if !slot.holds(&stored.proposal.actor_id) {
            return Err(StoreError::corrupt(
                key,
                "the proposal's actor is not the actor of its slot",
            ));
        }
        Ok(Some(Read {
            stored,
            fingerprint: found.fingerprint,
            stopped: found.stopped,
        }))
    }

    /// [`approve_proposal`](ProposalStore::approve_proposal) in the slot the
    /// pointer named. `claim` is the grant pointer's claim once made, so
    /// that the caller can release it when nothing was stored.
    async fn approve_in(
        &self,
        slot: &Slot,
        id: &ProposalId,
        approval: &Approval,
        now: Timestamp,
        claim: &mut Option<GrantClaim>,
    ) -> Result<DecisionOutcome, ApproveError> {
        let script = GrantScript::Approve;
        let now_text = now.as_millis().to_string();
        let mut last_key = slot.proposal_key(id);
        for _ in 0..MAX_READS {
            // 1. The proposal's head, validated by the library before any
            //    script may write to it (the script checks the screenshot
            //    after it as strictly); its fields never change, so checking
            //    the grant against this read is checking it against the
            //    proposal.
            let Some(read) = self.read_proposal(slot, id, ReadMode::Head).await? else {
                return Ok(DecisionOutcome::Unknown);
            };
            let proposal = &read.stored.proposal;
            if !proposal.is_approved_by(approval) {
                return Err(ApproveError::NotForProposal);
            }
            check_grant(approval)?;
            let ruled =
                decide_proposal(&read.stored, Decision::Approve(approval), read.stopped, now);
            if ruled.state.is_none() {
                // Decided, expired or stopped: nothing to write.
                return Ok(ruled.outcome);
            }

            // 2. The grant's id, claimed for this actor's slot exactly as
            //    `issue` claims it: ids are unique over every actor.
            let actor = &proposal.actor_id;
            let keep_from = approval
                .expires_at
                .max(approval.issued_at)
                .as_millis()
                .to_string();
            if claim.is_none() {
                let key = self.pointer_key(&approval.id);
                let (answer, wait) = self.claim_pointer(&key, &slot.tag, &keep_from).await?;
                if answer == Claim::Taken {
                    return Err(ApproveError::GrantExists(approval.id.clone()));
                }
                *claim = Some(GrantClaim {
                    key,
                    tag: slot.tag.clone(),
                    claimed: answer == Claim::Claimed,
                    keep: false,
                    wait,
                });
            }

            // 3. One script: the proposal checked again, the grant issued by
            //    issue.lua's own body, the proposal approved; both or neither.
            let key = slot.proposal_key(id);
            let keys = [
                key.clone(),
                slot.pending_key(&proposal.run_id),
                self.grant_key(actor, &approval.id),
                self.actor_fence_key(actor),
                self.run_fence_key(actor, &approval.run_id),
                self.live_key(actor, &approval.run_id),
                self.runs_key(actor),
            ];
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let token = issue_token()?;
            let grant_record = record::encode_new(approval, &token);
            let expires_at = approval.expires_at.as_millis().to_string();
            let grant_slot = self.slot_prefix(actor);
            let approver = approval.approver.as_ref().map_or("", |a| a.id.as_str());
            let event = self
                .step_event(slot, || NotificationEvent::decided(proposal, now))
                .await?;
            let [event_id, event_body, event_due] = event.args();
            let args: [&[u8]; 18] = [
                id.as_str().as_bytes(),
                now_text.as_bytes(),
                read.fingerprint.as_bytes(),
                slot.prefix.as_bytes(),
                self.retention_ms.as_bytes(),
                approval.id.as_str().as_bytes(),
                approver.as_bytes(),
                // What issue takes, in its order.
                &token,
                self.retention_ms.as_bytes(),
                keep_from.as_bytes(),
                approval.id.as_str().as_bytes(),
                approval.run_id.as_str().as_bytes(),
                expires_at.as_bytes(),
                grant_slot.as_bytes(),
                &grant_record,
                event_id,
                event_body,
                event_due,
            ];
            // Until the answer says otherwise, the grant may be stored.
            set_keep(claim, true);
            let (reply, wait) = self.run(script, &keys, &args, true).await?;
            // Every other answer comes before the script writes anything.
            set_keep(
                claim,
                matches!(reply.status.as_str(), "approved" | "grant_exists"),
            );
            match reply.status.as_str() {
                "changed" if reply.items.is_empty() => {
                    last_key = key;
                    continue;
                }
                "unknown" if reply.items.is_empty() => return Ok(DecisionOutcome::Unknown),
                "corrupt" => return Err(corrupt_reply(&key, &reply).into()),
                _ => {}
            }
            let (answer, seen) =
                read_answer(script, id, &key, &reply, Decision::Approve(approval), now)?;
            return match answer {
                Answer::GrantExists => Err(ApproveError::GrantExists(approval.id.clone())),
                Answer::Outcome(DecisionOutcome::Approved) => {
                    self.hint_step(slot, &event).await;
                    if let Some(at) = seen.moved {
                        self.keep_proposal_pointer(id, slot, at).await;
                    }
                    if let Some(claim) = claim.as_mut() {
                        self.confirm(claim.wait.take())?;
                    }
                    self.confirm(wait)?;
                    Ok(DecisionOutcome::Approved)
                }
                Answer::Outcome(outcome) => Ok(outcome),
            };
        }
        Err(kept_changing(&last_key, "proposal").into())
    }

    /// [`deny_proposal`](ProposalStore::deny_proposal) in the slot the
    /// pointer named.
    async fn deny_in(
        &self,
        slot: &Slot,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError> {
        let script = GrantScript::Deny;
        let now_text = now.as_millis().to_string();
        let by_text = by.map_or("", ApproverId::as_str);
        let mut last_key = slot.proposal_key(id);
        for _ in 0..MAX_READS {
            // Validated by the library before the script may write to it (as
            // for an approval).
            let Some(read) = self.read_proposal(slot, id, ReadMode::Head).await? else {
                return Ok(DecisionOutcome::Unknown);
            };
            let ruled = decide_proposal(&read.stored, Decision::Deny(by), read.stopped, now);
            if ruled.state.is_none() {
                return Ok(ruled.outcome);
            }
            let key = slot.proposal_key(id);
            let pending = slot.pending_key(&read.stored.proposal.run_id);
            let event = self
                .step_event(slot, || {
                    NotificationEvent::decided(&read.stored.proposal, now)
                })
                .await?;
            let [event_id, event_body, event_due] = event.args();
            let args: [&[u8]; 8] = [
                id.as_str().as_bytes(),
                now_text.as_bytes(),
                read.fingerprint.as_bytes(),
                slot.prefix.as_bytes(),
                by_text.as_bytes(),
                event_id,
                event_body,
                event_due,
            ];
            let (reply, wait) = self.run(script, &[&key, &pending], &args, true).await?;
            match reply.status.as_str() {
                "changed" if reply.items.is_empty() => {
                    last_key = key;
                    continue;
                }
                "unknown" if reply.items.is_empty() => return Ok(DecisionOutcome::Unknown),
                "corrupt" => return Err(corrupt_reply(&key, &reply)),
                _ => {}
            }
            let (answer, _) = read_answer(script, id, &key, &reply, Decision::Deny(by), now)?;
            return match answer {
                Answer::Outcome(DecisionOutcome::Denied) => {
                    self.hint_step(slot, &event).await;
                    self.confirm(wait)?;
                    Ok(DecisionOutcome::Denied)
                }
                Answer::Outcome(outcome) => Ok(outcome),
                Answer::GrantExists => Err(disagreement(&key, script, "proposal")),
            };
        }
        Err(kept_changing(&last_key, "proposal"))
    }
}

#[async_trait]
impl ProposalStore for RedisApprovalStore {
    async fn propose(&self, proposal: Proposal) -> Result<(), ProposeError> {
        // Refused before anything is sent: a proposal this store could not
        // read back as it was given.
        let new = proposal_record::encode_new(&proposal)?;
        let slot = self.slot(&proposal.actor_id);
        let keep_from = proposal
            .expires_at
            .max(proposal.proposed_at)
            .as_millis()
            .to_string();

        let (actor, run) = (&proposal.actor_id, &proposal.run_id);
        let keys = [
            slot.proposal_key(&proposal.id),
            self.actor_fence_key(actor),
            self.run_fence_key(actor, run),
            slot.pending_key(run),
        ];
        let proposed_at = proposal.proposed_at.as_millis().to_string();
        let event = self
            .step_event(&slot, || NotificationEvent::created(&proposal))
            .await?;
        let [event_id, event_body, event_due] = event.args();
        let args: [&[u8]; 11] = [
            proposal.id.as_str().as_bytes(),
            run.as_str().as_bytes(),
            slot.prefix.as_bytes(),
            self.retention_ms.as_bytes(),
            keep_from.as_bytes(),
            proposed_at.as_bytes(),
            &new.fixed,
            &new.screenshot,
            event_id,
            event_body,
            event_due,
        ];
        let created = self
            .create(NewRecord {
                pointer: self.proposal_pointer_key(&proposal.id),
                slot: &slot,
                keep_from: &keep_from,
                script: GrantScript::Propose,
                stored: "proposed",
                keys: &keys,
                args: &args,
                what: "a proposal",
            })
            .await?;
        match created {
            Created::Stored => {
                self.hint_step(&slot, &event).await;
                Ok(())
            }
            Created::Exists => Err(ProposeError::AlreadyExists(proposal.id)),
            Created::Stopped => Err(ProposeError::Stopped),
        }
    }

    async fn get_proposal(&self, id: &ProposalId) -> Result<Option<StoredProposal>, StoreError> {
        let Some(slot) = self.proposal_slot(id).await? else {
            return Ok(None);
        };
        Ok(self
            .read_proposal(&slot, id, ReadMode::Full)
            .await?
            .map(|read| read.stored))
    }

    async fn pending_proposals(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredProposal>, StoreError> {
        let script = GrantScript::ListProposals;
        let (key, heads) = self
            .run_list(script, (actor, run), Slot::pending_key, now)
            .await?;
        let mut pending = Vec::with_capacity(heads.len());
        for head in heads {
            let stored = proposal_record::decode_head(None, &key, &head)?;
            let proposal = &stored.proposal;
            if proposal.actor_id != *actor || proposal.run_id != *run {
                return Err(StoreError::corrupt(
                    key,
                    "the pending index lists a proposal of another actor or run",
                ));
            }
            // The script left these out already; this keeps the list right
            // even if it did not.
            if stored.state == ProposalState::Pending && !proposal.is_expired_at(now) {
                pending.push(stored);
            }
        }
        Ok(pending)
    }

    async fn approve_proposal(
        &self,
        id: &ProposalId,
        approval: Approval,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError> {
        let Some(slot) = self.proposal_slot(id).await? else {
            return Ok(DecisionOutcome::Unknown);
        };
        let mut claim = None;
        let answer = self.approve_in(&slot, id, &approval, now, &mut claim).await;
        // The grant pointer this call claimed goes again when nothing was
        // stored under it, as `issue` releases the claim of an issue its
        // script refused; a grant id found taken keeps the pointer that
        // names its grant, and a call whose effect is unknown keeps it too
        // (a pointer naming a slot without the grant reads as unknown).
        self.release_grant_claim(claim.as_ref()).await;
        answer
    }

    async fn deny_proposal(
        &self,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError> {
        let Some(slot) = self.proposal_slot(id).await? else {
            return Ok(DecisionOutcome::Unknown);
        };
        self.deny_in(&slot, id, by, now).await
    }

    // Standing grants: `standing.rs`.

    async fn issue_standing(&self, grant: StandingGrant) -> Result<(), IssueError> {
        self.put_standing(grant).await
    }

    async fn get_standing(&self, id: &StandingId) -> Result<Option<StoredStanding>, StoreError> {
        self.read_standing(id).await
    }

    async fn standing_grants(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError> {
        self.list_standing(actor, run, now).await
    }

    async fn use_standing(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError> {
        self.take_use(id, key, now, attempt).await
    }

    async fn give_back_use(
        &self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        self.give_back(id, attempt, now).await
    }

    async fn revoke_standing(&self, id: &StandingId) -> Result<StandingRevokeOutcome, StoreError> {
        self.end_standing(id).await
    }
}
