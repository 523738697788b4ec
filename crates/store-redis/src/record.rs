//! How a grant is laid out in its record (format `v=4`: one string value per
//! grant), and the strict reader of that layout (which also reads the `v=3`
//! records of the previous version: the same fields without `element`).
//!
//! A record is a format byte followed by fields in a fixed order, each a
//! length and that many bytes (see [`put`]). The first part, up to the
//! actor's generation (the bound element's canonical JSON included), never
//! changes after issue and is what the record's
//! fingerprint covers; the last five fields are the ones writes change. The
//! Lua scripts (`lua/prelude.lua`) read and rewrite the same layout.

use std::fmt::Write as _;
use std::str::FromStr;

use countersign_approval_core::policy::{Action, ActionDigest};
use countersign_approval_core::{
    ActorId, Approval, ApprovalId, Approver, ApproverId, AttemptId, ElementIdentity, GrantState,
    MAX_ABANDONED_ATTEMPTS, MAX_ATTEMPT_LIMIT, RunId, StoreError, StoredGrant, Timestamp,
};

/// The record format written by this version of the store: the first byte
/// of every record.
pub(crate) const FORMAT_VERSION: u8 = 4;

/// The record format of the previous version of the store: the fields of
/// [`RECORD_FIELDS`] but `element`. Read as a grant with no element bound,
/// which is what it was issued with; scripts keep its format byte when
/// they rewrite its changing fields.
pub(crate) const OLD_FORMAT_VERSION: u8 = 3;

/// Where `element` sits in [`RECORD_FIELDS`] (a `v=3` record has no such
/// field: the fields after it sit one place earlier).
const ELEMENT_FIELD: usize = 16;

/// Fields of at most this many bytes carry their length in one byte.
pub(crate) const SHORT_MAX: usize = 0xFC;
/// The length byte of an optional field that is not set.
pub(crate) const ABSENT: u8 = 0xFD;
/// The length byte announcing a 4-byte big-endian length (of more than
/// [`SHORT_MAX`] bytes) after it.
pub(crate) const LONG: u8 = 0xFE;

/// How long an issue token is, in bytes (128 random bits).
pub(crate) const ISSUE_TOKEN_BYTES: usize = 16;

/// State codes, as stored: one byte each.
pub(crate) mod state {
    pub(crate) const ACTIVE: &[u8] = b"a";
    pub(crate) const REVOKED: &[u8] = b"r";
    pub(crate) const CONSUMED: &[u8] = b"c";
    pub(crate) const LOCKED: &[u8] = b"l";
}

/// Appends one field: its length, then its bytes. A length of at most
/// [`SHORT_MAX`] is one byte; a longer one is [`LONG`] and four bytes, big
/// endian.
pub(crate) fn put(out: &mut Vec<u8>, value: &[u8]) {
    match u8::try_from(value.len()) {
        Ok(len) if usize::from(len) <= SHORT_MAX => out.push(len),
        _ => {
            out.push(LONG);
            // Redis values are at most 512 MiB, far below 4 GiB.
            let len = u32::try_from(value.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
        }
    }
    out.extend_from_slice(value);
}

/// Appends an optional field.
fn put_opt(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(value) => put(out, value),
        None => out.push(ABSENT),
    }
}

/// The action in the record: method, selector, the description only when it
/// is not the default `"{method} {selector}"` (absent otherwise, which
/// halves a typical action), then each argument's key and value. The
/// reader rebuilds the canonical JSON from them and accepts it only through
/// [`Action::from_canonical_json`].
fn encode_action(action: &Action) -> Vec<u8> {
    let mut out = Vec::new();
    put(&mut out, action.method().as_bytes());
    put(&mut out, action.selector().as_bytes());
    let default = format!("{} {}", action.method(), action.selector());
    let description = action.description();
    put_opt(
        &mut out,
        (description != default).then_some(description.as_bytes()),
    );
    for (key, value) in action.arguments() {
        put(&mut out, key.as_bytes());
        put(&mut out, value.as_bytes());
    }
    out
}

/// The fields `issue` writes, in record order, up to the generations (the
/// issue script appends the fences' generations it reads and the changing
/// fields of a new, active grant). `issue_token` is raw bytes.
pub(crate) fn encode_new(approval: &Approval, issue_token: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(FORMAT_VERSION);
    put(&mut out, approval.id.as_str().as_bytes());
    put(&mut out, approval.actor_id.as_str().as_bytes());
    put(&mut out, approval.run_id.as_str().as_bytes());
    put(&mut out, approval.url.as_bytes());
    put(&mut out, &encode_action(&approval.action));
    put(&mut out, approval.action_digest.as_bytes());
    put(
        &mut out,
        approval.issued_at.as_millis().to_string().as_bytes(),
    );
    put(
        &mut out,
        approval.expires_at.as_millis().to_string().as_bytes(),
    );
    put(&mut out, approval.attempt_limit.to_string().as_bytes());
    put(&mut out, issue_token);
    let approver = approval.approver.as_ref();
    put_opt(&mut out, approver.map(|a| a.id.as_str().as_bytes()));
    let approved_at = approver.map(|a| a.approved_at.as_millis().to_string());
    put_opt(&mut out, approved_at.as_deref().map(str::as_bytes));
    for value in [
        &approval.approver_note,
        &approval.page_revision,
        &approval.operation_id,
        &approval.session_id,
    ] {
        put_opt(&mut out, value.as_deref().map(str::as_bytes));
    }
    let element = approval
        .element
        .as_ref()
        .map(ElementIdentity::canonical_json);
    put_opt(&mut out, element.as_deref().map(str::as_bytes));
    out
}

