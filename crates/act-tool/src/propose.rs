//! The propose tool: a model proposes a browser action; the host decides.

use std::sync::Arc;

use countersign_approval_core::{
    Approval, ApprovalId, ApproverId, DecisionOutcome, OutcomeCode, Proposal, ProposalId,
    ProposalState, ProposalStatus, ProposalStore, ProposeError, StandingScope, Timestamp,
};
use countersign_canonical_policy::{Action, AuthorizedUrl};
use countersign_rules::{Decision, ProposedTarget, RuleSet, Tier};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::call;
use crate::context::Context;
use crate::definition::{
    PROPOSAL_STATUS_TOOL_NAME, PROPOSE_TOOL_NAME, ToolDefinition, ToolFormat,
    proposal_status_definition, propose_definition,
};
use crate::operation_record::{new_operation_id, record_tool_call};
use crate::refusal::Refusal;
use crate::standing;
use countersign_approval_core::{DecidedBy, measure};

/// The propose tool for one host [`Context`]: `browser_propose` records a
/// pending proposal, `browser_proposal_status` reports the host's decision.
///
/// `browser_propose` checks, in this order, and performs nothing:
///
/// 1. malformed call (as for Act, without `approval_id`: one given is an
///    unknown argument) ⇒ `NOT_AUTHORIZED`;
/// 2. the context has no proposal store
///    ([`ContextBuilder::proposal_store`](crate::ContextBuilder::proposal_store))
///    ⇒ `NOT_AUTHORIZED`;
/// 3. the policy refuses the URL, then the action ⇒ `NOT_AUTHORIZED`;
/// 4. a backend with pages binds the page (no input is dispatched): first
///    without the picture
///    ([`binding_snapshot`](countersign_approval_core::Backend::binding_snapshot)),
///    and, when no rule or standing approval decides at once, again with
///    it ([`snapshot`](countersign_approval_core::Backend::snapshot)), on
///    which the rules decide again; a failure ⇒ `BACKEND_FAILED`; the
///    proposal, and the grant approved from it, are bound to that page;
/// 5. with [rules](crate::ContextBuilder::rules), they decide on the
///    element the snapshot bound: a `deny` ⇒ `NOT_AUTHORIZED` with the
///    rule's reason, and an operation record naming the rule;
/// 6. the store records the proposal, pending for
///    [`Context::proposal_ttl`]: a stopped run or actor ⇒
///    `APPROVAL_STALE`, a store failure ⇒ `STORE_UNAVAILABLE`;
/// 7. when a rule decided `auto`, the store approves it at once with the
///    ordinary grant (single use, bound to the page and element, approved
///    by `rule:<id>`, which the proposal keeps and every act with the grant
///    records as its approver); if that fails, the proposal stays pending
///    for a person.
///
/// The answer is status `pending` (or `approved` with the approval id,
/// `decided_by: "rule"`, when a rule approved it) with the proposal id,
/// the canonical URL and action, and the expiry. `browser_proposal_status` with that id
/// answers `pending`, `approved` (with the approval id for Act), `denied`
/// or `expired`; an id that is malformed, unknown, or another actor's or
/// run's is `APPROVAL_REQUIRED`, so a model learns nothing of other runs.
///
/// Cheap to clone; `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Propose {
    context: Arc<Context>,
}

/// What the propose tools answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProposeResult {
    /// A proposal and its status (`browser_propose` always answers
    /// [`ProposalStatus::Pending`]).
    Proposal(ProposalView),
    /// Nothing was proposed, or the status could not be read.
    Error {
        /// The code, as for Act.
        code: OutcomeCode,
        /// A lower-case message for the model.
        message: String,
    },
}

/// One proposal as the model is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposalView {
    /// The proposal's id.
    pub proposal_id: ProposalId,
    /// Its status now.
    pub status: ProposalStatus,
    /// The grant to act with, once approved.
    pub approval_id: Option<ApprovalId>,
    /// The canonical URL.
    pub url: String,
    /// The canonical action.
    pub action: Action,
    /// When it stops awaiting a decision.
    pub expires_at: Timestamp,
    /// Who decided, once decided: a rule or a person (never which rule).
    pub decided_by: Option<DecidedBy>,
}

