//! A proposal's page, its screenshot, and its Approve and Deny.

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use countersign_approval_core::{
    ApprovalId, ApproveError, DecidedBy, DecisionOutcome, MAX_LISTED_PROPOSALS, MAX_NOTE_BYTES,
    ProposalId, ProposalState, ProposalStatus, StandingScope, StoredProposal, Timestamp, measure,
};
use serde::Deserialize;
use tracing::Instrument;

use crate::error::PageError;
use crate::extract::{ProposalPath, Viewer};
use crate::forms::{DecisionForm, decision_fields, outcome_fields};
use crate::handlers::checks::signed_form;
use crate::paths::proposal_path;
use crate::state::App;
use crate::view::{self, DecisionForms, DecisionView, Notice, ProposalPage, StandingOffer, render};

/// The result link a decision redirects to: its outcome code, and the tag
/// that signs it.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct OutcomeQuery {
    outcome: Option<String>,
    tag: Option<String>,
}

/// Loads a proposal the viewer may review: unknown ⇒ 404, not theirs
/// to review ⇒ 403.
pub(crate) async fn load(
    app: &App,
    viewer: &Viewer,
    id: &ProposalId,
) -> Result<StoredProposal, PageError> {
    let stored = match app.store.get_proposal(id).await {
        Ok(Some(stored)) => stored,
        Ok(None) => return Err(viewer.not_found(id)),
        Err(error) => return Err(viewer.store_unavailable(&error, false)),
    };
    let (actor, run) = (&stored.proposal.actor_id, &stored.proposal.run_id);
    if !app.approvers.may_review(&viewer.approver, actor, run).await {
        return Err(viewer.forbidden_proposal());
    }
    Ok(stored)
}

/// The outcome codes a result link carries, and what the page says.
fn outcome_code(outcome: &DecisionOutcome) -> &'static str {
    match outcome {
        DecisionOutcome::Approved => "approved",
        DecisionOutcome::Denied => "denied",
        DecisionOutcome::AlreadyDecided(ProposalState::Approved { .. }) => "already-approved",
        DecisionOutcome::AlreadyDecided(ProposalState::Denied { .. }) => "already-denied",
        DecisionOutcome::AlreadyDecided(ProposalState::Pending) => "unchanged",
        DecisionOutcome::Expired => "expired",
        DecisionOutcome::Stopped => "stopped",
        DecisionOutcome::Unknown => "unknown",
    }
}

pub(crate) fn decided(
    app: &App,
    viewer: &Viewer,
    id: &ProposalId,
    outcome: &DecisionOutcome,
) -> Response {
    decided_as(app, viewer, id, outcome_code(outcome))
}

/// The redirect to the proposal's page that shows `code`'s notice.
pub(crate) fn decided_as(app: &App, viewer: &Viewer, id: &ProposalId, code: &str) -> Response {
    let tag = app.key.tag(&outcome_fields(&viewer.approver, id, code));
    Redirect::to(&format!(
        "{}?outcome={code}&tag={tag}",
        proposal_path(&viewer.base, id)
    ))
    .into_response()
}

/// The span of a person's decision on proposal `id`, taken `waited` after
/// it was proposed (with the grant an approval issues): its outcome is
/// recorded by [`record_decision`]. The approver is not a field: a host
/// that wants it in its traces pseudonymises it there.
fn decide_span(
    id: &ProposalId,
    approval_id: Option<&ApprovalId>,
    waited: std::time::Duration,
) -> tracing::Span {
    let span = tracing::info_span!(
        measure::DECIDE_SPAN,
        countersign.proposal_id = %id,
        countersign.approval_id = tracing::field::Empty,
        countersign.decided_by = DecidedBy::Person.as_str(),
        countersign.wait_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        countersign.outcome = tracing::field::Empty,
    );
    if let Some(approval_id) = approval_id {
        span.record("countersign.approval_id", approval_id.as_str());
    }
    span
}

