//! The [`Backend`] implementation.

use async_trait::async_trait;
use countersign_approval_core::{ActionRequest, Backend, BackendError, PageBinding};

use crate::Tab;

/// Performs approved actions as real input in one [`Tab`].
///
/// Before anything is dispatched, in this order: the method's arguments
/// are checked; the page's current URL, canonicalised by the tab's policy,
/// must equal the grant's URL; the selector must match exactly one element
/// that is visible and enabled (editable for `fill` and `type`, a checkbox
/// or radio button for `check` and `uncheck`, a single-choice `<select>` for
/// `select`, and not covered by another element for the pointer methods);
/// and the main frame must still show the document it showed when the
/// checks began (for a page-bound grant, the approved document, and in
/// this tab and session). Any failure dispatches nothing and says why,
/// as [`BackendError::not_dispatched`], so the Act tool gives the grant
/// back. A failure once input has begun (the browser stopped answering in
/// the middle of a `type`, a box still unchecked after the click) says the
/// backend may have acted, and the grant stays used.
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
}

#[async_trait]
impl Backend for ChromiumBackend {
    /// Performs `request` with every check above but the revision: for a
    /// grant bound to no page (which Act hands over only when the host
    /// accepts unbound grants).
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError> {
        self.tab
            .perform_action(request.url.as_str(), &request.action, None)
            .await
    }

    /// This tab's session, target and current revision.
    async fn current_page(&self) -> Result<Option<PageBinding>, BackendError> {
        let frame = self
            .tab
            .main_frame()
            .await
            .map_err(|e| BackendError::new(e.to_string()))?;
        Ok(Some(PageBinding {
            session_id: self.tab.session().as_str().to_owned(),
            target_id: self.tab.target().as_str().to_owned(),
            page_revision: frame.revision.as_str().to_owned(),
        }))
    }

    /// Performs `request` only on `page`: it must name this tab's session
    /// and tab, and the main frame must show its revision both when the
    /// checks begin and immediately before input is dispatched.
    async fn perform_on_page(
        &self,
        request: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        if page.session_id != self.tab.session().as_str() {
            return Err(BackendError::not_dispatched(
                "the approval was given in another browser session; nothing was dispatched",
            ));
        }
        if page.target_id != self.tab.target().as_str() {
            return Err(BackendError::not_dispatched(
                "the approval was given in another tab; nothing was dispatched",
            ));
        }
        self.tab
            .perform_action(
                request.url.as_str(),
                &request.action,
                Some(&page.page_revision),
            )
            .await
    }
}
