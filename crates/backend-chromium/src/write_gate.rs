//! Read-only mode: a tab's own DevTools connection that holds every request
//! its page, frames and workers start, and lets through only what the
//! tab's current write access permits.
//!
//! Why a connection of its own: the driving connection resumes every frame
//! and worker the page starts as soon as it is attached, and offers no way
//! to send a command to one of them. Here each one is attached paused
//! (`waitForDebuggerOnStart`), its requests are intercepted
//! (`Fetch.enable`; a dedicated worker's are intercepted as its frame's),
//! and only then is it resumed. The browser waits for every client that
//! asked it to: a frame never runs before this gate holds its requests.
//!
//! Interception is on from the tab's first page: switching the mode is a
//! change of the decision, not a protocol round trip that a request could
//! overtake.
//!
//! A tab the page opens (a `window.open` popup, a `target=_blank` link or
//! form) is a page of its own, outside the tab's interception. The gate
//! auto-attaches to every new page of the browser, paused; one this tab
//! opened has every request refused (`Fetch` on it before it runs), so
//! not even its first request leaves, in any mode; the gate closes it once
//! that first request was refused (or after [`POPUP_FIRST_REQUEST_WAIT`]
//! without one), and the tab's watcher at the latest after its backstop.
//! Any other page is let run at once.
//!
//! WebSockets are the exception. Chromium's request interception does not
//! see a WebSocket's handshake, and blocking by address
//! (`Network.setBlockedURLs`) does not stop one (Chromium 156). What does
//! is emulating the network as offline for `ws:` and `wss:` addresses
//! alone (`Network.emulateNetworkConditionsByRule`, which needs the
//! session's `Network` domain): every new WebSocket then fails with
//! `ERR_INTERNET_DISCONNECTED` before its handshake leaves the browser,
//! while every other request is judged as above. It is set on the page and
//! on every frame and worker session before the act's first input event
//! (and before a new frame or worker runs), and lifted when a person's act
//! opens writing. A socket opened earlier stays open: what it carries was
//! started under the access that opened it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use countersign_approval_core::{OperationId, RefusedWrite, WriteAccess};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Mutex as AsyncMutex, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::error::ChromiumError;

/// The most refused writes a tab remembers; older ones are dropped (each
/// was also logged when it was refused).
pub const MAX_REMEMBERED_REFUSALS: usize = 256;

/// How long a protocol command of the gate may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// The most WebSockets whose address the gate remembers until it learns
/// whether their handshake was refused.
const MAX_OPENING_SOCKETS: usize = 256;

/// The error Chromium gives a WebSocket that the offline emulation refused.
const SOCKET_REFUSED: &str = "ERR_INTERNET_DISCONNECTED";

/// How long a page the tab opened is given to start its first request
/// (refused, and remembered when the mode refuses it) before the gate
/// closes it.
const POPUP_FIRST_REQUEST_WAIT: Duration = Duration::from_secs(3);

/// What the gate decides by, shared with its connection's reader.
struct GateState {
    /// The act whose access holds, and that access; `None` before the
    /// tab's first act (writing open).
    mode: Option<(OperationId, WriteAccess)>,
    refused: VecDeque<RefusedWrite>,
    /// When the last request was held, for [`WriteGate::settle`].
    last_request: Option<Instant>,
    /// Why the connection ended, once it has: no act may change the mode.
    broken: Option<String>,
    /// The page's, its frames' and its workers' sessions.
    sessions: Vec<String>,
    /// Whether the gate auto-attaches to new pages: from then on, a page
    /// attached without a parent session is a new one, not the tab.
    holds_popups: bool,
    /// The sessions of pages this tab opened, whose every request is
    /// refused, each with whether one was.
    popups: Vec<(String, bool)>,
    /// Whether new WebSockets were last refused on the page (as set, not
    /// as asked); `None` until it is set, or after setting it failed.
    page_refuses_sockets: Option<bool>,
    /// The address of each WebSocket opened while new ones are refused, by
    /// request id, until its handshake fails (oldest dropped past
    /// [`MAX_OPENING_SOCKETS`]).
    opening_sockets: VecDeque<(String, String)>,
}

impl GateState {
    /// Whether new WebSockets must be refused: in read-only mode.
    fn refuses_sockets(&self) -> bool {
        self.mode
            .as_ref()
            .is_some_and(|(_, access)| access.is_read_only())
    }

