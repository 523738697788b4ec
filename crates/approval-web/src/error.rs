//! The one refusal of the handlers: an error page, which a handler
//! returns with `?` wherever it stops.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use countersign_approval_core::ApproverId;

use crate::view::{ErrorPage, Shown, render};

/// A request the pages refuse or cannot answer: the error page sent for
/// it, with the status, under the mount point and (once authenticated)
/// the approver's name. Nothing of the store is shown.
pub(crate) struct PageError {
    status: StatusCode,
    page: ErrorPage,
}

impl PageError {
    /// The page saying `message` under `title`, answered with `status`.
    pub(crate) fn new(
        base: &str,
        approver: Option<&ApproverId>,
        status: StatusCode,
        title: &'static str,
        message: impl Into<String>,
    ) -> Self {
        PageError {
            status,
            page: ErrorPage {
                base: base.to_owned(),
                approver: approver.map(|a| Shown::new(a.as_str())),
                code: status.as_u16(),
                title,
                message: Shown::new(&message.into()),
            },
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        render(self.status, &self.page)
    }
}