/// Records the store's `answer` to a decision on `span`.
fn record_decision<E>(span: &tracing::Span, answer: &Result<DecisionOutcome, E>) {
    let outcome = answer
        .as_ref()
        .map_or("store_error", DecisionOutcome::as_str);
    span.record("countersign.outcome", outcome);
}

pub(crate) async fn approve(
    State(app): State<App>,
    viewer: Viewer,
    ProposalPath(id): ProposalPath,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, PageError> {
    let form = signed_form(
        &app,
        &viewer,
        form,
        &decision_fields("approve", &viewer.approver, &id),
    )?;
    let note = form.note.trim();
    if note.len() > MAX_NOTE_BYTES || note.chars().any(char::is_control) {
        return Err(viewer.error(
            StatusCode::BAD_REQUEST,
            "Form refused",
            "the note must be at most 1024 bytes without control characters; nothing changed",
        ));
    }
    let stored = load(&app, &viewer, &id).await?;
    let now = app.clock.now();
    let grant = stored
        .proposal
        .grant(app.grant_ttl, now, Some(viewer.approver.clone()))
        .and_then(|grant| {
            if note.is_empty() {
                Ok(grant)
            } else {
                grant.with_note(note)
            }
        })
        .map_err(|error| {
            viewer.error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Not approved",
                format!("could not make the grant: {error}; nothing changed"),
            )
        })?;
    let approval_id = grant.id.clone();
    let waited = now.saturating_duration_since(stored.proposal.proposed_at);
    let span = decide_span(&id, Some(&approval_id), waited);
    let answer = app
        .store
        .approve_proposal(&id, grant, now)
        .instrument(span.clone())
        .await;
    record_decision(&span, &answer);
    let outcome = match answer {
        Ok(outcome) => outcome,
        Err(ApproveError::Store(error)) => return Err(viewer.store_unavailable(&error, true)),
        Err(error) => {
            tracing::error!(target: "countersign_approval_web", %error, proposal = %id, "approval refused by the store");
            return Err(viewer.error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Not approved",
                format!("the store refused the grant: {error}; nothing changed"),
            ));
        }
    };
    if outcome == DecisionOutcome::Unknown {
        return Err(viewer.not_found(&id));
    }
    if outcome == DecisionOutcome::Approved {
        measure::decision(true, DecidedBy::Person, waited);
        tracing::info!(
            target: "countersign_approval_web",
            proposal = %id, approval_id = %approval_id, approver = %viewer.approver,
            actor = %stored.proposal.actor_id, run = %stored.proposal.run_id,
            "proposal approved"
        );
    }
    Ok(decided(&app, &viewer, &id, &outcome))
}

