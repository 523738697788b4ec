//! The [`Backend`] implementation.

use async_trait::async_trait;
use countersign_approval_core::{ActionRequest, Backend, BackendError};

use crate::Tab;
use crate::observation::PageRevision;

/// Performs approved actions as real input in one [`Tab`].
///
/// Before anything is dispatched, in this order: the method's arguments
/// are checked; the page's current URL, canonicalised by the tab's policy,
/// must equal the grant's URL; the selector must match exactly one element
/// that is visible and enabled (editable for `fill` and `type`, a checkbox
/// or radio button for `check` and `uncheck`, a single-choice `<select>` for
/// `select`, and not covered by another element for the pointer methods);
/// and the main frame must still show the document it showed when the
/// checks began. Any failure dispatches nothing and says why.
///
/// One action at a time per tab: concurrent calls queue.
#[derive(Debug, Clone)]
pub struct ChromiumBackend {
    tab: Tab,
}

impl ChromiumBackend {
    pub(crate) fn new(tab: Tab) -> Self {
        ChromiumBackend { tab }
    }

    /// The tab this backend drives.
    pub fn tab(&self) -> &Tab {
        &self.tab
    }

    /// Performs `request` only if the main frame still shows `expected`
    /// (the revision the host observed when it approved), besides every
    /// check [`perform`](Backend::perform) makes.
    pub async fn perform_on_revision(
        &self,
        request: &ActionRequest,
        expected: &PageRevision,
    ) -> Result<(), BackendError> {
        self.tab
            .perform_action(request.url.as_str(), &request.action, Some(expected))
            .await
            .map_err(BackendError::new)
    }
}

#[async_trait]
impl Backend for ChromiumBackend {
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError> {
        self.tab
            .perform_action(request.url.as_str(), &request.action, None)
            .await
            .map_err(BackendError::new)
    }
}
