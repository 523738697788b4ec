//! The grant model: what the host approves, what it binds, and its states.

use std::time::Duration;

use countersign_canonical_policy::{Action, ActionDigest, AuthorizedUrl};

use crate::{ActorId, ApprovalId, AttemptId, RandomnessError, RunId, Timestamp};

/// Longest grant lifetime.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Longest approver note, in UTF-8 bytes.
pub const MAX_NOTE_BYTES: usize = 1024;

/// A grant could not be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The lifetime is zero or longer than 24 hours.
    #[error("ttl must be more than 0 and at most 24 hours, got {millis}ms")]
    InvalidTtl {
        /// The requested lifetime in milliseconds.
        millis: u128,
    },
    /// `now + ttl` does not fit a timestamp.
    #[error("expiry time overflows")]
    ExpiryOverflow,
    /// The approver note is too long or holds a control character.
    #[error("approver note must be at most 1024 bytes without control characters")]
    InvalidNote,
    /// No id could be generated.
    #[error(transparent)]
    Randomness(#[from] RandomnessError),
    /// A page binding's session, target or revision id is empty, too long,
    /// or not printable ASCII without `/`.
    #[error("page ids must be 1 to 256 printable ascii characters without `/`")]
    InvalidPage,
}

/// What a grant binds: who, in which run, on which page, doing exactly what.
///
/// A consume succeeds only when every field equals the grant's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Binding {
    /// The acting principal.
    pub actor_id: ActorId,
    /// The agent run.
    pub run_id: RunId,
    /// The canonical URL text.
    pub url: String,
    /// The digest of the canonical action.
    pub action_digest: ActionDigest,
}

impl Binding {
    /// The binding of a request for `action` on `url` by `actor` in `run`.
    pub fn new(actor: &ActorId, run: &RunId, url: &AuthorizedUrl, action: &Action) -> Self {
        Binding {
            actor_id: actor.clone(),
            run_id: run.clone(),
            url: url.as_str().to_owned(),
            action_digest: action.digest(),
        }
    }
}

/// A host-issued, single-use grant for one action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The grant's id (`apr_…`).
    pub id: ApprovalId,
    /// Who may act.
    pub actor_id: ActorId,
    /// In which run.
    pub run_id: RunId,
    /// The canonical URL the action happens on.
    pub url: String,
    /// The canonical action.
    pub action: Action,
    /// `action.digest()`, kept so stores compare digests without re-hashing.
    pub action_digest: ActionDigest,
    /// When the host issued it.
    pub issued_at: Timestamp,
    /// The first instant at which it is expired.
    pub expires_at: Timestamp,
    /// A note from the approver, for audit.
    pub approver_note: Option<String>,
    /// For a page-bound grant, the revision of the page it was approved on
    /// (see [`Approval::bound_to_page`]); `None` otherwise.
    pub page_revision: Option<String>,
    /// Reserved for live backends; always `None` in this release.
    pub operation_id: Option<String>,
    /// For a page-bound grant, the browser session and tab it was approved
    /// in, as `session/target` (see [`Approval::bound_to_page`]); `None`
    /// otherwise.
    pub session_id: Option<String>,
}

impl Approval {
    /// A new grant with a fresh id for `action` on `url`, valid from `now`
    /// for `ttl` (more than zero, at most [`MAX_TTL`]).
    pub fn for_action(
        actor_id: ActorId,
        run_id: RunId,
        url: &AuthorizedUrl,
        action: &Action,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Approval, ApprovalError> {
        if ttl.is_zero() || ttl > MAX_TTL {
            return Err(ApprovalError::InvalidTtl {
                millis: ttl.as_millis(),
            });
        }
        let expires_at = now.checked_add(ttl).ok_or(ApprovalError::ExpiryOverflow)?;
        Ok(Approval {
            id: ApprovalId::generate()?,
            actor_id,
            run_id,
            url: url.as_str().to_owned(),
            action: action.clone(),
            action_digest: action.digest(),
            issued_at: now,
            expires_at,
            approver_note: None,
            page_revision: None,
            operation_id: None,
            session_id: None,
        })
    }

    /// Adds an approver note (at most 1024 bytes, no control characters).
    pub fn with_note(mut self, note: impl Into<String>) -> Result<Approval, ApprovalError> {
        let note = note.into();
        if note.len() > MAX_NOTE_BYTES || note.chars().any(|c| c <= '\u{1f}' || c == '\u{7f}') {
            return Err(ApprovalError::InvalidNote);
        }
        self.approver_note = Some(note);
        Ok(self)
    }

    /// What this grant binds.
    pub fn binding(&self) -> Binding {
        Binding {
            actor_id: self.actor_id.clone(),
            run_id: self.run_id.clone(),
            url: self.url.clone(),
            action_digest: self.action_digest,
        }
    }

    /// Whether `binding` equals this grant's binding, field by field.
    pub fn is_bound_to(&self, binding: &Binding) -> bool {
        self.action_digest == binding.action_digest
            && self.url == binding.url
            && self.actor_id == binding.actor_id
            && self.run_id == binding.run_id
    }

    /// Whether the grant is expired at `now` (`now >= expires_at`).
    pub fn is_expired_at(&self, now: Timestamp) -> bool {
        now >= self.expires_at
    }
}

/// The state of a stored grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantState {
    /// Neither revoked nor consumed (it may still be expired: see [`Approval::is_expired_at`]).
    Active,
    /// The host revoked it before use.
    Revoked,
    /// An attempt consumed it.
    Consumed {
        /// When.
        at: Timestamp,
        /// Which attempt.
        by: AttemptId,
    },
}