/// Reads fields one after the other, refusing anything but the exact
/// encoding [`put`] writes.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(out)
    }

    /// The next field: `Some(None)` when it is absent, `None` when the bytes
    /// are not a field.
    pub(crate) fn field(&mut self) -> Option<Option<&'a [u8]>> {
        let len = *self.take(1)?.first()?;
        match len {
            ABSENT => Some(None),
            LONG => {
                let raw: [u8; 4] = self.take(4)?.try_into().ok()?;
                let len = usize::try_from(u32::from_be_bytes(raw)).ok()?;
                // The long form only for lengths the short one cannot hold.
                if len <= SHORT_MAX {
                    return None;
                }
                self.take(len).map(Some)
            }
            len if usize::from(len) <= SHORT_MAX => self.take(usize::from(len)).map(Some),
            _ => None,
        }
    }

    pub(crate) fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// Parses a decimal timestamp exactly as the store writes it: digits only,
/// no sign, no leading zeros.
fn parse_millis(text: &str) -> Option<Timestamp> {
    parse_u64(text).map(Timestamp::from_millis)
}

/// Parses a decimal integer exactly as the store writes it.
pub(crate) fn parse_u64(text: &str) -> Option<u64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let canonical = text == "0" || !text.starts_with('0');
    if !(digits_only && canonical) {
        return None;
    }
    text.parse::<u64>().ok()
}

/// A field as UTF-8 text (`Some(None)` when absent; `None` when the bytes
/// are not a field or not UTF-8).
fn utf8_field<'a>(r: &mut Reader<'a>) -> Option<Option<&'a str>> {
    match r.field()? {
        Some(bytes) => std::str::from_utf8(bytes).ok().map(Some),
        None => Some(None),
    }
}

/// The canonical JSON text of an action stored as [`encode_action`] writes
/// it; `None` when the bytes are not such an action (an explicit
/// description equal to the default is not how the encoder writes it).
fn action_json(bytes: &[u8]) -> Option<String> {
    let mut r = Reader::new(bytes);
    let method = utf8_field(&mut r)??;
    let selector = utf8_field(&mut r)??;
    let default = format!("{method} {selector}");
    let description = match utf8_field(&mut r)? {
        Some(description) if description == default => return None,
        Some(description) => description.to_owned(),
        None => default,
    };
    let mut arguments = Vec::new();
    while !r.done() {
        let key = utf8_field(&mut r)??;
        let value = utf8_field(&mut r)??;
        arguments.push((key, value));
    }
    // Built the way the canonical form is written: keys sorted at every
    // level (the arguments in stored order, which the strict reader then
    // requires to be sorted), strings escaped by serde_json, no whitespace.
    let quote = |s: &str| serde_json::to_string(s).ok();
    let mut json = String::from("{\"arguments\":{");
    for (n, (key, value)) in arguments.iter().enumerate() {
        if n > 0 {
            json.push(',');
        }
        let _ = write!(json, "{}:{}", quote(key)?, quote(value)?);
    }
    let _ = write!(
        json,
        "}},\"description\":{},\"method\":{},\"selector\":{}}}",
        quote(&description)?,
        quote(method)?,
        quote(selector)?
    );
    Some(json)
}

/// The changing fields of a record, as stored.
struct Changing<'a> {
    state: &'a [u8],
    failed: &'a str,
    consumed_at: Option<&'a str>,
    consumed_by: Option<&'a str>,
    abandoned: Option<&'a str>,
}

/// A record read strictly: the grant in its stored state and the attempts
/// abandoned on it.
pub(crate) struct Decoded {
    /// The grant, in its stored state (`Active`, `Revoked`, `Locked` or
    /// `Consumed`); whether it is stopped depends on its fences, which the
    /// caller knows.
    pub(crate) grant: StoredGrant,
    /// The attempts given back with `abandon`.
    pub(crate) abandoned: Vec<AttemptId>,
}

