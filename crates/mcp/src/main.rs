//! `countersign-mcp`: the countersign toolset as an MCP server, the
//! approval pages beside it, configured by one TOML file.

mod backend;
mod config;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use clap::{Parser, ValueEnum};
use countersign_act_tool::{Context, Toolset};
use countersign_approval_core::{
    ActorId, ApprovalId, ApproverId, OperationLog, ProposalStore, RunId,
};
use countersign_approval_web::{ApprovalPages, Approvers, TokenApprovers};
use countersign_canonical_policy::{Policy, StaticResolver, SystemResolver};
use countersign_mcp::http::{HttpOptions, MCP_PATH};
use countersign_mcp::{Identity, McpServer, StaticTokens};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};

use countersign_backend_chromium::running_as_root;

use crate::backend::Backends;
use crate::config::{ApproverConfig, Config, IdentityConfig, PolicyConfig, TokenConfig};

/// How long `--stdio` waits, once its client has gone, for the tool calls
/// still running (an act in the backend) before the process exits.
const CALLS_FINISH_WITHIN: Duration = Duration::from_secs(60);

/// Serves countersign's browser tools to MCP clients (stdio and Streamable
/// HTTP) and the approval pages where a person approves what a model
/// proposed, in one process.
#[derive(Debug, Parser)]
#[command(name = "countersign-mcp", version)]
struct Args {
    /// The TOML configuration file (see docs/mcp.md).
    #[arg(long, short, value_name = "FILE", required_unless_present = "demo")]
    config: Option<PathBuf>,
    /// Also serve MCP on stdin/stdout, as the `[stdio]` identity.
    #[arg(long)]
    stdio: bool,
    /// Serve a local demo: a site on loopback, the approval page and the
    /// MCP endpoint, fresh tokens; prints how to connect.
    #[arg(long, conflicts_with = "config")]
    demo: bool,
    /// The demo's backend (with `--demo`; default `fake`): `fake` (a model
    /// of the demo page, clicks nothing) or `chromium` (headless Chromium
    /// behind the egress guard, clicks the demo page). With `--config` the
    /// file's `[backend]` decides.
    #[arg(long, value_enum, conflicts_with = "config")]
    backend: Option<DemoBackend>,
}

/// What `--demo` acts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DemoBackend {
    /// The fake backend, showing a model of the demo page.
    Fake,
    /// Headless Chromium behind the egress guard.
    Chromium,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("countersign-mcp: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let (config, demo) = match (&args.config, args.demo) {
        (_, true) => {
            let (config, demo) = demo_config(args.backend.unwrap_or(DemoBackend::Fake)).await?;
            (config, Some(demo))
        }
        (Some(path), false) => (config::load(path)?, None),
        (None, false) => return Err("give `--config FILE` or `--demo`".into()),
    };
    let stdio = if args.stdio {
        let identity = config
            .stdio
            .as_ref()
            .ok_or("`--stdio` needs a `[stdio]` table with `actor` and `run`")?;
        Some(identity_of(identity)?)
    } else {
        None
    };
    let listener = tokio::net::TcpListener::bind(config.http.listen)
        .await
        .map_err(|e| format!("cannot listen on `{}`: {e}", config.http.listen))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;
    let public = config
        .http
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{address}"));
    let public = public.trim_end_matches('/').to_owned();
    let (app, server, backends) = build(&config, &public).await?;

    // In stdio mode stdout is the protocol: everything else goes to stderr.
    let say = |line: String| {
        if demo.is_some() && stdio.is_none() {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    };
    say(format!("approval pages: {public}/approvals"));
    say(match backends.as_ref() {
        Backends::Fake { site: Some(_), .. } => {
            "backend: fake, with the configured pages".to_owned()
        }
        Backends::Fake { site: None, .. } => "backend: fake, without pages".to_owned(),
        Backends::Chromium { guard: Some(_), .. } => {
            "backend: chromium, behind the egress guard".to_owned()
        }
        Backends::Chromium { guard: None, .. } => {
            "backend: chromium, WITHOUT the egress guard (`backend.guard = false`)".to_owned()
        }
    });
    if !config.tokens.is_empty() {
        say(format!(
            "MCP endpoint (Streamable HTTP): {public}{MCP_PATH}"
        ));
    }
    if let Some(demo) = &demo {
        for line in demo.instructions(&public) {
            say(line);
        }
    }
    let http = axum::serve(listener, app).into_future();
    match stdio {
        Some(identity) => {
            let http = tokio::spawn(http);
            let served =
                countersign_mcp::stdio::serve_stdio(server.clone().launched_as(identity)).await;
            // The client is gone; a call it started may still be inside the
            // backend, past its consume: let it reach its record.
            if tokio::time::timeout(CALLS_FINISH_WITHIN, server.calls_finished())
                .await
                .is_err()
            {
                eprintln!(
                    "countersign-mcp: a tool call was still running {} s after the stdio client left; exiting anyway",
                    CALLS_FINISH_WITHIN.as_secs()
                );
            }
            http.abort();
            served.map_err(|e| e.to_string())
        }
        None => {
            tokio::select! {
                served = http => served.map_err(|e| format!("the HTTP server stopped: {e}")),
                () = shutdown_signal() => Ok(()),
            }
        }
    }
}

