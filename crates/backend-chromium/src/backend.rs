//! The [`Backend`] implementation.

use async_trait::async_trait;
use countersign_approval_core::{
    ActionRequest, Backend, BackendError, Navigation, ObservedPage, OperationId, PageBinding,
    PageSnapshot, RefusedWrite,
};
use countersign_canonical_policy::{Action, AuthorizedUrl};

use crate::browser::Tab;
use crate::snapshot::Picture;

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

impl Tab {
    /// A backend that performs approved actions in this tab.
    pub fn backend(&self) -> ChromiumBackend {
        ChromiumBackend::new(self.clone())
    }
}

#[async_trait]
impl Backend for ChromiumBackend {
    /// Performs `request` with every check above but the revision: for a
    /// grant bound to no page (which Act hands over only when the host
    /// accepts unbound grants).
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError> {
        self.tab.perform_action(request, None, None).await
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
        self.tab
            .snapshot(url, action, Picture::Take)
            .await
            .map(Some)
    }

    /// The same binding as [`snapshot`](Self::snapshot), without the
    /// screenshot: no person will look at a rule's decision.
    async fn binding_snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        self.tab
            .snapshot(url, action, Picture::Skip)
            .await
            .map(Some)
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
            .perform_action(request, Some(&page.page_revision), page.element.as_ref())
            .await
    }

    /// Goes to `url` with `Page.navigate` and waits for the new document's
    /// `load` event, at most the navigation timeout
    /// ([`ChromiumOptions::navigation_timeout`](crate::ChromiumOptions::navigation_timeout),
    /// [`DEFAULT_NAVIGATION_TIMEOUT`](crate::DEFAULT_NAVIGATION_TIMEOUT)
    /// unless set). How it ends:
    ///
    /// | what happens | answer |
    /// | --- | --- |
    /// | the page loads (after any redirects) | `Ok`, the URL the main frame shows and its binding |
    /// | a redirect to a host the egress guard refuses | the guard answers with its own 403 page, which Chromium shows at the refused URL: `Ok`, that URL, no failure (the caller's policy refuses it, and `observe` shows nothing of it) |
    /// | the browser cannot load it (an unsafe redirect, a connection refused without a proxy, …) | `Ok(Navigation::failed(…))`: the main frame shows Chromium's error page, whose own URL is `chrome-error://chromewebdata/`; the answer's URL is the one it stands for (the frame's `unreachableUrl`: the address, or where a redirect led), the failure Chromium's error code as it gives it (`net::ERR_UNSAFE_REDIRECT`) |
    /// | no load within the timeout (a server that never answers, a page whose `load` never fires) | loading is stopped (`Page.stopLoading`): the tab keeps the old page when the new one never arrived, or shows the new one partly loaded; `Err`, "the page did not finish loading within … s; loading was stopped" (may have acted) |
    /// | the old page's `beforeunload` asks to confirm leaving | the prompt is dismissed, the old page stays; `Err` saying so |
    /// | the address is a download | refused by the session (downloads are denied); `Err` saying so, the old page stays |
    /// | the navigation is stopped before a page loads (`net::ERR_ABORTED` and no new document) | `Err` saying so, the old page stays |
    ///
    /// Whenever the tab is open, every JavaScript dialog (`alert`,
    /// `confirm`, `prompt`, `beforeunload`) is dismissed as it opens
    /// (`Page.handleJavaScriptDialog` with `accept: false`: nothing is
    /// accepted on the model's behalf), and every tab or popup the page
    /// opens (`window.open`, a `target=_blank` link) is closed as soon as
    /// the browser reports it; neither is reported. A tab closed so may
    /// already have sent its first request (through the egress proxy, under
    /// the same policy); nothing it loads is shown or acted on. Only a failure before
    /// the browser was asked anything is not dispatched.
    async fn navigate(&self, url: &AuthorizedUrl) -> Result<Navigation, BackendError> {
        self.tab.go(url).await
    }

    /// The main frame's accessibility tree as the browser computes it
    /// (`Accessibility.getFullAXTree`; no page script takes part, so a page
    /// that replaces DOM functions is still observed truly), its URL,
    /// title (the document's accessible name) and binding.
    ///
    /// Refused, showing nothing, when the tab's policy refuses the page's
    /// URL, or when the page loads a new document while it is read. Only
    /// the main frame's document is shown: an iframe is its `Iframe` node,
    /// without its content.
    ///
    /// Shown: every node that is not ignored, except nameless `generic`
    /// and `none` nodes and the document itself (their children take their
    /// place), `InlineTextBox` nodes, and `StaticText` that repeats its
    /// parent's name. Each with its role, name, value (when not empty) and
    /// states (`checked`, `pressed` and `checked=mixed`/`pressed=mixed`,
    /// `expanded` or `collapsed`, `disabled`, `focused`, `modal`,
    /// `multiselectable`, `readonly`, `required`, `selected`, `invalid`,
    /// `level=N`).
    ///
    /// Every element shown (a node with a DOM node that is not text, the
    /// document or a list marker) gets a ref. The tab numbers each
    /// document once: observing the same document again gives the same
    /// element the same ref; a new document gets a new page number. An
    /// action's selector `aria-ref=p3e12` names that exact DOM node, then
    /// passes the same strict checks and identity binding as a CSS
    /// selector. A ref of an earlier page (or another tab), one never
    /// handed out on this page, or one whose element has left the document
    /// is [`BackendError::stale_target`] ("… observe again"); a malformed
    /// one is refused as not dispatched.
    async fn observe(&self) -> Result<ObservedPage, BackendError> {
        self.tab.observe_page().await
    }

    /// The requests this tab's read-only mode refused for `operation`, of
    /// the last [`MAX_REMEMBERED_REFUSALS`](crate::MAX_REMEMBERED_REFUSALS)
    /// it refused.
    async fn refused_writes(
        &self,
        operation: &OperationId,
    ) -> Result<Vec<RefusedWrite>, BackendError> {
        Ok(self.tab.inner.writes.refused(operation))
    }
}
