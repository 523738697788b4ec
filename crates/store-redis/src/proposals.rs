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
    ActorId, Approval, ApproveError, ApproverId, Decision, DecisionOutcome, MAX_ATTEMPT_LIMIT,
    MAX_LISTED_PROPOSALS, Proposal, ProposalId, ProposalState, ProposalStore, ProposeError, RunId,
    StoreError, StoredProposal, Timestamp, decide_proposal,
};
use redis::Value;

use crate::proposal_record;
use crate::record::{self, text};
use crate::scripts::GrantScript;
use crate::store::{RedisApprovalStore, Reply, corrupt_reply, issue_token, unexpected_reply};

/// How many times a decision reads a proposal again when its fixed fields
/// changed between the read and the write (only a record deleted and made
/// again under the same id, or altered by hand, does that).
const MAX_READS: usize = 4;

/// One actor's slot as the proposal code names it: its tag and the prefix
/// of its keys, `{prefix}:{a<tag>}`.
struct Place {
    tag: String,
    prefix: String,
}

impl Place {
    fn proposal_key(&self, id: &ProposalId) -> String {
        format!("{}:proposal:{}", self.prefix, id.as_str())
    }

    fn pending_key(&self, run: &RunId) -> String {
        format!("{}:pending:{}", self.prefix, run.as_str())
    }
}

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

/// What a script saw besides the record: whether the proposal was stopped
/// since it was made, and its record's new expiry when the call moved it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    stopped: bool,
    moved: Option<u64>,
}

/// The answer to a claim of a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// This call wrote it.
    Claimed,
    /// It already named this slot.
    Same,
    /// It names another slot, or holds something else.
    Taken,
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

fn disagreement(key: &str, script: GrantScript) -> StoreError {
    StoreError::corrupt(
        key,
        format!(
            "the {} script's outcome disagrees with the proposal it read",
            script.name()
        ),
    )
}

fn kept_changing(key: &str) -> StoreError {
    StoreError::unavailable(format!(
        "{key}: the proposal changed between each read and write; try again"
    ))
}

