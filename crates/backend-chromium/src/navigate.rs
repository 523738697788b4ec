//! Navigating a tab for a model: `Page.navigate`, then a bounded wait for
//! the new document's `load`, with a defined answer for every way a
//! navigation can end (see [`ChromiumBackend`](crate::ChromiumBackend)'s
//! `navigate`).
//!
//! `Page.navigate` is sent over a connection of its own to the browser,
//! attached to the tab: the DevTools client queues every `Page.navigate`
//! sent through a page until the navigation's `load` (or its own fixed
//! 30-second timeout), so one navigation that never loads (a server that
//! never answers, a download, a dismissed `beforeunload`) would hold up
//! every later one. Over the side connection the browser's own answer
//! comes back as soon as the navigation commits or fails, and nothing
//! waits behind it.

use std::time::Duration;

use chromiumoxide::Connection;
use chromiumoxide::cdp::browser_protocol::page::{DialogType, NavigateReturns};
use chromiumoxide::cdp::browser_protocol::target::SessionId;
use chromiumoxide::types::{CdpJsonEventMessage, Message};
use countersign_approval_core::{BackendError, Navigation};
use countersign_canonical_policy::AuthorizedUrl;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::browser::{MainFrame, Seen, Tab};
use crate::script::On;

/// How often the load, and the watchers' reports, are polled while waiting.
const POLL: Duration = Duration::from_millis(25);

/// How long stopping a navigation that timed out may take.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Reads the document's loading state in an isolated world.
const READY_STATE: &str = "function () { return document.readyState; }";

/// The answer when a dismissed `beforeunload` prompt kept the old page.
pub(crate) const KEPT_BY_BEFOREUNLOAD: &str = "the page asked to confirm leaving it and the prompt was dismissed; the tab still shows the previous page";

/// The answer when the address started a download.
pub(crate) const DOWNLOAD_REFUSED: &str =
    "the address started a download, which is refused; the tab still shows the previous page";

/// A DevTools connection of its own, attached to one tab (flat sessions).
struct Side {
    connection: Connection<CdpJsonEventMessage>,
    session: SessionId,
}

impl Side {
    /// Connects to the browser and attaches to `target`.
    async fn attach(devtools: &str, target: &str) -> Result<Side, String> {
        let connection = Connection::<CdpJsonEventMessage>::connect(devtools)
            .await
            .map_err(|e| format!("could not connect to chromium: {e}"))?;
        let mut side = Side {
            connection,
            session: SessionId::new(String::new()),
        };
        let attached = side
            .call(
                "Target.attachToTarget",
                false,
                json!({ "targetId": target, "flatten": true }),
            )
            .await?;
        let session = attached
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| "chromium did not answer `Target.attachToTarget`".to_owned())?;
        side.session = SessionId::new(session.to_owned());
        Ok(side)
    }

    /// Sends `method` (to the tab's session when `in_tab`) and waits for its
    /// answer; events on this connection are skipped.
    async fn call(
        &mut self,
        method: &'static str,
        in_tab: bool,
        params: Value,
    ) -> Result<Value, String> {
        let session = in_tab.then(|| self.session.clone());
        let id = self
            .connection
            .submit_command(method.into(), session, params)
            .map_err(|e| format!("chromium did not answer `{method}`: {e}"))?;
        while let Some(message) = self.connection.next().await {
            match message {
                Ok(Message::Response(answer)) if answer.id == id => {
                    return match (answer.result, answer.error) {
                        (_, Some(error)) => Err(format!(
                            "chromium did not answer `{method}`: {}",
                            error.message
                        )),
                        (Some(result), None) => Ok(result),
                        (None, None) => Ok(Value::Null),
                    };
                }
                Ok(_) => {}
                Err(e) => return Err(format!("chromium did not answer `{method}`: {e}")),
            }
        }
        Err(format!(
            "chromium did not answer `{method}`: the connection closed"
        ))
    }
}

/// What the watchers reported that ends a navigation without a new page.
fn kept_old_page(seen: &Seen) -> Option<&'static str> {
    if seen.downloads > 0 {
        Some(DOWNLOAD_REFUSED)
    } else if seen.dialogs.contains(&DialogType::Beforeunload) {
        Some(KEPT_BY_BEFOREUNLOAD)
    } else {
        None
    }
}

