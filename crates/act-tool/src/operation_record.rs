//! The operation record of every tool call, in one place: its id, the
//! one log event per call (argument values never logged), the warning of a
//! store call tried again, and the record of a call that consumes no grant.

use std::sync::atomic::{AtomicU64, Ordering};

use countersign_approval_core::{
    ApprovalId, AttemptId, GivenApprovalId, OperationId, OperationRecord, OutcomeCode, StoreError,
};
use countersign_canonical_policy::ActionDigest;

use crate::context::Context;

/// A fresh operation id. If the OS random source fails, a process-unique
/// fallback (`op_fallback` + process id + counter) keeps the record and the
/// result identifiable; the call itself then fails closed when it needs an
/// attempt id.
pub(crate) fn new_operation_id() -> OperationId {
    static FALLBACK: AtomicU64 = AtomicU64::new(0);
    loop {
        match OperationId::generate() {
            Ok(id) => return id,
            Err(error) => {
                tracing::error!(%error, "could not generate an operation id; using a fallback");
                let n = FALLBACK.fetch_add(1, Ordering::Relaxed);
                let text = format!(
                    "{}fallback{:016x}{n:016x}",
                    OperationId::PREFIX,
                    std::process::id()
                );
                // 46 characters of `[a-z0-9_]`: always an id, so the loop
                // runs at most once.
                if let Some(id) = OperationId::parse(&text) {
                    return id;
                }
            }
        }
    }
}

/// A warning that `call` (`consume` or `abandon`) failed and is tried
/// again with the same attempt id.
pub(crate) fn log_retry(
    context: &Context,
    id: &ApprovalId,
    attempt: &AttemptId,
    tries: u32,
    error: &StoreError,
    call: &'static str,
) {
    tracing::warn!(
        actor = %context.actor_id(),
        run = %context.run_id(),
        approval_id = %id,
        attempt = %attempt,
        tries,
        %error,
        call,
        "browser_act: a store call failed, retrying with the same attempt id",
    );
}

/// One event per call. Argument values are never logged; the approval id
/// is logged only when it has the shape of an id.
pub(crate) fn log_call(
    context: &Context,
    operation_id: &OperationId,
    given: &GivenApprovalId,
    code: OutcomeCode,
    reason: &str,
) {
    let approval_id = match given {
        GivenApprovalId::Absent => "<none>",
        GivenApprovalId::WellFormed(id) => id.as_str(),
        _ => "<malformed>",
    };
    let actor = context.actor_id().as_str();
    let run = context.run_id().as_str();
    let outcome = code.as_str();
    match code {
        OutcomeCode::Ok => tracing::info!(
            operation_id = %operation_id, actor, run, approval_id, outcome, reason,
            "browser_act performed",
        ),
        OutcomeCode::StoreUnavailable | OutcomeCode::BackendFailed => tracing::error!(
            operation_id = %operation_id, actor, run, approval_id, outcome, reason,
            "browser_act failed",
        ),
        _ => tracing::warn!(
            operation_id = %operation_id, actor, run, approval_id, outcome, reason,
            "browser_act refused",
        ),
    }
}

/// Logs one call of a tool that consumes no grant (`browser_navigate`,
/// `browser_observe`, a refused `browser_propose`) and writes its one
/// operation record, the reason prefixed with the tool's name.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn record_tool_call(
    context: &Context,
    operation_id: &OperationId,
    url: Option<String>,
    action_digest: Option<ActionDigest>,
    outcome: OutcomeCode,
    reason: &str,
    started_at: countersign_approval_core::Timestamp,
    tool: &'static str,
) {
    let actor = context.actor_id().as_str();
    let run = context.run_id().as_str();
    match outcome {
        OutcomeCode::Ok => {
            tracing::info!(operation_id = %operation_id, actor, run, tool, reason, "countersign: page tool answered")
        }
        OutcomeCode::BackendFailed | OutcomeCode::StoreUnavailable => {
            tracing::error!(operation_id = %operation_id, actor, run, tool, outcome = outcome.as_str(), reason, "countersign: page tool failed")
        }
        _ => {
            tracing::warn!(operation_id = %operation_id, actor, run, tool, outcome = outcome.as_str(), reason, "countersign: page tool refused")
        }
    }
    let record = OperationRecord {
        operation_id: operation_id.clone(),
        actor_id: context.actor_id().clone(),
        run_id: context.run_id().clone(),
        approval_id: GivenApprovalId::Absent,
        url,
        action_digest,
        approver_id: None,
        outcome,
        reason: format!("{tool}: {reason}"),
        started_at,
        finished_at: context.now(),
    };
    if let Err(error) = context.operation_store().record(record).await {
        tracing::error!(operation_id = %operation_id, actor, run, tool, %error, "countersign: the operation record could not be written");
    }
}