    /// Remembers a refused write, on behalf of the act whose mode holds.
    fn remember(&mut self, refused: RefusedWrite) {
        tracing::warn!(
            operation_id = %refused.operation_id,
            method = %refused.method,
            address = %refused.address,
            kind = %refused.kind,
            "read-only mode refused a write"
        );
        self.refused.push_back(refused);
        while self.refused.len() > MAX_REMEMBERED_REFUSALS {
            self.refused.pop_front();
        }
    }
}

struct Connection {
    /// The tab's target id: the opener of the pages it opens.
    tab: String,
    outgoing: mpsc::UnboundedSender<Message>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>,
    next_id: AtomicU64,
    state: Mutex<GateState>,
    /// Held while the WebSocket refusal is set on sessions, each setting
    /// reading the mode under it: the last one set is the current mode's.
    socket_rule: AsyncMutex<()>,
}

/// The read-only gate of one tab. Dropping it closes its connection, and
/// the browser lets held requests go.
pub(crate) struct WriteGate {
    connection: Arc<Connection>,
    /// The tab's page session on the gate's connection.
    page: String,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for WriteGate {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl std::fmt::Debug for WriteGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteGate").finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WriteGate {
    /// Attaches to `target` over a new connection to `devtools_url`, and
    /// holds its requests from then on (writing open until an act says
    /// otherwise).
    pub(crate) async fn attach(
        devtools_url: &str,
        target: &str,
    ) -> Result<WriteGate, ChromiumError> {
        let failed = |reason: String| ChromiumError::protocol("the read-only gate", reason);
        let (socket, _) = tokio_tungstenite::connect_async(devtools_url)
            .await
            .map_err(|e| failed(format!("could not connect: {e}")))?;
        let (mut sink, mut stream) = socket.split();
        let (outgoing, mut queue) = mpsc::unbounded_channel::<Message>();
        let connection = Arc::new(Connection {
            tab: target.to_owned(),
            outgoing,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            state: Mutex::new(GateState {
                mode: None,
                refused: VecDeque::new(),
                last_request: None,
                broken: None,
                sessions: Vec::new(),
                holds_popups: false,
                popups: Vec::new(),
                page_refuses_sockets: Some(false),
                opening_sockets: VecDeque::new(),
            }),
            socket_rule: AsyncMutex::new(()),
        });
        let writer = tokio::spawn(async move {
            while let Some(message) = queue.recv().await {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
        });
        let reader_connection = Arc::clone(&connection);
        let reader = tokio::spawn(async move {
            let reason = loop {
                match stream.next().await {
                    Some(Ok(Message::Text(text))) => {
                        if let Ok(message) = serde_json::from_str::<Value>(&text) {
                            reader_connection.on_message(message);
                        }
                    }
                    Some(Ok(Message::Close(_))) | None => break "the connection closed".to_owned(),
                    Some(Ok(_)) => {}
                    Some(Err(error)) => break error.to_string(),
                }
            };
            tracing::error!(%reason, "the read-only gate lost its browser connection");
            reader_connection.break_off(reason);
        });
        let mut gate = WriteGate {
            connection,
            page: String::new(),
            tasks: vec![writer, reader],
        };
        let attached = gate
            .connection
            .command(
                None,
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await
            .map_err(failed)?;
        let session = attached
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| failed("no session in Target.attachToTarget's answer".to_owned()))?
            .to_owned();
        gate.page.clone_from(&session);
        Connection::hold(Arc::clone(&gate.connection), session, "page", false)
            .await
            .map_err(failed)?;
        lock(&gate.connection.state).holds_popups = true;
        gate.connection
            .command(
                None,
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true,
                       "filter": [{"type": "page", "exclude": false}, {"exclude": true}]}),
            )
            .await
            .map_err(failed)?;
        Ok(gate)
    }

