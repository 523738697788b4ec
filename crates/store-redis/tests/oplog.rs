//! The Redis operation log: the operation-log kit on a single server and
//! on a cluster, retention by age, memory per record, the Act tool writing
//! to it, and what a failed write does.
//!
//! The memory figures are printed (`cargo test -p countersign-store-redis
//! --test oplog -- --nocapture`); docs/redis.md quotes them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use countersign_act_tool::{Act, Context};
use countersign_approval_core::{
    ActorId, ApprovalStore, ApproverId, GivenApprovalId, OperationId, OperationLog,
    OperationRecord, OutcomeCode, RunId,
};
use countersign_backend_fake::FakeBackend;
use countersign_store_redis::{OperationLogRetention, RedisOperationLog};
use support::{RedisServer, call, grant, now, shared_server, store_on};

async fn log_on(
    server: &RedisServer,
    tag: &str,
    retention: OperationLogRetention,
) -> RedisOperationLog {
    let store = store_on(server, tag).await;
    RedisOperationLog::for_store(&store, retention)
        .await
        .unwrap()
}

async fn kit_log(max_records: usize) -> RedisOperationLog {
    let retention =
        OperationLogRetention::new(max_records as u64, Duration::from_secs(3600)).unwrap();
    log_on(shared_server(), "oplog-kit", retention).await
}

countersign_store_conformance::operation_log_conformance_tests!(redis_operation_log, kit_log);

async fn cluster_kit_log(max_records: usize) -> RedisOperationLog {
    let store = support::cluster_store(support::shared_cluster(), "oplog-kit").await;
    let retention =
        OperationLogRetention::new(max_records as u64, Duration::from_secs(3600)).unwrap();
    RedisOperationLog::for_store(&store, retention)
        .await
        .unwrap()
}

countersign_store_conformance::operation_log_conformance_tests!(
    cluster_operation_log,
    cluster_kit_log
);

