//! The routes, and what every response gets whichever handler answered:
//! the cross-site refusal before any handler runs, and the security
//! headers.

use axum::Router;
use axum::http::header::{self, HeaderName, HeaderValue};
use axum::http::{Response as HttpResponse, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::csrf::{CsrfLayer, ProtectionError};

use crate::handlers::{proposal, run, standing};
use crate::state::App;

const STYLESHEET: &str = include_str!("../static/style.css");

/// The Content-Security-Policy of every response: nothing but the pages'
/// own stylesheet and images, no script at all, forms only to this origin,
/// never framed.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; img-src 'self'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(crate) fn router(shared: App) -> Router {
    Router::new()
        .route("/runs/{actor}/{run}", get(run::run_page))
        .route("/runs/{actor}/{run}/stop", post(run::stop_run))
        .route(
            "/runs/{actor}/{run}/revoke",
            post(standing::revoke_standing),
        )
        .route("/proposals/{id}", get(proposal::proposal_page))
        .route("/proposals/{id}/screenshot.png", get(proposal::screenshot))
        .route("/proposals/{id}/target.png", get(proposal::target_crop))
        .route("/proposals/{id}/approve", post(proposal::approve))
        .route("/proposals/{id}/deny", post(proposal::deny))
        .route(
            "/proposals/{id}/approve-standing",
            post(standing::approve_standing_page),
        )
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