impl ProposalView {
    /// `proposal` as it waits for a decision.
    fn pending(proposal: &Proposal) -> ProposalView {
        ProposalView {
            proposal_id: proposal.id.clone(),
            status: ProposalStatus::Pending,
            approval_id: None,
            url: proposal.url.clone(),
            action: proposal.action.clone(),
            expires_at: proposal.expires_at,
            decided_by: None,
        }
    }
}

impl ProposeResult {
    fn error(code: OutcomeCode, message: impl Into<String>) -> Self {
        ProposeResult::Error {
            code,
            message: message.into(),
        }
    }

    /// The JSON the model sees: `{"status": "pending" | "approved" |
    /// "denied" | "expired", "proposal_id", "url", "action",
    /// "expires_at_ms", "message"}` plus `"approval_id"` once approved and
    /// `"expired_at"` (RFC 3339) once expired, or
    /// `{"status": "error", "error": {"code", "message"}}`.
    pub fn to_json(&self) -> Value {
        match self {
            ProposeResult::Proposal(view) => {
                let mut body = json!({
                    "status": view.status.as_str(),
                    "proposal_id": view.proposal_id.as_str(),
                    "url": view.url,
                    "action": view.action.to_json_value(),
                    "expires_at_ms": view.expires_at.as_millis(),
                    "message": status_message(view),
                });
                if let Some(object) = body.as_object_mut() {
                    if view.status == ProposalStatus::Expired {
                        object.insert(
                            "expired_at".to_owned(),
                            Value::String(view.expires_at.to_rfc3339()),
                        );
                    }
                    if let Some(id) = &view.approval_id {
                        object.insert("approval_id".to_owned(), Value::String(id.to_string()));
                    }
                    if let Some(by) = view.decided_by {
                        object.insert(
                            "decided_by".to_owned(),
                            Value::String(by.as_str().to_owned()),
                        );
                    }
                }
                body
            }
            ProposeResult::Error { code, message } => json!({
                "status": "error",
                "error": { "code": code.as_str(), "message": message },
            }),
        }
    }
}

fn status_message(view: &ProposalView) -> String {
    if view.status == ProposalStatus::Expired {
        // When, so that a model tells a person "it expired at …", not
        // "it is still waiting".
        return format!(
            "nobody decided in time; the proposal expired at {}; do not act, and propose again only if the task still needs it",
            view.expires_at.to_rfc3339()
        );
    }
    let text = match view.status {
        ProposalStatus::Pending => {
            "awaiting the host's decision; call browser_proposal_status with this proposal_id later"
        }
        ProposalStatus::Approved => {
            "approved; call browser_act once with this approval_id and exactly this url and action"
        }
        ProposalStatus::Denied => "the host denied this proposal; do not perform it",
        ProposalStatus::Expired => "nobody decided in time; the proposal has expired",
    };
    text.to_owned()
}

impl Propose {
    /// The propose tool's name, `browser_propose`.
    pub const NAME: &'static str = PROPOSE_TOOL_NAME;
    /// The status tool's name, `browser_proposal_status`.
    pub const STATUS_NAME: &'static str = PROPOSAL_STATUS_TOOL_NAME;

    /// The propose tools for `context`.
    pub fn new(context: impl Into<Arc<Context>>) -> Self {
        Propose {
            context: context.into(),
        }
    }

    /// The host context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The definitions of both tools, `browser_propose` (whose `method`
    /// lists the context policy's methods) and `browser_proposal_status`,
    /// in `format`.
    pub fn tool_definitions_for(&self, format: ToolFormat) -> [ToolDefinition; 2] {
        let methods = self
            .context
            .source_policy()
            .allowed_methods()
            .map(str::to_owned)
            .collect();
        [
            propose_definition(format, Some(methods)),
            proposal_status_definition(format),
        ]
    }