fn record(run: &RunId, n: u64) -> OperationRecord {
    let at = now();
    OperationRecord {
        operation_id: OperationId::generate().unwrap(),
        actor_id: ActorId::new("actor-1").unwrap(),
        run_id: run.clone(),
        approval_id: GivenApprovalId::from_text("apr_0f3c5d8e9a1b2c3d4e5f60718293a4b5"),
        url: Some("https://docs.example.com/".to_owned()),
        action_digest: Some(
            "4f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
                .parse()
                .unwrap(),
        ),
        approver_id: Some(ApproverId::new("ops-lead@example.com").unwrap()),
        outcome: OutcomeCode::Ok,
        reason: String::new(),
        started_at: at,
        finished_at: at.saturating_add(Duration::from_millis(n % 50)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_older_than_the_retention_are_dropped() {
    let retention = OperationLogRetention::new(1_000, Duration::from_millis(1_500)).unwrap();
    let log = log_on(shared_server(), "oplog-age", retention).await;
    let run = RunId::new("run-age").unwrap();
    let old: Vec<_> = (0..3).map(|n| record(&run, n)).collect();
    for r in &old {
        log.record(r.clone()).await.unwrap();
    }
    assert_eq!(log.records_for_run(&run).await.unwrap(), old);
    tokio::time::sleep(Duration::from_millis(1_800)).await;
    let new = record(&run, 9);
    log.record(new.clone()).await.unwrap();
    assert_eq!(log.records_for_run(&run).await.unwrap(), vec![new.clone()]);
    for r in &old {
        assert_eq!(
            log.record_for_operation(&r.operation_id).await.unwrap(),
            None
        );
    }
    // Every key of the log expires with its records.
    let mut conn = shared_server().conn();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(log.stream_key())
        .query(&mut conn)
        .unwrap();
    assert!(ttl > 0 && ttl <= 1_500, "{ttl}");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(log.operation_key(&new.operation_id))
        .query(&mut conn)
        .unwrap();
    assert!(ttl > 0 && ttl <= 1_500, "{ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_per_record_is_measured() {
    const RECORDS: u64 = 2_000;
    let server = RedisServer::start();
    let log = log_on(&server, "oplog-memory", OperationLogRetention::default()).await;
    let mut conn = server.conn();
    let used = |conn: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("memory").query(conn).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = used(&mut conn);
    // 20 runs of 100 records each, as Act writes them for performed calls.
    let runs: Vec<RunId> = (0..20)
        .map(|n| RunId::new(format!("run-{n:02}")).unwrap())
        .collect();
    let mut ids = Vec::new();
    for n in 0..RECORDS {
        let r = record(&runs[(n % 20) as usize], n);
        ids.push(r.operation_id.clone());
        log.record(r).await.unwrap();
    }
    let after = used(&mut conn);
    let usage = |conn: &mut redis::Connection, key: &str| -> u64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query(conn)
            .unwrap()
    };
    let stream = usage(&mut conn, log.stream_key());
    let index: u64 = runs
        .iter()
        .map(|run| usage(&mut conn, &log.run_key(run)))
        .sum();
    let op_key = usage(&mut conn, &log.operation_key(&ids[0]));
    let per_record_info = (after - before) / RECORDS;
    eprintln!(
        "{RECORDS} records over 20 runs: stream {} B/record, run indexes {} B/record, \
         operation key {op_key} B each; INFO used_memory grew {} B, {per_record_info} B/record",
        stream / RECORDS,
        index / RECORDS,
        after - before
    );
    assert_eq!(log.records_for_run(&runs[3]).await.unwrap().len(), 100);
    // A generous sanity bound: the figures above go to docs/redis.md.
    assert!(per_record_info < 4_096, "{per_record_info} B per record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn act_writes_one_record_per_call_and_a_failed_write_changes_no_outcome() {
    let grants_server = shared_server();
    let store = Arc::new(store_on(grants_server, "oplog-act").await);
    let mut log_server = RedisServer::start();
    let log = Arc::new(log_on(&log_server, "oplog-act", OperationLogRetention::default()).await);
    let backend = FakeBackend::new();
    let run = RunId::new(support::RUN).unwrap();
    let context = Context::builder()
        .actor_id(ActorId::new(support::ACTOR).unwrap())
        .run_id(run.clone())
        .backend(backend.clone())
        .source_policy(support::policy())
        .operation_store(log.clone())
        .approval_store(store.clone())
        .build()
        .unwrap();
    let act = Act::new(context);
    let t0 = now();
    let approver = ApproverId::new("reviewer «ü» {7}").unwrap();
    let approval = grant("a#one", Duration::from_secs(60), t0)
        .await
        .approved_by(approver.clone(), t0)
        .unwrap();
    let id = approval.id.as_str().to_owned();
    store.issue(approval).await.unwrap();
    let performed = act.execute_tool_call(&call(&id, "a#one")).await;
    assert_eq!(performed.code(), OutcomeCode::Ok);
    let refused = act.execute_tool_call(&call(&id, "a#one")).await;
    assert_eq!(refused.code(), OutcomeCode::ApprovalStale);
    let records = log.records_for_run(&run).await.unwrap();
    assert_eq!(
        records.iter().map(|r| r.outcome).collect::<Vec<_>>(),
        [OutcomeCode::Ok, OutcomeCode::ApprovalStale]
    );
    assert_eq!(
        records[0].approval_id.well_formed().map(|i| i.as_str()),
        Some(id.as_str())
    );
    // The approver of the grant the call used, read back from the log.
    assert_eq!(records[0].approver_id, Some(approver));
    assert_eq!(records[1].approver_id, None);
    let op = performed.to_json()["operation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let found = log
        .record_for_operation(&OperationId::parse(&op).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, records[0]);

    // The log's server dies: the next call still performs, its record is lost
    // and the failure is reported (through tracing), not the outcome changed.
    log_server.kill();
    let approval = grant("a#two", Duration::from_secs(60), t0).await;
    let id = approval.id.as_str().to_owned();
    store.issue(approval).await.unwrap();
    let result = act.execute_tool_call(&call(&id, "a#two")).await;
    assert_eq!(result.code(), OutcomeCode::Ok);
    assert_eq!(backend.len(), 2);
    assert!(log.records_for_run(&run).await.is_err());
}
