//! The Act tool: one approved action, performed at most once per grant.

use std::sync::Arc;

use countersign_approval_core::{
    ActionRequest, ApprovalId, ApprovalStore, ApproverId, AttemptId, Binding, ConsumeOutcome,
    ElementIdentity, GivenApprovalId, OperationId, OperationRecord, OutcomeCode, PageBinding,
    RefusedWrite, StandingScope, StopOutcome, StoreError, WriteAccess,
};
use countersign_canonical_policy::{Action, ActionDigest, AuthorizedUrl};
use serde_json::Value;
use tracing::Instrument;

use crate::call::{self, ActCall, Request};
use crate::context::Context;
use crate::definition::{ToolDefinition, ToolFormat, act_definition};
use crate::navigation::{Landed, NAVIGATE_METHOD, NAVIGATE_SELECTOR, judge_landing};
use crate::operation_record::{log_call, log_retry, new_operation_id};
use crate::refusal::{GaveUp, Refusal, given_back_message, stale_message};
use crate::result::{ActError, ActResult, Performed};
use crate::standing;
use countersign_approval_core::{DecidedBy, measure};
use countersign_rules::ProposedTarget;

/// The Act tool for one host [`Context`].
///
/// Checks, in this order, and every refusal performs nothing:
///
/// 1. malformed call: arguments not an object, or `url` missing or not a
///    string ⇒ `NOT_AUTHORIZED`; `approval_id` missing or not a string ⇒
///    `APPROVAL_REQUIRED`; any argument not in the schema (such as
///    `actor_id` or `run_id`) ⇒ `NOT_AUTHORIZED`;
/// 2. the context has no approval store ⇒ `APPROVAL_REQUIRED`;
/// 3. the policy refuses the URL, then the action ⇒ `NOT_AUTHORIZED`;
/// 4. the approval id is malformed ⇒ `APPROVAL_REQUIRED`; unknown (the
///    store's first consume check) ⇒ `APPROVAL_REQUIRED`;
///
///    only when the backend has pages (its `current_page` is `Some`, as a
///    live browser's is): the grant is read first; unknown ⇒
///    `APPROVAL_REQUIRED`; bound to a page other than the backend's current
///    one ⇒ `APPROVAL_STALE`, and the grant is **not** consumed; bound to
///    no page ⇒ `APPROVAL_REQUIRED` unless the context
///    [accepts unbound grants](crate::ContextBuilder::accept_unbound_grants);
///    a backend or store error here ⇒ `BACKEND_FAILED` or
///    `STORE_UNAVAILABLE`, nothing consumed;
/// 5. `consume_once`: stale (expired, revoked, consumed, mismatched,
///    locked after too many mismatches, or its run stopped by the host) ⇒
///    `APPROVAL_STALE`; a retryable store error is retried with the same
///    attempt id (a replay answer on a retry is success), other errors or
///    exhausted retries ⇒ `STORE_UNAVAILABLE`, after the tool gave the
///    consume back with `abandon` (same attempt id, for at most
///    [`Context::abandon_timeout`]): the message says whether the approval
///    is still usable, used by another call, expired or revoked, or — when
///    the abandon failed too — that it may have been used up;
///
///    After a consume the grant's approver is known from the page check,
///    or read with one `get` (a failure gives the consume back ⇒
///    `STORE_UNAVAILABLE`); a grant approved by a standing grant
///    (`standing:<id>`) takes one of its uses for the grant's own scope:
///    none left, revoked, expired or stopped ⇒ `APPROVAL_STALE` and the
///    consume is given back; the use is given back too when the backend
///    then dispatches nothing;
/// 6. `backend.perform` (`perform_on_page` for a page-bound grant, which
///    re-checks the page immediately before input): ok, or
///    `BACKEND_FAILED`. When the backend's error
///    [may have acted](countersign_approval_core::BackendError::may_have_acted)
///    (the default for any failure), the grant stays consumed. When it says
///    nothing was dispatched (a strict-target, landed-URL or argument
///    refusal, or a page that changed after step 4), the tool gives the
///    consume back with `abandon` exactly as in step 5 (same attempt id,
///    bounded by [`Context::abandon_timeout`]) and the message says whether
///    the approval is still usable. The code is `BACKEND_FAILED`, except
///    for a [stale target](countersign_approval_core::BackendError::stale_target)
///    (the backend found the page or the target no longer what the grant
///    binds, e.g. an element-bound grant's target whose identity changed):
///    then `APPROVAL_STALE` (the backend's
///    reason goes to the operation record); a later call with that grant on
///    a changed page is `APPROVAL_STALE` at step 4 and consumes nothing;
/// 7. one operation record is written for every call, whatever happened;
///    for a call that consumed a grant it names the grant's approver, and
///    for one that took a standing use, the standing grant and its uses
///    left (its reason, also when the call succeeded).
///
/// Cheap to clone; `Send + Sync`, so one `Act` may serve concurrent calls.
#[derive(Debug, Clone)]
pub struct Act {
    context: Arc<Context>,
}

