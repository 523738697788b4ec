//! Faults: the backend of an in-flight consume terminated, the server
//! SIGKILLed mid-burst and restarted, a statement timeout, the pool
//! exhausted. Each ends in a documented outcome, never a double performance,
//! and no call hangs past its configured timeouts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use countersign_act_tool::RetryPolicy;
use countersign_approval_core::{
    ActorId, ApprovalId, ApprovalStore, AttemptId, ConsumeOutcome, GrantState, OutcomeCode, RunId,
    StaleReason, StopOutcome, StoreError,
};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use countersign_store_postgres::PostgresApprovalStore;
use support::{
    Isolation, KillGate, PgServer, act_over, call, grant, now, options_for, shared_server,
};

const TTL: Duration = Duration::from_secs(600);

/// An admin transaction holding the row lock of grant `id` until rolled back.
async fn lock_row(
    server: &PgServer,
    store: &PostgresApprovalStore,
    id: &ApprovalId,
) -> tokio_postgres::Client {
    let admin = server.admin().await;
    admin.batch_execute("BEGIN").await.unwrap();
    let rows = admin
        .query(
            &format!(
                "SELECT 1 FROM {} WHERE id = $1 FOR UPDATE",
                store.grants_table()
            ),
            &[&id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    admin
}

/// The server process ids of `store`'s changing statements now waiting on
/// a lock (only this store's: the tests of this file run side by side on one
/// server, each with a schema of its own).
async fn waiting_backends(
    admin: &tokio_postgres::Client,
    store: &PostgresApprovalStore,
) -> Vec<i32> {
    admin
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'countersign' \
             AND wait_event_type = 'Lock' AND query LIKE '%UPDATE %' \
             AND strpos(query, $1) > 0",
            &[&store.grants_table()],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

async fn wait_for_waiter(admin: &tokio_postgres::Client, store: &PostgresApprovalStore) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = waiting_backends(admin, store).await.first() {
            return *pid;
        }
        assert!(
            Instant::now() < deadline,
            "the consume never waited on the lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `store`'s statements now waiting on an advisory lock whose text starts
/// with `prefix` (the store's statements all name its schema).
async fn advisory_waiters(
    admin: &tokio_postgres::Client,
    store: &PostgresApprovalStore,
    prefix: &str,
) -> usize {
    let schema = store
        .grants_table()
        .split('.')
        .next()
        .unwrap_or("")
        .trim_matches('"');
    admin
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'countersign' \
             AND wait_event_type = 'Lock' AND wait_event = 'advisory' AND starts_with(query, $1) \
             AND strpos(query, $2) > 0",
            &[&prefix, &schema],
        )
        .await
        .unwrap()
        .len()
}

async fn wait_for_advisory_waiters(
    admin: &tokio_postgres::Client,
    store: &PostgresApprovalStore,
    prefix: &str,
    n: usize,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while advisory_waiters(admin, store, prefix).await < n {
        assert!(
            Instant::now() < deadline,
            "never saw {n} statements starting `{prefix}` wait on an advisory lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A stop is ordered against every consume by the run's advisory lock: it
/// waits for the consume in flight (here held up by a row lock an admin
/// transaction holds on its grant), which then succeeds and is not
/// counted; a consume that begins while the stop waits queues behind it and
/// answers `Stale(Stopped)`.
async fn stop_waits_for_the_consume_in_flight(isolation: Isolation) {
    let server = shared_server();
    let store = Arc::new(
        PostgresApprovalStore::connect(options_for(server, "stop_order", isolation))
            .await
            .unwrap(),
    );
    let (actor, run) = (
        ActorId::new(support::ACTOR).unwrap(),
        RunId::new(support::RUN).unwrap(),
    );
    let t0 = now();
    let held = grant("a#held", TTL, t0).await;
    let later = grant("a#later", TTL, t0).await;
    let spare = grant("a#spare", TTL, t0).await;
    for approval in [&held, &later, &spare] {
        store.issue(approval.clone()).await.unwrap();
    }
    let locker = lock_row(server, &store, &held.id).await;
    let consume = |approval: &countersign_approval_core::Approval| {
        let (store, approval) = (store.clone(), approval.clone());
        tokio::spawn(async move {
            store
                .consume_once(
                    &approval.id,
                    &approval.binding(),
                    t0,
                    &AttemptId::generate().unwrap(),
                )
                .await
        })
    };
    let in_flight = consume(&held);
    let watcher = server.admin().await;
    wait_for_waiter(&watcher, &store).await;

    let stop = tokio::spawn({
        let (store, actor, run) = (store.clone(), actor.clone(), run.clone());
        async move { store.stop_run(&actor, &run, t0).await }
    });
    wait_for_advisory_waiters(&watcher, &store, "SELECT pg_advisory_xact_lock(", 1).await;
    let queued = consume(&later);
    wait_for_advisory_waiters(&watcher, &store, "WITH g AS", 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!stop.is_finished() && !queued.is_finished());

    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        in_flight.await.unwrap().unwrap(),
        ConsumeOutcome::Consumed { replay: false },
        "{isolation:?}: the consume in flight was ordered before the stop"
    );
    assert_eq!(
        stop.await.unwrap().unwrap(),
        StopOutcome {
            stopped_grants: 2,
            stopped_standing: 0,
            was_stopped: false
        },
        "{isolation:?}: the stop counts the two grants no consume took"
    );
    assert_eq!(
        queued.await.unwrap().unwrap(),
        ConsumeOutcome::Stale(StaleReason::Stopped),
        "{isolation:?}: the consume queued behind the stop"
    );
    assert!(matches!(
        store.get(&held.id).await.unwrap().unwrap().state,
        GrantState::Consumed { .. }
    ));
    for stopped in [&later, &spare] {
        assert_eq!(
            store.get(&stopped.id).await.unwrap().unwrap().state,
            GrantState::Stopped
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_waits_for_the_consume_in_flight_at_read_committed() {
    stop_waits_for_the_consume_in_flight(Isolation::ReadCommitted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_waits_for_the_consume_in_flight_at_repeatable_read() {
    stop_waits_for_the_consume_in_flight(Isolation::RepeatableRead).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_waits_for_the_consume_in_flight_at_serializable() {
    stop_waits_for_the_consume_in_flight(Isolation::Serializable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_backend_is_unavailable_and_the_retry_consumes_once() {
    let server = shared_server();
    let store = Arc::new(
        PostgresApprovalStore::connect(options_for(server, "terminate", Isolation::ReadCommitted))
            .await
            .unwrap(),
    );
    let t0 = now();
    let approval = grant("a#term", TTL, t0).await;
    store.issue(approval.clone()).await.unwrap();
    let locker = lock_row(server, &store, &approval.id).await;

    let attempt = AttemptId::generate().unwrap();
    let consume = tokio::spawn({
        let (store, approval, attempt) = (store.clone(), approval.clone(), attempt.clone());
        async move {
            store
                .consume_once(&approval.id, &approval.binding(), t0, &attempt)
                .await
        }
    });
    let watcher = server.admin().await;
    let pid = wait_for_waiter(&watcher, &store).await;
    let terminated: bool = watcher
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(terminated);
    let err = consume.await.unwrap().unwrap_err();
    assert!(
        matches!(err, StoreError::Unavailable { .. }),
        "a terminated connection is unavailable, effect unknown: {err:?}"
    );
    assert!(err.is_retryable());
    locker.batch_execute("ROLLBACK").await.unwrap();

    // The statement died before committing: the grant is still active, and
    // the same store handle (its broken connection dropped) consumes it on
    // the retry with the same attempt, exactly once.
    let grant_now = store.get(&approval.id).await.unwrap().unwrap();
    assert_eq!(grant_now.state, GrantState::Active);
    let binding = approval.binding();
    assert_eq!(
        store
            .consume_once(&approval.id, &binding, t0, &attempt)
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    assert_eq!(
        store
            .consume_once(&approval.id, &binding, t0, &attempt)
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: true }
    );
    assert_eq!(
        store
            .consume_once(&approval.id, &binding, t0, &AttemptId::generate().unwrap())
            .await
            .unwrap(),
        ConsumeOutcome::Stale(StaleReason::Consumed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_timeout_is_a_timeout_that_performs_nothing() {
    let server = shared_server();
    let store = Arc::new(
        PostgresApprovalStore::connect(
            options_for(server, "stmt_timeout", Isolation::ReadCommitted)
                .statement_timeout(Duration::from_millis(300)),
        )
        .await
        .unwrap(),
    );
    let t0 = now();
    let approval = grant("a#slow", TTL, t0).await;
    store.issue(approval.clone()).await.unwrap();
    let locker = lock_row(server, &store, &approval.id).await;
    let before = store.get(&approval.id).await.unwrap().unwrap();

    let started = Instant::now();
    let err = store
        .consume_once(
            &approval.id,
            &approval.binding(),
            t0,
            &AttemptId::generate().unwrap(),
        )
        .await
        .unwrap_err();
    let waited = started.elapsed();
    match &err {
        StoreError::Timeout { message } => assert!(message.contains("57014"), "{message}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(waited >= Duration::from_millis(250), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "hung for {waited:?}");

    // Through the Act tool: STORE_UNAVAILABLE, nothing performed.
    let backend = FakeBackend::new();
    let operations = Arc::new(InMemoryOperationStore::new());
    let act = act_over(
        store.clone(),
        &backend,
        &operations,
        RetryPolicy::no_retry(),
    );
    let result = act
        .execute_tool_call(&call(approval.id.as_str(), "a#slow"))
        .await;
    assert_eq!(result.code(), OutcomeCode::StoreUnavailable);
    assert_eq!(backend.len(), 0);
    assert_eq!(store.get(&approval.id).await.unwrap().unwrap(), before);

    locker.batch_execute("ROLLBACK").await.unwrap();
    let result = act
        .execute_tool_call(&call(approval.id.as_str(), "a#slow"))
        .await;
    assert_eq!(result.code(), OutcomeCode::Ok);
    assert_eq!(backend.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_pool_is_a_timeout_before_anything_is_sent() {
    let server = shared_server();
    let store = Arc::new(
        PostgresApprovalStore::connect(
            options_for(server, "pool", Isolation::ReadCommitted)
                .pool_size(1)
                .pool_wait_timeout(Duration::from_millis(200))
                .statement_timeout(Duration::from_secs(20)),
        )
        .await
        .unwrap(),
    );
    let t0 = now();
    let held = grant("a#held", TTL, t0).await;
    let other = grant("a#other", TTL, t0).await;
    store.issue(held.clone()).await.unwrap();
    store.issue(other.clone()).await.unwrap();
    let locker = lock_row(server, &store, &held.id).await;

    // This consume holds the only connection while it waits on the lock.
    let attempt = AttemptId::generate().unwrap();
    let consume = tokio::spawn({
        let (store, held, attempt) = (store.clone(), held.clone(), attempt.clone());
        async move {
            store
                .consume_once(&held.id, &held.binding(), t0, &attempt)
                .await
        }
    });
    let watcher = server.admin().await;
    wait_for_waiter(&watcher, &store).await;

    let started = Instant::now();
    let err = store
        .consume_once(
            &other.id,
            &other.binding(),
            t0,
            &AttemptId::generate().unwrap(),
        )
        .await
        .unwrap_err();
    let waited = started.elapsed();
    match &err {
        StoreError::Timeout { message } => {
            assert!(message.contains("pool is exhausted"), "{message}")
        }
        other => panic!("expected a pool timeout, got {other:?}"),
    }
    assert!(waited < Duration::from_secs(10), "hung for {waited:?}");
    assert_eq!(
        store.get(&other.id).await.map_err(|e| e.is_retryable()),
        Err(true)
    );

    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        consume.await.unwrap().unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    // The pool is free again; the refused consume changed nothing.
    assert_eq!(
        store.get(&other.id).await.unwrap().unwrap().state,
        GrantState::Active
    );
    assert_eq!(
        store
            .consume_once(
                &other.id,
                &other.binding(),
                t0,
                &AttemptId::generate().unwrap()
            )
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}

const BURST_GRANTS: usize = 240;
const BURST_TASKS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_sigkilled_mid_burst_loses_no_ok_and_the_store_recovers_by_itself() {
    let server = Arc::new(PgServer::start());
    let store = Arc::new(
        PostgresApprovalStore::connect(
            options_for(&server, "sigkill", Isolation::ReadCommitted)
                .statement_timeout(Duration::from_secs(1))
                .pool_wait_timeout(Duration::from_secs(2))
                .connect_timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap(),
    );
    let t0 = now();
    let mut ids = Vec::new();
    for i in 0..BURST_GRANTS {
        let approval = grant(&format!("a#k{i}"), TTL, t0).await;
        ids.push(approval.id.as_str().to_owned());
        store.issue(approval).await.unwrap();
    }
    let backend = FakeBackend::new();
    let operations = Arc::new(InMemoryOperationStore::new());
    let act = Arc::new(act_over(
        store.clone(),
        &backend,
        &operations,
        RetryPolicy::default(),
    ));

    // Two tasks race for every grant; each task walks its half of the
    // grants. Half the tasks wait half-way until the server is dead (the
    // others run on through the kill), and it restarts only once a call
    // failed against it, so the kill always hits some calls.
    let done = Arc::new(AtomicUsize::new(0));
    let gate = KillGate::new();
    let mut tasks = Vec::new();
    for task in 0..BURST_TASKS {
        let (act, done, gate) = (act.clone(), done.clone(), gate.clone());
        let mine: Vec<(usize, String)> = ids
            .iter()
            .enumerate()
            .filter(|(i, _)| i % (BURST_TASKS / 2) == task % (BURST_TASKS / 2))
            .map(|(i, id)| (i, id.clone()))
            .collect();
        let waits_at = (task % 2 == 0).then_some(mine.len() / 2);
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            for (k, (i, id)) in mine.into_iter().enumerate() {
                if waits_at == Some(k) {
                    gate.killed().await;
                }
                let result = act.execute_tool_call(&call(&id, &format!("a#k{i}"))).await;
                if result.code() == OutcomeCode::StoreUnavailable {
                    gate.hit();
                }
                results.push((id, result.code()));
                done.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(4)).await;
            }
            results
        }));
    }
    while done.load(Ordering::SeqCst) < BURST_GRANTS / 2 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let killed_at = done.load(Ordering::SeqCst);
    let restarter = tokio::spawn({
        let (server, gate) = (server.clone(), gate.clone());
        async move {
            gate.kill_then_restart_after_a_hit(&server, Duration::from_millis(700))
                .await
        }
    });

    let mut ok: HashSet<String> = HashSet::new();
    let mut codes: HashMap<OutcomeCode, usize> = HashMap::new();
    for task in tasks {
        for (id, code) in task.await.expect("no task panicked") {
            *codes.entry(code).or_default() += 1;
            match code {
                OutcomeCode::Ok => assert!(ok.insert(id.clone()), "{id}: two oks"),
                OutcomeCode::StoreUnavailable | OutcomeCode::ApprovalStale => {}
                other => panic!("{id}: unexpected {other}"),
            }
        }
    }
    restarter.await.unwrap();
    eprintln!("sigkill: killed after {killed_at} calls; codes {codes:?}");
    assert!(
        codes
            .get(&OutcomeCode::StoreUnavailable)
            .copied()
            .unwrap_or(0)
            > 0,
        "the kill hit some calls"
    );

    // The same store handle recovers by itself once the server is back.
    let probe = ApprovalId::parse(&ids[0]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.get(&probe).await.is_err() {
        assert!(Instant::now() < deadline, "the store did not recover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A second pass over every grant: what was not consumed is now, once.
    for (i, id) in ids.iter().enumerate() {
        let result = act.execute_tool_call(&call(id, &format!("a#k{i}"))).await;
        match result.code() {
            OutcomeCode::Ok => assert!(ok.insert(id.clone()), "{id}: a second ok"),
            OutcomeCode::ApprovalStale => {}
            other => panic!("{id}: after recovery, unexpected {other}"),
        }
    }

    // Never a double performance; every ok recorded once and still consumed.
    let mut performed: HashMap<String, usize> = HashMap::new();
    for record in backend.records() {
        *performed
            .entry(record.approval_id.as_str().to_owned())
            .or_default() += 1;
    }
    assert!(
        performed.values().all(|&n| n == 1),
        "an action performed twice"
    );
    assert_eq!(performed.keys().cloned().collect::<HashSet<_>>(), ok);
    for id in &ids {
        let grant = store
            .get(&ApprovalId::parse(id).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(grant.state, GrantState::Consumed { .. }), "{id}");
    }
    // Grants consumed but never performed: their answer was lost to the kill
    // (the documented fail-closed outcome).
    eprintln!(
        "sigkill: {} performed, {} consumed with the answer lost",
        ok.len(),
        ids.len() - ok.len()
    );
}
