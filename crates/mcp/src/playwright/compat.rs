//! The Playwright-compatible mode: Playwright MCP's tools, each call
//! answered as Playwright answers it, every state-changing call decided in
//! place by the policy, the rules, a standing approval or a person.
//!
//! A state-changing call becomes one proposal of one element-bound action
//! on the page the tab shows. Then, in the same call:
//!
//! 1. a refusal (the policy, a `deny` rule) is an error, nothing performed;
//! 2. an `auto` decision (a rule, a standing approval) is performed at
//!    once, and the approval id never reaches the model;
//! 3. a proposal a person must decide waits up to the configured time,
//!    telling a client that gave a progress token where the approval page
//!    is; approved in time it is performed, denied or expired it is an
//!    error saying so, still pending it is an error that says nothing was
//!    performed and to call again with the same arguments;
//! 4. a retry with the same arguments on the same page finds the proposal
//!    already made, so a person is never asked twice for one action;
//! 5. a client that cancels or goes away while the call waits stops the
//!    wait: nothing is performed, then or later, since only a call in
//!    flight acts.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use countersign_act_tool::{ActResult, BrowseResult, Observed, ProposeResult, Toolset};
use countersign_approval_core::{ProposalId, ProposalStatus};
use countersign_approval_web::ApprovalPages;
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ProgressNotificationParam};
use rmcp::service::RequestContext;
use serde_json::{Map, Value, json};

use crate::approval_link::{is_stateless, link_input_required};
use crate::identity::Identity;
use crate::playwright::refusal_of;
use crate::playwright::seal::Sealer;
use crate::playwright::sections::Sections;
use crate::playwright::snapshot::{Target, render, stale_ref_message, target_of};

mod reading;

/// How the compatible mode waits for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompatOptions {
    /// How long one call waits for a person's decision before it answers
    /// that nothing was performed yet. The default, 50 s, stays below the
    /// 60 s most MCP clients wait for a tool call.
    pub approval_wait: Duration,
    /// How often a waiting call reads the proposal's status.
    pub poll_every: Duration,
    /// How often a waiting call repeats its progress notification.
    pub progress_every: Duration,
}

impl Default for CompatOptions {
    fn default() -> Self {
        CompatOptions {
            approval_wait: Duration::from_secs(50),
            poll_every: Duration::from_millis(200),
            progress_every: Duration::from_secs(10),
        }
    }
}

impl CompatOptions {
    /// These options with calls waiting `wait` for a person.
    pub fn approval_wait(mut self, wait: Duration) -> CompatOptions {
        self.approval_wait = wait;
        self
    }
}

/// What a call brings besides its arguments: where the approval pages
/// are, and the request state of a 2026-07-28 retry.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Round<'a> {
    /// The approval pages' base URL, for the link.
    pub(crate) approval_base: Option<&'a str>,
    /// The `requestState` the client sent back, if any.
    pub(crate) request_state: Option<&'a str>,
}

/// What the compatible mode remembers of one identity's tab.
#[derive(Debug, Default)]
struct TabState {
    /// The URL of the page last shown to the model.
    url: Option<String>,
    /// The ref page of the snapshot last shown: a ref of another page is
    /// stale.
    ref_page: Option<u64>,
    /// Proposals made and not yet performed, by (url, canonical action):
    /// a retry of the same call finds its proposal here.
    asked: HashMap<(String, String), ProposalId>,
    /// The URLs of the pages shown to the model, oldest first, for
    /// `browser_navigate_back`.
    history: Vec<String>,
}

/// How many times the page is looked at after an act while it changes.
const SETTLE_LOOKS: usize = 10;

/// The pause between those looks.
const SETTLE_PAUSE: Duration = Duration::from_millis(100);

/// The most pages a tab's history keeps.
const MAX_HISTORY: usize = 64;

/// The compatible mode of one server: its options and each identity's tab
/// state.
#[derive(Debug, Default)]
pub(crate) struct Compat {
    options: CompatOptions,
    /// Seals the request state of a 2026-07-28 round.
    sealer: Sealer,
    tabs: Mutex<HashMap<Identity, TabState>>,
}

