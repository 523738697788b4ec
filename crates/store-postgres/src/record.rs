//! How a grant is laid out in its row (format 2, with the `element` column
//! of schema version 4), its seal, and the strict reader of that layout.

use std::str::FromStr;

use countersign_approval_core::policy::{Action, ActionDigest};
use countersign_approval_core::{
    ActorId, Approval, ApprovalId, Approver, ApproverId, AttemptId, ElementIdentity, GrantState,
    MAX_ABANDONED_ATTEMPTS, RunId, StoreError, StoredGrant, Timestamp,
};
use sha2::{Digest, Sha256};
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

/// The row format written by this version of the store. Format 1 rows (schema
/// version 1) are converted to format 2 by the version 2 migration.
pub(crate) const FORMAT: i16 = 2;

/// The largest count a `u32` column holds (attempt limit, failed attempts).
pub(crate) const U32_MAX_SQL: &str = "4294967295";

/// State names, as stored.
pub(crate) mod state {
    pub(crate) const ACTIVE: &str = "active";
    pub(crate) const REVOKED: &str = "revoked";
    pub(crate) const CONSUMED: &str = "consumed";
    pub(crate) const LOCKED: &str = "locked";
}

/// Every column of a grant row, in the order [`decode`] reads them, then
/// the current generations of its run's and actor's fences.
const GRANT_COLUMNS: [&str; 25] = [
    "id",
    "format",
    "seal",
    "actor_id",
    "run_id",
    "url",
    "action",
    "action_digest",
    "issued_at",
    "expires_at",
    "approver_note",
    "page_revision",
    "operation_id",
    "session_id",
    "approver_id",
    "approved_at",
    "attempt_limit",
    "run_gen",
    "actor_gen",
    "state",
    "consumed_at",
    "consumed_by",
    "abandoned_attempts",
    "failed_attempts",
    "element",
];

/// The columns [`decode`] reads, for a select from the grants table as `g`
/// joined to its run fence as `rf` and its actor fence as `af`.
pub(crate) fn select_columns() -> String {
    let mut columns: Vec<String> = GRANT_COLUMNS.iter().map(|c| format!("g.{c}")).collect();
    columns.push("rf.gen".to_owned());
    columns.push("af.gen".to_owned());
    columns.join(", ")
}

/// How many values the seal covers.
pub(crate) const SEALED: usize = 18;

/// The sealed columns, in seal order, as SQL text expressions.
pub(crate) const SEALED_SQL: [&str; SEALED] = [
    "format::text",
    "id",
    "actor_id",
    "run_id",
    "url",
    "action",
    "action_digest",
    "issued_at::text",
    "expires_at::text",
    "approver_note",
    "page_revision",
    "operation_id",
    "session_id",
    "approver_id",
    "approved_at::text",
    "attempt_limit::text",
    "run_gen::text",
    "actor_gen::text",
];

/// The columns the format 1 seal covered (schema version 1), in its order.
pub(crate) const SEALED_SQL_V1: [&str; 13] = [
    "format::text",
    "id",
    "actor_id",
    "run_id",
    "url",
    "action",
    "action_digest",
    "issued_at::text",
    "expires_at::text",
    "approver_note",
    "page_revision",
    "operation_id",
    "session_id",
];

/// The SQL expression of a seal over `values` (SQL text expressions, in
/// seal order); equal to [`seal_with_element`] of the same values.
pub(crate) fn seal_sql_over(values: &[&str]) -> String {
    seal_sql_with_element(values, None)
}

/// The SQL expression of a seal over `values` and then, when it is not
/// null, the text expression `element` (the bound element's canonical
/// JSON); equal to [`seal_with_element`] of the same values. A row whose
/// element is null has the seal of its values alone: the seal rows had
/// before schema version 4 added the column.
pub(crate) fn seal_sql_with_element(values: &[&str], element: Option<&str>) -> String {
    let mut parts: Vec<String> = values
        .iter()
        .map(|value| format!("coalesce(octet_length({value})::text || ':' || {value}, '-') || ';'"))
        .collect();
    if let Some(element) = element {
        parts.push(format!(
            "coalesce(octet_length({element})::text || ':' || {element} || ';', '')"
        ));
    }
    format!(
        "encode(sha256(convert_to({}, 'UTF8')), 'hex')",
        parts.join(" || ")
    )
}

