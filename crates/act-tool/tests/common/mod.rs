//! A host set up as the seed describes, plus stores that fail on purpose.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use countersign_act_tool::approval::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, ApproveError, ApproverId,
    AttemptId, Binding, ConsumeOutcome, DecisionOutcome, ElementIdentity, FrameIdentity,
    IssueError, ManualClock, OperationLog, OperationRecord, OutcomeCode, PageBinding, Proposal,
    ProposalId, ProposalStore, ProposeError, ResumeOutcome, RevokeOutcome, RunId, StandingGrant,
    StandingId, StandingKey, StandingRevokeOutcome, StopOutcome, StoreError, StoredGrant,
    StoredProposal, StoredStanding, Timestamp, UseOutcome,
};
use countersign_act_tool::policy::{Policy, StaticResolver};
use countersign_act_tool::{Act, Context, RetryPolicy, issue_grant};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};

pub const URL: &str = "https://docs.example.com/";
pub const START: Timestamp = Timestamp::from_millis(1_700_000_000_000);
pub const TTL: Duration = Duration::from_secs(60);

pub fn policy() -> Policy {
    Policy::builder()
        .allow_host("docs.example.com")
        .allow_host("internal.example.com")
        .resolver(
            StaticResolver::new()
                .with_host("docs.example.com", ["93.184.216.34".parse().unwrap()])
                .with_host("internal.example.com", ["10.0.0.7".parse().unwrap()]),
        )
        .build()
        .unwrap()
}

pub fn click() -> Value {
    json!({"method": "click", "selector": "a#docs"})
}

/// A model's call for `approval_id` with the action fields of `action`.
/// The fake's page `CTX1`/`TAB1` showing `revision`, with the click's
/// target bound: what a live backend's snapshot gives a grant.
pub fn bound_page(revision: &str) -> PageBinding {
    PageBinding::new("CTX1", "TAB1", revision).with_element(
        ElementIdentity::new(
            "link",
            "Docs",
            "a",
            "Docs",
            std::collections::BTreeMap::new(),
            vec![FrameIdentity::new("https://docs.example.com", revision)],
        )
        .unwrap(),
    )
}

pub fn call_for(url: &str, approval_id: &str, action: &Value) -> Value {
    let mut call = json!({"url": url, "approval_id": approval_id});
    for (k, v) in action.as_object().unwrap() {
        call[k] = v.clone();
    }
    call
}

pub struct Harness {
    pub backend: FakeBackend,
    pub operations: Arc<InMemoryOperationStore>,
    pub store: Option<Arc<dyn ApprovalStore>>,
    pub clock: ManualClock,
    pub context: Context,
    pub act: Act,
}

impl Harness {
    /// Actor `actor-1`, run `run-1`, an in-memory approval store.
    pub fn new() -> Self {
        Self::with_store(Some(Arc::new(InMemoryApprovalStore::new())))
    }

    pub fn without_store() -> Self {
        Self::with_store(None)
    }

    pub fn with_store(store: Option<Arc<dyn ApprovalStore>>) -> Self {
        Self::build(
            store,
            "actor-1",
            "run-1",
            RetryPolicy::new(3, Duration::ZERO),
        )
    }

    pub fn build(
        store: Option<Arc<dyn ApprovalStore>>,
        actor: &str,
        run: &str,
        retry: RetryPolicy,
    ) -> Self {
        let backend = FakeBackend::new();
        let operations = Arc::new(InMemoryOperationStore::new());
        let clock = ManualClock::new(START);
        let mut builder = Context::builder()
            .actor_id(ActorId::new(actor).unwrap())
            .run_id(RunId::new(run).unwrap())
            .backend(backend.clone())
            .source_policy(policy())
            .operation_store(operations.clone())
            .clock(clock.clone())
            .consume_retry(retry);
        if let Some(store) = &store {
            builder = builder.approval_store(store.clone());
        }
        let context = builder.build().unwrap();
        let act = Act::new(context.clone());
        Harness {
            backend,
            operations,
            store,
            clock,
            context,
            act,
        }
    }

