//! How a standing grant is laid out in its row (format 1, schema version
//! 5), its seal, and the strict reader of that layout.

use countersign_approval_core::{
    ActorId, Approver, ApproverId, AttemptId, MAX_ABANDONED_ATTEMPTS, MAX_ATTEMPT_LIMIT,
    MAX_STANDING_SCOPE_BYTES, MAX_STANDING_USES, RunId, StandingGrant, StandingId, StandingScope,
    StandingState, StoreError, StoredStanding, Timestamp,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

// A standing grant's stored states are named as a grant's are; stopped is
// never stored, it is derived from the fences.
use crate::record::state;
use crate::record::{Head, StrictRow, attempt_list, fence_moved, millis, seal_with_element};

/// The standing grant row format written by this version of the store.
pub(crate) const FORMAT: i16 = 1;

/// Every column of a standing grant row, in the order [`decode`] reads
/// them, before the current generations of its run's and actor's fences.
const COLUMNS: [&str; 18] = [
    "id",
    "format",
    "seal",
    "actor_id",
    "run_id",
    "scope",
    "uses",
    "issued_at",
    "expires_at",
    "approver_id",
    "approved_at",
    "attempt_limit",
    "run_gen",
    "actor_gen",
    "state",
    "failed_attempts",
    "used_by",
    "given_back",
];

/// The columns [`decode`] reads, from the standing grants table as
/// `alias`; the caller appends the run's and the actor's fence generation.
pub(crate) fn columns(alias: &str) -> String {
    let columns: Vec<String> = COLUMNS.iter().map(|c| format!("{alias}.{c}")).collect();
    columns.join(", ")
}

/// The sealed columns, in seal order, as SQL text expressions over a
/// standing grant row: every column written at issue.
pub(crate) const SEALED_SQL: [&str; 13] = [
    "format::text",
    "id",
    "actor_id",
    "run_id",
    "scope",
    "uses::text",
    "issued_at::text",
    "expires_at::text",
    "approver_id",
    "approved_at::text",
    "attempt_limit::text",
    "run_gen::text",
    "actor_gen::text",
];

/// A standing grant's parameters for the issue statement, in its order.
pub(crate) struct NewStanding<'a> {
    id: &'a str,
    actor: &'a str,
    run: &'a str,
    scope: &'a str,
    approver: &'a str,
    uses: i64,
    issued_at: i64,
    expires_at: i64,
    approved_at: i64,
    attempt_limit: i64,
}

impl<'a> NewStanding<'a> {
    /// The parameters of `grant`, or [`StoreError::Rejected`] for one this
    /// store could not read back as it was given: a timestamp past
    /// `bigint`, or uses, an attempt limit or a scope outside what the
    /// library ever makes (the reader refuses such a row as corrupt).
    pub(crate) fn new(grant: &'a StandingGrant) -> Result<NewStanding<'a>, StoreError> {
        let rejected = |message: &str| StoreError::Rejected {
            message: message.to_owned(),
        };
        let time = |at: Timestamp| {
            millis(at).ok_or_else(|| rejected("a timestamp is past what postgres bigint holds"))
        };
        if !(1..=MAX_STANDING_USES).contains(&grant.uses) {
            return Err(rejected("a standing grant carries 1 to 100 uses"));
        }
        if !(1..=MAX_ATTEMPT_LIMIT).contains(&grant.attempt_limit) {
            return Err(rejected("a standing grant's attempt limit is 1 to 100"));
        }
        Ok(NewStanding {
            id: grant.id.as_str(),
            actor: grant.actor_id.as_str(),
            run: grant.run_id.as_str(),
            scope: grant.scope.as_str(),
            approver: grant.approver.id.as_str(),
            uses: i64::from(grant.uses),
            issued_at: time(grant.issued_at)?,
            expires_at: time(grant.expires_at)?,
            approved_at: time(grant.approver.approved_at)?,
            attempt_limit: i64::from(grant.attempt_limit),
        })
    }

    /// The parameters, in the issue statement's order.
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 10] {
        [
            &self.id,
            &self.actor,
            &self.run,
            &self.scope,
            &self.uses,
            &self.issued_at,
            &self.expires_at,
            &self.approver,
            &self.approved_at,
            &self.attempt_limit,
        ]
    }
}

