//! What the backend observes about a page: the things a grant can bind.

use std::fmt;

use countersign_approval_core::PageBinding;
use countersign_canonical_policy::AuthorizedUrl;

macro_rules! opaque_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The id as Chromium reports it.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub(crate) fn new(id: impl Into<String>) -> Self {
                $name(id.into())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

opaque_id!(
    /// The browser context a page lives in (its cookies, storage and
    /// cache): the session the host approved in.
    SessionId
);
opaque_id!(
    /// The tab: Chromium's target id for one page.
    TargetId
);
opaque_id!(
    /// Which document the page's main frame shows: Chromium's loader id of
    /// the main frame's current document. Every new document (navigation,
    /// reload, redirect, form post) gets a new one; a same-document change
    /// (`history.pushState`, a fragment) keeps it and is caught by the URL
    /// check instead.
    PageRevision
);

/// One look at a page: everything a page-bound grant binds besides actor,
/// run and action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageObservation {
    pub(crate) session: SessionId,
    pub(crate) target: TargetId,
    pub(crate) url: AuthorizedUrl,
    pub(crate) revision: PageRevision,
}

impl PageObservation {
    /// The browser context the page lives in.
    pub fn session(&self) -> &SessionId {
        &self.session
    }
    /// The tab.
    pub fn target(&self) -> &TargetId {
        &self.target
    }
    /// The page's current URL, canonicalised by the tab's policy.
    pub fn url(&self) -> &AuthorizedUrl {
        &self.url
    }
    /// The main frame's current document.
    pub fn revision(&self) -> &PageRevision {
        &self.revision
    }
    /// What a page-bound grant binds: session, tab and revision (the URL is
    /// bound separately, as in every grant).
    pub fn binding(&self) -> PageBinding {
        PageBinding {
            session_id: self.session.as_str().to_owned(),
            target_id: self.target.as_str().to_owned(),
            page_revision: self.revision.as_str().to_owned(),
            element: None,
        }
    }
}
