//! The MCP server handler: the toolset's definitions as the tool list,
//! `tools/call` through `Toolset::call`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use countersign_act_tool::{
    NAVIGATE_TOOL_NAME, OBSERVE_TOOL_NAME, PROPOSAL_STATUS_TOOL_NAME, PROPOSE_TOOL_NAME, TOOL_NAME,
    ToolFormat, Toolset,
};
use countersign_approval_core::ProposalId;
use countersign_approval_web::ApprovalPages;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::approval_link::{is_stateless, link_input_required, offer_link, pending_link};
use crate::identity::Identity;
use crate::playwright::compat::{Compat, CompatOptions, Round};

/// Builds the toolset of one identity: the host's Context (stores,
/// backend, policy, clock) for that actor and run, with the tools it
/// offers enabled.
pub type ToolsetFactory = dyn Fn(&Identity) -> Result<Toolset, String> + Send + Sync;

/// What the server tells a client about itself at `initialize`.
const INSTRUCTIONS: &str = "Browser actions here need a person's approval. Call browser_propose with \
the action; show the approval_url of its result to the user, who approves or denies it on the host's \
approval page (your own confirmation approves nothing). Poll browser_proposal_status until it is \
approved, then call browser_act once with the approval_id it gives and exactly the proposed url and action.";

/// The MCP server: one toolset per (actor, run), built on first use by
/// the host's [`ToolsetFactory`] and kept for the server's lifetime, so
/// every session of one identity meets the same Context.
///
/// A clone shares the toolsets. The identity of a call is the one the
/// server was launched with ([`McpServer::launched_as`], for stdio) or the
/// one the HTTP layer authenticated ([`crate::http`]); tool arguments
/// never name it.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
    launched_as: Option<Identity>,
}

struct Inner {
    factory: Box<ToolsetFactory>,
    toolsets: Mutex<HashMap<Identity, Arc<Toolset>>>,
    approval_base: Option<String>,
    /// Playwright MCP's tools instead of countersign's, when set.
    compat: Option<Compat>,
    /// How many tool calls are running, for [`McpServer::calls_finished`].
    in_flight: tokio::sync::watch::Sender<usize>,
}

/// One running tool call, counted while it lives.
struct RunningCall<'a>(&'a tokio::sync::watch::Sender<usize>);

impl<'a> RunningCall<'a> {
    fn begin(counter: &'a tokio::sync::watch::Sender<usize>) -> Self {
        counter.send_modify(|n| *n += 1);
        RunningCall(counter)
    }
}