/// One state-changing call, as an action the toolset can propose.
struct Planned {
    method: &'static str,
    target: Target,
    arguments: Map<String, Value>,
    /// The model's words for the element, shown to the person.
    element: Option<String>,
}

/// Why a call was answered without performing anything.
type Answer = CallToolResult;

fn error(message: impl Into<String>, structured: Value) -> Answer {
    Sections::new().error(message).into_result(structured)
}

/// Arguments refused before anything is proposed, in Playwright's words
/// for invalid arguments, with what is wrong on the second line.
fn invalid(tool: &str, detail: impl Into<String>) -> Answer {
    let detail = detail.into();
    let message = format!("Invalid arguments for tool \"{tool}\":\n✖ {detail}");
    let structured =
        json!({"status": "error", "error": {"code": "INVALID_ARGUMENTS", "message": message}});
    error(message, structured)
}

impl Compat {
    pub(crate) fn new(options: CompatOptions) -> Compat {
        Compat {
            options,
            sealer: Sealer::new(),
            tabs: Mutex::new(HashMap::new()),
        }
    }

    fn with_tab<R>(&self, identity: &Identity, f: impl FnOnce(&mut TabState) -> R) -> Option<R> {
        let mut tabs = self.tabs.lock().ok()?;
        Some(f(tabs.entry(identity.clone()).or_default()))
    }

    /// Answers one `tools/call` of the compatible mode.
    pub(crate) async fn call(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        name: &str,
        args: Map<String, Value>,
        context: &RequestContext<RoleServer>,
        round: Round<'_>,
    ) -> CallToolResponse {
        if let Some(why) = refusal_of(name) {
            return error(
                format!("Tool \"{name}\" is not offered by countersign: {why}"),
                json!({"status": "error", "error": {"code": "NOT_OFFERED", "message": why}}),
            )
            .into();
        }
        let planned = match name {
            "browser_navigate" => return self.navigate(toolset, identity, &args).await.into(),
            "browser_snapshot" => return self.snapshot(toolset, identity, &args).await.into(),
            "browser_navigate_back" => {
                return self.navigate_back(toolset, identity, &args).await.into();
            }
            "browser_wait_for" => return self.wait_for(toolset, identity, &args).await.into(),
            "browser_find" => return self.find(toolset, identity, &args).await.into(),
            "browser_tabs" => return self.tabs(toolset, identity, &args).await.into(),
            "browser_press_key" => self.plan_key_press(toolset, identity, &args).await,
            "browser_click" | "browser_hover" | "browser_type" | "browser_select_option" => {
                plan(name, &args)
            }
            _ if crate::playwright::offered_tools()
                .iter()
                .any(|tool| tool["name"] == name) =>
            {
                return error(
                    format!("Tool \"{name}\" is not performed by this release of countersign yet"),
                    json!({"status": "error", "error": {"code": "NOT_OFFERED", "message": "not performed yet"}}),
                )
                .into();
            }
            _ => {
                return error(
                    format!("Tool \"{name}\" not found"),
                    json!({"status": "error", "error": {"code": "UNKNOWN_TOOL", "message": "no such tool"}}),
                )
                .into();
            }
        };
        match planned {
            Ok(planned) => {
                self.decide_and_perform(toolset, identity, planned, context, round)
                    .await
            }
            Err(answer) => answer.into(),
        }
    }

    async fn navigate(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        args: &Map<String, Value>,
    ) -> Answer {
        if let Some(unknown) = args.keys().find(|key| key.as_str() != "url") {
            return invalid("browser_navigate", format!("no argument `{unknown}`"));
        }
        let Some(url) = args.get("url").and_then(Value::as_str) else {
            return invalid("browser_navigate", "`url` is required, a string");
        };
        self.go_to(toolset, identity, url).await
    }

