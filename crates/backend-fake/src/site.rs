//! A small in-memory website for the fake backend: pages by URL, each a
//! list of elements with roles and names, so navigation, observation and
//! refs work offline exactly as the tools see them on a live page.

use std::collections::BTreeMap;

use countersign_approval_core::{
    BackendError, ElementIdentity, ElementRef, FrameIdentity, Navigation, ObservedNode,
    ObservedPage, PageBinding, RefPage,
};

/// The session id the fake's pages report.
pub const FAKE_SESSION: &str = "fake-session";
/// The tab id the fake's pages report.
pub const FAKE_TAB: &str = "fake-tab";

/// One element of a [`FakePage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeElement {
    role: String,
    name: String,
    tag: String,
    selector: Option<String>,
    depth: usize,
    value: Option<String>,
    states: Vec<String>,
}

impl FakeElement {
    /// An element with `role` and accessible `name`, at depth 0, tag `div`,
    /// no selector (a selector names it for actions; refs always do).
    pub fn new(role: impl Into<String>, name: impl Into<String>) -> FakeElement {
        FakeElement {
            role: role.into(),
            name: name.into(),
            tag: "div".to_owned(),
            selector: None,
            depth: 0,
            value: None,
            states: Vec::new(),
        }
    }

    /// The CSS selector that names it (compared as text).
    pub fn selector(mut self, selector: impl Into<String>) -> FakeElement {
        self.selector = Some(selector.into());
        self
    }

    /// Its tag (lower-case letters, digits and `-`).
    pub fn tag(mut self, tag: impl Into<String>) -> FakeElement {
        self.tag = tag.into();
        self
    }

    /// How deep it sits in the page's tree.
    pub fn depth(mut self, depth: usize) -> FakeElement {
        self.depth = depth;
        self
    }

    /// Its value (a text box's text).
    pub fn value(mut self, value: impl Into<String>) -> FakeElement {
        self.value = Some(value.into());
        self
    }

    /// One more state (`checked`, `disabled`, …).
    pub fn state(mut self, state: impl Into<String>) -> FakeElement {
        self.states.push(state.into());
        self
    }

    fn identity(&self, origin: &str, revision: &str) -> Result<ElementIdentity, BackendError> {
        ElementIdentity::new(
            self.role.clone(),
            &self.name,
            &self.tag,
            &self.name,
            BTreeMap::new(),
            vec![FrameIdentity::new(origin, revision)],
        )
        .map_err(|error| {
            BackendError::not_dispatched(format!("the fake element is invalid: {error}"))
        })
    }
}

/// One page of a [`FakeSite`]: a title and elements in document order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FakePage {
    title: String,
    elements: Vec<FakeElement>,
}

impl FakePage {
    /// An empty page titled `title`.
    pub fn new(title: impl Into<String>) -> FakePage {
        FakePage {
            title: title.into(),
            elements: Vec::new(),
        }
    }

    /// This page with one more element, after the others.
    pub fn element(mut self, element: FakeElement) -> FakePage {
        self.elements.push(element);
        self
    }
}

/// A website in memory: pages by URL (the canonical URL a policy gives,
/// e.g. `https://docs.example.com/`), redirects, and URLs that never load.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FakeSite {
    pages: BTreeMap<String, FakePage>,
    redirects: BTreeMap<String, String>,
}

impl FakeSite {
    /// A site with no page.
    pub fn new() -> FakeSite {
        FakeSite::default()
    }

    /// This site with `page` at `url`.
    pub fn page(mut self, url: impl Into<String>, page: FakePage) -> FakeSite {
        self.pages.insert(url.into(), page);
        self
    }

    /// This site with `from` redirecting to `to` (any URL: the caller's
    /// policy judges where a navigation lands).
    pub fn redirect(mut self, from: impl Into<String>, to: impl Into<String>) -> FakeSite {
        self.redirects.insert(from.into(), to.into());
        self
    }
}

/// The page the fake shows: which document, its refs' page number, and
/// its elements, each with the number its ref carries (kept when others
/// are removed, so a ref never moves to another element).
#[derive(Debug, Clone)]
pub(crate) struct Shown {
    url: String,
    revision: String,
    ref_page: RefPage,
    title: String,
    elements: Vec<(u64, FakeElement)>,
}

/// The site and what it shows.
#[derive(Debug, Clone)]
pub(crate) struct SiteState {
    site: FakeSite,
    shown: Shown,
    revisions: u64,
}

/// The longest redirect chain followed.
const MAX_REDIRECTS: usize = 10;

impl SiteState {
    pub(crate) fn new(site: FakeSite) -> SiteState {
        SiteState {
            site,
            shown: Shown {
                url: "about:blank".to_owned(),
                revision: "rev-0".to_owned(),
                ref_page: RefPage::allocate(),
                title: String::new(),
                elements: Vec::new(),
            },
            revisions: 0,
        }
    }

