//! The arguments of one `browser_act` call, typed or as a model sends them.

use std::fmt;

use countersign_approval_core::{ElementRef, GivenApprovalId, OutcomeCode};
use countersign_canonical_policy::quote_untrusted;
use serde_json::{Map, Value};

/// The argument a `browser_act` or `browser_propose` call may name its
/// target by instead of `selector`: a ref from `browser_observe`
/// (`p3e12`). It becomes the selector `aria-ref=p3e12`, so the grant binds
/// it like any selector. A toolset offers it in its definitions only while
/// `browser_observe` is enabled.
pub const REF_ARGUMENT: &str = "ref";

/// The argument names a `browser_act` call may carry, besides
/// [`REF_ARGUMENT`]; any other is refused.
pub const ARGUMENT_NAMES: [&str; 6] = [
    "url",
    "approval_id",
    "method",
    "selector",
    "description",
    "arguments",
];

/// The deepest nesting of arrays and objects a call may have, the call's
/// own object counting as level 1. A valid call needs 3 (`arguments` as a
/// list of name/value objects); anything deeper is refused before any
/// recursive work (cloning, dropping in this crate, the policy's checks).
pub const MAX_CALL_NESTING: usize = 8;

/// The action fields, handed together to the policy's `authorize_action`.
const ACTION_FIELDS: [&str; 4] = ["method", "selector", "description", "arguments"];

/// One `browser_act` call in typed form, for hosts that call the tool
/// directly rather than through a model's JSON.
///
/// The actor and run are not here: they come from the [`Context`](crate::Context).
/// `Debug` shows argument keys but never their values, which may be secrets.
///
/// ```
/// use countersign_act_tool::ActCall;
///
/// let call = ActCall::new("https://docs.example.com/", "apr_0123", "fill", "input#password")
///     .with_argument("value", "hunter2");
/// assert!(!format!("{call:?}").contains("hunter2"));
/// ```
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct ActCall {
    /// The page the action happens on, as the grant names it.
    pub url: String,
    /// The grant's id as given.
    pub approval_id: String,
    /// The action's method, e.g. `click`.
    pub method: String,
    /// The element's selector.
    pub selector: String,
    /// The action's description; absent means `"{method} {selector}"`.
    pub description: Option<String>,
    /// The action's arguments (strings, numbers or booleans); absent means none.
    pub arguments: Option<Map<String, Value>>,
}

impl ActCall {
    /// A call without description or arguments.
    pub fn new(
        url: impl Into<String>,
        approval_id: impl Into<String>,
        method: impl Into<String>,
        selector: impl Into<String>,
    ) -> Self {
        ActCall {
            url: url.into(),
            approval_id: approval_id.into(),
            method: method.into(),
            selector: selector.into(),
            description: None,
            arguments: None,
        }
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Adds one argument.
    pub fn with_argument(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.arguments
            .get_or_insert_with(Map::new)
            .insert(key.into(), value.into());
        self
    }

    /// The call as a model would send it: the JSON object of the tool's arguments.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("url".into(), Value::String(self.url.clone()));
        object.insert(
            "approval_id".into(),
            Value::String(self.approval_id.clone()),
        );
        object.extend(self.action_object());
        Value::Object(object)
    }

    fn action_object(&self) -> Map<String, Value> {
        action_map(
            self.method.clone(),
            self.selector.clone(),
            self.description.clone(),
            self.arguments.clone(),
        )
    }

    /// The request, moving the fields (no deep copy); arguments nested
    /// deeper than [`MAX_CALL_NESTING`] are refused and taken apart without
    /// recursion.
    pub(crate) fn into_request(self) -> Result<Request, Malformed> {
        // The action object stands where a model's call object stands
        // (level 1), so both paths count levels alike.
        let action = Value::Object(action_map(
            self.method,
            self.selector,
            self.description,
            self.arguments,
        ));
        if nested_deeper_than(&action, MAX_CALL_NESTING) {
            take_apart(action);
            return Err(too_deep());
        }
        Ok(Request {
            url: self.url,
            approval_id: self.approval_id,
            action,
        })
    }
}

/// The action fields of a call as one JSON object.
fn action_map(
    method: String,
    selector: String,
    description: Option<String>,
    arguments: Option<Map<String, Value>>,
) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("method".into(), Value::String(method));
    object.insert("selector".into(), Value::String(selector));
    if let Some(description) = description {
        object.insert("description".into(), Value::String(description));
    }
    if let Some(arguments) = arguments {
        object.insert("arguments".into(), Value::Object(arguments));
    }
    object
}