    /// Takes the tab to `url` through the policy, and answers with the page
    /// it landed on.
    async fn go_to(&self, toolset: &Toolset, identity: &Identity, url: &str) -> Answer {
        let Some(browse) = toolset.browse() else {
            return error(
                "the host did not enable navigation",
                json!({"status": "error"}),
            );
        };
        match browse.navigate(&json!({ "url": url })).await {
            BrowseResult::Error(refused) => error(
                refused.message.clone(),
                json!({"status": "error", "operation_id": refused.operation_id.as_str(),
                       "error": {"code": refused.code.as_str(), "message": refused.message}}),
            ),
            navigated => {
                let operation_id = navigated.operation_id().as_str().to_owned();
                self.page_answer(
                    toolset,
                    identity,
                    Sections::new(),
                    json!({"status": "ok", "operation_id": operation_id}),
                )
                .await
            }
        }
    }

    /// The page's snapshot: all of it, or the subtree of `target`, down to
    /// `depth` levels. Written to a file (`filename`) and with boxes
    /// (`boxes`) it is not: those are refused by name.
    async fn snapshot(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        args: &Map<String, Value>,
    ) -> Answer {
        const TOOL: &str = "browser_snapshot";
        if let Some(unsupported) = args
            .keys()
            .find(|key| !matches!(key.as_str(), "target" | "depth"))
        {
            return invalid(
                TOOL,
                format!(
                    "`{unsupported}` is not taken here: countersign shows the snapshot in the answer, without boxes"
                ),
            );
        }
        let depth = match args.get("depth") {
            None => None,
            Some(value) => match value.as_f64() {
                Some(d) if d >= 0.0 && d.fract() == 0.0 => Some(d as usize),
                _ => return invalid(TOOL, "`depth` must be a whole number of levels"),
            },
        };
        let target = match string_arg(args, TOOL, "target") {
            Ok(None) => None,
            Ok(Some(text)) => match target_of(text) {
                Ok(Target::Ref(element_ref)) => Some(element_ref),
                Ok(Target::Selector(_)) => {
                    return invalid(TOOL, "`target` is a ref from the page snapshot here");
                }
                Err(message) => {
                    return error(
                        message,
                        json!({"status": "error", "error": {"code": "STALE_REF"}}),
                    );
                }
            },
            Err(answer) => return answer,
        };
        let observed = match self.look(toolset, identity).await {
            Ok(observed) => observed,
            Err(message) => return error(message, json!({"status": "error"})),
        };
        let mut nodes = observed.nodes.clone();
        if let Some(element_ref) = target {
            let Some(at) = nodes
                .iter()
                .position(|n| n.element_ref == Some(element_ref))
            else {
                return stale(element_ref);
            };
            let top = nodes[at].depth;
            let end = nodes[at + 1..]
                .iter()
                .position(|n| n.depth <= top)
                .map_or(nodes.len(), |after| at + 1 + after);
            nodes = nodes[at..end]
                .iter()
                .cloned()
                .map(|mut n| {
                    n.depth -= top;
                    n
                })
                .collect();
        }
        if let Some(depth) = depth {
            nodes.retain(|n| n.depth < depth.max(1));
        }
        let text = render(&nodes, toolset.context().snapshot_limits());
        Sections::new()
            .page(observed.url.as_str(), &observed.title, text)
            .into_result(json!({"status": "ok", "url": observed.url.as_str()}))
    }

    /// `sections` with the page the tab shows now and its snapshot, which
    /// becomes the page refs are taken from.
    async fn page_answer(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        sections: Sections,
        structured: Value,
    ) -> Answer {
        match self.look(toolset, identity).await {
            Ok(observed) => shown(toolset, &observed, sections, structured),
            Err(message) => sections.error(message).into_result(structured),
        }
    }

    /// The answer to an act that was performed: the page as it settles. A
    /// page still changing (a click's navigation landing) is looked at
    /// again, a few times; if it cannot be shown, the answer still says
    /// the act was performed, never an error.
    async fn answer_after_act(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        structured: Value,
    ) -> Answer {
        let mut failure = String::new();
        for attempt in 0..SETTLE_LOOKS {
            if attempt > 0 {
                tokio::time::sleep(SETTLE_PAUSE).await;
            }
            match self.look(toolset, identity).await {
                Ok(observed) => {
                    return shown(toolset, &observed, Sections::new(), structured);
                }
                Err(message) => failure = message,
            }
        }
        Sections::new()
            .result(format!(
                "- Performed. The page could not be shown after it ({failure}): call browser_snapshot"
            ))
            .into_result(structured)
    }

