//! Standing grants: "this, up to N times, until T", and the one rule for
//! what such a grant covers.
//!
//! A person who approves a proposal may approve its *scope* instead of the
//! one action: the same host, the same method, and the same element facts
//! (role and accessible name) on pages of the same path, in the same run of
//! the same actor. Each later proposal in that scope is approved at once
//! by an ordinary single-use grant whose approver is
//! `standing:<standing id>`; each act with such a grant also takes one use
//! of the standing grant, in the store, so N uses allow at most N acts.

use std::time::Duration;

use serde::Serialize;

use crate::{
    abandon::AbandonOutcome, abandon::MAX_ABANDONED_ATTEMPTS, element::ElementIdentity,
    grant::Approver, grant::StaleReason, ids::ActorId, ids::AttemptId, ids::RandomnessError,
    ids::RunId, ids::StandingId, time::Timestamp,
};

/// Most uses a standing grant may carry.
pub const MAX_STANDING_USES: u32 = 100;
/// Longest standing grant lifetime (the run's end may come sooner).
pub const MAX_STANDING_TTL: Duration = Duration::from_secs(8 * 60 * 60);
/// Longest scope text, in bytes: a scope holds a host, a path, a method,
/// a role and an accessible name, each bounded where it comes from.
pub const MAX_STANDING_SCOPE_BYTES: usize = 8 * 1024;

/// What a standing grant covers: the page's origin (scheme, host and
/// effective port), its path, the action's method and the element's role
/// and accessible name.
///
/// Stores keep its canonical text ([`StandingScope::as_str`],
/// `{"v":2,"scheme":…,"host":…,"port":…,"method":…,"path":…,"role":…,"name":…}`)
/// and read it back with [`StandingScope::parse`], which accepts only text
/// that [`StandingScope::from_facts`] would write; two scopes are equal
/// exactly when all their facts are.
///
/// The port is always the effective one, so `https://example.com/` and
/// `https://example.com:443/` share a scope while `http://example.com/`
/// (port 80) and `https://example.com:8443/` each have their own. The path
/// is the URL's path without query or fragment, so `/search?q=a` and
/// `/search?q=b` share a scope and `/search/admin` does not.
///
/// A scope text of version 1 (written before the scheme and the default
/// ports were part of a scope) does not parse: it named no scheme, so any
/// reading of it could cover more than the person approved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StandingScope {
    text: String,
    scheme: String,
    host: String,
    port: u16,
    path: String,
    method: String,
    role: String,
    name: String,
}

#[derive(Serialize)]
struct ScopeText<'a> {
    v: u8,
    scheme: &'a str,
    host: &'a str,
    port: u16,
    method: &'a str,
    path: &'a str,
    role: &'a str,
    name: &'a str,
}

/// The version of the scope text this release writes and reads.
const SCOPE_TEXT_VERSION: u8 = 2;

/// A scope could not be made or a standing grant could not be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StandingError {
    /// The URL is not an absolute URL with a host.
    #[error("standing grants cover pages of a host; `{0}` has none")]
    NoHost(String),
    /// The URL's scheme has no default port and the URL names none.
    #[error("standing grants cover pages at a known port; `{0}` names none")]
    NoPort(String),
    /// The scope is longer than [`MAX_STANDING_SCOPE_BYTES`].
    #[error("the scope is longer than 8 KiB")]
    ScopeTooLong,
    /// Uses are 0 or more than [`MAX_STANDING_USES`].
    #[error("uses must be 1 to 100, got {0}")]
    InvalidUses(u32),
    /// The lifetime is zero or longer than [`MAX_STANDING_TTL`].
    #[error("a standing grant lasts more than 0 and at most 8 hours, got {millis}ms")]
    InvalidTtl {
        /// The requested lifetime in milliseconds.
        millis: u128,
    },
    /// The approval time is after the grant was issued.
    #[error("approval time must not be after the grant's issue time")]
    ApprovedAfterIssue,
    /// The failed-attempt limit is 0 or above 100.
    #[error("attempt limit must be 1 to 100, got {0}")]
    InvalidAttemptLimit(u32),
    /// No id could be generated.
    #[error(transparent)]
    Randomness(#[from] RandomnessError),
}

