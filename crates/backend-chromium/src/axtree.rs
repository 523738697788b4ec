//! Observing a page: the main frame's accessibility tree, as the browser
//! computes it (`Accessibility.getFullAXTree`), turned into the
//! [`ObservedNode`]s every backend reports.
//!
//! No page script takes part: the tree comes from the protocol, so a page
//! that replaces `document.querySelector`, `Element.prototype.getAttribute`
//! or `innerText` changes nothing of what is observed. Only the main
//! frame's document is walked; an iframe shows as its `Iframe` node
//! without its content.

use std::collections::{HashMap, HashSet};

use chromiumoxide::cdp::browser_protocol::accessibility::{
    AxNode, AxProperty, AxPropertyName, AxValue, GetFullAxTreeParams,
};
use countersign_approval_core::{BackendError, ObservedNode, ObservedPage};
use serde_json::Value;

use crate::browser::Tab;
use crate::error::quoted;
use crate::refs::PageRefs;

/// Roles whose node is text, not an element: never given a ref.
/// `ListMarker` is a `::marker` pseudo-element, which no input targets.
const NOT_ELEMENTS: &[&str] = &["StaticText", "InlineTextBox", "ListMarker", "RootWebArea"];

/// At most this many nodes are walked; the rest of a larger tree is not
/// reported (the core's snapshot bound is far below it).
const MAX_WALKED: usize = 100_000;

impl Tab {
    /// The page as a model may see it (see
    /// [`ChromiumBackend`](crate::ChromiumBackend)'s `observe`).
    pub(crate) async fn observe_page(&self) -> Result<ObservedPage, BackendError> {
        let failed = |e: crate::error::ChromiumError| BackendError::not_dispatched(e.to_string());
        // Queued behind any action or navigation in progress, so the tree
        // never shows half an input sequence.
        let _one_at_a_time = self.inner.input.lock().await;
        let frame = self.main_frame().await.map_err(failed)?;
        self.inner
            .policy
            .authorize_destination(&frame.url)
            .await
            .map_err(|denial| {
                BackendError::page_not_allowed(format!(
                    "the page is at `{}`, which the policy refuses ({denial})",
                    quoted(&frame.url)
                ))
            })?;
        let params = GetFullAxTreeParams {
            depth: None,
            frame_id: Some(frame.id.clone()),
        };
        let tree = self.inner.page.execute(params).await.map_err(|e| {
            BackendError::not_dispatched(format!(
                "chromium did not answer `Accessibility.getFullAXTree`: {e}"
            ))
        })?;
        // The tree must belong to the document whose refs it gets.
        let last = self.main_frame().await.map_err(failed)?;
        if last.revision != frame.revision || last.url != frame.url {
            return Err(BackendError::not_dispatched(
                "the page changed while it was being observed; observe again",
            ));
        }
        let mut refs = self.inner.refs.lock().await;
        let (title, nodes) = outline(&tree.result.nodes, refs.page(&frame.revision));
        Ok(ObservedPage::new(
            frame.url,
            title,
            self.binding(&frame.revision),
            nodes,
        ))
    }
}

/// One node still to walk: its id, the depth it would be shown at, and the
/// name and value of the nearest shown ancestor (text repeating either is
/// left out).
struct Pending<'a> {
    id: &'a str,
    depth: usize,
    parent: [&'a str; 2],
}