    /// The page the tab shows now, which becomes the page refs are taken
    /// from and the last page of the tab's history.
    async fn look(&self, toolset: &Toolset, identity: &Identity) -> Result<Box<Observed>, String> {
        let Some(browse) = toolset.browse() else {
            return Err("the host did not enable observing the page".to_owned());
        };
        match browse.observe(&json!({})).await {
            BrowseResult::Observed { observed, .. } => {
                let ref_page = observed
                    .nodes
                    .iter()
                    .find_map(|node| node.element_ref)
                    .map(|r| r.page().number());
                let url = observed.url.as_str().to_owned();
                self.with_tab(identity, |tab| {
                    if tab.url.as_deref() != Some(url.as_str()) || tab.ref_page != ref_page {
                        tab.asked.clear();
                    }
                    if tab.history.last() != Some(&url) {
                        tab.history.push(url.clone());
                        let excess = tab.history.len().saturating_sub(MAX_HISTORY);
                        tab.history.drain(..excess);
                    }
                    tab.url = Some(url);
                    tab.ref_page = ref_page;
                });
                Ok(observed)
            }
            BrowseResult::Error(refused) => Err(refused.message),
            _ => Err("the page could not be observed".to_owned()),
        }
    }

    /// Whether the tab still shows the document `element_ref` was given on,
    /// looked at again now (which also becomes the page refs are taken
    /// from).
    async fn still_shows(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        element_ref: countersign_approval_core::ElementRef,
    ) -> bool {
        let _ = self.look(toolset, identity).await;
        self.with_tab(identity, |tab| tab.ref_page)
            .flatten()
            .is_some_and(|page| page == element_ref.page().number())
    }

