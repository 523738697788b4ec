//! Element identity: what an element-bound grant says the target is, read
//! when the approver's snapshot is taken and again right before each input
//! event (issue 21 §1).
//!
//! Role and accessible name come from Chromium's accessibility tree
//! (`Accessibility.getPartialAXTree` on the element's node), computed by the
//! browser and not by a page script, and so do the landmarks around it
//! (its ancestors' landmark roles, the innermost first); tag, text and the
//! bound attributes come from a function in an isolated world
//! (`js/identity.js`); the frame chain from the protocol's frame tree
//! (origin and loader id).
//!
//! For a target whose input would submit a form (see
//! [`Plan::activation`]), the same function reads the form data set the
//! submit would send; a password is bound by an HMAC-SHA-256 under the
//! browser's own random key ([`FormKey`](crate::form_key::FormKey)), so the value never leaves this
//! process and its hash cannot be looked up in a dictionary.

use std::collections::BTreeMap;

use chromiumoxide::cdp::browser_protocol::accessibility::{
    AxNode, AxValue, GetPartialAxTreeParams,
};
use countersign_approval_core::{
    ElementIdentity, FormField, FormSubmission, FormSubmissionError, FrameIdentity, LANDMARK_ROLES,
    MAX_FORM_FIELDS, MAX_LANDMARKS,
};
use serde::Deserialize;
use serde_json::Value;

use crate::browser::{MainFrame, Tab};
use crate::error::{Refused, protocol, quoted};
use crate::plan::Plan;
use crate::script::{self, Arg, On};
use crate::target::{Miss, Target};

/// What `js/identity.js` reads.
#[derive(Debug, Deserialize)]
struct Read {
    tag: String,
    text: String,
    attributes: BTreeMap<String, String>,
    submission: Option<ReadSubmission>,
}

/// The form a submit would send, as `js/identity.js` reads it.
#[derive(Debug, Deserialize)]
struct ReadSubmission {
    /// The form's id, name or action, for messages.
    form: String,
    /// The first entries (at most [`MAX_FORM_FIELDS`]).
    entries: Vec<ReadEntry>,
    /// How many entries the form would send.
    total: usize,
    /// A control whose value cannot be read, by name.
    #[serde(default)]
    unreadable: Option<String>,
}

/// One entry, with the value as the page holds it.
#[derive(Debug, Deserialize)]
struct ReadEntry {
    kind: String,
    name: String,
    value: String,
    #[serde(default)]
    size: u64,
}

impl Tab {
    /// The identity of `target`'s element, in `frame` (the main frame: the
    /// backend resolves selectors there, so the chain is that one frame),
    /// with the form data set when `plan`'s input would submit a form.
    ///
    /// An element whose identity cannot be bound (a form past the bounds,
    /// a control whose value cannot be read) is [`Miss::Stale`]: what a
    /// person approved cannot be what it is now. A protocol or script
    /// failure is [`Miss::Refused`].
    pub(crate) async fn identity(
        &self,
        target: &Target,
        frame: &MainFrame,
        plan: &Plan,
    ) -> Result<ElementIdentity, Miss> {
        let params = GetPartialAxTreeParams {
            backend_node_id: Some(target.node),
            // Its ancestors, for the landmarks around it.
            fetch_relatives: Some(true),
            ..GetPartialAxTreeParams::default()
        };
        let tree = self
            .inner
            .page
            .execute(params)
            .await
            .map_err(|e| protocol("Accessibility.getPartialAXTree", e))?;
        let node = tree
            .result
            .nodes
            .iter()
            .find(|n| n.backend_dom_node_id == Some(target.node))
            .ok_or_else(|| "the accessibility tree has no node for the target".to_owned())?;
        let role = text_of(node.role.as_ref());
        let name = text_of(node.name.as_ref());
        let landmarks = landmarks_around(node, &tree.result.nodes);
        let activation = plan.activation().map_or(Value::Null, Value::from);
        let read: Read = self
            .call_value(
                script::IDENTITY,
                On::Object(&target.element),
                vec![Arg::Value(activation)],
            )
            .await
            .map_err(|e| e.to_string())?;
        let frames = vec![FrameIdentity::new(
            frame.origin.clone(),
            frame.revision.as_str(),
        )];
        let identity =
            ElementIdentity::new(role, &name, &read.tag, &read.text, read.attributes, frames)
                .and_then(|identity| identity.with_landmarks(landmarks))
                .map_err(|e| Miss::Stale(format!("its identity cannot be bound: {e}")))?;
        match read.submission {
            None => Ok(identity),
            Some(read) => Ok(identity.with_submission(self.submission(read)?)),
        }
    }

    /// The form data set as bound: passwords hashed, bounds checked.
    fn submission(&self, read: ReadSubmission) -> Result<FormSubmission, Miss> {
        let form = quoted(&read.form);
        if let Some(unreadable) = read.unreadable {
            return Err(Miss::Stale(format!(
                "the form `{form}` has a control `{}` whose value this backend cannot read \
                 (a form-associated custom element), so what it submits cannot be bound",
                quoted(&unreadable)
            )));
        }
        let unbound =
            |e: FormSubmissionError| Miss::Stale(format!("the form `{form}` cannot be bound: {e}"));
        if read.total > MAX_FORM_FIELDS {
            return Err(unbound(FormSubmissionError::TooManyFields {
                fields: read.total,
            }));
        }
        let key = &self.inner.chromium.running.form_key;
        let fields = read
            .entries
            .into_iter()
            .map(|entry| match entry.kind.as_str() {
                "password" => key.password(entry.name, &entry.value),
                "file" => Ok(FormField::file(entry.name, entry.value, entry.size)),
                _ => Ok(FormField::text(entry.name, entry.value)),
            })
            .collect::<Result<Vec<_>, Refused>>()
            .map_err(Miss::Refused)?;
        FormSubmission::new(fields).map_err(unbound)
    }
}

/// The landmark roles of `node`'s ancestors in `tree`, the innermost
/// first, at most [`MAX_LANDMARKS`].
fn landmarks_around(node: &AxNode, tree: &[AxNode]) -> Vec<String> {
    let mut landmarks = Vec::new();
    let mut parent = node.parent_id.as_ref();
    // Bounded: a tree that loops (it should not) ends the walk.
    for _ in 0..tree.len() {
        let Some(id) = parent else { break };
        if landmarks.len() == MAX_LANDMARKS {
            break;
        }
        let Some(ancestor) = tree.iter().find(|n| &n.node_id == id) else {
            break;
        };
        let role = text_of(ancestor.role.as_ref());
        if LANDMARK_ROLES.contains(&role.as_str()) {
            landmarks.push(role);
        }
        parent = ancestor.parent_id.as_ref();
    }
    landmarks
}

/// An accessibility value as text: a string as it is, anything else as
/// its JSON, nothing as the empty string.
fn text_of(value: Option<&AxValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}
