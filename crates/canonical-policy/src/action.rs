//! Canonical browser actions and their digests.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::denial::Denial;

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
    /// Borrowed when it is one of [`DEFAULT_METHODS`] (see `lower_case_method`).
    method: Cow<'static, str>,
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

/// Writes the four fields in canonical form.
///
/// Hand-written rather than serde_json because the digest is computed for
/// every authorised action: text without escapes is copied whole instead
/// of going through serde_json's writer fragment by fragment. The output
/// is byte for byte what serde_json's compact serialiser writes for the
/// derived `Serialize` (unit tests below and the published digest vectors
/// pin that).
fn write_canonical(out: &mut String, action: &Action) {
    out.push_str("{\"arguments\":{");
    for (i, (key, value)) in action.arguments.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(out, key);
        out.push(':');
        push_json_string(out, value);
    }
    out.push_str("},\"description\":");
    push_json_string(out, &action.description);
    out.push_str(",\"method\":");
    push_json_string(out, &action.method);
    out.push_str(",\"selector\":");
    push_json_string(out, &action.selector);
    out.push('}');
}

/// The canonical JSON text.
fn canonical_json_of(action: &Action) -> String {
    let mut out = String::with_capacity(canonical_len_hint(action));
    write_canonical(&mut out, action);
    out
}

/// SHA-256 of the canonical JSON.
fn digest_of(action: &Action) -> ActionDigest {
    // Tried and measured no faster: writing straight into the hasher
    // through a stack buffer (sha2 takes one large update far faster than
    // many small copies), and a per-thread buffer reused between actions.
    ActionDigest(Sha256::digest(canonical_json_of(action).as_bytes()).into())
}

/// The canonical JSON's length when no string needs an escape (escapes only
/// make it longer, and the buffer then grows as usual).
fn canonical_len_hint(action: &Action) -> usize {
    // `{"arguments":{`, `},"description":`, `,"method":`, `,"selector":`, `}`
    // and the quotes of the three top-level string values.
    const FIXED: usize = 14 + 16 + 10 + 12 + 1 + 6;
    let arguments: usize = action
        .arguments
        .iter()
        .map(|(key, value)| key.len() + value.len() + 6)
        .sum();
    FIXED + arguments + action.description.len() + action.method.len() + action.selector.len()
}

/// serde_json's `\u00XX` escapes of the C0 controls (lower-case hex).
const CONTROL_ESCAPES: [&str; 32] = [
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
    "\\u0008", "\\u0009", "\\u000a", "\\u000b", "\\u000c", "\\u000d", "\\u000e", "\\u000f",
    "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
    "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
];

/// The escape serde_json writes for `byte`, or `None` when it is written
/// as it is (everything but `"`, `\\` and U+0000–U+001F; U+007F, U+2028 and
/// U+2029 included).
fn escape_of(byte: u8) -> Option<&'static str> {
    match byte {
        b'"' => Some("\\\""),
        b'\\' => Some("\\\\"),
        0x08 => Some("\\b"),
        0x09 => Some("\\t"),
        0x0a => Some("\\n"),
        0x0c => Some("\\f"),
        0x0d => Some("\\r"),
        _ => CONTROL_ESCAPES.get(usize::from(byte)).copied(),
    }
}

/// Whether no byte of `bytes` needs an escape.
fn escape_free(bytes: &[u8]) -> bool {
    // `|` rather than `||`: no branch per byte.
    !any_byte(bytes, |b| (b < 0x20) | (b == b'"') | (b == b'\\'))
}

/// Appends `text` as a JSON string literal.
fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    if escape_free(text.as_bytes()) {
        out.push_str(text);
    } else {
        push_escaped(out, text);
    }
    out.push('"');
}

/// The slow path of [`push_json_string`]: copies the runs between escapes.
fn push_escaped(out: &mut String, text: &str) {
    let mut run_start = 0;
    for (i, byte) in text.bytes().enumerate() {
        if let Some(escape) = escape_of(byte) {
            // Every escaped byte is ASCII, so `i` is a character boundary.
            out.push_str(text.get(run_start..i).unwrap_or_default());
            out.push_str(escape);
            run_start = i + 1;
        }
    }
    out.push_str(text.get(run_start..).unwrap_or_default());
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
    any_byte(s.as_bytes(), |b| (b < 0x20) | (b == 0x7f))
}