/// Reads a record (the key's string value) as a grant of id `id`, accepting
/// only a complete, well-formed v=4 record, or a v=3 one (no element bound).
pub(crate) fn decode(id: &ApprovalId, key: &str, record: &[u8]) -> Result<Decoded, StoreError> {
    let corrupt = |message: &str| StoreError::corrupt(key, message);
    let Some((&version, rest)) = record.split_first() else {
        return Err(corrupt("record is empty"));
    };
    if version != FORMAT_VERSION && version != OLD_FORMAT_VERSION {
        return Err(corrupt(&format!(
            "unsupported record format version {version}"
        )));
    }
    let mut r = Reader::new(rest);
    let mut next = |name: &str| -> Result<Option<&[u8]>, StoreError> {
        r.field()
            .ok_or_else(|| corrupt(&format!("record is cut short at {name}")))
    };
    // Every field in record order (RECORD_FIELDS), then nothing.
    let mut values: Vec<Option<&[u8]>> = Vec::with_capacity(RECORD_FIELDS.len());
    for (index, name) in RECORD_FIELDS.into_iter().enumerate() {
        if index == ELEMENT_FIELD && version == OLD_FORMAT_VERSION {
            values.push(None);
            continue;
        }
        values.push(next(name)?);
    }
    if !r.done() {
        return Err(corrupt("record has bytes after its last field"));
    }
    let raw = |index: usize| -> Result<&[u8], StoreError> {
        values.get(index).copied().flatten().ok_or_else(|| {
            corrupt(&format!(
                "missing field {}",
                RECORD_FIELDS.get(index).copied().unwrap_or("?")
            ))
        })
    };
    let utf8 = |index: usize, value: &[u8]| -> Result<String, StoreError> {
        std::str::from_utf8(value).map(str::to_owned).map_err(|_| {
            corrupt(&format!(
                "{} is not utf-8 text",
                RECORD_FIELDS.get(index).copied().unwrap_or("?")
            ))
        })
    };
    let required = |index: usize| -> Result<String, StoreError> { utf8(index, raw(index)?) };
    let optional = |index: usize| -> Result<Option<String>, StoreError> {
        match values.get(index).copied().flatten() {
            Some(value) => utf8(index, value).map(Some),
            None => Ok(None),
        }
    };
    let stored_id = required(0)?;
    let actor = required(1)?;
    let run = required(2)?;
    let url = required(3)?;
    let action = raw(4)?;
    let digest = raw(5)?;
    let issued_at = required(6)?;
    let expires_at = required(7)?;
    let attempt_limit = required(8)?;
    let issue_token = raw(9)?;
    let approver_id = optional(10)?;
    let approved_at = optional(11)?;
    let approver_note = optional(12)?;
    let page_revision = optional(13)?;
    let operation_id = optional(14)?;
    let session_id = optional(15)?;
    let element = optional(ELEMENT_FIELD)?;
    let rgen = required(17)?;
    let agen = required(18)?;
    let state = raw(19)?;
    let failed = required(20)?;
    let consumed_at = optional(21)?;
    let consumed_by = optional(22)?;
    let abandoned = optional(23)?;

    if stored_id != id.as_str() {
        return Err(corrupt("id field does not match the key"));
    }
    if issue_token.len() != ISSUE_TOKEN_BYTES {
        return Err(corrupt("issue token is not 16 bytes"));
    }
    let actor_id = ActorId::new(actor).map_err(|_| corrupt("actor is not a valid actor id"))?;
    let run_id = RunId::new(run).map_err(|_| corrupt("run is not a valid run id"))?;
    let action = action_json(action)
        .and_then(|json| Action::from_canonical_json(&json).ok())
        .ok_or_else(|| corrupt("action is not a canonical action"))?;
    let digest: [u8; 32] = digest
        .try_into()
        .map_err(|_| corrupt("digest is not 32 bytes"))?;
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let action_digest =
        ActionDigest::from_str(&hex).map_err(|_| corrupt("digest is not 32 bytes"))?;
    if action_digest != action.digest() {
        return Err(corrupt("digest does not match the action"));
    }
    let issued_at =
        parse_millis(&issued_at).ok_or_else(|| corrupt("issued_at is not a timestamp"))?;
    let expires_at =
        parse_millis(&expires_at).ok_or_else(|| corrupt("expires_at is not a timestamp"))?;
    let approver = match (approver_id, approved_at) {
        (None, None) => None,
        (Some(id), Some(at)) => Some(Approver {
            id: ApproverId::new(id).map_err(|_| corrupt("approver is not a valid approver id"))?,
            approved_at: parse_millis(&at)
                .ok_or_else(|| corrupt("approved_at is not a timestamp"))?,
        }),
        _ => return Err(corrupt("approver and approved_at must be set together")),
    };
    let element = element
        .map(|json| {
            ElementIdentity::from_canonical_json(&json)
                .map_err(|_| corrupt("element is not the canonical json of an element identity"))
        })
        .transpose()?;
    let attempt_limit = parse_u64(&attempt_limit)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..=MAX_ATTEMPT_LIMIT).contains(n))
        .ok_or_else(|| corrupt("attempt_limit is not 1 to 100"))?;
    for generation in [&rgen, &agen] {
        parse_u64(generation).ok_or_else(|| corrupt("generation is not a decimal integer"))?;
    }
    let changing = Changing {
        state,
        failed: &failed,
        consumed_at: consumed_at.as_deref(),
        consumed_by: consumed_by.as_deref(),
        abandoned: abandoned.as_deref(),
    };
    let (state, failed_attempts) = decode_changing(key, &changing, attempt_limit)?;
    let abandoned = decode_abandoned(key, changing.abandoned)?;
    Ok(Decoded {
        grant: StoredGrant {
            approval: Approval {
                id: id.clone(),
                actor_id,
                run_id,
                url,
                action,
                action_digest,
                issued_at,
                expires_at,
                approver_note,
                approver,
                attempt_limit,
                page_revision,
                operation_id,
                session_id,
                element,
            },
            state,
            failed_attempts,
        },
        abandoned,
    })
}

/// The head of a record as this store encoded it at issue
/// ([`encode_new`]: the format byte and fields 1 to 17), and the grant,
/// checked when it was built, that those bytes encode.
#[derive(Debug)]
pub(crate) struct Head {
    bytes: Vec<u8>,
    approval: Approval,
}