/// The SQL expression of the seal of a row that a fenced insert writes
/// (see `Statements`): the columns `sealed` (SQL text expressions, in seal
/// order) taken from its values `v`, the fence generations it records from
/// the fences `r` and `a`, `format` as the format, then the text expression
/// `element` of `v` when there is one. Issuing a grant and issuing a
/// standing grant compute the seal this way, in the statement that reads
/// the generations it covers.
pub(crate) fn insert_seal_sql(sealed: &[&str], format: i16, element: Option<&str>) -> String {
    let values: Vec<String> = sealed
        .iter()
        .map(|column| match *column {
            "format::text" => format!("'{format}'::text"),
            "run_gen::text" => "r.gen::text".to_owned(),
            "actor_gen::text" => "a.gen::text".to_owned(),
            other => format!("v.{other}"),
        })
        .collect();
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    seal_sql_with_element(&values, element)
}

/// The SQL expression that recomputes a row's seal; equal to [`seal_with_element`] of
/// the same values. Statements that change a row require `seal = ` this.
pub(crate) fn seal_sql() -> String {
    seal_sql_with_element(&SEALED_SQL, Some("element"))
}

/// The seal of a row without an element (see [`seal_with_element`]).
#[cfg(test)]
pub(crate) fn seal(values: &[Option<&str>]) -> String {
    seal_with_element(values, None)
}

/// The seal of a row: sha-256, as lower-case hex, over every column
/// written when it was created (for a grant, at issue), each as
/// `<byte length>:<text>;` (`-;` when null), then, when `element` is set,
/// `<byte length>:<text>;` of it (nothing when it is
/// not, so a row without an element keeps the seal it had before schema
/// version 4).
pub(crate) fn seal_with_element(values: &[Option<&str>], element: Option<&str>) -> String {
    let mut hasher = Sha256::new();
    for value in values.iter().chain(element.map(Some).iter()) {
        match value {
            Some(text) => {
                hasher.update(text.len().to_string());
                hasher.update(":");
                hasher.update(text);
            }
            None => hasher.update("-"),
        }
        hasher.update(";");
    }
    hex(&hasher.finalize())
}

/// `bytes` as lower-case hex, as PostgreSQL's `encode(…, 'hex')` writes them.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The columns a seal covers, as stored.
pub(crate) struct Sealed<'a> {
    pub(crate) format: i16,
    pub(crate) id: &'a str,
    pub(crate) actor_id: &'a str,
    pub(crate) run_id: &'a str,
    pub(crate) url: &'a str,
    pub(crate) action: &'a str,
    pub(crate) action_digest: &'a str,
    pub(crate) issued_at: i64,
    pub(crate) expires_at: i64,
    pub(crate) approver_note: Option<&'a str>,
    pub(crate) page_revision: Option<&'a str>,
    pub(crate) operation_id: Option<&'a str>,
    pub(crate) session_id: Option<&'a str>,
    pub(crate) approver_id: Option<&'a str>,
    pub(crate) approved_at: Option<i64>,
    pub(crate) attempt_limit: i64,
    pub(crate) run_gen: i64,
    pub(crate) actor_gen: i64,
    pub(crate) element: Option<&'a str>,
}

impl Sealed<'_> {
    /// The seal of these columns, in the order of [`seal_sql`].
    pub(crate) fn seal(&self) -> String {
        let (format, issued, expires, approved, limit, run_gen, actor_gen) = (
            self.format.to_string(),
            self.issued_at.to_string(),
            self.expires_at.to_string(),
            self.approved_at.map(|at| at.to_string()),
            self.attempt_limit.to_string(),
            self.run_gen.to_string(),
            self.actor_gen.to_string(),
        );
        seal_with_element(
            &[
                Some(&format),
                Some(self.id),
                Some(self.actor_id),
                Some(self.run_id),
                Some(self.url),
                Some(self.action),
                Some(self.action_digest),
                Some(&issued),
                Some(&expires),
                self.approver_note,
                self.page_revision,
                self.operation_id,
                self.session_id,
                self.approver_id,
                approved.as_deref(),
                Some(&limit),
                Some(&run_gen),
                Some(&actor_gen),
            ],
            self.element,
        )
    }
}

/// A grant's values as the store writes them at issue (the seal is computed
/// by the issue statement itself, which reads the fence generations it
/// covers).
pub(crate) struct NewRow {
    pub(crate) action: String,
    pub(crate) action_digest: String,
    pub(crate) issued_at: i64,
    pub(crate) expires_at: i64,
    pub(crate) approver_id: Option<String>,
    pub(crate) approved_at: Option<i64>,
    pub(crate) attempt_limit: i64,
    pub(crate) element: Option<String>,
}