/// Whether `test` holds for any byte. Tested sixteen bytes at a time
/// without an early exit inside a block, so the compiler can vectorise it
/// (a plain `any` stops at every byte and stays scalar); the last block
/// overlaps the one before rather than leaving a scalar tail. Every
/// action scans its selector and description this way, and every string
/// of its canonical JSON.
#[inline]
fn any_byte(bytes: &[u8], test: impl Fn(u8) -> bool) -> bool {
    let block = |chunk: &[u8]| chunk.iter().fold(false, |any, b| any | test(*b));
    if bytes.len() < 16 {
        // Shorter than one block (a method, a key, a short value): a
        // scalar scan is as fast.
        return bytes.iter().any(|b| test(*b));
    }
    let mut chunks = bytes.chunks_exact(16);
    if chunks.any(&block) {
        return true;
    }
    !chunks.remainder().is_empty() && bytes.get(bytes.len() - 16..).is_some_and(&block)
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

    let method = lower_case_method(
        optional_string(method, "method")?
            .ok_or_else(|| Denial::invalid_action("`method` is required"))?
            .trim(),
    );
    match methods {
        Some(allowed) if !allowed.contains(method.as_ref()) => {
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

/// `method` ASCII-lower-cased. One of [`DEFAULT_METHODS`] is borrowed from
/// that list rather than copied: nearly every action names one, and the
/// copy was one of the few allocations building an action needs.
fn lower_case_method(method: &str) -> Cow<'static, str> {
    // Every default method is lower-case ASCII, so an ASCII-case-insensitive
    // match is exactly "lower-cases to it".
    match DEFAULT_METHODS
        .iter()
        .find(|known| known.eq_ignore_ascii_case(method))
    {
        Some(known) => Cow::Borrowed(known),
        None => Cow::Owned(method.to_ascii_lowercase()),
    }
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
    // An integer in range is its decimal digits in ECMAScript too (every
    // integer up to 2^53 − 1 is an exact double, written without exponent
    // below 10^21), and integer formatting is several times cheaper than
    // the shortest-double search. `-0` reads as the integer 0 here and
    // `ryu-js` writes -0.0 as `0` as well.
    if let Some(int) = n.as_i64().filter(|i| i.unsigned_abs() <= MAX_SAFE_INTEGER) {
        return Some(int.to_string());
    }
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
    let mut out = BTreeMap::new();
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
            // Not `b.to_string()`: that goes through the formatter.
            Value::Bool(b) => String::from(if *b { "true" } else { "false" }),
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
        // Inserted one by one: the tree sorts whatever order the input map
        // iterates in, and a few entries fit one node, so this saves the
        // intermediate vector a bulk build would sort.
        out.insert(key.clone(), text);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    //! The hand-written canonical JSON writer and the integer path of
    //! number text against what they replace: serde_json's compact
    //! serialiser of the derived `Serialize`, and `ryu-js`.

    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn action_with(arguments: serde_json::Map<String, Value>, selector: &str) -> Action {
        canonicalise(
            &json!({"method": "fill", "selector": selector, "arguments": arguments}),
            None,
        )
        .expect("a valid action")
    }

    fn assert_writer_matches_serde(action: &Action) {
        assert_eq!(
            canonical_json_of(action),
            serde_json::to_string(action).unwrap(),
            "{action:?}"
        );
    }

    #[test]
    fn every_byte_value_is_written_as_serde_json_writes_it() {
        // Every ASCII character, alone, inside text, at either end and at
        // each offset around the sixteen-byte blocks of the escape scan.
        for first in (0u8..=0x7f).step_by(16) {
            // Sixteen bytes, two arguments each: within MAX_ARGUMENTS.
            let mut arguments = serde_json::Map::new();
            for byte in first..first + 16 {
                let c = char::from(byte);
                arguments.insert(format!("k{byte}"), Value::String(c.to_string()));
                arguments.insert(
                    format!("m{byte}"),
                    Value::String(format!("ab{c}cd{}", "x".repeat(usize::from(byte % 40)))),
                );
            }
            assert_writer_matches_serde(&action_with(arguments, "a#docs"));
        }
        for len in 0..48 {
            for at in 0..len {
                for bad in ['"', '\\', '\n', '\u{1}', '\u{1f}'] {
                    let mut text: Vec<char> = std::iter::repeat_n('y', len).collect();
                    text[at] = bad;
                    let text: String = text.into_iter().collect();
                    let mut arguments = serde_json::Map::new();
                    arguments.insert("v".into(), Value::String(text));
                    assert_writer_matches_serde(&action_with(arguments, "a"));
                }
            }
        }
    }

    #[test]
    fn non_ascii_text_is_written_raw_as_serde_json_writes_it() {
        let mut arguments = serde_json::Map::new();
        for (i, text) in [
            "é",
            "\u{2028}",
            "\u{2029}",
            "\u{7f}",
            "\u{80}",
            "\u{ffff}",
            "😀",
            "a\u{0}é\u{1b}😀\"",
        ]
        .iter()
        .enumerate()
        {
            arguments.insert(format!("k{i}"), Value::String((*text).to_owned()));
        }
        let action = action_with(
            arguments,
            "ünïcode ☃ selector that is longer than sixteen bytes",
        );
        assert_writer_matches_serde(&action);
    }

    #[test]
    fn escape_scan_finds_a_byte_at_every_offset() {
        for len in 0..70 {
            let clean = "z".repeat(len);
            assert!(escape_free(clean.as_bytes()));
            assert!(!has_control(&clean));
            for at in 0..len {
                for (bad, escapes, control) in [
                    (b'"', true, false),
                    (b'\\', true, false),
                    (0x1f, true, true),
                    (0x7f, false, true),
                ] {
                    let mut bytes = clean.clone().into_bytes();
                    bytes[at] = bad;
                    let text = String::from_utf8(bytes).unwrap();
                    assert_eq!(!escape_free(text.as_bytes()), escapes, "{len} {at} {bad}");
                    assert_eq!(has_control(&text), control, "{len} {at} {bad}");
                }
            }
        }
    }

    #[test]
    fn integer_text_is_what_ryu_js_writes() {
        let limit = MAX_SAFE_INTEGER as i64;
        let mut values: Vec<i64> = vec![0, 1, -1, 9, 10, 20, 99, 100, 12_345, -987_654_321];
        values.extend([limit, -limit, limit - 1, 1 << 52, 1_000_000_000_000_000]);
        for v in values {
            #[allow(clippy::cast_precision_loss)]
            let expected = ryu_js::Buffer::new().format_finite(v as f64).to_owned();
            let n = serde_json::Number::from(v);
            assert_eq!(number_text(&n).as_deref(), Some(expected.as_str()), "{v}");
            let parsed: Value = serde_json::from_str(&v.to_string()).unwrap();
            let Value::Number(parsed) = parsed else {
                panic!("{v} did not parse as a number");
            };
            assert_eq!(
                number_text(&parsed).as_deref(),
                Some(expected.as_str()),
                "{v}"
            );
        }
        for text in ["-0", "-0.0", "0.0", "20.0", "2e1", "1.5", "-2.5e-7"] {
            let Value::Number(n) = serde_json::from_str(text).unwrap() else {
                panic!("{text} did not parse as a number");
            };
            let expected = ryu_js::Buffer::new()
                .format_finite(n.as_f64().unwrap())
                .to_owned();
            assert_eq!(
                number_text(&n).as_deref(),
                Some(expected.as_str()),
                "{text}"
            );
        }
        for text in ["9007199254740992", "-9007199254740992", "1e300"] {
            let Value::Number(n) = serde_json::from_str(text).unwrap() else {
                panic!("{text} did not parse as a number");
            };
            assert_eq!(number_text(&n), None, "{text}");
        }
    }

    #[test]
    fn a_default_method_is_borrowed_and_any_other_is_lower_cased() {
        assert!(matches!(lower_case_method("CLICK"), Cow::Borrowed("click")));
        assert!(matches!(lower_case_method("fIlL"), Cow::Borrowed("fill")));
        assert_eq!(lower_case_method("Scroll-Into"), "scroll-into");
        assert!(matches!(lower_case_method("Scroll"), Cow::Owned(_)));
        // Not ASCII case-folding beyond ASCII: `K` (Kelvin sign) stays.
        assert_eq!(lower_case_method("\u{212a}lick"), "\u{212a}lick");
    }

    proptest! {
        #[test]
        fn writer_matches_serde_json_for_any_text(
            values in proptest::collection::vec(any::<String>(), 0..6),
            selector in "[^\\x00-\\x1f\\x7f]{1,40}",
            description in proptest::option::of("[^\\x00-\\x1f\\x7f]{1,40}"),
        ) {
            let arguments: serde_json::Map<String, Value> = values
                .into_iter()
                .enumerate()
                .map(|(i, v)| (format!("k{i}"), Value::String(v)))
                .collect();
            let proposed = json!({
                "method": "click",
                "selector": selector,
                "description": description,
                "arguments": arguments,
            });
            if let Ok(action) = canonicalise(&proposed, None) {
                prop_assert_eq!(canonical_json_of(&action), serde_json::to_string(&action).unwrap());
            }
        }
    }
}
