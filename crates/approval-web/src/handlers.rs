//! The routes. `GET` handlers only read the store; only `POST` handlers,
//! after the cross-site check and the form token, decide or stop.

// A refusal here is the finished page sent for the request, built at most
// once per request and returned straight away: boxing it would cost an
// allocation and buy nothing.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::extract::rejection::{FormRejection, PathRejection, QueryRejection};
use axum::extract::{Form, FromRequestParts, OriginalUri, Path, Query, State};
use axum::http::header::{self, HeaderName, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Response as HttpResponse, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use countersign_approval_core::policy::quote_untrusted;
use countersign_approval_core::{
    ActorId, ApprovalId, ApproveError, ApproverId, DecisionOutcome, GrantState,
    MAX_LISTED_PROPOSALS, MAX_NOTE_BYTES, ProposalId, ProposalState, ProposalStatus, RunId,
    StoredProposal, Timestamp,
};
use serde::Deserialize;
use tower_http::csrf::{CsrfLayer, ProtectionError};

use crate::pages::{Shared, proposal_path, run_path};
use crate::view::{
    DecisionForms, DecisionView, ElementView, ErrorPage, Notice, PageView, ProposalPage,
    ProposalRow, RunPage, Shown, When, duration_text,
};

type App = Arc<Shared>;

const STYLESHEET: &str = include_str!("../static/style.css");

/// The Content-Security-Policy of every response: nothing but the pages'
/// own stylesheet and images, no script at all, forms only to this origin,
/// never framed.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; img-src 'self'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(crate) fn router(shared: App) -> Router {
    Router::new()
        .route("/runs/{actor}/{run}", get(run_page))
        .route("/runs/{actor}/{run}/stop", post(stop_run))
        .route("/proposals/{id}", get(proposal_page))
        .route("/proposals/{id}/screenshot.png", get(screenshot))
        .route("/proposals/{id}/approve", post(approve))
        .route("/proposals/{id}/deny", post(deny))
        .route("/style.css", get(stylesheet))
        .with_state(shared)
        // Refuses a cross-site POST (Sec-Fetch-Site, else Origin against
        // Host) before any handler, authentication or store call runs.
        .layer(CsrfLayer::new().with_rejection_response(cross_site_refusal))
        // Outermost, so that refusals from the layers inside get the
        // headers too.
        .layer(axum::middleware::map_response(security_headers))
}

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            HeaderName::from_static("cross-origin-resource-policy"),
            HeaderValue::from_static("same-origin"),
        ),
    ] {
        headers.insert(name, value);
    }
    response
}

fn cross_site_refusal(_: ProtectionError) -> HttpResponse<axum::body::Body> {
    tracing::warn!(
        target: "countersign_approval_web",
        "refused a cross-site form post"
    );
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "refused: this form was posted from another site; nothing changed\n",
    )
        .into_response()
}

async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        STYLESHEET,
    )
        .into_response()
}

/// The authenticated approver of a request, and the path the router is
/// mounted at (for links and redirects).
struct Viewer {
    approver: ApproverId,
    base: String,
}

impl FromRequestParts<App> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &App) -> Result<Self, Response> {
        let base = mount_path(parts);
        match state.approvers.approver(parts).await {
            Some(approver) => Ok(Viewer { approver, base }),
            None => Err(error_page(
                &base,
                None,
                StatusCode::UNAUTHORIZED,
                "Sign-in required",
                "sign in to review proposals",
            )),
        }
    }
}

/// Where the router is mounted: what `Router::nest` stripped from the
/// request path ("" when it is not nested).
fn mount_path(parts: &Parts) -> String {
    let Some(original) = parts.extensions.get::<OriginalUri>() else {
        return String::new();
    };
    let base = original
        .path()
        .strip_suffix(parts.uri.path())
        .unwrap_or_default();
    // A prefix that a browser could read as another host (`//evil`) or a
    // path it would rewrite is never put into a link or a redirect.
    if base.starts_with('/') && !base.starts_with("//") && !base.contains('\\') {
        base.to_owned()
    } else {
        String::new()
    }
}