fn parse_flag(word: &str) -> Option<bool> {
    match word {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

fn parse_seen(script: GrantScript, key: &str, value: &Value) -> Result<Seen, StoreError> {
    let unexpected = || unexpected_reply(script, key);
    let Value::Array(items) = value else {
        return Err(unexpected());
    };
    let words: Vec<&str> = items
        .iter()
        .map(|item| text(item).ok_or_else(unexpected))
        .collect::<Result<_, _>>()?;
    match words.as_slice() {
        ["stopped", stopped] => Ok(Seen {
            stopped: parse_flag(stopped).ok_or_else(unexpected)?,
            moved: None,
        }),
        ["stopped", stopped, "moved", at] => Ok(Seen {
            stopped: parse_flag(stopped).ok_or_else(unexpected)?,
            moved: Some(at.parse().map_err(|_| unexpected())?),
        }),
        _ => Err(unexpected()),
    }
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
    let seen = parse_seen(script, key, seen)?;
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
        return Err(disagreement(key, script));
    }
    let answer = if status == "grant_exists" {
        Answer::GrantExists
    } else {
        Answer::Outcome(ruled.outcome)
    };
    Ok((answer, seen))
}

fn set_keep(claim: &mut Option<GrantClaim>, keep: bool) {
    if let Some(claim) = claim.as_mut() {
        claim.keep = keep;
    }
}

/// Refuses a grant the store could not hold, as `issue` does.
fn check_grant(approval: &Approval) -> Result<(), StoreError> {
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

impl RedisApprovalStore {
    /// The key of proposal `id` of `actor`:
    /// `{prefix}:{a<tag>}:proposal:<id>`, in the actor's slot with its
    /// grants and fences.
    pub fn proposal_key(&self, actor: &ActorId, id: &ProposalId) -> String {
        self.place(actor).proposal_key(id)
    }

    /// The index of `run`'s undecided proposals of `actor`:
    /// `{prefix}:{a<tag>}:pending:<run id>`, a sorted set whose members
    /// `<proposed_at as 20 digits>:<id>` (all of score 0) sort oldest first.
    pub fn pending_key(&self, actor: &ActorId, run: &RunId) -> String {
        self.place(actor).pending_key(run)
    }

    /// The key naming the slot of proposal `id`: `{prefix}:pid:{<id>}` (the
    /// id is its hash tag), a string holding the actor's tag.
    pub fn proposal_pointer_key(&self, id: &ProposalId) -> String {
        format!("{}:pid:{{{}}}", self.prefix(), id.as_str())
    }

    fn place(&self, actor: &ActorId) -> Place {
        Place {
            tag: Self::actor_tag(actor),
            prefix: self.slot_prefix(actor),
        }
    }

    /// The slot of a tag a pointer named, laid out as
    /// [`slot_prefix`](Self::slot_prefix) lays out an actor's.
    fn place_of_tag(&self, tag: String) -> Place {
        let prefix = format!("{}:{{a{tag}}}", self.prefix());
        Place { tag, prefix }
    }

    /// The slot that proposal `id`'s pointer names, or `None` without one.
    async fn proposal_place(&self, id: &ProposalId) -> Result<Option<Place>, StoreError> {
        let key = self.proposal_pointer_key(id);
        let (reply, _) = self
            .run(GrantScript::Pointer, &[&key], &[b"read"], false)
            .await?;
        match (reply.status.as_str(), reply.items.as_slice()) {
            ("missing", []) => Ok(None),
            ("found", [tag]) => {
                let tag = text(tag)
                    .filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
                    .ok_or_else(|| unexpected_reply(GrantScript::Pointer, &key))?;
                Ok(Some(self.place_of_tag(tag.to_owned())))
            }
            ("corrupt", [_]) => Err(corrupt_reply(&key, &reply)),
            _ => Err(unexpected_reply(GrantScript::Pointer, &key)),
        }
    }

    /// Claims the pointer at `key` for the slot `tag`, kept until
    /// `max(keep_from, server time) + retention`.
    async fn claim_pointer(
        &self,
        key: &str,
        tag: &str,
        keep_from: &str,
    ) -> Result<(Claim, Option<Value>), StoreError> {
        let (reply, wait) = self
            .run(
                GrantScript::Pointer,
                &[key],
                &[
                    b"claim",
                    tag.as_bytes(),
                    keep_from.as_bytes(),
                    self.retention_ms.as_bytes(),
                ],
                true,
            )
            .await?;
        let claim = match (reply.status.as_str(), reply.items.is_empty()) {
            ("claimed", true) => Claim::Claimed,
            ("same", true) => Claim::Same,
            ("taken", true) => Claim::Taken,
            _ => return Err(unexpected_reply(GrantScript::Pointer, key)),
        };
        Ok((claim, wait))
    }

    /// Releases the pointer at `key` when it names `tag`: the call that
    /// claimed it stored nothing. Best effort, as `issue` releases the claim
    /// of an issue refused as stopped: a pointer left behind names a slot
    /// without the record, which reads as unknown.
    async fn release_pointer(&self, key: &str, tag: &str, what: &str) {
        if let Err(error) = self
            .run(
                GrantScript::Pointer,
                &[key],
                &[b"release", tag.as_bytes()],
                false,
            )
            .await
        {
            tracing::debug!(
                target: "countersign_store_redis",
                %error,
                "could not release the pointer of {what}"
            );
        }
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
    async fn keep_proposal_pointer(&self, id: &ProposalId, place: &Place, at: u64) {
        let key = self.proposal_pointer_key(id);
        let at = at.to_string();
        if let Err(error) = self
            .run(
                GrantScript::Pointer,
                &[&key],
                &[b"keep", place.tag.as_bytes(), at.as_bytes()],
                false,
            )
            .await
        {
            tracing::warn!(
                target: "countersign_store_redis",
                proposal_id = %id,
                %error,
                "could not move the expiry of a proposal's pointer forward"
            );
        }
    }

    /// Reads proposal `id` in `place` with the get script and validates it
    /// (`None` when the slot holds no such proposal): a record the store
    /// cannot read back is [`StoreError::Corrupt`] here, before any script
    /// may write to it.
    async fn read_proposal(
        &self,
        place: &Place,
        id: &ProposalId,
        mode: ReadMode,
    ) -> Result<Option<Read>, StoreError> {
        let script = GrantScript::GetProposal;
        let key = place.proposal_key(id);
        let (reply, _) = self
            .run(
                script,
                &[&key],
                &[id.as_str().as_bytes(), place.prefix.as_bytes(), mode.word()],
                false,
            )
            .await?;
        let (raw, fingerprint, seen) = match (reply.status.as_str(), reply.items.as_slice()) {
            ("missing", []) => return Ok(None),
            ("corrupt", [_] | [_, _]) => return Err(corrupt_reply(&key, &reply)),
            ("found", [Value::BulkString(raw), fingerprint, seen]) => (raw, fingerprint, seen),
            _ => return Err(unexpected_reply(script, &key)),
        };
        let fingerprint = text(fingerprint)
            .filter(|f| f.len() == 40)
            .ok_or_else(|| unexpected_reply(script, &key))?
            .to_owned();
        let seen = parse_seen(script, &key, seen)?;
        if seen.moved.is_some() {
            return Err(unexpected_reply(script, &key));
        }
        let stored = match mode {
            ReadMode::Full => proposal_record::decode(id, &key, raw)?,
            ReadMode::Head => proposal_record::decode_head(Some(id), &key, raw)?,
        };
        // Every key of a decision is in the actor's slot: a proposal found
        // in another actor's slot is not one this store wrote there.
        if Self::actor_tag(&stored.proposal.actor_id) != place.tag {
            return Err(StoreError::corrupt(
                key,
                "the proposal's actor is not the actor of its slot",
            ));
        }
        Ok(Some(Read {
            stored,
            fingerprint,
            stopped: seen.stopped,
        }))
    }

    /// [`approve_proposal`](ProposalStore::approve_proposal) in the slot the
    /// pointer named. `claim` is the grant pointer's claim once made, so
    /// that the caller can release it when nothing was stored.
    async fn approve_in(
        &self,
        place: &Place,
        id: &ProposalId,
        approval: &Approval,
        now: Timestamp,
        claim: &mut Option<GrantClaim>,
    ) -> Result<DecisionOutcome, ApproveError> {
        let script = GrantScript::Approve;
        let now_text = now.as_millis().to_string();
        let mut last_key = place.proposal_key(id);
        for _ in 0..MAX_READS {
            // 1. The proposal's head, validated by the library before any
            //    script may write to it (the script checks the screenshot
            //    after it as strictly); its fields never change, so checking
            //    the grant against this read is checking it against the
            //    proposal.
            let Some(read) = self.read_proposal(place, id, ReadMode::Head).await? else {
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
                let (answer, wait) = self.claim_pointer(&key, &place.tag, &keep_from).await?;
                if answer == Claim::Taken {
                    return Err(ApproveError::GrantExists(approval.id.clone()));
                }
                *claim = Some(GrantClaim {
                    key,
                    tag: place.tag.clone(),
                    claimed: answer == Claim::Claimed,
                    keep: false,
                    wait,
                });
            }

            // 3. One script: the proposal checked again, the grant issued by
            //    issue.lua's own body, the proposal approved; both or neither.
            let key = place.proposal_key(id);
            let keys = [
                key.clone(),
                place.pending_key(&proposal.run_id),
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
            let slot = self.slot_prefix(actor);
            let approver = approval.approver.as_ref().map_or("", |a| a.id.as_str());
            let args: [&[u8]; 15] = [
                id.as_str().as_bytes(),
                now_text.as_bytes(),
                read.fingerprint.as_bytes(),
                place.prefix.as_bytes(),
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
                slot.as_bytes(),
                &grant_record,
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
                    if let Some(at) = seen.moved {
                        self.keep_proposal_pointer(id, place, at).await;
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
        Err(kept_changing(&last_key).into())
    }

    /// [`deny_proposal`](ProposalStore::deny_proposal) in the slot the
    /// pointer named.
    async fn deny_in(
        &self,
        place: &Place,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError> {
        let script = GrantScript::Deny;
        let now_text = now.as_millis().to_string();
        let by_text = by.map_or("", ApproverId::as_str);
        let mut last_key = place.proposal_key(id);
        for _ in 0..MAX_READS {
            // Validated by the library before the script may write to it (as
            // for an approval).
            let Some(read) = self.read_proposal(place, id, ReadMode::Head).await? else {
                return Ok(DecisionOutcome::Unknown);
            };
            let ruled = decide_proposal(&read.stored, Decision::Deny(by), read.stopped, now);
            if ruled.state.is_none() {
                return Ok(ruled.outcome);
            }
            let key = place.proposal_key(id);
            let pending = place.pending_key(&read.stored.proposal.run_id);
            let args: [&[u8]; 5] = [
                id.as_str().as_bytes(),
                now_text.as_bytes(),
                read.fingerprint.as_bytes(),
                place.prefix.as_bytes(),
                by_text.as_bytes(),
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
                    self.confirm(wait)?;
                    Ok(DecisionOutcome::Denied)
                }
                Answer::Outcome(outcome) => Ok(outcome),
                Answer::GrantExists => Err(disagreement(&key, script)),
            };
        }
        Err(kept_changing(&last_key))
    }
}

#[async_trait]
impl ProposalStore for RedisApprovalStore {
    async fn propose(&self, proposal: Proposal) -> Result<(), ProposeError> {
        // Refused before anything is sent: a proposal this store could not
        // read back as it was given.
        let new = proposal_record::encode_new(&proposal)?;
        let place = self.place(&proposal.actor_id);
        let keep_from = proposal
            .expires_at
            .max(proposal.proposed_at)
            .as_millis()
            .to_string();

        // 1. The id is claimed for this actor's slot: ids are unique over
        //    every actor, and the calls by id find the slot by it.
        let pointer = self.proposal_pointer_key(&proposal.id);
        let (claim, pointer_wait) = self.claim_pointer(&pointer, &place.tag, &keep_from).await?;
        let claimed = match claim {
            Claim::Claimed => true,
            Claim::Same => false,
            Claim::Taken => return Err(ProposeError::AlreadyExists(proposal.id)),
        };

        // 2. The proposal, in one step with the check of its fences.
        let key = place.proposal_key(&proposal.id);
        let (actor, run) = (&proposal.actor_id, &proposal.run_id);
        let keys = [
            key.clone(),
            self.actor_fence_key(actor),
            self.run_fence_key(actor, run),
            place.pending_key(run),
        ];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let proposed_at = proposal.proposed_at.as_millis().to_string();
        let args: [&[u8]; 8] = [
            proposal.id.as_str().as_bytes(),
            run.as_str().as_bytes(),
            place.prefix.as_bytes(),
            self.retention_ms.as_bytes(),
            keep_from.as_bytes(),
            proposed_at.as_bytes(),
            &new.fixed,
            &new.screenshot,
        ];
        let (reply, wait) = self.run(GrantScript::Propose, &keys, &args, true).await?;
        match (reply.status.as_str(), reply.items.is_empty()) {
            ("proposed", true) => {
                self.confirm(pointer_wait)?;
                Ok(self.confirm(wait)?)
            }
            ("exists", true) => Err(ProposeError::AlreadyExists(proposal.id)),
            ("stopped", true) => {
                if claimed {
                    self.release_pointer(&pointer, &place.tag, "a proposal refused as stopped")
                        .await;
                }
                Err(ProposeError::Stopped)
            }
            ("corrupt", _) => Err(corrupt_reply(&key, &reply).into()),
            _ => Err(unexpected_reply(GrantScript::Propose, &key).into()),
        }
    }

    async fn get_proposal(&self, id: &ProposalId) -> Result<Option<StoredProposal>, StoreError> {
        let Some(place) = self.proposal_place(id).await? else {
            return Ok(None);
        };
        Ok(self
            .read_proposal(&place, id, ReadMode::Full)
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
        let place = self.place(actor);
        let key = place.pending_key(run);
        let now_text = now.as_millis().to_string();
        let most = MAX_LISTED_PROPOSALS.to_string();
        let args: [&[u8]; 4] = [
            run.as_str().as_bytes(),
            place.prefix.as_bytes(),
            now_text.as_bytes(),
            most.as_bytes(),
        ];
        // Not durable: the script writes only to drop index entries that
        // can never be listed again.
        let (reply, _) = self.run(script, &[&key], &args, false).await?;
        let heads = match (reply.status.as_str(), reply.items.as_slice()) {
            ("listed", [Value::Array(heads)]) => heads,
            ("corrupt", [_] | [_, _]) => return Err(corrupt_reply(&key, &reply)),
            _ => return Err(unexpected_reply(script, &key)),
        };
        if heads.len() > MAX_LISTED_PROPOSALS {
            return Err(unexpected_reply(script, &key));
        }
        let mut pending = Vec::with_capacity(heads.len());
        for head in heads {
            let Value::BulkString(head) = head else {
                return Err(unexpected_reply(script, &key));
            };
            let stored = proposal_record::decode_head(None, &key, head)?;
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
        let Some(place) = self.proposal_place(id).await? else {
            return Ok(DecisionOutcome::Unknown);
        };
        let mut claim = None;
        let answer = self
            .approve_in(&place, id, &approval, now, &mut claim)
            .await;
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
        let Some(place) = self.proposal_place(id).await? else {
            return Ok(DecisionOutcome::Unknown);
        };
        self.deny_in(&place, id, by, now).await
    }
}