/// A grant as a store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGrant {
    /// The grant.
    pub approval: Approval,
    /// Its state.
    pub state: GrantState,
}

/// Why a consume was refused although the grant exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StaleReason {
    /// The host revoked the grant.
    Revoked,
    /// Another attempt (or this one with another binding) consumed it.
    Consumed,
    /// `now >= expires_at`.
    Expired,
    /// Actor, run, URL or action differs; the grant stays usable.
    Mismatch,
    /// This attempt was given back with
    /// [`ApprovalStore::abandon`](crate::ApprovalStore::abandon); it can
    /// never consume the grant.
    Abandoned,
}

impl StaleReason {
    /// A lower-case word for logs and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            StaleReason::Revoked => "revoked",
            StaleReason::Consumed => "consumed",
            StaleReason::Expired => "expired",
            StaleReason::Mismatch => "mismatch",
            StaleReason::Abandoned => "abandoned",
        }
    }
}

/// The answer of [`ApprovalStore::consume_once`](crate::ApprovalStore::consume_once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumeOutcome {
    /// The grant is now consumed by this attempt. `replay` is true when it
    /// already was (a retry of the same attempt with the same binding).
    Consumed {
        /// Whether this is a repeat of an earlier successful consume.
        replay: bool,
    },
    /// The grant exists but cannot be used for this request.
    Stale(StaleReason),
    /// No grant has this id.
    Unknown,
}

/// The answer of [`ApprovalStore::revoke`](crate::ApprovalStore::revoke).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RevokeOutcome {
    /// The grant was active and is now revoked.
    Revoked,
    /// It was already revoked.
    AlreadyRevoked,
    /// It was consumed first; nothing changed.
    AlreadyConsumed,
    /// No grant has this id.
    Unknown,
}

/// Applies the consume rules of the store contract to one grant's current
/// state, returning the outcome and, when the grant must be marked consumed,
/// the new state. `abandoned` is the grant's list of attempts given back
/// with [`ApprovalStore::abandon`](crate::ApprovalStore::abandon).
///
/// Stores that keep grants in process call this under their lock; stores
/// that run the check elsewhere (a Lua script, a SQL statement) must
/// implement the same order, which the conformance kit checks.
pub fn decide_consume(
    grant: &StoredGrant,
    abandoned: &[AttemptId],
    binding: &Binding,
    now: Timestamp,
    attempt: &AttemptId,
) -> (ConsumeOutcome, Option<GrantState>) {
    if abandoned.contains(attempt) {
        return (ConsumeOutcome::Stale(StaleReason::Abandoned), None);
    }
    match &grant.state {
        GrantState::Revoked => (ConsumeOutcome::Stale(StaleReason::Revoked), None),
        GrantState::Consumed { by, .. } => {
            if by == attempt && grant.approval.is_bound_to(binding) {
                (ConsumeOutcome::Consumed { replay: true }, None)
            } else {
                (ConsumeOutcome::Stale(StaleReason::Consumed), None)
            }
        }
        GrantState::Active if grant.approval.is_expired_at(now) => {
            (ConsumeOutcome::Stale(StaleReason::Expired), None)
        }
        GrantState::Active if !grant.approval.is_bound_to(binding) => {
            (ConsumeOutcome::Stale(StaleReason::Mismatch), None)
        }
        GrantState::Active => (
            ConsumeOutcome::Consumed { replay: false },
            Some(GrantState::Consumed {
                at: now,
                by: attempt.clone(),
            }),
        ),
    }
}

/// Applies the revoke rules to one grant's current state, returning the
/// outcome and the new state when it changes.
pub fn decide_revoke(state: &GrantState) -> (RevokeOutcome, Option<GrantState>) {
    match state {
        GrantState::Active => (RevokeOutcome::Revoked, Some(GrantState::Revoked)),
        GrantState::Revoked => (RevokeOutcome::AlreadyRevoked, None),
        GrantState::Consumed { .. } => (RevokeOutcome::AlreadyConsumed, None),
    }
}
