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
//!     ActionRequest, ActorId, ApprovalId, Backend, OperationId, RunId, WriteAccess,
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
//!     writes: WriteAccess::Open,
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
use countersign_approval_core::policy::{Action, AuthorizedUrl};
use countersign_approval_core::{
    ActionRequest, Backend, BackendError, Navigation, ObservedPage, PageBinding, PageSnapshot,
};

mod site;

use site::SiteState;
pub use site::{FAKE_SESSION, FAKE_TAB, FakeElement, FakePage, FakeSite};

#[derive(Debug, Default)]
struct State {
    records: Vec<ActionRequest>,
    failures: usize,
    fail_next: usize,
    fail_all: bool,
    fail_before_dispatch: bool,
    page: Option<PageBinding>,
    site: Option<SiteState>,
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

    /// A backend with pages that shows `site`: it starts on `about:blank`;
    /// [`navigate`](Backend::navigate) goes to a page of the site
    /// (following its redirects; an unknown URL lands on an empty error
    /// page and says why), [`observe`](Backend::observe) shows the page's
    /// elements, each with a ref, and every new page is a new document
    /// (revision `rev-1`, `rev-2`, … in session [`FAKE_SESSION`], tab
    /// [`FAKE_TAB`]). Targets are named by ref or by an element's selector
    /// (compared as text); snapshots bind the target's identity (role, tag,
    /// name as its text, the page's origin and revision as its frame), and
    /// [`perform_on_page`](Backend::perform_on_page) records only while
    /// the page shows the grant's URL and document and the target still
    /// has the bound identity.
    pub fn with_site(site: FakeSite) -> Self {
        let backend = Self::default();
        {
            let mut state = backend.state();
            let site = SiteState::new(site);
            state.page = Some(site.binding());
            state.site = Some(site);
        }
        backend
    }

    /// Renames the element `selector` (a selector or `aria-ref=…`) names on
    /// the page shown, as a page's script would relabel it (same document,
    /// same ref). Whether such an element was there.
    pub fn rename_element(&self, selector: &str, name: &str) -> bool {
        self.state()
            .site
            .as_mut()
            .is_some_and(|site| site.rename(selector, name))
    }

    /// Removes the element `selector` names from the page shown. Whether
    /// such an element was there.
    pub fn remove_element(&self, selector: &str) -> bool {
        self.state()
            .site
            .as_mut()
            .is_some_and(|site| site.remove(selector))
    }

    /// Forgets every record and failure count, and clears the failure
    /// switches (back to "may have acted") and the page.
    pub fn clear(&self) {
        *self.state() = State::default();
    }
}

impl FakeBackend {
    /// With a site: the page must show the request's URL (and `page`'s
    /// document, when given) and the target must be there, with `page`'s
    /// bound identity when it binds one. `None` without a site.
    fn check_site_target(
        &self,
        request: &ActionRequest,
        page: Option<&PageBinding>,
    ) -> Option<Result<(), BackendError>> {
        let state = self.state();
        let site = state.site.as_ref()?;
        Some((|| {
            if page.is_some_and(|page| !page.same_document(&site.binding())) {
                return Err(BackendError::stale_target(
                    "the page changed since approval; nothing was recorded",
                ));
            }
            if site.url() != request.url.as_str() {
                return Err(BackendError::not_dispatched(
                    "the page shows another url than the approval's; nothing was recorded",
                ));
            }
            let Some(identity) = site.target(request.action.selector())? else {
                return Err(BackendError::not_dispatched(
                    "no element on the page matches the selector; nothing was recorded",
                ));
            };
            match page.and_then(|page| page.element.as_ref()) {
                Some(bound) if *bound != identity => Err(BackendError::stale_target(
                    "the target element changed since approval; nothing was recorded",
                )),
                _ => Ok(()),
            }
        })())
    }
}

#[async_trait]
impl Backend for FakeBackend {
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError> {
        if let Some(checked) = self.check_site_target(request, None) {
            checked?;
        }
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

    async fn navigate(&self, url: &AuthorizedUrl) -> Result<Navigation, BackendError> {
        let mut state = self.state();
        let Some(site) = state.site.as_mut() else {
            return Err(BackendError::not_dispatched(
                "this backend has no pages to navigate",
            ));
        };
        let navigation = site.navigate(url.as_str());
        state.page = Some(navigation.page.clone());
        Ok(navigation)
    }

    async fn observe(&self) -> Result<ObservedPage, BackendError> {
        match &self.state().site {
            Some(site) => Ok(site.observe()),
            None => Err(BackendError::not_dispatched(
                "this backend has no pages to observe",
            )),
        }
    }

    async fn snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        let state = self.state();
        let Some(site) = &state.site else {
            return Ok(None);
        };
        if site.url() != url.as_str() {
            return Err(BackendError::not_dispatched(
                "the page shows another url than the action's",
            ));
        }
        let page = site.binding();
        Ok(Some(match site.target(action.selector())? {
            Some(identity) => PageSnapshot {
                page: page.with_element(identity),
                screenshot_png: None,
                target_found: true,
            },
            None => PageSnapshot {
                page,
                screenshot_png: None,
                target_found: false,
            },
        }))
    }

    async fn perform_on_page(
        &self,
        request: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        if let Some(checked) = self.check_site_target(request, Some(page)) {
            checked?;
            return self.perform(request).await;
        }
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
