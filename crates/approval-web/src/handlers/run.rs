//! A run's page and its stop.

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::error::PageError;
use crate::extract::{RunPath, Viewer};
use crate::forms::{DecisionForm, revoke_fields, stop_fields, stopped_fields};
use crate::handlers::checks::{may_review_run, signed_form};
use crate::paths::run_path;
use crate::state::App;
use crate::view::{Notice, ProposalRow, RunPage, StandingRow, render};

/// The result link a stop redirects to: how many grants and standing
/// grants it stopped, whether the run was stopped already, and the tag
/// that signs them.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StoppedQuery {
    stopped: Option<String>,
    standing: Option<String>,
    was: Option<String>,
    tag: Option<String>,
}

pub(crate) async fn run_page(
    State(app): State<App>,
    viewer: Viewer,
    RunPath { actor, run }: RunPath,
    query: Result<Query<StoppedQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    may_review_run(&app, &viewer, &actor, &run).await?;
    let now = app.clock.now();
    let pending = app
        .store
        .pending_proposals(&actor, &run, now)
        .await
        .map_err(|error| viewer.store_unavailable(&error, false))?;
    let notice = query.ok().and_then(|Query(q)| {
        let (stopped, standing, was, tag) = (q.stopped?, q.standing?, q.was?, q.tag?);
        let counts = [stopped.as_str(), standing.as_str()];
        let fields = stopped_fields(&viewer.approver, &actor, &run, counts, &was);
        if !app.key.verify_tag(&fields, &tag) {
            return None;
        }
        Some(Notice::run_stopped(&stopped, &standing, &was))
    });
    let rows = pending
        .iter()
        .map(|stored| ProposalRow::new(stored, &viewer.base, now))
        .collect();
    let standing = app
        .store
        .standing_grants(&actor, &run, now)
        .await
        .map_err(|error| viewer.store_unavailable(&error, false))?
        .iter()
        .map(|stored| {
            let id = stored.grant.id.as_str();
            let token = app
                .key
                .token(&revoke_fields(&viewer.approver, &actor, &run, id));
            StandingRow::new(stored, now, token)
        })
        .collect();
    let stop_token = app.key.token(&stop_fields(&viewer.approver, &actor, &run));
    let page = RunPage {
        standing,
        ..RunPage::new(
            &viewer.base,
            &viewer.approver,
            &actor,
            &run,
            notice,
            rows,
            stop_token,
        )
    };
    Ok(render(StatusCode::OK, &page))
}

pub(crate) async fn stop_run(
    State(app): State<App>,
    viewer: Viewer,
    RunPath { actor, run }: RunPath,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Result<Response, PageError> {
    signed_form(
        &app,
        &viewer,
        form,
        &stop_fields(&viewer.approver, &actor, &run),
    )?;
    may_review_run(&app, &viewer, &actor, &run).await?;
    let now = app.clock.now();
    let outcome = app
        .store
        .stop_run(&actor, &run, now)
        .await
        .map_err(|error| viewer.store_unavailable(&error, true))?;
    tracing::warn!(
        target: "countersign_approval_web",
        actor = %actor, run = %run, approver = %viewer.approver,
        stopped_grants = outcome.stopped_grants, stopped_standing = outcome.stopped_standing,
        was_stopped = outcome.was_stopped,
        "run stopped from the approval pages"
    );
    let stopped = outcome.stopped_grants.to_string();
    let standing = outcome.stopped_standing.to_string();
    let was = outcome.was_stopped.to_string();
    let tag = app.key.tag(&stopped_fields(
        &viewer.approver,
        &actor,
        &run,
        [&stopped, &standing],
        &was,
    ));
    Ok(Redirect::to(&format!(
        "{}?stopped={stopped}&standing={standing}&was={was}&tag={tag}",
        run_path(&viewer.base, actor.as_str(), run.as_str())
    ))
    .into_response())
}
