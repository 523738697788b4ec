//! The countersign Act tool: a model proposes a browser action; it happens
//! only if the host issued a single-use grant for exactly that action.
//!
//! The host hands an LLM API the tool's definition:
//!
//! ```
//! use countersign_act_tool::Act;
//!
//! let definition = Act::definition();
//! assert_eq!(definition.name, "browser_act");
//! let schema = &definition.parameters;
//! assert_eq!(schema["additionalProperties"], false);
//! assert_eq!(schema["required"], serde_json::json!(["url", "approval_id", "method", "selector"]));
//! // The model never names the actor or run: they are not arguments.
//! assert!(schema["properties"].get("actor_id").is_none());
//! ```
//!
//! The same definition comes shaped for OpenAI's and Anthropic's strict
//! tool modes too ([`ToolFormat`]); a call in any shape maps to the same
//! canonical action and digest:
//!
//! ```
//! use countersign_act_tool::{Act, ToolFormat};
//!
//! let openai = Act::definition_for(ToolFormat::OpenAiStrict).to_json();
//! assert_eq!(openai["function"]["strict"], true);
//! let anthropic = Act::definition_for(ToolFormat::AnthropicStrict).to_json();
//! assert_eq!(anthropic["input_schema"], openai["function"]["parameters"]);
//! ```
//!
//! A whole round, with the in-memory store (`countersign-store-memory`) and
//! the fake backend (`countersign-backend-fake`):
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use countersign_act_tool::{Context, Toolset, issue_grant};
//! use countersign_approval_core::{ActorId, RunId};
//! use countersign_canonical_policy::{Policy, StaticResolver};
//! use countersign_backend_fake::FakeBackend;
//! use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let backend = FakeBackend::new();
//! let operations = Arc::new(InMemoryOperationStore::new());
//! let context = Context::builder()
//!     .actor_id(ActorId::new("demo-actor")?)
//!     .run_id(RunId::new("demo-run")?)
//!     .backend(backend.clone())
//!     .source_policy(
//!         Policy::builder()
//!             .allow_host("docs.example.com")
//!             .resolver(StaticResolver::answering_all(["93.184.216.34".parse()?]))
//!             .build()?,
//!     )
//!     .operation_store(operations.clone())
//!     .approval_store(InMemoryApprovalStore::new())
//!     .build()?;
//!
//! // The host approves one click, then enables Act for the model.
//! let action = json!({"method": "click", "selector": "a#docs"});
//! let grant = issue_grant(&context, "https://docs.example.com/", &action, Duration::from_secs(60)).await?;
//! let mut tools = Toolset::new(context);
//! assert!(tools.act().is_none());
//! let act = tools.enable_act();
//!
//! let call = json!({
//!     "url": "https://docs.example.com/", "approval_id": grant.id.as_str(),
//!     "method": "click", "selector": "a#docs",
//! });
//! let first = act.execute_json(&call).await;
//! assert_eq!(first["status"], "ok");
//! assert_eq!(first["locator"]["approval_id"], grant.id.as_str());
//! let again = act.execute_json(&call).await;
//! assert_eq!(again["error"]["code"], "APPROVAL_STALE");
//!
//! assert_eq!(backend.len(), 1);
//! assert_eq!(operations.len()?, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Proposals
//!
//! With [`Toolset::enable_propose`] the model may also propose an action
//! (`browser_propose`); the host decides once, and the model learns the
//! decision (`browser_proposal_status`) and the approval id to act with:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use countersign_act_tool::{Context, Toolset};
//! use countersign_approval_core::{ActorId, ApproverId, ProposalId, ProposalStore, RunId, SystemClock, Clock};
//! use countersign_canonical_policy::{Policy, StaticResolver};
//! use countersign_backend_fake::FakeBackend;
//! use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = Arc::new(InMemoryApprovalStore::new());
//! let context = Context::builder()
//!     .actor_id(ActorId::new("demo-actor")?)
//!     .run_id(RunId::new("demo-run")?)
//!     .backend(FakeBackend::new())
//!     .source_policy(
//!         Policy::builder()
//!             .allow_host("docs.example.com")
//!             .resolver(StaticResolver::answering_all(["93.184.216.34".parse()?]))
//!             .build()?,
//!     )
//!     .operation_store(InMemoryOperationStore::new())
//!     .proposal_store(store.clone())
//!     .build()?;
//! let tools = Toolset::new(context).with_act().with_propose();
//!
//! let action = json!({"url": "https://docs.example.com/", "method": "click", "selector": "a#docs"});
//! let proposed = tools.call("browser_propose", &action).await?;
//! assert_eq!(proposed["status"], "pending");
//! let id = ProposalId::parse(proposed["proposal_id"].as_str().unwrap()).unwrap();
//!
//! // A person approves exactly that proposal (the approval page does this).
//! let stored = store.get_proposal(&id).await?.unwrap();
//! let now = SystemClock.now();
//! let grant = stored.proposal.grant(Duration::from_secs(60), now, Some(ApproverId::new("carol")?))?;
//! store.approve_proposal(&id, grant, now).await?;
//!
//! let status = tools.call("browser_proposal_status", &json!({"proposal_id": id.as_str()})).await?;
//! assert_eq!(status["status"], "approved");
//! let mut call = action.clone();
//! call["approval_id"] = status["approval_id"].clone();
//! assert_eq!(tools.call("browser_act", &call).await?["status"], "ok");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # The order of checks
//!
//! See [`Act`]. Every refusal performs nothing, and every call, refused or
//! not, writes one [`OperationRecord`](countersign_approval_core::OperationRecord).
//! If writing that record fails, the result still reports what happened
//! (an action already performed cannot be taken back) and a `tracing`
//! error event is emitted.
//!
//! # Logging
//!
//! Each call emits one `tracing` event with the operation id, actor, run,
//! approval id (when it has the shape of an id), outcome and reason: `info`
//! for `ok`, `warn` for refusals, `error` for `STORE_UNAVAILABLE` and
//! `BACKEND_FAILED`. Argument values are never logged or put in a message:
//! they may be secrets typed into forms.

