//! A client that goes away in the middle of a `browser_act`: over stdio
//! (it closes both pipes) and over Streamable HTTP (it closes the
//! connection). The act is held inside the backend by a gate while the
//! client leaves and the server notices, then released: it happens once,
//! is recorded once, the grant is used up, nothing panics, and the server
//! goes on serving other sessions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use countersign_act_tool::{Context, Toolset};
use countersign_approval_core::{
    ActionRequest, ActorId, ApproverId, Backend, BackendError, Clock, OperationId, OperationLog,
    OperationRecord, ProposalId, ProposalStore, RunId, StoreError, SystemClock,
};
use countersign_backend_fake::FakeBackend;
use countersign_canonical_policy::{Policy, StaticResolver};
use countersign_mcp::http::{HttpOptions, MCP_PATH, router};
use countersign_mcp::stdio::serve_lines;
use countersign_mcp::{Identity, McpServer, StaticTokens};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{Notify, mpsc, watch};

const TOKEN: &str = "a-client-token-of-some-length";
const URL: &str = "https://docs.example.com/";
/// A bound on every wait, so a broken server fails the test instead of
/// hanging it; no outcome depends on it.
const PATIENCE: Duration = Duration::from_secs(60);

fn identity() -> Identity {
    Identity::new(ActorId::new("agent").unwrap(), RunId::new("run").unwrap())
}

/// Holds every `perform` until the test releases it.
#[derive(Default)]
struct Gate {
    entered: Notify,
    release: Notify,
}

/// The fake backend behind a [`Gate`].
#[derive(Clone)]
struct GatedBackend {
    inner: FakeBackend,
    gate: Arc<Gate>,
}

#[async_trait]
impl Backend for GatedBackend {
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError> {
        self.gate.entered.notify_one();
        self.gate.release.notified().await;
        self.inner.perform(request).await
    }
}

/// The in-memory operation log, counting what it recorded.
struct WatchedLog {
    inner: InMemoryOperationStore,
    recorded: watch::Sender<usize>,
}

#[async_trait]
impl OperationLog for WatchedLog {
    async fn record(&self, record: OperationRecord) -> Result<(), StoreError> {
        let written = self.inner.record(record).await;
        self.recorded.send_modify(|n| *n += 1);
        written
    }
    async fn records_for_run(&self, run: &RunId) -> Result<Vec<OperationRecord>, StoreError> {
        self.inner.records_for_run(run).await
    }
    async fn record_for_operation(
        &self,
        id: &OperationId,
    ) -> Result<Option<OperationRecord>, StoreError> {
        self.inner.record_for_operation(id).await
    }
}

struct Harness {
    server: McpServer,
    store: Arc<InMemoryApprovalStore>,
    backend: FakeBackend,
    gate: Arc<Gate>,
    log: Arc<WatchedLog>,
    recorded: watch::Receiver<usize>,
}

fn harness() -> Harness {
    let store = Arc::new(InMemoryApprovalStore::new());
    let backend = FakeBackend::new();
    let gate = Arc::new(Gate::default());
    let (recorded_tx, recorded) = watch::channel(0);
    let log = Arc::new(WatchedLog {
        inner: InMemoryOperationStore::new(),
        recorded: recorded_tx,
    });
    let gated = GatedBackend {
        inner: backend.clone(),
        gate: Arc::clone(&gate),
    };
    let (factory_store, factory_log) = (Arc::clone(&store), Arc::clone(&log));
    let server = McpServer::new(move |identity: &Identity| {
        let policy = Policy::builder()
            .allow_host("docs.example.com")
            .resolver(StaticResolver::answering_all(["93.184.216.34"
                .parse()
                .unwrap()]))
            .build()
            .map_err(|e| e.to_string())?;
        let context = Context::builder()
            .actor_id(identity.actor.clone())
            .run_id(identity.run.clone())
            .backend(gated.clone())
            .source_policy(policy)
            .operation_store(Arc::clone(&factory_log))
            .proposal_store(Arc::clone(&factory_store))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Toolset::new(context).with_act().with_propose())
    });
    Harness {
        server,
        store,
        backend,
        gate,
        log,
        recorded,
    }
}

fn click(selector: &str) -> Value {
    json!({"url": URL, "method": "click", "selector": selector})
}

