//! browser_act through countersign-mcp's Streamable HTTP Router against
//! what it is built from: a bare rmcp server over the same transport whose
//! one tool runs the same act on an in-process Toolset (no token, no
//! duplicate-key parse, no identity, no result shaping) and answers it as
//! a structured result, so both sides do the same act and send answers of
//! one size.
//!
//! The note also gives the sum it was first judged against, a bare tool
//! answering a copy of an act's result plus the act timed alone in
//! process, and the ratio against a bare tool echoing its (smaller)
//! arguments. That sum underrates the act over MCP: timed inside the
//! server the same act takes about twice as long as back to back in
//! process (measured 16.4 against 8.8 µs), because the HTTP and rmcp work
//! between two acts leaves the act's code and data out of the caches;
//! the bare act tool pays that too.
//!
//! Both sides run the whole HTTP service (requests and SSE responses
//! through tower, no sockets, so the kernel's loopback does not drown the
//! difference); the subject adds only countersign-mcp's own layer: the
//! bearer-token check, the duplicate-key parse, the identity lookup and the
//! result conversion.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, header};
use countersign_act_tool::{Context, Toolset};
use countersign_approval_core::{ApprovalId, ApprovalStore, ManualClock};
use countersign_backend_fake::FakeBackend;
use countersign_mcp::http::{HttpOptions, MCP_PATH};
use countersign_mcp::{Identity, McpServer, StaticTokens};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::harness::{Budget, Row, Target, compare_sides};
use crate::memory_bench::Fixture;
use crate::policy_bench::policy;

const TOKEN: &str = "bench-token-0123456789";
const URL: &str = "https://docs.example.com/";

/// The bare tools: `echo` answers its arguments, `sized` a fixed copy of
/// an act's result (the same JSON the subject answers, so both sides send
/// and parse responses of one size), nothing else.
#[derive(Clone)]
struct Echo {
    sized: Arc<Value>,
    /// The `act` tool's toolset: the act the subject runs, without
    /// countersign-mcp around it.
    toolset: Arc<Toolset>,
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::default())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let answer = match request.name.as_ref() {
            "sized" => Value::clone(&self.sized),
            "act" => {
                let arguments = Value::Object(request.arguments.unwrap_or_default());
                self.toolset
                    .call("browser_act", &arguments)
                    .await
                    .map_err(|_| ErrorData::invalid_params("no act tool", None))?
            }
            _ => Value::Object(request.arguments.unwrap_or_default()),
        };
        Ok(CallToolResult::structured(answer).into())
    }
}

/// An MCP client over a Router, one session.
struct Client {
    app: Router,
    session: String,
    next_id: u64,
}

fn request(body: Value, session: Option<&str>) -> Result<Request<Body>, String> {
    let mut builder = Request::post(MCP_PATH)
        .header(header::HOST, "127.0.0.1")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    if let Some(session) = session {
        builder = builder.header("mcp-session-id", session);
    }
    builder
        .body(Body::from(body.to_string()))
        .map_err(|e| e.to_string())
}

/// The JSON-RPC message in an SSE (or plain JSON) response body.
async fn message(response: Response<Body>) -> Result<Value, String> {
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&bytes);
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|d| d.starts_with('{'))
        .unwrap_or(&text);
    serde_json::from_str(data).map_err(|e| format!("no JSON-RPC message in `{text}`: {e}"))
}

impl Client {
    async fn connect(app: Router) -> Result<Client, String> {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}});
        let response = app
            .clone()
            .oneshot(request(init, None)?)
            .await
            .map_err(|e| e.to_string())?;
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or("no session id")?
            .to_owned();
        message(response).await?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        app.clone()
            .oneshot(request(initialized, Some(&session))?)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Client {
            app,
            session,
            next_id: 1,
        })
    }

    async fn call(&mut self, name: &str, arguments: &Value) -> Result<Value, String> {
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}});
        let response = self
            .app
            .clone()
            .oneshot(request(body, Some(&self.session))?)
            .await
            .map_err(|e| e.to_string())?;
        message(response).await
    }
}

/// Which side a timed loop runs.
#[derive(Clone, Copy)]
enum Which {
    Mcp,
    Echo,
    Sized,
    BareAct,
    InProcess,
}

/// `n` fresh grants in `store`, and the act call of each.
async fn issue(f: &Fixture, store: &InMemoryApprovalStore, n: u64) -> Result<Vec<Value>, String> {
    let mut calls = Vec::new();
    for _ in 0..n {
        let mut grant = f.template.clone();
        grant.id = ApprovalId::generate().map_err(|e| e.to_string())?;
        calls.push(json!({"url": URL, "approval_id": grant.id.as_str(),
            "method": "click", "selector": "a#docs"}));
        store.issue(grant).await.map_err(|e| e.to_string())?;
    }
    Ok(calls)
}

