//! The id pointers, `{prefix}:id:{<id>}` of a grant and `{prefix}:pid:{<id>}`
//! of a proposal: each holds the tag of the slot its record lives in, so
//! that ids are unique over all actors and a call that knows only the id
//! finds the slot. The pointer script reads, claims, keeps and releases
//! them.

use countersign_approval_core::StoreError;
use redis::Value;

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

impl RedisApprovalStore {
    /// The tag that the pointer at `key` names, or `None` without one.
    pub(crate) async fn read_pointer(&self, key: &str) -> Result<Option<String>, StoreError> {
        let (reply, _) = self
            .run(GrantScript::Pointer, &[key], &[b"read"], false)
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