fn act(selector: &str, approval_id: &str) -> Value {
    let mut call = click(selector);
    call["approval_id"] = json!(approval_id);
    call
}

impl Harness {
    /// An approved grant for clicking `selector`: proposed through the
    /// caller's toolset, approved as the approval pages do.
    async fn grant(&self, selector: &str) -> String {
        let toolset = self.server.toolset(&identity()).unwrap();
        let proposed = toolset
            .call("browser_propose", &click(selector))
            .await
            .unwrap();
        let id = ProposalId::parse(proposed["proposal_id"].as_str().unwrap()).unwrap();
        let stored = self.store.get_proposal(&id).await.unwrap().unwrap();
        let now = SystemClock.now();
        let grant = stored
            .proposal
            .grant(
                Duration::from_secs(600),
                now,
                Some(ApproverId::new("carol").unwrap()),
            )
            .unwrap();
        self.store.approve_proposal(&id, grant, now).await.unwrap();
        let status = toolset
            .call(
                "browser_proposal_status",
                &json!({"proposal_id": id.as_str()}),
            )
            .await
            .unwrap();
        status["approval_id"].as_str().unwrap().to_owned()
    }

    /// Waits until the log holds `n` records.
    async fn recorded(&mut self, n: usize) {
        tokio::time::timeout(PATIENCE, self.recorded.wait_for(|count| *count >= n))
            .await
            .expect("the act was never recorded")
            .unwrap();
    }

    /// The outcomes in the log, oldest first.
    async fn outcomes(&self) -> Vec<&'static str> {
        self.log
            .records_for_run(&identity().run)
            .await
            .unwrap()
            .iter()
            .map(|r| r.outcome.as_str())
            .collect()
    }
}

/// A stdio client on `serve_lines`, initialized.
struct StdioClient {
    to_server: tokio::io::WriteHalf<DuplexStream>,
    from_server: tokio::io::Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    session: tokio::task::JoinHandle<Result<(), countersign_mcp::stdio::StdioError>>,
}

impl StdioClient {
    async fn open(server: &McpServer) -> StdioClient {
        let (client, served) = tokio::io::duplex(1 << 16);
        let (server_in, server_out) = tokio::io::split(served);
        let session = tokio::spawn(serve_lines(
            server.launched_as(identity()),
            server_in,
            server_out,
        ));
        let (from_server, to_server) = tokio::io::split(client);
        let mut client = StdioClient {
            to_server,
            from_server: BufReader::new(from_server).lines(),
            session,
        };
        client
            .send(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
            )
            .await;
        assert_eq!(
            client.next().await["result"]["protocolVersion"],
            "2025-11-25"
        );
        client
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.to_server.write_all(&line).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.from_server.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    }

    async fn call_act(&mut self, id: u64, arguments: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "browser_act", "arguments": arguments}}))
            .await;
    }

    /// `ok` or the refusal's code of the answer to `id`.
    async fn outcome(&mut self, id: u64) -> String {
        let answer = self.next().await;
        assert_eq!(answer["id"], id, "{answer}");
        outcome_of(&answer["result"])
    }
}

