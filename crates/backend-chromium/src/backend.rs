//! The [`Backend`] implementation.

use async_trait::async_trait;
use countersign_approval_core::{ActionRequest, Backend, BackendError, PageBinding, PageSnapshot};
use countersign_canonical_policy::{Action, AuthorizedUrl};

use crate::Tab;

/// Performs approved actions as real input in one [`Tab`].
///
/// Before anything is dispatched, in this order: the method's arguments
/// are checked; the page's current URL, canonicalised by the tab's policy,
/// must equal the grant's URL; the selector must match exactly one element
/// that is visible (an effective opacity of at least
/// [`MIN_OPACITY`](crate::MIN_OPACITY)), stable over two animation frames
/// and enabled (editable for `fill` and `type`, a checkbox or radio button
/// for `check` and `uncheck`, a single-choice `<select>` for `select`),
/// with nothing else painted at its action point by the browser's own hit
/// test (and receiving pointer events there, for the pointer methods); and
/// the main frame must still show the document it showed when the checks
/// began (for a page-bound grant, the approved document, and in this tab
/// and session). Any failure dispatches nothing and says why, as
/// [`BackendError::not_dispatched`], so the Act tool gives the grant back.
///
/// Before every input event after the first (the press after the pointer
/// move, each key after the focus) the page, the element's rule and both
/// hit tests are checked again, and a difference stops the sequence. Such
/// a refusal, like any failure once input has begun (the browser stopped
/// answering in the middle of a `type`, a box still unchecked after the
/// click), says the backend may have acted: the move or focus reached the
/// page, and the grant stays used.
///
/// One action at a time per tab: concurrent calls queue.
///
/// [`snapshot`](Backend::snapshot) shows a person what they are asked to
/// approve, without input: see its documentation below.
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
            .perform_action(request.url.as_str(), &request.action, None, None)
            .await
    }

    /// This tab's session, target and current revision.
    async fn current_page(&self) -> Result<Option<PageBinding>, BackendError> {
        let frame = self
            .tab
            .main_frame()
            .await
            .map_err(|e| BackendError::new(e.to_string()))?;
        Ok(Some(self.tab.binding(&frame.revision)))
    }

    /// What a person approving `action` on `url` is shown: the page as
    /// [`current_page`](Backend::current_page) binds it, a PNG of the
    /// viewport, and whether the target was found.
    ///
    /// Refused, as not dispatched, when the page's current URL
    /// (canonicalised by the tab's policy) is not `url`, or when the page
    /// loads a new document or changes its URL while the snapshot is taken.
    ///
    /// `target_found` is `true` when the action's method and arguments are
    /// ones this backend performs, the selector passes the same strict
    /// rule as performing (exactly one element, visible with an effective
    /// opacity of at least [`MIN_OPACITY`](crate::MIN_OPACITY), stable,
    /// enabled, suited to the method, some of it in the viewport, and the
    /// browser's hit test at its action point answering it, not something
    /// painted over it); the screenshot then shows a
    /// [`OUTLINE_WIDTH`](crate::OUTLINE_WIDTH)-pixel band of
    /// [`OUTLINE_COLOUR`](crate::OUTLINE_COLOUR) just outside the element's
    /// box, clamped to the viewport. Otherwise it is `false` and the
    /// screenshot has no outline.
    ///
    /// Nothing is dispatched and the document is not touched: no input, no
    /// focus, no scroll (performing scrolls the element into view; a
    /// snapshot leaves the page where it is, so an element below the fold
    /// is not found), no injected overlay (the outline is drawn on the
    /// decoded picture). The strict checks run in an isolated world or as
    /// protocol reads (the hit test) and only read the DOM and layout.
    ///
    /// The picture is at most [`MAX_SCREENSHOT_BYTES`](countersign_approval_core::MAX_SCREENSHOT_BYTES):
    /// a larger one is scaled down (same aspect ratio, outline drawn after
    /// scaling) until it fits, and `screenshot_png` is `None`, the binding
    /// still set, only when no size fits or Chromium could not capture one.
    async fn snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        self.tab.snapshot(url, action).await.map(Some)
    }

    /// Performs `request` only on `page`: it must name this tab's session
    /// and tab, and the main frame must show its revision both when the
    /// checks begin and immediately before input is dispatched.
    ///
    /// When `page` binds an element (a grant approved from a
    /// [`snapshot`](Backend::snapshot)), the strict target's identity —
    /// role and accessible name from the accessibility tree, tag, visible
    /// text, bound attributes, frame chain — is read again right before
    /// each input event and must equal it. A difference before the first
    /// input event is [`BackendError::stale_target`] (the Act tool gives
    /// the grant back and answers `APPROVAL_STALE`); after it, nothing more
    /// is dispatched and the backend may have acted.
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
                page.element.as_ref(),
            )
            .await
    }
}
