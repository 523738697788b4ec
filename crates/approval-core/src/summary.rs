//! What a person reads first about a proposal, from its bound facts: the
//! approval page's opening sentence and every notification's.

use crate::proposal::Proposal;

/// Who wants to do what to which element where, without any argument
/// value: safe to send to a chat or a mailbox, where the approval page's
/// sign-in does not guard it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposalSummary {
    /// The actor's id.
    pub actor: String,
    /// The action's method (`click`, `fill`, …).
    pub method: String,
    /// The bound element's role (`button`, `link`, …); `None` when no
    /// element was bound.
    pub role: Option<String>,
    /// The bound element's accessible name, when it has one.
    pub name: Option<String>,
    /// The selector the action names, for when there is no name.
    pub selector: String,
    /// The canonical URL's host, and its port when the URL names one.
    pub host: String,
    /// The canonical URL's path.
    pub path: String,
}

impl ProposalSummary {
    /// The summary of `proposal`.
    pub fn of(proposal: &Proposal) -> ProposalSummary {
        let element = proposal.bound_element();
        let (host, path) = match url::Url::parse(&proposal.url) {
            Ok(url) => (
                url.host_str().map_or_else(
                    || proposal.url.clone(),
                    |h| {
                        url.port()
                            .map_or(h.to_owned(), |port| format!("{h}:{port}"))
                    },
                ),
                url.path().to_owned(),
            ),
            Err(_) => (proposal.url.clone(), String::new()),
        };
        ProposalSummary {
            actor: proposal.actor_id.as_str().to_owned(),
            method: proposal.action.method().to_owned(),
            role: element.map(|e| e.role().to_owned()),
            name: element
                .map(|e| e.name().to_owned())
                .filter(|name| !name.is_empty()),
            selector: proposal.action.selector().to_owned(),
            host,
            path,
        }
    }

    /// `the button`, or `the element` when no element was bound.
    pub fn what(&self) -> String {
        format!("the {}", self.role.as_deref().unwrap_or("element"))
    }

    /// The element's name, else the selector.
    pub fn target(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.selector)
    }

    /// One line of plain text: `demo-agent wants to click the button
    /// “count” on 127.0.0.2:42241`. Names and ids are the proposal's own
    /// text: whoever shows the line in a richer format escapes it there.
    pub fn sentence(&self) -> String {
        let target = match &self.name {
            Some(name) => format!("“{name}”"),
            None => format!("`{}`", self.selector),
        };
        format!(
            "{} wants to {} {} {target} on {}",
            self.actor,
            self.method,
            self.what(),
            self.host
        )
    }
}