/// What the operation record learns as the checks go.
#[derive(Default)]
struct Known {
    url: Option<String>,
    digest: Option<ActionDigest>,
    /// The approver of the grant the call consumed.
    approver: Option<ApproverId>,
    /// For a call that took a standing grant's use: which, and the uses
    /// left, for the record of a call that succeeded.
    note: Option<String>,
}

/// Adds the writes read-only mode refused while the act was performed to
/// the record's note. Refusals the page causes later are the backend's to
/// report, under the same operation id.
async fn note_refused_writes(
    context: &Context,
    operation: &OperationId,
    known: &mut Known,
) -> Vec<RefusedWrite> {
    let refused = match context.backend().refused_writes(operation).await {
        Ok(refused) => refused,
        Err(error) => {
            tracing::warn!(operation_id = %operation, %error, "refused writes could not be read");
            return Vec::new();
        }
    };
    if refused.is_empty() {
        return refused;
    }
    // Bounded: a page may start any number of writes.
    const LISTED: usize = 8;
    let mut list: Vec<String> = refused
        .iter()
        .take(LISTED)
        .map(ToString::to_string)
        .collect();
    if refused.len() > LISTED {
        list.push(format!("and {} more", refused.len() - LISTED));
    }
    let line = format!(
        "read-only mode refused {} {}: {}",
        refused.len(),
        if refused.len() == 1 {
            "write"
        } else {
            "writes"
        },
        list.join(", ")
    );
    known.note = Some(match known.note.take() {
        Some(note) => format!("{note}; {line}"),
        None => line,
    });
    refused
}

/// The shortest wait between two tries of an abandon.
const MIN_ABANDON_BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);

impl Act {
    /// The tool's name, `browser_act`.
    pub const NAME: &'static str = crate::definition::TOOL_NAME;

    /// The Act tool for `context` (a [`Context`] or an `Arc<Context>`).
    pub fn new(context: impl Into<Arc<Context>>) -> Self {
        Act {
            context: context.into(),
        }
    }

    /// The host context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The tool's definition, without knowledge of any policy: name
    /// `browser_act`, a description for the model, and the JSON Schema of
    /// the arguments `url`, `approval_id`, `method`, `selector`,
    /// `description`, `arguments` with `additionalProperties: false`
    /// ([`ToolFormat::JsonSchema`]).
    pub fn definition() -> ToolDefinition {
        act_definition(ToolFormat::JsonSchema, None)
    }

    /// The definition shaped for one LLM API (see [`ToolFormat`]), without
    /// knowledge of any policy.
    pub fn definition_for(format: ToolFormat) -> ToolDefinition {
        act_definition(format, None)
    }

    /// The same definition, whose `method` accepts only the context
    /// policy's allowed methods (in any ASCII case, as the policy does)
    /// and lists them for the model.
    pub fn tool_definition(&self) -> ToolDefinition {
        self.tool_definition_for(ToolFormat::JsonSchema)
    }

