//! The operation log: one row per Act call.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::policy::ActionDigest;
use countersign_approval_core::{
    ActorId, ApprovalId, ApproverId, GivenApprovalId, OperationId, OperationLog, OperationRecord,
    OutcomeCode, RunId, StoreError, Timestamp,
};
use tokio_postgres::Row;

use crate::pool::{PURGE_BATCH, Shared, count_of, purge_batches};
use crate::record::millis;

/// The JSON types a non-string approval id is recorded under.
const JSON_TYPES: [&str; 4] = ["number", "boolean", "array", "object"];

/// Operation records in PostgreSQL, in the same schema and pool as the
/// grants: get one from
/// [`PostgresApprovalStore::operation_log`](crate::PostgresApprovalStore::operation_log).
///
/// Recording is idempotent: writing the same record again (a retry after a
/// lost reply) succeeds without a second row; a different record under an
/// operation id already present is [`StoreError::Rejected`].
///
/// Bounded by age through [`purge`](Self::purge), and by count when the host
/// sets [`with_max_records`](Self::with_max_records): then the queries answer
/// only the newest `max_records` records, and `purge` deletes the older ones.
#[derive(Clone)]
pub struct PostgresOperationLog {
    shared: Arc<Shared>,
    max_records: Option<i64>,
}

impl std::fmt::Debug for PostgresOperationLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresOperationLog")
            .field("operations", &self.shared.names.operations)
            .field("max_records", &self.max_records)
            .finish_non_exhaustive()
    }
}

fn outcome_from_str(text: &str) -> Option<OutcomeCode> {
    OutcomeCode::ALL.into_iter().find(|c| c.as_str() == text)
}

/// Reads a row selected with
/// [`OPERATION_COLUMNS`](crate::statements::OPERATION_COLUMNS) strictly.
fn decode(row: &Row) -> Result<OperationRecord, StoreError> {
    let key: String = row.try_get(0).unwrap_or_default();
    let corrupt = |message: &str| StoreError::corrupt(format!("operation {key}"), message);
    let text = |i: usize| -> Result<String, StoreError> {
        row.try_get(i)
            .map_err(|_| corrupt("a column is missing, null or of an unexpected type"))
    };
    let optional = |i: usize| -> Result<Option<String>, StoreError> {
        row.try_get(i)
            .map_err(|_| corrupt("a column is missing or of an unexpected type"))
    };
    let timestamp = |i: usize| -> Result<Timestamp, StoreError> {
        row.try_get::<_, i64>(i)
            .ok()
            .and_then(|v| u64::try_from(v).ok())
            .map(Timestamp::from_millis)
            .ok_or_else(|| corrupt("a time is missing or negative"))
    };
    let approval_bytes: Option<i64> = row
        .try_get(4)
        .map_err(|_| corrupt("approval_id_bytes has an unexpected type"))?;
    let approval_id = match (optional(3)?, approval_bytes, optional(5)?, optional(6)?) {
        (None, None, None, None) => GivenApprovalId::Absent,
        (Some(id), None, None, None) => GivenApprovalId::WellFormed(
            ApprovalId::parse(&id).ok_or_else(|| corrupt("approval_id is not an approval id"))?,
        ),
        (None, Some(bytes), Some(prefix), None) => GivenApprovalId::malformed(
            usize::try_from(bytes).map_err(|_| corrupt("approval_id_bytes is negative"))?,
            prefix,
        ),
        (None, None, None, Some(json_type)) => GivenApprovalId::not_a_string(
            JSON_TYPES
                .into_iter()
                .find(|known| *known == json_type)
                .ok_or_else(|| corrupt("approval_id_json_type is not a json type"))?,
        ),
        _ => return Err(corrupt("the row mixes approval id columns")),
    };
    Ok(OperationRecord {
        operation_id: OperationId::parse(&text(0)?)
            .ok_or_else(|| corrupt("operation_id is not an operation id"))?,
        actor_id: ActorId::new(text(1)?).map_err(|_| corrupt("actor is not a valid actor id"))?,
        run_id: RunId::new(text(2)?).map_err(|_| corrupt("run is not a valid run id"))?,
        approval_id,
        url: optional(7)?,
        action_digest: optional(8)?
            .map(|d| ActionDigest::from_str(&d))
            .transpose()
            .map_err(|_| corrupt("action_digest is not 64 lower-case hex characters"))?,
        approver_id: optional(13)?
            .map(ApproverId::new)
            .transpose()
            .map_err(|_| corrupt("approver_id is not a valid approver id"))?,
        outcome: outcome_from_str(&text(9)?).ok_or_else(|| corrupt("unknown outcome"))?,
        reason: text(10)?,
        started_at: timestamp(11)?,
        finished_at: timestamp(12)?,
    })
}

/// A given approval id as its four columns: well-formed id, malformed
/// length, malformed prefix, JSON type.
type ApprovalColumns<'a> = (
    Option<&'a str>,
    Option<i64>,
    Option<&'a str>,
    Option<&'static str>,
);

