//! Refs: the numbers an observation gives a tab's elements, and the way
//! back from a ref to the one DOM node it was given to.
//!
//! Each tab keeps one table for the document its main frame showed when it
//! was last observed: that document's [`RefPage`] and, both ways, which
//! element number belongs to which backend node id (Chromium's id of a DOM
//! node, never reused within a document). Observing the same document
//! again numbers the nodes it already numbered the same way and new nodes
//! after them; observing a new document (a new loader id) starts a new
//! page with an empty table, so every ref of the old one is refused.

use std::collections::HashMap;

use chromiumoxide::cdp::browser_protocol::dom::BackendNodeId;
use countersign_approval_core::{ElementRef, RefPage};

use crate::observation::PageRevision;

/// Why a ref names nothing on this tab's current page.
pub(crate) const EARLIER_PAGE: &str = "this ref belongs to an earlier page; observe again";

/// A tab's ref table: for the document last observed, if any.
#[derive(Debug, Default)]
pub(crate) struct Refs {
    current: Option<PageRefs>,
}

/// The refs of one document.
#[derive(Debug)]
pub(crate) struct PageRefs {
    revision: PageRevision,
    page: RefPage,
    numbers: HashMap<BackendNodeId, u64>,
    /// Element `n` is `nodes[n - 1]`.
    nodes: Vec<BackendNodeId>,
}

impl PageRefs {
    /// The ref of `node`: the one it was given before on this page, or the
    /// next number.
    pub(crate) fn of(&mut self, node: BackendNodeId) -> ElementRef {
        let next = self.nodes.len() as u64 + 1;
        let number = *self.numbers.entry(node).or_insert(next);
        if number == next {
            self.nodes.push(node);
        }
        self.page.element(number)
    }
}

impl Refs {
    /// The table of `revision`: the current one when it belongs to that
    /// document, else a new page with an empty table.
    pub(crate) fn page(&mut self, revision: &PageRevision) -> &mut PageRefs {
        let fresh = !matches!(&self.current, Some(refs) if refs.revision == *revision);
        if fresh {
            self.current = None;
        }
        self.current.get_or_insert_with(|| PageRefs {
            revision: revision.clone(),
            page: RefPage::allocate(),
            numbers: HashMap::new(),
            nodes: Vec::new(),
        })
    }

    /// The node `element_ref` was given to, when the tab still shows
    /// `revision` and that is the document the ref was handed out on; else
    /// why not (a message that tells the model to observe again).
    pub(crate) fn node(
        &self,
        element_ref: ElementRef,
        revision: &PageRevision,
    ) -> Result<BackendNodeId, String> {
        let refs = match &self.current {
            Some(refs) if refs.page == element_ref.page() && refs.revision == *revision => refs,
            _ => return Err(EARLIER_PAGE.to_owned()),
        };
        element_ref
            .element()
            .checked_sub(1)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| refs.nodes.get(i))
            .copied()
            .ok_or_else(|| format!("`{element_ref}` was never shown on this page; observe again"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn node(n: i64) -> BackendNodeId {
        BackendNodeId::new(n)
    }

    #[test]
    fn the_same_document_keeps_its_refs_and_a_new_one_drops_them() {
        let mut refs = Refs::default();
        let first = PageRevision::new("loader-1");
        let a = refs.page(&first).of(node(10));
        let b = refs.page(&first).of(node(20));
        assert_eq!(a.element(), 1);
        assert_eq!(b.element(), 2);
        assert_eq!(refs.page(&first).of(node(20)), b);
        assert_eq!(refs.node(a, &first), Ok(node(10)));
        assert_eq!(refs.node(b, &first), Ok(node(20)));
        let unknown = a.page().element(3);
        assert_eq!(
            refs.node(unknown, &first).unwrap_err(),
            format!("`{unknown}` was never shown on this page; observe again")
        );
        assert!(refs.node(a.page().element(0), &first).is_err());

        // The tab moved on: the old refs name nothing, even before the new
        // document is observed.
        let second = PageRevision::new("loader-2");
        assert_eq!(refs.node(a, &second).unwrap_err(), EARLIER_PAGE);
        let c = refs.page(&second).of(node(10));
        assert_ne!(c.page(), a.page());
        assert_eq!(refs.node(a, &second).unwrap_err(), EARLIER_PAGE);
        assert_eq!(refs.node(c, &second), Ok(node(10)));

        // Another tab's ref (another page number) names nothing here.
        let elsewhere = RefPage::allocate().element(1);
        assert_eq!(refs.node(elsewhere, &second).unwrap_err(), EARLIER_PAGE);
    }
}