fn render(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            html,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(target: "countersign_approval_web", %error, "could not render a page");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "the page could not be shown\n",
            )
                .into_response()
        }
    }
}

fn error_page(
    base: &str,
    approver: Option<&ApproverId>,
    status: StatusCode,
    title: &'static str,
    message: impl Into<String>,
) -> Response {
    render(
        status,
        &ErrorPage {
            base: base.to_owned(),
            approver: approver.map(|a| Shown::new(a.as_str())),
            code: status.as_u16(),
            title,
            message: Shown::new(&message.into()),
        },
    )
}

impl Viewer {
    fn error(
        &self,
        status: StatusCode,
        title: &'static str,
        message: impl Into<String>,
    ) -> Response {
        error_page(&self.base, Some(&self.approver), status, title, message)
    }

    fn store_unavailable(&self, error: &dyn std::fmt::Display, changed: bool) -> Response {
        tracing::error!(target: "countersign_approval_web", %error, "approval store failed");
        // A store error may or may not have been applied: say so rather
        // than claim that nothing changed.
        let message = if changed {
            "the approval store did not answer: reload the page to see whether anything changed"
        } else {
            "the approval store is unavailable; try again"
        };
        self.error(
            StatusCode::SERVICE_UNAVAILABLE,
            "Store unavailable",
            message,
        )
    }

    fn not_found(&self, id: &ProposalId) -> Response {
        self.error(
            StatusCode::NOT_FOUND,
            "Not found",
            format!("no proposal `{id}`"),
        )
    }

    fn forbidden_run(&self, actor: &ActorId, run: &RunId) -> Response {
        self.error(
            StatusCode::FORBIDDEN,
            "Not allowed",
            format!(
                "you may not review run `{}` of actor `{}`",
                quote_untrusted(run.as_str()),
                quote_untrusted(actor.as_str())
            ),
        )
    }

    /// The refusal for a proposal of a run the viewer may not review: it
    /// names nothing of the proposal (not its run, actor or action), since
    /// nothing of a run is shown before `may_review` allows it.
    fn forbidden_proposal(&self) -> Response {
        self.error(
            StatusCode::FORBIDDEN,
            "Not allowed",
            "you may not review this proposal",
        )
    }

    fn bad_token(&self) -> Response {
        self.error(
            StatusCode::FORBIDDEN,
            "Form refused",
            "this form was not issued to you for this decision: reload the page and decide again; nothing changed",
        )
    }

    /// Reads a proposal id from the path: malformed ⇒ 400.
    fn proposal_id(
        &self,
        path: Result<Path<String>, PathRejection>,
    ) -> Result<ProposalId, Response> {
        let text = match path {
            Ok(Path(text)) => text,
            Err(_) => {
                return Err(self.error(
                    StatusCode::BAD_REQUEST,
                    "Bad address",
                    "the proposal id in the address is not valid text",
                ));
            }
        };
        ProposalId::parse(&text).ok_or_else(|| {
            self.error(
                StatusCode::BAD_REQUEST,
                "Bad address",
                format!("`{}` is not a proposal id", quote_untrusted(&text)),
            )
        })
    }

    /// Reads actor and run ids from the path: invalid ⇒ 400.
    fn run_ids(
        &self,
        path: Result<Path<(String, String)>, PathRejection>,
    ) -> Result<(ActorId, RunId), Response> {
        let bad = |message: String| self.error(StatusCode::BAD_REQUEST, "Bad address", message);
        let Ok(Path((actor, run))) = path else {
            return Err(bad(
                "the actor and run in the address are not valid text".to_owned()
            ));
        };
        let actor = ActorId::new(actor).map_err(|e| bad(e.to_string()))?;
        let run = RunId::new(run).map_err(|e| bad(e.to_string()))?;
        Ok((actor, run))
    }