/// The row: browser_act via MCP over the bare tool plus the in-process act.
pub fn act(budget: Budget) -> Result<Row, String> {
    let f = Fixture::new()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let store = Arc::new(InMemoryApprovalStore::new());
    let backend = FakeBackend::new();
    let context = |store: Arc<InMemoryApprovalStore>| {
        Context::builder()
            .actor_id(f.template.actor_id.clone())
            .run_id(f.template.run_id.clone())
            .backend(backend.clone())
            .source_policy(policy()?)
            .operation_store(InMemoryOperationStore::new())
            .approval_store(store)
            .clock(ManualClock::new(f.now))
            .build()
            .map_err(|e| e.to_string())
    };
    let in_process = Toolset::new(context(store.clone())?).with_act();
    let mcp_context = context(store.clone())?;
    let server =
        McpServer::new(move |_: &Identity| Ok(Toolset::new(mcp_context.clone()).with_act()));
    let identity = Identity::new(f.template.actor_id.clone(), f.template.run_id.clone());
    let ours = countersign_mcp::http::router(
        server,
        StaticTokens::new().with(TOKEN, identity),
        HttpOptions::default(),
    );
    // The bare tool's sized answer: an act's result, as the subject sends.
    let sized = rt.block_on(async {
        let calls = issue(&f, &store, 1).await?;
        in_process
            .call("browser_act", &calls[0])
            .await
            .map_err(|e| e.to_string())
    })?;
    if sized["status"] != "ok" {
        return Err(format!("the in-process act did not act: {sized}"));
    }
    let sized = Arc::new(sized);
    let bare_toolset = Arc::new(Toolset::new(context(store.clone())?).with_act());
    let echo = Router::new().route_service(
        MCP_PATH,
        StreamableHttpService::new(
            move || {
                Ok(Echo {
                    sized: Arc::clone(&sized),
                    toolset: Arc::clone(&bare_toolset),
                })
            },
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        ),
    );
    let (mut ours, mut echo) = rt.block_on(async {
        Ok::<_, String>((Client::connect(ours).await?, Client::connect(echo).await?))
    })?;

    // One check before timing: both acting sides really act, and the
    // sized answer is as long as the subject's.
    let (over_mcp, in_place, sized_answer, bare_answer) = rt.block_on(async {
        let calls = issue(&f, &store, 3).await?;
        let over_mcp = ours.call("browser_act", &calls[0]).await?;
        let in_place = in_process
            .call("browser_act", &calls[1])
            .await
            .map_err(|e| e.to_string())?;
        let sized_answer = echo.call("sized", &calls[0]).await?;
        let bare_answer = echo.call("act", &calls[2]).await?;
        Ok::<_, String>((over_mcp, in_place, sized_answer, bare_answer))
    })?;
    if over_mcp["result"]["structuredContent"]["status"] != "ok"
        || in_place["status"] != "ok"
        || bare_answer["result"]["structuredContent"]["status"] != "ok"
    {
        return Err(format!(
            "an act side did not act: {over_mcp} / {in_place} / {bare_answer}"
        ));
    }
    let length = |answer: &Value| answer["result"].to_string().len();
    if length(&over_mcp).abs_diff(length(&sized_answer)) > 8
        || length(&over_mcp).abs_diff(length(&bare_answer)) > 8
    {
        return Err(format!(
            "the sized answer is not the subject's size: {over_mcp} / {sized_answer}"
        ));
    }

    // Each side issues its grants untimed, then times its calls. (The
    // clients sit behind async locks only so that three closures can share
    // them; the lock is uncontended.)
    let (ours, echo) = (tokio::sync::Mutex::new(ours), tokio::sync::Mutex::new(echo));
    let timed = |iters: u64, which: Which| -> Duration {
        rt.block_on(async {
            let Ok(calls) = issue(&f, &store, iters).await else {
                return Duration::ZERO;
            };
            let (mut ours, mut echo) = (ours.lock().await, echo.lock().await);
            let start = Instant::now();
            for call in &calls {
                match which {
                    Which::Mcp => {
                        let _ = std::hint::black_box(ours.call("browser_act", call).await);
                    }
                    Which::Echo => {
                        let _ = std::hint::black_box(echo.call("echo", call).await);
                    }
                    Which::Sized => {
                        let _ = std::hint::black_box(echo.call("sized", call).await);
                    }
                    Which::BareAct => {
                        let _ = std::hint::black_box(echo.call("act", call).await);
                    }
                    Which::InProcess => {
                        let _ = std::hint::black_box(in_process.call("browser_act", call).await);
                    }
                }
            }
            start.elapsed()
        })
    };
    let mut subject = |iters: u64| timed(iters, Which::Mcp);
    let mut bare_echo = |iters: u64| timed(iters, Which::Echo);
    let mut bare_sized = |iters: u64| timed(iters, Which::Sized);
    let mut act_in_process = |iters: u64| timed(iters, Which::InProcess);
    let mut bare_act = |iters: u64| timed(iters, Which::BareAct);
    let sides = compare_sides(
        budget,
        &mut [
            &mut subject,
            &mut bare_act,
            &mut bare_sized,
            &mut act_in_process,
            &mut bare_echo,
        ],
    );
    let (subject, baseline, sized_side, act_side, echo_side) =
        (sides[0], sides[1], sides[2], sides[3], sides[4]);
    let sum = sized_side.median_ns + act_side.median_ns;
    let echo_sum = echo_side.median_ns + act_side.median_ns;
    Ok(Row {
        name: "browser_act via MCP Streamable HTTP (countersign-mcp, fake backend)".to_owned(),
        baseline_name: "bare rmcp tool running the same Toolset browser_act, same transport"
            .to_owned(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.3),
        note: format!(
            "countersign-mcp adds {:.1} µs at p50 over the bare act tool (medians, sides sampled in rotation); \
             against a bare tool answering a copy of an act's result ({:.1} µs) plus the act alone in process ({:.1} µs) the ratio is {:.2}, \
             against a bare echo of the arguments ({:.1} µs) plus that act {:.2}; \
             tower requests through the whole axum/rmcp service, no sockets; one session per side",
            (subject.median_ns - baseline.median_ns) / 1e3,
            sized_side.median_ns / 1e3,
            act_side.median_ns / 1e3,
            subject.median_ns / sum,
            echo_side.median_ns / 1e3,
            subject.median_ns / echo_sum,
        ),
    })
}