impl StandingScope {
    /// The scope of an action `method` on `element` of the page at `url`
    /// (a canonical URL).
    pub fn of(
        url: &str,
        method: &str,
        element: &ElementIdentity,
    ) -> Result<StandingScope, StandingError> {
        StandingScope::from_facts(url, method, element.role(), element.name())
    }

    /// The scope of `proposal`'s action on the element its snapshot bound;
    /// `None` when it bound none (a standing grant never covers a guess).
    pub fn of_proposal(proposal: &crate::proposal::Proposal) -> Option<StandingScope> {
        let element = proposal.bound_element()?;
        StandingScope::of(&proposal.url, proposal.action.method(), element).ok()
    }

    /// The scope from its facts: the page's `url`, the action's `method`,
    /// the element's `role` and accessible `name`.
    pub fn from_facts(
        url: &str,
        method: &str,
        role: &str,
        name: &str,
    ) -> Result<StandingScope, StandingError> {
        let parsed = url::Url::parse(url).map_err(|_| StandingError::NoHost(url.to_owned()))?;
        let Some(host) = parsed.host_str().filter(|h| !h.is_empty()) else {
            return Err(StandingError::NoHost(url.to_owned()));
        };
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| StandingError::NoPort(url.to_owned()))?;
        let text = serde_json::to_string(&ScopeText {
            v: SCOPE_TEXT_VERSION,
            scheme: parsed.scheme(),
            host,
            port,
            method,
            path: parsed.path(),
            role,
            name,
        })
        .map_err(|_| StandingError::ScopeTooLong)?;
        if text.len() > MAX_STANDING_SCOPE_BYTES {
            return Err(StandingError::ScopeTooLong);
        }
        Ok(StandingScope {
            text,
            scheme: parsed.scheme().to_owned(),
            host: host.to_owned(),
            port,
            path: parsed.path().to_owned(),
            method: method.to_owned(),
            role: role.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The scope whose canonical text is `text` (as a stored standing grant
    /// keeps it); `None` for any other text, a version 1 text included.
    pub fn parse(text: &str) -> Option<StandingScope> {
        #[derive(serde::Deserialize)]
        struct Owned {
            v: u8,
            scheme: String,
            host: String,
            port: u16,
            method: String,
            path: String,
            role: String,
            name: String,
        }
        let facts: Owned = serde_json::from_str(text).ok()?;
        if facts.v != SCOPE_TEXT_VERSION {
            return None;
        }
        let scope = StandingScope::from_facts(
            &format!(
                "{}://{}:{}{}",
                facts.scheme, facts.host, facts.port, facts.path
            ),
            &facts.method,
            &facts.role,
            &facts.name,
        )
        .ok()?;
        (scope.text == text).then_some(scope)
    }

    /// The canonical text stores keep and compare.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The page's scheme (`https`, `http`).
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The host, without a port.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The effective port: the URL's own, or its scheme's default.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The path, without query or fragment.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The action's method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The element's role.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The element's accessible name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pages it covers as a URL without query: the scheme, the host,
    /// the port when it is not the scheme's default, and the path.
    pub fn pages(&self) -> String {
        let default = url::Url::parse(&format!("{}://{}/", self.scheme, self.host))
            .ok()
            .and_then(|u| u.port_or_known_default());
        if default == Some(self.port) {
            format!("{}://{}{}", self.scheme, self.host, self.path)
        } else {
            format!("{}://{}:{}{}", self.scheme, self.host, self.port, self.path)
        }
    }

    /// What the scope covers and what it does not, in words for the
    /// person who approves it.
    pub fn describe(&self) -> (String, String) {
        let covers = format!(
            "`{}` on the {} named \u{201c}{}\u{201d}, on pages of {} (port {}, any query), in this run only",
            self.method,
            self.role,
            self.name,
            self.pages(),
            self.port
        );
        let not =
            "any other element, name, method, path, scheme, port or host; another run or actor; \
                   anything after the uses are spent, the time is up or the run is stopped"
                .to_owned();
        (covers, not)
    }
}

/// A standing grant: up to `uses` acts in `scope`, by one actor in one
/// run, until `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingGrant {
    /// Its id (`stg_…`).
    pub id: StandingId,
    /// Who may act.
    pub actor_id: ActorId,
    /// In which run.
    pub run_id: RunId,
    /// What it covers.
    pub scope: StandingScope,
    /// How many acts it allows in all.
    pub uses: u32,
    /// When it was issued.
    pub issued_at: Timestamp,
    /// The first instant at which it is expired.
    pub expires_at: Timestamp,
    /// The person who approved it, and when.
    pub approver: Approver,
    /// How many presentations of another scope lock it.
    pub attempt_limit: u32,
}

impl StandingGrant {
    /// A new standing grant with a fresh id, valid from `now` for `ttl`
    /// (more than zero, at most [`MAX_STANDING_TTL`]) and `uses` uses (1 to
    /// [`MAX_STANDING_USES`]).
    pub fn new(
        actor_id: ActorId,
        run_id: RunId,
        scope: &StandingScope,
        uses: u32,
        ttl: Duration,
        now: Timestamp,
        approver: Approver,
    ) -> Result<StandingGrant, StandingError> {
        if uses == 0 || uses > MAX_STANDING_USES {
            return Err(StandingError::InvalidUses(uses));
        }
        if ttl.is_zero() || ttl > MAX_STANDING_TTL {
            return Err(StandingError::InvalidTtl {
                millis: ttl.as_millis(),
            });
        }
        if approver.approved_at > now {
            return Err(StandingError::ApprovedAfterIssue);
        }
        let expires_at = now.checked_add(ttl).ok_or(StandingError::InvalidTtl {
            millis: ttl.as_millis(),
        })?;
        Ok(StandingGrant {
            id: StandingId::generate()?,
            actor_id,
            run_id,
            scope: scope.clone(),
            uses,
            issued_at: now,
            expires_at,
            approver,
            attempt_limit: crate::grant::DEFAULT_ATTEMPT_LIMIT,
        })
    }

    /// Sets how many presentations of another scope lock it (1 to 100).
    pub fn with_attempt_limit(mut self, limit: u32) -> Result<StandingGrant, StandingError> {
        if limit == 0 || limit > crate::grant::MAX_ATTEMPT_LIMIT {
            return Err(StandingError::InvalidAttemptLimit(limit));
        }
        self.attempt_limit = limit;
        Ok(self)
    }

    /// The key a use must present to match it.
    pub fn key(&self) -> StandingKey {
        StandingKey {
            actor_id: self.actor_id.clone(),
            run_id: self.run_id.clone(),
            scope: self.scope.clone(),
        }
    }

    /// Whether `key` names this grant's actor, run and scope.
    pub fn is_keyed_by(&self, key: &StandingKey) -> bool {
        self.scope == key.scope && self.actor_id == key.actor_id && self.run_id == key.run_id
    }

    /// Whether it is expired at `now` (`now >= expires_at`).
    pub fn is_expired_at(&self, now: Timestamp) -> bool {
        now >= self.expires_at
    }
}

/// What one use presents: who, in which run, in which scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StandingKey {
    /// The acting principal.
    pub actor_id: ActorId,
    /// The agent run.
    pub run_id: RunId,
    /// The scope of the act.
    pub scope: StandingScope,
}

/// The state of a stored standing grant. Spent is not a state: it is
/// `used_by.len() == uses`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StandingState {
    /// Not revoked, locked or stopped (it may be spent or expired).
    Active,
    /// A person or the host revoked it.
    Revoked,
    /// Locked after `attempt_limit` presentations of another scope.
    Locked,
    /// Its run or actor was stopped since it was issued. Stores derive it.
    Stopped,
}

