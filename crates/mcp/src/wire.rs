//! What every incoming message passes before the MCP SDK parses it: a size
//! bound and a JSON parser that refuses a key repeated in one object.
//!
//! serde_json keeps the last of two equal keys, so once a message is a
//! `Value` a repeated `approval_id` or `url` can no longer be seen. A tool
//! call whose arguments say two things at once is refused here, from the
//! bytes, before anything reads them.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};

/// The largest message (one line on stdio, one request body over HTTP)
/// the server reads: 1 MiB. The toolset's own bounds (a 2048-byte
/// selector, 32 arguments of 8192 bytes) fit in a fraction of it.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// JSON-RPC's code for a message that is not valid JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for a message that is not a valid request.
const INVALID_REQUEST: i64 = -32600;

/// Why a message was refused before the SDK saw it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The message is larger than [`MAX_MESSAGE_BYTES`].
    #[error("the message is larger than {MAX_MESSAGE_BYTES} bytes")]
    TooLarge,
    /// An object in the message names one key twice.
    #[error("the key `{0}` appears twice in one object")]
    DuplicateKey(String),
    /// The message is not JSON.
    #[error("the message is not valid JSON: {0}")]
    Syntax(String),
}

impl WireError {
    /// The JSON-RPC error code the refusal is answered with.
    pub fn code(&self) -> i64 {
        match self {
            WireError::Syntax(_) => PARSE_ERROR,
            WireError::TooLarge | WireError::DuplicateKey(_) => INVALID_REQUEST,
        }
    }

    /// The JSON-RPC error response for a refused `message`, answering its
    /// `id` when one can be read from it (else `null`, as JSON-RPC says).
    pub fn response(&self, message: &[u8]) -> Value {
        let id = match self {
            // Too large: not parsed at all, so nothing of it is trusted.
            WireError::TooLarge | WireError::Syntax(_) => Value::Null,
            // A repeated `id` has no one value to answer.
            WireError::DuplicateKey(key) if key == "id" => Value::Null,
            WireError::DuplicateKey(_) => serde_json::from_slice::<Value>(message)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .filter(|id| id.is_string() || id.is_number())
                .unwrap_or(Value::Null),
        };
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": self.code(), "message": self.to_string() },
        })
    }
}