/// A timestamp as a `bigint`, or `None` past `i64::MAX`.
pub(crate) fn millis(at: Timestamp) -> Option<i64> {
    i64::try_from(at.as_millis()).ok()
}

/// A timestamp as a `bigint`, saturating at `i64::MAX` (no stored time is
/// later, so comparisons stay right).
pub(crate) fn clamp_millis(at: Timestamp) -> i64 {
    millis(at).unwrap_or(i64::MAX)
}

/// The derived values of a new grant, or `None` when a timestamp does not
/// fit a `bigint`.
pub(crate) fn encode_new(approval: &Approval) -> Option<NewRow> {
    let approved_at = match &approval.approver {
        Some(approver) => Some(millis(approver.approved_at)?),
        None => None,
    };
    Some(NewRow {
        action: approval.action.canonical_json(),
        action_digest: approval.action_digest.to_hex(),
        issued_at: millis(approval.issued_at)?,
        expires_at: millis(approval.expires_at)?,
        approver_id: approval
            .approver
            .as_ref()
            .map(|approver| approver.id.as_str().to_owned()),
        approved_at,
        attempt_limit: i64::from(approval.attempt_limit),
        element: approval
            .element
            .as_ref()
            .map(ElementIdentity::canonical_json),
    })
}

/// A row of a record of kind `kind` (a proposal, a standing grant), read
/// strictly: its columns are `names`, then its run's and its actor's
/// current fence generation, and a column that is missing, null where it
/// may not be, or of another type is corrupt. Errors name the record by
/// its id: the first column, or the id asked for when that is unreadable.
pub(crate) struct StrictRow<'r> {
    row: &'r Row,
    names: &'static [&'static str],
    key: String,
}

impl<'r> StrictRow<'r> {
    /// `row`, refused as corrupt unless it has exactly those columns.
    pub(crate) fn new(
        row: &'r Row,
        names: &'static [&'static str],
        kind: &str,
        expected: Option<&str>,
    ) -> Result<StrictRow<'r>, StoreError> {
        let id = row
            .try_get::<_, String>(0)
            .ok()
            .or_else(|| expected.map(str::to_owned))
            .unwrap_or_default();
        let strict = StrictRow {
            row,
            names,
            key: format!("{kind} {id}"),
        };
        if row.len() != names.len() + 2 {
            return Err(strict.corrupt("row has an unexpected number of columns"));
        }
        Ok(strict)
    }

    /// The corrupt-record error of this row, saying what is wrong.
    pub(crate) fn corrupt(&self, message: &str) -> StoreError {
        StoreError::corrupt(self.key.clone(), message)
    }

    /// The five columns every such row starts with: id, format, seal,
    /// actor id and run id.
    pub(crate) fn head(&self) -> Result<Head, StoreError> {
        Ok(Head {
            id: self.get(0)?,
            format: self.get(1)?,
            seal: self.get(2)?,
            actor: self.get(3)?,
            run: self.get(4)?,
        })
    }

    /// Column `index`, as `T`.
    pub(crate) fn get<T: FromSql<'r>>(&self, index: usize) -> Result<T, StoreError> {
        let name = self.names.get(index).copied().unwrap_or("fence gen");
        self.row.try_get(index).map_err(|_| {
            self.corrupt(&format!(
                "column {name} is missing or has an unexpected type or null"
            ))
        })
    }
}

/// The columns a [`StrictRow`] starts with, as stored.
pub(crate) struct Head {
    pub(crate) id: String,
    pub(crate) format: i16,
    pub(crate) seal: String,
    pub(crate) actor: String,
    pub(crate) run: String,
}

/// The attempt ids of the array column `name` as read: each a well-formed
/// attempt id, none twice; anything else is corrupt, as `corrupt` words it.
pub(crate) fn attempt_list(
    list: &[Option<String>],
    name: &str,
    corrupt: &dyn Fn(&str) -> StoreError,
) -> Result<Vec<AttemptId>, StoreError> {
    let mut attempts: Vec<AttemptId> = Vec::with_capacity(list.len());
    for attempt in list {
        let attempt = attempt
            .as_deref()
            .and_then(AttemptId::parse)
            .ok_or_else(|| corrupt(&format!("{name} holds something not an attempt id")))?;
        if attempts.contains(&attempt) {
            return Err(corrupt(&format!("{name} repeats an attempt id")));
        }
        attempts.push(attempt);
    }
    Ok(attempts)
}

