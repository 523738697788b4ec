//! The conformance kit for operation logs: every [`OperationLog`] keeps one
//! record per call under concurrency, loses none, answers its two queries
//! in order, and stays within the bound its host sets.
//!
//! Each check takes a factory that makes a fresh, empty log keeping at most
//! `max_records` records; [`operation_log_conformance_tests!`](crate::operation_log_conformance_tests)
//! turns every check into one `#[test]`.

use std::future::Future;
use std::sync::Arc;

use countersign_approval_core::{
    ActorId, Clock, GivenApprovalId, OperationId, OperationLog, OperationRecord, OutcomeCode,
    RunId, SystemClock, Timestamp,
};
use countersign_canonical_policy::{Action, ActionDigest};

use crate::failure::CheckFailure;

/// The records each log is asked to keep at most, unless a check says otherwise.
pub const DEFAULT_MAX_RECORDS: usize = 1_000;

macro_rules! oplog_names {
    ([$($check:ident),* $(,)?]) => {
        /// The name of every operation-log check, in the order the macro lists them.
        pub const OPERATION_LOG_CHECKS: &[&str] = &[$(stringify!($check)),*];
    };
}
crate::__for_each_operation_log_check!([oplog_names]);

struct LogCx {
    check: &'static str,
    t0: Timestamp,
    run: RunId,
    actor: ActorId,
    digest: ActionDigest,
}

impl LogCx {
    fn new(check: &'static str) -> Result<LogCx, CheckFailure> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            CheckFailure::new(check, format!("could not build the {what} fixture: {e}"))
        };
        let action = Action::from_canonical_json(
            r#"{"arguments":{},"description":"click button#buy","method":"click","selector":"button#buy"}"#,
        )
        .map_err(|e| fail("action", &e))?;
        Ok(LogCx {
            check,
            t0: SystemClock.now(),
            run: fresh_run(check)?,
            actor: ActorId::new("actor-alice").map_err(|e| fail("actor", &e))?,
            digest: action.digest(),
        })
    }

    fn fail(&self, message: impl Into<String>) -> CheckFailure {
        CheckFailure::new(self.check, message)
    }

    /// A denied call's record: no URL, no digest, no approval id.
    fn bare(&self, run: &RunId, n: u64) -> Result<OperationRecord, CheckFailure> {
        let at = Timestamp::from_millis(self.t0.as_millis().saturating_add(n));
        Ok(OperationRecord {
            operation_id: OperationId::generate()
                .map_err(|e| self.fail(format!("could not generate an operation id: {e}")))?,
            actor_id: self.actor.clone(),
            run_id: run.clone(),
            approval_id: GivenApprovalId::Absent,
            url: None,
            action_digest: None,
            approver_id: None,
            outcome: OutcomeCode::NotAuthorized,
            reason: format!("call {n} was refused"),
            started_at: at,
            finished_at: at,
        })
    }

    /// A performed call's record: every field set.
    fn full(&self, run: &RunId, n: u64) -> Result<OperationRecord, CheckFailure> {
        let mut record = self.bare(run, n)?;
        record.approval_id = GivenApprovalId::from_text(&format!("apr_{n:032x}"));
        record.url = Some("https://shop.example.com/cart?item=1".to_owned());
        record.action_digest = Some(self.digest);
        record.approver_id = Some(
            countersign_approval_core::ApproverId::new(format!("approver «{n}» \"q\" \\"))
                .map_err(|e| self.fail(format!("could not build an approver id: {e}")))?,
        );
        record.outcome = OutcomeCode::Ok;
        record.reason = String::new();
        record.finished_at = record
            .started_at
            .saturating_add(std::time::Duration::from_millis(7));
        Ok(record)
    }

    async fn record(
        &self,
        log: &dyn OperationLog,
        step: &str,
        record: &OperationRecord,
    ) -> Result<(), CheckFailure> {
        log.record(record.clone())
            .await
            .map_err(|e| self.fail(format!("{step}: record failed with a store error: {e}")))
    }

    async fn run_records(
        &self,
        log: &dyn OperationLog,
        step: &str,
        run: &RunId,
    ) -> Result<Vec<OperationRecord>, CheckFailure> {
        log.records_for_run(run).await.map_err(|e| {
            self.fail(format!(
                "{step}: records_for_run failed with a store error: {e}"
            ))
        })
    }

    async fn by_id(
        &self,
        log: &dyn OperationLog,
        step: &str,
        id: &OperationId,
    ) -> Result<Option<OperationRecord>, CheckFailure> {
        log.record_for_operation(id).await.map_err(|e| {
            self.fail(format!(
                "{step}: record_for_operation failed with a store error: {e}"
            ))
        })
    }

    /// `records_for_run(run)` answers exactly `expected`, in order.
    async fn expect_run(
        &self,
        log: &dyn OperationLog,
        step: &str,
        run: &RunId,
        expected: &[OperationRecord],
    ) -> Result<(), CheckFailure> {
        let answer = self.run_records(log, step, run).await?;
        if answer == expected {
            return Ok(());
        }
        let ids = |records: &[OperationRecord]| {
            records
                .iter()
                .map(|r| r.operation_id.as_str().to_owned())
                .collect::<Vec<_>>()
        };
        if ids(&answer) == ids(expected) {
            let diff = answer
                .iter()
                .zip(expected)
                .find(|(got, want)| got != want)
                .map(|(got, want)| format!("got {got:?}, expected {want:?}"))
                .unwrap_or_default();
            return Err(self.fail(format!(
                "{step}: records_for_run answered the right records with different fields: {diff}"
            )));
        }
        Err(self.fail(format!(
            "{step}: records_for_run answered {} records {:?}, expected {} records {:?} in this order",
            answer.len(),
            ids(&answer),
            expected.len(),
            ids(expected)
        )))
    }
}

