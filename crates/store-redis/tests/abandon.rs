//! Consumes the Act tool gave up on are given back: after the server was
//! paused past the command timeout, and after WAIT was not confirmed, no
//! grant is left consumed without an action once the server answers again.
//!
//! Each test prints its figures (`cargo test -p countersign-store-redis
//! --test abandon -- --nocapture`); docs/redis.md quotes them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign_act_tool::{ActResult, RetryPolicy};
use countersign_approval_core::{
    AbandonOutcome, ApprovalId, ApprovalStore, AttemptId, ConsumeOutcome, GrantState, IssueError,
    OutcomeCode, StaleReason, StoreError,
};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use countersign_store_redis::{Durability, GrantScript, RedisApprovalStore, RedisStoreOptions};
use support::{RedisServer, act_over, call, grant, now};

const TTL: Duration = Duration::from_secs(600);
/// Persistence every node of these tests runs with: nothing a restart loses.
const AOF_ALWAYS: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

/// The server's own process id, from `INFO server`.
fn server_pid(server: &RedisServer) -> u32 {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut server.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
        .unwrap()
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// Waits (up to 10 s) until `primary` has one replica online.
fn wait_for_replica(primary: &RedisServer) {
    let mut conn = primary.conn();
    let linked = (0..400).any(|_| {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut conn)
            .unwrap();
        let online = info.contains("connected_slaves:1") && info.contains("state=online");
        if !online {
            std::thread::sleep(Duration::from_millis(25));
        }
        online
    });
    assert!(linked, "the replica never came online");
}

/// Issues `n` grants, each for its own selector `a#g<i>`.
async fn issue(store: &RedisApprovalStore, n: usize) -> Vec<(ApprovalId, String)> {
    let t0 = now();
    let mut grants = Vec::with_capacity(n);
    for i in 0..n {
        let selector = format!("a#g{i}");
        let approval = grant(&selector, TTL, t0).await;
        grants.push((approval.id.clone(), selector));
        store.issue(approval).await.unwrap();
    }
    grants
}

/// As [`issue`], through a store that waits for a replica: on a busy
/// machine the replica may confirm a write later than the store's WAIT
/// allows. Such an issue is applied all the same (only its confirmation is
/// missing), so it is accepted once `reader` sees the grant active; the
/// test is about what the calls after it do.
async fn issue_applied(
    store: &RedisApprovalStore,
    reader: &RedisApprovalStore,
    n: usize,
) -> Vec<(ApprovalId, String)> {
    let t0 = now();
    let mut grants = Vec::with_capacity(n);
    for i in 0..n {
        let selector = format!("a#g{i}");
        let approval = grant(&selector, TTL, t0).await;
        let id = approval.id.clone();
        match store.issue(approval).await {
            Ok(()) | Err(IssueError::Store(StoreError::DurabilityUnconfirmed { .. })) => {}
            Err(e) => panic!("issuing `{id}` failed: {e}"),
        }
        let stored = reader.get(&id).await.unwrap().unwrap();
        assert_eq!(stored.state, GrantState::Active);
        grants.push((id, selector));
    }
    grants
}

/// Runs one Act call per grant, all at once; returns every result.
async fn act_on_all(
    store: &Arc<RedisApprovalStore>,
    backend: &FakeBackend,
    grants: &[(ApprovalId, String)],
) -> Vec<ActResult> {
    let operations = Arc::new(InMemoryOperationStore::new());
    let act = Arc::new(act_over(
        store.clone(),
        backend,
        &operations,
        RetryPolicy::default(),
    ));
    let tasks: Vec<_> = grants
        .iter()
        .map(|(id, selector)| {
            let (act, call) = (act.clone(), call(id.as_str(), selector));
            tokio::spawn(async move { act.execute_tool_call(&call).await })
        })
        .collect();
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        results.push(task.await.unwrap());
    }
    results
}

/// How many grants are consumed, read through `store`; `None` while the
/// store does not answer every read.
async fn consumed(store: &RedisApprovalStore, grants: &[(ApprovalId, String)]) -> Option<usize> {
    let mut n = 0;
    for (id, _) in grants {
        let stored = store.get(id).await.ok()?.unwrap();
        if matches!(stored.state, GrantState::Consumed { .. }) {
            n += 1;
        }
    }
    Some(n)
}

