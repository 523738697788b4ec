//! What the browse tools and the Act tool share about navigation: how a
//! navigation's grant names its action, and how a landing is judged, for
//! `browser_navigate` and for a navigation performed with a grant alike.

use countersign_approval_core::{Navigation, OutcomeCode, PageBinding};
use countersign_canonical_policy::AuthorizedUrl;

use crate::context::Context;

/// The method of a navigation as a grant names it, when the host makes
/// navigation need one ([`ContextBuilder::require_grant_to_navigate`](crate::ContextBuilder::require_grant_to_navigate)):
/// the grant's action is `{"method": "navigate", "selector": ":root"}` and
/// its URL the destination. The host's policy must allow the method.
pub const NAVIGATE_METHOD: &str = "navigate";

/// The selector of a navigation's action: the whole document.
pub const NAVIGATE_SELECTOR: &str = ":root";

/// Where a navigation landed: the URL as the policy canonicalised it, and
/// the page a page-bound grant would bind there.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Landed {
    /// The landed URL, accepted by the context's policy.
    pub url: AuthorizedUrl,
    /// The page the browser shows.
    pub page: PageBinding,
}

/// Judges where a navigation landed: the landed URL must pass the policy
/// (a redirect to a refused site shows nothing of it), and the page must
/// have loaded.
pub(crate) async fn judge_landing(
    context: &Context,
    navigation: Navigation,
) -> Result<Landed, (OutcomeCode, String)> {
    let url = context
        .source_policy()
        .authorize_destination(&navigation.url)
        .await
        .map_err(|denial| {
            (
                OutcomeCode::NotAuthorized,
                format!("the browser landed on a url the policy refuses; nothing of that page is shown: {denial}"),
            )
        })?;
    if let Some(failure) = navigation.failure {
        return Err((
            OutcomeCode::BackendFailed,
            format!("the page could not be loaded: {failure}"),
        ));
    }
    Ok(Landed {
        url,
        page: navigation.page,
    })
}
