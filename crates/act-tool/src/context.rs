//! What the host hands the Act tool: who acts, where grants live, what performs.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use countersign_approval_core::{
    ActorId, ApprovalStore, Backend, Clock, MAX_TTL, OperationLog, ProposalStore, RunId,
    SnapshotLimits, SystemClock, Timestamp,
};
use countersign_canonical_policy::Policy;
use countersign_rules::RuleSet;

/// How long a proposal awaits a decision unless the host sets another
/// lifetime ([`ContextBuilder::proposal_ttl`]).
pub const DEFAULT_PROPOSAL_TTL: Duration = Duration::from_secs(15 * 60);

/// How often a consume is tried when the approval store fails with a
/// retryable error ([`StoreError::is_retryable`](countersign_approval_core::StoreError::is_retryable)).
///
/// Every try of one call uses the same attempt id, so a try whose reply was
/// lost and that the store had applied is answered as a replay and counts as
/// success. Before try `n + 1` the tool waits `n × backoff` (linear), using
/// tokio's timer: a non-zero backoff needs a tokio runtime with the time
/// driver enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    backoff: Duration,
}

impl RetryPolicy {
    /// Three tries, 25 ms apart, then 50 ms.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        max_attempts: 3,
        backoff: Duration::from_millis(25),
    };

    /// `max_attempts` tries in all (at least one), waiting `n × backoff`
    /// before try `n + 1`.
    pub fn new(max_attempts: u32, backoff: Duration) -> Self {
        RetryPolicy {
            max_attempts: max_attempts.max(1),
            backoff,
        }
    }

    /// One try, no retry.
    pub fn no_retry() -> Self {
        RetryPolicy::new(1, Duration::ZERO)
    }

    /// Tries in all, at least one.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The base wait between tries.
    pub fn backoff(&self) -> Duration {
        self.backoff
    }

    /// The wait after `failed` failed tries.
    pub(crate) fn delay_after(&self, failed: u32) -> Duration {
        self.backoff.saturating_mul(failed)
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::DEFAULT
    }
}

/// How long the Act tool keeps trying to give back a consume it gave up on
/// ([`ApprovalStore::abandon`]) before it answers: 1 s.
pub const DEFAULT_ABANDON_TIMEOUT: Duration = Duration::from_secs(1);

/// Everything the Act tool needs, chosen by the host, never by a model.
///
/// The actor and run ids are the host's own: the model's tool call cannot
/// name them (a call that tries is refused). Cheap to clone: every part is
/// shared.
///
/// Build one with [`Context::builder`].
#[derive(Clone)]
pub struct Context {
    actor_id: ActorId,
    run_id: RunId,
    backend: Arc<dyn Backend>,
    source_policy: Policy,
    operation_store: Arc<dyn OperationLog>,
    approval_store: Option<Arc<dyn ApprovalStore>>,
    proposal_store: Option<Arc<dyn ProposalStore>>,
    proposal_ttl: Duration,
    clock: Arc<dyn Clock>,
    consume_retry: RetryPolicy,
    abandon_timeout: Duration,
    accept_unbound_grants: bool,
    accept_grants_without_element: bool,
    navigation_needs_grant: bool,
    snapshot_limits: SnapshotLimits,
    /// Swappable while calls run: a rule the host adds mid-run decides the
    /// next propose and the next act. Clones of a context share it.
    rules: Arc<ArcSwapOption<RuleSet>>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("actor_id", &self.actor_id)
            .field("run_id", &self.run_id)
            .field("source_policy", &self.source_policy)
            .field("has_approval_store", &self.approval_store.is_some())
            .field("has_proposal_store", &self.proposal_store.is_some())
            .field("proposal_ttl", &self.proposal_ttl)
            .field("now", &self.now())
            .field("consume_retry", &self.consume_retry)
            .field("abandon_timeout", &self.abandon_timeout)
            .field("accept_unbound_grants", &self.accept_unbound_grants)
            .field(
                "accept_grants_without_element",
                &self.accept_grants_without_element,
            )
            .field("navigation_needs_grant", &self.navigation_needs_grant)
            .field("snapshot_limits", &self.snapshot_limits)
            .field("rules", &self.rules().map(|r| r.rules().count()))
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Starts a builder. Required: actor id, run id, backend, source policy
    /// and operation store. Optional: approval store (without one, every
    /// call is `APPROVAL_REQUIRED`), clock (default [`SystemClock`]) and
    /// consume retry (default [`RetryPolicy::DEFAULT`]) and abandon timeout
    /// (default [`DEFAULT_ABANDON_TIMEOUT`]).
    pub fn builder() -> ContextBuilder {
        ContextBuilder::default()
    }