impl Tab {
    /// Goes to `url` and waits, at most the tab's navigation timeout, for
    /// the page to load. Queued behind any action in progress.
    pub(crate) async fn go(&self, url: &AuthorizedUrl) -> Result<Navigation, BackendError> {
        let _one_at_a_time = self.inner.input.lock().await;
        let before = self
            .main_frame()
            .await
            .map_err(|e| BackendError::not_dispatched(e.to_string()))?;
        let mut side = Side::attach(
            self.inner.chromium.devtools_url(),
            self.inner.target.as_str(),
        )
        .await
        .map_err(BackendError::not_dispatched)?;
        // Only what this navigation causes is reported.
        Seen::take(&self.inner.seen);
        let wait = self.inner.navigation_timeout;
        let answer = tokio::time::timeout(wait, self.load(&mut side, url, &before)).await;
        match answer {
            Ok(answer) => answer,
            Err(_elapsed) => {
                // Whatever is still loading must not land later, unseen.
                let stop = side.call("Page.stopLoading", true, json!({}));
                match tokio::time::timeout(STOP_WAIT, stop).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "a navigation that timed out could not be stopped")
                    }
                    Err(_) => tracing::warn!("stopping a navigation that timed out took too long"),
                }
                if let Some(kept) = kept_old_page(&Seen::take(&self.inner.seen)) {
                    return Err(BackendError::new(kept));
                }
                Err(BackendError::new(format!(
                    "the page did not finish loading within {}; loading was stopped",
                    seconds(wait)
                )))
            }
        }
    }

    /// The navigation and the wait, unbounded: [`go`](Self::go) bounds it.
    async fn load(
        &self,
        side: &mut Side,
        url: &AuthorizedUrl,
        before: &MainFrame,
    ) -> Result<Navigation, BackendError> {
        let navigate = side.call("Page.navigate", true, json!({ "url": url.as_str() }));
        tokio::pin!(navigate);
        // A refused download or a dismissed `beforeunload` may leave the
        // browser's answer pending: the watchers' reports end the wait.
        let answer = loop {
            tokio::select! {
                answer = &mut navigate => break answer,
                () = tokio::time::sleep(POLL) => {
                    if let Some(kept) = kept_old_page(&Seen::peek(&self.inner.seen)) {
                        return Err(BackendError::new(kept));
                    }
                }
            }
        };
        let answer = answer.map_err(BackendError::new)?;
        let navigated: NavigateReturns = serde_json::from_value(answer).map_err(|e| {
            BackendError::new(format!(
                "chromium answered `Page.navigate` unexpectedly: {e}"
            ))
        })?;
        let loader = navigated.loader_id.as_ref().map(|l| l.inner().as_str());
        if navigated.is_download == Some(true) {
            return Err(BackendError::new(DOWNLOAD_REFUSED));
        }
        if let Some(error) = navigated.error_text.as_deref() {
            if let Some(kept) = kept_old_page(&Seen::peek(&self.inner.seen)) {
                return Err(BackendError::new(kept));
            }
            let frame = self.settled(loader, false).await?;
            if frame.revision == before.revision {
                return Err(BackendError::new(format!(
                    "the navigation was stopped before a page loaded (`{error}`); the tab still shows the previous page"
                )));
            }
            // Chromium's error page: its own URL is
            // `chrome-error://chromewebdata/`; the URL it stands for (the
            // address, or where a redirect led) is what the caller judges.
            let url = frame.unreachable.clone().unwrap_or(frame.url);
            return Ok(Navigation::failed(
                url,
                self.binding(&frame.revision),
                error,
            ));
        }
        let frame = self.settled(loader, true).await?;
        if frame.revision == before.revision
            && let Some(kept) = kept_old_page(&Seen::peek(&self.inner.seen))
        {
            return Err(BackendError::new(kept));
        }
        Ok(Navigation::new(frame.url, self.binding(&frame.revision)))
    }

    /// Waits until the main frame shows the document `loader` (when the
    /// navigation made one) and, with `complete`, that document's
    /// `readyState` is `complete` (its `load` event has fired). Read
    /// failures while the document is being replaced are retried; the
    /// caller's timeout bounds the wait.
    async fn settled(
        &self,
        loader: Option<&str>,
        complete: bool,
    ) -> Result<MainFrame, BackendError> {
        loop {
            let frame = self
                .main_frame()
                .await
                .map_err(|e| BackendError::new(e.to_string()))?;
            let committed = loader.is_none_or(|l| frame.revision.as_str() == l);
            if committed
                && (!complete || self.ready_state(&frame).await.as_deref() == Some("complete"))
            {
                return Ok(frame);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The main frame's `document.readyState`, read in an isolated world;
    /// `None` when it cannot be read now.
    async fn ready_state(&self, frame: &MainFrame) -> Option<String> {
        let world = self.isolated_world(frame.id.clone()).await.ok()?;
        self.call_value(READY_STATE, On::World(world), Vec::new())
            .await
            .ok()
    }
}

/// A duration as people read it: `15 s`, `2.5 s`.
fn seconds(wait: Duration) -> String {
    if wait.subsec_millis() == 0 {
        format!("{} s", wait.as_secs())
    } else {
        format!("{:.1} s", wait.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_read_as_seconds() {
        assert_eq!(seconds(Duration::from_secs(15)), "15 s");
        assert_eq!(seconds(Duration::from_millis(2500)), "2.5 s");
    }
}
