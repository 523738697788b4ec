//! The facts a rule decides on, read once per decision.

use countersign_approval_core::{ElementIdentity, FormFieldKind};
use countersign_canonical_policy::{Action, AuthorizedUrl};

/// What a rule can see of one proposed action: the destination the policy
/// accepted, the canonical action, and the target element as the backend's
/// snapshot read it (none when no element was found, or the backend has no
/// pages).
///
/// Built only from the policy's own outputs ([`AuthorizedUrl`], [`Action`]),
/// so a rule decides only on what the policy already allowed: it can
/// narrow, never widen.
#[derive(Debug, Clone, Copy)]
pub struct ProposedTarget<'a> {
    /// The destination, as the policy accepted it.
    pub url: &'a AuthorizedUrl,
    /// The action, as the policy canonicalised it.
    pub action: &'a Action,
    /// The target element the snapshot bound, if any.
    pub element: Option<&'a ElementIdentity>,
}

/// The facts of an element a rule matches on, derived from its identity.
pub(crate) struct ElementFacts<'a> {
    pub(crate) identity: &'a ElementIdentity,
    pub(crate) input_type: Option<&'a str>,
    /// The host of `href`, when it has one that parses as a URL with a
    /// host.
    pub(crate) link_host: Option<String>,
    /// Where a submit from the target goes: `formaction` over the form's
    /// `action`.
    pub(crate) form_action_host: Option<String>,
    /// `formmethod` over the form's `method`.
    pub(crate) form_method: Option<&'a str>,
    pub(crate) submits_form: bool,
    pub(crate) submitted_kinds: [bool; 3],
}

impl<'a> ElementFacts<'a> {
    pub(crate) fn of(identity: &'a ElementIdentity) -> ElementFacts<'a> {
        let attributes = identity.attributes();
        let attribute = |name: &str| attributes.get(name).map(String::as_str);
        let host_of = |value: Option<&str>| {
            value
                .and_then(|text| url::Url::parse(text).ok())
                .and_then(|url| url.host_str().map(str::to_owned))
        };
        let mut submitted_kinds = [false; 3];
        if let Some(submission) = identity.submission() {
            for field in submission.fields() {
                submitted_kinds[kind_index(field.kind())] = true;
            }
        }
        ElementFacts {
            identity,
            input_type: attribute("type"),
            link_host: host_of(attribute("href")),
            form_action_host: host_of(attribute("formaction").or(attribute("action"))),
            form_method: attribute("formmethod")
                .filter(|m| !m.is_empty())
                .or(attribute("method")),
            submits_form: identity.submission().is_some(),
            submitted_kinds,
        }
    }

    pub(crate) fn submits_kind(&self, kind: FormFieldKind) -> bool {
        self.submitted_kinds[kind_index(kind)]
    }
}

fn kind_index(kind: FormFieldKind) -> usize {
    match kind {
        FormFieldKind::Text => 0,
        FormFieldKind::Password => 1,
        FormFieldKind::File => 2,
    }
}