/// The document's title (the root's name) and its nodes in pre-order:
/// ignored nodes, nameless `generic` and `none` nodes and the root are
/// left out with their children lifted a level; `InlineTextBox` nodes and
/// `StaticText` that repeats its parent's name or value are left out with
/// their children. Every element node (one with a DOM node that is not text,
/// the document or a list marker) gets a ref from `refs`.
pub(crate) fn outline(nodes: &[AxNode], refs: &mut PageRefs) -> (String, Vec<ObservedNode>) {
    let by_id: HashMap<&str, &AxNode> = nodes.iter().map(|n| (n.node_id.as_ref(), n)).collect();
    let Some(root) = nodes
        .iter()
        .find(|n| n.parent_id.is_none())
        .or(nodes.first())
    else {
        return (String::new(), Vec::new());
    };
    let title = text_of(root.name.as_ref());
    let mut shown = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![Pending {
        id: root.node_id.as_ref(),
        depth: 0,
        parent: ["", ""],
    }];
    while let Some(Pending { id, depth, parent }) = stack.pop() {
        // A node is walked once, however the answer links it.
        if seen.len() >= MAX_WALKED || !seen.insert(id) {
            continue;
        }
        let Some(&node) = by_id.get(id) else {
            continue;
        };
        let role = text_of(node.role.as_ref());
        let name = text_of(node.name.as_ref());
        let lifted = node.ignored
            || node.parent_id.is_none()
            || (matches!(role.as_str(), "generic" | "none" | "") && name.is_empty());
        if role == "InlineTextBox"
            || (role == "StaticText"
                && !node.ignored
                && parent
                    .iter()
                    .any(|p| !p.trim().is_empty() && name.trim() == p.trim()))
        {
            continue;
        }
        let (child_depth, child_parent) = if lifted {
            (depth, parent)
        } else {
            let mut shown_node = ObservedNode::new(depth, role.as_str(), name.as_str());
            let value = text_of(node.value.as_ref());
            if !value.is_empty() {
                shown_node = shown_node.with_value(value);
            }
            for state in states(node.properties.as_deref().unwrap_or_default()) {
                shown_node = shown_node.with_state(state);
            }
            if let Some(url) = link_url(node.properties.as_deref().unwrap_or_default()) {
                shown_node = shown_node.with_url(url);
            }
            if let Some(dom) = node.backend_dom_node_id
                && !NOT_ELEMENTS.contains(&role.as_str())
            {
                shown_node = shown_node.with_ref(refs.of(dom));
            }
            shown.push(shown_node);
            (
                depth + 1,
                [as_str(node.name.as_ref()), as_str(node.value.as_ref())],
            )
        };
        for child in node.child_ids.iter().flatten().rev() {
            stack.push(Pending {
                id: child.as_ref(),
                depth: child_depth,
                parent: child_parent,
            });
        }
    }
    (title, shown)
}

/// A link's address, from its `url` property.
fn link_url(properties: &[AxProperty]) -> Option<&str> {
    properties
        .iter()
        .find(|p| p.name == AxPropertyName::Url)
        .and_then(|p| p.value.value.as_ref())
        .and_then(Value::as_str)
        .filter(|url| !url.is_empty())
}

/// The states shown, in a fixed order: each true boolean by its name,
/// `checked` and `pressed` also as `…=mixed`, `expanded` false as
/// `collapsed`, an invalid value as `invalid`, a heading's `level=N`.
fn states(properties: &[AxProperty]) -> Vec<String> {
    let find = |wanted: AxPropertyName| {
        properties
            .iter()
            .find(|p| p.name == wanted)
            .and_then(|p| p.value.value.as_ref())
    };
    let truthy = |value: Option<&Value>| match value {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    };
    let mut states = Vec::new();
    for (name, property) in [
        ("checked", AxPropertyName::Checked),
        ("pressed", AxPropertyName::Pressed),
    ] {
        match find(property) {
            Some(Value::String(s)) if s == "mixed" => states.push(format!("{name}=mixed")),
            value if truthy(value) => states.push(name.to_owned()),
            _ => {}
        }
    }
    match find(AxPropertyName::Expanded) {
        Some(Value::Bool(false)) => states.push("collapsed".to_owned()),
        value if truthy(value) => states.push("expanded".to_owned()),
        _ => {}
    }
    for (name, property) in [
        ("disabled", AxPropertyName::Disabled),
        ("focused", AxPropertyName::Focused),
        ("modal", AxPropertyName::Modal),
        ("multiselectable", AxPropertyName::Multiselectable),
        ("readonly", AxPropertyName::Readonly),
        ("required", AxPropertyName::Required),
        ("selected", AxPropertyName::Selected),
    ] {
        if truthy(find(property)) {
            states.push(name.to_owned());
        }
    }
    match find(AxPropertyName::Invalid) {
        Some(Value::String(s)) if s != "false" => states.push("invalid".to_owned()),
        Some(Value::Bool(true)) => states.push("invalid".to_owned()),
        _ => {}
    }
    if let Some(Value::Number(level)) = find(AxPropertyName::Level) {
        states.push(format!("level={level}"));
    }
    states
}

