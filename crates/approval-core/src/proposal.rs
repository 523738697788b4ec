//! Proposals: what a model asks the host to approve, and the host's one
//! decision on it.
//!
//! A model proposes one action on one URL; the policy canonicalises both;
//! the host keeps the proposal pending until a person (or the host's own
//! code) approves or denies it, once. Approving issues the one grant bound
//! to exactly that proposal, in the same atomic step
//! ([`ProposalStore::approve_proposal`](crate::ProposalStore::approve_proposal)).

use std::time::Duration;

use countersign_canonical_policy::{Action, ActionDigest, AuthorizedUrl};

use crate::{
    grant::Approval, grant::ApprovalError, grant::Binding, ids::ActorId, ids::ApprovalId,
    ids::ApproverId, ids::ProposalId, ids::RandomnessError, ids::RunId, page::PageBinding,
    time::Timestamp,
};

/// Largest screenshot a proposal keeps, in bytes.
pub const MAX_SCREENSHOT_BYTES: usize = 2 * 1024 * 1024;

/// The keyword of the PNG text chunk (`tEXt`) in which a backend records
/// where in a snapshot's picture it outlined the target, as
/// [`TargetBox::to_text`] writes it: the approval page crops the picture
/// to it, so a person on a phone sees the target at a readable size. The
/// backend encodes the picture itself, so the page shown in it cannot
/// write this chunk.
pub const TARGET_BOX_PNG_KEYWORD: &str = "countersign-target";

/// Where the outlined target lies in a snapshot's picture, in the
/// picture's pixels (the element's own box, inside the outline).
///
/// ```
/// use countersign_approval_core::TargetBox;
///
/// let target = TargetBox { left: 120, top: 48, width: 96, height: 32 };
/// assert_eq!(target.to_text(), "120 48 96 32");
/// assert_eq!(TargetBox::parse("120 48 96 32"), Some(target));
/// assert_eq!(TargetBox::parse("120 48 0 32"), None);
/// assert_eq!(TargetBox::parse("120 48 96"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetBox {
    /// Pixels from the picture's left edge.
    pub left: u32,
    /// Pixels from the picture's top edge.
    pub top: u32,
    /// Width in pixels, at least 1.
    pub width: u32,
    /// Height in pixels, at least 1.
    pub height: u32,
}

impl TargetBox {
    /// `left top width height`, decimal, one space apart.
    pub fn to_text(&self) -> String {
        format!("{} {} {} {}", self.left, self.top, self.width, self.height)
    }

    /// The box [`to_text`](Self::to_text) wrote; `None` for anything else
    /// or an empty box.
    pub fn parse(text: &str) -> Option<TargetBox> {
        let mut numbers = text.split(' ').map(|n| {
            if n.is_empty() || n.len() > 7 || !n.bytes().all(|b| b.is_ascii_digit()) {
                None
            } else {
                n.parse::<u32>().ok()
            }
        });
        let (left, top, width, height) = (
            numbers.next()??,
            numbers.next()??,
            numbers.next()??,
            numbers.next()??,
        );
        if numbers.next().is_some() || width == 0 || height == 0 {
            return None;
        }
        Some(TargetBox {
            left,
            top,
            width,
            height,
        })
    }
}

/// Most proposals [`pending_proposals`](crate::ProposalStore::pending_proposals)
/// lists for one run.
pub const MAX_LISTED_PROPOSALS: usize = 100;

/// What a live backend saw when the model proposed an action: the page a
/// grant approved from it will be bound to, and what a person approving it
/// is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSnapshot {
    /// The page (session, tab, document revision).
    pub page: PageBinding,
    /// A PNG screenshot of the viewport with the target element outlined,
    /// when the backend could take one (at most [`MAX_SCREENSHOT_BYTES`]);
    /// where the target lies in it is in its [`TARGET_BOX_PNG_KEYWORD`]
    /// text chunk, when the backend records it.
    pub screenshot_png: Option<Vec<u8>>,
    /// Whether exactly one visible element matched the selector when the
    /// snapshot was taken (the one outlined). `false` warns the approver
    /// that the action would be refused as the page stands.
    pub target_found: bool,
}

