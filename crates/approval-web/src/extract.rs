//! What a handler is handed before it runs: who is looking ([`Viewer`]),
//! and the ids in the address ([`ProposalPath`], [`RunPath`]), each
//! refused with the error page the handler would show.

use axum::extract::{FromRequestParts, OriginalUri, Path};
use axum::http::StatusCode;
use axum::http::request::Parts;
use countersign_approval_core::policy::quote_untrusted;
use countersign_approval_core::{ActorId, ApproverId, ProposalId, RunId};

use crate::error::PageError;
use crate::state::App;

/// The authenticated approver of a request, and the path the router is
/// mounted at (for links and redirects).
#[derive(Clone)]
pub(crate) struct Viewer {
    pub(crate) approver: ApproverId,
    pub(crate) base: String,
}

impl FromRequestParts<App> for Viewer {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &App) -> Result<Self, PageError> {
        // The path extractors below need the viewer for their refusals:
        // the host's `Approvers` is asked once per request all the same.
        // Only this crate can name the type, so no one else can put one
        // in a request.
        if let Some(viewer) = parts.extensions.get::<Viewer>() {
            return Ok(viewer.clone());
        }
        let base = mount_path(parts);
        match state.approvers.approver(parts).await {
            // A person recorded as `rule:…` or `standing:…` would read as
            // a rule's or a standing grant's decision to the model and in
            // every record.
            Some(approver) if approver.is_reserved() => Err(PageError::new(
                &base,
                None,
                StatusCode::FORBIDDEN,
                "Not allowed",
                "approver ids that start with `rule:` or `standing:` are kept for rules and standing grants; the host must name people otherwise",
            )),
            Some(approver) => {
                let viewer = Viewer { approver, base };
                parts.extensions.insert(viewer.clone());
                Ok(viewer)
            }
            None => Err(PageError::new(
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

impl Viewer {
    pub(crate) fn error(
        &self,
        status: StatusCode,
        title: &'static str,
        message: impl Into<String>,
    ) -> PageError {
        PageError::new(&self.base, Some(&self.approver), status, title, message)
    }

    pub(crate) fn store_unavailable(
        &self,
        error: &dyn std::fmt::Display,
        changed: bool,
    ) -> PageError {
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

    pub(crate) fn not_found(&self, id: &ProposalId) -> PageError {
        self.error(
            StatusCode::NOT_FOUND,
            "Not found",
            format!("no proposal `{id}`"),
        )
    }

    pub(crate) fn forbidden_run(&self, actor: &ActorId, run: &RunId) -> PageError {
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
    pub(crate) fn forbidden_proposal(&self) -> PageError {
        self.error(
            StatusCode::FORBIDDEN,
            "Not allowed",
            "you may not review this proposal",
        )
    }

    pub(crate) fn bad_token(&self) -> PageError {
        self.error(
            StatusCode::FORBIDDEN,
            "Form refused",
            "this form was not issued to you for this decision: reload the page and decide again; nothing changed",
        )
    }

    pub(crate) fn unreadable_form(&self) -> PageError {
        self.error(
            StatusCode::BAD_REQUEST,
            "Form refused",
            "the form could not be read; nothing changed",
        )
    }
}

/// The proposal id of the address (`/proposals/{id}…`): malformed ⇒ 400.
/// Asked after [`Viewer`], so an anonymous request is answered 401 first.
pub(crate) struct ProposalPath(pub(crate) ProposalId);

impl FromRequestParts<App> for ProposalPath {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &App) -> Result<Self, PageError> {
        let viewer = Viewer::from_request_parts(parts, state).await?;
        let Ok(Path(text)) = Path::<String>::from_request_parts(parts, state).await else {
            return Err(viewer.error(
                StatusCode::BAD_REQUEST,
                "Bad address",
                "the proposal id in the address is not valid text",
            ));
        };
        ProposalId::parse(&text).map(ProposalPath).ok_or_else(|| {
            viewer.error(
                StatusCode::BAD_REQUEST,
                "Bad address",
                format!("`{}` is not a proposal id", quote_untrusted(&text)),
            )
        })
    }
}

/// The actor and run of the address (`/runs/{actor}/{run}…`): invalid ⇒
/// 400. Asked after [`Viewer`], so an anonymous request is answered 401
/// first.
pub(crate) struct RunPath {
    pub(crate) actor: ActorId,
    pub(crate) run: RunId,
}

impl FromRequestParts<App> for RunPath {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &App) -> Result<Self, PageError> {
        let viewer = Viewer::from_request_parts(parts, state).await?;
        let bad = |message: String| viewer.error(StatusCode::BAD_REQUEST, "Bad address", message);
        let Ok(Path((actor, run))) =
            Path::<(String, String)>::from_request_parts(parts, state).await
        else {
            return Err(bad(
                "the actor and run in the address are not valid text".to_owned()
            ));
        };
        let actor = ActorId::new(actor).map_err(|e| bad(e.to_string()))?;
        let run = RunId::new(run).map_err(|e| bad(e.to_string()))?;
        Ok(RunPath { actor, run })
    }
}