impl Head {
    /// The head `encode_new(approval, …)` wrote as `bytes`.
    pub(crate) fn new(bytes: Vec<u8>, approval: Approval) -> Self {
        Head { bytes, approval }
    }
}

/// Reads a record that starts with the very bytes of `head`, parsing only
/// what follows them: those bytes decode to `head`'s grant (the reader and
/// [`encode_new`] agree field for field), so reading them again could only
/// repeat checks that grant already passed. What follows is checked as
/// [`decode`] checks it. `None` when the record does not start with the
/// head, or when anything after it is not as [`decode`] wants: the caller
/// then reads it with [`decode`], which says what is wrong.
pub(crate) fn decode_after_head(key: &str, record: &[u8], head: &Head) -> Option<Decoded> {
    /// The next field as text: `Some(None)` when absent, `None` when the
    /// bytes are not a field or not UTF-8.
    fn text<'a>(r: &mut Reader<'a>) -> Option<Option<&'a str>> {
        match r.field()? {
            Some(value) => std::str::from_utf8(value).ok().map(Some),
            None => Some(None),
        }
    }
    let rest = record.strip_prefix(head.bytes.as_slice())?;
    let mut r = Reader::new(rest);
    for _generation in ["rgen", "agen"] {
        parse_u64(text(&mut r)??)?;
    }
    let state = r.field()??;
    let failed = text(&mut r)??;
    let (consumed_at, consumed_by, abandoned) = (text(&mut r)?, text(&mut r)?, text(&mut r)?);
    if !r.done() {
        return None;
    }
    let changing = Changing {
        state,
        failed,
        consumed_at,
        consumed_by,
        abandoned,
    };
    let (state, failed_attempts) =
        decode_changing(key, &changing, head.approval.attempt_limit).ok()?;
    let abandoned = decode_abandoned(key, changing.abandoned).ok()?;
    Some(Decoded {
        grant: StoredGrant {
            approval: head.approval.clone(),
            state,
            failed_attempts,
        },
        abandoned,
    })
}

/// The state and the count of failed attempts, checked against each other
/// and the attempt limit.
fn decode_changing(
    key: &str,
    changing: &Changing<'_>,
    attempt_limit: u32,
) -> Result<(GrantState, u32), StoreError> {
    let corrupt = |message: &str| StoreError::corrupt(key, message);
    let failed_attempts = parse_u64(changing.failed)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| corrupt("failed is not a count"))?;
    let state = match (changing.state, changing.consumed_at, changing.consumed_by) {
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
        (state::CONSUMED, None, _) => return Err(corrupt("consumed record lacks consumed_at")),
        (state::CONSUMED, Some(_), None) => {
            return Err(corrupt("consumed record lacks consumed_by"));
        }
        _ => return Err(corrupt("unknown state")),
    };
    check_failed(
        key,
        state == GrantState::Locked,
        failed_attempts,
        attempt_limit,
    )?;
    Ok((state, failed_attempts))
}

/// Checks a record's count of failed attempts against its attempt limit: a
/// locked record counts exactly its limit, any other one less.
pub(crate) fn check_failed(
    key: &str,
    locked: bool,
    failed_attempts: u32,
    attempt_limit: u32,
) -> Result<(), StoreError> {
    if locked && failed_attempts != attempt_limit {
        return Err(StoreError::corrupt(
            key,
            "locked record does not count its limit of failed attempts",
        ));
    }
    if !locked && failed_attempts >= attempt_limit {
        return Err(StoreError::corrupt(
            key,
            "failed attempts reach the limit of a record that is not locked",
        ));
    }
    Ok(())
}

/// Reads the attempts abandoned on a grant: the space-separated `abandoned`
/// field, or none (see [`decode_attempts`]).
fn decode_abandoned(key: &str, list: Option<&str>) -> Result<Vec<AttemptId>, StoreError> {
    decode_attempts(key, "abandoned", list, MAX_ABANDONED_ATTEMPTS)
}

/// Reads the space-separated list of attempt ids in field `name`, or none
/// when it is absent. Accepts only distinct attempt ids, at most `most`.
pub(crate) fn decode_attempts(
    key: &str,
    name: &str,
    list: Option<&str>,
    most: usize,
) -> Result<Vec<AttemptId>, StoreError> {
    let corrupt = |what: &str| StoreError::corrupt(key, format!("{name} {what}"));
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let mut attempts: Vec<AttemptId> = Vec::new();
    for word in list.split(' ') {
        let attempt =
            AttemptId::parse(word).ok_or_else(|| corrupt("is not a list of attempt ids"))?;
        if attempts.contains(&attempt) {
            return Err(corrupt("repeats an attempt id"));
        }
        attempts.push(attempt);
    }
    if attempts.len() > most {
        return Err(corrupt("holds more attempts than the bound"));
    }
    Ok(attempts)
}

