//! Page-bound grants: the page a live backend acts on, bound into a grant.

use crate::{element::ElementIdentity, grant::Approval, grant::ApprovalError};

/// Longest session, target or revision id, in bytes.
pub const MAX_PAGE_ID_BYTES: usize = 256;

/// The page a live backend acts on: the browser session (context) the host
/// approved in, the tab (target), and the revision of the document the
/// main frame shows. A page-bound grant is performed only while the
/// backend's [`current_page`](crate::Backend::current_page) equals it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PageBinding {
    /// The browser session (context).
    pub session_id: String,
    /// The tab (target).
    pub target_id: String,
    /// The main frame's document.
    pub page_revision: String,
    /// What the target element is, for an element-bound grant (taken with
    /// the approver's snapshot); `None` binds the document only.
    pub element: Option<ElementIdentity>,
}

impl PageBinding {
    /// The page with no element bound: the session, tab and document.
    pub fn new(
        session_id: impl Into<String>,
        target_id: impl Into<String>,
        page_revision: impl Into<String>,
    ) -> PageBinding {
        PageBinding {
            session_id: session_id.into(),
            target_id: target_id.into(),
            page_revision: page_revision.into(),
            element: None,
        }
    }

    /// This page with `element` bound.
    pub fn with_element(mut self, element: ElementIdentity) -> PageBinding {
        self.element = Some(element);
        self
    }

    /// Whether `other` is the same session, tab and document (whatever
    /// element either binds): what the Act tool checks before consuming.
    pub fn same_document(&self, other: &PageBinding) -> bool {
        self.session_id == other.session_id
            && self.target_id == other.target_id
            && self.page_revision == other.page_revision
    }

    pub(crate) fn is_valid(&self) -> bool {
        [&self.session_id, &self.target_id, &self.page_revision]
            .iter()
            .all(|id| {
                !id.is_empty()
                    && id.len() <= MAX_PAGE_ID_BYTES
                    && id.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
            })
    }
}

impl AsRef<PageBinding> for PageBinding {
    fn as_ref(&self) -> &PageBinding {
        self
    }
}

impl Approval {
    /// Binds this grant to `page`: the session and tab are kept in
    /// `session_id` (as `session/target`), the revision in
    /// `page_revision`, the target element (when `page` binds one) in
    /// `element`. Ids must be 1 to 256 printable ASCII characters without
    /// `/`.
    pub fn bound_to_page(mut self, page: &PageBinding) -> Result<Approval, ApprovalError> {
        if !page.is_valid() {
            return Err(ApprovalError::InvalidPage);
        }
        self.session_id = Some(format!("{}/{}", page.session_id, page.target_id));
        self.page_revision = Some(page.page_revision.clone());
        self.element = page.element.clone();
        Ok(self)
    }

    /// The page this grant is bound to, or `None` for a grant bound to no
    /// page. A grant with only one of the two fields, or a `session_id`
    /// without `/`, is bound to a page no backend shows (empty ids), so it
    /// never matches: a damaged record fails closed.
    pub fn page(&self) -> Option<PageBinding> {
        if self.session_id.is_none() && self.page_revision.is_none() && self.element.is_none() {
            return None;
        }
        let (session_id, target_id) = self
            .session_id
            .as_deref()
            .and_then(|s| s.split_once('/'))
            .unwrap_or_default();
        Some(PageBinding {
            session_id: session_id.to_owned(),
            target_id: target_id.to_owned(),
            page_revision: self.page_revision.clone().unwrap_or_default(),
            element: self.element.clone(),
        })
    }
}
