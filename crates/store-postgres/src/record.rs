//! How a grant is laid out in its row (format 1), its seal, and the strict
//! reader of that layout.

use std::str::FromStr;

use countersign_approval_core::policy::{Action, ActionDigest};
use countersign_approval_core::{
    ActorId, Approval, ApprovalId, AttemptId, GrantState, MAX_ABANDONED_ATTEMPTS, RunId,
    StoreError, StoredGrant, Timestamp,
};
use sha2::{Digest, Sha256};
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

/// The row format written by this version of the store.
pub(crate) const FORMAT: i16 = 1;

/// State names, as stored.
pub(crate) mod state {
    pub(crate) const ACTIVE: &str = "active";
    pub(crate) const REVOKED: &str = "revoked";
    pub(crate) const CONSUMED: &str = "consumed";
}

/// Every column of a grant row, in the order [`decode`] reads them.
pub(crate) const COLUMNS: &str = "id, format, seal, actor_id, run_id, url, action, action_digest, \
     issued_at, expires_at, approver_note, page_revision, operation_id, session_id, state, \
     consumed_at, consumed_by, abandoned_attempts";

/// The sealed columns, in seal order, as SQL text expressions.
const SEALED_SQL: [&str; 13] = [
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

/// The SQL expression that recomputes a row's seal; equal to [`seal`] of
/// the same values. Statements that change a row require `seal = ` this.
pub(crate) fn seal_sql() -> String {
    let parts: Vec<String> = SEALED_SQL
        .iter()
        .map(|column| {
            format!("coalesce(octet_length({column})::text || ':' || {column}, '-') || ';'")
        })
        .collect();
    format!(
        "encode(sha256(convert_to({}, 'UTF8')), 'hex')",
        parts.join(" || ")
    )
}

/// The seal of a grant: sha-256, as lower-case hex, over every column
/// written at issue, each as `<byte length>:<text>;` (`-;` when null).
fn seal(values: &[Option<&str>; 13]) -> String {
    let mut hasher = Sha256::new();
    for value in values {
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
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
}

impl Sealed<'_> {
    /// The seal of these columns, in the order of [`seal_sql`].
    pub(crate) fn seal(&self) -> String {
        let (format, issued, expires) = (
            self.format.to_string(),
            self.issued_at.to_string(),
            self.expires_at.to_string(),
        );
        seal(&[
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
        ])
    }
}

/// A grant's values as the store writes them at issue.
pub(crate) struct NewRow {
    pub(crate) action: String,
    pub(crate) action_digest: String,
    pub(crate) issued_at: i64,
    pub(crate) expires_at: i64,
    pub(crate) seal: String,
}

/// A timestamp as a `bigint`, or `None` past `i64::MAX`.
pub(crate) fn millis(at: Timestamp) -> Option<i64> {
    i64::try_from(at.as_millis()).ok()
}

/// The derived values of a new grant, or `None` when a timestamp does not
/// fit a `bigint`.
pub(crate) fn encode_new(approval: &Approval) -> Option<NewRow> {
    let issued_at = millis(approval.issued_at)?;
    let expires_at = millis(approval.expires_at)?;
    let action = approval.action.canonical_json();
    let action_digest = approval.action_digest.to_hex();
    let seal = Sealed {
        format: FORMAT,
        id: approval.id.as_str(),
        actor_id: approval.actor_id.as_str(),
        run_id: approval.run_id.as_str(),
        url: &approval.url,
        action: &action,
        action_digest: &action_digest,
        issued_at,
        expires_at,
        approver_note: approval.approver_note.as_deref(),
        page_revision: approval.page_revision.as_deref(),
        operation_id: approval.operation_id.as_deref(),
        session_id: approval.session_id.as_deref(),
    }
    .seal();
    Some(NewRow {
        action,
        action_digest,
        issued_at,
        expires_at,
        seal,
    })
}

/// Reads a row selected with [`COLUMNS`] as the grant `id` and the attempts
/// abandoned on it, accepting only a complete, well-formed, correctly sealed
/// format-1 row whose abandoned list holds distinct attempt ids, at most
/// [`MAX_ABANDONED_ATTEMPTS`], none of them the attempt that consumed it.
pub(crate) fn decode(
    id: &ApprovalId,
    row: &Row,
) -> Result<(StoredGrant, Vec<AttemptId>), StoreError> {
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
    if row.len() != 18 {
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
    let state_text: String = column(row, 14, "state", id)?;
    let consumed_at: Option<i64> = column(row, 15, "consumed_at", id)?;
    let consumed_by: Option<String> = column(row, 16, "consumed_by", id)?;
    let abandoned: Vec<Option<String>> = column(row, 17, "abandoned_attempts", id)?;

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
    }
    .seal();
    if stored_seal != expected_seal {
        return Err(corrupt(
            "seal does not match the row: a column written at issue was changed",
        ));
    }
    let actor_id = ActorId::new(actor).map_err(|_| corrupt("actor is not a valid actor id"))?;
    let run_id = RunId::new(run).map_err(|_| corrupt("run is not a valid run id"))?;
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
    let mut abandoned_attempts: Vec<AttemptId> = Vec::with_capacity(abandoned.len());
    for attempt in &abandoned {
        let attempt = attempt
            .as_deref()
            .and_then(AttemptId::parse)
            .ok_or_else(|| corrupt("abandoned_attempts holds something not an attempt id"))?;
        if abandoned_attempts.contains(&attempt) {
            return Err(corrupt("abandoned_attempts repeats an attempt id"));
        }
        abandoned_attempts.push(attempt);
    }
    if abandoned_attempts.len() > MAX_ABANDONED_ATTEMPTS {
        return Err(corrupt(
            "abandoned_attempts holds more attempts than the bound",
        ));
    }

    let state = match (state_text.as_str(), consumed_at, consumed_by) {
        (state::ACTIVE, None, None) => GrantState::Active,
        (state::REVOKED, None, None) => GrantState::Revoked,
        (state::CONSUMED, Some(at), Some(by)) => GrantState::Consumed {
            at: timestamp(at, "consumed_at")?,
            by: AttemptId::parse(&by).ok_or_else(|| corrupt("consumed_by is not an attempt id"))?,
        },
        (state::ACTIVE | state::REVOKED, _, _) => {
            return Err(corrupt("unconsumed row has consumed columns"));
        }
        (state::CONSUMED, _, _) => {
            return Err(corrupt("consumed row lacks consumed_at or consumed_by"));
        }
        _ => return Err(corrupt("unknown state")),
    };
    if let GrantState::Consumed { by, .. } = &state
        && abandoned_attempts.contains(by)
    {
        return Err(corrupt("consumed by an attempt it lists as abandoned"));
    }

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
            page_revision,
            operation_id,
            session_id,
        },
        state,
    };
    Ok((grant, abandoned_attempts))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn the_seal_length_prefixes_every_value() {
        let a = seal(&[
            Some("ab"),
            Some("c"),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ]);
        let b = seal(&[
            Some("a"),
            Some("bc"),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ]);
        let c = seal(&[
            Some("ab"),
            Some("c"),
            Some(""),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ]);
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 64);
        // `2:ab;1:c;-;-;…`: fixed here so the SQL side can be checked against it.
        let mut hasher = Sha256::new();
        hasher.update("2:ab;1:c;-;-;-;-;-;-;-;-;-;-;-;");
        let expected: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(a, expected);
    }

    #[test]
    fn the_seal_sql_covers_the_sealed_columns_in_order() {
        let sql = seal_sql();
        let mut at = 0;
        for column in SEALED_SQL {
            let found = sql[at..].find(&format!("octet_length({column})")).unwrap();
            at += found + 1;
        }
        assert_eq!(sql.matches("octet_length(").count(), 13);
    }
}
