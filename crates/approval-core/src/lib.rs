//! The grant model and the traits countersign's crates meet at.
//!
//! A host issues an [`Approval`] (a grant) for one canonical action on one
//! canonical URL, for one actor and run; a store keeps it; the Act tool
//! consumes it once through [`ApprovalStore::consume_once`].
//!
//! ```
//! use std::time::Duration;
//! use countersign_approval_core::{
//!     ActorId, Approval, AttemptId, Binding, ConsumeOutcome, RunId, StaleReason,
//!     StoredGrant, Timestamp, decide_consume,
//! };
//! use countersign_canonical_policy::{Policy, StaticResolver};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let policy = Policy::builder()
//!     .allow_host("docs.example.com")
//!     .resolver(StaticResolver::answering_all(["93.184.216.34".parse().unwrap()]))
//!     .build()?;
//! let url = policy.authorize_destination("https://docs.example.com/").await?;
//! let action = policy.authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))?;
//!
//! let (actor, run) = (ActorId::new("demo-actor")?, RunId::new("demo-run")?);
//! let now = Timestamp::from_millis(1_000);
//! let approval = Approval::for_action(actor.clone(), run.clone(), &url, &action, Duration::from_secs(60), now)?;
//! assert!(approval.id.as_str().starts_with("apr_"));
//!
//! // The consume rules every store applies, on one grant in memory:
//! let grant = StoredGrant::issued(approval);
//! let binding = Binding::new(&actor, &run, &url, &action);
//! let attempt = AttemptId::generate()?;
//! let decision = decide_consume(&grant, &[], false, &binding, now, &attempt);
//! assert_eq!(decision.outcome, ConsumeOutcome::Consumed { replay: false });
//! let late = Timestamp::from_millis(61_000);
//! assert_eq!(decide_consume(&grant, &[], false, &binding, late, &attempt).outcome, ConsumeOutcome::Stale(StaleReason::Expired));
//! // A stopped run refuses even a matching, unexpired consume.
//! assert_eq!(decide_consume(&grant, &[], true, &binding, now, &attempt).outcome, ConsumeOutcome::Stale(StaleReason::Stopped));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod abandon;
mod backend;
mod control;
mod decided;
mod element;
mod grant;
mod ids;
pub mod measure;
mod notify;
mod observe;
mod operation;
mod page;
mod proposal;
mod standing;
mod standing_approve;
mod store;
mod store_error;
mod submission;
mod summary;
mod time;
mod timed_store;
mod writes;

pub use abandon::{AbandonDecision, AbandonOutcome, MAX_ABANDONED_ATTEMPTS, decide_abandon};
pub use backend::{ActionRequest, Backend, BackendError};
pub use control::{ResumeOutcome, StopOutcome};
pub use decided::DecidedBy;
pub use element::{
    ELEMENT_ATTRIBUTES, ElementIdentity, ElementIdentityError, FrameIdentity, LANDMARK_ROLES,
    MAX_ACCESSIBLE_NAME_BYTES, MAX_ATTRIBUTE_VALUE_BYTES, MAX_ELEMENT_IDENTITY_BYTES,
    MAX_ELEMENT_TEXT_BYTES, MAX_FRAME_FIELD_BYTES, MAX_FRAMES, MAX_LANDMARKS, MAX_ROLE_BYTES,
    MAX_TAG_BYTES,
};
pub use grant::{
    Approval, ApprovalError, Approver, Binding, ConsumeDecision, ConsumeOutcome,
    DEFAULT_ATTEMPT_LIMIT, GrantState, MAX_ATTEMPT_LIMIT, MAX_NOTE_BYTES, MAX_TTL, RevokeOutcome,
    StaleReason, StoredGrant, decide_consume, decide_revoke,
};
pub use ids::{
    ActorId, ApprovalId, ApproverId, AttemptId, EventId, InvalidHostId, MAX_HOST_ID_BYTES,
    OperationId, ProposalId, RULE_APPROVER_PREFIX, RandomnessError, RunId,
    STANDING_APPROVER_PREFIX, StandingId,
};
pub use notify::{
    ClaimedNotification, FINISHED_EVENT_RETENTION, NotificationEvent, NotificationKind,
    NotificationOutbox,
};
pub use observe::{
    ElementRef, MAX_NODE_STATES, MAX_NODE_TEXT_BYTES, MalformedRef, Navigation, ObservedNode,
    ObservedPage, REF_SELECTOR_PREFIX, RefPage, RenderedSnapshot, SnapshotLimits,
};
pub use operation::{GivenApprovalId, OperationLog, OperationRecord, OutcomeCode};
pub use page::{MAX_PAGE_ID_BYTES, PageBinding};
pub use proposal::{
    ApproveError, Decision, DecisionOutcome, MAX_LISTED_PROPOSALS, MAX_SCREENSHOT_BYTES,
    PageSnapshot, Proposal, ProposalDecision, ProposalError, ProposalState, ProposalStatus,
    ProposeError, StoredProposal, TARGET_BOX_PNG_KEYWORD, TargetBox, decide_proposal,
};
pub use standing::{
    GiveBackDecision, MAX_STANDING_SCOPE_BYTES, MAX_STANDING_TTL, MAX_STANDING_USES, StandingError,
    StandingGrant, StandingKey, StandingRevokeOutcome, StandingScope, StandingState,
    StoredStanding, UseDecision, UseOutcome, decide_give_back, decide_use,
};
pub use standing_approve::{StandingApproval, StandingApproveError, approve_standing};
pub use store::{ApprovalStore, IssueError, ProposalStore};
pub use store_error::StoreError;
pub use submission::{
    FormField, FormFieldKind, FormSubmission, FormSubmissionError, MAX_FORM_BYTES, MAX_FORM_FIELDS,
};
pub use summary::ProposalSummary;
pub use time::{Clock, ManualClock, SystemClock, Timestamp};
pub use timed_store::TimedStore;
pub use writes::{AllowedWrite, AllowedWriteError, READ_ONLY_METHODS, RefusedWrite, WriteAccess};

/// Re-exported so users of this crate name the same types.
pub use countersign_canonical_policy as policy;