fn approval_columns(given: &GivenApprovalId) -> Result<ApprovalColumns<'_>, StoreError> {
    Ok(match given {
        GivenApprovalId::WellFormed(id) => (Some(id.as_str()), None, None, None),
        GivenApprovalId::Malformed { bytes, prefix, .. } => (
            None,
            Some(i64::try_from(*bytes).map_err(|_| StoreError::Rejected {
                message: "a malformed approval id is longer than postgres bigint holds".to_owned(),
            })?),
            Some(prefix.as_str()),
            None,
        ),
        GivenApprovalId::NotAString { json_type, .. } => (None, None, None, Some(*json_type)),
        GivenApprovalId::Absent => (None, None, None, None),
        // A kind this version does not know is refused rather than lost.
        _ => {
            return Err(StoreError::Rejected {
                message: "the given approval id is of a kind this store cannot record".to_owned(),
            });
        }
    })
}

impl PostgresOperationLog {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        PostgresOperationLog {
            shared,
            max_records: None,
        }
    }

    /// This log keeping at most the newest `max_records` records (at least
    /// 1): the queries answer none older, and [`purge`](Self::purge)
    /// deletes them. Without it the log is bounded by age alone.
    pub fn with_max_records(mut self, max_records: u64) -> Self {
        self.max_records = Some(i64::try_from(max_records.max(1)).unwrap_or(i64::MAX));
        self
    }

    /// The record with this operation id, if any (the same as
    /// [`OperationLog::record_for_operation`]).
    pub async fn get(&self, id: &OperationId) -> Result<Option<OperationRecord>, StoreError> {
        let rows = self
            .shared
            .query(
                "reading an operation record",
                &self.shared.statements.get_operation,
                &[&id.as_str(), &self.max_records],
            )
            .await?;
        rows.first().map(decode).transpose()
    }

    /// Deletes records that finished at or before `now - retention`, in
    /// batches; returns how many. Meant for the same scheduled job as
    /// [`PostgresApprovalStore::purge`](crate::PostgresApprovalStore::purge).
    ///
    /// With [`with_max_records`](Self::with_max_records) it also deletes
    /// every record older than the newest `max_records`, in batches.
    pub async fn purge(&self, now: Timestamp, retention: Duration) -> Result<u64, StoreError> {
        let what = "purging operation records";
        let mut total = purge_batches(
            &self.shared,
            what,
            &self.shared.statements.purge_operations,
            now,
            retention,
        )
        .await?;
        if self.max_records.is_some() {
            loop {
                let rows = self
                    .shared
                    .query(
                        what,
                        &self.shared.statements.purge_operations_beyond_bound,
                        &[&PURGE_BATCH, &self.max_records],
                    )
                    .await?;
                let gone = count_of(what, &rows)?;
                total += gone;
                if gone < PURGE_BATCH as u64 {
                    break;
                }
            }
        }
        Ok(total)
    }
}

#[async_trait]
impl OperationLog for PostgresOperationLog {
    async fn record(&self, record: OperationRecord) -> Result<(), StoreError> {
        let (Some(started_at), Some(finished_at)) =
            (millis(record.started_at), millis(record.finished_at))
        else {
            return Err(StoreError::Rejected {
                message: "a timestamp is past what postgres bigint holds".to_owned(),
            });
        };
        let digest = record.action_digest.map(|d| d.to_hex());
        let (approval_id, approval_bytes, approval_prefix, approval_json_type) =
            approval_columns(&record.approval_id)?;
        let rows = self
            .shared
            .query(
                "writing an operation record",
                &self.shared.statements.record_operation,
                &[
                    &record.operation_id.as_str(),
                    &record.actor_id.as_str(),
                    &record.run_id.as_str(),
                    &approval_id,
                    &approval_bytes,
                    &approval_prefix,
                    &approval_json_type,
                    &record.url,
                    &digest,
                    &record.outcome.as_str(),
                    &record.reason,
                    &started_at,
                    &finished_at,
                    &record.approver_id.as_ref().map(ApproverId::as_str),
                ],
            )
            .await?;
        if !rows.is_empty() {
            return Ok(());
        }
        // Already there: a retry of the same write is fine, anything else is
        // not (read without the bound: the row is there either way).
        let rows = self
            .shared
            .query(
                "reading an operation record",
                &self.shared.statements.get_operation,
                &[&record.operation_id.as_str(), &None::<i64>],
            )
            .await?;
        match rows.first().map(decode).transpose()? {
            Some(existing) if existing == record => Ok(()),
            _ => Err(StoreError::Rejected {
                message: format!(
                    "operation `{}` is already recorded with different contents",
                    record.operation_id
                ),
            }),
        }
    }

    async fn records_for_run(&self, run: &RunId) -> Result<Vec<OperationRecord>, StoreError> {
        let rows = self
            .shared
            .query(
                "reading the operation records of a run",
                &self.shared.statements.records_for_run,
                &[&run.as_str(), &self.max_records],
            )
            .await?;
        rows.iter().map(decode).collect()
    }

    async fn record_for_operation(
        &self,
        id: &OperationId,
    ) -> Result<Option<OperationRecord>, StoreError> {
        self.get(id).await
    }
}
