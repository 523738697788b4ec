//! How a standing grant is laid out in its record (standing format 1: one
//! string value per standing grant), and the strict reader of that layout.
//!
//! A record is a format byte, then [`STANDING_FIELDS`] in order, each
//! encoded as a grant record's fields are ([`record::put`]): its first
//! [`FIXED_FIELDS`] never change after issue (the record's fingerprint
//! covers them); the last four are the ones writes change: the state, the
//! count of failed attempts, and two space-separated lists of attempt ids,
//! those holding a use (oldest first) and those that gave theirs back.
//! `lua/standing_prelude.lua` reads and rewrites the same layout.

use std::ops::RangeInclusive;

use countersign_approval_core::{
    ActorId, Approver, ApproverId, AttemptId, MAX_ABANDONED_ATTEMPTS, MAX_ATTEMPT_LIMIT,
    MAX_STANDING_SCOPE_BYTES, MAX_STANDING_USES, RunId, StandingGrant, StandingId, StandingScope,
    StandingState, StoreError, StoredStanding, Timestamp,
};

use crate::record::{self, Reader, check_failed, decode_attempts, parse_u64, state};

/// The standing record format written by this version of the store: the
/// first byte of every standing record.
pub(crate) const STANDING_FORMAT: u8 = 1;

/// The fields of a standing record, in order, after its format byte.
pub(crate) const STANDING_FIELDS: [&str; 16] = [
    "id",
    "actor",
    "run",
    "scope",
    "uses",
    "issued_at",
    "expires_at",
    "approver",
    "approved_at",
    "attempt_limit",
    "rgen",
    "agen",
    "state",
    "failed",
    "used_by",
    "abandoned",
];

/// Fields `1..=FIXED_FIELDS` never change after issue (the scripts'
/// `S_LAST_FIXED`; the reader takes every field by its place).
#[cfg(test)]
const FIXED_FIELDS: usize = 12;

/// The fields of a standing record up to the generations, as the issue
/// script takes them (it appends the fences' generations it reads and the
/// changing fields of a new, active grant). Refuses
/// ([`StoreError::Rejected`]) a standing grant the store could not read
/// back as it was given.
pub(crate) fn encode_new(grant: &StandingGrant) -> Result<Vec<u8>, StoreError> {
    let rejected = |message: String| StoreError::Rejected { message };
    if !(1..=MAX_STANDING_USES).contains(&grant.uses) {
        return Err(rejected(format!(
            "uses must be 1 to {MAX_STANDING_USES}, got {}",
            grant.uses
        )));
    }
    if !(1..=MAX_ATTEMPT_LIMIT).contains(&grant.attempt_limit) {
        return Err(rejected(format!(
            "attempt limit must be 1 to {MAX_ATTEMPT_LIMIT}, got {}",
            grant.attempt_limit
        )));
    }
    Ok(encode_with_scope(grant, grant.scope.as_str()))
}

/// The fixed fields of `grant`'s record with `scope` as its scope text
/// (a [`StandingScope`] is at most 8 KiB, so every field fits).
fn encode_with_scope(grant: &StandingGrant, scope: &str) -> Vec<u8> {
    let mut out = vec![STANDING_FORMAT];
    let numbers = [
        grant.uses.to_string(),
        grant.issued_at.as_millis().to_string(),
        grant.expires_at.as_millis().to_string(),
    ];
    let approved_at = grant.approver.approved_at.as_millis().to_string();
    let attempt_limit = grant.attempt_limit.to_string();
    for value in [
        grant.id.as_str(),
        grant.actor_id.as_str(),
        grant.run_id.as_str(),
        scope,
    ]
    .into_iter()
    .chain(numbers.iter().map(String::as_str))
    .chain([grant.approver.id.as_str(), &approved_at, &attempt_limit])
    {
        record::put(&mut out, value.as_bytes());
    }
    out
}

/// A standing record read strictly: the standing grant in its stored state
/// and the attempts that gave their use back.
#[derive(Debug)]
pub(crate) struct Decoded {
    /// The standing grant, in its stored state (`Active`, `Revoked` or
    /// `Locked`); whether it is stopped depends on its fences, which the
    /// caller knows.
    pub(crate) stored: StoredStanding,
    /// The attempts given back with `give_back_use`.
    pub(crate) abandoned: Vec<AttemptId>,
}

/// Field `name` as UTF-8 text; a missing field is corrupt.
fn text<'a>(key: &str, name: &str, value: Option<&'a [u8]>) -> Result<&'a str, StoreError> {
    optional(key, name, value)?
        .ok_or_else(|| StoreError::corrupt(key, format!("standing record lacks {name}")))
}