impl AsRef<PageBinding> for PageSnapshot {
    /// The page the snapshot binds, its element included: what a grant
    /// approved from this snapshot is bound to.
    fn as_ref(&self) -> &PageBinding {
        &self.page
    }
}

/// A proposal could not be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProposalError {
    /// The lifetime is zero or longer than 24 hours.
    #[error("proposal ttl must be more than 0 and at most 24 hours, got {millis}ms")]
    InvalidTtl {
        /// The requested lifetime in milliseconds.
        millis: u128,
    },
    /// `now + ttl` does not fit a timestamp.
    #[error("proposal expiry time overflows")]
    ExpiryOverflow,
    /// A page id is empty, too long, or not printable ASCII without `/`.
    #[error("page ids must be 1 to 256 printable ascii characters without `/`")]
    InvalidPage,
    /// The screenshot is larger than [`MAX_SCREENSHOT_BYTES`] or not a PNG.
    #[error("screenshot must be a png of at most 2 MiB")]
    InvalidScreenshot,
    /// No id could be generated.
    #[error(transparent)]
    Randomness(#[from] RandomnessError),
}

/// One action a model proposed, canonicalised by the host's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The proposal's id (`prp_…`).
    pub id: ProposalId,
    /// The actor whose model proposed it (set by the host).
    pub actor_id: ActorId,
    /// The run it was proposed in (set by the host).
    pub run_id: RunId,
    /// The canonical URL.
    pub url: String,
    /// The canonical action.
    pub action: Action,
    /// `action.digest()`.
    pub action_digest: ActionDigest,
    /// When the model proposed it.
    pub proposed_at: Timestamp,
    /// The first instant at which it can no longer be decided.
    pub expires_at: Timestamp,
    /// What a live backend saw when it was proposed; `None` for a backend
    /// without pages.
    pub snapshot: Option<PageSnapshot>,
}

impl Proposal {
    /// The target element the snapshot bound: `None` without a snapshot,
    /// when the target was not found, or when none was bound.
    pub fn bound_element(&self) -> Option<&crate::element::ElementIdentity> {
        self.snapshot
            .as_ref()
            .filter(|snapshot| snapshot.target_found)
            .and_then(|snapshot| snapshot.page.element.as_ref())
    }

    /// A new pending proposal with a fresh id for `action` on `url`,
    /// decidable from `now` for `ttl` (more than zero, at most 24 hours).
    pub fn for_action(
        actor_id: ActorId,
        run_id: RunId,
        url: &AuthorizedUrl,
        action: &Action,
        ttl: Duration,
        now: Timestamp,
    ) -> Result<Proposal, ProposalError> {
        let expires_at = crate::grant::expiry(now, ttl).map_err(|e| match e {
            ApprovalError::InvalidTtl { millis } => ProposalError::InvalidTtl { millis },
            _ => ProposalError::ExpiryOverflow,
        })?;
        Ok(Proposal {
            id: ProposalId::generate()?,
            actor_id,
            run_id,
            url: url.as_str().to_owned(),
            action: action.clone(),
            action_digest: action.digest(),
            proposed_at: now,
            expires_at,
            snapshot: None,
        })
    }

    /// Attaches what a live backend saw: a grant approved from this
    /// proposal will be bound to `snapshot.page`.
    pub fn observed(mut self, snapshot: PageSnapshot) -> Result<Proposal, ProposalError> {
        if !snapshot.page.is_valid() {
            return Err(ProposalError::InvalidPage);
        }
        if let Some(png) = &snapshot.screenshot_png {
            const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
            if png.len() > MAX_SCREENSHOT_BYTES || !png.starts_with(PNG_SIGNATURE) {
                return Err(ProposalError::InvalidScreenshot);
            }
        }
        self.snapshot = Some(snapshot);
        Ok(self)
    }

