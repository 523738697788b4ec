//! How a grant is laid out in its hash (format `v=2`), and the strict reader
//! of that layout.

use std::collections::HashMap;
use std::str::FromStr;

use countersign_approval_core::policy::{Action, ActionDigest};
use countersign_approval_core::{
    ActorId, Approval, ApprovalId, Approver, ApproverId, AttemptId, GrantState,
    MAX_ABANDONED_ATTEMPTS, MAX_ATTEMPT_LIMIT, RunId, StoreError, StoredGrant, Timestamp,
};
use redis::Value;

/// The record format written by this version of the store.
pub(crate) const FORMAT_VERSION: &str = "2";

/// Field names, as stored.
pub(crate) mod field {
    pub(crate) const VERSION: &str = "v";
    pub(crate) const ID: &str = "id";
    pub(crate) const ACTOR: &str = "actor";
    pub(crate) const RUN: &str = "run";
    pub(crate) const URL: &str = "url";
    pub(crate) const ACTION: &str = "action";
    pub(crate) const DIGEST: &str = "digest";
    pub(crate) const ISSUED_AT: &str = "issued_at";
    pub(crate) const EXPIRES_AT: &str = "expires_at";
    pub(crate) const NOTE: &str = "note";
    pub(crate) const PAGE_REVISION: &str = "page_revision";
    pub(crate) const OPERATION_ID: &str = "operation_id";
    pub(crate) const SESSION_ID: &str = "session_id";
    pub(crate) const STATE: &str = "state";
    pub(crate) const CONSUMED_AT: &str = "consumed_at";
    pub(crate) const CONSUMED_BY: &str = "consumed_by";
    pub(crate) const ISSUE_TOKEN: &str = "issue_token";
    pub(crate) const ABANDONED: &str = "abandoned";
    pub(crate) const APPROVER: &str = "approver";
    pub(crate) const APPROVED_AT: &str = "approved_at";
    pub(crate) const ATTEMPT_LIMIT: &str = "attempt_limit";
    pub(crate) const FAILED: &str = "failed";
    pub(crate) const RUN_GENERATION: &str = "rgen";
    pub(crate) const ACTOR_GENERATION: &str = "agen";

    /// Every field a v=2 record may hold.
    pub(crate) const ALL: [&str; 24] = [
        VERSION,
        ID,
        ACTOR,
        RUN,
        URL,
        ACTION,
        DIGEST,
        ISSUED_AT,
        EXPIRES_AT,
        NOTE,
        PAGE_REVISION,
        OPERATION_ID,
        SESSION_ID,
        STATE,
        CONSUMED_AT,
        CONSUMED_BY,
        ISSUE_TOKEN,
        ABANDONED,
        APPROVER,
        APPROVED_AT,
        ATTEMPT_LIMIT,
        FAILED,
        RUN_GENERATION,
        ACTOR_GENERATION,
    ];
}

/// State names, as stored.
pub(crate) mod state {
    pub(crate) const ACTIVE: &str = "active";
    pub(crate) const REVOKED: &str = "revoked";
    pub(crate) const CONSUMED: &str = "consumed";
    pub(crate) const LOCKED: &str = "locked";
}

/// The field/value pairs of a new, active grant, without the generations
/// (the issue script records the fences' generations it reads).
pub(crate) fn encode_new(approval: &Approval, issue_token: &str) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        (field::VERSION, FORMAT_VERSION.to_owned()),
        (field::ID, approval.id.as_str().to_owned()),
        (field::ACTOR, approval.actor_id.as_str().to_owned()),
        (field::RUN, approval.run_id.as_str().to_owned()),
        (field::URL, approval.url.clone()),
        (field::ACTION, approval.action.canonical_json()),
        (field::DIGEST, approval.action_digest.to_hex()),
        (field::ISSUED_AT, approval.issued_at.as_millis().to_string()),
        (
            field::EXPIRES_AT,
            approval.expires_at.as_millis().to_string(),
        ),
        (field::STATE, state::ACTIVE.to_owned()),
        (field::ISSUE_TOKEN, issue_token.to_owned()),
        (field::ATTEMPT_LIMIT, approval.attempt_limit.to_string()),
        (field::FAILED, "0".to_owned()),
    ];
    if let Some(approver) = &approval.approver {
        fields.push((field::APPROVER, approver.id.as_str().to_owned()));
        fields.push((
            field::APPROVED_AT,
            approver.approved_at.as_millis().to_string(),
        ));
    }
    let optional = [
        (field::NOTE, &approval.approver_note),
        (field::PAGE_REVISION, &approval.page_revision),
        (field::OPERATION_ID, &approval.operation_id),
        (field::SESSION_ID, &approval.session_id),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            fields.push((name, value.clone()));
        }
    }
    fields
}

/// Parses a decimal timestamp exactly as the store writes it: digits only,
/// no sign, no leading zeros.
fn parse_millis(text: &str) -> Option<Timestamp> {
    parse_u64(text).map(Timestamp::from_millis)
}