fn outcome_of(result: &Value) -> String {
    let body = &result["structuredContent"];
    match body["status"].as_str() {
        Some("error") => body["error"]["code"].as_str().unwrap().to_owned(),
        Some(other) => other.to_owned(),
        None => panic!("not a tool result: {result}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_client_gone_mid_act_leaves_one_recorded_act() {
    let mut h = harness();
    let approval = h.grant("button#gone").await;
    let mut client = StdioClient::open(&h.server).await;
    client.call_act(1, act("button#gone", &approval)).await;

    // The act is inside the backend: the grant is consumed, nothing is
    // performed yet. The client closes both pipes and the session ends,
    // cleanly, while the act is still held.
    h.gate.entered.notified().await;
    let StdioClient {
        to_server,
        from_server,
        session,
    } = client;
    drop(to_server);
    drop(from_server);
    let ended = tokio::time::timeout(PATIENCE, session)
        .await
        .expect("the session never ended");
    assert!(matches!(ended, Ok(Ok(()))), "{ended:?}");
    assert_eq!(h.backend.len(), 0);
    assert_eq!(h.outcomes().await, Vec::<&str>::new());
    // What `countersign-mcp --stdio` waits for before it exits: not yet.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), h.server.calls_finished())
            .await
            .is_err(),
        "calls_finished resolved while an act was inside the backend"
    );

    // Released, the act finishes with nobody to answer: performed once,
    // recorded once.
    h.gate.release.notify_one();
    h.recorded(1).await;
    assert_eq!(h.backend.len(), 1);
    assert_eq!(h.outcomes().await, ["ok"]);
    tokio::time::timeout(PATIENCE, h.server.calls_finished())
        .await
        .expect("calls_finished never resolved after the act ended");

    // Another session: the grant is used up, and a new one works.
    let mut other = StdioClient::open(&h.server).await;
    other.call_act(1, act("button#gone", &approval)).await;
    assert_eq!(other.outcome(1).await, "APPROVAL_STALE");
    let fresh = h.grant("button#next").await;
    h.gate.release.notify_one();
    other.call_act(2, act("button#next", &fresh)).await;
    assert_eq!(other.outcome(2).await, "ok");
    assert_eq!(h.backend.len(), 2);
    assert_eq!(h.outcomes().await, ["ok", "APPROVAL_STALE", "ok"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_client_cancelling_mid_act_leaves_one_recorded_act() {
    let mut h = harness();
    let approval = h.grant("button#cancel").await;
    let mut client = StdioClient::open(&h.server).await;
    client.call_act(1, act("button#cancel", &approval)).await;
    h.gate.entered.notified().await;
    // MCP's cancellation, then a ping: once the ping is answered the
    // server has read the cancellation (one reader, in order).
    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 1, "reason": "the user pressed stop"}}),
        )
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    assert_eq!(
        client.next().await,
        json!({"jsonrpc": "2.0", "id": 2, "result": {}})
    );
    assert_eq!(h.backend.len(), 0);

    // A cancelled act that is already inside the backend still finishes:
    // the grant was consumed, so the action happens once and is recorded;
    // the cancelled request gets no answer.
    h.gate.release.notify_one();
    h.recorded(1).await;
    assert_eq!(h.backend.len(), 1);
    assert_eq!(h.outcomes().await, ["ok"]);
    client.call_act(3, act("button#cancel", &approval)).await;
    assert_eq!(client.outcome(3).await, "APPROVAL_STALE");
    assert_eq!(h.outcomes().await, ["ok", "APPROVAL_STALE"]);
    assert_eq!(h.backend.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_client_gone_before_its_act_arrived_leaves_the_grant_usable() {
    let h = harness();
    let approval = h.grant("button#half").await;
    let mut client = StdioClient::open(&h.server).await;
    // Half of the call's line, then the client closes its side: the line
    // is answered as not JSON and never reaches the toolset.
    let mut line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "browser_act", "arguments": act("button#half", &approval)}})
    .to_string()
    .into_bytes();
    line.truncate(line.len() / 2);
    client.to_server.write_all(&line).await.unwrap();
    client.to_server.shutdown().await.unwrap();
    let refused = client.next().await;
    assert_eq!(refused["error"]["code"], -32700, "{refused}");
    assert_eq!(refused["id"], Value::Null);
    let ended = tokio::time::timeout(PATIENCE, client.session)
        .await
        .expect("the session never ended");
    assert!(matches!(ended, Ok(Ok(()))), "{ended:?}");
    assert_eq!(h.backend.len(), 0);
    assert_eq!(h.outcomes().await, Vec::<&str>::new());

    // Nothing was consumed: the grant works, once, in another session.
    let mut other = StdioClient::open(&h.server).await;
    h.gate.release.notify_one();
    other.call_act(1, act("button#half", &approval)).await;
    assert_eq!(other.outcome(1).await, "ok");
    assert_eq!(h.backend.len(), 1);
    assert_eq!(h.outcomes().await, ["ok"]);
}

/// How a request ended in the server.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// It produced a response (with this status).
    Answered(u16),
    /// Its future was dropped before it produced a response, as when the
    /// client disconnects.
    Dropped,
    /// Its streamed response body was dropped before its end (watched for
    /// requests that carry [`WATCH_BODY`]).
    BodyDropped,
}

/// The request header asking the test's middleware to watch the body.
const WATCH_BODY: &str = "x-test-watch-body";

