//! A host set up as the seed describes, plus stores that fail on purpose.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use countersign_act_tool::approval::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, AttemptId, Binding,
    ConsumeOutcome, ElementIdentity, FrameIdentity, IssueError, ManualClock, OperationLog,
    OperationRecord, OutcomeCode, PageBinding, ResumeOutcome, RevokeOutcome, RunId, StopOutcome,
    StoreError, StoredGrant, Timestamp,
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
/// answer `error` without touching the grant. Every attempt id is kept.
pub struct FlakyStore {
    pub inner: InMemoryApprovalStore,
    fail_before: AtomicUsize,
    apply_then_fail: AtomicUsize,
    fail_abandons: AtomicUsize,
    pub abandons: Mutex<Vec<(AttemptId, Result<AbandonOutcome, StoreError>)>>,
    error: StoreError,
    pub attempts: Mutex<Vec<AttemptId>>,
    pub answers: Mutex<Vec<Result<ConsumeOutcome, StoreError>>>,
}

impl FlakyStore {
    pub fn new(error: StoreError) -> Self {
        FlakyStore {
            inner: InMemoryApprovalStore::new(),
            fail_before: AtomicUsize::new(0),
            apply_then_fail: AtomicUsize::new(0),
            fail_abandons: AtomicUsize::new(0),
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
        Ok(Some(countersign_act_tool::approval::PageSnapshot {
            page: self.binding(),
            screenshot_png: None,
            target_found: self.element.lock().unwrap().is_some(),
        }))
    }
    async fn perform_on_page(
        &self,
        _: &countersign_act_tool::approval::ActionRequest,
        page: &PageBinding,
    ) -> Result<(), countersign_act_tool::approval::BackendError> {
        if page.element != self.binding().element {
            return Err(countersign_act_tool::approval::BackendError::stale_target(
                "the target changed",
            ));
        }
        *self.performed.lock().unwrap() += 1;
        Ok(())
    }
}