    /// [`tool_definition`](Self::tool_definition) shaped for one LLM API.
    pub fn tool_definition_for(&self, format: ToolFormat) -> ToolDefinition {
        let methods = self
            .context
            .source_policy()
            .allowed_methods()
            .map(str::to_owned)
            .collect();
        act_definition(format, Some(methods))
    }

    /// Runs a typed call. Of the malformed-call checks only the nesting
    /// limit can fail for a typed call; every later check applies.
    pub async fn execute(&self, call: ActCall) -> ActResult {
        let given = GivenApprovalId::from_text(&call.approval_id);
        let request = call
            .into_request()
            .map_err(|m| Refusal::new(m.code, m.message));
        self.run(given, request).await
    }

    /// Runs a model's tool call: `args` is the JSON object of the call's
    /// arguments. Returns the typed result; [`execute_json`](Self::execute_json)
    /// returns its JSON.
    pub async fn execute_tool_call(&self, args: &Value) -> ActResult {
        let given = call::given_approval_id(args);
        let request = call::parse(args).map_err(|m| Refusal::new(m.code, m.message));
        self.run(given, request).await
    }

    /// Runs a model's tool call and returns the JSON the model sees.
    pub async fn execute_json(&self, args: &Value) -> Value {
        self.execute_tool_call(args).await.to_json()
    }

    async fn run(&self, given: GivenApprovalId, request: Result<Request, Refusal>) -> ActResult {
        let context = &*self.context;
        let started_at = context.now();
        let operation_id = new_operation_id();
        let span = tracing::info_span!(
            measure::ACT_SPAN,
            countersign.operation_id = %operation_id,
            countersign.approval_id = tracing::field::Empty,
            countersign.action_digest = tracing::field::Empty,
            countersign.outcome = tracing::field::Empty,
            countersign.reason = tracing::field::Empty,
            countersign.decided_by = tracing::field::Empty,
        );
        let mut known = Known::default();
        let outcome = match request {
            Err(refusal) => Err(refusal),
            Ok(request) => {
                self.decide(&operation_id, request, &mut known)
                    .instrument(span.clone())
                    .await
            }
        };
        let finished_at = context.now();

        let (code, reason) = match &outcome {
            Ok(_) => (OutcomeCode::Ok, known.note.take().unwrap_or_default()),
            Err(refusal) => (refusal.code, refusal.reason.clone()),
        };
        log_call(context, &operation_id, &given, code, &reason);
        measure::act(code);
        if let GivenApprovalId::WellFormed(id) = &given {
            span.record("countersign.approval_id", id.as_str());
        }
        if let Some(digest) = &known.digest {
            span.record("countersign.action_digest", digest.to_hex());
        }
        span.record("countersign.outcome", code.as_str());
        span.record("countersign.reason", reason.as_str());
        if let Ok(performed) = &outcome {
            span.record("countersign.decided_by", performed.decided_by.as_str());
        }

        let record = OperationRecord {
            operation_id: operation_id.clone(),
            actor_id: context.actor_id().clone(),
            run_id: context.run_id().clone(),
            approval_id: given,
            url: known.url,
            action_digest: known.digest,
            approver_id: known.approver,
            outcome: code,
            reason,
            started_at,
            finished_at,
        };
        if let Err(error) = context.operation_store().record(record).await {
            // The outcome already happened (for `ok`, the grant is consumed
            // and the backend acted): reporting anything else would lie.
            tracing::error!(
                operation_id = %operation_id,
                actor = %context.actor_id(),
                run = %context.run_id(),
                outcome = code.as_str(),
                %error,
                "browser_act: the operation record could not be written",
            );
        }

        match outcome {
            Ok(performed) => ActResult::Ok(Box::new(performed)),
            Err(refusal) => ActResult::Error(ActError {
                operation_id,
                code: refusal.code,
                message: refusal.message,
            }),
        }
    }