/// One field of a record: its name (one of [`RECORD_FIELDS`]) and its
/// stored bytes, `None` when it is absent.
pub type RecordField = (&'static str, Option<Vec<u8>>);

/// A record's fields by name, for tests and tools that look at or damage
/// records: every field in record order with its stored bytes (`None` when
/// absent), or `None` when the bytes are not a v=4 record's layout. It
/// checks the layout only, not the values (the store's reader does).
pub fn record_fields(record: &[u8]) -> Option<Vec<RecordField>> {
    let (&version, rest) = record.split_first()?;
    if version != FORMAT_VERSION {
        return None;
    }
    let mut r = Reader::new(rest);
    let mut out = Vec::with_capacity(RECORD_FIELDS.len());
    for name in RECORD_FIELDS {
        out.push((name, r.field()?.map(<[u8]>::to_vec)));
    }
    r.done().then_some(out)
}

/// Builds a record from fields in [`RECORD_FIELDS`] order (the names are
/// not looked at: the values are written in the order given, after the
/// format byte): the inverse of [`record_fields`], for tests and tools that
/// write records on purpose.
pub fn record_from_fields(fields: &[(&str, Option<Vec<u8>>)]) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    for (_, value) in fields {
        put_opt(&mut out, value.as_deref());
    }
    out
}

/// The fields of a v=4 record, in order, after its format byte (a v=3
/// record, written by the previous version, has all but `element`).
pub const RECORD_FIELDS: [&str; 24] = [
    "id",
    "actor",
    "run",
    "url",
    "action",
    "digest",
    "issued_at",
    "expires_at",
    "attempt_limit",
    "issue_token",
    "approver",
    "approved_at",
    "note",
    "page_revision",
    "operation_id",
    "session_id",
    "element",
    "rgen",
    "agen",
    "state",
    "failed",
    "consumed_at",
    "consumed_by",
    "abandoned",
];

#[cfg(test)]
pub(crate) mod tests {
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
    fn fields_use_the_short_form_up_to_its_limit_and_only_then_the_long_one() {
        for len in [0usize, 1, 0xFC, 0xFD, 0xFE, 0xFF, 300, 70_000] {
            let value = vec![b'x'; len];
            let mut out = Vec::new();
            put(&mut out, &value);
            let header = if len <= SHORT_MAX { 1 } else { 5 };
            assert_eq!(out.len(), header + len, "{len}");
            let mut r = Reader::new(&out);
            assert_eq!(r.field(), Some(Some(&value[..])), "{len}");
            assert!(r.done());
        }
        // A long form for a short length, a reserved length byte, a field
        // longer than what follows: not fields.
        for bad in [
            &[LONG, 0, 0, 0, 3, b'a', b'b', b'c'][..],
            &[0xFF],
            &[3, b'a'],
            &[LONG, 0, 0],
        ] {
            assert_eq!(Reader::new(bad).field(), None, "{bad:?}");
        }
        assert_eq!(Reader::new(&[ABSENT]).field(), Some(None));
    }

    /// A grant with every optional field set, an action with arguments and
    /// an explicit description, and fields past the one-byte length.
    fn full_grant() -> Approval {
        use countersign_approval_core::policy::{Policy, StaticResolver};
        let policy = Policy::builder()
            .allow_host("docs.example.com")
            .resolver(StaticResolver::answering_all(["93.184.216.34"
                .parse()
                .unwrap()]))
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let long_path = "p".repeat(400);
        let url = rt
            .block_on(
                policy.authorize_destination(&format!("https://docs.example.com/{long_path}?q=ü")),
            )
            .unwrap();
        let action = policy
            .authorize_action(&serde_json::json!({
                "method": "fill",
                "selector": "input[name=\"q\"] «ü»",
                "description": "type the \"query\"\n",
                "arguments": {"value": "x".repeat(300), "a": "1"},
            }))
            .unwrap();
        let now = Timestamp::from_millis(1_700_000_000_000);
        let mut approval = Approval::for_action(
            ActorId::new("actor {x}").unwrap(),
            RunId::new("run-1").unwrap(),
            &url,
            &action,
            std::time::Duration::from_secs(60),
            now,
        )
        .unwrap()
        .with_note("approved by ops")
        .unwrap()
        .approved_by(ApproverId::new("ops «lead»").unwrap(), now)
        .unwrap()
        .with_attempt_limit(7)
        .unwrap();
        approval.page_revision = Some("rev-9".to_owned());
        approval.operation_id = Some("op_1".to_owned());
        approval.session_id = Some("sess/tab".to_owned());
        approval.element = Some(element());
        approval
    }

    /// An element identity with quotes, non-ASCII, a bidi override and two
    /// frames.
    pub(crate) fn element() -> ElementIdentity {
        use countersign_approval_core::FrameIdentity;
        ElementIdentity::new(
            "button",
            "Pay «5 €» \"now\" \u{202E}gnp.exe",
            "button",
            "Pay",
            std::collections::BTreeMap::from([("type".to_owned(), "submit".to_owned())]),
            vec![
                FrameIdentity::new("https://shop.example", "D0C"),
                FrameIdentity::new("https://pay.example", "D1\"\\"),
            ],
        )
        .unwrap()
    }

    /// `raw` as the previous version wrote it: format byte 3 and no
    /// `element` field (which `raw` must hold absent).
    fn as_v3(raw: &[u8]) -> Vec<u8> {
        let mut fields = record_fields(raw).unwrap();
        let (name, value) = fields.remove(ELEMENT_FIELD);
        assert_eq!((name, value), ("element", None));
        let mut old = record_from_fields(&fields);
        old[0] = OLD_FORMAT_VERSION;
        old
    }

