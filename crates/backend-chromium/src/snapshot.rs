//! Snapshots: what a person approving a proposed action is shown, taken
//! without input and without changing the page.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams,
};
use countersign_approval_core::{BackendError, ElementIdentity, PageSnapshot};
use countersign_canonical_policy::{Action, AuthorizedUrl};

use crate::browser::{MainFrame, Tab};
use crate::error::ChromiumError;
use crate::perform::Purpose;
use crate::plan::Plan;
use crate::screenshot::{self, PixelBox};
use crate::target::{Described, Miss, Scroll};

/// Whether a snapshot takes the picture a person looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Picture {
    /// The viewport with the target outlined.
    Take,
    /// None: the decision is a rule's, which no person sees.
    Skip,
}

impl Tab {
    /// What a person approving `action` on `url` is shown, and what their
    /// grant binds: the page (session, tab, document) with the target
    /// element's identity (and, for a submit, the form data set), a
    /// viewport PNG with the target outlined, and whether the target passes
    /// the strict checks. Dispatches no input and injects nothing into the
    /// page. When no part of the target is in the viewport it scrolls the
    /// target to the viewport's centre, as performing does, so the picture
    /// shows it where it will be acted on (a page that changes the target
    /// when it is scrolled to is judged by what it shows after the scroll,
    /// and one that replaces it binds nothing); otherwise the page sees
    /// nothing at all.
    ///
    /// This is the one call a host needs to approve an action on a live
    /// page: show the picture and the element to the person, then hand the
    /// snapshot as it is to `countersign_act_tool::issue_page_grant`. When
    /// no single suitable target was found (`target_found` is `false`), the
    /// page binds no element, and such a grant is refused unless the host
    /// opted in with `accept_grants_without_element`.
    ///
    /// A ref that names no element of the current page is
    /// [`BackendError::stale_target`]; a page at another URL than `url`, or
    /// one that changed while the snapshot was taken, is
    /// [`BackendError::not_dispatched`].
    pub async fn approval(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<PageSnapshot, BackendError> {
        self.snapshot(url, action, Picture::Take).await
    }

    /// The page as it stands for `action` proposed on `url`: its binding,
    /// a viewport screenshot with the target outlined, and whether the
    /// target passes the strict checks and is in view.
    ///
    /// Every protocol call here reads: the frame tree, a fresh isolated
    /// world, `Runtime.callFunctionOn` for the strict target (with its
    /// scroll into view when it is out of view, the one change a snapshot
    /// may make),
    /// `Page.captureScreenshot`. Every failure is
    /// [`BackendError::not_dispatched`], which is true of a snapshot; a ref
    /// that names no element of the current page is
    /// [`BackendError::stale_target`].
    pub(crate) async fn snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
        picture: Picture,
    ) -> Result<PageSnapshot, BackendError> {
        let failed = |e: ChromiumError| BackendError::not_dispatched(e.to_string());
        // Queued behind any action in progress, so the picture never shows
        // half an input sequence or a page scrolled under it.
        let one_at_a_time = self.inner.input.lock().await;
        let frame = self.main_frame().await.map_err(failed)?;
        self.check_landed(&frame, url.as_str(), Purpose::Snapshot)
            .await
            .map_err(BackendError::not_dispatched)?;
        let found = self.outline(&frame, action).await?;
        let (outline, element) = match found {
            Some((outline, element)) => (Some(outline), Some(element)),
            None => (None, None),
        };
        let captured = match picture {
            Picture::Take => Some(self.capture().await),
            Picture::Skip => None,
        };
        // The picture and the outline must belong to the document bound.
        let last = self.main_frame().await.map_err(failed)?;
        if last.revision != frame.revision || last.url != frame.url {
            return Err(BackendError::not_dispatched(
                "the page changed while the snapshot was being taken; no snapshot was taken",
            ));
        }
        drop(one_at_a_time);

        let screenshot_png = match captured {
            None => None,
            // Decoding, drawing and encoding take milliseconds of CPU: off
            // the runtime's workers.
            Some(Ok(png)) => tokio::task::spawn_blocking(move || screenshot::finish(png, outline))
                .await
                .unwrap_or_else(|error| {
                    tracing::warn!(%error, "drawing the snapshot failed; the snapshot has no screenshot");
                    None
                }),
            Some(Err(error)) => {
                tracing::warn!(%error, "the snapshot has no screenshot");
                None
            }
        };
        let mut page = self.binding(&frame.revision);
        page.element = element;
        Ok(PageSnapshot {
            page,
            screenshot_png,
            target_found: outline.is_some(),
        })
    }

    /// The target's box in screenshot pixels and its identity, when the
    /// action's arguments are ones this backend performs, the selector
    /// names exactly one element that passes the strict checks, some of it
    /// is in the viewport (an approver cannot judge what the picture does
    /// not show), and its identity can be read (a grant from this snapshot
    /// binds it; without one there is nothing to bind, so no outline).
    ///
    /// A ref that names no element of the current page (of an earlier page
    /// or another tab, never handed out, or gone) is an error, not a miss:
    /// nothing could be outlined, and the model must observe again.
    async fn outline(
        &self,
        frame: &MainFrame,
        action: &Action,
    ) -> Result<Option<(PixelBox, ElementIdentity)>, BackendError> {
        // The reasons are not logged: some quote argument values.
        let Ok(plan) = Plan::of(action) else {
            tracing::debug!("snapshot: the action is not one this backend performs");
            return Ok(None);
        };
        Ok(
            match self
                .strict_target(frame, &plan, action.selector(), Scroll::IfOutOfView)
                .await
            {
                Err(Miss::Stale(reason)) => return Err(BackendError::stale_target(reason)),
                Ok(target) if target.described.in_view => {
                    match self.identity(&target, frame, &plan).await {
                        Ok(element) => Some((pixel_box(&target.described), element)),
                        Err(_) => {
                            tracing::debug!("snapshot: the target's identity could not be read");
                            None
                        }
                    }
                }
                Ok(_) => {
                    tracing::debug!("snapshot: the target is outside the viewport");
                    None
                }
                Err(Miss::Refused(_)) => {
                    tracing::debug!("snapshot: no single suitable target");
                    None
                }
            },
        )
    }

    /// The viewport as a PNG. Sent as a bare `Page.captureScreenshot`:
    /// chromiumoxide's `Page::screenshot` activates the target first, which
    /// brings the tab to the front and can fire focus and visibility events
    /// in the page.
    async fn capture(&self) -> Result<Vec<u8>, ChromiumError> {
        let params = CaptureScreenshotParams {
            format: Some(CaptureScreenshotFormat::Png),
            ..CaptureScreenshotParams::default()
        };
        let answer = self
            .inner
            .page
            .execute(params)
            .await
            .map_err(|e| ChromiumError::protocol("Page.captureScreenshot", e))?;
        let data: &str = answer.result.data.as_ref();
        BASE64
            .decode(data)
            .map_err(|e| ChromiumError::protocol("Page.captureScreenshot", e))
    }
}

/// The element's border box in pixels of a viewport screenshot: relative
/// to the visual viewport (what the screenshot shows), in device pixels.
fn pixel_box(described: &Described) -> PixelBox {
    let view = described.view;
    let bounds = described.bounds;
    let factor = described.pixel_ratio * view.scale;
    PixelBox {
        left: (bounds.left - view.left) * factor,
        top: (bounds.top - view.top) * factor,
        right: (bounds.left + bounds.width - view.left) * factor,
        bottom: (bounds.top + bounds.height - view.top) * factor,
    }
}