    /// Proposes `planned` on the tab's page and performs it once it is
    /// approved, within this call.
    async fn decide_and_perform(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        planned: Planned,
        context: &RequestContext<RoleServer>,
        round: Round<'_>,
    ) -> CallToolResponse {
        let Round {
            approval_base,
            request_state,
        } = round;
        let (Some(propose), Some(act)) = (toolset.propose(), toolset.act()) else {
            return error(
                "the host did not enable proposals",
                json!({"status": "error"}),
            )
            .into();
        };
        // 1. The page: the one last shown, and a ref of it.
        let tab = self.with_tab(identity, |tab| (tab.url.clone(), tab.ref_page));
        let Some((Some(url), ref_page)) = tab else {
            return error(
                "No page is open: call browser_navigate first",
                json!({"status": "error", "error": {"code": "NO_PAGE"}}),
            )
            .into();
        };
        if let Target::Ref(element_ref) = &planned.target
            && ref_page != Some(element_ref.page().number())
        {
            return stale(*element_ref).into();
        }
        let mut action = json!({
            "url": url,
            "method": planned.method,
            "selector": planned.target.to_selector(),
            "arguments": Value::Object(planned.arguments.clone()),
        });
        if let (Some(element), Some(object)) = (&planned.element, action.as_object_mut()) {
            object.insert("description".to_owned(), Value::String(element.clone()));
        }
        let key = (url.clone(), action.to_string());
        let binding = format!(
            "{}\0{}\0{}\0{}",
            identity.actor.as_str(),
            identity.run.as_str(),
            key.0,
            key.1
        );
        // 2. The proposal: the one the request state or an earlier call of
        // the same action names, or a new one.
        let known = match request_state {
            Some(state) => match self.sealer.open(state, &binding) {
                Some(id) => Some(id),
                None => {
                    return error(
                        "the request state is not one this server gave for this call",
                        json!({"status": "error", "error": {"code": "INVALID_STATE"}}),
                    )
                    .into();
                }
            },
            None => self
                .with_tab(identity, |tab| tab.asked.get(&key).cloned())
                .flatten(),
        };
        let proposed = match &known {
            Some(id) => propose.status(&json!({ "proposal_id": id.as_str() })).await,
            None => propose.propose(&action).await,
        };
        let view = match proposed {
            ProposeResult::Proposal(view) => view,
            ProposeResult::Error { code, message } => {
                // The page may have moved on since the model's snapshot (a
                // click's navigation lands after its answer): then the ref
                // is stale, and is told so in Playwright's words.
                if let Target::Ref(element_ref) = &planned.target
                    && !self.still_shows(toolset, identity, *element_ref).await
                {
                    return stale(*element_ref).into();
                }
                return error(
                    format!("Nothing was performed: {message}"),
                    json!({"status": "error", "error": {"code": code.as_str(), "message": message}}),
                ).into();
            }
            _ => return error("Nothing was performed", json!({"status": "error"})).into(),
        };
        let link = approval_base
            .map(|base| format!("{base}{}", ApprovalPages::proposal_path(&view.proposal_id)));
        let mut structured = json!({"proposal_id": view.proposal_id.as_str()});
        if let (Some(link), Some(object)) = (&link, structured.as_object_mut()) {
            object.insert("approval_url".to_owned(), Value::String(link.clone()));
        }
        // 3. The decision: now, or after a wait for a person.
        let view = if view.status == ProposalStatus::Pending {
            self.with_tab(identity, |tab| {
                tab.asked.insert(key.clone(), view.proposal_id.clone())
            });
            if known.is_none() {
                let mut pending =
                    json!({"status": "pending", "proposal_id": view.proposal_id.as_str()});
                if let (Some(link), Some(object)) = (&link, pending.as_object_mut()) {
                    object.insert("approval_url".to_owned(), Value::String(link.clone()));
                }
                // On 2026-07-28 the link goes out as the first answer,
                // and the client's retry with the sealed state waits.
                if is_stateless(context)
                    && let Some(state) = self.sealer.seal(&view.proposal_id, &binding)
                    && let Some(input) = link_input_required(context, &pending, state)
                {
                    return CallToolResponse::InputRequired(input);
                }
                crate::approval_link::offer_link(context, &pending);
            }
            match self
                .wait_for_person(toolset, &view.proposal_id, link.as_deref(), context)
                .await
            {
                Waited::Decided(view) => view,
                Waited::Pending => {
                    set(&mut structured, "status", "pending");
                    let link_text = link.as_deref().unwrap_or("the host's approval page");
                    return error(
                        format!(
                            "Nothing was performed: a person has not approved this action yet. They decide at {link_text}. Call again with the same arguments to wait for their decision; they will not be asked twice."
                        ),
                        structured,
                    ).into();
                }
                Waited::Cancelled => {
                    set(&mut structured, "status", "cancelled");
                    return error("Nothing was performed: the call was cancelled", structured)
                        .into();
                }
                Waited::Failed(message) => {
                    set(&mut structured, "status", "error");
                    return error(format!("Nothing was performed: {message}"), structured).into();
                }
            }
        } else {
            view
        };
        if let (Some(by), Some(object)) = (view.decided_by, structured.as_object_mut()) {
            object.insert(
                "decided_by".to_owned(),
                Value::String(by.as_str().to_owned()),
            );
        }
        match view.status {
            ProposalStatus::Approved => {}
            ProposalStatus::Denied => {
                set(&mut structured, "status", "denied");
                return error("Nothing was performed: the action was denied", structured).into();
            }
            _ => {
                self.with_tab(identity, |tab| tab.asked.remove(&key));
                set(&mut structured, "status", "expired");
                return error(
                    "Nothing was performed: nobody decided in time and the proposal expired",
                    structured,
                )
                .into();
            }
        }
        let Some(approval_id) = view.approval_id else {
            return error(
                "Nothing was performed: the approval has no grant",
                structured,
            )
            .into();
        };
        // 4. The act, with the grant the model never sees, only while the
        // call is still wanted: a client that cancelled at the moment the
        // decision came gets nothing performed (its retry finds the grant).
        if context.ct.is_cancelled() {
            set(&mut structured, "status", "cancelled");
            return error("Nothing was performed: the call was cancelled", structured).into();
        }
        let mut call = action;
        if let Some(object) = call.as_object_mut() {
            object.insert(
                "approval_id".to_owned(),
                Value::String(approval_id.to_string()),
            );
        }
        let acted = act.execute_tool_call(&call).await;
        self.with_tab(identity, |tab| tab.asked.remove(&key));
        match acted {
            ActResult::Ok(performed) => {
                set(&mut structured, "status", "ok");
                set(
                    &mut structured,
                    "operation_id",
                    performed.operation_id.as_str(),
                );
                self.answer_after_act(toolset, identity, structured)
                    .await
                    .into()
            }
            ActResult::Error(failed) => {
                set(&mut structured, "status", "error");
                set(
                    &mut structured,
                    "operation_id",
                    failed.operation_id.as_str(),
                );
                if let Some(object) = structured.as_object_mut() {
                    object.insert(
                        "error".to_owned(),
                        json!({"code": failed.code.as_str(), "message": failed.message}),
                    );
                }
                error(failed.message, structured).into()
            }
        }
    }

