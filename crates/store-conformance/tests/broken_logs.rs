#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The operation-log kit can fail: each deliberately broken log is caught
//! by the checks named for its defect, and a sound log passes everything.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use countersign_approval_core::{OperationId, OperationLog, OperationRecord, RunId, StoreError};
use countersign_store_conformance::{CheckFailure, OPERATION_LOG_CHECKS, oplog};
use countersign_store_memory::InMemoryOperationStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    None,
    /// Every fifth record written is silently dropped.
    LosesRecords,
    /// The bound is ignored.
    Unbounded,
    /// A run's records come back newest first.
    NewestFirst,
    /// A resend is kept twice.
    KeepsResends,
}

struct TestLog {
    defect: Defect,
    max_records: usize,
    records: Mutex<Vec<OperationRecord>>,
    written: Mutex<usize>,
}

#[async_trait]
impl OperationLog for TestLog {
    async fn record(&self, record: OperationRecord) -> Result<(), StoreError> {
        let mut written = self.written.lock().unwrap();
        *written += 1;
        if self.defect == Defect::LosesRecords && (*written).is_multiple_of(5) {
            return Ok(());
        }
        let mut records = self.records.lock().unwrap();
        if self.defect != Defect::KeepsResends
            && records
                .iter()
                .any(|r| r.operation_id == record.operation_id)
        {
            return Ok(());
        }
        records.push(record);
        if self.defect != Defect::Unbounded && records.len() > self.max_records {
            records.remove(0);
        }
        Ok(())
    }
    async fn records_for_run(&self, run: &RunId) -> Result<Vec<OperationRecord>, StoreError> {
        let mut found: Vec<_> = self
            .records
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.run_id == *run)
            .cloned()
            .collect();
        if self.defect == Defect::NewestFirst {
            found.reverse();
        }
        Ok(found)
    }
    async fn record_for_operation(
        &self,
        id: &OperationId,
    ) -> Result<Option<OperationRecord>, StoreError> {
        Ok(self
            .records
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.operation_id == *id)
            .cloned())
    }
}

fn run_all(defect: Defect) -> HashMap<&'static str, CheckFailure> {
    let factory = move |max_records: usize| async move {
        Some(TestLog {
            defect,
            max_records,
            records: Mutex::new(Vec::new()),
            written: Mutex::new(0),
        })
    };
    let results = vec![
        (
            "records_round_trip",
            oplog::run_log_check(
                "records_round_trip",
                oplog::DEFAULT_MAX_RECORDS,
                factory,
                |log| async move { oplog::records_round_trip(&*log).await },
            ),
        ),
        (
            "unknown_queries_answer_nothing",
            oplog::run_log_check(
                "unknown_queries_answer_nothing",
                oplog::DEFAULT_MAX_RECORDS,
                factory,
                |log| async move { oplog::unknown_queries_answer_nothing(&*log).await },
            ),
        ),
        (
            "runs_are_separate_and_in_order",
            oplog::run_log_check(
                "runs_are_separate_and_in_order",
                oplog::DEFAULT_MAX_RECORDS,
                factory,
                |log| async move { oplog::runs_are_separate_and_in_order(&*log).await },
            ),
        ),
        (
            "a_resent_record_is_kept_once",
            oplog::run_log_check(
                "a_resent_record_is_kept_once",
                oplog::DEFAULT_MAX_RECORDS,
                factory,
                |log| async move { oplog::a_resent_record_is_kept_once(&*log).await },
            ),
        ),
        (
            "concurrent_records_are_each_kept_once",
            oplog::run_log_check(
                "concurrent_records_are_each_kept_once",
                oplog::DEFAULT_MAX_RECORDS,
                factory,
                |log| async move { oplog::concurrent_records_are_each_kept_once(log).await },
            ),
        ),
        (
            "the_oldest_records_beyond_the_bound_are_dropped",
            oplog::run_log_check(
                "the_oldest_records_beyond_the_bound_are_dropped",
                oplog::BOUNDED_MAX_RECORDS,
                factory,
                |log| async move { oplog::the_oldest_records_beyond_the_bound_are_dropped(&*log).await },
            ),
        ),
    ];
    assert_eq!(results.len(), OPERATION_LOG_CHECKS.len(), "run every check");
    results
        .into_iter()
        .filter_map(|(name, result)| {
            result.err().map(|failure| {
                assert_eq!(failure.check(), name);
                (name, failure)
            })
        })
        .collect()
}

fn caught(defect: Defect) -> Vec<&'static str> {
    let mut names: Vec<_> = run_all(defect).into_keys().collect();
    names.sort_unstable();
    names
}

#[test]
fn a_sound_log_passes_every_check() {
    assert_eq!(caught(Defect::None), Vec::<&str>::new());
}

#[test]
fn each_defect_is_caught_by_its_checks() {
    assert!(caught(Defect::LosesRecords).contains(&"concurrent_records_are_each_kept_once"));
    assert_eq!(
        caught(Defect::Unbounded),
        ["the_oldest_records_beyond_the_bound_are_dropped"]
    );
    let newest_first = caught(Defect::NewestFirst);
    assert!(newest_first.contains(&"runs_are_separate_and_in_order"));
    assert!(newest_first.contains(&"records_round_trip"));
    assert_eq!(
        caught(Defect::KeepsResends),
        ["a_resent_record_is_kept_once"]
    );
}

#[test]
fn the_macro_lists_every_check() {
    let source = include_str!("../src/macros.rs");
    for name in OPERATION_LOG_CHECKS {
        assert!(source.contains(&format!("{name},")), "`{name}` not listed");
    }
    assert_eq!(OPERATION_LOG_CHECKS.len(), 6);
}

// The memory log through the macro, unbounded factory argument honoured.
countersign_store_conformance::operation_log_conformance_tests!(
    memory_log_through_the_macro,
    |max_records| async move { InMemoryOperationStore::with_max_records(max_records) }
);

countersign_store_conformance::operation_log_conformance_tests!(
    skipped_without_a_log,
    optional: |_max_records: usize| async { None::<InMemoryOperationStore> },
);