/// Sends its message when dropped before it is disarmed.
struct DroppedEarly(Option<mpsc::UnboundedSender<Ended>>, Ended);

impl DroppedEarly {
    fn new(tx: mpsc::UnboundedSender<Ended>, message: Ended) -> Self {
        DroppedEarly(Some(tx), message)
    }
}

impl Drop for DroppedEarly {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(std::mem::replace(&mut self.1, Ended::Dropped));
        }
    }
}

/// A response body that reports being dropped before its end. Its inner
/// body is dropped first (fields drop in order).
struct WatchedBody {
    inner: axum::body::Body,
    guard: DroppedEarly,
}

impl http_body::Body for WatchedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let frame = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if let std::task::Poll::Ready(None) = frame {
            self.guard.0 = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

/// A request's future and the guard that reports its drop.
struct Watched<F> {
    future: std::pin::Pin<Box<F>>,
    guard: DroppedEarly,
}

async fn watch_for_drops(
    State(tx): State<mpsc::UnboundedSender<Ended>>,
    request: Request,
    next: Next,
) -> Response {
    // Fields drop in order: when the connection goes, the request's own
    // future (and the SDK's cancellation guard in it) is gone before
    // `Dropped` is sent.
    let watch_body = request.headers().contains_key(WATCH_BODY);
    let mut watched = Watched {
        future: Box::pin(next.run(request)),
        guard: DroppedEarly::new(tx.clone(), Ended::Dropped),
    };
    let response = (&mut watched.future).await;
    watched.guard.0 = None;
    let _ = tx.send(Ended::Answered(response.status().as_u16()));
    if !watch_body {
        return response;
    }
    response.map(|inner| {
        axum::body::Body::new(WatchedBody {
            inner,
            guard: DroppedEarly::new(tx, Ended::BodyDropped),
        })
    })
}

/// The router of `h` on a loopback port, and how its requests end.
async fn serve_http(h: &Harness) -> (String, mpsc::UnboundedReceiver<Ended>) {
    let (ended_tx, ended) = mpsc::unbounded_channel();
    let app = router(
        h.server.clone(),
        StaticTokens::new().with(TOKEN, identity()),
        HttpOptions::default(),
    )
    .layer(middleware::from_fn_with_state(ended_tx, watch_for_drops));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (origin, ended)
}

async fn next_end(ended: &mut mpsc::UnboundedReceiver<Ended>) -> Ended {
    tokio::time::timeout(PATIENCE, ended.recv())
        .await
        .expect("the server never finished the request")
        .unwrap()
}

/// A 2026-07-28 `tools/call` of `browser_act` as raw HTTP/1.1 bytes.
fn raw_act(arguments: Value) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "browser_act", "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }}})
    .to_string();
    format!(
        "POST {MCP_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: browser_act\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The same call through an HTTP client: `ok` or the refusal's code.
async fn act_over_http(origin: &str, arguments: Value) -> String {
    let request = raw_act(arguments);
    let text = String::from_utf8(request).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut builder = support::http().post(format!("{origin}{MCP_PATH}"));
    for line in head.lines().skip(1) {
        let (name, value) = line.split_once(": ").unwrap();
        if !name.eq_ignore_ascii_case("host") && !name.eq_ignore_ascii_case("content-length") {
            builder = builder.header(name, value);
        }
    }
    let answer = builder.body(body.to_owned()).send().await.unwrap();
    assert_eq!(answer.status(), reqwest::StatusCode::OK);
    let body = answer.text().await.unwrap();
    outcome_of(&support::answer_to(&body, 1)["result"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_client_gone_mid_act_leaves_one_recorded_act() {
    let mut h = harness();
    let (origin, mut ended) = serve_http(&h).await;

    let approval = h.grant("button#gone").await;
    let mut connection = tokio::net::TcpStream::connect(origin.trim_start_matches("http://"))
        .await
        .unwrap();
    connection
        .write_all(&raw_act(act("button#gone", &approval)))
        .await
        .unwrap();

    // Inside the backend; the client hangs up, and the server drops the
    // request (its response can no longer be sent) while the act is held.
    h.gate.entered.notified().await;
    drop(connection);
    assert_eq!(next_end(&mut ended).await, Ended::Dropped);
    assert_eq!(h.backend.len(), 0);
    assert_eq!(h.outcomes().await, Vec::<&str>::new());

    h.gate.release.notify_one();
    h.recorded(1).await;
    assert_eq!(h.backend.len(), 1);
    assert_eq!(h.outcomes().await, ["ok"]);

    // The server goes on: the grant is used up, a new one works.
    assert_eq!(
        act_over_http(&origin, act("button#gone", &approval)).await,
        "APPROVAL_STALE"
    );
    let fresh = h.grant("button#next").await;
    h.gate.release.notify_one();
    assert_eq!(
        act_over_http(&origin, act("button#next", &fresh)).await,
        "ok"
    );
    assert_eq!(h.backend.len(), 2);
    assert_eq!(h.outcomes().await, ["ok", "APPROVAL_STALE", "ok"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_client_gone_before_its_act_arrived_leaves_the_grant_usable() {
    let h = harness();
    let (origin, mut ended) = serve_http(&h).await;
    let approval = h.grant("button#half").await;
    // The headers and half of the body, then the client hangs up: the
    // server never has the whole call, so the SDK never sees it.
    let request = raw_act(act("button#half", &approval));
    let mut connection = tokio::net::TcpStream::connect(origin.trim_start_matches("http://"))
        .await
        .unwrap();
    connection
        .write_all(&request[..request.len() - 20])
        .await
        .unwrap();
    drop(connection);
    // The guard's read of the body fails, and it answers as it answers any
    // body it cannot read whole (`413`), to nobody.
    assert_eq!(next_end(&mut ended).await, Ended::Answered(413));
    assert_eq!(h.backend.len(), 0);
    assert_eq!(h.outcomes().await, Vec::<&str>::new());

    // Nothing was consumed: the grant works, once.
    h.gate.release.notify_one();
    assert_eq!(
        act_over_http(&origin, act("button#half", &approval)).await,
        "ok"
    );
    assert_eq!(h.backend.len(), 1);
    assert_eq!(h.outcomes().await, ["ok"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_session_client_gone_mid_act_leaves_one_recorded_act() {
    let mut h = harness();
    let (origin, mut ended) = serve_http(&h).await;
    let approval = h.grant("button#gone").await;
    // A 2025-11-25 session, as the official SDKs open one.
    let mut session =
        support::Session::open_with_token(&format!("{origin}{MCP_PATH}"), TOKEN).await;
    assert_eq!(next_end(&mut ended).await, Ended::Answered(200));
    assert_eq!(next_end(&mut ended).await, Ended::Answered(202));

    // The call's answer is a stream the server opens at once; the act runs
    // in the session. The client hangs up while it is inside the backend.
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "browser_act", "arguments": act("button#gone", &approval)}})
    .to_string();
    let request = format!(
        "POST {MCP_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25\r\n\
         Mcp-Session-Id: {}\r\nAuthorization: Bearer {TOKEN}\r\n{WATCH_BODY}: 1\r\n\
         Content-Length: {}\r\n\r\n{body}",
        session.id,
        body.len()
    );
    let mut connection = tokio::net::TcpStream::connect(origin.trim_start_matches("http://"))
        .await
        .unwrap();
    connection.write_all(request.as_bytes()).await.unwrap();
    h.gate.entered.notified().await;
    assert_eq!(next_end(&mut ended).await, Ended::Answered(200));
    drop(connection);
    assert_eq!(next_end(&mut ended).await, Ended::BodyDropped);
    assert_eq!(h.backend.len(), 0);
    assert_eq!(h.outcomes().await, Vec::<&str>::new());

    h.gate.release.notify_one();
    h.recorded(1).await;
    assert_eq!(h.backend.len(), 1);
    assert_eq!(h.outcomes().await, ["ok"]);

    // The session itself goes on: the grant is used up, a new one works.
    assert_eq!(
        session
            .outcome("browser_act", act("button#gone", &approval))
            .await,
        "APPROVAL_STALE"
    );
    let fresh = h.grant("button#next").await;
    h.gate.release.notify_one();
    assert_eq!(
        session
            .outcome("browser_act", act("button#next", &fresh))
            .await,
        "ok"
    );
    assert_eq!(h.backend.len(), 2);
    assert_eq!(h.outcomes().await, ["ok", "APPROVAL_STALE", "ok"]);
}