    /// Waits for a person's decision on `id`, up to the configured time.
    async fn wait_for_person(
        &self,
        toolset: &Toolset,
        id: &ProposalId,
        link: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Waited {
        let Some(propose) = toolset.propose() else {
            return Waited::Failed("the host did not enable proposals".to_owned());
        };
        let started = tokio::time::Instant::now();
        let deadline = started + self.options.approval_wait;
        let token = context.meta.get_progress_token();
        let mut next_progress = started;
        let mut sent = 0u32;
        loop {
            match propose.status(&json!({ "proposal_id": id.as_str() })).await {
                ProposeResult::Proposal(view) if view.status != ProposalStatus::Pending => {
                    return Waited::Decided(view);
                }
                ProposeResult::Proposal(_) => {}
                ProposeResult::Error { message, .. } => return Waited::Failed(message),
                _ => return Waited::Failed("the proposal could not be read".to_owned()),
            }
            let now = tokio::time::Instant::now();
            if let Some(token) = &token
                && now >= next_progress
            {
                sent += 1;
                let waited = now.duration_since(started).as_secs();
                let message = match link {
                    Some(link) => format!(
                        "waiting for a person to approve this action at {link} ({waited} s so far)"
                    ),
                    None => {
                        format!("waiting for a person to approve this action ({waited} s so far)")
                    }
                };
                let progress = ProgressNotificationParam::new(token.clone(), f64::from(sent))
                    .with_message(message);
                if let Err(failed) = context.peer.notify_progress(progress).await {
                    tracing::debug!(%failed, "a progress notification was not sent");
                }
                next_progress = now + self.options.progress_every;
            }
            if now >= deadline {
                return Waited::Pending;
            }
            let nap = self.options.poll_every.min(deadline - now);
            tokio::select! {
                () = context.ct.cancelled() => return Waited::Cancelled,
                () = tokio::time::sleep(nap) => {}
            }
        }
    }
}

/// Playwright's answer to a ref that names nothing on the current page.
fn stale(element_ref: countersign_approval_core::ElementRef) -> Answer {
    error(
        stale_ref_message(&crate::playwright::snapshot::playwright_ref(element_ref)),
        json!({"status": "error", "error": {"code": "STALE_REF"}}),
    )
}

/// `sections` with `observed` as Playwright shows a page, its URL also in
/// `structured`.
fn shown(
    toolset: &Toolset,
    observed: &Observed,
    sections: Sections,
    mut structured: Value,
) -> Answer {
    let text = render(&observed.nodes, toolset.context().snapshot_limits());
    let url = observed.url.as_str();
    if let Some(object) = structured.as_object_mut() {
        object.insert("url".to_owned(), Value::String(url.to_owned()));
    }
    sections
        .page(url, &observed.title, text)
        .into_result(structured)
}

/// How a wait for a person ended.
enum Waited {
    Decided(countersign_act_tool::ProposalView),
    Pending,
    Cancelled,
    Failed(String),
}

fn set(structured: &mut Value, key: &str, value: &str) {
    if let Some(object) = structured.as_object_mut() {
        object.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// The string argument `key`, if given.
fn string_arg<'a>(
    args: &'a Map<String, Value>,
    tool: &str,
    key: &str,
) -> Result<Option<&'a str>, Answer> {
    match args.get(key) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(invalid(tool, format!("`{key}` must be a string"))),
    }
}