    /// Makes `access` the tab's write access from now on, on behalf of
    /// `operation`, WebSockets included once this returns. Refused when
    /// the gate has lost its connection, or could not refuse WebSockets on
    /// the page: the act must then not be performed.
    pub(crate) async fn enter(
        &self,
        operation: &OperationId,
        access: &WriteAccess,
    ) -> Result<(), String> {
        let (sessions, changed) = {
            let mut state = lock(&self.connection.state);
            if let Some(reason) = &state.broken {
                return Err(format!("the read-only gate is down ({reason})"));
            }
            state.mode = Some((operation.clone(), access.clone()));
            let changed = state.page_refuses_sockets != Some(state.refuses_sockets());
            (state.sessions.clone(), changed)
        };
        if !changed {
            return Ok(());
        }
        // Until the sockets' rule is lifted, a person's act waits for this
        // answer; the mode above already refuses every other write.
        for session in &sessions {
            let applied = self.connection.apply_socket_rule(session).await;
            if *session == self.page {
                let mut state = lock(&self.connection.state);
                state.page_refuses_sockets = applied.as_ref().ok().copied();
                if let Err(error) = applied {
                    return Err(format!("new WebSockets could not be refused ({error})"));
                }
            } else if let Err(error) = applied {
                // A frame or worker that went away meanwhile has no session.
                tracing::debug!(%error, "a frame's or worker's WebSocket rule was not set");
            }
        }
        Ok(())
    }

    /// Waits until no request has been held for `quiet` (counted from the
    /// call at the earliest), at most `limit`: the writes an act's own
    /// input started are decided before the act is reported.
    pub(crate) async fn settle(&self, quiet: Duration, limit: Duration) {
        let start = Instant::now();
        loop {
            let last = lock(&self.connection.state).last_request;
            let since = last.map_or(start.elapsed(), |at| at.elapsed().min(start.elapsed()));
            if since >= quiet || start.elapsed() >= limit {
                return;
            }
            tokio::time::sleep((quiet - since).min(limit.saturating_sub(start.elapsed()))).await;
        }
    }

    /// The writes refused on behalf of `operation`, oldest first.
    pub(crate) fn refused(&self, operation: &OperationId) -> Vec<RefusedWrite> {
        lock(&self.connection.state)
            .refused
            .iter()
            .filter(|write| &write.operation_id == operation)
            .cloned()
            .collect()
    }

    /// Every write refused that the tab still remembers, oldest first.
    pub(crate) fn all_refused(&self) -> Vec<RefusedWrite> {
        lock(&self.connection.state)
            .refused
            .iter()
            .cloned()
            .collect()
    }
}