/// Ctrl-C, or (on Unix) the `SIGTERM` a service manager or a test sends:
/// either way the process returns from `main`, so the browser it launched
/// is closed with it (a killed process would leave it running).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn identity_of(config: &IdentityConfig) -> Result<Identity, String> {
    let actor = ActorId::new(config.actor.as_str())
        .map_err(|e| format!("the actor `{}` is not usable: {e}", config.actor))?;
    let run = RunId::new(config.run.as_str())
        .map_err(|e| format!("the run `{}` is not usable: {e}", config.run))?;
    Ok(Identity::new(actor, run))
}

fn policy(config: &PolicyConfig) -> Result<Policy, String> {
    let mut builder = Policy::builder().allow_hosts(config.allow_hosts.iter().cloned());
    if let Some(schemes) = &config.schemes {
        builder = builder.allow_schemes(schemes.iter().cloned());
    }
    if let Some(methods) = &config.methods {
        builder = builder.allow_methods(methods.iter().cloned());
    }
    if let Some(ports) = &config.ports {
        builder = builder.allow_ports(ports.iter().copied());
    }
    for range in &config.special_use {
        builder = builder.allow_special_use(range.clone());
    }
    builder = match &config.addresses {
        Some(addresses) => builder.resolver(StaticResolver::answering_all(addresses.clone())),
        None => builder.resolver(SystemResolver::new()),
    };
    builder
        .build()
        .map_err(|e| format!("the `[policy]` is not usable: {e}"))
}

/// The grant/proposal store and the operation log the URL names.
async fn stores(url: &str) -> Result<(Arc<dyn ProposalStore>, Arc<dyn OperationLog>), String> {
    if url == "memory" {
        return Ok((
            Arc::new(InMemoryApprovalStore::new()),
            Arc::new(InMemoryOperationStore::new()),
        ));
    }
    if url.starts_with("redis://") {
        use countersign_store_redis::{
            OperationLogRetention, RedisApprovalStore, RedisOperationLog, RedisStoreOptions,
        };
        let store = RedisApprovalStore::connect(RedisStoreOptions::single(url))
            .await
            .map_err(|e| format!("cannot use the Redis store: {e}"))?;
        let log = RedisOperationLog::for_store(&store, OperationLogRetention::default())
            .await
            .map_err(|e| format!("cannot use the Redis operation log: {e}"))?;
        return Ok((Arc::new(store), Arc::new(log)));
    }
    use countersign_store_postgres::{PostgresApprovalStore, PostgresStoreOptions};
    let store = PostgresApprovalStore::connect(PostgresStoreOptions::new(url))
        .await
        .map_err(|e| format!("cannot use the PostgreSQL store: {e}"))?;
    let log = store.operation_log();
    Ok((Arc::new(store), Arc::new(log)))
}