/// Whether the run's or the actor's (`what`) fence, now at generation
/// `current`, moved past the generation `recorded` that a row of `owner`
/// (a grant, a proposal, a standing grant) recorded when it was written:
/// then the row was
/// stopped since. A fence behind it, or missing, was altered by hand: that
/// is corrupt, as `corrupt` words it, since every writer creates the fence
/// first and every stop only moves it on.
pub(crate) fn fence_moved(
    current: Option<i64>,
    recorded: i64,
    owner: &str,
    what: &str,
    corrupt: &dyn Fn(&str) -> StoreError,
) -> Result<bool, StoreError> {
    match current {
        None => Err(corrupt(&format!(
            "the {owner}'s {what} fence row is missing"
        ))),
        Some(current) if recorded < 0 || current < recorded => Err(corrupt(&format!(
            "the {owner} records a {what} generation its fence never had"
        ))),
        Some(current) => Ok(current != recorded),
    }
}

/// A grant as read: its state as `get` answers it (`Stopped` derived), the
/// state as stored, its abandoned attempts, and whether its run or actor was
/// stopped since it was issued.
pub(crate) struct ReadGrant {
    pub(crate) grant: StoredGrant,
    pub(crate) stored_state: GrantState,
    pub(crate) abandoned: Vec<AttemptId>,
    pub(crate) stopped: bool,
}

