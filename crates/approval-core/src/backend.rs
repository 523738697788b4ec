//! The backend trait: what performs an approved action.

use async_trait::async_trait;
use countersign_canonical_policy::{Action, AuthorizedUrl};

use crate::{
    ids::ActorId, ids::ApprovalId, ids::OperationId, ids::RunId, observe::Navigation,
    observe::ObservedPage, page::PageBinding, proposal::PageSnapshot, writes::RefusedWrite,
    writes::WriteAccess,
};

/// One approved action, handed to a backend after its grant was consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRequest {
    /// The Act call's id.
    pub operation_id: OperationId,
    /// The consumed grant.
    pub approval_id: ApprovalId,
    /// The host's actor.
    pub actor_id: ActorId,
    /// The host's run.
    pub run_id: RunId,
    /// Where; a live backend must connect only to `url.addresses()`.
    pub url: AuthorizedUrl,
    /// What.
    pub action: Action,
    /// Whether the page may write from this act on: read-only when a rule
    /// approved it, open when a person did. A backend with a live page
    /// enforces it; one without pages has nothing to hold to it.
    pub writes: WriteAccess,
}

/// A backend could not perform the action.
///
/// It also says whether the backend **may have acted**. [`new`](Self::new)
/// makes the fail-safe answer, "may have acted", which every failure may
/// give; [`not_dispatched`](Self::not_dispatched) says that nothing reached
/// the page (no input event was dispatched, nothing was recorded). A
/// backend gives that answer only when it is true: the Act tool then gives
/// the consumed grant back to the store, so a false "not dispatched" would
/// let one approval act twice.
///
/// ```
/// use countersign_approval_core::BackendError;
///
/// let refused = BackendError::not_dispatched("`#buy` is not visible");
/// assert!(!refused.may_have_acted());
/// let lost = BackendError::new("the browser closed the connection");
/// assert!(lost.may_have_acted());
/// assert_eq!(lost.to_string(), "backend failed: the browser closed the connection");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backend failed: {message}")]
pub struct BackendError {
    message: String,
    may_have_acted: bool,
    target_changed: bool,
    page_not_allowed: bool,
}

impl BackendError {
    /// A failure with a lower-case message, after which the backend may
    /// have acted (the fail-safe default: the grant stays consumed).
    pub fn new(message: impl Into<String>) -> Self {
        BackendError {
            message: message.into(),
            may_have_acted: true,
            target_changed: false,
            page_not_allowed: false,
        }
    }

    /// A refusal with a lower-case message, raised before anything was
    /// dispatched to the page: the backend did not act, so the grant may
    /// be given back. Use it only when that is certain.
    pub fn not_dispatched(message: impl Into<String>) -> Self {
        BackendError {
            message: message.into(),
            may_have_acted: false,
            target_changed: false,
            page_not_allowed: false,
        }
    }

    /// A refusal raised before anything was dispatched because the page or
    /// the target is no longer what the grant binds (another document, an
    /// element whose identity changed, another element at the action
    /// point). Like [`not_dispatched`](Self::not_dispatched) the grant may
    /// be given back; the Act tool answers `APPROVAL_STALE`, since the
    /// approval no longer describes the page.
    pub fn stale_target(message: impl Into<String>) -> Self {
        BackendError {
            message: message.into(),
            may_have_acted: false,
            target_changed: true,
            page_not_allowed: false,
        }
    }

    /// A refusal raised before anything was dispatched or shown because
    /// the page is at a URL the backend's own policy refuses (a backend
    /// that judges pages itself, such as a live browser's tab). The tools
    /// answer `NOT_AUTHORIZED`, as for a URL the host's policy refuses.
    pub fn page_not_allowed(message: impl Into<String>) -> Self {
        BackendError {
            message: message.into(),
            may_have_acted: false,
            target_changed: false,
            page_not_allowed: true,
        }
    }

    /// Whether this is a [`page_not_allowed`](Self::page_not_allowed) refusal.
    pub fn is_page_not_allowed(&self) -> bool {
        self.page_not_allowed
    }

    /// Whether this is a [`stale_target`](Self::stale_target) refusal.
    pub fn target_changed(&self) -> bool {
        self.target_changed
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the backend may have acted: `false` only for
    /// [`not_dispatched`](Self::not_dispatched).
    pub fn may_have_acted(&self) -> bool {
        self.may_have_acted
    }
}

/// Performs approved actions (a browser driver, or a fake that records them).
#[async_trait]
pub trait Backend: Send + Sync {
    /// Performs one action whose grant has been consumed. A failure raised
    /// before anything was dispatched should say so with
    /// [`BackendError::not_dispatched`]: the Act tool then gives the grant
    /// back; any other failure leaves it consumed.
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError>;

    /// The page this backend would act on now, for page-bound grants; `None`
    /// (the default) for a backend that has no page, such as the fake.
    ///
    /// A backend that drives a live page must answer `Some`: on `None` the
    /// Act tool reads no grant before consuming and performs every grant,
    /// page-bound or not, through [`perform`](Backend::perform).
    async fn current_page(&self) -> Result<Option<PageBinding>, BackendError> {
        Ok(None)
    }

    /// What a person approving `action` on `url` should see: the current
    /// page, a screenshot with the element `action` targets outlined, and
    /// whether exactly one visible element matches. `None` (the default)
    /// for a backend without pages. Taking a snapshot dispatches no input.
    async fn snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        let _ = (url, action);
        Ok(None)
    }