    /// Loads a proposal the viewer may review: unknown ⇒ 404, not theirs
    /// to review ⇒ 403.
    async fn load(&self, app: &App, id: &ProposalId) -> Result<StoredProposal, Response> {
        let stored = match app.store.get_proposal(id).await {
            Ok(Some(stored)) => stored,
            Ok(None) => return Err(self.not_found(id)),
            Err(error) => return Err(self.store_unavailable(&error, false)),
        };
        let (actor, run) = (&stored.proposal.actor_id, &stored.proposal.run_id);
        if !app.approvers.may_review(&self.approver, actor, run).await {
            return Err(self.forbidden_proposal());
        }
        Ok(stored)
    }
}

/// The fields a form token signs.
fn decision_fields<'a>(
    what: &'a str,
    approver: &'a ApproverId,
    id: &'a ProposalId,
) -> [&'a str; 3] {
    [what, approver.as_str(), id.as_str()]
}

fn stop_fields<'a>(approver: &'a ApproverId, actor: &'a ActorId, run: &'a RunId) -> [&'a str; 4] {
    ["stop", approver.as_str(), actor.as_str(), run.as_str()]
}

#[derive(Debug, Default, Deserialize)]
struct OutcomeQuery {
    outcome: Option<String>,
    tag: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct StoppedQuery {
    stopped: Option<String>,
    was: Option<String>,
    tag: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct DecisionForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    note: String,
}

async fn run_page(
    State(app): State<App>,
    viewer: Viewer,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<StoppedQuery>, QueryRejection>,
) -> Response {
    let (actor, run) = match viewer.run_ids(path) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    if !app
        .approvers
        .may_review(&viewer.approver, &actor, &run)
        .await
    {
        return viewer.forbidden_run(&actor, &run);
    }
    let now = app.clock.now();
    let pending = match app.store.pending_proposals(&actor, &run, now).await {
        Ok(pending) => pending,
        Err(error) => return viewer.store_unavailable(&error, false),
    };
    let notice = query.ok().and_then(|Query(q)| {
        let (stopped, was, tag) = (q.stopped?, q.was?, q.tag?);
        let fields = stopped_fields(&viewer.approver, &actor, &run, &stopped, &was);
        if !app.key.verify_tag(&fields, &tag) {
            return None;
        }
        Some(if was == "true" {
            Notice {
                kind: "info",
                text: "The run was already stopped, nothing changed: 0 grants stopped.".to_owned(),
            }
        } else {
            let grants = if stopped == "1" { "grant" } else { "grants" };
            Notice {
                kind: "warn",
                text: format!(
                    "Run stopped: {stopped} {grants} stopped. No grant of this run can be used, and none issued, until the host resumes it."
                ),
            }
        })
    });
    let rows = pending
        .iter()
        .map(|stored| {
            let p = &stored.proposal;
            ProposalRow {
                id: p.id.to_string(),
                href: proposal_path(&viewer.base, &p.id),
                method: p.action.method().to_owned(),
                selector: Shown::new(p.action.selector()),
                description: Shown::new(p.action.description()),
                url: Shown::new(&p.url),
                expires: When::new(p.expires_at, now),
            }
        })
        .collect();
    let stop_token = app.key.token(&stop_fields(&viewer.approver, &actor, &run));
    render(
        StatusCode::OK,
        &RunPage {
            base: viewer.base.clone(),
            approver: Some(Shown::new(viewer.approver.as_str())),
            actor: Shown::new(actor.as_str()),
            run: Shown::new(run.as_str()),
            notice,
            proposals: rows,
            stop_action: format!(
                "{}/stop",
                run_path(&viewer.base, actor.as_str(), run.as_str())
            ),
            stop_token,
        },
    )
}

fn stopped_fields<'a>(
    approver: &'a ApproverId,
    actor: &'a ActorId,
    run: &'a RunId,
    stopped: &'a str,
    was: &'a str,
) -> [&'a str; 6] {
    [
        "stopped",
        approver.as_str(),
        actor.as_str(),
        run.as_str(),
        stopped,
        was,
    ]
}