    /// What a grant approved from this proposal binds.
    pub fn binding(&self) -> Binding {
        Binding {
            actor_id: self.actor_id.clone(),
            run_id: self.run_id.clone(),
            url: self.url.clone(),
            action_digest: self.action_digest,
        }
    }

    /// Whether the proposal is expired at `now` (`now >= expires_at`).
    pub fn is_expired_at(&self, now: Timestamp) -> bool {
        now >= self.expires_at
    }

    /// The grant that approves exactly this proposal: the same actor, run,
    /// URL and action, bound to the observed page when there is one, valid
    /// from `now` for `ttl`, approved by `approver` at `now`. This is the
    /// only grant [`approve_proposal`](crate::ProposalStore::approve_proposal)
    /// accepts for it (any other is [`ApproveError::NotForProposal`]).
    pub fn grant(
        &self,
        ttl: Duration,
        now: Timestamp,
        approver: Option<ApproverId>,
    ) -> Result<Approval, ApprovalError> {
        let mut approval = Approval::for_canonical(
            self.actor_id.clone(),
            self.run_id.clone(),
            self.url.clone(),
            &self.action,
            ttl,
            now,
        )?;
        if let Some(snapshot) = &self.snapshot {
            approval = approval.bound_to_page(&snapshot.page)?;
        }
        if let Some(approver) = approver {
            approval = approval.approved_by(approver, now)?;
        }
        Ok(approval)
    }

    /// Whether `approval` approves exactly this proposal: same actor, run,
    /// URL and action, and bound to the observed page (or to no page when
    /// nothing was observed).
    pub fn is_approved_by(&self, approval: &Approval) -> bool {
        approval.is_bound_to(&self.binding())
            && approval.page() == self.snapshot.as_ref().map(|s| s.page.clone())
    }
}

/// The host's decision on a proposal, as a store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProposalState {
    /// Not decided yet (it may still be expired: see [`Proposal::is_expired_at`]).
    Pending,
    /// Approved: the grant `approval_id` was issued for it.
    Approved {
        /// The grant issued for it.
        approval_id: ApprovalId,
        /// Who approved it, from the host's authentication.
        by: Option<ApproverId>,
        /// When.
        at: Timestamp,
    },
    /// Denied: no grant was issued.
    Denied {
        /// Who denied it, from the host's authentication.
        by: Option<ApproverId>,
        /// When.
        at: Timestamp,
    },
}

/// A proposal as a store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredProposal {
    /// The proposal.
    pub proposal: Proposal,
    /// The decision so far.
    pub state: ProposalState,
}

impl StoredProposal {
    /// A proposal as just recorded: pending.
    pub fn pending(proposal: Proposal) -> StoredProposal {
        StoredProposal {
            proposal,
            state: ProposalState::Pending,
        }
    }

    /// What a model or a page is told of it at `now`.
    pub fn status_at(&self, now: Timestamp) -> ProposalStatus {
        match &self.state {
            ProposalState::Pending if self.proposal.is_expired_at(now) => ProposalStatus::Expired,
            ProposalState::Pending => ProposalStatus::Pending,
            ProposalState::Approved { .. } => ProposalStatus::Approved,
            ProposalState::Denied { .. } => ProposalStatus::Denied,
        }
    }
}

/// A proposal's status as a model or a person sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProposalStatus {
    /// Awaiting a decision.
    Pending,
    /// Approved: a grant exists.
    Approved,
    /// Denied.
    Denied,
    /// Expired before anyone decided.
    Expired,
}

impl ProposalStatus {
    /// A lower-case word, as the propose tool reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProposalStatus::Pending => "pending",
            ProposalStatus::Approved => "approved",
            ProposalStatus::Denied => "denied",
            ProposalStatus::Expired => "expired",
        }
    }
}

/// The answer of [`ProposalStore::propose`](crate::ProposalStore::propose)
/// when nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProposeError {
    /// A proposal with this id already exists; it was left untouched.
    #[error("proposal `{0}` already exists")]
    AlreadyExists(ProposalId),
    /// The proposal's run or actor is stopped; nothing was stored.
    #[error("the proposal's run or actor is stopped")]
    Stopped,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store_error::StoreError),
}