    /// What [`snapshot`](Backend::snapshot) binds (the page and the
    /// target element), for a decision no person will see: a rule's or a
    /// standing approval's. A backend may leave the screenshot out
    /// (`screenshot_png` is then `None`); the default takes the whole
    /// snapshot.
    async fn binding_snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        self.snapshot(url, action).await
    }

    /// Performs one action whose page-bound grant has been consumed, only if
    /// the page is still `page` immediately before input is dispatched; a
    /// page that changed is refused with [`BackendError::not_dispatched`].
    /// The default refuses (not dispatched): a backend without pages cannot
    /// honour a binding.
    async fn perform_on_page(
        &self,
        request: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        let _ = (request, page);
        Err(BackendError::not_dispatched(
            "this backend cannot perform a page-bound approval",
        ))
    }

    /// Goes to `url` (already accepted by the caller's policy) and answers
    /// where the browser landed, after redirects. The caller judges the
    /// landed URL with its policy before showing anything of the page.
    ///
    /// A navigation that cannot finish answers an error and never hangs:
    /// the backend bounds how long it waits. Nothing is accepted on the
    /// model's behalf: a dialog is dismissed (so a `beforeunload` prompt
    /// keeps the old page), a download is refused, a new tab a page opens
    /// is closed. A failure raised before the browser was asked to go
    /// anywhere is [`BackendError::not_dispatched`]. The default refuses,
    /// not dispatched: a backend without pages cannot navigate.
    async fn navigate(&self, url: &AuthorizedUrl) -> Result<Navigation, BackendError> {
        let _ = url;
        Err(BackendError::not_dispatched(
            "this backend has no pages to navigate",
        ))
    }

    /// The page as a model may see it: URL, title and accessibility tree,
    /// with a [ref](crate::ElementRef) on each element an action can target,
    /// read from the browser's own accessibility tree (not from a script
    /// the page can replace). Dispatches no input. The default refuses: a
    /// backend without pages has nothing to show.
    async fn observe(&self) -> Result<ObservedPage, BackendError> {
        Err(BackendError::not_dispatched(
            "this backend has no pages to observe",
        ))
    }

    /// The requests read-only mode refused on behalf of `operation` so far
    /// (an act performed under [`WriteAccess::ReadOnly`]), oldest first:
    /// those its own input caused, and any the page started later while
    /// the mode held. The default has none: a backend without pages sends
    /// nothing of its own.
    async fn refused_writes(
        &self,
        operation: &OperationId,
    ) -> Result<Vec<RefusedWrite>, BackendError> {
        let _ = operation;
        Ok(Vec::new())
    }
}

#[async_trait]
impl<B: Backend + ?Sized> Backend for std::sync::Arc<B> {
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError> {
        (**self).perform(request).await
    }

    async fn current_page(&self) -> Result<Option<PageBinding>, BackendError> {
        (**self).current_page().await
    }

    async fn snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        (**self).snapshot(url, action).await
    }

    async fn binding_snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        (**self).binding_snapshot(url, action).await
    }

    async fn perform_on_page(
        &self,
        request: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        (**self).perform_on_page(request, page).await
    }

    async fn navigate(&self, url: &AuthorizedUrl) -> Result<Navigation, BackendError> {
        (**self).navigate(url).await
    }

    async fn observe(&self) -> Result<ObservedPage, BackendError> {
        (**self).observe().await
    }

    async fn refused_writes(
        &self,
        operation: &OperationId,
    ) -> Result<Vec<RefusedWrite>, BackendError> {
        (**self).refused_writes(operation).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use countersign_canonical_policy::{Policy, StaticResolver};

    use super::*;

    #[test]
    fn a_failure_may_have_acted_unless_it_says_nothing_was_dispatched() {
        let failed = BackendError::new("connection lost");
        assert!(failed.may_have_acted());
        let refused = BackendError::not_dispatched("`#x` is hidden");
        assert!(!refused.may_have_acted());
        assert_eq!(refused.message(), "`#x` is hidden");
        assert_eq!(refused.to_string(), "backend failed: `#x` is hidden");
        assert_ne!(refused, BackendError::new("`#x` is hidden"));
    }

    struct NoPages;

    #[async_trait]
    impl Backend for NoPages {
        async fn perform(&self, _: &ActionRequest) -> Result<(), BackendError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_default_page_bound_perform_refuses_before_dispatching() {
        let policy = Policy::builder()
            .allow_host("example.com")
            .resolver(StaticResolver::answering_all(["93.184.216.34"
                .parse()
                .unwrap()]))
            .build()
            .unwrap();
        let request = ActionRequest {
            operation_id: OperationId::generate().unwrap(),
            approval_id: ApprovalId::generate().unwrap(),
            actor_id: ActorId::new("actor").unwrap(),
            run_id: RunId::new("run").unwrap(),
            url: policy
                .authorize_destination("https://example.com/")
                .await
                .unwrap(),
            action: policy
                .authorize_action(&serde_json::json!({"method": "click", "selector": "#x"}))
                .unwrap(),
            writes: WriteAccess::Open,
        };
        let page = PageBinding {
            session_id: "s".to_owned(),
            target_id: "t".to_owned(),
            page_revision: "r".to_owned(),
            element: None,
        };
        let refused = NoPages.perform_on_page(&request, &page).await.unwrap_err();
        assert!(!refused.may_have_acted());
        assert_eq!(
            refused.message(),
            "this backend cannot perform a page-bound approval"
        );
    }
}