    /// Runs a `browser_propose` call and returns the typed result.
    pub async fn propose(&self, args: &Value) -> ProposeResult {
        let span = tracing::info_span!(
            measure::PROPOSE_SPAN,
            countersign.proposal_id = tracing::field::Empty,
            countersign.outcome = tracing::field::Empty,
        );
        let proposed = self.try_propose(args).instrument(span.clone()).await;
        match &proposed {
            Ok(view) => {
                span.record("countersign.proposal_id", view.proposal_id.as_str());
                span.record("countersign.outcome", view.status.as_str());
            }
            Err(ProposeResult::Error { code, .. }) => {
                span.record("countersign.outcome", code.as_str());
            }
            Err(_) => {}
        }
        match proposed {
            Ok(view) => {
                tracing::info!(
                    actor = %self.context.actor_id(),
                    run = %self.context.run_id(),
                    proposal_id = %view.proposal_id,
                    "browser_propose recorded a proposal",
                );
                ProposeResult::Proposal(view)
            }
            Err(error) => {
                if let ProposeResult::Error { code, message } = &error {
                    tracing::warn!(
                        actor = %self.context.actor_id(),
                        run = %self.context.run_id(),
                        outcome = code.as_str(),
                        reason = %message,
                        "browser_propose refused",
                    );
                }
                error
            }
        }
    }

    async fn try_propose(&self, args: &Value) -> Result<ProposalView, ProposeResult> {
        let context = &*self.context;
        let started_at = context.now();
        // 1. The call parses, the host takes proposals, and the policy
        //    allows the URL and the action.
        let (url, action) =
            call::parse_proposal(args).map_err(|m| ProposeResult::error(m.code, m.message))?;
        let Some(store) = context.proposal_store() else {
            return Err(ProposeResult::error(
                OutcomeCode::NotAuthorized,
                "the host does not take proposals",
            ));
        };
        let (url, action) = authorize(context, &url, &action).await?;
        // 2-4, first without the picture: a decision no person will see
        // (a rule's, a standing approval's) needs none. When a person must
        // decide, the page is bound again with the picture, and the rules
        // decide again on what that binding found.
        let mut picture = Picture::Skip;
        let (proposal, approved_at, instant) = loop {
            // 2. The page as it is now, bound into the proposal.
            let proposal = observed_proposal(context, &url, &action, picture).await?;
            // 3. The rules decide on the bound element: a `deny` refuses
            //    (and is recorded), an `auto` builds the grant a person
            //    approving it would issue, approved no earlier than it
            //    was made.
            let rules = context.rules();
            let rules = rules.as_deref();
            let decision = rules.map(|rules| {
                rules.decide(ProposedTarget {
                    url: &url,
                    action: &action,
                    element: proposal.bound_element(),
                })
            });
            if let Some(rule) = decision.as_ref().and_then(Decision::denied_by) {
                let refusal = Refusal::by_rule(rule);
                record_tool_call(
                    context,
                    &new_operation_id(),
                    Some(url.as_str().to_owned()),
                    Some(action.digest()),
                    OutcomeCode::NotAuthorized,
                    &refusal.reason,
                    started_at,
                    PROPOSE_TOOL_NAME,
                )
                .await;
                return Err(ProposeResult::error(refusal.code, refusal.message));
            }
            let approved_at = context.now().max(proposal.proposed_at);
            let auto = decision
                .zip(rules)
                .and_then(|(decision, rules)| auto_grant(&decision, rules, &proposal, approved_at));
            // 4. Where a person would be asked, a standing grant that
            //    person approved for this scope decides instead.
            let instant = match auto {
                Some(auto) => Some(auto),
                None => self.standing_grant_for(&proposal, approved_at).await,
            };
            if instant.is_some() || picture == Picture::Take || proposal.snapshot.is_none() {
                break (proposal, approved_at, instant);
            }
            picture = Picture::Take;
        };
        // 5. The proposal is stored.
        let view = ProposalView::pending(&proposal);
        let proposed_at = proposal.proposed_at;
        store_proposal(store.as_ref(), proposal).await?;
        measure::proposal(instant.as_ref().map(|(decided_by, _, _)| *decided_by));
        // 6. A rule or a standing grant approves it at once.
        Ok(match instant {
            Some(instant) => {
                approve_at_once(store.as_ref(), view, instant, (proposed_at, approved_at)).await
            }
            None => view,
        })
    }