/// Waits until the store answers and no grant reads consumed, or `limit`
/// passes; returns the count then.
async fn consumed_once_settled(
    store: &RedisApprovalStore,
    grants: &[(ApprovalId, String)],
    limit: Duration,
) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let n = consumed(store, grants).await;
        match n {
            Some(0) => return 0,
            Some(n) if Instant::now() > deadline => return n,
            None if Instant::now() > deadline => panic!("the store never answered again"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Every result is `STORE_UNAVAILABLE`; returns how many messages say the
/// approval is still usable and how many that it may be used up.
fn count_messages(results: &[ActResult]) -> (usize, usize) {
    let (mut usable, mut maybe_used) = (0, 0);
    for result in results {
        let json = result.to_json();
        assert_eq!(result.code(), OutcomeCode::StoreUnavailable, "{json}");
        let message = json["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("approval store is unavailable; nothing was performed; "));
        if message.ends_with("the approval is still usable") {
            usable += 1;
        } else if message.ends_with("the approval may have been used up") {
            maybe_used += 1;
        } else {
            panic!("unexpected message: {message}");
        }
    }
    (usable, maybe_used)
}

/// Once the grants are usable again, one more call each performs every one
/// of them exactly once.
async fn each_performs_once(
    store: &Arc<RedisApprovalStore>,
    grants: &[(ApprovalId, String)],
) -> usize {
    let backend = FakeBackend::new();
    let results = act_on_all(store, &backend, grants).await;
    let ok = results
        .iter()
        .filter(|r| r.code() == OutcomeCode::Ok)
        .count();
    let others: Vec<_> = results
        .iter()
        .filter(|r| r.code() != OutcomeCode::Ok)
        .map(|r| r.to_json()["error"]["message"].clone())
        .collect();
    assert_eq!(ok, grants.len(), "every grant is usable again: {others:?}");
    assert_eq!(backend.len(), grants.len());
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_paused_past_the_timeout_leaves_no_grant_consumed_without_an_action() {
    const GRANTS: usize = 24;
    let server = RedisServer::start_with(&AOF_ALWAYS);
    let store = Arc::new(
        RedisApprovalStore::connect(
            RedisStoreOptions::single(server.url())
                .key_prefix(support::fresh_prefix("paused"))
                .command_timeout(Duration::from_millis(250))
                .connect_timeout(Duration::from_secs(5)),
        )
        .await
        .unwrap(),
    );
    let grants = issue(&store, GRANTS).await;
    let backend = FakeBackend::new();

    let pid = server_pid(&server);
    signal(pid, "STOP");
    let paused_at = Instant::now();
    let results = act_on_all(&store, &backend, &grants).await;
    let answered_after = paused_at.elapsed();
    // Resume 3 s after the pause, and never before every call answered: then
    // each gave up while the server was stopped, however slowly the calls
    // ran on a busy machine.
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(paused_at.elapsed())).await;
    signal(pid, "CONT");

    // Every call gave up while the server was stopped, and performed nothing.
    assert!(backend.is_empty());
    let (usable, maybe_used) = count_messages(&results);
    assert_eq!(usable + maybe_used, GRANTS);

    // The consumes were applied when the server resumed; so were the
    // abandons sent after them on the same connection.
    let left = consumed_once_settled(&store, &grants, Duration::from_secs(20)).await;
    eprintln!(
        "paused 3 s, command timeout 250 ms: {GRANTS} calls, all STORE_UNAVAILABLE after \
         {} ms; messages: {usable} still usable, {maybe_used} may be used up; grants left \
         consumed without an action once the server answered: {left} of {GRANTS}",
        answered_after.as_millis()
    );
    assert_eq!(left, 0, "grants left consumed without an action");
    each_performs_once(&store, &grants).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_wait_leaves_no_grant_consumed_without_an_action() {
    const GRANTS: usize = 64;
    let primary = RedisServer::start_with(&AOF_ALWAYS);
    let port = primary.port().to_string();
    let mut replica_args = AOF_ALWAYS.to_vec();
    replica_args.extend(["--replicaof", "127.0.0.1", port.as_str()]);
    let mut replica = RedisServer::start_with(&replica_args);
    wait_for_replica(&primary);
    let prefix = support::fresh_prefix("unconfirmed");
    let store = Arc::new(
        RedisApprovalStore::connect(
            RedisStoreOptions::single(primary.url())
                .key_prefix(prefix.clone())
                .command_timeout(Duration::from_millis(250))
                .durability(Durability::new(1, Duration::from_millis(100))),
        )
        .await
        .unwrap(),
    );
    // Reads on a connection of their own: WAIT holds the store's connection
    // for up to 100 ms per write.
    let reader = RedisApprovalStore::connect(
        RedisStoreOptions::single(primary.url())
            .key_prefix(prefix)
            .command_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap();
    let grants = issue_applied(&store, &reader, GRANTS).await;
    wait_for_replica(&primary);

    // The replica stops: every write from now on is applied on the primary
    // and answered DurabilityUnconfirmed.
    replica.kill();
    let backend = FakeBackend::new();
    let started = Instant::now();
    let results = act_on_all(&store, &backend, &grants).await;
    let answered_after = started.elapsed();
    assert!(backend.is_empty());
    let (usable, maybe_used) = count_messages(&results);
    assert_eq!(usable + maybe_used, GRANTS);
    let left = consumed_once_settled(&reader, &grants, Duration::from_secs(60)).await;
    eprintln!(
        "WAIT unconfirmed (replica stopped, durability 1 replica / 100 ms): {GRANTS} calls, \
         all STORE_UNAVAILABLE after {} ms; messages: {usable} still usable, {maybe_used} may \
         be used up; grants left consumed without an action on the primary: {left} of \
         {GRANTS} ({} ms after the calls began)",
        answered_after.as_millis(),
        started.elapsed().as_millis()
    );
    assert_eq!(left, 0, "grants left consumed without an action");
    // The calls timed out behind WAITs on a connection that kept answering:
    // the client was kept, so the abandons queued on it were not dropped.
    let debug = format!("{store:?}");
    assert!(debug.contains("client_replacements: 0"), "{debug}");

    // With the replica back, and once the store's own connection is past the
    // WAITs still queued on it, each grant performs exactly once.
    replica.restart();
    wait_for_replica(&primary);
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.get(&grants[0].0).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the store's connection never drained"
        );
    }
    each_performs_once(&store, &grants).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_abandon_script_is_reloaded_after_a_script_flush_and_parsed_strictly() {
    let server = support::shared_server();
    let store = support::store_on(server, "abandon-noscript").await;
    let grants = issue(&store, 1).await;
    let (id, binding) = {
        let stored = store.get(&grants[0].0).await.unwrap().unwrap();
        (stored.approval.id.clone(), stored.approval.binding())
    };
    let attempt = AttemptId::generate().unwrap();
    let t = now();
    assert_eq!(
        store
            .consume_once(&id, &binding, t, &attempt)
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    let mut conn = server.conn();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    assert_eq!(
        store.abandon(&id, &attempt, t).await.unwrap(),
        AbandonOutcome::Usable { restored: true }
    );
    let cached: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(store.script_sha(GrantScript::Abandon))
        .query(&mut conn)
        .unwrap();
    assert_eq!(cached, [true]);
    // The record holds the attempt in `abandoned`; its late consume is refused.
    let abandoned = support::record_text(&mut conn, &support::grant_key(&store, &id), "abandoned");
    assert_eq!(abandoned, attempt.as_str());
    assert_eq!(
        store
            .consume_once(&id, &binding, t, &attempt)
            .await
            .unwrap(),
        ConsumeOutcome::Stale(StaleReason::Abandoned)
    );
    // A damaged list is an error, never an outcome.
    support::set_field(
        &mut conn,
        &support::grant_key(&store, &id),
        "abandoned",
        Some(b"att_1  att_2"),
    );
    assert!(matches!(
        store.abandon(&id, &attempt, t).await,
        Err(StoreError::Corrupt { .. })
    ));
    assert!(matches!(
        store
            .consume_once(&id, &binding, t, &AttemptId::generate().unwrap())
            .await,
        Err(StoreError::Corrupt { .. })
    ));
}
