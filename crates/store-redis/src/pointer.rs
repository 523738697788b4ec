//! The id pointers, `{prefix}:id:{<id>}` of a grant, `{prefix}:pid:{<id>}`
//! of a proposal and `{prefix}:sid:{<id>}` of a standing grant: each holds
//! the tag of the slot its record lives in, so that ids are unique over all
//! actors and a call that knows only the id finds the slot. The pointer
//! script reads, claims, keeps and releases them.

use countersign_approval_core::StoreError;
use redis::Value;

use crate::keys::Slot;
use crate::reply::{corrupt_reply, text, unexpected_reply};
use crate::scripts::GrantScript;
use crate::store::RedisApprovalStore;

/// The answer to a claim of a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This call wrote it.
    Claimed,
    /// It already named this slot.
    Same,
    /// It names another slot, or holds something else.
    Taken,
}

/// A new record stored under an id pointer claimed first (a proposal, a
/// standing grant): what [`RedisApprovalStore::create`] takes.
pub(crate) struct NewRecord<'a> {
    /// The id's pointer key.
    pub(crate) pointer: String,
    /// The slot of the record's actor.
    pub(crate) slot: &'a Slot,
    /// `max(expires_at, made at)` in ms: the pointer is kept for the
    /// retention from then, as the record is.
    pub(crate) keep_from: &'a str,
    /// The script that stores the record, in one step with the check of
    /// its fences: it answers `stored` (below), `exists` or `stopped`.
    pub(crate) script: GrantScript,
    /// The status word of a stored record.
    pub(crate) stored: &'static str,
    /// The script's keys, the record's own first.
    pub(crate) keys: &'a [String],
    /// The script's arguments.
    pub(crate) args: &'a [&'a [u8]],
    /// What the record is, for a log line (`"a proposal"`).
    pub(crate) what: &'static str,
}

/// How [`RedisApprovalStore::create`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Created {
    /// The record is stored (and replicated as the durability option asks).
    Stored,
    /// The id is taken, by this record's actor or another's: nothing
    /// changed.
    Exists,
    /// The record's run or actor is stopped: nothing is stored.
    Stopped,
}

impl RedisApprovalStore {
    /// Stores a new record: claims its id's pointer for its slot (ids are
    /// unique over every actor, and the calls by id find the slot by it),
    /// then runs its script. A claim this call made goes again when the
    /// script stored nothing because the run or actor is stopped.
    pub(crate) async fn create(&self, new: NewRecord<'_>) -> Result<Created, StoreError> {
        let (claim, pointer_wait) = self
            .claim_pointer(&new.pointer, &new.slot.tag, new.keep_from)
            .await?;
        if claim == Claim::Taken {
            return Ok(Created::Exists);
        }
        let key = new.keys.first().map_or("", String::as_str);
        let keys: Vec<&str> = new.keys.iter().map(String::as_str).collect();
        let (reply, wait) = self.run(new.script, &keys, new.args, true).await?;
        match (reply.status.as_str(), reply.bare()) {
            (word, true) if word == new.stored => {
                self.confirm(pointer_wait)?;
                self.confirm(wait)?;
                Ok(Created::Stored)
            }
            ("exists", true) => Ok(Created::Exists),
            ("stopped", true) => {
                if claim == Claim::Claimed {
                    let what = format!("{} refused as stopped", new.what);
                    self.release_pointer(&new.pointer, &new.slot.tag, &what)
                        .await;
                }
                Ok(Created::Stopped)
            }
            ("corrupt", _) => Err(corrupt_reply(key, &reply)),
            _ => Err(unexpected_reply(new.script, key)),
        }
    }

    /// The tag that the pointer at `key` names, or `None` without one.
    pub(crate) async fn read_pointer(&self, key: &str) -> Result<Option<String>, StoreError> {
        // The pointer script's `read` mode writes nothing.
        let reply = self
            .run_read(GrantScript::Pointer, &[key], &[b"read"])
            .await?;
        match (reply.status.as_str(), reply.items.as_slice()) {
            ("missing", []) => Ok(None),
            ("found", [tag]) => {
                let tag = text(tag)
                    .filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
                    .ok_or_else(|| unexpected_reply(GrantScript::Pointer, key))?;
                Ok(Some(tag.to_owned()))
            }
            ("corrupt", [_]) => Err(corrupt_reply(key, &reply)),
            _ => Err(unexpected_reply(GrantScript::Pointer, key)),
        }
    }

    /// Claims the pointer at `key` for the slot `tag`, kept until
    /// `max(keep_from, server time) + retention`; durable, so the answer
    /// carries the `WAIT` reply for the caller to confirm once it stored
    /// the record too.
    pub(crate) async fn claim_pointer(
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
        let claim = match (reply.status.as_str(), reply.bare()) {
            ("claimed", true) => Claim::Claimed,
            ("same", true) => Claim::Same,
            ("taken", true) => Claim::Taken,
            _ => return Err(unexpected_reply(GrantScript::Pointer, key)),
        };
        Ok((claim, wait))
    }

    /// Moves the expiry of the pointer at `key`, naming `tag`, forward to
    /// `at`: a call moved its record's expiry there. The caller logs a
    /// failure: its call's outcome stands whatever this answers.
    pub(crate) async fn keep_pointer(
        &self,
        key: &str,
        tag: &str,
        at: u64,
    ) -> Result<(), StoreError> {
        let at = at.to_string();
        self.run(
            GrantScript::Pointer,
            &[key],
            &[b"keep", tag.as_bytes(), at.as_bytes()],
            false,
        )
        .await
        .map(drop)
    }

    /// [`keep_pointer`](Self::keep_pointer), a failure logged: the call
    /// that moved the expiry of its record (`what`) stands whatever this
    /// answers.
    pub(crate) async fn keep_pointer_or_warn(&self, key: &str, tag: &str, at: u64, what: &str) {
        if let Err(error) = self.keep_pointer(key, tag, at).await {
            tracing::warn!(
                target: "countersign_store_redis",
                pointer = key,
                %error,
                "could not move the expiry of the pointer of {what} forward"
            );
        }
    }

    /// Releases the pointer at `key` when it names `tag`: the call that
    /// claimed it stored nothing. Best effort: a pointer left behind names
    /// a slot without the record, which reads as unknown.
    pub(crate) async fn release_pointer(&self, key: &str, tag: &str, what: &str) {
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
}