/// The application: approval pages, sign-in, the MCP endpoint; and the
/// backends, kept by the caller for as long as it serves.
async fn build(
    config: &Config,
    public: &str,
) -> Result<(Router, McpServer, Arc<Backends>), String> {
    let policy = policy(&config.policy)?;
    let (store, operations) = stores(&config.store.url).await?;
    let backends = Arc::new(Backends::start(&config.backend, &policy).await?);
    let proposal_ttl = Duration::from_secs(config.http.proposal_ttl_secs);
    let factory_store = Arc::clone(&store);
    let factory_backends = Arc::clone(&backends);
    let server = McpServer::new(move |identity: &Identity| {
        let context = Context::builder()
            .actor_id(identity.actor.clone())
            .run_id(identity.run.clone())
            .backend(factory_backends.for_identity(&policy))
            .source_policy(policy.clone())
            .operation_store(Arc::clone(&operations))
            .proposal_store(Arc::clone(&factory_store))
            .proposal_ttl(proposal_ttl)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Toolset::new(context)
            .with_browse()
            .with_act()
            .with_propose())
    })
    .with_approval_pages(format!("{public}/approvals"));

    let mut tokens = StaticTokens::new();
    for TokenConfig { token, actor, run } in &config.tokens {
        let identity = identity_of(&IdentityConfig {
            actor: actor.clone(),
            run: run.clone(),
        })?;
        tokens = tokens.with(token.clone(), identity);
    }
    let approvers = Arc::new(config_approvers(&config.approvers)?);
    let mut pages = ApprovalPages::builder(Arc::clone(&store), Arc::clone(&approvers))
        .grant_ttl(Duration::from_secs(config.http.grant_ttl_secs));
    if let Some(key) = config.http.form_key_bytes()? {
        pages = pages.form_key(key);
    }
    let pages = pages
        .build()
        .map_err(|e| format!("the approval pages cannot start: {e}"))?;
    let options = match &config.http.allowed_hosts {
        Some(hosts) => HttpOptions::default().allowed_hosts(hosts.clone()),
        None => HttpOptions::default(),
    };
    let mut app = Router::new().nest("/approvals", pages.router()).route(
        "/sign-in/{token}",
        get(sign_in).with_state(Arc::clone(&approvers)),
    );
    if backends.fake_actions().is_some() {
        app = app.route(
            "/fake-backend/actions",
            get(fake_actions).with_state((approvers, Arc::clone(&backends))),
        );
    }
    let app = app.merge(countersign_mcp::http::router(
        server.clone(),
        tokens,
        options,
    ));
    Ok((app, server, backends))
}

/// The approvers of the configuration: a secret token each, sent as a
/// bearer token or in the cookie the sign-in link sets.
fn config_approvers(config: &[ApproverConfig]) -> Result<TokenApprovers, String> {
    config
        .iter()
        .try_fold(TokenApprovers::new(), |approvers, a| {
            ApproverId::new(a.name.as_str())
                .map(|id| approvers.with(a.token.clone(), id))
                .map_err(|e| format!("the approver `{}` is not usable: {e}", a.name))
        })
}

/// Where a sign-in link may send the approver afterwards.
#[derive(Debug, serde::Deserialize)]
struct SignInQuery {
    next: Option<String>,
}

