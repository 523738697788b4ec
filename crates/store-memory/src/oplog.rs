//! The operation log in process memory.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::{
    OperationId, OperationLog, OperationRecord, RunId, StoreError, Timestamp,
};

use crate::lock;

/// Operation records in process memory, in the order they were written.
///
/// Unbounded by default ([`new`](Self::new)); [`with_max_records`](Self::with_max_records)
/// keeps only the newest records, and [`purge`](Self::purge) drops old ones.
#[derive(Debug, Default)]
pub struct InMemoryOperationStore {
    log: Mutex<Log>,
    max_records: Option<usize>,
}

#[derive(Debug, Default)]
struct Log {
    records: VecDeque<OperationRecord>,
    ids: HashSet<OperationId>,
}

impl InMemoryOperationStore {
    /// An empty, unbounded log.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty log that keeps at most the newest `max_records` records
    /// (at least one): recording one more drops the oldest.
    pub fn with_max_records(max_records: usize) -> Self {
        InMemoryOperationStore {
            log: Mutex::default(),
            max_records: Some(max_records.max(1)),
        }
    }

    /// A copy of every record, oldest first.
    pub fn records(&self) -> Result<Vec<OperationRecord>, StoreError> {
        Ok(lock(&self.log)?.records.iter().cloned().collect())
    }

    /// How many records are held.
    pub fn len(&self) -> Result<usize, StoreError> {
        Ok(lock(&self.log)?.records.len())
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(lock(&self.log)?.records.is_empty())
    }

    /// Drops records that finished at or before `now - retention`; returns how many.
    pub fn purge(&self, now: Timestamp, retention: Duration) -> Result<usize, StoreError> {
        let mut log = lock(&self.log)?;
        let Log { records, ids } = &mut *log;
        let before = records.len();
        records.retain(|r| {
            let keep = r.finished_at.saturating_add(retention) > now;
            if !keep {
                ids.remove(&r.operation_id);
            }
            keep
        });
        Ok(before - records.len())
    }
}

#[async_trait]
impl OperationLog for InMemoryOperationStore {
    async fn record(&self, record: OperationRecord) -> Result<(), StoreError> {
        let mut log = lock(&self.log)?;
        if !log.ids.insert(record.operation_id.clone()) {
            // A resend of a record already held: kept once.
            return Ok(());
        }
        log.records.push_back(record);
        if let Some(max) = self.max_records {
            while log.records.len() > max {
                if let Some(dropped) = log.records.pop_front() {
                    log.ids.remove(&dropped.operation_id);
                }
            }
        }
        Ok(())
    }

    async fn records_for_run(&self, run: &RunId) -> Result<Vec<OperationRecord>, StoreError> {
        Ok(lock(&self.log)?
            .records
            .iter()
            .filter(|r| r.run_id == *run)
            .cloned()
            .collect())
    }

    async fn record_for_operation(
        &self,
        id: &OperationId,
    ) -> Result<Option<OperationRecord>, StoreError> {
        let log = lock(&self.log)?;
        if !log.ids.contains(id) {
            return Ok(None);
        }
        Ok(log.records.iter().find(|r| r.operation_id == *id).cloned())
    }
}