impl StandingState {
    /// The state a store shows for a stored `self`: an active standing
    /// grant whose run or actor was `stopped` since it was issued reads
    /// `Stopped` (stores derive it, never write it).
    pub fn shown(self, stopped: bool) -> StandingState {
        match self {
            StandingState::Active if stopped => StandingState::Stopped,
            other => other,
        }
    }
}

/// A standing grant as a store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredStanding {
    /// The grant.
    pub grant: StandingGrant,
    /// Its state.
    pub state: StandingState,
    /// The attempts that took a use, oldest first.
    pub used_by: Vec<AttemptId>,
    /// Presentations of another scope so far.
    pub failed_attempts: u32,
}

impl StoredStanding {
    /// A standing grant as just issued.
    pub fn issued(grant: StandingGrant) -> StoredStanding {
        StoredStanding {
            grant,
            state: StandingState::Active,
            used_by: Vec::new(),
            failed_attempts: 0,
        }
    }

    /// Uses left.
    pub fn remaining(&self) -> u32 {
        let used = u32::try_from(self.used_by.len()).unwrap_or(u32::MAX);
        self.grant.uses.saturating_sub(used)
    }

    /// Whether a use could succeed at `now`: active, unexpired, not spent.
    pub fn is_usable_at(&self, now: Timestamp) -> bool {
        self.state == StandingState::Active
            && !self.grant.is_expired_at(now)
            && self.remaining() > 0
    }
}