/// Reads a row selected with [`select_columns`] as the grant `id`,
/// accepting only a complete, well-formed, correctly sealed format-2 row
/// (its element, when set, the canonical JSON of a valid identity; a row
/// written before schema version 4 has none and binds no element)
/// whose abandoned list holds distinct attempt ids, at most
/// [`MAX_ABANDONED_ATTEMPTS`], none of them the attempt that consumed it,
/// and whose run and actor fences exist at or past the generations it
/// recorded.
pub(crate) fn decode(id: &ApprovalId, row: &Row) -> Result<ReadGrant, StoreError> {
    let corrupt = |message: &str| StoreError::corrupt(id.as_str(), message);
    fn column<'a, T: FromSql<'a>>(
        row: &'a Row,
        index: usize,
        name: &str,
        id: &ApprovalId,
    ) -> Result<T, StoreError> {
        row.try_get(index).map_err(|_| {
            StoreError::corrupt(
                id.as_str(),
                format!("column {name} is missing or has an unexpected type or null"),
            )
        })
    }
    if row.len() != GRANT_COLUMNS.len() + 2 {
        return Err(corrupt("row has an unexpected number of columns"));
    }
    let stored_id: String = column(row, 0, "id", id)?;
    let format: i16 = column(row, 1, "format", id)?;
    let stored_seal: String = column(row, 2, "seal", id)?;
    let actor: String = column(row, 3, "actor_id", id)?;
    let run: String = column(row, 4, "run_id", id)?;
    let url: String = column(row, 5, "url", id)?;
    let action_text: String = column(row, 6, "action", id)?;
    let digest_text: String = column(row, 7, "action_digest", id)?;
    let issued_at: i64 = column(row, 8, "issued_at", id)?;
    let expires_at: i64 = column(row, 9, "expires_at", id)?;
    let approver_note: Option<String> = column(row, 10, "approver_note", id)?;
    let page_revision: Option<String> = column(row, 11, "page_revision", id)?;
    let operation_id: Option<String> = column(row, 12, "operation_id", id)?;
    let session_id: Option<String> = column(row, 13, "session_id", id)?;
    let approver_id: Option<String> = column(row, 14, "approver_id", id)?;
    let approved_at: Option<i64> = column(row, 15, "approved_at", id)?;
    let attempt_limit: i64 = column(row, 16, "attempt_limit", id)?;
    let run_gen: i64 = column(row, 17, "run_gen", id)?;
    let actor_gen: i64 = column(row, 18, "actor_gen", id)?;
    let state_text: String = column(row, 19, "state", id)?;
    let consumed_at: Option<i64> = column(row, 20, "consumed_at", id)?;
    let consumed_by: Option<String> = column(row, 21, "consumed_by", id)?;
    let abandoned: Vec<Option<String>> = column(row, 22, "abandoned_attempts", id)?;
    let failed_attempts: i64 = column(row, 23, "failed_attempts", id)?;
    let element_text: Option<String> = column(row, 24, "element", id)?;
    let run_fence_gen: Option<i64> = column(row, 25, "the run fence's gen", id)?;
    let actor_fence_gen: Option<i64> = column(row, 26, "the actor fence's gen", id)?;

    if format != FORMAT {
        return Err(corrupt("unsupported row format"));
    }
    if stored_id != id.as_str() {
        return Err(corrupt("id column does not match the requested id"));
    }
    let expected_seal = Sealed {
        format,
        id: &stored_id,
        actor_id: &actor,
        run_id: &run,
        url: &url,
        action: &action_text,
        action_digest: &digest_text,
        issued_at,
        expires_at,
        approver_note: approver_note.as_deref(),
        page_revision: page_revision.as_deref(),
        operation_id: operation_id.as_deref(),
        session_id: session_id.as_deref(),
        approver_id: approver_id.as_deref(),
        approved_at,
        attempt_limit,
        run_gen,
        actor_gen,
        element: element_text.as_deref(),
    }
    .seal();
    if stored_seal != expected_seal {
        return Err(corrupt(
            "seal does not match the row: a column written at issue was changed",
        ));
    }
    let actor_id = ActorId::new(actor).map_err(|_| corrupt("actor is not a valid actor id"))?;
    let run_id = RunId::new(run).map_err(|_| corrupt("run is not a valid run id"))?;
    let element = element_text
        .map(|json| {
            ElementIdentity::from_canonical_json(&json)
                .map_err(|_| corrupt("element is not the canonical json of an element identity"))
        })
        .transpose()?;
    let action = Action::from_canonical_json(&action_text)
        .map_err(|_| corrupt("action is not canonical action json"))?;
    let action_digest = ActionDigest::from_str(&digest_text)
        .map_err(|_| corrupt("digest is not 64 lower-case hex characters"))?;
    if action_digest != action.digest() {
        return Err(corrupt("digest does not match the action"));
    }
    let timestamp = |value: i64, name: &str| {
        u64::try_from(value)
            .map(Timestamp::from_millis)
            .map_err(|_| corrupt(&format!("{name} is negative")))
    };
    let issued_at = timestamp(issued_at, "issued_at")?;
    let expires_at = timestamp(expires_at, "expires_at")?;
    let approver = match (approver_id, approved_at) {
        (None, None) => None,
        (Some(approver), Some(at)) => Some(Approver {
            id: ApproverId::new(approver)
                .map_err(|_| corrupt("approver_id is not a valid approver id"))?,
            approved_at: timestamp(at, "approved_at")?,
        }),
        _ => {
            return Err(corrupt(
                "approver_id and approved_at are not both set or both null",
            ));
        }
    };
    let attempt_limit =
        u32::try_from(attempt_limit).map_err(|_| corrupt("attempt_limit is out of range"))?;
    let failed_attempts =
        u32::try_from(failed_attempts).map_err(|_| corrupt("failed_attempts is out of range"))?;
    let abandoned_attempts = attempt_list(&abandoned, "abandoned_attempts", &corrupt)?;
    if abandoned_attempts.len() > MAX_ABANDONED_ATTEMPTS {
        return Err(corrupt(
            "abandoned_attempts holds more attempts than the bound",
        ));
    }

    let stored_state = match (state_text.as_str(), consumed_at, consumed_by) {
        (state::ACTIVE, None, None) => GrantState::Active,
        (state::REVOKED, None, None) => GrantState::Revoked,
        (state::LOCKED, None, None) => GrantState::Locked,
        (state::CONSUMED, Some(at), Some(by)) => GrantState::Consumed {
            at: timestamp(at, "consumed_at")?,
            by: AttemptId::parse(&by).ok_or_else(|| corrupt("consumed_by is not an attempt id"))?,
        },
        (state::ACTIVE | state::REVOKED | state::LOCKED, _, _) => {
            return Err(corrupt("unconsumed row has consumed columns"));
        }
        (state::CONSUMED, None, _) => return Err(corrupt("consumed row lacks consumed_at")),
        (state::CONSUMED, Some(_), None) => return Err(corrupt("consumed row lacks consumed_by")),
        _ => return Err(corrupt("unknown state")),
    };
    // The mismatch that reaches the limit locks the grant, and nothing
    // counts past it: a locked row counts exactly its limit, any other row
    // less (the statements' integrity checks require the same).
    if stored_state == GrantState::Locked {
        if failed_attempts != attempt_limit {
            return Err(corrupt(
                "locked row does not count its limit of failed attempts",
            ));
        }
    } else if failed_attempts >= attempt_limit {
        return Err(corrupt(
            "failed_attempts reaches the attempt limit of a row that is not locked",
        ));
    }
    if let GrantState::Consumed { by, .. } = &stored_state
        && abandoned_attempts.contains(by)
    {
        return Err(corrupt("consumed by an attempt it lists as abandoned"));
    }

    // Stopped: the run's or the actor's fence moved past the generation the
    // grant recorded at issue.
    let run_stopped = fence_moved(run_fence_gen, run_gen, "grant", "run", &corrupt)?;
    let actor_stopped = fence_moved(actor_fence_gen, actor_gen, "grant", "actor", &corrupt)?;
    let stopped = run_stopped || actor_stopped;
    let state = match &stored_state {
        GrantState::Active if stopped => GrantState::Stopped,
        other => other.clone(),
    };

    let grant = StoredGrant {
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
    };
    Ok(ReadGrant {
        grant,
        stored_state,
        abandoned: abandoned_attempts,
        stopped,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn values(first: &[Option<&'static str>]) -> Vec<Option<&'static str>> {
        let mut all = first.to_vec();
        all.resize(SEALED, None);
        all
    }

    #[test]
    fn the_seal_length_prefixes_every_value() {
        let a = seal(&values(&[Some("ab"), Some("c")]));
        let b = seal(&values(&[Some("a"), Some("bc")]));
        let c = seal(&values(&[Some("ab"), Some("c"), Some("")]));
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 64);
        // `2:ab;1:c;-;-;…`: fixed here so the SQL side can be checked against it.
        let mut hasher = Sha256::new();
        hasher.update(format!("2:ab;1:c;{}", "-;".repeat(SEALED - 2)));
        let expected: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(a, expected);
        // A null element adds nothing; a set one adds `<length>:<text>;`.
        assert_eq!(
            seal_with_element(&values(&[Some("ab"), Some("c")]), None),
            a
        );
        let mut hasher = Sha256::new();
        hasher.update(format!("2:ab;1:c;{}2:{{}};", "-;".repeat(SEALED - 2)));
        let with: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            seal_with_element(&values(&[Some("ab"), Some("c")]), Some("{}")),
            with
        );
        assert_ne!(
            seal_with_element(&values(&[Some("ab"), Some("c")]), Some("")),
            a
        );
    }

    proptest::proptest! {
        /// A null element leaves a row's seal as it was before schema
        /// version 4; any element, empty text included, changes it, and
        /// two different elements seal differently.
        #[test]
        fn the_element_extends_the_seal_only_when_set(
            values in proptest::collection::vec(proptest::option::of(".{0,8}"), SEALED),
            element in ".{0,16}",
            other in ".{0,16}",
        ) {
            let values: Vec<Option<&str>> = values.iter().map(Option::as_deref).collect();
            let plain = seal(&values);
            proptest::prop_assert_eq!(seal_with_element(&values, None), plain.clone());
            let sealed = seal_with_element(&values, Some(&element));
            proptest::prop_assert_ne!(&sealed, &plain);
            if other != element {
                proptest::prop_assert_ne!(seal_with_element(&values, Some(&other)), sealed);
            }
        }
    }

    #[test]
    fn the_seal_sql_covers_the_sealed_columns_in_order() {
        let sql = seal_sql();
        let mut at = 0;
        for column in SEALED_SQL {
            let found = sql[at..].find(&format!("octet_length({column})")).unwrap();
            at += found + 1;
        }
        assert_eq!(sql.matches("octet_length(").count(), SEALED + 1);
        // The element, when set, after them.
        assert!(sql.ends_with(
            "coalesce(octet_length(element)::text || ':' || element || ';', ''), 'UTF8')), 'hex')"
        ));
        // Every column written at issue is sealed, except the state columns.
        let unsealed: Vec<&str> = GRANT_COLUMNS
            .iter()
            .copied()
            .filter(|c| !SEALED_SQL.iter().any(|s| s.split("::").next() == Some(*c)))
            .filter(|c| *c != "element")
            .collect();
        assert_eq!(
            unsealed,
            [
                "seal",
                "state",
                "consumed_at",
                "consumed_by",
                "abandoned_attempts",
                "failed_attempts"
            ]
        );
    }
}
