//! The operation log: one row per Act call.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::policy::ActionDigest;
use countersign_approval_core::{
    ActorId, OperationId, OperationLog, OperationRecord, OutcomeCode, RunId, StoreError, Timestamp,
};
use tokio_postgres::Row;

use crate::record::millis;
use crate::store::{Shared, purge_batches};

/// Operation records in PostgreSQL, in the same schema and pool as the
/// grants: get one from
/// [`PostgresApprovalStore::operation_log`](crate::PostgresApprovalStore::operation_log).
///
/// Recording is idempotent: writing the same record again (a retry after a
/// lost reply) succeeds without a second row; a different record under an
/// operation id already present is [`StoreError::Rejected`].
#[derive(Clone)]
pub struct PostgresOperationLog {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PostgresOperationLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresOperationLog")
            .field("operations", &self.shared.names.operations)
            .finish_non_exhaustive()
    }
}

fn outcome_from_str(text: &str) -> Option<OutcomeCode> {
    OutcomeCode::ALL.into_iter().find(|c| c.as_str() == text)
}

/// Reads a row of the operations table strictly.
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
    Ok(OperationRecord {
        operation_id: OperationId::parse(&text(0)?)
            .ok_or_else(|| corrupt("operation_id is not an operation id"))?,
        actor_id: ActorId::new(text(1)?).map_err(|_| corrupt("actor is not a valid actor id"))?,
        run_id: RunId::new(text(2)?).map_err(|_| corrupt("run is not a valid run id"))?,
        approval_id: optional(3)?,
        url: optional(4)?,
        action_digest: optional(5)?
            .map(|d| ActionDigest::from_str(&d))
            .transpose()
            .map_err(|_| corrupt("action_digest is not 64 lower-case hex characters"))?,
        outcome: outcome_from_str(&text(6)?).ok_or_else(|| corrupt("unknown outcome"))?,
        reason: text(7)?,
        started_at: timestamp(8)?,
        finished_at: timestamp(9)?,
    })
}

impl PostgresOperationLog {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        PostgresOperationLog { shared }
    }

    /// The record with this operation id, if any.
    pub async fn get(&self, id: &OperationId) -> Result<Option<OperationRecord>, StoreError> {
        let rows = self
            .shared
            .query(
                "reading an operation record",
                &self.shared.statements.get_operation,
                &[&id.as_str()],
            )
            .await?;
        rows.first().map(decode).transpose()
    }

    /// Deletes records that finished at or before `now - retention`, in
    /// batches; returns how many. Meant for the same scheduled job as
    /// [`PostgresApprovalStore::purge`](crate::PostgresApprovalStore::purge).
    pub async fn purge(&self, now: Timestamp, retention: Duration) -> Result<u64, StoreError> {
        purge_batches(
            &self.shared,
            "purging operation records",
            &self.shared.statements.purge_operations,
            now,
            retention,
        )
        .await
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
        let rows = self
            .shared
            .query(
                "writing an operation record",
                &self.shared.statements.record_operation,
                &[
                    &record.operation_id.as_str(),
                    &record.actor_id.as_str(),
                    &record.run_id.as_str(),
                    &record.approval_id,
                    &record.url,
                    &digest,
                    &record.outcome.as_str(),
                    &record.reason,
                    &started_at,
                    &finished_at,
                ],
            )
            .await?;
        if !rows.is_empty() {
            return Ok(());
        }
        // Already there: a retry of the same write is fine, anything else is not.
        match self.get(&record.operation_id).await? {
            Some(existing) if existing == record => Ok(()),
            _ => Err(StoreError::Rejected {
                message: format!(
                    "operation `{}` is already recorded with different contents",
                    record.operation_id
                ),
            }),
        }
    }
}