impl fmt::Debug for ActCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Option<Vec<&String>> = self.arguments.as_ref().map(|a| a.keys().collect());
        f.debug_struct("ActCall")
            .field("url", &self.url)
            .field("approval_id", &self.approval_id)
            .field("method", &self.method)
            .field("selector", &self.selector)
            .field("description", &self.description)
            .field("argument_keys", &keys)
            .finish()
    }
}

/// A call that passed the malformed-call check: the action fields are kept
/// as one JSON object, exactly as given, for the policy to judge.
pub(crate) struct Request {
    pub(crate) url: String,
    pub(crate) approval_id: String,
    pub(crate) action: Value,
}

/// A refusal before anything was looked up.
pub(crate) struct Malformed {
    pub(crate) code: OutcomeCode,
    pub(crate) message: String,
}

impl Malformed {
    fn new(code: OutcomeCode, message: impl Into<String>) -> Self {
        Malformed {
            code,
            message: message.into(),
        }
    }
}

/// Quotes an unknown argument name only when it is short and plain, so a
/// message never echoes arbitrary text from the model.
pub(crate) fn shown_name(name: &str) -> String {
    let plain = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if plain {
        format!("unknown argument `{name}`")
    } else {
        "unknown argument".to_owned()
    }
}

/// The approval id the call gave, bounded for the operation record.
pub(crate) fn given_approval_id(args: &Value) -> GivenApprovalId {
    match args.get("approval_id") {
        None | Some(Value::Null) => GivenApprovalId::Absent,
        Some(Value::String(id)) => GivenApprovalId::from_text(id),
        Some(Value::Bool(_)) => GivenApprovalId::not_a_string("boolean"),
        Some(Value::Number(_)) => GivenApprovalId::not_a_string("number"),
        Some(Value::Array(_)) => GivenApprovalId::not_a_string("array"),
        Some(Value::Object(_)) => GivenApprovalId::not_a_string("object"),
    }
}

/// Whether `value` nests arrays and objects more than `limit` levels deep
/// (`value` itself, when an array or object, is level 1). Iterative, and
/// stops at the first level past `limit`.
fn nested_deeper_than(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        let is_container = matches!(value, Value::Array(_) | Value::Object(_));
        if is_container && level > limit {
            return true;
        }
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|child| (child, level + 1))),
            Value::Object(map) => stack.extend(map.values().map(|child| (child, level + 1))),
            _ => {}
        }
    }
    false
}