impl Drop for RunningCall<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("launched_as", &self.launched_as)
            .field("approval_base", &self.inner.approval_base)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server whose toolsets `factory` builds.
    pub fn new(
        factory: impl Fn(&Identity) -> Result<Toolset, String> + Send + Sync + 'static,
    ) -> Self {
        McpServer {
            inner: Arc::new(Inner {
                factory: Box::new(factory),
                toolsets: Mutex::new(HashMap::new()),
                approval_base: None,
                compat: None,
                in_flight: tokio::sync::watch::Sender::new(0),
            }),
            launched_as: None,
        }
    }

    /// Resolves once no tool call is running on any session of this
    /// server. A session that ends (its client closed stdin, or went away
    /// over HTTP) does not cancel a call it started: an act already inside
    /// the backend finishes and is recorded. A host that exits when the
    /// session ends awaits this first (with a bound of its choosing), so
    /// that no act is cut off between its consume and its record.
    pub async fn calls_finished(&self) {
        let mut running = self.inner.in_flight.subscribe();
        // Only an error if the sender is gone, which `self` prevents.
        let _ = running.wait_for(|n| *n == 0).await;
    }

    /// Adds to every `browser_propose` and `browser_proposal_status`
    /// result an `approval_url`: `base` (where the host mounted the
    /// approval pages, e.g. `http://127.0.0.1:8080/approvals`) followed by
    /// the proposal's page path. Call it before cloning.
    pub fn with_approval_pages(mut self, base: impl Into<String>) -> Self {
        let base = base.into().trim_end_matches('/').to_owned();
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.approval_base = Some(base);
        } else {
            // Shared already: a new Inner would split the toolsets, so the
            // link is set only on an unshared server (documented above).
            tracing::warn!("approval pages set on a shared MCP server; ignored");
        }
        self
    }

    /// The same server offering Playwright MCP's tools instead of
    /// countersign's (see [`crate::playwright`]): the same names, arguments
    /// and answers, every state-changing call decided in place. Call it
    /// before cloning, as [`McpServer::with_approval_pages`].
    pub fn with_playwright_compat(mut self, options: CompatOptions) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.compat = Some(Compat::new(options));
        } else {
            tracing::warn!("the Playwright-compatible mode set on a shared MCP server; ignored");
        }
        self
    }

    /// Whether the server offers Playwright MCP's tools.
    pub fn is_playwright_compat(&self) -> bool {
        self.inner.compat.is_some()
    }

    /// The same server, every call acting as `identity`: the launch
    /// configuration's identity for stdio.
    pub fn launched_as(&self, identity: Identity) -> Self {
        McpServer {
            inner: Arc::clone(&self.inner),
            launched_as: Some(identity),
        }
    }

    /// The toolset of `identity`, built on first use.
    pub fn toolset(&self, identity: &Identity) -> Result<Arc<Toolset>, String> {
        let mut toolsets = self
            .inner
            .toolsets
            .lock()
            .map_err(|_| "the toolset table is unusable after a panic".to_owned())?;
        if let Some(toolset) = toolsets.get(identity) {
            return Ok(Arc::clone(toolset));
        }
        let toolset = Arc::new((self.inner.factory)(identity)?);
        toolsets.insert(identity.clone(), Arc::clone(&toolset));
        Ok(toolset)
    }

    /// The MCP tool list of `toolset`: its JSON Schema definitions, in its
    /// order, with the hints of [`annotations`].
    pub fn tools(toolset: &Toolset) -> Vec<Tool> {
        toolset
            .definitions_for(ToolFormat::JsonSchema)
            .into_iter()
            .filter_map(|definition| {
                let mut tool = json!({
                    "name": definition.name,
                    "description": definition.description,
                    "inputSchema": definition.parameters,
                });
                if let (Some(hints), Some(object)) =
                    (annotations(&definition.name), tool.as_object_mut())
                {
                    object.insert("annotations".to_owned(), hints);
                }
                // A definition whose parameters are not an object cannot be
                // an MCP tool; the toolset never writes one.
                serde_json::from_value(tool).ok()
            })
            .collect()
    }

    /// The identity of the request in `context`.
    fn identity(&self, context: &RequestContext<RoleServer>) -> Result<Identity, ErrorData> {
        if let Some(identity) = &self.launched_as {
            return Ok(identity.clone());
        }
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Identity>())
            .cloned()
            // The HTTP layer answers 401 before this: reaching here means
            // the server was mounted without it.
            .ok_or_else(|| ErrorData::invalid_request("the request is not authenticated", None))
    }

    fn caller_toolset(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<Toolset>, ErrorData> {
        let identity = self.identity(context)?;
        self.toolset(&identity).map_err(|reason| {
            tracing::error!(%reason, "no toolset for the caller");
            ErrorData::internal_error("the host could not prepare the tools", None)
        })
    }

    /// `result` with the approval page's link of its proposal, if any.
    fn with_link(&self, mut result: Value) -> Value {
        let Some(base) = &self.inner.approval_base else {
            return result;
        };
        let id = result
            .get("proposal_id")
            .and_then(Value::as_str)
            .and_then(ProposalId::parse);
        if let (Some(id), Some(object)) = (id, result.as_object_mut()) {
            let url = format!("{base}{}", ApprovalPages::proposal_path(&id));
            object.insert("approval_url".to_owned(), Value::String(url));
        }
        result
    }
}

/// The hints an MCP client may show for a tool, keyed by name so that
/// tools the toolset gains later get theirs once present. Hints only: the
/// toolset decides.
pub fn annotations(name: &str) -> Option<Value> {
    match name {
        TOOL_NAME => Some(json!({
            "readOnlyHint": false,
            "destructiveHint": true,
            "idempotentHint": false,
            "openWorldHint": true,
        })),
        PROPOSE_TOOL_NAME => Some(json!({
            "readOnlyHint": false,
            "destructiveHint": false,
            "idempotentHint": false,
            "openWorldHint": false,
        })),
        PROPOSAL_STATUS_TOOL_NAME | OBSERVE_TOOL_NAME => Some(json!({ "readOnlyHint": true })),
        NAVIGATE_TOOL_NAME => Some(json!({ "readOnlyHint": false, "openWorldHint": true })),
        _ => None,
    }
}

