//! What countersign counts, through the [`metrics`] facade: acts by
//! outcome, refused consumes by reason, proposals by who decides them,
//! decisions and how long each waited, notifications by result. Every
//! crate of the workspace records through these functions, so each metric
//! has one name and one set of labels. With no recorder installed (a
//! library host that installs none) each call does nothing; a host that
//! exports them installs a recorder (`countersign-mcp` serves them as
//! Prometheus text) and calls [`describe`] once.
//!
//! The same calls open `tracing` spans named here (`countersign.act`,
//! `.consume`, `.propose`, `.decide`, `.navigate`, `.observe`), whose
//! fields carry ids, digests, outcome codes and deciders, never an
//! argument value; a host exports them with its own subscriber (for
//! OpenTelemetry, a `tracing-opentelemetry` layer).
//!
//! Labels hold only closed sets of words (outcome codes, reasons, kinds),
//! never an id, a URL or anything a page or a model wrote, so a metric's
//! series stay few and say nothing of what was acted on.
//!
//! ```
//! use countersign_approval_core::{OutcomeCode, measure};
//!
//! // Without a recorder this is free and does nothing.
//! measure::act(OutcomeCode::Ok);
//! assert_eq!(measure::ACTS, "countersign_acts_total");
//! ```

use std::time::Duration;

use crate::decided::DecidedBy;
use crate::grant::StaleReason;
use crate::notify::NotificationKind;
use crate::operation::OutcomeCode;

/// Acts (`browser_act` calls), by `outcome` (`ok` or the error code).
pub const ACTS: &str = "countersign_acts_total";
/// Consumes the store refused as stale, by `reason` (`consumed`,
/// `expired`, `locked`, `stopped`, …).
pub const STALE: &str = "countersign_stale_total";
/// Proposals stored, by `tier`: who decides them (`person`, or `rule` and
/// `standing` for those decided at once).
pub const PROPOSALS: &str = "countersign_proposals_total";
/// Proposals decided, by `outcome` (`approved`, `denied`) and
/// `decided_by` (`person`, `rule`, `standing`).
pub const DECISIONS: &str = "countersign_decisions_total";
/// How long each decided proposal waited from being proposed to its
/// decision, in seconds, by `decided_by`.
pub const APPROVAL_WAIT: &str = "countersign_approval_wait_seconds";
/// Notifications handled, by `kind` (`proposal.created`, …) and `result`
/// (`delivered`, `retried`, `given_up`, `skipped`).
pub const NOTIFICATIONS: &str = "countersign_notifications_total";
/// How long each call of a store took, in seconds, by `store` and
/// `operation` (the store method's name), through a
/// [`TimedStore`](crate::TimedStore).
pub const STORE_CALL: &str = "countersign_store_call_seconds";

/// The `tracing` span of one `browser_act` call: its operation id, the
/// approval id it names (when well formed), the action digest, the outcome
/// code and reason, and who decided the grant it used.
pub const ACT_SPAN: &str = "countersign.act";
/// The span of one consume, inside [`ACT_SPAN`]: the store's answer.
pub const CONSUME_SPAN: &str = "countersign.consume";
/// The span of one `browser_propose` call: the proposal id and its status,
/// or the error code.
pub const PROPOSE_SPAN: &str = "countersign.propose";
/// The span of one decision on a proposal (a person's, a rule's or a
/// standing grant's): the proposal and approval ids, the outcome, the
/// decider and the wait from proposal to decision in milliseconds.
pub const DECIDE_SPAN: &str = "countersign.decide";
/// The span of one `browser_navigate` call: its outcome.
pub const NAVIGATE_SPAN: &str = "countersign.navigate";
/// The span of one `browser_observe` call: its outcome.
pub const OBSERVE_SPAN: &str = "countersign.observe";

/// Describes every metric to the installed recorder (its help text and
/// unit); call it once after installing one.
pub fn describe() {
    metrics::describe_counter!(ACTS, "acts (browser_act calls) by outcome code");
    metrics::describe_counter!(STALE, "consumes the store refused as stale, by reason");
    metrics::describe_counter!(PROPOSALS, "proposals stored, by who decides them");
    metrics::describe_counter!(DECISIONS, "proposals decided, by outcome and decider");
    metrics::describe_histogram!(
        APPROVAL_WAIT,
        metrics::Unit::Seconds,
        "time from a proposal to its decision"
    );
    metrics::describe_counter!(NOTIFICATIONS, "notifications handled, by kind and result");
    metrics::describe_histogram!(
        STORE_CALL,
        metrics::Unit::Seconds,
        "time of each store call, by store and operation"
    );
}

/// A call `operation` of the store named `store` took `took`.
pub fn store_call(store: &'static str, operation: &'static str, took: Duration) {
    metrics::histogram!(STORE_CALL, "store" => store, "operation" => operation)
        .record(took.as_secs_f64());
}

/// One act ended with `outcome`.
pub fn act(outcome: OutcomeCode) {
    metrics::counter!(ACTS, "outcome" => outcome.as_str()).increment(1);
}

/// The store refused a consume as stale for `reason`.
pub fn stale(reason: StaleReason) {
    metrics::counter!(STALE, "reason" => reason.as_str()).increment(1);
}

/// A proposal was stored; `decided_at_once` is the rule or standing grant
/// that decides it in the same call, `None` when a person decides.
pub fn proposal(decided_at_once: Option<DecidedBy>) {
    let tier = decided_at_once.map_or(DecidedBy::Person.as_str(), DecidedBy::as_str);
    metrics::counter!(PROPOSALS, "tier" => tier).increment(1);
}

/// A proposal was approved (`approved`) or denied by `by`, `waited` after
/// it was proposed.
pub fn decision(approved: bool, by: DecidedBy, waited: Duration) {
    let outcome = if approved { "approved" } else { "denied" };
    metrics::counter!(DECISIONS, "outcome" => outcome, "decided_by" => by.as_str()).increment(1);
    metrics::histogram!(APPROVAL_WAIT, "decided_by" => by.as_str()).record(waited.as_secs_f64());
}

/// What became of one claimed notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotificationResult {
    /// Every notifier took it.
    Delivered,
    /// A notifier failed; it comes back later.
    Retried,
    /// Refused for good, or every attempt failed.
    GivenUp,
    /// Nobody needed telling any more (decided, or gone).
    Skipped,
}

impl NotificationResult {
    /// `delivered`, `retried`, `given_up` or `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationResult::Delivered => "delivered",
            NotificationResult::Retried => "retried",
            NotificationResult::GivenUp => "given_up",
            NotificationResult::Skipped => "skipped",
        }
    }
}

/// A notification of `kind` ended this round as `result`.
pub fn notification(kind: NotificationKind, result: NotificationResult) {
    metrics::counter!(NOTIFICATIONS, "kind" => kind.as_str(), "result" => result.as_str())
        .increment(1);
}