    async fn decide(
        &self,
        operation_id: &OperationId,
        request: Request,
        known: &mut Known,
    ) -> Result<Performed, Refusal> {
        let context = &*self.context;
        // 2. No approval store: nothing can be approved.
        let Some(store) = context.approval_store() else {
            return Err(Refusal::new(
                OutcomeCode::ApprovalRequired,
                "no approval store is configured; the host must issue approvals",
            ));
        };
        let store = store.as_ref();
        // 3. The policy judges the URL, then the action.
        let (url, action) = authorize(context, &request, known).await?;
        // 4. A malformed id names no grant; a navigation names no element.
        let (approval_id, navigation) = grant_named_by(&request, &action)?;
        // 4b. A backend with pages acts only on the page the grant names.
        let (page, read_approver) = if navigation {
            (None, None)
        } else {
            self.check_page(store, &approval_id).await?
        };
        // 4c. The rules decide again, on the grant's element: a `deny`
        // added or matched since the approval wins; nothing is consumed.
        refuse_if_a_rule_denies(context, &url, &action, page.as_ref())?;
        // 4–5. One atomic check-and-mark; an unknown id is its first answer.
        let binding = Binding::new(context.actor_id(), context.run_id(), &url, &action);
        let attempt = self.consume(store, &approval_id, &binding).await?;
        let consumed = Consumed {
            approval_id,
            attempt,
            page,
        };
        // 5b. Who approved the grant, and the element it binds.
        let (approver, element) = self
            .approver_and_element(store, &consumed, read_approver)
            .await?;
        known.approver = approver.clone();
        // 5c. A grant a standing grant approved also takes one of its uses.
        let scope = element.and_then(|element| {
            // The consume matched the grant's binding: its URL and action
            // are this call's.
            StandingScope::of(url.as_str(), action.method(), &element).ok()
        });
        let standing = self
            .take_standing_use(store, &consumed, approver.as_ref(), scope, known)
            .await?;
        // 6. Perform.
        let decided_by = DecidedBy::of(known.approver.as_ref());
        let action_request = ActionRequest {
            operation_id: operation_id.clone(),
            approval_id: consumed.approval_id.clone(),
            actor_id: context.actor_id().clone(),
            run_id: context.run_id().clone(),
            url,
            action,
            writes: writes_of(context, decided_by),
        };
        if navigation {
            let landed = self
                .navigate(store, &action_request, &consumed.attempt)
                .await?;
            return Ok(performed(
                action_request,
                Some(landed),
                decided_by,
                Vec::new(),
            ));
        }
        self.perform(store, &action_request, &consumed, standing.as_ref())
            .await?;
        // 7. What the page tried to write and was refused, on a page held
        // to reading.
        let refused_writes = if action_request.writes.is_read_only() {
            note_refused_writes(context, &action_request.operation_id, known).await
        } else {
            Vec::new()
        };
        Ok(performed(action_request, None, decided_by, refused_writes))
    }

    /// Step 5b: who approved the grant, and the element it binds: as the
    /// page check read them (`read`), else read now, before anything is
    /// performed. A read that fails gives the consume back and refuses the
    /// call (a grant a standing grant approved must take one of its uses).
    async fn approver_and_element(
        &self,
        store: &dyn ApprovalStore,
        consumed: &Consumed,
        read: Option<Option<ApproverId>>,
    ) -> Result<(Option<ApproverId>, Option<ElementIdentity>), Refusal> {
        if let Some(approver) = read {
            let element = consumed.page.as_ref().and_then(|p| p.element.clone());
            return Ok((approver, element));
        }
        match store.get(&consumed.approval_id).await {
            Ok(grant) => {
                let approval = grant.map(|g| g.approval);
                Ok((
                    approval
                        .as_ref()
                        .and_then(|a| a.approver.as_ref().map(|by| by.id.clone())),
                    approval.and_then(|a| a.element),
                ))
            }
            Err(error) => Err(self
                .give_back(
                    store,
                    &consumed.approval_id,
                    &consumed.attempt,
                    format!("reading the grant's approver failed: {error}"),
                    GaveUp::StoreFailed,
                )
                .await),
        }
    }

