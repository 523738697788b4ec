//! Where a grant or a proposal lives: its actor's cluster slot and the
//! name of every key the scripts touch, so that one place says how keys
//! are spelt and all of an actor's keys share its hash tag.

use countersign_approval_core::{ActorId, ApprovalId, ProposalId, RunId, StandingId};
use sha2::{Digest, Sha256};

/// The tag of an actor's slot: the first 32 lower-case hex characters of
/// the SHA-256 of the actor id's text (which may hold `{` and `}`, so it
/// cannot be the hash tag itself).
pub(crate) fn actor_tag(actor: &ActorId) -> String {
    let digest = Sha256::digest(actor.as_str().as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// One actor's cluster slot: its tag and the prefix of its keys,
/// `{prefix}:{a<tag>}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The actor's tag ([`actor_tag`]), which the id pointers hold.
    pub(crate) tag: String,
    /// `{prefix}:{a<tag>}`, the braces literal (the cluster hash tag).
    pub(crate) prefix: String,
}

impl Slot {
    /// The slot of the actor whose tag is `tag`, under the store's key
    /// prefix `store_prefix`: also the slot a pointer names, whose actor
    /// the caller does not know.
    pub(crate) fn of_tag(store_prefix: &str, tag: String) -> Slot {
        let prefix = format!("{store_prefix}:{{a{tag}}}");
        Slot { tag, prefix }
    }

    /// Whether this is `actor`'s slot: every key of a write is in the
    /// actor's slot, so a record of another actor found here is not one
    /// the store wrote here.
    pub(crate) fn holds(&self, actor: &ActorId) -> bool {
        actor_tag(actor) == self.tag
    }

    /// The slot of `actor` under the store's key prefix `store_prefix`.
    pub(crate) fn of_actor(store_prefix: &str, actor: &ActorId) -> Slot {
        Slot::of_tag(store_prefix, actor_tag(actor))
    }

    /// The grant record `id`: `{prefix}:{a<tag>}:grant:<id>`.
    pub(crate) fn grant_key(&self, id: &ApprovalId) -> String {
        format!("{}:grant:{}", self.prefix, id.as_str())
    }

    /// The actor's stop fence: `{prefix}:{a<tag>}:actor`.
    pub(crate) fn actor_fence_key(&self) -> String {
        format!("{}:actor", self.prefix)
    }

    /// The stop fence of `run`: `{prefix}:{a<tag>}:run:<run id>`.
    pub(crate) fn run_fence_key(&self, run: &RunId) -> String {
        format!("{}:run:{}", self.prefix, run.as_str())
    }

    /// The grants of `run` a stop may find usable: `{prefix}:{a<tag>}:live:<run id>`.
    pub(crate) fn live_key(&self, run: &RunId) -> String {
        format!("{}:live:{}", self.prefix, run.as_str())
    }

    /// The actor's runs with a live set: `{prefix}:{a<tag>}:runs`.
    pub(crate) fn runs_key(&self) -> String {
        format!("{}:runs", self.prefix)
    }

    /// The proposal record `id`: `{prefix}:{a<tag>}:proposal:<id>`.
    pub(crate) fn proposal_key(&self, id: &ProposalId) -> String {
        format!("{}:proposal:{}", self.prefix, id.as_str())
    }

    /// The undecided proposals of `run`: `{prefix}:{a<tag>}:pending:<run id>`.
    pub(crate) fn pending_key(&self, run: &RunId) -> String {
        format!("{}:pending:{}", self.prefix, run.as_str())
    }

    /// The standing grant `id`: `{prefix}:{a<tag>}:standing:<id>`.
    pub(crate) fn standing_key(&self, id: &StandingId) -> String {
        format!("{}:standing:{}", self.prefix, id.as_str())
    }

    /// The standing grants of `run`, by issue time:
    /// `{prefix}:{a<tag>}:standings:<run id>`.
    pub(crate) fn standings_key(&self, run: &RunId) -> String {
        format!("{}:standings:{}", self.prefix, run.as_str())
    }
}

/// The pointer naming the slot of grant `id`: `{prefix}:id:{<id>}`, the id
/// its hash tag, since a call that knows only the id must find the slot.
pub(crate) fn pointer_key(store_prefix: &str, id: &ApprovalId) -> String {
    format!("{store_prefix}:id:{{{}}}", id.as_str())
}

/// The pointer naming the slot of proposal `id`: `{prefix}:pid:{<id>}`.
pub(crate) fn proposal_pointer_key(store_prefix: &str, id: &ProposalId) -> String {
    format!("{store_prefix}:pid:{{{}}}", id.as_str())
}

/// The pointer naming the slot of standing grant `id`: `{prefix}:sid:{<id>}`.
pub(crate) fn standing_pointer_key(store_prefix: &str, id: &StandingId) -> String {
    format!("{store_prefix}:sid:{{{}}}", id.as_str())
}

/// The slot prefix and the grant key the start-up probe reads: a slot of
/// its own (`{prefix}:{probe}`), which no actor's tag can be.
pub(crate) fn probe_keys(store_prefix: &str) -> (String, String) {
    let probe_slot = format!("{store_prefix}:{{probe}}");
    let probe_key = format!("{probe_slot}:grant:probe");
    (probe_slot, probe_key)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn actor_tags_are_the_start_of_the_sha256_of_the_id() {
        let tag = actor_tag(&ActorId::new("abc").unwrap());
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(tag, "ba7816bf8f01cfea414140de5dae2223");
        let braces = actor_tag(&ActorId::new("{x}").unwrap());
        assert_eq!(braces.len(), 32);
        assert!(
            braces
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
}
