//! The tool definitions a host hands an LLM API.

use serde_json::{Value, json};

/// The Act tool's name.
pub const TOOL_NAME: &str = "browser_act";

const TOOL_DESCRIPTION: &str = "Perform one browser action (click, fill, press, ...) that the host has approved. \
Pass the approval_id the host gave you together with exactly the url, method, selector, description and \
arguments it approved; each approval works once. The result has status \"ok\", or status \"error\" with \
error.code: APPROVAL_REQUIRED (no usable approval: ask the host for one), APPROVAL_STALE (the approval \
expired, was revoked or used, or does not match this call), NOT_AUTHORIZED (the host's policy refuses this \
url or action, or the call is malformed), STORE_UNAVAILABLE (try again later), BACKEND_FAILED (the \
approval was used up but the action did not complete).";

/// A tool as an LLM API expects it described: a name, a description and a
/// JSON Schema of its arguments.
///
/// APIs name the schema differently (`parameters`, `input_schema`); take
/// the fields and shape them as the API wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDefinition {
    /// The tool's name, e.g. `browser_act`.
    pub name: String,
    /// What the tool does, written for the model.
    pub description: String,
    /// The JSON Schema (draft 2020-12 keywords) of the tool's arguments.
    pub parameters: Value,
}

impl ToolDefinition {
    /// `{"name": …, "description": …, "parameters": …}`.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        })
    }
}

/// The definition of `browser_act`; `methods`, when given, become an `enum`
/// on `method`.
pub(crate) fn act_definition(methods: Option<Vec<String>>) -> ToolDefinition {
    let mut method = json!({
        "type": "string",
        "description": "The action, e.g. click, fill or press, as the host approved it.",
    });
    if let (Some(methods), Some(object)) = (methods, method.as_object_mut()) {
        object.insert("enum".into(), json!(methods));
    }
    let parameters = json!({
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "description": "The page the action happens on, as the host approved it.",
            },
            "approval_id": {
                "type": "string",
                "description": "The id of the host's approval for this exact action (apr_...).",
                "pattern": "^[A-Za-z0-9_-]{1,128}$",
            },
            "method": method,
            "selector": {
                "type": "string",
                "description": "The CSS selector of the element, as the host approved it.",
                "minLength": 1,
                "maxLength": countersign_canonical_policy::MAX_SELECTOR_BYTES,
            },
            "description": {
                "type": "string",
                "description": "The action's description, as the host approved it; omit it if the approval has none.",
                "maxLength": countersign_canonical_policy::MAX_DESCRIPTION_BYTES,
            },
            "arguments": {
                "type": "object",
                "description": "The action's arguments (for example the text to fill), as the host approved them.",
                "maxProperties": countersign_canonical_policy::MAX_ARGUMENTS,
                "propertyNames": { "pattern": "^[A-Za-z0-9_.-]{1,64}$" },
                "additionalProperties": { "type": ["string", "number", "boolean"] },
            },
        },
        "required": ["url", "approval_id", "method", "selector"],
        "additionalProperties": false,
    });
    ToolDefinition {
        name: TOOL_NAME.to_owned(),
        description: TOOL_DESCRIPTION.to_owned(),
        parameters,
    }
}