    /// Step 5c: a grant a standing grant approved takes one of its uses, in
    /// the store, or the consume is given back and the call refused.
    async fn take_standing_use(
        &self,
        store: &dyn ApprovalStore,
        consumed: &Consumed,
        approver: Option<&ApproverId>,
        scope: Option<StandingScope>,
        known: &mut Known,
    ) -> Result<Option<standing::TakenUse>, Refusal> {
        let Some(standing) = approver.and_then(ApproverId::standing_grant) else {
            return Ok(None);
        };
        match standing::take_use(&self.context, scope, &standing, &consumed.attempt).await {
            Ok(taken) => {
                known.note = Some(taken.record_note());
                Ok(Some(taken))
            }
            Err(refusal) => {
                self.give_back(
                    store,
                    &consumed.approval_id,
                    &consumed.attempt,
                    refusal.reason.clone(),
                    GaveUp::NotDispatched,
                )
                .await;
                Err(refusal)
            }
        }
    }

    /// Step 6 for an action on a page: the backend performs it (on the
    /// grant's page when it has pages). A failure that may have acted
    /// keeps the grant used up; one before anything reached the page gives
    /// the consume (and a standing grant's use) back.
    async fn perform(
        &self,
        store: &dyn ApprovalStore,
        request: &ActionRequest,
        consumed: &Consumed,
        standing: Option<&standing::TakenUse>,
    ) -> Result<(), Refusal> {
        let context = &*self.context;
        let performed = match &consumed.page {
            Some(page) => context.backend().perform_on_page(request, page).await,
            None => context.backend().perform(request).await,
        };
        match performed {
            Ok(()) => Ok(()),
            Err(error) if error.may_have_acted() => Err(Refusal::with_reason(
                OutcomeCode::BackendFailed,
                "backend failed to perform the action; the approval was used up",
                error.to_string(),
            )),
            // Nothing reached the page: the consume is given back.
            Err(error) => {
                if let Some(taken) = standing {
                    standing::give_back_use(context, &taken.standing, &consumed.attempt).await;
                }
                Err(self
                    .give_back(
                        store,
                        &consumed.approval_id,
                        &consumed.attempt,
                        format!("backend refused before dispatching: {}", error.message()),
                        if error.target_changed() {
                            GaveUp::TargetChanged
                        } else {
                            GaveUp::NotDispatched
                        },
                    )
                    .await)
            }
        }
    }

    /// Performs a consumed navigation grant: the backend navigates; a
    /// refusal before the browser was asked to go anywhere gives the grant
    /// back; the landing is judged like `browser_navigate`'s.
    async fn navigate(
        &self,
        store: &dyn ApprovalStore,
        request: &ActionRequest,
        attempt: &AttemptId,
    ) -> Result<Landed, Refusal> {
        let context = &*self.context;
        let navigation = match context.backend().navigate(&request.url).await {
            Ok(navigation) => navigation,
            Err(error) if error.may_have_acted() => {
                return Err(Refusal::with_reason(
                    OutcomeCode::BackendFailed,
                    format!(
                        "the page could not be loaded; the approval was used up: {}",
                        error.message()
                    ),
                    error.to_string(),
                ));
            }
            Err(error) => {
                return Err(self
                    .give_back(
                        store,
                        &request.approval_id,
                        attempt,
                        format!("backend refused before navigating: {}", error.message()),
                        GaveUp::NotDispatched,
                    )
                    .await);
            }
        };
        judge_landing(context, navigation)
            .await
            .map_err(|(code, message)| {
                Refusal::new(code, format!("{message}; the approval was used up"))
            })
    }