    /// Another host context (actor, run) sharing this one's store, backend,
    /// log and clock.
    pub fn as_other(&self, actor: &str, run: &str) -> Act {
        let context = Context::builder()
            .actor_id(ActorId::new(actor).unwrap())
            .run_id(RunId::new(run).unwrap())
            .backend(self.backend.clone())
            .source_policy(policy())
            .operation_store(self.operations.clone())
            .approval_store(self.store.clone().unwrap())
            .clock(self.clock.clone())
            .build()
            .unwrap();
        Act::new(context)
    }

    pub fn store(&self) -> &Arc<dyn ApprovalStore> {
        self.store.as_ref().unwrap()
    }

    pub async fn grant(&self, url: &str, action: &Value) -> Approval {
        issue_grant(&self.context, url, action, TTL).await.unwrap()
    }

    pub async fn grant_click(&self) -> Approval {
        self.grant(URL, &click()).await
    }

    pub async fn run(&self, call: &Value) -> Value {
        self.act.execute_json(call).await
    }

    pub fn records(&self) -> Vec<OperationRecord> {
        self.operations.records().unwrap()
    }

    pub fn last_record(&self) -> OperationRecord {
        self.records().pop().unwrap()
    }

    /// Runs `call` through `act` and checks it was refused with `code`:
    /// the backend recorded nothing more, and exactly one more operation
    /// record was written, with that outcome.
    pub async fn expect_refused_by(&self, act: &Act, call: &Value, code: &str) -> Value {
        let performed = self.backend.len();
        let records = self.records().len();
        let result = act.execute_json(call).await;
        assert_eq!(result["status"], "error", "{result}");
        assert_eq!(result["error"]["code"], code, "{result}");
        assert_eq!(
            self.backend.len(),
            performed,
            "a refusal performed something"
        );
        let after = self.records();
        assert_eq!(after.len(), records + 1, "not exactly one operation record");
        let record = after.last().unwrap();
        assert_eq!(record.outcome.as_str(), code);
        assert_eq!(result["operation_id"], record.operation_id.as_str());
        check_message(result["error"]["message"].as_str().unwrap());
        result
    }

    pub async fn expect_refused(&self, call: &Value, code: &str) -> Value {
        self.expect_refused_by(&self.act, call, code).await
    }

    pub async fn expect_ok(&self, call: &Value) -> Value {
        let performed = self.backend.len();
        let result = self.run(call).await;
        assert_eq!(result["status"], "ok", "{result}");
        assert_eq!(self.backend.len(), performed + 1);
        let record = self.last_record();
        assert_eq!(record.outcome, OutcomeCode::Ok);
        assert_eq!(record.reason, "");
        assert_eq!(result["operation_id"], record.operation_id.as_str());
        result
    }
}

/// Messages are lower-case and have no final period.
pub fn check_message(message: &str) {
    assert!(!message.is_empty());
    let first = message.chars().next().unwrap();
    assert!(
        !first.is_uppercase(),
        "message starts upper-case: {message}"
    );
    assert!(
        !message.ends_with('.'),
        "message ends with a period: {message}"
    );
}

/// An approval store that fails on purpose, around an in-memory one.
///
/// `fail_before(n)`: the next n consumes return `error` without touching
/// the grant. `apply_then_fail(n)`: the next n consumes are applied, then
/// answer `error` (a lost reply). `fail_abandons(n)`: the next n abandons
/// answer `error` without touching the grant. `refuse_uses(n)`: the next n
/// uses of a standing grant answer `error` without reaching it, as a store
/// that refuses connections does. Every attempt id is kept.
pub struct FlakyStore {
    pub inner: Arc<InMemoryApprovalStore>,
    fail_before: AtomicUsize,
    apply_then_fail: AtomicUsize,
    fail_abandons: AtomicUsize,
    refuse_uses: AtomicUsize,
    uses_refused: AtomicUsize,
    pub abandons: Mutex<Vec<(AttemptId, Result<AbandonOutcome, StoreError>)>>,
    error: StoreError,
    pub attempts: Mutex<Vec<AttemptId>>,
    pub answers: Mutex<Vec<Result<ConsumeOutcome, StoreError>>>,
}