    /// The grant a usable standing grant of this run approves `proposal`
    /// with, when its scope is the proposal's; `None` means a person
    /// decides.
    async fn standing_grant_for(
        &self,
        proposal: &Proposal,
        approved_at: Timestamp,
    ) -> Option<(DecidedBy, String, Approval)> {
        let context = &*self.context;
        let store = context.proposal_store()?;
        let scope = StandingScope::of_proposal(proposal)?;
        let covering = standing::covering(context, store.as_ref(), &scope).await?;
        let ttl = standing::grant_ttl(context, &covering)?;
        let id = covering.grant.id;
        match proposal.grant(ttl, approved_at, Some(ApproverId::for_standing(&id))) {
            Ok(grant) => Some((DecidedBy::Standing, format!("standing grant `{id}`"), grant)),
            Err(error) => {
                tracing::warn!(%error, standing = %id, "countersign: a standing grant's grant could not be built; a person decides");
                None
            }
        }
    }

    /// Runs a `browser_proposal_status` call (`{"proposal_id": …}`).
    pub async fn status(&self, args: &Value) -> ProposeResult {
        let unknown = || {
            ProposeResult::error(
                OutcomeCode::ApprovalRequired,
                "no such proposal in this run; propose the action with browser_propose",
            )
        };
        let Some(object) = args.as_object() else {
            return ProposeResult::error(
                OutcomeCode::NotAuthorized,
                "tool call arguments must be a json object",
            );
        };
        if object.keys().any(|k| k != "proposal_id") {
            return ProposeResult::error(
                OutcomeCode::NotAuthorized,
                "the only argument is `proposal_id`",
            );
        }
        let Some(id) = object
            .get("proposal_id")
            .and_then(Value::as_str)
            .and_then(ProposalId::parse)
        else {
            return unknown();
        };
        let context = &*self.context;
        let Some(store) = context.proposal_store() else {
            return unknown();
        };
        let stored = match store.get_proposal(&id).await {
            Ok(Some(stored)) => stored,
            Ok(None) => return unknown(),
            Err(error) => {
                return ProposeResult::error(
                    OutcomeCode::StoreUnavailable,
                    format!("the proposal store is unavailable; try again later: {error}"),
                );
            }
        };
        let proposal = &stored.proposal;
        if proposal.actor_id != *context.actor_id() || proposal.run_id != *context.run_id() {
            return unknown();
        }
        let (approval_id, decided_by) = match &stored.state {
            ProposalState::Approved {
                approval_id, by, ..
            } => (Some(approval_id.clone()), Some(DecidedBy::of(by.as_ref()))),
            ProposalState::Denied { by, .. } => (None, Some(DecidedBy::of(by.as_ref()))),
            ProposalState::Pending => (None, None),
        };
        ProposeResult::Proposal(ProposalView {
            proposal_id: proposal.id.clone(),
            status: stored.status_at(context.now()),
            approval_id,
            url: proposal.url.clone(),
            action: proposal.action.clone(),
            expires_at: proposal.expires_at,
            decided_by,
        })
    }
}

/// Step 1 of a proposal: the policy judges the URL, then the action.
async fn authorize(
    context: &Context,
    url: &str,
    action: &Value,
) -> Result<(AuthorizedUrl, Action), ProposeResult> {
    let policy = context.source_policy();
    let url = policy
        .authorize_destination(url)
        .await
        .map_err(|denial| ProposeResult::error(OutcomeCode::NotAuthorized, denial.to_string()))?;
    let action = policy
        .authorize_action(action)
        .map_err(|denial| ProposeResult::error(OutcomeCode::NotAuthorized, denial.to_string()))?;
    Ok((url, action))
}

/// Whether a proposal's observation takes the picture a person looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Picture {
    /// The backend's whole snapshot.
    Take,
    /// Only what it binds ([`countersign_approval_core::Backend::binding_snapshot`]).
    Skip,
}

/// Step 2 of a proposal: the proposal of `action` on `url`, with the
/// backend's observation of the page bound into it (when it has pages).
async fn observed_proposal(
    context: &Context,
    url: &AuthorizedUrl,
    action: &Action,
    picture: Picture,
) -> Result<Proposal, ProposeResult> {
    let backend = context.backend();
    let snapshot = match picture {
        Picture::Take => backend.snapshot(url, action).await,
        Picture::Skip => backend.binding_snapshot(url, action).await,
    };
    let snapshot = snapshot.map_err(|error| {
        if error.target_changed() {
            // A ref of another page, or of an element gone from it.
            return ProposeResult::error(
                OutcomeCode::ApprovalStale,
                format!("nothing was proposed: {}", error.message()),
            );
        }
        ProposeResult::error(
            OutcomeCode::BackendFailed,
            format!(
                "the page could not be observed; nothing was proposed: {}",
                error.message()
            ),
        )
    })?;
    let proposal = Proposal::for_action(
        context.actor_id().clone(),
        context.run_id().clone(),
        url,
        action,
        context.proposal_ttl(),
        context.now(),
    )
    .map_err(|error| {
        ProposeResult::error(
            OutcomeCode::StoreUnavailable,
            format!("the proposal could not be made: {error}"),
        )
    })?;
    match snapshot {
        None => Ok(proposal),
        Some(snapshot) => proposal.observed(snapshot).map_err(|error| {
            ProposeResult::error(
                OutcomeCode::BackendFailed,
                format!("the page observation was refused; nothing was proposed: {error}"),
            )
        }),
    }
}