    pub(crate) fn binding(&self) -> PageBinding {
        PageBinding::new(FAKE_SESSION, FAKE_TAB, self.shown.revision.clone())
    }

    /// Goes to `url`, following redirects; an unknown URL shows an empty
    /// error page and says so.
    pub(crate) fn navigate(&mut self, url: &str) -> Navigation {
        let mut url = url.to_owned();
        for _ in 0..MAX_REDIRECTS {
            match self.site.redirects.get(&url) {
                Some(to) => url = to.clone(),
                None => break,
            }
        }
        self.revisions += 1;
        let page = self.site.pages.get(&url).cloned();
        let failure = page.is_none();
        let page = page.unwrap_or_default();
        self.shown = Shown {
            url: url.clone(),
            revision: format!("rev-{}", self.revisions),
            ref_page: RefPage::allocate(),
            title: page.title,
            elements: (1..).zip(page.elements).collect(),
        };
        if failure {
            Navigation::failed(url, self.binding(), "net::ERR_NAME_NOT_RESOLVED")
        } else {
            Navigation::new(url, self.binding())
        }
    }

    pub(crate) fn observe(&self) -> ObservedPage {
        let nodes = self
            .shown
            .elements
            .iter()
            .map(|(n, element)| {
                let mut node = ObservedNode::new(element.depth, &element.role, &element.name)
                    .with_ref(self.shown.ref_page.element(*n));
                if let Some(value) = &element.value {
                    node = node.with_value(value);
                }
                for state in &element.states {
                    node = node.with_state(state);
                }
                node
            })
            .collect();
        ObservedPage::new(
            self.shown.url.clone(),
            self.shown.title.clone(),
            self.binding(),
            nodes,
        )
    }

    pub(crate) fn url(&self) -> &str {
        &self.shown.url
    }

    /// The element `selector` names (a ref selector or a CSS selector
    /// compared as text) and its identity. A ref of another page, or of an
    /// element no longer on this one, is a changed target; a selector that
    /// names nothing is `Ok(None)`.
    pub(crate) fn target(&self, selector: &str) -> Result<Option<ElementIdentity>, BackendError> {
        let element = match ElementRef::from_selector(selector) {
            Some(Err(_)) => {
                return Err(BackendError::not_dispatched(
                    "the selector is not a ref browser_observe handed out",
                ));
            }
            Some(Ok(element_ref)) => {
                if element_ref.page() != self.shown.ref_page {
                    return Err(BackendError::stale_target(
                        "this ref belongs to an earlier page; observe again",
                    ));
                }
                match self
                    .shown
                    .elements
                    .iter()
                    .find(|(n, _)| *n == element_ref.element())
                {
                    Some((_, element)) => element,
                    None => {
                        return Err(BackendError::stale_target(
                            "the element this ref named is no longer on the page; observe again",
                        ));
                    }
                }
            }
            None => match self
                .shown
                .elements
                .iter()
                .find(|(_, e)| e.selector.as_deref() == Some(selector))
            {
                Some((_, element)) => element,
                None => return Ok(None),
            },
        };
        let origin = origin_of(&self.shown.url);
        element.identity(&origin, &self.shown.revision).map(Some)
    }

    /// Renames the element `selector` names on the shown page (the page's
    /// script relabelled it): same document, same ref.
    pub(crate) fn rename(&mut self, selector: &str, name: &str) -> bool {
        self.edit(selector, |element| element.name = name.to_owned())
    }

    /// Removes the element `selector` names from the shown page.
    pub(crate) fn remove(&mut self, selector: &str) -> bool {
        let Some(n) = self.number_of(selector) else {
            return false;
        };
        self.shown.elements.retain(|(m, _)| *m != n);
        true
    }

    fn edit(&mut self, selector: &str, change: impl FnOnce(&mut FakeElement)) -> bool {
        let Some(n) = self.number_of(selector) else {
            return false;
        };
        match self.shown.elements.iter_mut().find(|(m, _)| *m == n) {
            Some((_, element)) => {
                change(element);
                true
            }
            None => false,
        }
    }

    fn number_of(&self, selector: &str) -> Option<u64> {
        match ElementRef::from_selector(selector) {
            Some(Ok(element_ref)) if element_ref.page() == self.shown.ref_page => {
                Some(element_ref.element())
            }
            Some(_) => None,
            None => self
                .shown
                .elements
                .iter()
                .find(|(_, e)| e.selector.as_deref() == Some(selector))
                .map(|(n, _)| *n),
        }
    }
}

/// `scheme://host[:port]` of `url`, or `null` when it has none.
fn origin_of(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "null".to_owned();
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() {
        "null".to_owned()
    } else {
        format!("{scheme}://{host}")
    }
}