/// Drops a value without recursion, however deep it is.
fn take_apart(value: Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// `arguments` in the strict shapes' list form, `[{"name": …, "value": …}]`,
/// as the object form the policy judges. Each item must be an object with
/// exactly `name` (a string) and `value`; a name may appear once. The values
/// are passed on as given, for the policy to judge like the object form's.
fn arguments_from_pairs(pairs: &[Value]) -> Result<Map<String, Value>, Malformed> {
    let mut arguments = Map::new();
    for pair in pairs {
        let (name, value) = match pair.as_object() {
            Some(item) if item.len() == 2 => match (item.get("name"), item.get("value")) {
                (Some(Value::String(name)), Some(value)) => (name, value),
                _ => return Err(malformed_pair()),
            },
            _ => return Err(malformed_pair()),
        };
        if arguments.insert(name.clone(), value.clone()).is_some() {
            return Err(Malformed::new(
                OutcomeCode::NotAuthorized,
                format!("argument `{}` is given twice", quote_untrusted(name)),
            ));
        }
    }
    Ok(arguments)
}

fn malformed_pair() -> Malformed {
    Malformed::new(
        OutcomeCode::NotAuthorized,
        "each item of an `arguments` list must be an object with exactly a string `name` and a `value`",
    )
}

fn too_deep() -> Malformed {
    Malformed::new(
        OutcomeCode::NotAuthorized,
        format!("call is nested more than {MAX_CALL_NESTING} levels deep"),
    )
}

/// Check 1, malformed call, in this order: not an object or missing or
/// mistyped `url` ⇒ `NOT_AUTHORIZED`; missing or mistyped `approval_id` ⇒
/// `APPROVAL_REQUIRED`; any unknown argument ⇒ `NOT_AUTHORIZED`; nesting
/// deeper than [`MAX_CALL_NESTING`] ⇒ `NOT_AUTHORIZED`; `arguments` as a
/// list whose items are not `{"name", "value"}` pairs, or that repeats a
/// name ⇒ `NOT_AUTHORIZED`.
pub(crate) fn parse(args: &Value) -> Result<Request, Malformed> {
    let (url, approval_id, action) = parse_fields(args, true)?;
    Ok(Request {
        url,
        approval_id: approval_id.unwrap_or_default(),
        action,
    })
}

/// The argument names a `browser_propose` call may carry: those of
/// `browser_act` without `approval_id`.
pub const PROPOSAL_ARGUMENT_NAMES: [&str; 5] =
    ["url", "method", "selector", "description", "arguments"];

/// The malformed-call check of `browser_propose`: as [`parse`], except
/// that there is no `approval_id` (one given is an unknown argument).
/// Returns the URL text and the action object.
pub(crate) fn parse_proposal(args: &Value) -> Result<(String, Value), Malformed> {
    let (url, _, action) = parse_fields(args, false)?;
    Ok((url, action))
}

/// A `ref` given (not null) becomes the action's selector
/// (`aria-ref=p3e12`); a selector given too, other than null, is refused, as
/// is a ref that is not one `browser_observe` could have handed out.
fn target_by_ref(
    object: &Map<String, Value>,
    action: &mut Map<String, Value>,
) -> Result<(), Malformed> {
    let element_ref = match object.get(REF_ARGUMENT) {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::String(text)) => ElementRef::parse(text).map_err(|_| {
            Malformed::new(
                OutcomeCode::NotAuthorized,
                format!(
                    "ref `{}` is not a ref from browser_observe (e.g. `p3e12`)",
                    quote_untrusted(text)
                ),
            )
        })?,
        Some(_) => {
            return Err(Malformed::new(
                OutcomeCode::NotAuthorized,
                "ref must be a string",
            ));
        }
    };
    match action.get("selector") {
        None | Some(Value::Null) => {}
        Some(_) => {
            return Err(Malformed::new(
                OutcomeCode::NotAuthorized,
                "give the target as selector or as ref, not both",
            ));
        }
    }
    action.insert("selector".into(), Value::String(element_ref.to_selector()));
    Ok(())
}

/// The shared malformed-call check; `with_approval_id` tells whether the
/// call must carry `approval_id` (Act) or must not (propose).
fn parse_fields(
    args: &Value,
    with_approval_id: bool,
) -> Result<(String, Option<String>, Value), Malformed> {
    let Some(object) = args.as_object() else {
        return Err(Malformed::new(
            OutcomeCode::NotAuthorized,
            "tool call arguments must be a json object",
        ));
    };
    let url = match object.get("url") {
        None | Some(Value::Null) => {
            return Err(Malformed::new(
                OutcomeCode::NotAuthorized,
                "call is missing url",
            ));
        }
        Some(Value::String(url)) => url.clone(),
        Some(_) => {
            return Err(Malformed::new(
                OutcomeCode::NotAuthorized,
                "url must be a string",
            ));
        }
    };
    let names: &[&str] = if with_approval_id {
        &ARGUMENT_NAMES
    } else {
        &PROPOSAL_ARGUMENT_NAMES
    };
    let approval_id = match object.get("approval_id") {
        _ if !with_approval_id => None,
        None | Some(Value::Null) => {
            return Err(Malformed::new(
                OutcomeCode::ApprovalRequired,
                "call is missing approval_id; the host must issue an approval for this action",
            ));
        }
        Some(Value::String(id)) => Some(id.clone()),
        Some(_) => {
            return Err(Malformed::new(
                OutcomeCode::ApprovalRequired,
                "approval_id must be a string",
            ));
        }
    };
    if let Some(unknown) = object
        .keys()
        .find(|k| !names.contains(&k.as_str()) && k.as_str() != REF_ARGUMENT)
    {
        return Err(Malformed::new(
            OutcomeCode::NotAuthorized,
            shown_name(unknown),
        ));
    }
    if nested_deeper_than(args, MAX_CALL_NESTING) {
        return Err(too_deep());
    }
    let mut action = Map::new();
    for (key, value) in object {
        if !ACTION_FIELDS.contains(&key.as_str()) {
            continue;
        }
        let value = match (key.as_str(), value) {
            ("arguments", Value::Array(pairs)) => Value::Object(arguments_from_pairs(pairs)?),
            _ => value.clone(),
        };
        action.insert(key.clone(), value);
    }
    target_by_ref(object, &mut action)?;
    Ok((url, approval_id, Value::Object(action)))
}