    #[test]
    fn the_element_is_kept_and_read_strictly() {
        let approval = full_grant();
        let raw = stored(&approval);
        let fields = record_fields(&raw).unwrap();
        let json = element().canonical_json();
        assert_eq!(
            fields[ELEMENT_FIELD],
            ("element", Some(json.clone().into_bytes()))
        );
        // Without an element: absent, one byte.
        let mut bare = approval.clone();
        bare.element = None;
        let bare_raw = stored(&bare);
        let header = if json.len() <= SHORT_MAX { 1 } else { 5 };
        assert_eq!(raw.len() - bare_raw.len(), header + json.len() - 1);
        assert_eq!(
            decode(&bare.id, "k", &bare_raw).unwrap().grant.approval,
            bare
        );
        // Anything but the exact canonical JSON of a valid identity: corrupt.
        let spaced = json.replacen(':', ": ", 1);
        let unknown_key = json.replacen("{", "{\"x\":1,", 1);
        let bad_tag = json.replace("\"tag\":\"button\"", "\"tag\":\"BUTTON\"");
        for bad in [
            &b""[..],
            b"null",
            b"{}",
            spaced.as_bytes(),
            unknown_key.as_bytes(),
            bad_tag.as_bytes(),
            b"\xff",
        ] {
            let mut damaged = fields.clone();
            damaged[ELEMENT_FIELD].1 = Some(bad.to_vec());
            let err = decode(&approval.id, "k", &record_from_fields(&damaged)).err();
            assert!(
                matches!(&err, Some(StoreError::Corrupt { message, .. }) if message.contains("element")),
                "{:?}: {err:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// Text of up to `max` characters drawn from the ones an encoding could
    /// get wrong: quotes, backslashes, controls, white space, bidi
    /// controls, two-, three- and four-byte characters.
    fn tricky_text(max: usize) -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let chars = prop::sample::select(vec![
            'a', 'Z', '0', ' ', '"', '\\', '/', '{', '}', ':', ',', '\n', '\t', '\u{0}', '\u{1f}',
            '\u{7f}', 'é', '«', '€', '\u{2028}', '\u{202E}', '\u{202C}', '\u{200F}', '😀',
        ]);
        prop::collection::vec(chars, 0..max).prop_map(|c| c.into_iter().collect())
    }

    /// Printable ASCII of 1 to `max` characters (a frame's origin or
    /// document id).
    fn graphic(max: usize) -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex(&format!("[!-~]{{1,{max}}}")).unwrap()
    }

    /// Any element identity `ElementIdentity::new` accepts.
    pub(crate) fn any_element() -> impl proptest::strategy::Strategy<Value = ElementIdentity> {
        use countersign_approval_core::{ELEMENT_ATTRIBUTES, FrameIdentity};
        use proptest::prelude::*;
        let attributes = prop::collection::btree_map(
            prop::sample::select(ELEMENT_ATTRIBUTES.to_vec()).prop_map(str::to_owned),
            tricky_text(40),
            0..=ELEMENT_ATTRIBUTES.len(),
        );
        let frames = prop::collection::vec(
            (graphic(40), graphic(40)).prop_map(|(o, d)| FrameIdentity::new(o, d)),
            1..=countersign_approval_core::MAX_FRAMES,
        );
        (
            proptest::string::string_regex("[!-~]{0,20}").unwrap(),
            tricky_text(60),
            proptest::string::string_regex("[a-zA-Z0-9-]{1,20}").unwrap(),
            tricky_text(60),
            attributes,
            frames,
        )
            .prop_map(|(role, name, tag, text, attributes, frames)| {
                ElementIdentity::new(role, &name, &tag, &text, attributes, frames).unwrap()
            })
    }

    proptest::proptest! {
        /// Any element identity is kept byte for byte: the record reads
        /// back as the grant it was written from, and its element field is
        /// the canonical JSON; the same grant without an element reads the
        /// same from a v=3 record.
        #[test]
        fn any_element_round_trips_through_the_record(element in any_element()) {
            let mut approval = full_grant();
            approval.element = Some(element.clone());
            let raw = stored(&approval);
            proptest::prop_assert_eq!(
                &decode(&approval.id, "k", &raw).unwrap().grant.approval,
                &approval
            );
            let fields = record_fields(&raw).unwrap();
            let json = element.canonical_json();
            proptest::prop_assert_eq!(
                fields[ELEMENT_FIELD].1.as_deref(),
                Some(json.as_bytes())
            );
            approval.element = None;
            let old = as_v3(&stored(&approval));
            proptest::prop_assert_eq!(decode(&approval.id, "k", &old).unwrap().grant.approval, approval);
        }
    }

    #[test]
    fn a_v3_record_reads_as_a_grant_with_no_element() {
        let mut approval = full_grant();
        approval.element = None;
        let old = as_v3(&stored(&approval));
        assert_eq!(old[0], 3);
        let decoded = decode(&approval.id, "k", &old).unwrap();
        assert_eq!(decoded.grant.approval, approval);
        assert_eq!(decoded.grant.failed_attempts, 2);
        // Not a v=4 layout, and a v=4 byte on a v=3 layout is cut short.
        assert_eq!(record_fields(&old), None);
        let mut relabelled = old.clone();
        relabelled[0] = FORMAT_VERSION;
        assert!(decode(&approval.id, "k", &relabelled).is_err());
        for version in [0u8, 2, 5, 0xFF] {
            let mut other = old.clone();
            other[0] = version;
            assert!(matches!(
                decode(&approval.id, "k", &other),
                Err(StoreError::Corrupt { .. })
            ));
        }
    }

    /// The record the issue script makes of `encode_new`'s bytes, then
    /// changed as a consume and two abandons would.
    fn stored(approval: &Approval) -> Vec<u8> {
        let mut raw = encode_new(approval, &[7u8; ISSUE_TOKEN_BYTES]);
        for value in ["0", "3", "c", "2", "17", "att_x"] {
            put(&mut raw, value.as_bytes());
        }
        put(&mut raw, b"att_a att_b");
        raw
    }

    /// Past a head this store encoded, a record reads exactly as the full
    /// reader reads it; anything the full reader would refuse after the
    /// head, or a record with other head bytes, is left to the full reader.
    #[test]
    fn a_record_read_past_its_head_reads_as_the_whole_record() {
        let approval = full_grant();
        let head = Head::new(
            encode_new(&approval, &[7u8; ISSUE_TOKEN_BYTES]),
            approval.clone(),
        );
        let raw = stored(&approval);
        let fast = decode_after_head("k", &raw, &head).unwrap();
        let full = decode(&approval.id, "k", &raw).unwrap();
        assert_eq!(fast.grant, full.grant);
        assert_eq!(fast.abandoned, full.abandoned);
        let mut active = encode_new(&approval, &[7u8; ISSUE_TOKEN_BYTES]);
        for value in [Some("0"), Some("1"), Some("a"), Some("0"), None, None, None] {
            put_opt(&mut active, value.map(str::as_bytes));
        }
        let fast = decode_after_head("k", &active, &head).unwrap();
        assert_eq!(
            fast.grant,
            decode(&approval.id, "k", &active).unwrap().grant
        );
        // Another issue token: other head bytes.
        let other = stored_with_token(&approval, [8u8; ISSUE_TOKEN_BYTES]);
        assert!(decode_after_head("k", &other, &head).is_none());
        // Damage after the head: each is refused by the full reader.
        let fields = record_fields(&raw).unwrap();
        let damages: [(&str, Option<&[u8]>); 7] = [
            ("rgen", Some(b"01")),
            ("agen", None),
            ("state", Some(b"x")),
            ("failed", Some(b"9")),
            ("consumed_at", None),
            ("consumed_by", Some(b"not an id!")),
            ("abandoned", Some(b"att_a  att_b")),
        ];
        for (name, value) in damages {
            let mut damaged = fields.clone();
            let field = damaged.iter_mut().find(|(n, _)| *n == name).unwrap();
            field.1 = value.map(<[u8]>::to_vec);
            let damaged = record_from_fields(&damaged);
            assert!(decode(&approval.id, "k", &damaged).is_err(), "{name}");
            assert!(decode_after_head("k", &damaged, &head).is_none(), "{name}");
        }
        let mut longer = raw.clone();
        longer.push(0);
        assert!(decode_after_head("k", &longer, &head).is_none());
        assert!(decode_after_head("k", &raw[..raw.len() - 1], &head).is_none());
    }

    fn stored_with_token(approval: &Approval, token: [u8; ISSUE_TOKEN_BYTES]) -> Vec<u8> {
        let mut raw = encode_new(approval, &token);
        for value in ["0", "3", "c", "2", "17", "att_x"] {
            put(&mut raw, value.as_bytes());
        }
        put(&mut raw, b"att_a att_b");
        raw
    }

    #[test]
    fn a_record_reads_back_as_the_grant_it_was_written_from() {
        let approval = full_grant();
        let raw = stored(&approval);
        let decoded = decode(&approval.id, "k", &raw).unwrap();
        assert_eq!(decoded.grant.approval, approval);
        assert_eq!(
            decoded.grant.state,
            GrantState::Consumed {
                at: Timestamp::from_millis(17),
                by: AttemptId::parse("att_x").unwrap()
            }
        );
        assert_eq!(decoded.grant.failed_attempts, 2);
        assert_eq!(decoded.abandoned.len(), 2);
        // The inspection helpers see the same fields and rebuild the bytes.
        let fields = record_fields(&raw).unwrap();
        assert_eq!(fields.len(), RECORD_FIELDS.len());
        assert_eq!(record_from_fields(&fields), raw);
        // Another id's key: refused.
        let other = ApprovalId::parse("apr_other").unwrap();
        assert!(matches!(
            decode(&other, "k", &raw),
            Err(StoreError::Corrupt { .. })
        ));
        // Every byte cut off the end is a record cut short.
        for len in 0..raw.len() {
            assert!(decode(&approval.id, "k", &raw[..len]).is_err(), "{len}");
        }
    }

    #[test]
    fn a_default_description_is_left_out_and_rebuilt() {
        let mut approval = full_grant();
        let policy = countersign_approval_core::policy::Policy::builder()
            .allow_host("docs.example.com")
            .resolver(
                countersign_approval_core::policy::StaticResolver::answering_all(["93.184.216.34"
                    .parse()
                    .unwrap()]),
            )
            .build()
            .unwrap();
        approval.action = policy
            .authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))
            .unwrap();
        approval.action_digest = approval.action.digest();
        let blob = encode_action(&approval.action);
        assert_eq!(blob, b"\x05click\x06a#docs\xfd");
        let raw = stored(&approval);
        assert_eq!(
            decode(&approval.id, "k", &raw).unwrap().grant.approval,
            approval
        );
    }

    #[test]
    fn the_lua_layout_matches_the_rust_one() {
        let prelude = include_str!("lua/prelude.lua");
        assert!(prelude.contains(&format!("local FORMAT = {FORMAT_VERSION}\n")));
        assert!(prelude.contains(&format!("local OLD_FORMAT = {OLD_FORMAT_VERSION}\n")));
        assert!(prelude.contains("local LAST_FIXED = 'agen'\n"));
        assert_eq!(RECORD_FIELDS[ELEMENT_FIELD], "element");
        assert!(prelude.contains(&format!("local SHORT_MAX = {SHORT_MAX}\n")));
        assert!(prelude.contains(&format!("local ABSENT = {ABSENT}\n")));
        assert!(prelude.contains(&format!("local LONG = {LONG}\n")));
        assert!(prelude.contains(&format!("local TOKEN_BYTES = {ISSUE_TOKEN_BYTES}\n")));
        assert!(prelude.contains(&format!("local MAX_ABANDONED = {MAX_ABANDONED_ATTEMPTS}\n")));
        assert!(prelude.contains(&format!("local MAX_ATTEMPT_LIMIT = {MAX_ATTEMPT_LIMIT}\n")));
        assert_eq!(lua_names(prelude, "FIELDS"), RECORD_FIELDS);
    }

    /// The names in the Lua table `local <table> = { 'a', 'b', … }` of
    /// `source`: a script's list of a record's fields.
    pub(crate) fn lua_names<'a>(source: &'a str, table: &str) -> Vec<&'a str> {
        source
            .split_once(&format!("local {table} = {{"))
            .and_then(|(_, rest)| rest.split_once('}'))
            .unwrap()
            .0
            .split(',')
            .map(|n| n.trim().trim_matches('\''))
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// What `decode_changing` says of a record's changing fields: the
    /// state it reads, or the corrupt record's message.
    fn changing(
        state: &[u8],
        failed: &str,
        consumed_at: Option<&str>,
        consumed_by: Option<&str>,
    ) -> Result<(GrantState, u32), String> {
        let fields = Changing {
            state,
            failed,
            consumed_at,
            consumed_by,
            abandoned: None,
        };
        decode_changing("k", &fields, 5).map_err(|e| match e {
            StoreError::Corrupt { key, message } if key == "k" => message,
            other => format!("not corrupt: {other:?}"),
        })
    }

    #[test]
    fn consumed_fields_say_what_is_missing_or_malformed() {
        let at = Timestamp::from_millis(5);
        let by = AttemptId::parse("att_x").unwrap();
        assert_eq!(
            changing(state::CONSUMED, "0", Some("5"), Some("att_x")),
            Ok((GrantState::Consumed { at, by }, 0))
        );
        for (consumed_at, consumed_by, message) in [
            (None, None, "consumed record lacks consumed_at"),
            (None, Some("att_x"), "consumed record lacks consumed_at"),
            (Some("5"), None, "consumed record lacks consumed_by"),
            (Some("soon"), None, "consumed record lacks consumed_by"),
            (
                Some("soon"),
                Some("att_x"),
                "consumed_at is not a timestamp",
            ),
            (Some("05"), Some("att_x"), "consumed_at is not a timestamp"),
            (
                Some("5"),
                Some("not an id!"),
                "consumed_by is not an attempt id",
            ),
            (Some("5"), Some(""), "consumed_by is not an attempt id"),
        ] {
            assert_eq!(
                changing(state::CONSUMED, "0", consumed_at, consumed_by),
                Err(message.to_owned()),
                "{consumed_at:?} {consumed_by:?}"
            );
        }
    }

    #[test]
    fn failed_attempts_are_checked_against_the_limit() {
        assert_eq!(
            changing(state::ACTIVE, "4", None, None),
            Ok((GrantState::Active, 4))
        );
        assert_eq!(
            changing(state::LOCKED, "5", None, None),
            Ok((GrantState::Locked, 5))
        );
        for (state, failed) in [
            (state::ACTIVE, "5"),
            (state::ACTIVE, "999"),
            (state::REVOKED, "5"),
        ] {
            assert_eq!(
                changing(state, failed, None, None),
                Err("failed attempts reach the limit of a record that is not locked".to_owned()),
                "{failed}"
            );
        }
        assert_eq!(
            changing(state::LOCKED, "4", None, None),
            Err("locked record does not count its limit of failed attempts".to_owned())
        );
    }

    #[test]
    fn abandoned_lists_are_read_strictly() {
        assert_eq!(decode_abandoned("k", Some("att_1 att_2")).unwrap().len(), 2);
        assert_eq!(
            decode_abandoned("k", None).unwrap(),
            Vec::<AttemptId>::new()
        );
        let full: Vec<String> = (0..MAX_ABANDONED_ATTEMPTS)
            .map(|n| format!("att_{n}"))
            .collect();
        assert_eq!(
            decode_abandoned("k", Some(&full.join(" "))).unwrap().len(),
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
                    decode_abandoned("k", Some(bad)),
                    Err(StoreError::Corrupt { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