/// A run id no other check uses.
fn fresh_run(check: &'static str) -> Result<RunId, CheckFailure> {
    let id = OperationId::generate()
        .map_err(|e| CheckFailure::new(check, format!("could not generate an id: {e}")))?;
    RunId::new(format!("run-{}", id.as_str()))
        .map_err(|e| CheckFailure::new(check, format!("could not build a run id: {e}")))
}

/// A record with every field set and one with only the required ones come
/// back field for field, from both queries; so do the approval ids a model
/// may give that are not ids (a hostile string, a number).
pub async fn records_round_trip(log: &dyn OperationLog) -> Result<(), CheckFailure> {
    let cx = LogCx::new("records_round_trip")?;
    let full = cx.full(&cx.run, 1)?;
    let mut bare = cx.bare(&cx.run, 2)?;
    bare.reason = "url `https://ünïcödé.example/` was refused: «not allowed»".to_owned();
    let mut malformed = cx.bare(&cx.run, 3)?;
    malformed.approval_id =
        GivenApprovalId::from_text(&format!("apr\n\u{202e}`{}", "x".repeat(10_000)));
    let mut number = cx.bare(&cx.run, 4)?;
    number.approval_id = GivenApprovalId::not_a_string("number");
    let all = [full, bare, malformed, number];
    for (n, record) in all.iter().enumerate() {
        cx.record(log, &format!("record {n} of the round trip"), record)
            .await?;
    }
    for record in &all {
        let answer = cx
            .by_id(log, "read back by operation id", &record.operation_id)
            .await?;
        if answer.as_ref() != Some(record) {
            return Err(cx.fail(format!(
                "record_for_operation answered {answer:?}, expected {record:?}"
            )));
        }
    }
    cx.expect_run(log, "read back by run", &cx.run, &all).await
}

/// An operation id never recorded is `None`; a run never recorded has no
/// records; neither query creates anything.
pub async fn unknown_queries_answer_nothing(log: &dyn OperationLog) -> Result<(), CheckFailure> {
    let cx = LogCx::new("unknown_queries_answer_nothing")?;
    let unknown =
        OperationId::generate().map_err(|e| cx.fail(format!("could not generate an id: {e}")))?;
    if let Some(found) = cx.by_id(log, "unknown operation id", &unknown).await? {
        return Err(cx.fail(format!(
            "record_for_operation of a never-recorded id answered {found:?}, expected None"
        )));
    }
    cx.expect_run(log, "unknown run", &cx.run, &[]).await?;
    let record = cx.bare(&cx.run, 1)?;
    cx.record(log, "first record of the run", &record).await?;
    cx.expect_run(log, "the run after one record", &cx.run, &[record])
        .await
}

/// Records of two runs, interleaved: each run answers only its own, in the
/// order they were recorded.
pub async fn runs_are_separate_and_in_order(log: &dyn OperationLog) -> Result<(), CheckFailure> {
    let cx = LogCx::new("runs_are_separate_and_in_order")?;
    let other = fresh_run("runs_are_separate_and_in_order")?;
    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
    for n in 0..12u64 {
        let (run, list) = if n % 3 == 0 {
            (&other, &mut theirs)
        } else {
            (&cx.run, &mut mine)
        };
        let record = if n % 2 == 0 {
            cx.full(run, n)?
        } else {
            cx.bare(run, n)?
        };
        cx.record(log, &format!("record {n}"), &record).await?;
        list.push(record);
    }
    cx.expect_run(log, "the first run", &cx.run, &mine).await?;
    cx.expect_run(log, "the second run", &other, &theirs).await
}

/// Recording the same record twice (a resend after a lost reply) keeps it
/// once.
pub async fn a_resent_record_is_kept_once(log: &dyn OperationLog) -> Result<(), CheckFailure> {
    let cx = LogCx::new("a_resent_record_is_kept_once")?;
    let first = cx.full(&cx.run, 1)?;
    let second = cx.bare(&cx.run, 2)?;
    cx.record(log, "first record", &first).await?;
    cx.record(log, "the same record again", &first).await?;
    cx.record(log, "second record", &second).await?;
    cx.expect_run(log, "the run after a resend", &cx.run, &[first, second])
        .await
}