/// The `id` of a JSON-RPC message that may be cut short (an oversized
/// line is read only up to the bound): the value of the top-level `"id"`
/// key when it is a number or a string and appears in `prefix`, so the
/// client can match the refusal to its request.
///
/// ```
/// use countersign_mcp::wire::leading_id;
///
/// assert_eq!(leading_id(br#"{"jsonrpc":"2.0","id":7,"params":{"x":"aaaa"#), Some(7.into()));
/// assert_eq!(leading_id(br#"{"params":{"id":1},"id":"a"}"#), Some("a".into()));
/// assert_eq!(leading_id(br#"{"params":{"id":1"#), None);
/// ```
pub fn leading_id(prefix: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut at = 0;
    let mut key_start = None;
    while at < prefix.len() {
        match prefix[at] {
            b'"' => {
                let start = at;
                at += 1;
                while at < prefix.len() && prefix[at] != b'"' {
                    at += if prefix[at] == b'\\' { 2 } else { 1 };
                }
                key_start = (depth == 1).then_some((start, at + 1));
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b':' if depth == 1 => {
                let is_id = key_start.is_some_and(|(start, end)| {
                    prefix.get(start..end) == Some(b"\"id\"".as_slice())
                });
                if is_id {
                    let rest = prefix.get(at + 1..)?;
                    let value = serde_json::Deserializer::from_slice(rest)
                        .into_iter::<Value>()
                        .next()?
                        .ok()?;
                    return (value.is_number() || value.is_string()).then_some(value);
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// Checks one message: at most [`MAX_MESSAGE_BYTES`], one JSON value, no
/// object with a repeated key at any depth.
///
/// ```
/// use countersign_mcp::wire::{WireError, check_message};
///
/// assert!(check_message(br#"{"a":1,"b":{"a":2}}"#).is_ok());
/// assert_eq!(
///     check_message(br#"{"params":{"arguments":{"url":"a","url":"b"}}}"#),
///     Err(WireError::DuplicateKey("url".to_owned())),
/// );
/// ```
pub fn check_message(message: &[u8]) -> Result<(), WireError> {
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(WireError::TooLarge);
    }
    let mut deserializer = serde_json::Deserializer::from_slice(message);
    // serde_json's own recursion limit (128 levels) still applies, so a
    // deeply nested message is an error, not a stack overflow.
    let checked = NoDuplicates.deserialize(&mut deserializer);
    match checked.and_then(|()| deserializer.end()) {
        Ok(()) => Ok(()),
        Err(error) => Err(classify(error)),
    }
}

/// The marker a repeated key's error message carries, so it can be told
/// apart from a syntax error after serde_json wrapped it.
const DUPLICATE: &str = "duplicate key: ";

fn classify(error: serde_json::Error) -> WireError {
    let text = error.to_string();
    match text.strip_prefix(DUPLICATE) {
        // serde_json appends " at line L column C" to custom errors.
        Some(rest) => {
            let key = rest.rsplit_once(" at line ").map_or(rest, |(key, _)| key);
            WireError::DuplicateKey(key.to_owned())
        }
        None => WireError::Syntax(text),
    }
}

/// Visits any JSON value, failing on an object with a repeated key.
struct NoDuplicates;

impl<'de> DeserializeSeed<'de> for NoDuplicates {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NoDuplicates {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NoDuplicates)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Keys arrive unescaped (`"\u0061"` is `a`), so two spellings of one
        // key are caught too. A key without escapes is borrowed from the
        // message, not copied; the few keys of an MCP object are compared
        // in a list, and a large object moves to a hash set so that many
        // keys cost linear time, not quadratic.
        let mut few: Vec<Cow<'de, str>> = Vec::new();
        let mut many: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(Key(key)) = map.next_key()? {
            let repeated = if many.is_empty() && few.len() < FEW_KEYS {
                few.contains(&key)
            } else {
                if many.is_empty() {
                    many.extend(few.drain(..));
                }
                many.contains(&key)
            };
            if repeated {
                return Err(de::Error::custom(format_args!("{DUPLICATE}{key}")));
            }
            if many.is_empty() {
                few.push(key);
            } else {
                many.insert(key);
            }
            map.next_value_seed(NoDuplicates)?;
        }
        Ok(())
    }
}

/// Up to this many keys of one object are checked in a list.
const FEW_KEYS: usize = 16;

/// An object key, borrowed from the message when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(key)))
    }

    fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(key.to_owned())))
    }

    fn visit_string<E>(self, key: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_json() {
        assert!(
            check_message(
                br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[{"b":1},{"b":2}]}}"#
            )
            .is_ok()
        );
    }

    #[test]
    fn refuses_a_repeated_key_at_any_depth() {
        let nested = br#"{"id":7,"params":{"arguments":{"arguments":{"k":"1","k":"2"}}}}"#;
        let error = check_message(nested).unwrap_err();
        assert_eq!(error, WireError::DuplicateKey("k".to_owned()));
        assert_eq!(error.response(nested)["id"], 7);
        assert_eq!(
            check_message(br#"{"a":1,"\u0061":2}"#),
            Err(WireError::DuplicateKey("a".to_owned()))
        );
    }

    #[test]
    fn refuses_a_repeat_in_a_large_object_either_side_of_the_switch() {
        for (first, second) in [(3, 12), (3, 40), (20, 40)] {
            let mut keys: Vec<String> = (0..50).map(|i| format!("\"k{i}\":{i}")).collect();
            keys[second] = format!("\"k{first}\":0");
            let message = format!("{{\"id\":1,\"params\":{{{}}}}}", keys.join(","));
            assert_eq!(
                check_message(message.as_bytes()),
                Err(WireError::DuplicateKey(format!("k{first}"))),
                "{first} repeated at {second}"
            );
        }
        let distinct: Vec<String> = (0..50).map(|i| format!("\"k{i}\":{i}")).collect();
        let message = format!("{{\"params\":{{{}}}}}", distinct.join(","));
        assert!(check_message(message.as_bytes()).is_ok());
    }

    #[test]
    fn refuses_size_syntax_and_depth() {
        let big = vec![b' '; MAX_MESSAGE_BYTES + 1];
        assert_eq!(check_message(&big), Err(WireError::TooLarge));
        assert!(matches!(check_message(b"{"), Err(WireError::Syntax(_))));
        assert!(matches!(check_message(b"{} {}"), Err(WireError::Syntax(_))));
        let deep = "[".repeat(10_000);
        assert!(matches!(
            check_message(deep.as_bytes()),
            Err(WireError::Syntax(_))
        ));
    }
}
