//! The [`Backend`] implementation.

use async_trait::async_trait;
use countersign_approval_core::{ActionRequest, Backend, BackendError};

use crate::Tab;
use crate::observation::PageObservation;

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

    /// Performs `request` only on the page the host approved on: `approved`
    /// must name this tab's session and tab, the grant's URL, and the
    /// revision the main frame still shows. Besides every check
    /// [`perform`](Backend::perform) makes, the revision is compared again
    /// immediately before input is dispatched.
    pub async fn perform_on_page(
        &self,
        request: &ActionRequest,
        approved: &PageObservation,
    ) -> Result<(), BackendError> {
        if approved.session() != self.tab.session() {
            return Err(BackendError::new(
                "the approval was given in another browser session; nothing was dispatched",
            ));
        }
        if approved.target() != self.tab.target() {
            return Err(BackendError::new(
                "the approval was given in another tab; nothing was dispatched",
            ));
        }
        if approved.url() != &request.url {
            return Err(BackendError::new(
                "the approval was given on another url; nothing was dispatched",
            ));
        }
        self.tab
            .perform_action(
                request.url.as_str(),
                &request.action,
                Some(approved.revision()),
            )
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