impl Connection {
    fn send(&self, session: Option<&str>, method: &str, params: Value) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let _ = self.outgoing.send(Message::text(message.to_string()));
        id
    }

    /// Sends a command and waits for its answer.
    async fn command(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let (answer, answered) = oneshot::channel();
        {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            lock(&self.pending).insert(id, answer);
            let mut message = json!({"id": id, "method": method, "params": params});
            if let Some(session) = session {
                message["sessionId"] = json!(session);
            }
            if self
                .outgoing
                .send(Message::text(message.to_string()))
                .is_err()
            {
                lock(&self.pending).remove(&id);
                return Err(format!("{method}: the connection is closed"));
            }
        }
        match tokio::time::timeout(COMMAND_TIMEOUT, answered).await {
            Ok(Ok(result)) => result.map_err(|e| format!("{method}: {e}")),
            Ok(Err(_)) => Err(format!("{method}: the connection is closed")),
            Err(_) => Err(format!("{method}: no answer within {COMMAND_TIMEOUT:?}")),
        }
    }

    /// Holds every request `session` starts until [`Connection::on_request`]
    /// lets it go or refuses it.
    async fn intercept_requests(&self, session: &str) -> Result<Value, String> {
        self.command(
            Some(session),
            "Fetch.enable",
            json!({"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}),
        )
        .await
    }

    /// Sets the WebSocket refusal on `session` as the current mode asks:
    /// `Network` and the offline emulation of `ws:` and `wss:` on in
    /// read-only mode, both off otherwise. Answers which it set.
    async fn apply_socket_rule(&self, session: &str) -> Result<bool, String> {
        let _one_at_a_time = self.socket_rule.lock().await;
        let refuse = lock(&self.state).refuses_sockets();
        if refuse {
            let offline = |pattern: &str| {
                json!({"urlPattern": pattern, "offline": true, "latency": 0,
                       "downloadThroughput": -1, "uploadThroughput": -1})
            };
            self.command(
                Some(session),
                "Network.enable",
                json!({"maxPostDataSize": 0}),
            )
            .await?;
            self.command(
                Some(session),
                "Network.emulateNetworkConditionsByRule",
                json!({"matchedNetworkConditions": [offline("ws://*:*/*"), offline("wss://*:*/*")]}),
            )
            .await?;
        } else {
            self.command(
                Some(session),
                "Network.emulateNetworkConditionsByRule",
                json!({"matchedNetworkConditions": []}),
            )
            .await?;
            self.command(Some(session), "Network.disable", json!({}))
                .await?;
        }
        Ok(refuse)
    }

    /// Intercepts `session`'s requests (a dedicated worker's are its
    /// frame's) and refuses its new WebSockets in read-only mode, attaches
    /// to what it starts (paused), then lets it run when `resume`.
    async fn hold(
        connection: Arc<Connection>,
        session: String,
        kind: &str,
        resume: bool,
    ) -> Result<(), String> {
        let refuses_sockets = {
            let mut state = lock(&connection.state);
            state.sessions.push(session.clone());
            state.refuses_sockets()
        };
        let session = session.as_str();
        // Registered first: a mode switch from now on sets the rule here
        // too, and whichever sets it last reads the newest mode.
        if refuses_sockets {
            connection.apply_socket_rule(session).await?;
        }
        if kind != "worker" {
            connection.intercept_requests(session).await?;
        }
        connection
            .command(
                Some(session),
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            )
            .await?;
        if resume {
            connection
                .command(Some(session), "Runtime.runIfWaitingForDebugger", json!({}))
                .await?;
        }
        Ok(())
    }

    fn on_message(self: &Arc<Self>, message: Value) {
        if let Some(id) = message.get("id").and_then(Value::as_u64) {
            if let Some(answer) = lock(&self.pending).remove(&id) {
                let result = match message.get("error") {
                    Some(error) => Err(error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown error")
                        .to_owned()),
                    None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                };
                let _ = answer.send(result);
            }
            return;
        }
        let session = message.get("sessionId").and_then(Value::as_str);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match message.get("method").and_then(Value::as_str) {
            Some("Fetch.requestPaused") => {
                if let Some(session) = session {
                    self.on_request(session, &params);
                }
            }
            Some("Target.attachedToTarget") if session.is_none() => {
                self.on_new_page(&params);
            }
            Some("Network.webSocketCreated") => self.on_socket_created(&params),
            Some("Network.webSocketFrameError" | "Network.webSocketClosed") => {
                self.on_socket_end(&params);
            }
            Some("Target.detachedFromTarget") => {
                if let Some(child) = params.get("sessionId").and_then(Value::as_str) {
                    let mut state = lock(&self.state);
                    state.sessions.retain(|s| s != child);
                    state.popups.retain(|(s, _)| s != child);
                }
            }
            // With a parent session: a frame or worker the tab started.
            Some("Target.attachedToTarget") if session.is_some() => {
                if let Some(child) = params.get("sessionId").and_then(Value::as_str) {
                    let connection = Arc::clone(self);
                    let child = child.to_owned();
                    let kind = params
                        .pointer("/targetInfo/type")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    tokio::spawn(async move {
                        if let Err(error) = Connection::hold(connection, child, &kind, true).await {
                            tracing::warn!(%error, kind, "a frame or worker of the tab could not be held");
                        }
                    });
                }
            }
            _ => {}
        }
    }

    /// A page attached by the gate's own auto-attach: held with every
    /// request refused when this tab opened it, let go otherwise.
    fn on_new_page(self: &Arc<Self>, params: &Value) {
        let Some(session) = params.get("sessionId").and_then(Value::as_str) else {
            return;
        };
        // Before auto-attach: the gate's own attach to the tab.
        if !lock(&self.state).holds_popups {
            return;
        }
        let opened_here = params
            .pointer("/targetInfo/openerId")
            .and_then(Value::as_str)
            == Some(self.tab.as_str());
        let waiting = params
            .get("waitingForDebugger")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let target = params
            .pointer("/targetInfo/targetId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let connection = Arc::clone(self);
        let session = session.to_owned();
        tokio::spawn(async move {
            if opened_here {
                connection.hold_popup(&session, &target, waiting).await;
                return;
            }
            if waiting {
                let _ = connection
                    .command(Some(&session), "Runtime.runIfWaitingForDebugger", json!({}))
                    .await;
            }
            let _ = connection
                .command(
                    None,
                    "Target.detachFromTarget",
                    json!({"sessionId": session}),
                )
                .await;
        });
    }

    /// Refuses every request of the page `target` this tab opened
    /// (attached as `session`) before letting it run, then closes it once
    /// its first request was refused, so a write it tried is on record, or
    /// when it made none within [`POPUP_FIRST_REQUEST_WAIT`].
    async fn hold_popup(&self, session: &str, target: &str, waiting: bool) {
        lock(&self.state).popups.push((session.to_owned(), false));
        if let Err(error) = self.intercept_requests(session).await {
            // Left paused: a page that never runs sends nothing.
            tracing::warn!(%error, "a tab the page opened could not be held");
            return;
        }
        if waiting {
            let _ = self
                .command(Some(session), "Runtime.runIfWaitingForDebugger", json!({}))
                .await;
        }
        let start = Instant::now();
        while start.elapsed() < POPUP_FIRST_REQUEST_WAIT {
            let refused = lock(&self.state)
                .popups
                .iter()
                .any(|(s, refused)| s == session && *refused);
            if refused {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if let Err(error) = self
            .command(None, "Target.closeTarget", json!({"targetId": target}))
            .await
        {
            tracing::debug!(%error, "a tab the page opened was closed already");
        }
    }

    /// Remembers the address of a WebSocket being opened, until its end
    /// says whether it was refused; the act waits for that as for a held
    /// request.
    fn on_socket_created(&self, params: &Value) {
        let mut state = lock(&self.state);
        state.last_request = Some(Instant::now());
        if let (Some(id), Some(url)) = (
            params.get("requestId").and_then(Value::as_str),
            params.get("url").and_then(Value::as_str),
        ) {
            state
                .opening_sockets
                .push_back((id.to_owned(), url.to_owned()));
            while state.opening_sockets.len() > MAX_OPENING_SOCKETS {
                state.opening_sockets.pop_front();
            }
        }
    }

    /// Remembers a WebSocket whose handshake the offline emulation
    /// refused, on behalf of the act whose mode holds; forgets one that
    /// ended otherwise.
    fn on_socket_end(&self, params: &Value) {
        let Some(id) = params.get("requestId").and_then(Value::as_str) else {
            return;
        };
        let mut state = lock(&self.state);
        let Some(at) = state.opening_sockets.iter().position(|(s, _)| s == id) else {
            return;
        };
        let refused = params
            .get("errorMessage")
            .and_then(Value::as_str)
            .is_some_and(|error| error.contains(SOCKET_REFUSED));
        let Some((_, url)) = state.opening_sockets.remove(at) else {
            return;
        };
        if !refused {
            return;
        }
        if let Some((operation, _)) = &state.mode {
            let refused = RefusedWrite::new(operation.clone(), "GET", &url, "WebSocket");
            state.remember(refused);
        }
    }

    /// Lets a held request go, or refuses it and remembers why.
    fn on_request(&self, session: &str, params: &Value) {
        let Some(request_id) = params.get("requestId").and_then(Value::as_str) else {
            return;
        };
        let method = params
            .pointer("/request/method")
            .and_then(Value::as_str)
            .unwrap_or("");
        let url = params
            .pointer("/request/url")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = params
            .get("resourceType")
            .and_then(Value::as_str)
            .unwrap_or("Other");
        let refused = {
            let mut state = lock(&self.state);
            state.last_request = Some(Instant::now());
            // A page the tab opened sends nothing; only what the mode
            // itself refuses is a refused write.
            let mut popup = false;
            if let Some((_, refused)) = state.popups.iter_mut().find(|(s, _)| s == session) {
                *refused = true;
                popup = true;
            }
            let write = match &state.mode {
                Some((operation, access)) if !access.permits(method, url) => {
                    Some(RefusedWrite::new(operation.clone(), method, url, kind))
                }
                _ => None,
            };
            let refused_write = write.is_some();
            if let Some(write) = write {
                state.remember(write);
            }
            refused_write || popup
        };
        if refused {
            self.send(
                Some(session),
                "Fetch.failRequest",
                json!({"requestId": request_id, "errorReason": "BlockedByClient"}),
            );
        } else {
            self.send(
                Some(session),
                "Fetch.continueRequest",
                json!({"requestId": request_id}),
            );
        }
    }

    fn break_off(&self, reason: String) {
        lock(&self.state).broken = Some(reason);
        for (_, answer) in lock(&self.pending).drain() {
            let _ = answer.send(Err("the connection closed".to_owned()));
        }
    }
}
