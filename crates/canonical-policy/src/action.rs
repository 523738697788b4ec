//! Canonical browser actions and their digests.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::Denial;

/// Methods allowed when the policy builder is not given its own set.
pub const DEFAULT_METHODS: &[&str] = &[
    "click", "dblclick", "hover", "focus", "fill", "type", "press", "select", "check", "uncheck",
];
/// Longest selector, in UTF-8 bytes.
pub const MAX_SELECTOR_BYTES: usize = 2048;
/// Longest explicit description, in UTF-8 bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;
/// Most entries in `arguments`.
pub const MAX_ARGUMENTS: usize = 32;
/// Longest argument key, in bytes (keys are ASCII).
pub const MAX_ARGUMENT_KEY_BYTES: usize = 64;
/// Longest argument value, in UTF-8 bytes.
pub const MAX_ARGUMENT_VALUE_BYTES: usize = 8192;

/// A browser action in canonical form, as the policy accepted it.
///
/// Its [`canonical_json`](Action::canonical_json) always holds the four keys
/// `arguments`, `description`, `method`, `selector`, sorted by UTF-8 bytes at
/// every level, without whitespace; the [`digest`](Action::digest) is the
/// SHA-256 of those bytes. Field order in this struct is that sorted order,
/// so serialising it yields the canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Action {
    arguments: BTreeMap<String, String>,
    description: String,
    method: String,
    selector: String,
    /// Computed once when the action is built: every grant, binding and
    /// consume needs it, and the fields never change afterwards.
    #[serde(skip)]
    digest: ActionDigest,
}

impl Action {
    /// The lower-case method, e.g. `click`.
    pub fn method(&self) -> &str {
        &self.method
    }
    /// The trimmed selector.
    pub fn selector(&self) -> &str {
        &self.selector
    }
    /// The description, or `"{method} {selector}"` when none was given.
    pub fn description(&self) -> &str {
        &self.description
    }
    /// The arguments, every value a string.
    pub fn arguments(&self) -> &BTreeMap<String, String> {
        &self.arguments
    }

    /// The canonical JSON text of this action.
    pub fn canonical_json(&self) -> String {
        canonical_json_of(self)
    }

    /// The canonical JSON as a `serde_json::Value` (its object keys stay sorted).
    pub fn to_json_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// SHA-256 of [`canonical_json`](Action::canonical_json).
    pub fn digest(&self) -> ActionDigest {
        self.digest
    }

    /// Rebuilds an action from text a store saved, accepting it only when it
    /// is byte for byte the canonical JSON of a valid action.
    ///
    /// The method is checked for shape, not against any policy's method set:
    /// the policy was applied when the grant was issued.
    pub fn from_canonical_json(text: &str) -> Result<Action, Denial> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Denial::invalid_action(format!("stored action is not json: {e}")))?;
        let action = canonicalise(&value, None)?;
        if action.canonical_json() != text {
            return Err(Denial::invalid_action(
                "stored action is not in canonical form",
            ));
        }
        Ok(action)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical_json())
    }
}

/// Serialises the four fields in canonical form.
fn canonical_json_of(action: &Action) -> String {
    // Serialising strings and a `BTreeMap<String, String>` cannot fail; the
    // empty fallback would never match a stored digest, so it fails closed.
    // (Pre-sizing the buffer was measured slower than serde_json's own growth.)
    serde_json::to_string(action).unwrap_or_default()
}

/// SHA-256 of the canonical JSON.
fn digest_of(action: &Action) -> ActionDigest {
    // Streaming the serialiser straight into the hasher through a stack
    // buffer was measured slower than hashing the finished string.
    ActionDigest(Sha256::digest(canonical_json_of(action).as_bytes()).into())
}

/// The SHA-256 digest of an action's canonical JSON; shown as 64 lower-case hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ActionDigest([u8; 32]);

