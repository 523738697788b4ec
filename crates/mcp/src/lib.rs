//! countersign's tools for any MCP client: an MCP server over stdio and
//! Streamable HTTP, built on the official Rust MCP SDK (`rmcp`).
//!
//! The tool list is the host's [`Toolset`](countersign_act_tool::Toolset)'s own definitions
//! ([`ToolFormat::JsonSchema`](countersign_act_tool::ToolFormat)): one
//! schema, no second one derived elsewhere. Every `tools/call` goes to
//! [`Toolset::call`](countersign_act_tool::Toolset::call), so every decision is made by the same code a Rust
//! host runs; a refusal is a tool result (`isError: true` with the
//! toolset's JSON), an unknown tool a JSON-RPC error.
//!
//! Who calls is never a tool argument: over stdio it is the
//! [`Identity`] the server was launched with, over HTTP the one the
//! host's [`Tokens`] give for the request's bearer token. Each identity
//! has one toolset (one Context).
//!
//! ```
//! use std::sync::Arc;
//! use countersign_act_tool::{Context, Toolset};
//! use countersign_approval_core::{ActorId, RunId};
//! use countersign_backend_fake::FakeBackend;
//! use countersign_canonical_policy::{Policy, StaticResolver};
//! use countersign_mcp::{Identity, McpServer, StaticTokens, http};
//! use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
//!
//! let store = Arc::new(InMemoryApprovalStore::new());
//! let server = McpServer::new(move |identity: &Identity| {
//!     let policy = Policy::builder()
//!         .allow_host("docs.example.com")
//!         .resolver(StaticResolver::answering_all(["93.184.216.34".parse().map_err(|_| "address")?]))
//!         .build()
//!         .map_err(|e| e.to_string())?;
//!     let context = Context::builder()
//!         .actor_id(identity.actor.clone())
//!         .run_id(identity.run.clone())
//!         .backend(FakeBackend::new())
//!         .source_policy(policy)
//!         .operation_store(InMemoryOperationStore::new())
//!         .proposal_store(store.clone())
//!         .build()
//!         .map_err(|e| e.to_string())?;
//!     Ok(Toolset::new(context).with_act().with_propose())
//! })
//! .with_approval_pages("http://127.0.0.1:8080/approvals");
//!
//! let me = Identity::new(ActorId::new("agent")?, RunId::new("run-1")?);
//! let toolset = server.toolset(&me)?;
//! let names: Vec<String> = McpServer::tools(&toolset)
//!     .iter()
//!     .map(|tool| tool.name.to_string())
//!     .collect();
//! assert_eq!(names, ["browser_act", "browser_propose", "browser_proposal_status"]);
//!
//! // Streamable HTTP at `/mcp`, beside the approval pages in one axum app:
//! let tokens = StaticTokens::new().with("secret-token", me);
//! let app: axum::Router = http::router(server.clone(), tokens, http::HttpOptions::default());
//! // stdio instead: countersign_mcp::stdio::serve_stdio(server.launched_as(identity)).await
//! # let _ = app;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod approval_link;
pub mod http;
mod identity;
pub mod playwright;
mod server;
pub mod stdio;
pub mod wire;

pub use identity::{Identity, StaticTokens, Tokens};
pub use server::{McpServer, ToolsetFactory, annotations};

/// The attribute the host's [`Tokens`] implementation is written with.
pub use async_trait::async_trait;