/// A stored state's name; `None` for `Stopped`, which is derived from the
/// fences and never stored.
pub(crate) fn state_name(state: StandingState) -> Option<&'static str> {
    match state {
        StandingState::Active => Some(state::ACTIVE),
        StandingState::Revoked => Some(state::REVOKED),
        StandingState::Locked => Some(state::LOCKED),
        StandingState::Stopped => None,
    }
}

/// A standing grant as read: as `get_standing` answers it (`Stopped`
/// derived), its state as stored, the attempts given back on it, and
/// whether its run or actor was stopped since it was issued.
pub(crate) struct ReadStanding {
    pub(crate) stored: StoredStanding,
    pub(crate) stored_state: StandingState,
    pub(crate) given_back: Vec<AttemptId>,
    pub(crate) stopped: bool,
}

/// Reads a row selected with [`columns`] and then the run's and the
/// actor's current fence generations, accepting only a complete,
/// well-formed, correctly sealed format 1 row (the standing grant
/// `expected`, when given) whose counts are in range (a locked row counts
/// exactly its attempt limit of failed attempts, any other row fewer; at
/// most `uses` attempts hold a use), whose attempt lists hold distinct
/// attempt ids, none both holding a use and given back, at most
/// [`MAX_ABANDONED_ATTEMPTS`] given back, and whose run and actor fences
/// exist at or past the generations it recorded.
pub(crate) fn decode(expected: Option<&StandingId>, row: &Row) -> Result<ReadStanding, StoreError> {
    let strict = StrictRow::new(
        row,
        &COLUMNS,
        "standing grant",
        expected.map(StandingId::as_str),
    )?;
    let corrupt = |message: &str| strict.corrupt(message);
    let head: Head = strict.head()?;
    let scope: String = strict.get(5)?;
    let uses: i64 = strict.get(6)?;
    let issued_at: i64 = strict.get(7)?;
    let expires_at: i64 = strict.get(8)?;
    let approver_id: String = strict.get(9)?;
    let approved_at: i64 = strict.get(10)?;
    let attempt_limit: i64 = strict.get(11)?;
    let run_gen: i64 = strict.get(12)?;
    let actor_gen: i64 = strict.get(13)?;
    let state_text: String = strict.get(14)?;
    let failed_attempts: i64 = strict.get(15)?;
    let used_by: Vec<Option<String>> = strict.get(16)?;
    let given_back: Vec<Option<String>> = strict.get(17)?;
    let run_fence_gen: Option<i64> = strict.get(18)?;
    let actor_fence_gen: Option<i64> = strict.get(19)?;

    if head.format != FORMAT {
        return Err(corrupt("unsupported standing grant row format"));
    }
    if expected.is_some_and(|id| id.as_str() != head.id) {
        return Err(corrupt("id column does not match the requested id"));
    }
    let text = i64::to_string;
    let (format_text, uses_text, issued_text, expires_text) = (
        head.format.to_string(),
        text(&uses),
        text(&issued_at),
        text(&expires_at),
    );
    let (approved_text, limit_text, run_gen_text, actor_gen_text) = (
        text(&approved_at),
        text(&attempt_limit),
        text(&run_gen),
        text(&actor_gen),
    );
    let expected_seal = seal_with_element(
        &[
            Some(&format_text),
            Some(&head.id),
            Some(&head.actor),
            Some(&head.run),
            Some(&scope),
            Some(&uses_text),
            Some(&issued_text),
            Some(&expires_text),
            Some(&approver_id),
            Some(&approved_text),
            Some(&limit_text),
            Some(&run_gen_text),
            Some(&actor_gen_text),
        ],
        None,
    );
    if head.seal != expected_seal {
        return Err(corrupt(
            "seal does not match the row: a column written at issue was changed",
        ));
    }
    let id = StandingId::parse(&head.id).ok_or_else(|| corrupt("id is not a standing id"))?;
    let actor_id =
        ActorId::new(head.actor).map_err(|_| corrupt("actor is not a valid actor id"))?;
    let run_id = RunId::new(head.run).map_err(|_| corrupt("run is not a valid run id"))?;
    if scope.len() > MAX_STANDING_SCOPE_BYTES {
        return Err(corrupt("scope is longer than 8 KiB"));
    }
    // A scope text this release would not write (one of version 1, which
    // named no scheme, among them) is refused rather than read wider.
    let scope = StandingScope::parse(&scope)
        .ok_or_else(|| corrupt("scope is not a scope this release writes"))?;
    let count = |value: i64, name: &str, most: u32| {
        u32::try_from(value)
            .ok()
            .filter(|n| *n <= most)
            .ok_or_else(|| corrupt(&format!("{name} is out of range")))
    };
    let uses = count(uses, "uses", MAX_STANDING_USES)?;
    let attempt_limit = count(attempt_limit, "attempt_limit", MAX_ATTEMPT_LIMIT)?;
    let failed_attempts = count(failed_attempts, "failed_attempts", MAX_ATTEMPT_LIMIT)?;
    if uses == 0 || attempt_limit == 0 {
        return Err(corrupt("uses or attempt_limit is zero"));
    }
    let timestamp = |value: i64, name: &str| {
        u64::try_from(value)
            .map(Timestamp::from_millis)
            .map_err(|_| corrupt(&format!("{name} is negative")))
    };
    let approver = Approver {
        id: ApproverId::new(approver_id)
            .map_err(|_| corrupt("approver_id is not a valid approver id"))?,
        approved_at: timestamp(approved_at, "approved_at")?,
    };
    let stored_state = match state_text.as_str() {
        state::ACTIVE => StandingState::Active,
        state::REVOKED => StandingState::Revoked,
        state::LOCKED => StandingState::Locked,
        _ => return Err(corrupt("unknown state")),
    };
    // The mismatch that reaches the limit locks the grant, and nothing
    // counts past it: a locked row counts exactly its limit, any other row
    // less.
    if (stored_state == StandingState::Locked) != (failed_attempts == attempt_limit)
        || failed_attempts > attempt_limit
    {
        return Err(corrupt(
            "failed_attempts does not match the state and the attempt limit",
        ));
    }
    let used_by = attempt_list(&used_by, "used_by", &corrupt)?;
    let given_back = attempt_list(&given_back, "given_back", &corrupt)?;
    if used_by.len() > usize::try_from(uses).unwrap_or(usize::MAX) {
        return Err(corrupt("used_by holds more attempts than the grant's uses"));
    }
    if given_back.len() > MAX_ABANDONED_ATTEMPTS {
        return Err(corrupt("given_back holds more attempts than the bound"));
    }
    // Giving back releases the attempt's use, and a given-back attempt
    // never takes one again.
    if used_by.iter().any(|attempt| given_back.contains(attempt)) {
        return Err(corrupt("an attempt both holds a use and was given back"));
    }

    let run_stopped = fence_moved(run_fence_gen, run_gen, "standing grant", "run", &corrupt)?;
    let actor_stopped = fence_moved(
        actor_fence_gen,
        actor_gen,
        "standing grant",
        "actor",
        &corrupt,
    )?;
    let stopped = run_stopped || actor_stopped;
    let state = stored_state.shown(stopped);
    Ok(ReadStanding {
        stored: StoredStanding {
            grant: StandingGrant {
                id,
                actor_id,
                run_id,
                scope,
                uses,
                issued_at: timestamp(issued_at, "issued_at")?,
                expires_at: timestamp(expires_at, "expires_at")?,
                approver,
                attempt_limit,
            },
            state,
            used_by,
            failed_attempts,
        },
        stored_state,
        given_back,
        stopped,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::record::seal_sql_over;

    #[test]
    fn every_column_written_at_issue_is_sealed_in_order() {
        let sql = seal_sql_over(&SEALED_SQL);
        let mut at = 0;
        for column in SEALED_SQL {
            let found = sql[at..].find(&format!("octet_length({column})")).unwrap();
            at += found + 1;
        }
        assert_eq!(sql.matches("octet_length(").count(), SEALED_SQL.len());
        let unsealed: Vec<&str> = COLUMNS
            .iter()
            .copied()
            .filter(|c| !SEALED_SQL.iter().any(|s| s.split("::").next() == Some(*c)))
            .collect();
        assert_eq!(
            unsealed,
            ["seal", "state", "failed_attempts", "used_by", "given_back"]
        );
    }

    #[test]
    fn every_stored_state_has_a_name_and_stopped_has_none() {
        assert_eq!(state_name(StandingState::Active), Some(state::ACTIVE));
        assert_eq!(state_name(StandingState::Revoked), Some(state::REVOKED));
        assert_eq!(state_name(StandingState::Locked), Some(state::LOCKED));
        assert_eq!(state_name(StandingState::Stopped), None);
    }
}
