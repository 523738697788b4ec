//! The grant model: what the host approves, what it binds, and its states.

use std::time::Duration;

use countersign_canonical_policy::{Action, ActionDigest, AuthorizedUrl};

use crate::{
    element::ElementIdentity, ids::ActorId, ids::ApprovalId, ids::ApproverId, ids::AttemptId,
    ids::RandomnessError, ids::RunId, time::Timestamp,
};

/// Longest grant lifetime.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Longest approver note, in UTF-8 bytes.
pub const MAX_NOTE_BYTES: usize = 1024;
/// Mismatched presentations a grant tolerates before it locks, unless the
/// host sets another limit ([`Approval::with_attempt_limit`]). PSD2's RTS
/// (Art. 4(3)(b)) caps authentication attempts at five.
pub const DEFAULT_ATTEMPT_LIMIT: u32 = 5;
/// Highest failed-attempt limit a grant may carry.
pub const MAX_ATTEMPT_LIMIT: u32 = 100;

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
    /// The failed-attempt limit is 0 or above [`MAX_ATTEMPT_LIMIT`].
    #[error("attempt limit must be 1 to 100, got {limit}")]
    InvalidAttemptLimit {
        /// The requested limit.
        limit: u32,
    },
    /// The approval time is after the grant was issued.
    #[error("approval time must not be after the grant's issue time")]
    ApprovedAfterIssue,
}

/// `now + ttl`, for a lifetime of more than zero and at most [`MAX_TTL`]
/// (grants and proposals alike).
pub(crate) fn expiry(now: Timestamp, ttl: Duration) -> Result<Timestamp, ApprovalError> {
    if ttl.is_zero() || ttl > MAX_TTL {
        return Err(ApprovalError::InvalidTtl {
            millis: ttl.as_millis(),
        });
    }
    now.checked_add(ttl).ok_or(ApprovalError::ExpiryOverflow)
}