    /// The host's actor.
    pub fn actor_id(&self) -> &ActorId {
        &self.actor_id
    }
    /// The host's run.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }
    /// What performs approved actions.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }
    /// The policy every destination and action is checked against.
    pub fn source_policy(&self) -> &Policy {
        &self.source_policy
    }
    /// Where one record per Act call goes.
    pub fn operation_store(&self) -> &Arc<dyn OperationLog> {
        &self.operation_store
    }
    /// Where grants live, if the host configured a store.
    pub fn approval_store(&self) -> Option<&Arc<dyn ApprovalStore>> {
        self.approval_store.as_ref()
    }
    /// Where proposals live, if the host takes them (see
    /// [`ContextBuilder::proposal_store`]).
    pub fn proposal_store(&self) -> Option<&Arc<dyn ProposalStore>> {
        self.proposal_store.as_ref()
    }
    /// How long a proposal awaits a decision.
    pub fn proposal_ttl(&self) -> Duration {
        self.proposal_ttl
    }
    /// The clock that governs expiry and timestamps.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
    /// The current time on [`clock`](Self::clock).
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }
    /// How a consume is retried on a retryable store error.
    pub fn consume_retry(&self) -> RetryPolicy {
        self.consume_retry
    }
    /// How long a consume the tool gave up on is given back for at most.
    pub fn abandon_timeout(&self) -> Duration {
        self.abandon_timeout
    }

    /// Whether `browser_navigate` needs a grant for its destination (see
    /// [`ContextBuilder::require_grant_to_navigate`]).
    pub fn navigation_needs_grant(&self) -> bool {
        self.navigation_needs_grant
    }

    /// How much of a page one `browser_observe` shows.
    pub fn snapshot_limits(&self) -> SnapshotLimits {
        self.snapshot_limits
    }

    /// The rules `browser_propose` and `browser_act` decide by now, when
    /// the host gave some ([`ContextBuilder::rules`],
    /// [`replace_rules`](Self::replace_rules)).
    pub fn rules(&self) -> Option<Arc<RuleSet>> {
        self.rules.load_full()
    }

    /// Replaces the rules while the run goes on (`None`: no rules). The
    /// next `browser_propose` decides by them, and so does the next
    /// `browser_act`: a `deny` added now refuses an act whose grant was
    /// approved before, by a person, a rule or a standing grant. Clones of
    /// this context share the change.
    pub fn replace_rules(&self, rules: Option<Arc<RuleSet>>) {
        self.rules.store(rules);
    }

    /// Whether a backend with pages may perform grants bound to no page
    /// (see [`ContextBuilder::accept_unbound_grants`]).
    pub fn accepts_unbound_grants(&self) -> bool {
        self.accept_unbound_grants
    }

    /// Whether a backend with pages may perform page-bound grants that bind
    /// no target element (see
    /// [`ContextBuilder::accept_grants_without_element`]).
    pub fn accepts_grants_without_element(&self) -> bool {
        self.accept_grants_without_element
    }
}

/// A [`Context`] could not be built because a required part is missing or
/// a setting is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ContextError {
    missing: &'static str,
    invalid: Option<&'static str>,
}

impl ContextError {
    /// The missing part, e.g. `actor id`, or the setting out of range,
    /// e.g. `proposal ttl`.
    pub fn missing(&self) -> &'static str {
        self.missing
    }

    fn describe(&self) -> String {
        match self.invalid {
            None => format!("context is missing its {}", self.missing),
            Some(rule) => format!("context {} {rule}", self.missing),
        }
    }
}

/// Builds a [`Context`].
#[derive(Default)]
pub struct ContextBuilder {
    actor_id: Option<ActorId>,
    run_id: Option<RunId>,
    backend: Option<Arc<dyn Backend>>,
    source_policy: Option<Policy>,
    operation_store: Option<Arc<dyn OperationLog>>,
    approval_store: Option<Arc<dyn ApprovalStore>>,
    proposal_store: Option<Arc<dyn ProposalStore>>,
    proposal_ttl: Option<Duration>,
    clock: Option<Arc<dyn Clock>>,
    consume_retry: RetryPolicy,
    abandon_timeout: Option<Duration>,
    accept_unbound_grants: bool,
    accept_grants_without_element: bool,
    navigation_needs_grant: bool,
    snapshot_limits: Option<SnapshotLimits>,
    rules: Option<Arc<RuleSet>>,
}