/// Step 3 of a proposal: the grant an `auto` rule's `decision` approves
/// `proposal` with; `None` when no rule decides `auto` or its grant cannot
/// be built (then a person decides).
fn auto_grant(
    decision: &Decision<'_>,
    rules: &RuleSet,
    proposal: &Proposal,
    approved_at: Timestamp,
) -> Option<(DecidedBy, String, Approval)> {
    let (Tier::Auto, Some(rule)) = (decision.tier, decision.rule) else {
        return None;
    };
    match proposal.grant(rules.grant_ttl(), approved_at, decision.approver()) {
        Ok(grant) => Some((DecidedBy::Rule, format!("rule `{}`", rule.id()), grant)),
        Err(error) => {
            tracing::warn!(%error, rule = %rule.id(), "countersign: a rule's grant could not be built; a person decides");
            None
        }
    }
}

/// Step 5 of a proposal: the store keeps it, unless the run is stopped.
async fn store_proposal(
    store: &dyn ProposalStore,
    proposal: Proposal,
) -> Result<(), ProposeResult> {
    match store.propose(proposal).await {
        Ok(()) => Ok(()),
        Err(ProposeError::Stopped) => Err(ProposeResult::error(
            OutcomeCode::ApprovalStale,
            "the host stopped this run; nothing can be proposed",
        )),
        Err(error) => Err(ProposeResult::error(
            OutcomeCode::StoreUnavailable,
            format!("the proposal could not be stored; try again later: {error}"),
        )),
    }
}

/// Step 6 of a proposal: `instant`'s grant approves the stored proposal of
/// `view`; when the store does not take it, the proposal stays pending and
/// a person decides.
async fn approve_at_once(
    store: &dyn ProposalStore,
    mut view: ProposalView,
    (decided_by, by, grant): (DecidedBy, String, Approval),
    (proposed_at, approved_at): (Timestamp, Timestamp),
) -> ProposalView {
    let approval_id = grant.id.clone();
    let waited = approved_at.saturating_duration_since(proposed_at);
    let span = tracing::info_span!(
        measure::DECIDE_SPAN,
        countersign.proposal_id = %view.proposal_id,
        countersign.approval_id = %approval_id,
        countersign.decided_by = decided_by.as_str(),
        countersign.wait_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        countersign.outcome = tracing::field::Empty,
    );
    let decided = store
        .approve_proposal(&view.proposal_id, grant, approved_at)
        .instrument(span.clone())
        .await;
    span.record(
        "countersign.outcome",
        match &decided {
            Ok(outcome) => outcome.as_str(),
            Err(_) => "store_error",
        },
    );
    match decided {
        Ok(DecisionOutcome::Approved) => {
            // The store keeps who approved it (`rule:<id>`), and the act
            // that uses the grant records it as its approver: no record of
            // its own here, which would only repeat both.
            view.status = ProposalStatus::Approved;
            view.approval_id = Some(approval_id);
            view.decided_by = Some(decided_by);
            measure::decision(true, decided_by, waited);
            tracing::info!(%by, proposal_id = %view.proposal_id, "countersign: approved the proposal without asking a person");
        }
        // The proposal is stored and pending: a person decides it.
        Ok(other) => {
            tracing::warn!(outcome = other.as_str(), %by, proposal_id = %view.proposal_id, "countersign: could not approve the proposal; a person decides");
        }
        Err(error) => {
            tracing::warn!(%error, %by, proposal_id = %view.proposal_id, "countersign: could not approve the proposal; a person decides");
        }
    }
    view
}
