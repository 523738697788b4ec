//! "Approve up to N times until T" on a proposal's page, and the Revoke of
//! a standing grant on its run's page.

use std::time::Duration;

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use countersign_approval_core::{
    Approver, DecisionOutcome, MAX_STANDING_USES, StandingApproveError, StandingId,
    StandingRevokeOutcome, approve_standing,
};

use crate::error::PageError;
use crate::extract::{ProposalPath, RunPath, Viewer};
use crate::forms::{DecisionForm, STANDING_HOURS, decision_fields, revoke_fields};
use crate::handlers::checks::{may_review_run, signed_form};
use crate::handlers::proposal::{decided, decided_as, load};
use crate::paths::run_path;
use crate::state::App;

/// What a form for "up to N times until T" says, once it parses.
fn parse_standing(form: &DecisionForm) -> Result<(u32, Duration), &'static str> {
    let uses = form
        .uses
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|uses| (1..=MAX_STANDING_USES).contains(uses))
        .ok_or("uses must be a whole number from 1 to 100; nothing changed")?;
    let hours = form
        .hours
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|hours| STANDING_HOURS.contains(hours))
        .ok_or("hours must be 1, 2, 4 or 8; nothing changed")?;
    Ok((uses, Duration::from_secs(hours * 3600)))
}

pub(crate) async fn approve_standing_page(
    State(app): State<App>,
    viewer: Viewer,
    ProposalPath(id): ProposalPath,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, PageError> {
    let form = signed_form(
        &app,
        &viewer,
        form,
        &decision_fields("approve-standing", &viewer.approver, &id),
    )?;
    let (uses, ttl) = parse_standing(&form)
        .map_err(|message| viewer.error(StatusCode::BAD_REQUEST, "Form refused", message))?;
    let stored = load(&app, &viewer, &id).await?;
    let now = app.clock.now();
    let approver = Approver {
        id: viewer.approver.clone(),
        approved_at: now,
    };
    let approved = approve_standing(
        app.store.as_ref(),
        &id,
        uses,
        ttl,
        app.grant_ttl,
        approver,
        now,
    )
    .await;
    let approved = match approved {
        Ok(approved) => approved,
        Err(StandingApproveError::Store(error)) => {
            return Err(viewer.store_unavailable(&error, true));
        }
        Err(StandingApproveError::UnknownProposal) => return Err(viewer.not_found(&id)),
        Err(error) => {
            tracing::warn!(target: "countersign_approval_web", %error, proposal = %id, "standing approval refused");
            return Err(viewer.error(
                StatusCode::CONFLICT,
                "Not approved",
                format!("{error}; nothing changed"),
            ));
        }
    };
    if let Some(standing) = &approved.standing {
        tracing::info!(
            target: "countersign_approval_web",
            proposal = %id, standing = %standing.id, uses, approver = %viewer.approver,
            actor = %stored.proposal.actor_id, run = %stored.proposal.run_id,
            "proposal approved with a standing grant"
        );
    }
    match approved.outcome {
        DecisionOutcome::Unknown => Err(viewer.not_found(&id)),
        DecisionOutcome::Approved => Ok(decided_as(&app, &viewer, &id, "approved-standing")),
        other => Ok(decided(&app, &viewer, &id, &other)),
    }
}

pub(crate) async fn revoke_standing(
    State(app): State<App>,
    viewer: Viewer,
    RunPath { actor, run }: RunPath,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, PageError> {
    let Ok(Form(unsigned)) = form else {
        return Err(viewer.unreadable_form());
    };
    let named = unsigned.standing.clone();
    let form = signed_form(
        &app,
        &viewer,
        Ok(Form(unsigned)),
        &revoke_fields(&viewer.approver, &actor, &run, &named),
    )?;
    may_review_run(&app, &viewer, &actor, &run).await?;
    let not_found = || {
        viewer.error(
            StatusCode::NOT_FOUND,
            "Not found",
            format!("no standing approval `{}` in this run", form.standing),
        )
    };
    let id = StandingId::parse(&form.standing).ok_or_else(not_found)?;
    // Only a standing grant of this run is revoked from this run's page.
    let stored = app
        .store
        .get_standing(&id)
        .await
        .map_err(|error| viewer.store_unavailable(&error, false))?
        .filter(|stored| stored.grant.actor_id == actor && stored.grant.run_id == run)
        .ok_or_else(not_found)?;
    let outcome = app
        .store
        .revoke_standing(&stored.grant.id)
        .await
        .map_err(|error| viewer.store_unavailable(&error, true))?;
    if outcome == StandingRevokeOutcome::Revoked {
        tracing::warn!(
            target: "countersign_approval_web",
            actor = %actor, run = %run, standing = %id, approver = %viewer.approver,
            "standing grant revoked from the approval pages"
        );
    }
    Ok(Redirect::to(&run_path(&viewer.base, actor.as_str(), run.as_str())).into_response())
}