/// Parses a decimal integer exactly as the store writes it.
fn parse_u64(text: &str) -> Option<u64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let canonical = text == "0" || !text.starts_with('0');
    if !(digits_only && canonical) {
        return None;
    }
    text.parse::<u64>().ok()
}

/// A bulk string reply as UTF-8 text.
pub(crate) fn text(value: &Value) -> Option<&str> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::SimpleString(text) => Some(text.as_str()),
        _ => None,
    }
}

/// Reads an HGETALL reply (a flat array of names and values) as a grant of
/// id `id`, accepting only a complete, well-formed v=2 record. The state is
/// the stored one (`Active`, `Revoked`, `Locked` or `Consumed`); whether the
/// grant is stopped depends on its fences, which the caller knows.
pub(crate) fn decode(
    id: &ApprovalId,
    key: &str,
    flat: &[Value],
) -> Result<StoredGrant, StoreError> {
    let corrupt = |message: &str| StoreError::corrupt(key, message);
    if !flat.len().is_multiple_of(2) {
        return Err(corrupt("hash reply has an odd number of items"));
    }
    let mut fields: HashMap<&str, &str> = HashMap::with_capacity(flat.len() / 2);
    for pair in flat.chunks_exact(2) {
        let (Some(name), Some(value)) = (text(&pair[0]), text(&pair[1])) else {
            return Err(corrupt("field is not utf-8 text"));
        };
        if !field::ALL.contains(&name) {
            return Err(corrupt("record has an unknown field"));
        }
        if fields.insert(name, value).is_some() {
            return Err(corrupt("record repeats a field"));
        }
    }
    let required = |name: &'static str| {
        fields
            .get(name)
            .copied()
            .ok_or_else(|| corrupt(&format!("missing field {name}")))
    };
    let optional = |name: &'static str| fields.get(name).map(|v| (*v).to_owned());

    if required(field::VERSION)? != FORMAT_VERSION {
        return Err(corrupt("unsupported format version"));
    }
    if required(field::ID)? != id.as_str() {
        return Err(corrupt("id field does not match the key"));
    }
    if required(field::ISSUE_TOKEN)?.is_empty() {
        return Err(corrupt("empty issue token"));
    }
    let actor_id = ActorId::new(required(field::ACTOR)?)
        .map_err(|_| corrupt("actor is not a valid actor id"))?;
    let run_id =
        RunId::new(required(field::RUN)?).map_err(|_| corrupt("run is not a valid run id"))?;
    let url = required(field::URL)?.to_owned();
    let action = Action::from_canonical_json(required(field::ACTION)?)
        .map_err(|_| corrupt("action is not canonical action json"))?;
    let action_digest = ActionDigest::from_str(required(field::DIGEST)?)
        .map_err(|_| corrupt("digest is not 64 lower-case hex characters"))?;
    if action_digest != action.digest() {
        return Err(corrupt("digest does not match the action"));
    }
    let issued_at = parse_millis(required(field::ISSUED_AT)?)
        .ok_or_else(|| corrupt("issued_at is not a timestamp"))?;
    let expires_at = parse_millis(required(field::EXPIRES_AT)?)
        .ok_or_else(|| corrupt("expires_at is not a timestamp"))?;

    let approver = match (
        fields.get(field::APPROVER).copied(),
        fields.get(field::APPROVED_AT).copied(),
    ) {
        (None, None) => None,
        (Some(id), Some(at)) => Some(Approver {
            id: ApproverId::new(id).map_err(|_| corrupt("approver is not a valid approver id"))?,
            approved_at: parse_millis(at)
                .ok_or_else(|| corrupt("approved_at is not a timestamp"))?,
        }),
        _ => return Err(corrupt("approver and approved_at must be set together")),
    };
    let attempt_limit = parse_u64(required(field::ATTEMPT_LIMIT)?)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..=MAX_ATTEMPT_LIMIT).contains(n))
        .ok_or_else(|| corrupt("attempt_limit is not 1 to 100"))?;
    let failed_attempts = parse_u64(required(field::FAILED)?)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| corrupt("failed is not a count"))?;
    for name in [field::RUN_GENERATION, field::ACTOR_GENERATION] {
        parse_u64(required(name)?).ok_or_else(|| corrupt("generation is not a decimal integer"))?;
    }

    let consumed_at = fields.get(field::CONSUMED_AT).copied();
    let consumed_by = fields.get(field::CONSUMED_BY).copied();
    let state = match (required(field::STATE)?, consumed_at, consumed_by) {
        (state::ACTIVE, None, None) => GrantState::Active,
        (state::REVOKED, None, None) => GrantState::Revoked,
        (state::LOCKED, None, None) => GrantState::Locked,
        (state::CONSUMED, Some(at), Some(by)) => GrantState::Consumed {
            at: parse_millis(at).ok_or_else(|| corrupt("consumed_at is not a timestamp"))?,
            by: AttemptId::parse(by).ok_or_else(|| corrupt("consumed_by is not an attempt id"))?,
        },
        (state::ACTIVE | state::REVOKED | state::LOCKED, _, _) => {
            return Err(corrupt("unconsumed record has consumed fields"));
        }
        (state::CONSUMED, _, _) => {
            return Err(corrupt("consumed record lacks consumed_at or consumed_by"));
        }
        _ => return Err(corrupt("unknown state")),
    };
    let locked = state == GrantState::Locked;
    if locked && failed_attempts != attempt_limit {
        return Err(corrupt(
            "locked record does not count its limit of failed attempts",
        ));
    }
    if !locked && failed_attempts >= attempt_limit {
        return Err(corrupt(
            "failed attempts reach the limit of a record that is not locked",
        ));
    }

    Ok(StoredGrant {
        approval: Approval {
            id: id.clone(),
            actor_id,
            run_id,
            url,
            action,
            action_digest,
            issued_at,
            expires_at,
            approver_note: optional(field::NOTE),
            approver,
            attempt_limit,
            page_revision: optional(field::PAGE_REVISION),
            operation_id: optional(field::OPERATION_ID),
            session_id: optional(field::SESSION_ID),
        },
        state,
        failed_attempts,
    })
}

