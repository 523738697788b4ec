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
//! Not held: WebSockets. Chromium's request interception does not see a
//! WebSocket's handshake, and blocking by address (`Network.setBlockedURLs`)
//! did not stop one in Chromium 156; the docs say so.
//!
//! Interception is on from the tab's first page: switching the mode is a
//! change of the decision, not a protocol round trip that a request could
//! overtake.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use countersign_approval_core::{OperationId, RefusedWrite, WriteAccess};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::error::ChromiumError;

/// The most refused writes a tab remembers; older ones are dropped (each
/// was also logged when it was refused).
pub const MAX_REMEMBERED_REFUSALS: usize = 256;

/// How long a protocol command of the gate may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

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
}

struct Connection {
    outgoing: mpsc::UnboundedSender<Message>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>,
    next_id: AtomicU64,
    state: Mutex<GateState>,
}

/// The read-only gate of one tab. Dropping it closes its connection, and
/// the browser lets held requests go.
pub(crate) struct WriteGate {
    connection: Arc<Connection>,
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
            outgoing,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            state: Mutex::new(GateState {
                mode: None,
                refused: VecDeque::new(),
                last_request: None,
                broken: None,
            }),
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
        let gate = WriteGate {
            connection,
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
        Connection::hold(Arc::clone(&gate.connection), session, "page", false)
            .await
            .map_err(failed)?;
        Ok(gate)
    }

    /// Makes `access` the tab's write access from now on, on behalf of
    /// `operation`. Refused when the gate has lost its connection: the act
    /// must then not be performed.
    pub(crate) fn enter(
        &self,
        operation: &OperationId,
        access: &WriteAccess,
    ) -> Result<(), String> {
        let mut state = lock(&self.connection.state);
        if let Some(reason) = &state.broken {
            return Err(format!("the read-only gate is down ({reason})"));
        }
        state.mode = Some((operation.clone(), access.clone()));
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

    /// Intercepts `session`'s requests (a dedicated worker's are its
    /// frame's), attaches to what it starts (paused), then lets it run
    /// when `resume`.
    async fn hold(
        connection: Arc<Connection>,
        session: String,
        kind: &str,
        resume: bool,
    ) -> Result<(), String> {
        let session = session.as_str();
        if kind != "worker" {
            connection
                .command(
                    Some(session),
                    "Fetch.enable",
                    json!({"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}),
                )
                .await?;
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
            // Without a parent session: the gate's own attach to the tab.
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
            match &state.mode {
                Some((operation, access)) if !access.permits(method, url) => {
                    let refused = RefusedWrite::new(operation.clone(), method, url, kind);
                    state.refused.push_back(refused.clone());
                    while state.refused.len() > MAX_REMEMBERED_REFUSALS {
                        state.refused.pop_front();
                    }
                    Some(refused)
                }
                _ => None,
            }
        };
        match refused {
            Some(refused) => {
                tracing::warn!(
                    operation_id = %refused.operation_id,
                    method = %refused.method,
                    address = %refused.address,
                    kind = %refused.kind,
                    "read-only mode refused a write"
                );
                self.send(
                    Some(session),
                    "Fetch.failRequest",
                    json!({"requestId": request_id, "errorReason": "BlockedByClient"}),
                );
            }
            None => {
                self.send(
                    Some(session),
                    "Fetch.continueRequest",
                    json!({"requestId": request_id}),
                );
            }
        }
    }

    fn break_off(&self, reason: String) {
        lock(&self.state).broken = Some(reason);
        for (_, answer) in lock(&self.pending).drain() {
            let _ = answer.send(Err("the connection closed".to_owned()));
        }
    }
}
