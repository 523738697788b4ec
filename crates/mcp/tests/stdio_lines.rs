//! The stdio transport at the byte level: what a client writes, line by
//! line, and what comes back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use countersign_act_tool::{Context, ToolFormat, Toolset};
use countersign_approval_core::{ActorId, RunId};
use countersign_backend_fake::FakeBackend;
use countersign_canonical_policy::{Policy, StaticResolver};
use countersign_mcp::wire::MAX_MESSAGE_BYTES;
use countersign_mcp::{Identity, McpServer};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn server(backend: FakeBackend) -> McpServer {
    let store = Arc::new(InMemoryApprovalStore::new());
    McpServer::new(move |identity: &Identity| {
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
            .backend(backend.clone())
            .source_policy(policy)
            .operation_store(InMemoryOperationStore::new())
            .proposal_store(store.clone())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Toolset::new(context).with_act().with_propose())
    })
}

fn identity() -> Identity {
    Identity::new(ActorId::new("agent").unwrap(), RunId::new("run").unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_are_checked_before_the_sdk_reads_them() {
    let backend = FakeBackend::new();
    let server = server(backend.clone());
    let expected = server.toolset(&identity()).unwrap();
    let (client, served) = tokio::io::duplex(1 << 16);
    let (server_in, server_out) = tokio::io::split(served);
    let task = tokio::spawn(countersign_mcp::stdio::serve_lines(
        server.launched_as(identity()),
        server_in,
        server_out,
    ));
    let (from_server, mut to_server) = tokio::io::split(client);
    let mut from_server = BufReader::new(from_server).lines();
    let mut answer = async |line: &[u8]| -> Value {
        to_server.write_all(line).await.unwrap();
        to_server.write_all(b"\n").await.unwrap();
        let text = from_server.next_line().await.unwrap().unwrap();
        serde_json::from_str(&text).unwrap()
    };

    let init = answer(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");

    // tools/list (after the notification, which has no answer) is the
    // toolset's definitions, byte for byte.
    let list = answer(
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n\
          {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}",
    )
    .await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let definitions = expected.definitions_for(ToolFormat::JsonSchema);
    assert_eq!(tools.len(), definitions.len());
    for (tool, definition) in tools.iter().zip(&definitions) {
        assert_eq!(tool["name"], definition.name.as_str());
        assert_eq!(tool["description"], definition.description.as_str());
        assert_eq!(
            serde_json::to_string(&tool["inputSchema"]).unwrap(),
            serde_json::to_string(&definition.parameters).unwrap()
        );
    }

    // A repeated argument never reaches the toolset.
    let repeated = answer(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"browser_act","arguments":{"url":"https://docs.example.com/","url":"https://evil.example/","approval_id":"apr_1","method":"click","selector":"a"}}}"#).await;
    assert_eq!(repeated["id"], 3);
    assert_eq!(repeated["error"]["code"], -32600);
    assert_eq!(
        repeated["error"]["message"],
        "the key `url` appears twice in one object"
    );

    // An oversized line is answered with its id, without being read whole.
    let mut huge = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"browser_propose","arguments":{"selector":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', MAX_MESSAGE_BYTES + 10));
    huge.extend(br#""}}}"#);
    let too_large = answer(&huge).await;
    assert_eq!(too_large["id"], 4);
    assert_eq!(too_large["error"]["code"], -32600);

    // Not JSON: a parse error, id null.
    let garbage = answer(b"{not json").await;
    assert_eq!(garbage["error"]["code"], -32700);
    assert_eq!(garbage["id"], Value::Null);

    // Unknown tool: a JSON-RPC error. A refusal: a tool result.
    let unknown = answer(br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"browser_teleport","arguments":{}}}"#).await;
    assert_eq!(unknown["error"]["code"], -32602);
    let refused = answer(br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"browser_act","arguments":{"url":"https://docs.example.com/","method":"click","selector":"a","approval_id":"apr_00000000000000000000000000000000","actor_id":"x"}}}"#).await;
    assert_eq!(refused["result"]["isError"], true);
    assert_eq!(
        refused["result"]["structuredContent"]["error"]["code"],
        "NOT_AUTHORIZED"
    );
    let text: Value =
        serde_json::from_str(refused["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, refused["result"]["structuredContent"]);

    // The session goes on after all of it.
    let ping = answer(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).await;
    assert_eq!(ping, json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
    assert_eq!(backend.len(), 0);

    task.abort();
}