/// Reads the attempts abandoned on a grant from the same HGETALL reply
/// [`decode`] reads: the space-separated `abandoned` field, or none. Accepts
/// only distinct attempt ids, at most [`MAX_ABANDONED_ATTEMPTS`].
pub(crate) fn decode_abandoned(key: &str, flat: &[Value]) -> Result<Vec<AttemptId>, StoreError> {
    let corrupt = |message: &str| StoreError::corrupt(key, message);
    let Some(list) = flat
        .chunks_exact(2)
        .find(|pair| text(&pair[0]) == Some(field::ABANDONED))
        .map(|pair| text(&pair[1]).ok_or_else(|| corrupt("field is not utf-8 text")))
        .transpose()?
    else {
        return Ok(Vec::new());
    };
    let mut attempts: Vec<AttemptId> = Vec::new();
    for word in list.split(' ') {
        let attempt = AttemptId::parse(word)
            .ok_or_else(|| corrupt("abandoned is not a list of attempt ids"))?;
        if attempts.contains(&attempt) {
            return Err(corrupt("abandoned repeats an attempt id"));
        }
        attempts.push(attempt);
    }
    if attempts.len() > MAX_ABANDONED_ATTEMPTS {
        return Err(corrupt("abandoned holds more attempts than the bound"));
    }
    Ok(attempts)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn millis_are_parsed_exactly_as_written() {
        assert_eq!(parse_millis("0"), Some(Timestamp::from_millis(0)));
        assert_eq!(
            parse_millis("1700000000000"),
            Some(Timestamp::from_millis(1_700_000_000_000))
        );
        assert_eq!(
            parse_millis("18446744073709551615"),
            Some(Timestamp::from_millis(u64::MAX))
        );
        for bad in [
            "",
            "01",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1.0",
            "18446744073709551616",
            "1e3",
        ] {
            assert_eq!(parse_millis(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_lua_field_list_matches_the_rust_one() {
        let prelude = include_str!("lua/prelude.lua");
        let known = prelude
            .split_once("local KNOWN = {")
            .and_then(|(_, rest)| rest.split_once('}'))
            .unwrap()
            .0;
        for name in field::ALL {
            assert!(
                known.contains(&format!(" {name} = true")),
                "{name} missing from KNOWN"
            );
        }
        assert_eq!(known.matches(" = true").count(), field::ALL.len());
        assert!(prelude.contains(&format!("local MAX_ABANDONED = {MAX_ABANDONED_ATTEMPTS}\n")));
        assert!(prelude.contains(&format!("local MAX_ATTEMPT_LIMIT = {MAX_ATTEMPT_LIMIT}\n")));
        assert!(prelude.contains(&format!("if f.v ~= '{FORMAT_VERSION}' then")));
    }
}

#[cfg(test)]
mod abandoned_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn flat(value: &str) -> Vec<Value> {
        vec![
            Value::BulkString(b"state".to_vec()),
            Value::BulkString(b"active".to_vec()),
            Value::BulkString(field::ABANDONED.as_bytes().to_vec()),
            Value::BulkString(value.as_bytes().to_vec()),
        ]
    }

    #[test]
    fn abandoned_lists_are_read_strictly() {
        assert_eq!(
            decode_abandoned("k", &flat("att_1 att_2")).unwrap().len(),
            2
        );
        assert_eq!(decode_abandoned("k", &[]).unwrap(), Vec::<AttemptId>::new());
        let full: Vec<String> = (0..MAX_ABANDONED_ATTEMPTS)
            .map(|n| format!("att_{n}"))
            .collect();
        assert_eq!(
            decode_abandoned("k", &flat(&full.join(" "))).unwrap().len(),
            MAX_ABANDONED_ATTEMPTS
        );
        let too_many = format!("{} att_x", full.join(" "));
        for bad in [
            "",
            "att_1  att_2",
            "att_1 att_1",
            "att_1 a.b",
            " att_1",
            &too_many,
        ] {
            assert!(
                matches!(
                    decode_abandoned("k", &flat(bad)),
                    Err(StoreError::Corrupt { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