impl ActionDigest {
    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
    /// 64 lower-case hex characters.
    pub fn to_hex(&self) -> String {
        let mut out = String::with_capacity(64);
        for byte in self.0 {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        out
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for ActionDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ActionDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActionDigest({})", self.to_hex())
    }
}

/// A digest text that is not 64 lower-case hex characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("digest must be 64 lower-case hex characters")]
pub struct InvalidDigest;

impl FromStr for ActionDigest {
    type Err = InvalidDigest;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(InvalidDigest);
        }
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            _ => Err(InvalidDigest),
        };
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Ok(ActionDigest(out))
    }
}

fn has_control(s: &str) -> bool {
    // U+0000–U+001F and U+007F are single bytes in UTF-8 and never occur
    // inside a multi-byte sequence, so a byte scan is exact.
    s.bytes().any(|b| b < 0x20 || b == 0x7f)
}

/// The most characters of untrusted text a message or record quotes
/// (a cut adds one `…`).
pub const QUOTED_CHARS: usize = 64;

/// Escapes untrusted text for a message or a record (as Rust's
/// `char::escape_debug`: control, bidirectional and other invisible
/// characters become `\u{…}`), then cuts the escaped text to
/// [`QUOTED_CHARS`] characters, never inside one escape, marking a cut
/// with `…`. Every denial quotes untrusted input through it.
///
/// ```
/// use countersign_canonical_policy::quote_untrusted;
///
/// assert_eq!(quote_untrusted("a\nb\u{202e}"), "a\\nb\\u{202e}");
/// assert_eq!(quote_untrusted(&"x".repeat(100)), format!("{}…", "x".repeat(64)));
/// ```
pub fn quote_untrusted(s: &str) -> String {
    let mut shown = String::new();
    let mut count = 0;
    for c in s.chars() {
        let escaped = c.escape_debug();
        let len = escaped.len();
        if count + len > QUOTED_CHARS {
            shown.push('…');
            return shown;
        }
        shown.extend(escaped);
        count += len;
    }
    shown
}

fn optional_string<'a>(value: Option<&'a Value>, key: &str) -> Result<Option<&'a str>, Denial> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Denial::invalid_action(format!("`{key}` must be a string"))),
    }
}

/// Applies the action rules; `methods` is `None` only when re-reading stored
/// canonical JSON, where any lower-case method shape is accepted.
pub(crate) fn canonicalise(
    proposed: &Value,
    methods: Option<&BTreeSet<String>>,
) -> Result<Action, Denial> {
    let object = proposed
        .as_object()
        .ok_or_else(|| Denial::invalid_action("action must be a json object"))?;
    // One pass over the object finds the four fields and refuses any other
    // key before a field is judged.
    let (mut arguments, mut description, mut method, mut selector) = (None, None, None, None);
    for (key, value) in object {
        let slot = match key.as_str() {
            "arguments" => &mut arguments,
            "description" => &mut description,
            "method" => &mut method,
            "selector" => &mut selector,
            unknown => {
                return Err(Denial::invalid_action(format!(
                    "unknown field `{}`",
                    quote_untrusted(unknown)
                )));
            }
        };
        *slot = Some(value);
    }

    let method = optional_string(method, "method")?
        .ok_or_else(|| Denial::invalid_action("`method` is required"))?
        .trim()
        .to_ascii_lowercase();
    match methods {
        Some(allowed) if !allowed.contains(&method) => {
            return Err(Denial::MethodNotAllowed {
                method: quote_untrusted(&method),
            });
        }
        None if method.is_empty() || has_control(&method) || method.contains(' ') => {
            return Err(Denial::invalid_action("`method` is malformed"));
        }
        _ => {}
    }

    let selector = optional_string(selector, "selector")?
        .ok_or_else(|| Denial::invalid_action("`selector` is required"))?
        .trim();
    if selector.is_empty() {
        return Err(Denial::invalid_action("`selector` is empty"));
    }
    if selector.len() > MAX_SELECTOR_BYTES {
        return Err(Denial::invalid_action(format!(
            "`selector` is longer than {MAX_SELECTOR_BYTES} bytes"
        )));
    }
    if has_control(selector) {
        return Err(Denial::invalid_action(
            "`selector` contains a control character",
        ));
    }

    let description = match optional_string(description, "description")?.map(str::trim) {
        None | Some("") => format!("{method} {selector}"),
        Some(text) => {
            // A description over the limit is accepted only when it is the
            // default one: the default of a long selector is itself long,
            // and the canonical JSON of every accepted action must read
            // back as that action.
            if text.len() > MAX_DESCRIPTION_BYTES
                && !is_default_description(text, &method, selector)
            {
                return Err(Denial::invalid_action(format!(
                    "`description` is longer than {MAX_DESCRIPTION_BYTES} bytes"
                )));
            }
            if has_control(text) {
                return Err(Denial::invalid_action(
                    "`description` contains a control character",
                ));
            }
            text.to_owned()
        }
    };

    let arguments = match arguments {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(map)) => canonical_arguments(map)?,
        Some(_) => return Err(Denial::invalid_action("`arguments` must be an object")),
    };

    let mut action = Action {
        arguments,
        description,
        method,
        selector: selector.to_owned(),
        digest: ActionDigest::default(),
    };
    action.digest = digest_of(&action);
    Ok(action)
}