impl FlakyStore {
    pub fn new(error: StoreError) -> Self {
        FlakyStore::around(Arc::new(InMemoryApprovalStore::new()), error)
    }

    /// Around `inner`, which the caller may also read and write directly.
    pub fn around(inner: Arc<InMemoryApprovalStore>, error: StoreError) -> Self {
        FlakyStore {
            inner,
            fail_before: AtomicUsize::new(0),
            apply_then_fail: AtomicUsize::new(0),
            fail_abandons: AtomicUsize::new(0),
            refuse_uses: AtomicUsize::new(0),
            uses_refused: AtomicUsize::new(0),
            abandons: Mutex::new(Vec::new()),
            error,
            attempts: Mutex::new(Vec::new()),
            answers: Mutex::new(Vec::new()),
        }
    }

    pub fn fail_before(&self, n: usize) {
        self.fail_before.store(n, Ordering::SeqCst);
    }

    pub fn apply_then_fail(&self, n: usize) {
        self.apply_then_fail.store(n, Ordering::SeqCst);
    }

    pub fn fail_abandons(&self, n: usize) {
        self.fail_abandons.store(n, Ordering::SeqCst);
    }

    pub fn refuse_uses(&self, n: usize) {
        self.refuse_uses.store(n, Ordering::SeqCst);
    }

    /// Uses of standing grants refused so far.
    pub fn uses_refused(&self) -> usize {
        self.uses_refused.load(Ordering::SeqCst)
    }

    pub fn abandons(&self) -> Vec<(AttemptId, Result<AbandonOutcome, StoreError>)> {
        self.abandons.lock().unwrap().clone()
    }

    pub fn attempts(&self) -> Vec<AttemptId> {
        self.attempts.lock().unwrap().clone()
    }

    pub fn answers(&self) -> Vec<Result<ConsumeOutcome, StoreError>> {
        self.answers.lock().unwrap().clone()
    }