    /// Stops the context's run on its approval store: no grant of this
    /// actor and run can be used any more, and none can be issued until
    /// the host resumes the run (see
    /// [`ApprovalStore::stop_run`](countersign_approval_core::ApprovalStore::stop_run)).
    /// Emits a `tracing` event with the count of grants it stopped.
    /// Without an approval store nothing can be approved, and it answers
    /// zero stopped grants.
    pub async fn stop_run(&self) -> Result<StopOutcome, StoreError> {
        let context = &*self.context;
        let Some(store) = context.approval_store() else {
            return Ok(StopOutcome {
                stopped_grants: 0,
                stopped_standing: 0,
                was_stopped: false,
            });
        };
        let outcome = store
            .stop_run(context.actor_id(), context.run_id(), context.now())
            .await;
        match &outcome {
            Ok(stop) => tracing::warn!(
                actor = %context.actor_id(),
                run = %context.run_id(),
                stopped_grants = stop.stopped_grants,
                stopped_standing = stop.stopped_standing,
                was_stopped = stop.was_stopped,
                "countersign: the host stopped the run",
            ),
            Err(error) => tracing::error!(
                actor = %context.actor_id(),
                run = %context.run_id(),
                %error,
                "countersign: stopping the run failed; it may not be stopped",
            ),
        }
        outcome
    }

    /// For a backend with pages: the grant's page, if it is the backend's
    /// current page, and (for the operation record) its approver; refusals
    /// consume nothing. `(None, None)` for a backend without pages (no extra
    /// store read), and no page for an accepted unbound grant.
    async fn check_page(
        &self,
        store: &dyn ApprovalStore,
        id: &ApprovalId,
    ) -> Result<(Option<PageBinding>, Option<Option<ApproverId>>), Refusal> {
        let context = &*self.context;
        let current = context.backend().current_page().await.map_err(|error| {
            Refusal::with_reason(
                OutcomeCode::BackendFailed,
                "backend could not observe the page; nothing was performed",
                error.to_string(),
            )
        })?;
        let Some(current) = current else {
            return Ok((None, None));
        };
        let grant = store.get(id).await.map_err(|error| {
            Refusal::with_reason(
                OutcomeCode::StoreUnavailable,
                "approval store is unavailable; nothing was performed",
                format!("reading the grant's page failed: {error}"),
            )
        })?;
        let Some(grant) = grant else {
            return Err(Refusal::new(
                OutcomeCode::ApprovalRequired,
                "approval id is unknown; the host must issue an approval for this action",
            ));
        };
        let approver = Some(grant.approval.approver.as_ref().map(|a| a.id.clone()));
        match grant.approval.page() {
            // A grant that names the document but not the element would
            // act on whatever the selector finds by then.
            Some(bound)
                if bound.same_document(&current)
                    && bound.element.is_none()
                    && !context.accepts_grants_without_element() =>
            {
                Err(Refusal::new(
                    OutcomeCode::ApprovalRequired,
                    "approval binds no target element; the host must approve from a snapshot of the action (or opt in with `accept_grants_without_element`)",
                ))
            }
            // The element, when bound, is the backend's to re-check right
            // before input: `current_page` names the document only.
            Some(bound) if bound.same_document(&current) => Ok((Some(bound), approver)),
            Some(_) => Err(Refusal::new(
                OutcomeCode::ApprovalStale,
                "the page changed since approval (another document, tab or session); the approval was not used",
            )),
            None if context.accepts_unbound_grants() => Ok((None, approver)),
            None => Err(Refusal::new(
                OutcomeCode::ApprovalRequired,
                "approval is not bound to a page; the host must approve on the page the browser shows",
            )),
        }
    }

