//! The one reader of the grant and proposal scripts' replies: a status
//! word and up to three items, read strictly, and the errors a reply that
//! is not one of theirs, or that the rules disagree with, comes to.

use countersign_approval_core::StoreError;
use redis::Value;

use crate::scripts::GrantScript;

/// A bulk string reply as UTF-8 text.
pub(crate) fn text(value: &Value) -> Option<&str> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::SimpleString(text) => Some(text.as_str()),
        _ => None,
    }
}

/// A script's reply: a status word, then up to three items (a record, a
/// fingerprint, what the script saw), read strictly by the caller.
pub(crate) struct Reply {
    /// The status word, which names the outcome.
    pub(crate) status: String,
    /// What follows the status, for the caller to read strictly.
    pub(crate) items: Vec<Value>,
}

/// Reads `value`, the reply of `script` on `key`, as a [`Reply`]: anything
/// else is [`StoreError::Corrupt`], never an outcome.
pub(crate) fn parse_reply(
    script: GrantScript,
    key: &str,
    value: Value,
) -> Result<Reply, StoreError> {
    let unexpected = || unexpected_reply(script, key);
    let Value::Array(items) = value else {
        return Err(unexpected());
    };
    let mut items = items.into_iter();
    let status = items
        .next()
        .as_ref()
        .and_then(text)
        .ok_or_else(unexpected)?
        .to_owned();
    let items: Vec<Value> = items.collect();
    if items.len() > 3 {
        return Err(unexpected());
    }
    Ok(Reply { status, items })
}

/// A reply of `script` on `key` that is none of the replies it gives.
pub(crate) fn unexpected_reply(script: GrantScript, key: &str) -> StoreError {
    StoreError::corrupt(
        key,
        format!("unexpected reply from the {} script", script.name()),
    )
}

impl Reply {
    /// Whether the reply is the status alone.
    pub(crate) fn bare(&self) -> bool {
        self.items.is_empty()
    }
}

/// The error a `corrupt` reply carries: its reason, about the key it names
/// (a fence) or else `key`.
pub(crate) fn corrupt_reply(key: &str, reply: &Reply) -> StoreError {
    let reason = reply
        .items
        .first()
        .and_then(text)
        .unwrap_or("record is not one of this store's")
        .to_owned();
    let key = reply.items.get(1).and_then(text).unwrap_or(key);
    StoreError::corrupt(key, reason)
}

/// What a script saw besides the record: whether the grant's or the
/// proposal's run or actor was stopped since it was issued or made, and
/// the record's new expiry when the call moved it (its pointer follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    /// Whether a stop of the run or the actor came after the record.
    pub(crate) stopped: bool,
    /// The record's new expiry, when the call moved it.
    pub(crate) moved: Option<u64>,
}

/// Reads what `script` saw (`["stopped", 0|1]`, then `["moved", at]` when
/// it moved the expiry) from the item `value` of its reply on `key`.
pub(crate) fn parse_seen(
    script: GrantScript,
    key: &str,
    value: Option<&Value>,
) -> Result<Seen, StoreError> {
    let unexpected = || unexpected_reply(script, key);
    let Some(Value::Array(items)) = value else {
        return Err(unexpected());
    };
    let words: Vec<&str> = items
        .iter()
        .map(|item| text(item).ok_or_else(unexpected))
        .collect::<Result<_, _>>()?;
    match words.as_slice() {
        ["stopped", stopped] => Ok(Seen {
            stopped: parse_flag(stopped).ok_or_else(unexpected)?,
            moved: None,
        }),
        ["stopped", stopped, "moved", at] => Ok(Seen {
            stopped: parse_flag(stopped).ok_or_else(unexpected)?,
            moved: Some(at.parse().map_err(|_| unexpected())?),
        }),
        _ => Err(unexpected()),
    }
}

/// What a read script found: the record (or head), the fingerprint of its
/// fixed fields, and whether its run or actor was stopped since it was
/// made.
pub(crate) struct Found {
    /// The record's bytes, for the caller to read strictly.
    pub(crate) raw: Vec<u8>,
    /// The fingerprint of its fixed fields (40 hex digits), which a write
    /// script checks before it writes.
    pub(crate) fingerprint: String,
    /// Whether a stop of its run or actor came after it.
    pub(crate) stopped: bool,
}

