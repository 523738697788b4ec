//! The application a configuration describes: the policy, the stores,
//! the backends, the MCP server and the routes beside it (the approval
//! pages, the approvers' sign-in, the fake backend's count).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use countersign_act_tool::{Context, Toolset};
use countersign_approval_core::{ActorId, OperationLog, ProposalStore, RunId, TimedStore};
use countersign_approval_web::{ApprovalPages, Approvers, TokenApprovers};
use countersign_canonical_policy::{Policy, StaticResolver, SystemResolver};
use countersign_mcp::http::HttpOptions;
use countersign_mcp::playwright::compat::CompatOptions;
use countersign_mcp::{Identity, McpServer, StaticTokens};
use countersign_notify::{NotifyingStore, WorkerHandle};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};

use crate::approvers::{config_approvers, sign_in};
use crate::backend::Backends;
use crate::config::{Config, IdentityConfig, PolicyConfig, TokenConfig};

pub(crate) fn identity_of(config: &IdentityConfig) -> Result<Identity, String> {
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

/// The grant/proposal store the URL names, with its notification outbox
/// on (and handed back for the worker to drain) when `outbox`, and the
/// operation log.
async fn stores(
    url: &str,
    outbox: bool,
) -> Result<
    (
        Arc<dyn ProposalStore>,
        Option<Arc<dyn NotifyingStore>>,
        Arc<dyn OperationLog>,
    ),
    String,
> {
    if url == "memory" {
        let store = if outbox {
            InMemoryApprovalStore::new().with_notification_outbox()
        } else {
            InMemoryApprovalStore::new()
        };
        let (store, notifying) = timed(store, "memory", outbox);
        return Ok((store, notifying, Arc::new(InMemoryOperationStore::new())));
    }
    if url.starts_with("redis://") {
        use countersign_store_redis::{
            OperationLogRetention, RedisApprovalStore, RedisOperationLog, RedisStoreOptions,
        };
        let options = RedisStoreOptions::single(url).notification_outbox(outbox);
        let store = RedisApprovalStore::connect(options)
            .await
            .map_err(|e| format!("cannot use the Redis store: {e}"))?;
        let log = RedisOperationLog::for_store(&store, OperationLogRetention::default())
            .await
            .map_err(|e| format!("cannot use the Redis operation log: {e}"))?;
        let (store, notifying) = timed(store, "redis", outbox);
        return Ok((store, notifying, Arc::new(log)));
    }
    use countersign_store_postgres::{PostgresApprovalStore, PostgresStoreOptions};
    let options = PostgresStoreOptions::new(url).notification_outbox(outbox);
    let store = PostgresApprovalStore::connect(options)
        .await
        .map_err(|e| format!("cannot use the PostgreSQL store: {e}"))?;
    let log = store.operation_log();
    let (store, notifying) = timed(store, "postgres", outbox);
    Ok((store, notifying, Arc::new(log)))
}

/// `store`, each call timed as `name`'s (`/metrics` shows them when it is
/// configured), and the same store as the notification worker drains it
/// when `outbox`.
fn timed<S: NotifyingStore + 'static>(
    store: S,
    name: &'static str,
    outbox: bool,
) -> (Arc<dyn ProposalStore>, Option<Arc<dyn NotifyingStore>>) {
    let store = Arc::new(TimedStore::new(store, name));
    let notifying = outbox.then(|| Arc::clone(&store) as Arc<dyn NotifyingStore>);
    (store, notifying)
}

/// The application: approval pages, sign-in, the MCP endpoint; and the
/// backends and the notification worker, kept by the caller for as long
/// as it serves.
pub(crate) async fn build(
    config: &Config,
    public: &str,
) -> Result<(Router, McpServer, Arc<Backends>, Option<WorkerHandle>), String> {
    let policy = policy(&config.policy)?;
    // Secrets are read before anything starts: a bad one stops start-up.
    let notifiers = crate::notify::notifiers(&config.notify)?;
    let (store, notifying, operations) = stores(&config.store.url, !notifiers.is_empty()).await?;
    let notifications = notifying
        .map(|outbox| crate::notify::start(outbox, notifiers, &config.notifications, public));
    let backends = Arc::new(Backends::start(&config.backend, &policy).await?);
    let proposal_ttl = Duration::from_secs(config.http.proposal_ttl_secs);
    let rules = config.rule_set()?.map(Arc::new);
    let factory_store = Arc::clone(&store);
    let factory_backends = Arc::clone(&backends);
    let server = McpServer::new(move |identity: &Identity| {
        let mut context = Context::builder()
            .actor_id(identity.actor.clone())
            .run_id(identity.run.clone())
            .backend(factory_backends.for_identity(&policy))
            .source_policy(policy.clone())
            .operation_store(Arc::clone(&operations))
            .proposal_store(Arc::clone(&factory_store))
            .proposal_ttl(proposal_ttl);
        if let Some(rules) = &rules {
            context = context.rules(Arc::clone(rules));
        }
        let context = context.build().map_err(|e| e.to_string())?;
        Ok(Toolset::new(context)
            .with_browse()
            .with_act()
            .with_propose())
    })
    .with_approval_pages(format!("{public}/approvals"));
    let server = if config.compat.playwright {
        let mut options = CompatOptions::default();
        if let Some(secs) = config.compat.approval_wait_secs {
            options = options.approval_wait(Duration::from_secs(secs));
        }
        server.with_playwright_compat(options)
    } else {
        server
    };

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
    Ok((app, server, backends, notifications))
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