    async fn consume(
        &self,
        store: &dyn ApprovalStore,
        id: &ApprovalId,
        binding: &Binding,
    ) -> Result<AttemptId, Refusal> {
        let context = &*self.context;
        let unavailable = "approval store is unavailable; nothing was performed";
        let attempt = AttemptId::generate().map_err(|error| {
            Refusal::with_reason(
                OutcomeCode::StoreUnavailable,
                unavailable,
                error.to_string(),
            )
        })?;
        let retry = context.consume_retry();
        let mut tries: u32 = 0;
        loop {
            tries += 1;
            let span = tracing::info_span!(
                measure::CONSUME_SPAN,
                countersign.approval_id = %id,
                countersign.tries = tries,
                countersign.outcome = tracing::field::Empty,
                countersign.stale_reason = tracing::field::Empty,
            );
            let answer = store
                .consume_once(id, binding, context.now(), &attempt)
                .instrument(span.clone())
                .await;
            span.record(
                "countersign.outcome",
                match &answer {
                    Ok(ConsumeOutcome::Consumed { replay: false }) => "consumed",
                    Ok(ConsumeOutcome::Consumed { replay: true }) => "replay",
                    Ok(ConsumeOutcome::Stale(_)) => "stale",
                    Ok(ConsumeOutcome::Unknown) => "unknown",
                    Err(_) => "store_error",
                },
            );
            if let Ok(ConsumeOutcome::Stale(reason)) = &answer {
                span.record("countersign.stale_reason", reason.as_str());
            }
            match answer {
                Ok(ConsumeOutcome::Consumed { replay: false }) => return Ok(attempt),
                // A replay answers a retry whose earlier try was applied.
                Ok(ConsumeOutcome::Consumed { replay: true }) if tries > 1 => return Ok(attempt),
                Ok(ConsumeOutcome::Consumed { replay: true }) => {
                    return Err(self
                        .give_back(
                            store,
                            id,
                            &attempt,
                            "store answered a replay for a new attempt".to_owned(),
                            GaveUp::StoreFailed,
                        )
                        .await);
                }
                Ok(ConsumeOutcome::Stale(reason)) => {
                    measure::stale(reason);
                    return Err(Refusal::new(
                        OutcomeCode::ApprovalStale,
                        stale_message(reason),
                    ));
                }
                Ok(ConsumeOutcome::Unknown) => {
                    return Err(Refusal::new(
                        OutcomeCode::ApprovalRequired,
                        "approval id is unknown; the host must issue an approval for this action",
                    ));
                }
                Err(error) if error.is_retryable() && tries < retry.max_attempts() => {
                    log_retry(context, id, &attempt, tries, &error, "consume");
                    let delay = retry.delay_after(tries);
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                }
                Err(error) => {
                    return Err(self
                        .give_back(
                            store,
                            id,
                            &attempt,
                            format!("consume failed after {tries} tries: {error}"),
                            GaveUp::StoreFailed,
                        )
                        .await);
                }
            }
        }
    }

    /// Gives back the consume of `attempt` the tool gave up on: calls
    /// `abandon`, retrying retryable errors until the context's abandon
    /// timeout, and words the refusal after what it answered.
    async fn give_back(
        &self,
        store: &dyn ApprovalStore,
        id: &ApprovalId,
        attempt: &AttemptId,
        why: String,
        gave_up: GaveUp,
    ) -> Refusal {
        let context = &*self.context;
        let budget = context.abandon_timeout();
        let started = tokio::time::Instant::now();
        let backoff = context.consume_retry().backoff().max(MIN_ABANDON_BACKOFF);
        let mut tries: u32 = 0;
        let answer = loop {
            tries += 1;
            let left = budget.saturating_sub(started.elapsed());
            let answer =
                match tokio::time::timeout(left, store.abandon(id, attempt, context.now())).await {
                    Ok(answer) => answer,
                    Err(_) => Err(StoreError::Timeout {
                        message: format!("abandon: no answer within {} ms", budget.as_millis()),
                    }),
                };
            match answer {
                // An unconfirmed write was applied on the primary: repeating
                // it cannot confirm it sooner.
                Err(error)
                    if error.is_retryable()
                        && !matches!(error, StoreError::DurabilityUnconfirmed { .. })
                        && started.elapsed() + backoff < budget =>
                {
                    log_retry(context, id, attempt, tries, &error, "abandon");
                    tokio::time::sleep(backoff).await;
                }
                answer => break answer,
            }
        };
        let reason = match &answer {
            Ok(outcome) => format!("{why}; abandon: {}", outcome.as_str()),
            Err(error) => format!("{why}; abandon failed after {tries} tries: {error}"),
        };
        Refusal::with_reason(gave_up.code(), given_back_message(gave_up, &answer), reason)
    }
}