/// Reads the reply of the read `script` on `key`: `missing` is `None`,
/// `corrupt` its error, `found` a record, its fingerprint and what the
/// script saw (a read moves no expiry); anything else is
/// [`StoreError::Corrupt`].
pub(crate) fn found_reply(
    script: GrantScript,
    key: &str,
    reply: Reply,
) -> Result<Option<Found>, StoreError> {
    let unexpected = || unexpected_reply(script, key);
    match (reply.status.as_str(), reply.items.len()) {
        ("missing", 0) => return Ok(None),
        ("corrupt", 1 | 2) => return Err(corrupt_reply(key, &reply)),
        ("found", 3) => {}
        _ => return Err(unexpected()),
    }
    let mut items = reply.items.into_iter();
    let (Some(Value::BulkString(raw)), Some(fingerprint), seen) =
        (items.next(), items.next(), items.next())
    else {
        return Err(unexpected());
    };
    let fingerprint = text(&fingerprint)
        .filter(|f| f.len() == 40)
        .ok_or_else(unexpected)?
        .to_owned();
    let seen = parse_seen(script, key, seen.as_ref())?;
    if seen.moved.is_some() {
        return Err(unexpected());
    }
    Ok(Some(Found {
        raw,
        fingerprint,
        stopped: seen.stopped,
    }))
}

/// A flag as the scripts write it: `0` or `1`, nothing else.
pub(crate) fn parse_flag(word: &str) -> Option<bool> {
    match word {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// How many times a call reads a record (a grant's or a proposal's) again
/// when its fixed fields changed between its read and its write (for a
/// proposal only a record deleted and made again under the same id, or
/// altered by hand, does that).
pub(crate) const MAX_READS: usize = 4;

/// A record whose fixed fields changed between every read and write of one
/// call; `record` names it in the message (`"record"`, `"proposal"`).
pub(crate) fn kept_changing(key: &str, record: &str) -> StoreError {
    StoreError::unavailable(format!(
        "{key}: the {record} changed between each read and write; try again"
    ))
}

/// A script's answer that the library's rules, applied to the record the
/// script read (named by `record`), do not reach.
pub(crate) fn disagreement(key: &str, script: GrantScript, record: &str) -> StoreError {
    StoreError::corrupt(
        key,
        format!(
            "the {} script's outcome disagrees with the {record} it read",
            script.name()
        ),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn replies_are_parsed_strictly() {
        let key = "k";
        let word = |w: &str| Value::BulkString(w.as_bytes().to_vec());
        let ok = Value::Array(vec![word("missing")]);
        let reply = parse_reply(GrantScript::Get, key, ok).unwrap();
        assert_eq!(reply.status, "missing");
        assert!(reply.bare());
        for bad in [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![]),
            Value::Array(vec![Value::Int(1)]),
            Value::Array(vec![Value::Nil, Value::Nil, Value::Nil]),
            Value::Array(vec![word("found"); 5]),
        ] {
            assert!(matches!(
                parse_reply(GrantScript::Get, key, bad),
                Err(StoreError::Corrupt { .. })
            ));
        }
        let seen = |words: &[&str]| {
            parse_seen(
                GrantScript::Consume,
                key,
                Some(&Value::Array(words.iter().map(|w| word(w)).collect())),
            )
        };
        assert_eq!(
            seen(&["stopped", "1"]).unwrap(),
            Seen {
                stopped: true,
                moved: None
            }
        );
        assert_eq!(
            seen(&["stopped", "0", "moved", "17"]).unwrap(),
            Seen {
                stopped: false,
                moved: Some(17)
            }
        );
        for bad in [
            &["stopped"][..],
            &["stopped", "yes"],
            &["stopped", "0", "moved"],
            &["stopped", "0", "moved", "-1"],
            &["moved", "1", "stopped", "0"],
            &["stopped", "0", "extra", "1"],
        ] {
            assert!(seen(bad).is_err(), "{bad:?}");
        }
        assert!(parse_seen(GrantScript::Consume, key, None).is_err());
        assert!(parse_seen(GrantScript::Consume, key, Some(&Value::Int(1))).is_err());
    }
}
