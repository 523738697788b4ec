//! The backend trait: what performs an approved action.

use async_trait::async_trait;
use countersign_canonical_policy::{Action, AuthorizedUrl};

use crate::{ActorId, ApprovalId, OperationId, PageBinding, RunId};

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
}

/// A backend could not perform the action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backend failed: {message}")]
pub struct BackendError {
    message: String,
}

impl BackendError {
    /// A failure with a lower-case message.
    pub fn new(message: impl Into<String>) -> Self {
        BackendError {
            message: message.into(),
        }
    }
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Performs approved actions (a browser driver, or a fake that records them).
#[async_trait]
pub trait Backend: Send + Sync {
    /// Performs one action whose grant has been consumed.
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

    /// Performs one action whose page-bound grant has been consumed, only if
    /// the page is still `page` immediately before input is dispatched.
    /// The default refuses: a backend without pages cannot honour a binding.
    async fn perform_on_page(
        &self,
        request: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        let _ = (request, page);
        Err(BackendError::new(
            "this backend cannot perform a page-bound approval",
        ))
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

    async fn perform_on_page(
        &self,
        request: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        (**self).perform_on_page(request, page).await
    }
}