fn bool_arg(args: &Map<String, Value>, tool: &str, key: &str) -> Result<bool, Answer> {
    match args.get(key) {
        None => Ok(false),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(_) => Err(invalid(tool, format!("`{key}` must be a boolean"))),
    }
}

/// Playwright's modifier keys, as the action's `modifiers` argument: the
/// names joined by commas, each at most once; `None` for none.
fn modifier_list(tool: &str, given: Option<&Value>) -> Result<Option<String>, Answer> {
    let keys = match given {
        None => return Ok(None),
        Some(Value::Array(keys)) => keys,
        Some(_) => return Err(invalid(tool, "`modifiers` must be an array of key names")),
    };
    let mut names: Vec<&str> = Vec::new();
    for key in keys {
        match key.as_str() {
            Some(name @ ("Alt" | "Control" | "ControlOrMeta" | "Meta" | "Shift"))
                if !names.contains(&name) =>
            {
                names.push(name);
            }
            _ => {
                return Err(invalid(
                    tool,
                    format!(
                        "`modifiers` are Alt, Control, ControlOrMeta, Meta or Shift, each once, not {key}"
                    ),
                ));
            }
        }
    }
    Ok((!names.is_empty()).then(|| names.join(",")))
}

/// The action a state-changing call asks for, or why its arguments are
/// refused. Every argument is either honoured or refused by name.
fn plan(tool: &str, args: &Map<String, Value>) -> Result<Planned, Answer> {
    let allowed: &[&str] = match tool {
        "browser_click" => &["element", "target", "doubleClick", "button", "modifiers"],
        "browser_hover" => &["element", "target"],
        "browser_type" => &["element", "target", "text", "submit", "slowly"],
        _ => &["element", "target", "values"],
    };
    if let Some(unknown) = args.keys().find(|key| !allowed.contains(&key.as_str())) {
        return Err(invalid(tool, format!("no argument `{unknown}`")));
    }
    let Some(target) = string_arg(args, tool, "target")? else {
        return Err(invalid(
            tool,
            "`target` is required: a ref from the page snapshot",
        ));
    };
    let target = target_of(target).map_err(|message| {
        error(
            message.clone(),
            json!({"status": "error", "error": {"code": "STALE_REF", "message": message}}),
        )
    })?;
    let element = string_arg(args, tool, "element")?.map(str::to_owned);
    let mut arguments = Map::new();
    let method = match tool {
        "browser_click" => {
            match string_arg(args, tool, "button")? {
                None | Some("left") => {}
                Some(button @ ("right" | "middle")) => {
                    arguments.insert("button".to_owned(), Value::String(button.to_owned()));
                }
                Some(other) => {
                    return Err(invalid(
                        tool,
                        format!("`button` is left, right or middle, not `{other}`"),
                    ));
                }
            }
            if let Some(keys) = modifier_list(tool, args.get("modifiers"))? {
                arguments.insert("modifiers".to_owned(), Value::String(keys));
            }
            if bool_arg(args, tool, "doubleClick")? {
                "dblclick"
            } else {
                "click"
            }
        }
        "browser_hover" => "hover",
        "browser_type" => {
            let Some(text) = string_arg(args, tool, "text")? else {
                return Err(invalid(tool, "`text` is required, a string"));
            };
            if bool_arg(args, tool, "submit")? {
                return Err(invalid(
                    tool,
                    "`submit` is not performed by this release of countersign yet",
                ));
            }
            arguments.insert("text".to_owned(), Value::String(text.to_owned()));
            if bool_arg(args, tool, "slowly")? {
                "type"
            } else {
                "fill"
            }
        }
        _ => {
            let values = match args.get("values") {
                Some(Value::Array(values)) => values,
                _ => {
                    return Err(invalid(tool, "`values` is required, an array of strings"));
                }
            };
            let [Value::String(value)] = values.as_slice() else {
                return Err(invalid(
                    tool,
                    "exactly one value is performed by this release of countersign",
                ));
            };
            arguments.insert("value".to_owned(), Value::String(value.clone()));
            "select"
        }
    };
    Ok(Planned {
        method,
        target,
        arguments,
        element,
    })
}