mod act;
mod browse;
mod call;
mod context;
mod definition;
mod grant;
mod navigation;
mod operation_record;
mod propose;
mod refusal;
mod result;
mod standing;
mod toolset;

pub use act::Act;
pub use browse::{Browse, BrowseResult, Observed};
pub use call::{ARGUMENT_NAMES, ActCall, MAX_CALL_NESTING, PROPOSAL_ARGUMENT_NAMES, REF_ARGUMENT};
pub use context::{
    Context, ContextBuilder, ContextError, DEFAULT_ABANDON_TIMEOUT, DEFAULT_PROPOSAL_TTL,
    RetryPolicy,
};
pub use countersign_approval_core::DecidedBy;
pub use definition::{
    NAVIGATE_TOOL_NAME, OBSERVE_TOOL_NAME, PROPOSAL_STATUS_TOOL_NAME, PROPOSE_TOOL_NAME, TOOL_NAME,
    ToolDefinition, ToolFormat,
};
pub use grant::{GrantError, GrantOptions, issue_grant, issue_grant_with, issue_page_grant};
pub use navigation::{Landed, NAVIGATE_METHOD, NAVIGATE_SELECTOR};
pub use propose::{ProposalView, Propose, ProposeResult};
pub use result::{ActError, ActResult, Performed};
pub use toolset::{Toolset, UnknownTool};

/// The grant model and traits this crate builds on.
pub use countersign_approval_core as approval;
/// The destination and action policy this crate checks with.
pub use countersign_canonical_policy as policy;
/// The rules `browser_propose` decides by ([`ContextBuilder::rules`]).
pub use countersign_rules as rules;