/// The answer of [`ProposalStore::use_standing`](crate::ProposalStore::use_standing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UseOutcome {
    /// This attempt holds one use; `remaining` are left after it. `replay`
    /// is true when it already held it (a retry with the same key).
    Used {
        /// Uses left after this one.
        remaining: u32,
        /// Whether this is a repeat of an earlier successful use.
        replay: bool,
    },
    /// The grant exists but gives no use to this request (`Consumed` means
    /// spent).
    Stale(StaleReason),
    /// No standing grant has this id.
    Unknown,
}

/// What one use does to one standing grant, as [`decide_use`] rules it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UseDecision {
    /// The answer.
    pub outcome: UseOutcome,
    /// Whether `attempt` is added to `used_by`.
    pub record_use: bool,
    /// The new state, when it changes (`Locked`).
    pub state: Option<StandingState>,
    /// The new count of failed attempts, when it changes.
    pub failed_attempts: Option<u32>,
}

/// Applies the use rules of the standing-grant contract (rule 11 of
/// [`ProposalStore`](crate::ProposalStore)) to one standing grant:
///
/// 1. `attempt` given back before ⇒ `Stale(Abandoned)`;
/// 2. stopped ⇒ `Stale(Stopped)`; revoked ⇒ `Stale(Revoked)`; locked ⇒
///    `Stale(Locked)`;
/// 3. `attempt` already holds a use: same key ⇒ `Used { replay: true }`,
///    another key ⇒ `Stale(Mismatch)` (nothing counted);
/// 4. expired ⇒ `Stale(Expired)`;
/// 5. another key ⇒ failed attempts grow by one; reaching the limit locks
///    it (`Stale(Locked)`), otherwise `Stale(Mismatch)`;
/// 6. spent ⇒ `Stale(Consumed)`;
/// 7. otherwise `attempt` takes one use ⇒ `Used { replay: false }`.
pub fn decide_use(
    stored: &StoredStanding,
    abandoned: &[AttemptId],
    stopped: bool,
    key: &StandingKey,
    now: Timestamp,
    attempt: &AttemptId,
) -> UseDecision {
    let answer = |outcome| UseDecision {
        outcome,
        record_use: false,
        state: None,
        failed_attempts: None,
    };
    if abandoned.contains(attempt) {
        return answer(UseOutcome::Stale(StaleReason::Abandoned));
    }
    if stopped || stored.state == StandingState::Stopped {
        return answer(UseOutcome::Stale(StaleReason::Stopped));
    }
    match stored.state {
        StandingState::Revoked => return answer(UseOutcome::Stale(StaleReason::Revoked)),
        StandingState::Locked => return answer(UseOutcome::Stale(StaleReason::Locked)),
        StandingState::Active | StandingState::Stopped => {}
    }
    let keyed = stored.grant.is_keyed_by(key);
    if stored.used_by.contains(attempt) {
        return answer(if keyed {
            UseOutcome::Used {
                remaining: stored.remaining(),
                replay: true,
            }
        } else {
            UseOutcome::Stale(StaleReason::Mismatch)
        });
    }
    if stored.grant.is_expired_at(now) {
        return answer(UseOutcome::Stale(StaleReason::Expired));
    }
    if !keyed {
        let failed = stored.failed_attempts.saturating_add(1);
        let locks = failed >= stored.grant.attempt_limit;
        return UseDecision {
            outcome: UseOutcome::Stale(if locks {
                StaleReason::Locked
            } else {
                StaleReason::Mismatch
            }),
            record_use: false,
            state: locks.then_some(StandingState::Locked),
            failed_attempts: Some(failed),
        };
    }
    if stored.remaining() == 0 {
        return answer(UseOutcome::Stale(StaleReason::Consumed));
    }
    UseDecision {
        outcome: UseOutcome::Used {
            remaining: stored.remaining() - 1,
            replay: false,
        },
        record_use: true,
        state: None,
        failed_attempts: None,
    }
}