impl fmt::Debug for ContextBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextBuilder")
            .field("actor_id", &self.actor_id)
            .field("run_id", &self.run_id)
            .field("has_backend", &self.backend.is_some())
            .field("source_policy", &self.source_policy)
            .field("has_operation_store", &self.operation_store.is_some())
            .field("has_approval_store", &self.approval_store.is_some())
            .field("has_proposal_store", &self.proposal_store.is_some())
            .field("proposal_ttl", &self.proposal_ttl)
            .field("has_clock", &self.clock.is_some())
            .field("consume_retry", &self.consume_retry)
            .field("abandon_timeout", &self.abandon_timeout)
            .field("accept_unbound_grants", &self.accept_unbound_grants)
            .field(
                "accept_grants_without_element",
                &self.accept_grants_without_element,
            )
            .finish()
    }
}

impl ContextBuilder {
    /// The host's actor (required).
    pub fn actor_id(mut self, actor_id: ActorId) -> Self {
        self.actor_id = Some(actor_id);
        self
    }

    /// The host's run (required).
    pub fn run_id(mut self, run_id: RunId) -> Self {
        self.run_id = Some(run_id);
        self
    }

    /// What performs approved actions (required). An `Arc<dyn Backend>` is
    /// accepted too.
    pub fn backend(mut self, backend: impl Backend + 'static) -> Self {
        self.backend = Some(Arc::new(backend));
        self
    }

    /// The destination and action policy (required).
    pub fn source_policy(mut self, policy: Policy) -> Self {
        self.source_policy = Some(policy);
        self
    }

    /// Where operation records go (required). An `Arc<dyn OperationLog>` or
    /// an `Arc` of a concrete log is accepted too, so the host keeps a handle.
    pub fn operation_store(mut self, store: impl OperationLog + 'static) -> Self {
        self.operation_store = Some(Arc::new(store));
        self
    }

    /// Where grants live. Without one, every call is `APPROVAL_REQUIRED`.
    /// An `Arc<dyn ApprovalStore>` or an `Arc` of a concrete store is
    /// accepted too, so the host keeps a handle to issue and revoke. It
    /// replaces a proposal store set before (grants and proposals must
    /// live in one store).
    pub fn approval_store(mut self, store: impl ApprovalStore + 'static) -> Self {
        self.proposal_store = None;
        self.approval_store = Some(Arc::new(store));
        self
    }

