//! The approval link of a pending proposal, offered to a client that
//! declared URL-mode elicitation: shared by countersign's own tools and the
//! Playwright-compatible mode.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, InputRequest, InputRequests, InputRequiredResult,
};
use rmcp::service::RequestContext;
use serde_json::Value;

/// How long a client may keep the approval link's elicitation open: as
/// long as a proposal waits by default.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);

/// The words the client shows with the approval link.
pub(crate) fn link_message(id: &str) -> String {
    format!(
        "A browser action needs your approval. Open the approval page to review proposal {id} and approve or deny it there."
    )
}

/// Whether the caller declared URL-mode elicitation, in this request's
/// capabilities or (on 2025-11-25) at initialize.
pub(crate) fn supports_url_elicitation(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|capabilities| capabilities.elicitation)
        .is_some_and(|elicitation| elicitation.url.is_some())
}

/// The pending proposal's id and approval link in `result`, if it is one.
pub(crate) fn pending_link(result: &Value) -> Option<(&str, url::Url)> {
    if result.get("status").and_then(Value::as_str) != Some("pending") {
        return None;
    }
    let link = result.get("approval_url").and_then(Value::as_str)?;
    let id = result.get("proposal_id").and_then(Value::as_str)?;
    Some((id, url::Url::parse(link).ok()?))
}

/// Asks a client that supports URL-mode elicitation to open the approval
/// page of a pending proposal, without waiting for its answer.
///
/// The answer decides nothing: `accept` only means the client showed the
/// link. A proposal is approved on the approval page, by a person the
/// host's authentication names, and by nothing a client sends.
pub(crate) fn offer_link(context: &RequestContext<RoleServer>, result: &Value) {
    let Some((id, url)) = pending_link(result) else {
        return;
    };
    if !supports_url_elicitation(context) {
        return;
    }
    let peer = context.peer.clone();
    let id = id.to_owned();
    let message = link_message(&id);
    // Not awaited: the tool result (with the same link) must not wait for
    // a person to look.
    tokio::spawn(async move {
        let answer = peer
            .elicit_url_with_timeout(message, url, id, Some(ELICITATION_TIMEOUT))
            .await;
        tracing::debug!(
            ?answer,
            "the client answered the approval link's elicitation"
        );
    });
}

/// The key of the approval link's elicitation among a round's input
/// requests.
pub(crate) const APPROVAL_LINK_INPUT: &str = "approval_link";

/// Whether the request runs on a protocol without the initialize
/// handshake (2026-07-28 and later): the server cannot send a request of
/// its own, and asks for input through the call's result instead.
pub(crate) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| !version.has_initialize())
}

/// On 2026-07-28, the approval link of a pending proposal as a URL
/// elicitation in an `input_required` result, with `state` as the request
/// state the client's retry carries, for a client that declared URL-mode
/// elicitation.
pub(crate) fn link_input_required(
    context: &RequestContext<RoleServer>,
    result: &Value,
    state: String,
) -> Option<InputRequiredResult> {
    if !supports_url_elicitation(context) {
        return None;
    }
    let (id, url) = pending_link(result)?;
    let elicitation = ElicitRequest::new(ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: link_message(id),
        url: url.to_string(),
        // 2026-07-28 has no elicitation id: the request's key names it.
        elicitation_id: String::new(),
    });
    let requests = InputRequests::from([(
        APPROVAL_LINK_INPUT.to_owned(),
        InputRequest::Elicitation(elicitation),
    )]);
    Some(InputRequiredResult::new(Some(requests), Some(state)))
}
