//! The checks more than one handler makes: a `POST` form's token, and
//! whether the viewer may review a run.

use axum::extract::Form;
use axum::extract::rejection::FormRejection;
use countersign_approval_core::{ActorId, RunId};

use crate::error::PageError;
use crate::extract::Viewer;
use crate::forms::DecisionForm;
use crate::state::App;

/// The form of a `POST`, once its token is the one issued to the viewer
/// for `fields`: unreadable ⇒ 400, any other token ⇒ 403.
pub(crate) fn signed_form(
    app: &App,
    viewer: &Viewer,
    form: Result<Form<DecisionForm>, FormRejection>,
    fields: &[&str],
) -> Result<DecisionForm, PageError> {
    let Ok(Form(form)) = form else {
        return Err(viewer.unreadable_form());
    };
    if !app.key.verify(fields, &form.token) {
        return Err(viewer.bad_token());
    }
    Ok(form)
}

/// Refuses (403, naming the run) a run the viewer may not review.
pub(crate) async fn may_review_run(
    app: &App,
    viewer: &Viewer,
    actor: &ActorId,
    run: &RunId,
) -> Result<(), PageError> {
    if app.approvers.may_review(&viewer.approver, actor, run).await {
        Ok(())
    } else {
        Err(viewer.forbidden_run(actor, run))
    }
}