/// What the `requestState` of a `browser_propose` that asked for the
/// approval link's elicitation (protocol 2026-07-28) starts with; the
/// proposal's id follows. The client's retry is answered with that
/// proposal, as `browser_proposal_status` answers for the caller, so a
/// retry never makes a second proposal, and a state naming another
/// caller's proposal finds nothing.
const PROPOSAL_STATE_PREFIX: &str = "countersign-proposal:";

/// The proposal a `requestState` of [`link_input_required`] names; any
/// other state is not one this server gave.
fn proposal_of_state(state: &str) -> Result<&str, ErrorData> {
    state
        .strip_prefix(PROPOSAL_STATE_PREFIX)
        .filter(|id| ProposalId::parse(id).is_some())
        .ok_or_else(|| {
            ErrorData::invalid_params("the request state is not one this server gave", None)
        })
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "countersign-mcp",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let toolset = self.caller_toolset(&context)?;
        if self.inner.compat.is_some() {
            let tools = crate::playwright::offered_tools()
                .iter()
                .filter_map(|tool| serde_json::from_value(tool.clone()).ok())
                .collect();
            return Ok(ListToolsResult::with_all_items(tools));
        }
        Ok(ListToolsResult::with_all_items(Self::tools(&toolset)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let _running = RunningCall::begin(&self.inner.in_flight);
        let toolset = self.caller_toolset(&context)?;
        if let Some(compat) = &self.inner.compat {
            let identity = self.identity(&context)?;
            let arguments = request.arguments.unwrap_or_default();
            let round = Round {
                approval_base: self.inner.approval_base.as_deref(),
                request_state: request.request_state.as_deref(),
            };
            return Ok(compat
                .call(
                    &toolset,
                    &identity,
                    &request.name,
                    arguments,
                    &context,
                    round,
                )
                .await);
        }
        // `context.ct` (the client's cancellation) is not watched on
        // purpose: once an act has consumed its grant it must reach the
        // backend's answer and its record, so a call runs to its end even
        // when its client cancels or goes away (tests/disconnect.rs fails
        // if it stops early).
        let stateless = is_stateless(&context);
        let retried = if stateless && request.name == PROPOSE_TOOL_NAME {
            request
                .request_state
                .as_deref()
                .map(proposal_of_state)
                .transpose()?
        } else {
            None
        };
        let result = match retried {
            // The client's retry after the approval link's elicitation:
            // the first round made the proposal; what the client answered
            // decides nothing.
            Some(id) => {
                tracing::debug!(
                    responses = ?request.input_responses,
                    "the client answered the approval link's elicitation"
                );
                toolset
                    .call(PROPOSAL_STATUS_TOOL_NAME, &json!({ "proposal_id": id }))
                    .await
            }
            None => {
                let arguments = Value::Object(request.arguments.unwrap_or_default());
                toolset.call(&request.name, &arguments).await
            }
        }
        .map_err(|unknown| {
            ErrorData::invalid_params(format!("unknown tool `{}`", unknown.name()), None)
        })?;
        let result =
            if request.name == PROPOSE_TOOL_NAME || request.name == PROPOSAL_STATUS_TOOL_NAME {
                self.with_link(result)
            } else {
                result
            };
        if request.name == PROPOSE_TOOL_NAME && retried.is_none() {
            if !stateless {
                offer_link(&context, &result);
            } else if let Some(input) = pending_link(&result).and_then(|(id, _)| {
                link_input_required(&context, &result, format!("{PROPOSAL_STATE_PREFIX}{id}"))
            }) {
                return Ok(CallToolResponse::InputRequired(input));
            }
        }
        // A refusal is the tool's answer, not a protocol failure: the model
        // reads its code and message.
        let refused = result.get("status").and_then(Value::as_str) == Some("error");
        Ok(if refused {
            CallToolResult::structured_error(result)
        } else {
            CallToolResult::structured(result)
        }
        .into())
    }
}