    /// Where grants **and** proposals live: a store that keeps proposals
    /// (`ProposalStore`) serves as the approval store too, so approving a
    /// proposal and consuming its grant meet in one store. Needed for the
    /// propose tool ([`Propose`](crate::Propose)); it replaces an approval
    /// store set before. An `Arc` of a concrete store is accepted too.
    pub fn proposal_store<S: ProposalStore + 'static>(mut self, store: S) -> Self {
        let store = Arc::new(store);
        self.approval_store = Some(store.clone());
        self.proposal_store = Some(store);
        self
    }

    /// How long a proposal awaits a decision (default
    /// [`DEFAULT_PROPOSAL_TTL`]; more than zero, at most 24 hours, or
    /// [`build`](Self::build) fails).
    pub fn proposal_ttl(mut self, ttl: Duration) -> Self {
        self.proposal_ttl = Some(ttl);
        self
    }

    /// The clock (default [`SystemClock`]). A
    /// [`ManualClock`](countersign_approval_core::ManualClock) clone shares
    /// its time with the original.
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// A clock the host already shares as an `Arc<dyn Clock>`.
    pub fn shared_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// How a consume is retried on a retryable store error (default
    /// [`RetryPolicy::DEFAULT`]).
    pub fn consume_retry(mut self, retry: RetryPolicy) -> Self {
        self.consume_retry = retry;
        self
    }

    /// How long the tool keeps trying to give back a consume it gave up on
    /// (default [`DEFAULT_ABANDON_TIMEOUT`]). When the store fails a
    /// consume for good, the tool calls
    /// [`ApprovalStore::abandon`](countersign_approval_core::ApprovalStore::abandon)
    /// with the same attempt id, retrying retryable errors until this much
    /// time has passed, and tells the model whether the approval is still
    /// usable. The call's answer waits for it, so this bounds the extra
    /// latency of a failed call. The bound uses tokio's timer: a call that
    /// gives up on a consume needs a tokio runtime with the time driver
    /// enabled (as the default retry backoff does).
    pub fn abandon_timeout(mut self, timeout: Duration) -> Self {
        self.abandon_timeout = Some(timeout);
        self
    }

    /// Lets a backend that has pages (a live browser) perform grants bound
    /// to no page, issued with [`issue_grant`](crate::issue_grant) rather
    /// than [`issue_page_grant`](crate::issue_page_grant).
    ///
    /// **Risk:** such a grant names a URL and an action but not the
    /// document, tab or browser session. The backend still refuses a page
    /// whose URL differs, but a reload, a form post that lands on the same
    /// URL, or another tab showing that URL would receive the action the
    /// host approved on a page it never saw. Off by default.
    pub fn accept_unbound_grants(mut self) -> Self {
        self.accept_unbound_grants = true;
        self
    }

    /// Lets [`issue_page_grant`](crate::issue_page_grant) issue, and Act
    /// perform, a grant bound to a page but to no target element, for an
    /// action that names a target (any method but `navigate`).
    ///
    /// **Risk:** such a grant names the document, not the element: a page
    /// that turns "Pay $5" into "Pay $5000", swaps the button behind the
    /// selector or changes what its form submits still gets the click,
    /// because nothing said what the person saw. Approve from the
    /// backend's snapshot of the action instead (for Chromium,
    /// `Tab::approval`), which binds the element. Off by default; grants
    /// issued before element binding keep working only with it.
    pub fn accept_grants_without_element(mut self) -> Self {
        self.accept_grants_without_element = true;
        self
    }

    /// Makes `browser_navigate` need a grant: the model passes the
    /// `approval_id` of a grant the host issued for the destination URL and
    /// the action `{"method": "navigate", "selector": ":root"}`
    /// ([`NAVIGATE_METHOD`](crate::NAVIGATE_METHOD), [`NAVIGATE_SELECTOR`](crate::NAVIGATE_SELECTOR)),
    /// consumed once like any grant. For sites where a GET changes state.
    /// The policy must allow the method `navigate`
    /// ([`allow_methods`](countersign_canonical_policy::PolicyBuilder::allow_methods)),
    /// or every navigation is refused. Off by default: navigation needs no
    /// grant, only the policy's consent.
    pub fn require_grant_to_navigate(mut self) -> Self {
        self.navigation_needs_grant = true;
        self
    }

    /// How much of a page one `browser_observe` shows (default
    /// [`SnapshotLimits::default`]: 4,000 nodes, 256 KiB).
    pub fn snapshot_limits(mut self, limits: SnapshotLimits) -> Self {
        self.snapshot_limits = Some(limits);
        self
    }

    /// Rules that decide, once `browser_propose` has taken its snapshot,
    /// whether the proposal is approved at once (`auto`: the ordinary
    /// single-use grant, bound to the element, approved by `rule:<id>`),
    /// waits for a person (`person`, as without rules) or is refused
    /// (`deny`: `NOT_AUTHORIZED` with the rule's reason). The policy is
    /// checked first: a rule only narrows it. One shared set may serve
    /// every run.
    pub fn rules(mut self, rules: impl Into<Arc<RuleSet>>) -> Self {
        self.rules = Some(rules.into());
        self
    }

    /// Builds the context, or names the first missing required part.
    pub fn build(self) -> Result<Context, ContextError> {
        let missing = |missing| ContextError {
            missing,
            invalid: None,
        };
        let proposal_ttl = self.proposal_ttl.unwrap_or(DEFAULT_PROPOSAL_TTL);
        if proposal_ttl.is_zero() || proposal_ttl > MAX_TTL {
            return Err(ContextError {
                missing: "proposal ttl",
                invalid: Some("must be more than 0 and at most 24 hours"),
            });
        }
        Ok(Context {
            actor_id: self.actor_id.ok_or(missing("actor id"))?,
            run_id: self.run_id.ok_or(missing("run id"))?,
            backend: self.backend.ok_or(missing("backend"))?,
            source_policy: self.source_policy.ok_or(missing("source policy"))?,
            operation_store: self.operation_store.ok_or(missing("operation store"))?,
            approval_store: self.approval_store,
            proposal_store: self.proposal_store,
            proposal_ttl,
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            consume_retry: self.consume_retry,
            abandon_timeout: self.abandon_timeout.unwrap_or(DEFAULT_ABANDON_TIMEOUT),
            accept_unbound_grants: self.accept_unbound_grants,
            accept_grants_without_element: self.accept_grants_without_element,
            navigation_needs_grant: self.navigation_needs_grant,
            snapshot_limits: self.snapshot_limits.unwrap_or_default(),
            rules: Arc::new(ArcSwapOption::new(self.rules)),
        })
    }
}
