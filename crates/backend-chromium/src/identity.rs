//! Element identity: what an element-bound grant says the target is, read
//! when the approver's snapshot is taken and again right before each input
//! event (issue 21 §1).
//!
//! Role and accessible name come from Chromium's accessibility tree
//! (`Accessibility.getPartialAXTree` on the element's node), computed by the
//! browser and not by a page script; tag, text and the bound attributes
//! come from a function in an isolated world (`js/identity.js`); the frame
//! chain from the protocol's frame tree (origin and loader id).

use std::collections::BTreeMap;

use chromiumoxide::cdp::browser_protocol::accessibility::{AxValue, GetPartialAxTreeParams};
use countersign_approval_core::{ElementIdentity, FrameIdentity};
use serde::Deserialize;

use crate::browser::{MainFrame, Tab};
use crate::perform::Refused;
use crate::script::{self, On};
use crate::target::Target;

/// What `js/identity.js` reads.
#[derive(Debug, Deserialize)]
struct Read {
    tag: String,
    text: String,
    attributes: BTreeMap<String, String>,
}

impl Tab {
    /// The identity of `target`'s element, in `frame` (the main frame: the
    /// backend resolves selectors there, so the chain is that one frame).
    pub(crate) async fn identity(
        &self,
        target: &Target,
        frame: &MainFrame,
    ) -> Result<ElementIdentity, Refused> {
        let params = GetPartialAxTreeParams {
            backend_node_id: Some(target.node),
            fetch_relatives: Some(false),
            ..GetPartialAxTreeParams::default()
        };
        let tree = self.inner.page.execute(params).await.map_err(|e| {
            format!("chromium did not answer `Accessibility.getPartialAXTree`: {e}")
        })?;
        let node = tree
            .result
            .nodes
            .iter()
            .find(|n| n.backend_dom_node_id == Some(target.node))
            .ok_or_else(|| "the accessibility tree has no node for the target".to_owned())?;
        let role = text_of(node.role.as_ref());
        let name = text_of(node.name.as_ref());
        let read: Read = self
            .call_value(script::IDENTITY, On::Object(&target.element), Vec::new())
            .await
            .map_err(|e| e.to_string())?;
        let frames = vec![FrameIdentity::new(
            frame.origin.clone(),
            frame.revision.as_str(),
        )];
        ElementIdentity::new(role, &name, &read.tag, &read.text, read.attributes, frames)
            .map_err(|e| format!("the target's identity cannot be bound: {e}"))
    }
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