/// The answer of a decision ([`approve_proposal`](crate::ProposalStore::approve_proposal),
/// [`deny_proposal`](crate::ProposalStore::deny_proposal)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionOutcome {
    /// This call approved the proposal and stored its grant.
    Approved,
    /// This call denied the proposal.
    Denied,
    /// The proposal was decided before; nothing changed. The state says how.
    AlreadyDecided(ProposalState),
    /// The proposal expired undecided; nothing changed.
    Expired,
    /// Its run or actor is stopped; nothing changed and no grant was stored.
    Stopped,
    /// No proposal has this id.
    Unknown,
}

impl DecisionOutcome {
    /// A lower-case phrase for pages and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            DecisionOutcome::Approved => "approved",
            DecisionOutcome::Denied => "denied",
            DecisionOutcome::AlreadyDecided(ProposalState::Approved { .. }) => "already approved",
            DecisionOutcome::AlreadyDecided(ProposalState::Denied { .. }) => "already denied",
            DecisionOutcome::AlreadyDecided(ProposalState::Pending) => "pending",
            DecisionOutcome::Expired => "expired",
            DecisionOutcome::Stopped => "stopped",
            DecisionOutcome::Unknown => "unknown",
        }
    }
}

/// [`ProposalStore::approve_proposal`](crate::ProposalStore::approve_proposal)
/// failed; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApproveError {
    /// The grant does not approve exactly this proposal (see
    /// [`Proposal::is_approved_by`]); make it with [`Proposal::grant`].
    #[error("the grant does not bind exactly the proposal's actor, run, url, action and page")]
    NotForProposal,
    /// A grant with the given id already exists.
    #[error("approval `{0}` already exists")]
    GrantExists(ApprovalId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store_error::StoreError),
}

/// What one decision does to one proposal, as [`decide_proposal`] rules it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposalDecision {
    /// The answer.
    pub outcome: DecisionOutcome,
    /// The proposal's new state, when this call decides it.
    pub state: Option<ProposalState>,
}

/// A decision a host asks for: approve with `approval`, or deny.
#[derive(Debug, Clone, Copy)]
pub enum Decision<'a> {
    /// Approve, issuing this grant.
    Approve(&'a Approval),
    /// Deny, by this approver.
    Deny(Option<&'a ApproverId>),
}

/// Applies the decision rules of the proposal contract to one proposal's
/// current state. `stopped` tells whether its run or actor was stopped
/// since the proposal was made (also when it was resumed since: a stop
/// ends every proposal made before it, as it ends every grant).
/// The caller checks [`Proposal::is_approved_by`] first: a grant for
/// anything else is refused before any state is read.
///
/// Order: decided ⇒ `AlreadyDecided` (whatever else holds); expired ⇒
/// `Expired`; approving in a stopped run ⇒ `Stopped` (a denial is still
/// recorded: it stores no grant); otherwise the decision is taken.
pub fn decide_proposal(
    proposal: &StoredProposal,
    decision: Decision<'_>,
    stopped: bool,
    now: Timestamp,
) -> ProposalDecision {
    let answer = |outcome| ProposalDecision {
        outcome,
        state: None,
    };
    if proposal.state != ProposalState::Pending {
        return answer(DecisionOutcome::AlreadyDecided(proposal.state.clone()));
    }
    if proposal.proposal.is_expired_at(now) {
        return answer(DecisionOutcome::Expired);
    }
    match decision {
        Decision::Approve(_) if stopped => answer(DecisionOutcome::Stopped),
        Decision::Approve(approval) => ProposalDecision {
            outcome: DecisionOutcome::Approved,
            state: Some(ProposalState::Approved {
                approval_id: approval.id.clone(),
                by: approval.approver.as_ref().map(|a| a.id.clone()),
                at: now,
            }),
        },
        Decision::Deny(by) => ProposalDecision {
            outcome: DecisionOutcome::Denied,
            state: Some(ProposalState::Denied {
                by: by.cloned(),
                at: now,
            }),
        },
    }
}
