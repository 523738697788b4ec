//! The Streamable HTTP Router as a host mounts it, driven request by
//! request: authentication, the checks before the SDK, protocol 2026-07-28.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use countersign_act_tool::{Context, ToolFormat, Toolset};
use countersign_approval_core::{ActorId, RunId};
use countersign_backend_fake::FakeBackend;
use countersign_canonical_policy::{Policy, StaticResolver};
use countersign_mcp::http::{HttpOptions, MCP_PATH, router};
use countersign_mcp::wire::MAX_MESSAGE_BYTES;
use countersign_mcp::{Identity, McpServer, StaticTokens};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "a-client-token-of-some-length";

fn identity() -> Identity {
    Identity::new(ActorId::new("agent").unwrap(), RunId::new("run").unwrap())
}

fn app() -> (Router, McpServer) {
    let store = Arc::new(InMemoryApprovalStore::new());
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
            .backend(FakeBackend::new())
            .source_policy(policy)
            .operation_store(InMemoryOperationStore::new())
            .proposal_store(store.clone())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Toolset::new(context).with_act().with_propose())
    })
    .with_approval_pages("http://127.0.0.1:8080/approvals");
    let tokens = StaticTokens::new().with(TOKEN, identity());
    (
        router(server.clone(), tokens, HttpOptions::default()),
        server,
    )
}

fn request(method: &str, params: Value, token: Option<&str>) -> Request<Body> {
    support::stateless_request(method, params, token)
}

async fn send(app: &Router, request: Request<Body>) -> (StatusCode, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn message(body: &str) -> Value {
    let data = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|d| d.starts_with('{'))
        .unwrap_or(body);
    serde_json::from_str(data).unwrap()
}

#[tokio::test]
async fn without_the_hosts_token_nothing_is_said() {
    let (app, _) = app();
    for token in [None, Some("wrong-token-of-some-length"), Some("")] {
        let (status, body) = send(&app, request("tools/list", json!({}), token)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body, "");
    }
    let get = Request::get(MCP_PATH)
        .header(header::HOST, "127.0.0.1")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, get).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn protocol_2026_07_28_lists_the_toolsets_definitions_and_proposes() {
    let (app, server) = app();
    let (status, body) = send(&app, request("tools/list", json!({}), Some(TOKEN))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed = message(&body);
    let tools = listed["result"]["tools"].as_array().unwrap();
    let toolset = server.toolset(&identity()).unwrap();
    let definitions = toolset.definitions_for(ToolFormat::JsonSchema);
    assert_eq!(tools.len(), definitions.len());
    for (tool, definition) in tools.iter().zip(&definitions) {
        assert_eq!(tool["name"], definition.name.as_str());
        assert_eq!(
            serde_json::to_string(&tool["inputSchema"]).unwrap(),
            serde_json::to_string(&definition.parameters).unwrap()
        );
    }

    let propose = json!({"name": "browser_propose", "arguments": {
        "url": "https://docs.example.com/", "method": "click", "selector": "a#docs"}});
    let (_, body) = send(&app, request("tools/call", propose, Some(TOKEN))).await;
    let result = &message(&body)["result"]["structuredContent"];
    assert_eq!(result["status"], "pending");
    let id = result["proposal_id"].as_str().unwrap();
    assert_eq!(
        result["approval_url"],
        format!("http://127.0.0.1:8080/approvals/proposals/{id}")
    );
}

#[tokio::test]
async fn repeated_keys_and_huge_bodies_never_reach_the_sdk() {
    let (app, _) = app();
    let repeated = Request::post(MCP_PATH)
        .header(header::HOST, "127.0.0.1")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::from(
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"browser_act","name":"browser_propose"}}"#,
        ))
        .unwrap();
    let (status, body) = send(&app, repeated).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32600,
            "message": "the key `name` appears twice in one object"}})
    );
    let huge = Request::post(MCP_PATH)
        .header(header::HOST, "127.0.0.1")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::from(vec![b' '; MAX_MESSAGE_BYTES + 1]))
        .unwrap();
    assert_eq!(send(&app, huge).await.0, StatusCode::PAYLOAD_TOO_LARGE);
}
