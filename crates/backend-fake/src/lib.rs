//! A countersign [`Backend`] that records approved actions and performs nothing.
//!
//! [`FakeBackend`] keeps every [`ActionRequest`] it is handed in process.
//! It never opens a browser, never touches the network and never changes a
//! website: it is an in-process fixture for exercising the approval flow.
//! Clones share one record, so a test hands one clone to the host's context
//! and keeps another to inspect.
//!
//! ```
//! use countersign_approval_core::{
//!     ActionRequest, ActorId, ApprovalId, Backend, OperationId, RunId,
//! };
//! use countersign_approval_core::policy::{Policy, StaticResolver};
//! use countersign_backend_fake::FakeBackend;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let policy = Policy::builder()
//!     .allow_host("docs.example.com")
//!     .resolver(StaticResolver::answering_all(["93.184.216.34".parse()?]))
//!     .build()?;
//! let request = ActionRequest {
//!     operation_id: OperationId::generate()?,
//!     approval_id: ApprovalId::generate()?,
//!     actor_id: ActorId::new("demo-actor")?,
//!     run_id: RunId::new("demo-run")?,
//!     url: policy.authorize_destination("https://docs.example.com/").await?,
//!     action: policy.authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))?,
//! };
//!
//! let backend = FakeBackend::new();
//! let seen = backend.clone(); // shares the record
//! backend.perform(&request).await?;
//! assert_eq!(seen.len(), 1);
//! assert_eq!(seen.records()[0].action.selector(), "a#docs");
//!
//! // Told to fail, it records nothing.
//! seen.fail_next();
//! assert!(backend.perform(&request).await.is_err());
//! assert_eq!(seen.len(), 1);
//! assert_eq!(seen.failures(), 1);
//!
//! // A failure may say that nothing was dispatched (the default says the
//! // backend may have acted).
//! seen.fail_before_dispatch(true);
//! seen.fail_next();
//! assert!(!backend.perform(&request).await.unwrap_err().may_have_acted());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # What it does not prove
//!
//! A successful `perform` here means only that the Act tool consumed a
//! matching grant and handed the action on. It says nothing about whether a
//! live page would have the element, whether the click would do what the
//! description says, or whether the page the grant names is the page a
//! browser is showing.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use countersign_approval_core::{ActionRequest, Backend, BackendError, PageBinding};

#[derive(Debug, Default)]
struct State {
    records: Vec<ActionRequest>,
    failures: usize,
    fail_next: usize,
    fail_all: bool,
    fail_before_dispatch: bool,
    page: Option<PageBinding>,
}

/// A backend that records each action it is asked to perform and performs
/// nothing. Clones share the same record and failure switches.
#[derive(Debug, Clone, Default)]
pub struct FakeBackend {
    state: Arc<Mutex<State>>,
}

impl FakeBackend {
    /// A backend with an empty record that performs (records) every call.
    pub fn new() -> Self {
        Self::default()
    }

    /// The record is plain data that every operation leaves consistent, so a
    /// panic in another thread while it held the lock does not invalidate it.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of every request performed so far, oldest first. Failed calls
    /// are not in it.
    pub fn records(&self) -> Vec<ActionRequest> {
        self.state().records.clone()
    }

    /// How many requests were performed.
    pub fn len(&self) -> usize {
        self.state().records.len()
    }

    /// Whether no request was performed.
    pub fn is_empty(&self) -> bool {
        self.state().records.is_empty()
    }

    /// How many calls failed because the backend was told to fail.
    pub fn failures(&self) -> usize {
        self.state().failures
    }

    /// Makes the next call fail (and record nothing). Calling it `n` times
    /// makes the next `n` calls fail.
    pub fn fail_next(&self) {
        self.state().fail_next += 1;
    }

    /// Makes every call fail while `fail` is true.
    pub fn fail_all(&self, fail: bool) {
        self.state().fail_all = fail;
    }

    /// Chooses what the failures that [`fail_next`](Self::fail_next) and
    /// [`fail_all`](Self::fail_all) cause say: with `true`, that nothing was
    /// dispatched ([`BackendError::not_dispatched`], so the Act tool gives
    /// the grant back); with `false`, the default, that the backend may have
    /// acted ([`BackendError::new`], the grant stays consumed). Either way
    /// nothing is recorded.
    pub fn fail_before_dispatch(&self, before: bool) {
        self.state().fail_before_dispatch = before;
    }

    /// Makes the fake act like a backend with pages, showing `page` (or, with
    /// `None`, like one without pages, the default). With a page, Act reads
    /// the grant before consuming and hands page-bound grants to
    /// [`perform_on_page`](Backend::perform_on_page), which records only
    /// while the page still shows the grant's document, and — for an
    /// element-bound grant — while `page.element` (the page model's target)
    /// is still the bound [`ElementIdentity`](countersign_approval_core::ElementIdentity);
    /// a changed target is refused with
    /// [`BackendError::stale_target`]. Lets tests exercise page- and
    /// element-bound grants without a browser.
    pub fn set_page(&self, page: Option<PageBinding>) {
        self.state().page = page;
    }

    /// Forgets every record and failure count, and clears the failure
    /// switches (back to "may have acted") and the page.
    pub fn clear(&self) {
        *self.state() = State::default();
    }
}

#[async_trait]
impl Backend for FakeBackend {
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError> {
        let mut state = self.state();
        let fail = if state.fail_all {
            true
        } else if state.fail_next > 0 {
            state.fail_next -= 1;
            true
        } else {
            false
        };
        if fail {
            state.failures += 1;
            return Err(if state.fail_before_dispatch {
                BackendError::not_dispatched("fake backend was told to fail before dispatching")
            } else {
                BackendError::new("fake backend was told to fail")
            });
        }
        state.records.push(request.clone());
        Ok(())
    }

    async fn current_page(&self) -> Result<Option<PageBinding>, BackendError> {
        Ok(self.state().page.clone())
    }

    async fn perform_on_page(
        &self,
        request: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        let shown = self.state().page.clone();
        let Some(shown) = shown.filter(|shown| shown.same_document(page)) else {
            return Err(BackendError::not_dispatched(
                "the page changed before the action; nothing was recorded",
            ));
        };
        // An element-bound grant: the page model's target must still be
        // what the person approved, as a live backend re-reads it.
        if page.element.is_some() && shown.element != page.element {
            return Err(BackendError::stale_target(
                "the target element changed since approval; nothing was recorded",
            ));
        }
        self.perform(request).await
    }
}