async fn stop_run(
    State(app): State<App>,
    viewer: Viewer,
    path: Result<Path<(String, String)>, PathRejection>,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Response {
    let (actor, run) = match viewer.run_ids(path) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    let Ok(Form(form)) = form else {
        return unreadable_form(&viewer);
    };
    if !app
        .key
        .verify(&stop_fields(&viewer.approver, &actor, &run), &form.token)
    {
        return viewer.bad_token();
    }
    if !app
        .approvers
        .may_review(&viewer.approver, &actor, &run)
        .await
    {
        return viewer.forbidden_run(&actor, &run);
    }
    let now = app.clock.now();
    let outcome = match app.store.stop_run(&actor, &run, now).await {
        Ok(outcome) => outcome,
        Err(error) => return viewer.store_unavailable(&error, true),
    };
    tracing::warn!(
        target: "countersign_approval_web",
        actor = %actor, run = %run, approver = %viewer.approver,
        stopped_grants = outcome.stopped_grants, was_stopped = outcome.was_stopped,
        "run stopped from the approval pages"
    );
    let stopped = outcome.stopped_grants.to_string();
    let was = outcome.was_stopped.to_string();
    let tag = app.key.tag(&stopped_fields(
        &viewer.approver,
        &actor,
        &run,
        &stopped,
        &was,
    ));
    Redirect::to(&format!(
        "{}?stopped={stopped}&was={was}&tag={tag}",
        run_path(&viewer.base, actor.as_str(), run.as_str())
    ))
    .into_response()
}

fn unreadable_form(viewer: &Viewer) -> Response {
    viewer.error(
        StatusCode::BAD_REQUEST,
        "Form refused",
        "the form could not be read; nothing changed",
    )
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

fn outcome_notice(code: &str) -> Option<Notice> {
    let (kind, text) = match code {
        "approved" => (
            "ok",
            "Approved: one grant was issued for exactly this action.",
        ),
        "denied" => ("ok", "Denied: no grant was issued."),
        "already-approved" => (
            "info",
            "Already approved, nothing changed: no second grant was issued.",
        ),
        "already-denied" => (
            "info",
            "Already denied, nothing changed: no grant was issued.",
        ),
        "unchanged" => ("info", "Nothing changed."),
        "expired" => (
            "warn",
            "Expired, nothing changed: the proposal can no longer be decided, and no grant was issued.",
        ),
        "stopped" => (
            "warn",
            "The run is stopped, nothing changed: no grant was issued. The host must resume the run and the model propose again.",
        ),
        _ => return None,
    };
    Some(Notice {
        kind,
        text: text.to_owned(),
    })
}

fn outcome_fields<'a>(approver: &'a ApproverId, id: &'a ProposalId, code: &'a str) -> [&'a str; 4] {
    ["outcome", approver.as_str(), id.as_str(), code]
}

fn decided(app: &App, viewer: &Viewer, id: &ProposalId, outcome: &DecisionOutcome) -> Response {
    let code = outcome_code(outcome);
    let tag = app.key.tag(&outcome_fields(&viewer.approver, id, code));
    Redirect::to(&format!(
        "{}?outcome={code}&tag={tag}",
        proposal_path(&viewer.base, id)
    ))
    .into_response()
}

async fn approve(
    State(app): State<App>,
    viewer: Viewer,
    path: Result<Path<String>, PathRejection>,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Response {
    let id = match viewer.proposal_id(path) {
        Ok(id) => id,
        Err(response) => return response,
    };
    let Ok(Form(form)) = form else {
        return unreadable_form(&viewer);
    };
    if !app.key.verify(
        &decision_fields("approve", &viewer.approver, &id),
        &form.token,
    ) {
        return viewer.bad_token();
    }
    let note = form.note.trim();
    if note.len() > MAX_NOTE_BYTES || note.chars().any(char::is_control) {
        return viewer.error(
            StatusCode::BAD_REQUEST,
            "Form refused",
            "the note must be at most 1024 bytes without control characters; nothing changed",
        );
    }
    let stored = match viewer.load(&app, &id).await {
        Ok(stored) => stored,
        Err(response) => return response,
    };
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
        });
    let grant = match grant {
        Ok(grant) => grant,
        Err(error) => {
            return viewer.error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Not approved",
                format!("could not make the grant: {error}; nothing changed"),
            );
        }
    };
    let approval_id = grant.id.clone();
    let outcome = match app.store.approve_proposal(&id, grant, now).await {
        Ok(outcome) => outcome,
        Err(ApproveError::Store(error)) => return viewer.store_unavailable(&error, true),
        Err(error) => {
            tracing::error!(target: "countersign_approval_web", %error, proposal = %id, "approval refused by the store");
            return viewer.error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Not approved",
                format!("the store refused the grant: {error}; nothing changed"),
            );
        }
    };
    if outcome == DecisionOutcome::Unknown {
        return viewer.not_found(&id);
    }
    if outcome == DecisionOutcome::Approved {
        tracing::info!(
            target: "countersign_approval_web",
            proposal = %id, approval_id = %approval_id, approver = %viewer.approver,
            actor = %stored.proposal.actor_id, run = %stored.proposal.run_id,
            "proposal approved"
        );
    }
    decided(&app, &viewer, &id, &outcome)
}