/// Who approved a grant, and when: host-owned, recorded with the grant and
/// in the operation record of the call that used it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Approver {
    /// The host's id of whoever approved.
    pub id: ApproverId,
    /// When they approved (at or before the grant's `issued_at`).
    pub approved_at: Timestamp,
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
    /// Who approved the grant and when (see [`Approval::approved_by`]);
    /// `None` for a grant the host issued without naming an approver.
    pub approver: Option<Approver>,
    /// How many mismatched presentations lock the grant (see rule 4.8 of
    /// the [store contract](crate::ApprovalStore)); [`DEFAULT_ATTEMPT_LIMIT`]
    /// unless the host set another.
    pub attempt_limit: u32,
    /// For a page-bound grant, the revision of the page it was approved on
    /// (see [`Approval::bound_to_page`]); `None` otherwise.
    pub page_revision: Option<String>,
    /// Reserved for live backends; always `None` in this release.
    pub operation_id: Option<String>,
    /// For a page-bound grant, the browser session and tab it was approved
    /// in, as `session/target` (see [`Approval::bound_to_page`]); `None`
    /// otherwise.
    pub session_id: Option<String>,
    /// For an element-bound grant, what the target element was when the
    /// person approved (see [`Approval::bound_to_page`]); `None` otherwise.
    /// A grant with an element and no page is bound to a page no backend
    /// shows, so it never matches.
    pub element: Option<ElementIdentity>,
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
        Approval::for_canonical(actor_id, run_id, url.as_str().to_owned(), action, ttl, now)
    }

    /// [`for_action`](Self::for_action) for a URL already canonical (one a
    /// proposal kept).
    pub(crate) fn for_canonical(
        actor_id: ActorId,
        run_id: RunId,
        url: String,
        action: &Action,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Approval, ApprovalError> {
        let expires_at = expiry(now, ttl)?;
        Ok(Approval {
            id: ApprovalId::generate()?,
            actor_id,
            run_id,
            url,
            action: action.clone(),
            action_digest: action.digest(),
            issued_at: now,
            expires_at,
            approver_note: None,
            approver: None,
            attempt_limit: DEFAULT_ATTEMPT_LIMIT,
            page_revision: None,
            operation_id: None,
            session_id: None,
            element: None,
        })
    }

    /// Adds an approver note (at most 1024 bytes, no control characters:
    /// U+0000–U+001F, U+007F–U+009F).
    pub fn with_note(mut self, note: impl Into<String>) -> Result<Approval, ApprovalError> {
        let note = note.into();
        if note.len() > MAX_NOTE_BYTES || crate::ids::holds_control(&note) {
            return Err(ApprovalError::InvalidNote);
        }
        self.approver_note = Some(note);
        Ok(self)
    }

    /// Records who approved the grant and when; `approved_at` must not be
    /// after `issued_at`.
    pub fn approved_by(
        mut self,
        approver: ApproverId,
        approved_at: Timestamp,
    ) -> Result<Approval, ApprovalError> {
        if approved_at > self.issued_at {
            return Err(ApprovalError::ApprovedAfterIssue);
        }
        self.approver = Some(Approver {
            id: approver,
            approved_at,
        });
        Ok(self)
    }

    /// Sets how many mismatched presentations lock the grant (1 to
    /// [`MAX_ATTEMPT_LIMIT`]; the default is [`DEFAULT_ATTEMPT_LIMIT`]).
    pub fn with_attempt_limit(mut self, limit: u32) -> Result<Approval, ApprovalError> {
        if limit == 0 || limit > MAX_ATTEMPT_LIMIT {
            return Err(ApprovalError::InvalidAttemptLimit { limit });
        }
        self.attempt_limit = limit;
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
    /// Locked after [`Approval::attempt_limit`] mismatched presentations:
    /// revoked by the store, for good.
    Locked,
    /// Its run or its actor was stopped
    /// ([`ApprovalStore::stop_run`](crate::ApprovalStore::stop_run)) while
    /// it was active: never usable again, also after the host resumes the
    /// run. Stores derive it; a stored record stays `Active`.
    Stopped,
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
    /// Mismatched presentations so far (see [`Approval::attempt_limit`]).
    pub failed_attempts: u32,
}

impl StoredGrant {
    /// A grant as just issued: active, no failed attempts.
    pub fn issued(approval: Approval) -> StoredGrant {
        StoredGrant {
            approval,
            state: GrantState::Active,
            failed_attempts: 0,
        }
    }
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
    /// The grant is locked: this presentation, or earlier ones, reached its
    /// [`attempt_limit`](Approval::attempt_limit) of mismatches.
    Locked,
    /// The grant's run or actor was stopped.
    Stopped,
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
            StaleReason::Locked => "locked",
            StaleReason::Stopped => "stopped",
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

/// What one consume does to one grant, as [`decide_consume`] rules it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeDecision {
    /// The answer.
    pub outcome: ConsumeOutcome,
    /// The grant's new state, when it changes (`Consumed`, or `Locked`).
    pub state: Option<GrantState>,
    /// The grant's new count of failed attempts, when it changes (a
    /// mismatch).
    pub failed_attempts: Option<u32>,
}

/// Applies the consume rules of the store contract to one grant's current
/// state. `abandoned` is the grant's list of attempts given back with
/// [`ApprovalStore::abandon`](crate::ApprovalStore::abandon); `stopped`
/// tells whether the grant's run or actor was stopped since it was issued.
///
/// Stores that keep grants in process call this under their lock; stores
/// that run the check elsewhere (a Lua script, a SQL statement) must
/// implement the same order, which the conformance kit checks.
pub fn decide_consume(
    grant: &StoredGrant,
    abandoned: &[AttemptId],
    stopped: bool,
    binding: &Binding,
    now: Timestamp,
    attempt: &AttemptId,
) -> ConsumeDecision {
    let answer = |outcome| ConsumeDecision {
        outcome,
        state: None,
        failed_attempts: None,
    };
    if abandoned.contains(attempt) {
        return answer(ConsumeOutcome::Stale(StaleReason::Abandoned));
    }
    if stopped {
        return answer(ConsumeOutcome::Stale(StaleReason::Stopped));
    }
    match &grant.state {
        GrantState::Revoked => answer(ConsumeOutcome::Stale(StaleReason::Revoked)),
        GrantState::Locked => answer(ConsumeOutcome::Stale(StaleReason::Locked)),
        GrantState::Stopped => answer(ConsumeOutcome::Stale(StaleReason::Stopped)),
        GrantState::Consumed { by, .. } => {
            if by == attempt && grant.approval.is_bound_to(binding) {
                answer(ConsumeOutcome::Consumed { replay: true })
            } else {
                answer(ConsumeOutcome::Stale(StaleReason::Consumed))
            }
        }
        GrantState::Active if grant.approval.is_expired_at(now) => {
            answer(ConsumeOutcome::Stale(StaleReason::Expired))
        }
        GrantState::Active if !grant.approval.is_bound_to(binding) => {
            let failed = grant.failed_attempts.saturating_add(1);
            if failed >= grant.approval.attempt_limit {
                ConsumeDecision {
                    outcome: ConsumeOutcome::Stale(StaleReason::Locked),
                    state: Some(GrantState::Locked),
                    failed_attempts: Some(failed),
                }
            } else {
                ConsumeDecision {
                    outcome: ConsumeOutcome::Stale(StaleReason::Mismatch),
                    state: None,
                    failed_attempts: Some(failed),
                }
            }
        }
        GrantState::Active => ConsumeDecision {
            outcome: ConsumeOutcome::Consumed { replay: false },
            state: Some(GrantState::Consumed {
                at: now,
                by: attempt.clone(),
            }),
            failed_attempts: None,
        },
    }
}

/// Applies the revoke rules to one grant's current state, returning the
/// outcome and the new state when it changes.
/// A locked or stopped grant answers `AlreadyRevoked` and stays as it is.
pub fn decide_revoke(state: &GrantState) -> (RevokeOutcome, Option<GrantState>) {
    match state {
        GrantState::Active => (RevokeOutcome::Revoked, Some(GrantState::Revoked)),
        GrantState::Revoked | GrantState::Locked | GrantState::Stopped => {
            (RevokeOutcome::AlreadyRevoked, None)
        }
        GrantState::Consumed { .. } => (RevokeOutcome::AlreadyConsumed, None),
    }
}