/// Optional field `name` as UTF-8 text.
fn optional<'a>(
    key: &str,
    name: &str,
    value: Option<&'a [u8]>,
) -> Result<Option<&'a str>, StoreError> {
    value
        .map(|bytes| {
            std::str::from_utf8(bytes)
                .map_err(|_| StoreError::corrupt(key, format!("{name} is not utf-8 text")))
        })
        .transpose()
}

/// Field `name` as a count within `range`.
fn count(
    key: &str,
    name: &str,
    value: Option<&[u8]>,
    range: RangeInclusive<u32>,
) -> Result<u32, StoreError> {
    parse_u64(text(key, name, value)?)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            StoreError::corrupt(
                key,
                format!("{name} is not {} to {}", range.start(), range.end()),
            )
        })
}

/// Field `name` as a timestamp.
fn timestamp(key: &str, name: &str, value: Option<&[u8]>) -> Result<Timestamp, StoreError> {
    parse_u64(text(key, name, value)?)
        .map(Timestamp::from_millis)
        .ok_or_else(|| StoreError::corrupt(key, format!("{name} is not a timestamp")))
}

/// Reads a standing record (the key's string value) as standing grant `id`
/// (`None`: whichever id it names), accepting only a complete, well-formed
/// record: every field of the [`StandingGrant`], a known state, a count of
/// failed attempts that fits it, and lists of distinct attempt ids (no more
/// uses than the grant carries, no attempt both holding a use and having
/// given it back).
pub(crate) fn decode(
    id: Option<&StandingId>,
    key: &str,
    record: &[u8],
) -> Result<Decoded, StoreError> {
    let corrupt = |message: &str| StoreError::corrupt(key, message);
    let Some((&format, rest)) = record.split_first() else {
        return Err(corrupt("standing record is empty"));
    };
    if format != STANDING_FORMAT {
        return Err(corrupt(&format!(
            "unsupported standing record format {format}"
        )));
    }
    let mut reader = Reader::new(rest);
    let mut values = Vec::with_capacity(STANDING_FIELDS.len());
    while !reader.done() {
        let value = reader
            .field()
            .ok_or_else(|| corrupt("standing record holds bytes that are not a field"))?;
        values.push(value);
    }
    let [
        stored_id,
        actor,
        run,
        scope,
        uses,
        issued_at,
        expires_at,
        approver,
        approved_at,
        attempt_limit,
        rgen,
        agen,
        stored_state,
        failed,
        used_by,
        abandoned,
    ]: [Option<&[u8]>; 16] = values
        .try_into()
        .map_err(|_| corrupt("standing record does not hold 16 fields"))?;

    let stored_id = text(key, "id", stored_id)?;
    let id = match id {
        Some(id) if id.as_str() == stored_id => id.clone(),
        Some(_) => return Err(corrupt("id field does not match the key")),
        None => StandingId::parse(stored_id).ok_or_else(|| corrupt("id is not a standing id"))?,
    };
    let actor_id = ActorId::new(text(key, "actor", actor)?)
        .map_err(|_| corrupt("actor is not a valid actor id"))?;
    let run_id =
        RunId::new(text(key, "run", run)?).map_err(|_| corrupt("run is not a valid run id"))?;
    let scope = text(key, "scope", scope)?;
    if scope.len() > MAX_STANDING_SCOPE_BYTES {
        return Err(corrupt("scope is longer than 8 KiB"));
    }
    // A scope text this release would not write (one of version 1, which
    // named no scheme, among them) is refused rather than read wider.
    let scope = StandingScope::parse(scope)
        .ok_or_else(|| corrupt("scope is not a scope this release writes"))?;
    let uses = count(key, "uses", uses, 1..=MAX_STANDING_USES)?;
    let approver = Approver {
        id: ApproverId::new(text(key, "approver", approver)?)
            .map_err(|_| corrupt("approver is not a valid approver id"))?,
        approved_at: timestamp(key, "approved_at", approved_at)?,
    };
    let attempt_limit = count(key, "attempt_limit", attempt_limit, 1..=MAX_ATTEMPT_LIMIT)?;
    for (name, generation) in [("rgen", rgen), ("agen", agen)] {
        parse_u64(text(key, name, generation)?)
            .ok_or_else(|| corrupt("generation is not a decimal integer"))?;
    }
    let grant = StandingGrant {
        id,
        actor_id,
        run_id,
        scope,
        uses,
        issued_at: timestamp(key, "issued_at", issued_at)?,
        expires_at: timestamp(key, "expires_at", expires_at)?,
        approver,
        attempt_limit,
    };

    // The changing fields, after the fixed ones.
    let state = match stored_state.ok_or_else(|| corrupt("standing record lacks state"))? {
        state::ACTIVE => StandingState::Active,
        state::REVOKED => StandingState::Revoked,
        state::LOCKED => StandingState::Locked,
        _ => return Err(corrupt("unknown state")),
    };
    let failed_attempts = parse_u64(text(key, "failed", failed)?)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| corrupt("failed is not a count"))?;
    let limit = usize::try_from(uses).unwrap_or(usize::MAX);
    let used_by = decode_attempts(key, "used_by", optional(key, "used_by", used_by)?, limit)?;
    check_failed(
        key,
        state == StandingState::Locked,
        failed_attempts,
        attempt_limit,
    )?;
    let abandoned = optional(key, "abandoned", abandoned)?;
    let abandoned = decode_attempts(key, "abandoned", abandoned, MAX_ABANDONED_ATTEMPTS)?;
    if abandoned.iter().any(|attempt| used_by.contains(attempt)) {
        return Err(corrupt("an attempt holds a use it gave back"));
    }
    Ok(Decoded {
        stored: StoredStanding {
            grant,
            state,
            used_by,
            failed_attempts,
        },
        abandoned,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::record::{ABSENT, LONG, SHORT_MAX};
    use countersign_approval_core::{StandingScope, SystemClock};
    use std::time::Duration;

    fn grant() -> StandingGrant {
        use countersign_approval_core::Clock;
        let scope = StandingScope::from_facts(
            "https://shop.example.com/results?page=2",
            "click",
            "button",
            "Next «page» {1}",
        )
        .unwrap();
        let now = SystemClock.now();
        let approver = Approver {
            id: ApproverId::new("approver carol").unwrap(),
            approved_at: now,
        };
        StandingGrant::new(
            ActorId::new("actor {x}").unwrap(),
            RunId::new("run:1").unwrap(),
            &scope,
            3,
            Duration::from_secs(600),
            now,
            approver,
        )
        .unwrap()
        .with_attempt_limit(4)
        .unwrap()
    }

    /// The record the issue script stores for `grant`, with these changing
    /// fields.
    fn stored(grant: &StandingGrant, changing: [Option<&str>; 4]) -> Vec<u8> {
        let mut out = encode_new(grant).unwrap();
        for value in [Some("7"), Some("0")].into_iter().chain(changing) {
            match value {
                Some(value) => record::put(&mut out, value.as_bytes()),
                None => out.push(ABSENT),
            }
        }
        out
    }

    fn corrupt_message(record: &[u8]) -> String {
        match decode(None, "k", record) {
            Err(StoreError::Corrupt { key, message }) if key == "k" => message,
            other => panic!("not corrupt: {other:?}"),
        }
    }

    #[test]
    fn a_standing_grant_reads_back_as_issued() {
        let grant = grant();
        let raw = stored(&grant, [Some("a"), Some("0"), None, None]);
        let decoded = decode(Some(&grant.id), "k", &raw).unwrap();
        assert_eq!(decoded.stored, StoredStanding::issued(grant.clone()));
        assert!(decoded.abandoned.is_empty());
        let raw = stored(
            &grant,
            [Some("l"), Some("4"), Some("att_1 att_2"), Some("att_3")],
        );
        let decoded = decode(None, "k", &raw).unwrap();
        assert_eq!(decoded.stored.state, StandingState::Locked);
        assert_eq!(decoded.stored.remaining(), 1);
        assert_eq!(decoded.abandoned, [AttemptId::parse("att_3").unwrap()]);
    }

    #[test]
    fn records_that_are_not_standing_grants_are_corrupt() {
        let grant = grant();
        let other = StandingId::generate().unwrap();
        let good = stored(&grant, [Some("a"), Some("0"), None, None]);
        assert!(decode(Some(&other), "k", &good).is_err());
        for (changing, message) in [
            ([Some("c"), Some("0"), None, None], "unknown state"),
            ([Some("a"), Some("x"), None, None], "failed is not a count"),
            (
                [Some("a"), Some("4"), None, None],
                "failed attempts reach the limit of a record that is not locked",
            ),
            (
                [Some("l"), Some("3"), None, None],
                "locked record does not count its limit of failed attempts",
            ),
            (
                [Some("a"), Some("0"), Some("att_1 att_2 att_3 att_4"), None],
                "used_by holds more attempts than the bound",
            ),
            (
                [Some("a"), Some("0"), Some("att_1 att_1"), None],
                "used_by repeats an attempt id",
            ),
            (
                [Some("a"), Some("0"), None, Some("att_1  att_2")],
                "abandoned is not a list of attempt ids",
            ),
            (
                [Some("a"), Some("0"), Some("att_1"), Some("att_1")],
                "an attempt holds a use it gave back",
            ),
        ] {
            assert_eq!(corrupt_message(&stored(&grant, changing)), message);
        }
        let mut long = good.clone();
        long.push(ABSENT);
        assert_eq!(
            corrupt_message(&long),
            "standing record does not hold 16 fields"
        );
        assert_eq!(
            corrupt_message(&good[..good.len() - 1]),
            "standing record does not hold 16 fields"
        );
        let mut cut = good.clone();
        cut.push(5);
        assert_eq!(
            corrupt_message(&cut),
            "standing record holds bytes that are not a field"
        );
        let mut format = good.clone();
        format[0] = 2;
        assert_eq!(
            corrupt_message(&format),
            "unsupported standing record format 2"
        );
        assert_eq!(corrupt_message(b""), "standing record is empty");
    }

    #[test]
    fn grants_the_store_could_not_read_back_are_refused() {
        let mut bad = grant();
        bad.uses = 0;
        assert!(matches!(encode_new(&bad), Err(StoreError::Rejected { .. })));
        bad.uses = MAX_STANDING_USES + 1;
        assert!(matches!(encode_new(&bad), Err(StoreError::Rejected { .. })));
        let mut bad = grant();
        bad.attempt_limit = 0;
        assert!(matches!(encode_new(&bad), Err(StoreError::Rejected { .. })));
        // A scope past one length byte takes the long form, and reads back.
        let mut long = grant();
        long.scope = StandingScope::from_facts(
            "https://shop.example.com/",
            "click",
            "button",
            &"x".repeat(SHORT_MAX + 1),
        )
        .unwrap();
        let raw = stored(&long, [Some("a"), Some("0"), None, None]);
        assert!(raw.contains(&LONG));
        assert_eq!(decode(None, "k", &raw).unwrap().stored.grant, long);
    }

    /// A record with `scope` as its scope text in place of the grant's.
    fn stored_with_scope(grant: &StandingGrant, scope: &str) -> Vec<u8> {
        let mut out = encode_with_scope(grant, scope);
        for value in ["7", "0", "a", "0"] {
            record::put(&mut out, value.as_bytes());
        }
        out.extend([ABSENT, ABSENT]);
        out
    }

    #[test]
    fn a_scope_this_release_would_not_write_is_refused_never_read_wider() {
        let grant = grant();
        assert!(decode(None, "k", &stored_with_scope(&grant, grant.scope.as_str())).is_ok());
        // Version 1 named no scheme and no default port: read as any one
        // scheme it could cover pages the person never approved.
        let v1 = r#"{"v":1,"host":"shop.example.com","method":"click","path":"/results","role":"button","name":"Next"}"#;
        let over_long = "x".repeat(MAX_STANDING_SCOPE_BYTES + 1);
        let uncanonical = grant
            .scope
            .as_str()
            .replace("\"port\":443", "\"port\":0443");
        for (text, message) in [
            (v1, "scope is not a scope this release writes"),
            (&uncanonical, "scope is not a scope this release writes"),
            ("", "scope is not a scope this release writes"),
            (&over_long, "scope is longer than 8 KiB"),
        ] {
            assert_eq!(
                corrupt_message(&stored_with_scope(&grant, text)),
                message,
                "{text}"
            );
        }
    }

    #[test]
    fn the_lua_layout_matches_the_rust_one() {
        let prelude = include_str!("lua/standing_prelude.lua");
        assert!(prelude.contains(&format!("local S_FORMAT = {STANDING_FORMAT}\n")));
        assert!(prelude.contains(&format!("local S_LAST_FIXED = {FIXED_FIELDS}\n")));
        assert_eq!(STANDING_FIELDS[FIXED_FIELDS - 1], "agen");
        assert!(prelude.contains(&format!("local MAX_USES = {MAX_STANDING_USES}\n")));
        assert_eq!(
            crate::record::tests::lua_names(prelude, "S_FIELDS"),
            STANDING_FIELDS
        );
    }
}