/// Whether `text` is `"{method} {selector}"`, compared without building it.
fn is_default_description(text: &str, method: &str, selector: &str) -> bool {
    text.strip_prefix(method)
        .and_then(|rest| rest.strip_prefix(' '))
        .is_some_and(|rest| rest == selector)
}

/// The largest magnitude a number argument may have: 2^53 − 1, ECMAScript's
/// `Number.MAX_SAFE_INTEGER`. Beyond it not every integer is a distinct
/// double, so the text typed could differ from the number the model sent.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The canonical text of a number argument: ECMAScript's Number-to-String
/// of its IEEE 754 double (the rule RFC 8785 §3.2.2.3 uses), written by
/// `ryu-js`; `None` for a number whose magnitude exceeds
/// [`MAX_SAFE_INTEGER`] or that is no finite double.
///
/// The value is read through `Number::as_f64`, which gives the same double
/// whether or not serde_json's `arbitrary_precision` feature is on (with it,
/// the kept text is parsed with `str::parse`), so neither that feature nor
/// serde_json's own float formatting can change the text.
fn number_text(n: &serde_json::Number) -> Option<String> {
    // Every integer up to 2^53 − 1 is exact in a double.
    #[allow(clippy::cast_precision_loss)]
    let limit = MAX_SAFE_INTEGER as f64;
    let value = n.as_f64().filter(|v| v.is_finite() && v.abs() <= limit)?;
    // `ryu-js` writes both zeros as `0`, as ECMAScript does.
    Some(ryu_js::Buffer::new().format_finite(value).to_owned())
}

fn valid_argument_key(key: &str) -> bool {
    (1..=MAX_ARGUMENT_KEY_BYTES).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn canonical_arguments(
    map: &serde_json::Map<String, Value>,
) -> Result<BTreeMap<String, String>, Denial> {
    if map.len() > MAX_ARGUMENTS {
        return Err(Denial::invalid_action(format!(
            "`arguments` has more than {MAX_ARGUMENTS} entries"
        )));
    }
    let mut out = Vec::with_capacity(map.len());
    for (key, value) in map {
        if !valid_argument_key(key) {
            return Err(Denial::invalid_action(format!(
                "argument key `{}` must match [A-Za-z0-9_.-]{{1,64}}",
                quote_untrusted(key)
            )));
        }
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => number_text(n).ok_or_else(|| {
                Denial::invalid_action(format!(
                    "argument `{key}` is a number outside ±{MAX_SAFE_INTEGER}"
                ))
            })?,
            Value::Bool(b) => b.to_string(),
            Value::Null | Value::Array(_) | Value::Object(_) => {
                return Err(Denial::invalid_action(format!(
                    "argument `{key}` must be a string, number or boolean"
                )));
            }
        };
        if text.len() > MAX_ARGUMENT_VALUE_BYTES {
            return Err(Denial::invalid_action(format!(
                "argument `{key}` is longer than {MAX_ARGUMENT_VALUE_BYTES} bytes"
            )));
        }
        out.push((key.clone(), text));
    }
    // Collecting sorts once and builds the tree in bulk, whatever order the
    // input map iterates in.
    Ok(out.into_iter().collect())
}