/// 16 tasks record 25 records each at once, on one run: every record is
/// held exactly once, each task's records in its own order, and every one
/// is found by its operation id.
pub async fn concurrent_records_are_each_kept_once(
    log: Arc<dyn OperationLog>,
) -> Result<(), CheckFailure> {
    const TASKS: u64 = 16;
    const EACH: u64 = 25;
    let cx = Arc::new(LogCx::new("concurrent_records_are_each_kept_once")?);
    let barrier = Arc::new(tokio::sync::Barrier::new(TASKS as usize));
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let (cx, log, barrier) = (Arc::clone(&cx), Arc::clone(&log), Arc::clone(&barrier));
        handles.push(tokio::spawn(async move {
            let mut written = Vec::new();
            barrier.wait().await;
            for n in 0..EACH {
                let record = cx.full(&cx.run, task * EACH + n)?;
                cx.record(&*log, &format!("task {task}, record {n}"), &record)
                    .await?;
                written.push(record);
            }
            Ok::<_, CheckFailure>(written)
        }));
    }
    let mut written = Vec::new();
    for handle in handles {
        let records = handle
            .await
            .map_err(|e| cx.fail(format!("a recording task did not finish: {e}")))??;
        written.push(records);
    }
    let held = cx.run_records(&*log, "after the race", &cx.run).await?;
    let total = (TASKS * EACH) as usize;
    if held.len() != total {
        return Err(cx.fail(format!(
            "{} records held after {total} concurrent records, expected {total}",
            held.len()
        )));
    }
    for (task, records) in written.iter().enumerate() {
        let order: Vec<&OperationRecord> = held
            .iter()
            .filter(|r| records.iter().any(|w| w.operation_id == r.operation_id))
            .collect();
        if order.len() != records.len() || order.iter().zip(records).any(|(a, b)| *a != b) {
            return Err(cx.fail(format!(
                "task {task}: its {} records are not each held once, in its order",
                records.len()
            )));
        }
    }
    for record in written.iter().flatten() {
        let found = cx
            .by_id(&*log, "lookup after the race", &record.operation_id)
            .await?;
        if found.as_ref() != Some(record) {
            return Err(cx.fail(format!(
                "record_for_operation `{}` answered {found:?} after the race",
                record.operation_id
            )));
        }
    }
    Ok(())
}

/// A log made to keep at most 10 records, given 25: it holds exactly the
/// newest 10, in order; the 15 oldest are gone from both queries.
pub async fn the_oldest_records_beyond_the_bound_are_dropped(
    log: &dyn OperationLog,
) -> Result<(), CheckFailure> {
    let cx = LogCx::new("the_oldest_records_beyond_the_bound_are_dropped")?;
    let mut written = Vec::new();
    for n in 0..(BOUNDED_MAX_RECORDS as u64 + 15) {
        let record = cx.bare(&cx.run, n)?;
        cx.record(log, &format!("record {n}"), &record).await?;
        written.push(record);
    }
    let (dropped, kept) = written.split_at(15);
    cx.expect_run(log, "a run of more records than the bound", &cx.run, kept)
        .await?;
    for record in dropped {
        if let Some(found) = cx
            .by_id(log, "a record beyond the bound", &record.operation_id)
            .await?
        {
            return Err(cx.fail(format!(
                "record_for_operation answered {found:?}, a record older than the newest \
                 {BOUNDED_MAX_RECORDS}, expected None"
            )));
        }
    }
    Ok(())
}

/// The bound given to the factory by
/// [`the_oldest_records_beyond_the_bound_are_dropped`].
pub const BOUNDED_MAX_RECORDS: usize = 10;

/// Support for [`operation_log_conformance_tests!`](crate::operation_log_conformance_tests); not public API.
#[doc(hidden)]
pub fn run_log_check<F, Fut, L, C, CFut>(
    check: &'static str,
    max_records: usize,
    factory: F,
    run: C,
) -> Result<(), CheckFailure>
where
    F: FnOnce(usize) -> Fut,
    Fut: Future<Output = Option<L>>,
    L: OperationLog + 'static,
    C: FnOnce(Arc<dyn OperationLog>) -> CFut,
    CFut: Future<Output = Result<(), CheckFailure>>,
{
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .map_err(|e| CheckFailure::new(check, format!("could not start a tokio runtime: {e}")))?
        .block_on(async move {
            match factory(max_records).await {
                Some(log) => run(Arc::new(log)).await,
                None => {
                    eprintln!("{check}: skipped, the log factory gave no log");
                    Ok(())
                }
            }
        })
}