/// A valid sign-in link sets the approver's session cookie, and sends the
/// approver on to `next` when it is a path of the approval pages
/// (`/approvals/…`); anywhere else is not a place the link can send them.
async fn sign_in(
    State(approvers): State<Arc<TokenApprovers>>,
    Path(given): Path<String>,
    Query(query): Query<SignInQuery>,
) -> Response {
    if approvers.approver_for(&given).is_none() {
        return (StatusCode::FORBIDDEN, "this sign-in link is not valid").into_response();
    }
    let next = query.next.filter(|next| approval_path(next));
    let mut response = match &next {
        Some(next) => Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header(header::LOCATION, next.as_str())
            .body(Body::empty())
            .unwrap_or_default(),
        None => Html(
            "<!doctype html><title>signed in</title><p>Signed in. Open the approval link the agent \
             shows you (…/approvals/proposals/…).</p>",
        )
        .into_response(),
    };
    if let Ok(cookie) = approvers.session_cookie(&given).parse() {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// Whether `next` is a path of the approval pages on this origin: no
/// scheme, no other host (`//…`), no way out of `/approvals/`.
fn approval_path(next: &str) -> bool {
    (next == "/approvals" || next.starts_with("/approvals/"))
        && !next.contains("..")
        && !next.contains('\\')
        && next
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/-_.?=&".contains(c))
}

/// How many actions the fake backend performed: for approvers (and tests).
async fn fake_actions(
    State((approvers, backends)): State<(Arc<TokenApprovers>, Arc<Backends>)>,
    request: axum::http::Request<Body>,
) -> Response {
    let (parts, _) = request.into_parts();
    if approvers.approver(&parts).await.is_none() {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let actions = backends.fake_actions().unwrap_or_default();
    let body = serde_json::json!({ "actions": actions }).to_string();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// What the demo prints.
struct Demo {
    site: String,
    client_token: String,
    approver_token: String,
}

impl Demo {
    fn instructions(&self, public: &str) -> Vec<String> {
        vec![
            format!("demo site: {}", self.site),
            format!("demo site clicks: {}clicks", self.site),
            format!("approver sign-in: {public}/sign-in/{}", self.approver_token),
            format!("MCP bearer token: {}", self.client_token),
            "connect (Claude Code):".to_owned(),
            format!(
                "  claude mcp add --transport http countersign {public}{MCP_PATH} --header \"Authorization: Bearer {}\"",
                self.client_token
            ),
            format!(
                "then ask the agent to open {} and press the `count` button; open the approval_url it shows after signing in above (or add `?next=/approvals/proposals/<id>` to the sign-in link)",
                self.site
            ),
            "press Ctrl-C to stop".to_owned(),
        ]
    }
}

/// A random secret (128 bits from the OS).
fn secret() -> Result<String, String> {
    ApprovalId::generate()
        .map(|id| id.as_str().trim_start_matches("apr_").to_owned())
        .map_err(|e| format!("no randomness: {e}"))
}

/// The demo site's page: a button that counts the clicks a person (or
/// the browser's input events) makes, in the page, its title and at the
/// site's `/clicks`. A script's synthetic click counts nothing.
const DEMO_PAGE: &str = r#"<!doctype html><title>countersign demo</title>
<h1>countersign demo</h1>
<p>Clicks so far: <output id="clicks">0</output></p>
<button id="count">count</button>
<script>
  let clicks = 0;
  document.getElementById("count").addEventListener("click", (event) => {
    if (!event.isTrusted) return;
    clicks += 1;
    document.getElementById("clicks").textContent = String(clicks);
    document.title = "countersign demo: " + clicks + (clicks === 1 ? " click" : " clicks");
    fetch("/clicks", { method: "POST" });
  });
</script>"#;

/// The demo's site and configuration. The site is on 127.0.0.2 where the
/// system has it (Linux), so it has an address of its own that the policy
/// can allow alone, else on 127.0.0.1 (macOS); its port is the only one
/// allowed either way, so the approval pages and the MCP endpoint are never
/// a target. The fake backend shows a model of the same page (title,
/// `button#count`), so the same calls work on either backend.
async fn demo_config(backend: DemoBackend) -> Result<(Config, Demo), String> {
    let listener = match tokio::net::TcpListener::bind(("127.0.0.2", 0)).await {
        Ok(listener) => listener,
        Err(_) => tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| format!("cannot serve the demo site on loopback: {e}"))?,
    };
    let site: SocketAddr = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;
    let (ip, port) = (site.ip(), site.port());
    let clicks = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&clicks);
    let page = Router::new()
        .route("/", get(|| async { Html(DEMO_PAGE) }))
        .route(
            "/clicks",
            get(move || {
                let clicks = Arc::clone(&clicks);
                async move {
                    let body = serde_json::json!({ "clicks": clicks.load(Ordering::SeqCst) });
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        body.to_string(),
                    )
                }
            })
            .post(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::NO_CONTENT }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, page).await });
    let (client_token, approver_token) = (secret()?, secret()?);
    let site_url = format!("http://{site}/");
    let backend_table = match backend {
        DemoBackend::Fake => format!(
            r#"
[[backend.pages]]
url = "{site_url}"
title = "countersign demo"
elements = [
  {{ role = "heading", name = "countersign demo", tag = "h1" }},
  {{ role = "button", name = "count", selector = "button#count", tag = "button" }},
]
"#
        ),
        // Chromium refuses its sandbox as root; the demo runs where the
        // examples run, so it drops the sandbox there as they do.
        DemoBackend::Chromium => format!(
            "\n[backend]\nkind = \"chromium\"\nsandbox = {}\n",
            !running_as_root()
        ),
    };
    let text = format!(
        r#"
[policy]
allow_hosts = ["{ip}"]
schemes = ["http"]
special_use = ["{ip}/32"]
ports = [{port}]

[http]
listen = "127.0.0.1:0"

[stdio]
actor = "demo-agent"
run = "demo-run"

[[tokens]]
token = "{client_token}"
actor = "demo-agent"
run = "demo-run"

[[approvers]]
name = "demo-approver"
token = "{approver_token}"
{backend_table}"#
    );
    let config = config::parse(&text)?;
    Ok((
        config,
        Demo {
            site: site_url,
            client_token,
            approver_token,
        },
    ))
}