/// What giving back one use does, as [`decide_give_back`] rules it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiveBackDecision {
    /// The answer.
    pub outcome: AbandonOutcome,
    /// Whether `attempt`'s use is removed from `used_by`.
    pub release_use: bool,
    /// Whether `attempt` is added to the attempts given back.
    pub remember: bool,
    /// The new state, when it changes (`Revoked` when too many attempts
    /// were given back).
    pub state: Option<StandingState>,
}

/// Applies the give-back rules (rule 12 of
/// [`ProposalStore`](crate::ProposalStore)): a stopped grant answers
/// `Stopped`, a revoked or locked one `Revoked`, nothing changes; otherwise
/// an `attempt` that holds a use has it released and is remembered (so it
/// can never take a use again); the answer is `Expired` at or after
/// expiry, else `Usable { restored }`. Remembering more than
/// [`MAX_ABANDONED_ATTEMPTS`] attempts revokes the grant (`Revoked`).
///
/// An attempt that holds no use (its use failed before the store wrote
/// anything, or has not arrived yet) changes nothing and is not
/// remembered, so an outage through which an agent retries one act never
/// costs the person's approval. Should such an attempt's use arrive later
/// after all, it takes a use that no act performs: fewer acts, never
/// more.
pub fn decide_give_back(
    stored: &StoredStanding,
    abandoned: &[AttemptId],
    stopped: bool,
    now: Timestamp,
    attempt: &AttemptId,
) -> GiveBackDecision {
    let unchanged = |outcome| GiveBackDecision {
        outcome,
        release_use: false,
        remember: false,
        state: None,
    };
    if stopped || stored.state == StandingState::Stopped {
        return unchanged(AbandonOutcome::Stopped);
    }
    if matches!(stored.state, StandingState::Revoked | StandingState::Locked) {
        return unchanged(AbandonOutcome::Revoked);
    }
    let known = abandoned.contains(attempt);
    let held = stored.used_by.contains(attempt);
    if held && !known && abandoned.len() >= MAX_ABANDONED_ATTEMPTS {
        return GiveBackDecision {
            outcome: AbandonOutcome::Revoked,
            release_use: held,
            remember: false,
            state: Some(StandingState::Revoked),
        };
    }
    let outcome = if stored.grant.is_expired_at(now) {
        AbandonOutcome::Expired
    } else {
        AbandonOutcome::Usable { restored: held }
    };
    GiveBackDecision {
        outcome,
        release_use: held,
        remember: held && !known,
        state: None,
    }
}

/// The answer of [`ProposalStore::revoke_standing`](crate::ProposalStore::revoke_standing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StandingRevokeOutcome {
    /// It was active (spent or not) and is now revoked.
    Revoked,
    /// It was already revoked, locked or stopped.
    AlreadyEnded,
    /// No standing grant has this id.
    Unknown,
}