    fn take(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

#[async_trait]
impl ApprovalStore for FlakyStore {
    async fn issue(&self, approval: Approval) -> Result<(), IssueError> {
        self.inner.issue(approval).await
    }
    async fn revoke(&self, id: &ApprovalId) -> Result<RevokeOutcome, StoreError> {
        self.inner.revoke(id).await
    }
    async fn get(&self, id: &ApprovalId) -> Result<Option<StoredGrant>, StoreError> {
        self.inner.get(id).await
    }
    async fn consume_once(
        &self,
        id: &ApprovalId,
        binding: &Binding,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<ConsumeOutcome, StoreError> {
        self.attempts.lock().unwrap().push(attempt.clone());
        let answer = if Self::take(&self.fail_before) {
            Err(self.error.clone())
        } else {
            let applied = self.inner.consume_once(id, binding, now, attempt).await;
            if Self::take(&self.apply_then_fail) {
                Err(self.error.clone())
            } else {
                applied
            }
        };
        self.answers.lock().unwrap().push(answer.clone());
        answer
    }
    async fn abandon(
        &self,
        id: &ApprovalId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        let answer = if Self::take(&self.fail_abandons) {
            Err(self.error.clone())
        } else {
            self.inner.abandon(id, attempt, now).await
        };
        self.abandons
            .lock()
            .unwrap()
            .push((attempt.clone(), answer.clone()));
        answer
    }
    async fn stop_run(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<StopOutcome, StoreError> {
        self.inner.stop_run(actor, run, now).await
    }
    async fn stop_actor(&self, actor: &ActorId, now: Timestamp) -> Result<StopOutcome, StoreError> {
        self.inner.stop_actor(actor, now).await
    }
    async fn resume_run(&self, actor: &ActorId, run: &RunId) -> Result<ResumeOutcome, StoreError> {
        self.inner.resume_run(actor, run).await
    }
    async fn resume_actor(&self, actor: &ActorId) -> Result<ResumeOutcome, StoreError> {
        self.inner.resume_actor(actor).await
    }
}

#[async_trait]
impl ProposalStore for FlakyStore {
    async fn propose(&self, proposal: Proposal) -> Result<(), ProposeError> {
        self.inner.propose(proposal).await
    }
    async fn get_proposal(&self, id: &ProposalId) -> Result<Option<StoredProposal>, StoreError> {
        self.inner.get_proposal(id).await
    }
    async fn pending_proposals(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredProposal>, StoreError> {
        self.inner.pending_proposals(actor, run, now).await
    }
    async fn approve_proposal(
        &self,
        id: &ProposalId,
        approval: Approval,
        now: Timestamp,
    ) -> Result<DecisionOutcome, ApproveError> {
        self.inner.approve_proposal(id, approval, now).await
    }
    async fn deny_proposal(
        &self,
        id: &ProposalId,
        by: Option<&ApproverId>,
        now: Timestamp,
    ) -> Result<DecisionOutcome, StoreError> {
        self.inner.deny_proposal(id, by, now).await
    }
    async fn issue_standing(&self, grant: StandingGrant) -> Result<(), IssueError> {
        self.inner.issue_standing(grant).await
    }
    async fn get_standing(&self, id: &StandingId) -> Result<Option<StoredStanding>, StoreError> {
        self.inner.get_standing(id).await
    }
    async fn standing_grants(
        &self,
        actor: &ActorId,
        run: &RunId,
        now: Timestamp,
    ) -> Result<Vec<StoredStanding>, StoreError> {
        self.inner.standing_grants(actor, run, now).await
    }
    async fn use_standing(
        &self,
        id: &StandingId,
        key: &StandingKey,
        now: Timestamp,
        attempt: &AttemptId,
    ) -> Result<UseOutcome, StoreError> {
        if Self::take(&self.refuse_uses) {
            self.uses_refused.fetch_add(1, Ordering::SeqCst);
            return Err(self.error.clone());
        }
        self.inner.use_standing(id, key, now, attempt).await
    }
    async fn give_back_use(
        &self,
        id: &StandingId,
        attempt: &AttemptId,
        now: Timestamp,
    ) -> Result<AbandonOutcome, StoreError> {
        self.inner.give_back_use(id, attempt, now).await
    }
    async fn revoke_standing(&self, id: &StandingId) -> Result<StandingRevokeOutcome, StoreError> {
        self.inner.revoke_standing(id).await
    }
}

/// An operation log whose writes always fail.
pub struct BrokenLog;

#[async_trait]
impl OperationLog for BrokenLog {
    async fn record(&self, _record: OperationRecord) -> Result<(), StoreError> {
        Err(StoreError::unavailable("log is down"))
    }
    async fn records_for_run(&self, _run: &RunId) -> Result<Vec<OperationRecord>, StoreError> {
        Err(StoreError::unavailable("log is down"))
    }
    async fn record_for_operation(
        &self,
        _id: &countersign_act_tool::approval::OperationId,
    ) -> Result<Option<OperationRecord>, StoreError> {
        Err(StoreError::unavailable("log is down"))
    }
}

/// A live-backend stand-in whose page shows one proposed target, the
/// element set last (`None`: not found), in session `session`, tab `tab`,
/// revision `rev-1`. It re-checks the element before input, as a live
/// backend does for an element-bound grant, and counts what it performs.
#[derive(Clone, Default)]
pub struct ElementPage {
    element: Arc<Mutex<Option<ElementIdentity>>>,
    performed: Arc<Mutex<usize>>,
    /// The write access of each act performed, in order.
    writes: Arc<Mutex<Vec<countersign_act_tool::approval::WriteAccess>>>,
    /// How many snapshots took the picture, and how many only bound.
    looks: Arc<Mutex<(usize, usize)>>,
}

impl ElementPage {
    /// A page showing `element`.
    pub fn showing(element: Option<ElementIdentity>) -> Self {
        let page = ElementPage::default();
        page.show(element);
        page
    }

    /// Shows `element` from now on.
    pub fn show(&self, element: Option<ElementIdentity>) {
        *self.element.lock().unwrap() = element;
    }

    /// How many actions were performed.
    pub fn performed(&self) -> usize {
        *self.performed.lock().unwrap()
    }

    /// How many snapshots took the picture (`snapshot`) and how many only
    /// bound the page (`binding_snapshot`).
    pub fn looks(&self) -> (usize, usize) {
        *self.looks.lock().unwrap()
    }

    /// The write access each act was performed with, in order.
    pub fn writes(&self) -> Vec<countersign_act_tool::approval::WriteAccess> {
        self.writes.lock().unwrap().clone()
    }

    /// The page as a snapshot shows it, with `png` as its picture.
    fn page_snapshot(&self, png: Option<Vec<u8>>) -> countersign_act_tool::approval::PageSnapshot {
        countersign_act_tool::approval::PageSnapshot {
            page: self.binding(),
            screenshot_png: png,
            target_found: self.element.lock().unwrap().is_some(),
        }
    }

    fn binding(&self) -> PageBinding {
        let page = PageBinding::new("session", "tab", "rev-1");
        match self.element.lock().unwrap().clone() {
            Some(element) => page.with_element(element),
            None => page,
        }
    }
}

#[async_trait]
impl countersign_act_tool::approval::Backend for ElementPage {
    async fn perform(
        &self,
        _: &countersign_act_tool::approval::ActionRequest,
    ) -> Result<(), countersign_act_tool::approval::BackendError> {
        Err(
            countersign_act_tool::approval::BackendError::not_dispatched(
                "only page-bound grants here",
            ),
        )
    }
    async fn current_page(
        &self,
    ) -> Result<Option<PageBinding>, countersign_act_tool::approval::BackendError> {
        Ok(Some(PageBinding::new("session", "tab", "rev-1")))
    }
    async fn snapshot(
        &self,
        _: &countersign_act_tool::policy::AuthorizedUrl,
        _: &countersign_act_tool::policy::Action,
    ) -> Result<
        Option<countersign_act_tool::approval::PageSnapshot>,
        countersign_act_tool::approval::BackendError,
    > {
        self.looks.lock().unwrap().0 += 1;
        Ok(Some(
            self.page_snapshot(Some(b"\x89PNG\r\n\x1a\n".to_vec())),
        ))
    }
    async fn binding_snapshot(
        &self,
        _: &countersign_act_tool::policy::AuthorizedUrl,
        _: &countersign_act_tool::policy::Action,
    ) -> Result<
        Option<countersign_act_tool::approval::PageSnapshot>,
        countersign_act_tool::approval::BackendError,
    > {
        self.looks.lock().unwrap().1 += 1;
        Ok(Some(self.page_snapshot(None)))
    }
    async fn perform_on_page(
        &self,
        request: &countersign_act_tool::approval::ActionRequest,
        page: &PageBinding,
    ) -> Result<(), countersign_act_tool::approval::BackendError> {
        if page.element != self.binding().element {
            return Err(countersign_act_tool::approval::BackendError::stale_target(
                "the target changed",
            ));
        }
        *self.performed.lock().unwrap() += 1;
        self.writes.lock().unwrap().push(request.writes.clone());
        Ok(())
    }
    /// Every read-only act's page tried to post a payment, and was refused.
    async fn refused_writes(
        &self,
        operation: &countersign_act_tool::approval::OperationId,
    ) -> Result<
        Vec<countersign_act_tool::approval::RefusedWrite>,
        countersign_act_tool::approval::BackendError,
    > {
        let read_only = self
            .writes
            .lock()
            .unwrap()
            .last()
            .is_some_and(|w| w.is_read_only());
        Ok(if read_only {
            vec![countersign_act_tool::approval::RefusedWrite::new(
                operation.clone(),
                "POST",
                "https://docs.example.com/pay?amount=5",
                "XHR",
            )]
        } else {
            Vec::new()
        })
    }
}