pub(crate) async fn deny(
    State(app): State<App>,
    viewer: Viewer,
    ProposalPath(id): ProposalPath,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, PageError> {
    signed_form(
        &app,
        &viewer,
        form,
        &decision_fields("deny", &viewer.approver, &id),
    )?;
    let stored = load(&app, &viewer, &id).await?;
    let now = app.clock.now();
    let waited = now.saturating_duration_since(stored.proposal.proposed_at);
    let span = decide_span(&id, None, waited);
    let answer = app
        .store
        .deny_proposal(&id, Some(&viewer.approver), now)
        .instrument(span.clone())
        .await;
    record_decision(&span, &answer);
    let outcome = answer.map_err(|error| viewer.store_unavailable(&error, true))?;
    if outcome == DecisionOutcome::Unknown {
        return Err(viewer.not_found(&id));
    }
    if outcome == DecisionOutcome::Denied {
        measure::decision(false, DecidedBy::Person, waited);
        tracing::info!(
            target: "countersign_approval_web",
            proposal = %id, approver = %viewer.approver,
            "proposal denied"
        );
    }
    Ok(decided(&app, &viewer, &id, &outcome))
}

pub(crate) async fn proposal_page(
    State(app): State<App>,
    viewer: Viewer,
    ProposalPath(id): ProposalPath,
    query: Result<Query<OutcomeQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    let stored = load(&app, &viewer, &id).await?;
    let now = app.clock.now();
    let p = &stored.proposal;
    let status = stored.status_at(now);
    // A pending, unexpired proposal that its run's list leaves out belongs
    // to a stopped run (the list is complete below its cap): say so rather
    // than offer an Approve that can only be refused.
    let run_stopped = if status == ProposalStatus::Pending {
        let list = app
            .store
            .pending_proposals(&p.actor_id, &p.run_id, now)
            .await
            .map_err(|error| viewer.store_unavailable(&error, false))?;
        list.len() < MAX_LISTED_PROPOSALS && !list.iter().any(|s| s.proposal.id == id)
    } else {
        false
    };
    let notice = query.ok().and_then(|Query(q)| {
        let (code, tag) = (q.outcome?, q.tag?);
        app.key
            .verify_tag(&outcome_fields(&viewer.approver, &id, &code), &tag)
            .then(|| Notice::outcome(&code))
            .flatten()
    });
    let grant_state = match &stored.state {
        ProposalState::Approved { approval_id, .. } => grant_state(&app, approval_id, now).await,
        _ => None,
    };
    let decision = DecisionView::of(&stored.state, now, grant_state);
    let forms = (status == ProposalStatus::Pending && !run_stopped).then(|| {
        let base = proposal_path(&viewer.base, &id);
        DecisionForms {
            approve_action: format!("{base}/approve"),
            approve_token: app
                .key
                .token(&decision_fields("approve", &viewer.approver, &id)),
            deny_action: format!("{base}/deny"),
            deny_token: app
                .key
                .token(&decision_fields("deny", &viewer.approver, &id)),
            standing: StandingScope::of_proposal(p).map(|scope| {
                StandingOffer::new(
                    &scope,
                    format!("{base}/approve-standing"),
                    app.key
                        .token(&decision_fields("approve-standing", &viewer.approver, &id)),
                )
            }),
        }
    });
    let page = ProposalPage {
        status: ProposalPage::status(status, run_stopped),
        decision,
        notice,
        forms,
        ..ProposalPage::new(&viewer.base, &viewer.approver, p, now, app.grant_ttl)
    };
    Ok(render(StatusCode::OK, &page))
}

/// What became of an approved proposal's grant, read (never consumed) for
/// the approver: `None` when the store cannot say.
async fn grant_state(app: &App, id: &ApprovalId, now: Timestamp) -> Option<String> {
    let stored = match app.store.get(id).await {
        Ok(stored) => stored?,
        Err(error) => {
            tracing::warn!(target: "countersign_approval_web", %error, approval_id = %id, "could not read a grant");
            return None;
        }
    };
    Some(view::grant_state(&stored, now))
}

pub(crate) async fn screenshot(
    State(app): State<App>,
    viewer: Viewer,
    ProposalPath(id): ProposalPath,
) -> Result<Response, PageError> {
    let stored = load(&app, &viewer, &id).await?;
    match stored.proposal.snapshot.and_then(|s| s.screenshot_png) {
        Some(png) => Ok(([(header::CONTENT_TYPE, "image/png")], png).into_response()),
        None => Err(viewer.error(
            StatusCode::NOT_FOUND,
            "Not found",
            format!("proposal `{id}` has no screenshot"),
        )),
    }
}

/// The screenshot cropped around its target, for the page's first screen.
pub(crate) async fn target_crop(
    State(app): State<App>,
    viewer: Viewer,
    ProposalPath(id): ProposalPath,
) -> Result<Response, PageError> {
    let stored = load(&app, &viewer, &id).await?;
    let crop = stored
        .proposal
        .snapshot
        .and_then(|s| s.screenshot_png)
        .and_then(|png| crate::crop::target_crop(&png));
    match crop {
        Some(png) => Ok(([(header::CONTENT_TYPE, "image/png")], png).into_response()),
        None => Err(viewer.error(
            StatusCode::NOT_FOUND,
            "Not found",
            format!("proposal `{id}` has no picture of its target"),
        )),
    }
}