/// An accessibility value that is a string, else `""`.
fn as_str(value: Option<&AxValue>) -> &str {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::String(text)) => text,
        _ => "",
    }
}

/// An accessibility value as text: a string as it is, a number or boolean
/// as its JSON, nothing as the empty string.
fn text_of(value: Option<&AxValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use chromiumoxide::cdp::browser_protocol::dom::BackendNodeId;
    use countersign_approval_core::{PageBinding, SnapshotLimits};
    use serde_json::json;

    use super::*;
    use crate::observation::PageRevision;
    use crate::refs::Refs;

    fn value(v: Value) -> Value {
        json!({"type": "computedString", "value": v})
    }

    fn node(id: &str, parent: Option<&str>, role: &str, name: &str, children: &[&str]) -> Value {
        let mut n = json!({
            "nodeId": id,
            "ignored": false,
            "role": {"type": "role", "value": role},
            "name": value(json!(name)),
            "childIds": children,
            "backendDOMNodeId": id.parse::<i64>().unwrap(),
        });
        if let Some(parent) = parent {
            n["parentId"] = json!(parent);
        }
        n
    }

    #[test]
    fn a_small_tree_is_outlined_with_refs_states_and_lifted_wrappers() {
        let mut tree = vec![
            node("1", None, "RootWebArea", "Shop", &["2"]),
            node("2", Some("1"), "generic", "", &["3", "5", "7", "9"]),
            node("3", Some("2"), "heading", "Cart", &["4"]),
            node("4", Some("3"), "StaticText", "Cart", &[]),
            node("5", Some("2"), "button", "Pay", &["6"]),
            node("6", Some("5"), "StaticText", "Pay", &[]),
            node("7", Some("2"), "paragraph", "", &["8"]),
            node("8", Some("7"), "StaticText", "Total $5", &[]),
            node("9", Some("2"), "checkbox", "Gift", &[]),
        ];
        tree[2]["properties"] =
            json!([{"name": "level", "value": {"type": "integer", "value": 2}}]);
        tree[4]["properties"] =
            json!([{"name": "focused", "value": {"type": "booleanOrUndefined", "value": true}}]);
        tree[8]["properties"] = json!([
            {"name": "checked", "value": {"type": "tristate", "value": "mixed"}},
            {"name": "disabled", "value": {"type": "boolean", "value": true}},
        ]);
        let nodes: Vec<AxNode> = serde_json::from_value(Value::Array(tree)).unwrap();
        let mut refs = Refs::default();
        let revision = PageRevision::new("l");
        let (title, shown) = outline(&nodes, refs.page(&revision));
        assert_eq!(title, "Shop");
        let page = ObservedPage::new("u", title, PageBinding::new("s", "t", "r"), shown);
        let text = page.render(SnapshotLimits::default()).text;
        let p = refs.page(&revision).of(BackendNodeId::new(3)).page();
        let r = |n| p.element(n);
        assert_eq!(
            text,
            format!(
                "- heading \"Cart\" [ref={}] [level=2]\n\
                 - button \"Pay\" [ref={}] [focused]\n\
                 - paragraph [ref={}]\n  - StaticText \"Total $5\"\n\
                 - checkbox \"Gift\" [ref={}] [checked=mixed] [disabled]\n",
                r(1),
                r(2),
                r(3),
                r(4)
            )
        );
        // Observed again: the same refs.
        let (_, again) = outline(&nodes, refs.page(&revision));
        assert_eq!(again[0].element_ref, Some(r(1)));
        assert_eq!(again[4].element_ref, Some(r(4)));
    }

    #[test]
    fn a_cyclic_answer_is_walked_once() {
        let tree = vec![
            node("1", None, "RootWebArea", "", &["2"]),
            node("2", Some("1"), "button", "a", &["1", "2"]),
        ];
        let nodes: Vec<AxNode> = serde_json::from_value(Value::Array(tree)).unwrap();
        let mut refs = Refs::default();
        let (_, shown) = outline(&nodes, refs.page(&PageRevision::new("l")));
        assert_eq!(shown.len(), 1);
    }
}