/// A grant this call consumed: its id, the attempt that consumed it, and
/// the page it binds (for a backend with pages).
struct Consumed {
    approval_id: ApprovalId,
    attempt: AttemptId,
    page: Option<PageBinding>,
}

/// Step 3: the policy judges the URL, then the action; each is recorded
/// once it is known.
async fn authorize(
    context: &Context,
    request: &Request,
    known: &mut Known,
) -> Result<(AuthorizedUrl, Action), Refusal> {
    let policy = context.source_policy();
    let url = policy
        .authorize_destination(&request.url)
        .await
        .map_err(|denial| Refusal::new(OutcomeCode::NotAuthorized, denial.to_string()))?;
    known.url = Some(url.as_str().to_owned());
    let action = policy
        .authorize_action(&request.action)
        .map_err(|denial| Refusal::new(OutcomeCode::NotAuthorized, denial.to_string()))?;
    known.digest = Some(action.digest());
    Ok((url, action))
}

/// Step 4: the grant the call names, and whether it is a navigation's (a
/// navigation's grant names its destination, not a page: it is performed
/// by the backend's navigation, wherever the tab is).
fn grant_named_by(request: &Request, action: &Action) -> Result<(ApprovalId, bool), Refusal> {
    let Some(approval_id) = ApprovalId::parse(&request.approval_id) else {
        return Err(Refusal::new(
            OutcomeCode::ApprovalRequired,
            "approval id is malformed; the host must issue an approval for this action",
        ));
    };
    let navigation = action.method() == NAVIGATE_METHOD;
    if navigation && action.selector() != NAVIGATE_SELECTOR {
        return Err(Refusal::new(
            OutcomeCode::NotAuthorized,
            format!("a navigation's selector must be `{NAVIGATE_SELECTOR}`"),
        ));
    }
    Ok((approval_id, navigation))
}

/// Step 4c: a `deny` rule that matches the grant's target refuses the call
/// before anything is consumed.
fn refuse_if_a_rule_denies(
    context: &Context,
    url: &AuthorizedUrl,
    action: &Action,
    page: Option<&PageBinding>,
) -> Result<(), Refusal> {
    let Some(rules) = context.rules() else {
        return Ok(());
    };
    let target = ProposedTarget {
        url,
        action,
        element: page.and_then(|page| page.element.as_ref()),
    };
    match rules.decide(target).denied_by() {
        Some(rule) => Err(Refusal::by_rule(rule)),
        None => Ok(()),
    }
}

/// What the backend may write while performing: anything for a person's or
/// a standing grant's approval; for a rule's grant, and any decider this
/// code does not know, reading only (and the rules' allowed writes).
fn writes_of(context: &Context, decided_by: DecidedBy) -> WriteAccess {
    match decided_by {
        DecidedBy::Person | DecidedBy::Standing => WriteAccess::Open,
        _ => WriteAccess::ReadOnly {
            allowed: context
                .rules()
                .map(|rules| rules.allowed_writes().to_vec())
                .unwrap_or_default(),
        },
    }
}

/// The answer of a performed call.
fn performed(
    request: ActionRequest,
    landed: Option<Landed>,
    decided_by: DecidedBy,
    refused_writes: Vec<RefusedWrite>,
) -> Performed {
    Performed {
        operation_id: request.operation_id,
        approval_id: request.approval_id,
        url: request.url,
        action: request.action,
        landed,
        decided_by,
        refused_writes,
    }
}