async fn deny(
    State(app): State<App>,
    viewer: Viewer,
    path: Result<Path<String>, PathRejection>,
    form: Result<Form<DecisionForm>, FormRejection>,
) -> Response {
    let id = match viewer.proposal_id(path) {
        Ok(id) => id,
        Err(response) => return response,
    };
    let Ok(Form(form)) = form else {
        return unreadable_form(&viewer);
    };
    if !app
        .key
        .verify(&decision_fields("deny", &viewer.approver, &id), &form.token)
    {
        return viewer.bad_token();
    }
    if let Err(response) = viewer.load(&app, &id).await {
        return response;
    }
    let now = app.clock.now();
    let outcome = match app
        .store
        .deny_proposal(&id, Some(&viewer.approver), now)
        .await
    {
        Ok(outcome) => outcome,
        Err(error) => return viewer.store_unavailable(&error, true),
    };
    if outcome == DecisionOutcome::Unknown {
        return viewer.not_found(&id);
    }
    if outcome == DecisionOutcome::Denied {
        tracing::info!(
            target: "countersign_approval_web",
            proposal = %id, approver = %viewer.approver,
            "proposal denied"
        );
    }
    decided(&app, &viewer, &id, &outcome)
}

async fn proposal_page(
    State(app): State<App>,
    viewer: Viewer,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<OutcomeQuery>, QueryRejection>,
) -> Response {
    let id = match viewer.proposal_id(path) {
        Ok(id) => id,
        Err(response) => return response,
    };
    let stored = match viewer.load(&app, &id).await {
        Ok(stored) => stored,
        Err(response) => return response,
    };
    let now = app.clock.now();
    let p = &stored.proposal;
    let status = stored.status_at(now);
    // A pending, unexpired proposal that its run's list leaves out belongs
    // to a stopped run (the list is complete below its cap): say so rather
    // than offer an Approve that can only be refused.
    let run_stopped = if status == ProposalStatus::Pending {
        match app
            .store
            .pending_proposals(&p.actor_id, &p.run_id, now)
            .await
        {
            Ok(list) => {
                list.len() < MAX_LISTED_PROPOSALS && !list.iter().any(|s| s.proposal.id == id)
            }
            Err(error) => return viewer.store_unavailable(&error, false),
        }
    } else {
        false
    };
    let notice = query.ok().and_then(|Query(q)| {
        let (code, tag) = (q.outcome?, q.tag?);
        app.key
            .verify_tag(&outcome_fields(&viewer.approver, &id, &code), &tag)
            .then(|| outcome_notice(&code))
            .flatten()
    });
    let decision = match &stored.state {
        ProposalState::Pending => None,
        ProposalState::Approved {
            approval_id,
            by,
            at,
        } => Some(DecisionView {
            what: "approved",
            by: by.as_ref().map(|by| Shown::new(by.as_str())),
            at: When::new(*at, now),
            approval_id: Some(approval_id.to_string()),
            grant_state: grant_state(&app, approval_id, now).await,
        }),
        ProposalState::Denied { by, at } => Some(DecisionView {
            what: "denied",
            by: by.as_ref().map(|by| Shown::new(by.as_str())),
            at: When::new(*at, now),
            approval_id: None,
            grant_state: None,
        }),
    };
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
        }
    });
    let snapshot = p.snapshot.as_ref();
    let page = ProposalPage {
        base: viewer.base.clone(),
        approver: Some(Shown::new(viewer.approver.as_str())),
        id: id.to_string(),
        actor: Shown::new(p.actor_id.as_str()),
        run: Shown::new(p.run_id.as_str()),
        run_href: run_path(&viewer.base, p.actor_id.as_str(), p.run_id.as_str()),
        url: Shown::new(&p.url),
        method: p.action.method().to_owned(),
        selector: Shown::new(p.action.selector()),
        description: Shown::new(p.action.description()),
        arguments: p
            .action
            .arguments()
            .iter()
            .map(|(name, value)| (name.clone(), Shown::new(value)))
            .collect(),
        digest: p.action_digest.to_hex(),
        proposed_at: When::new(p.proposed_at, now),
        expires_at: When::new(p.expires_at, now),
        grant_ttl: duration_text(app.grant_ttl),
        grant_expires: When::new(now.saturating_add(app.grant_ttl), now),
        page: snapshot.map(|s| PageView {
            session: s.page.session_id.clone(),
            target: s.page.target_id.clone(),
            revision: s.page.page_revision.clone(),
            element: s.page.element.as_ref().map(ElementView::new),
        }),
        screenshot_href: snapshot
            .filter(|s| s.screenshot_png.is_some())
            .map(|_| format!("{}/screenshot.png", proposal_path(&viewer.base, &id))),
        target_found: snapshot.map(|s| s.target_found),
        status: match status {
            ProposalStatus::Pending if run_stopped => "stopped",
            ProposalStatus::Pending => "pending",
            ProposalStatus::Approved => "approved",
            ProposalStatus::Denied => "denied",
            ProposalStatus::Expired => "expired",
        },
        decision,
        notice,
        forms,
    };
    render(StatusCode::OK, &page)
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
    let expires = When::new(stored.approval.expires_at, now);
    Some(match stored.state {
        GrantState::Active if stored.approval.is_expired_at(now) => {
            format!("it expired unused at {}", expires.text)
        }
        GrantState::Active => format!(
            "unused, usable once until {} ({})",
            expires.text, expires.relative
        ),
        GrantState::Consumed { at, .. } => {
            let at = When::new(at, now);
            format!("used at {} ({})", at.text, at.relative)
        }
        GrantState::Revoked => "revoked by the host".to_owned(),
        GrantState::Locked => "locked after too many calls that did not match it".to_owned(),
        GrantState::Stopped => "stopped with its run".to_owned(),
    })
}

async fn screenshot(
    State(app): State<App>,
    viewer: Viewer,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let id = match viewer.proposal_id(path) {
        Ok(id) => id,
        Err(response) => return response,
    };
    let stored = match viewer.load(&app, &id).await {
        Ok(stored) => stored,
        Err(response) => return response,
    };
    match stored.proposal.snapshot.and_then(|s| s.screenshot_png) {
        Some(png) => ([(header::CONTENT_TYPE, "image/png")], png).into_response(),
        None => viewer.error(
            StatusCode::NOT_FOUND,
            "Not found",
            format!("proposal `{id}` has no screenshot"),
        ),
    }
}
