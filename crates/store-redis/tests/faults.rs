//! Faults: the server killed with SIGKILL under load, a restart from an
//! append-only file, the script cache flushed under load, and a consume
//! whose reply is lost.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use countersign_act_tool::RetryPolicy;
use countersign_approval_core::{
    Approval, ApprovalStore, AttemptId, ConsumeOutcome, GrantState, OutcomeCode, StaleReason,
    StoreError,
};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use countersign_store_redis::{ConnectError, GrantScript, RedisApprovalStore, RedisStoreOptions};
use support::{RedisServer, ReplyDropper, act_over, call, grant, now};
use tokio::sync::Notify;

const TTL: Duration = Duration::from_secs(600);

/// SIGKILL (nothing flushed that was not already), then a restart on the same data dir.
async fn sigkill_and_restart(mut server: RedisServer) -> RedisServer {
    tokio::task::spawn_blocking(move || {
        server.kill();
        server.restart();
        server
    })
    .await
    .unwrap()
}

fn fresh_attempt() -> AttemptId {
    AttemptId::generate().unwrap()
}
const AOF_ALWAYS: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

async fn fast_store(url: String, tag: &str, prefix: Option<String>) -> RedisApprovalStore {
    RedisApprovalStore::connect(
        RedisStoreOptions::single(url)
            .key_prefix(prefix.unwrap_or_else(|| support::fresh_prefix(tag)))
            .command_timeout(Duration::from_millis(300))
            .connect_timeout(Duration::from_secs(2))
            .allow_non_durable_persistence(),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_ends_every_call_ok_or_store_unavailable() {
    let mut server = RedisServer::start_with(&AOF_ALWAYS);
    let store = Arc::new(fast_store(server.url(), "sigkill", None).await);
    let t0 = now();
    let mut ids = Vec::new();
    for i in 0..240 {
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

    // 8 tasks walk their share of the grants, one Act call each, a little
    // apart. The kill is forced into the burst: half the tasks wait half-way
    // until the server is dead (the others run on through the kill), and it
    // restarts only once an Act call and a direct read have failed against
    // it, however the threads are scheduled.
    let done = Arc::new(AtomicUsize::new(0));
    let (killed_tx, killed) = tokio::sync::watch::channel(false);
    let (call_hit, read_hit) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let mut tasks = Vec::new();
    for task in 0..8 {
        let (act, done, call_hit) = (act.clone(), done.clone(), call_hit.clone());
        let mut killed = killed.clone();
        let mine: Vec<(usize, String)> = ids
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 8 == task)
            .map(|(i, id)| (i, id.clone()))
            .collect();
        let waits_at = (task % 2 == 0).then_some(mine.len() / 2);
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            for (k, (i, id)) in mine.into_iter().enumerate() {
                if waits_at == Some(k) {
                    killed.wait_for(|k| *k).await.unwrap();
                }
                let result = act.execute_tool_call(&call(&id, &format!("a#k{i}"))).await;
                if result.code() == OutcomeCode::StoreUnavailable {
                    // Kept when nobody waits yet.
                    call_hit.notify_one();
                }
                results.push((id, result.code()));
                done.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(8)).await;
            }
            results
        }));
    }
    // Alongside, direct store calls: each ends in an outcome or a retryable
    // store error, never anything else.
    // It reads on until it has failed once, so the restart never waits for a
    // reader that already stopped.
    let reader = {
        let (store, done, read_hit) = (store.clone(), done.clone(), read_hit.clone());
        let ids: Vec<String> = ids.clone();
        tokio::spawn(async move {
            let mut errors = 0;
            let mut i = 0;
            while done.load(Ordering::SeqCst) < 240 || errors == 0 {
                let id = countersign_approval_core::ApprovalId::parse(&ids[i % ids.len()]).unwrap();
                match store.get(&id).await {
                    Ok(grant) => assert!(grant.is_some()),
                    Err(e @ (StoreError::Unavailable { .. } | StoreError::Timeout { .. })) => {
                        assert!(e.is_retryable());
                        errors += 1;
                        read_hit.notify_one();
                    }
                    Err(other) => panic!("unexpected store error: {other}"),
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            errors
        })
    };
    // Kill the server a third of the way in; restart it from its AOF later.
    while done.load(Ordering::SeqCst) < 80 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill();
    let killed_at = done.load(Ordering::SeqCst);
    killed_tx.send_replace(true);
    call_hit.notified().await;
    read_hit.notified().await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();

    let mut ok = HashSet::new();
    let mut unavailable_ids = Vec::new();
    for task in tasks {
        // A panic in a task would surface here as a join error.
        for (id, code) in task.await.expect("no task panicked") {
            match code {
                OutcomeCode::Ok => assert!(ok.insert(id)),
                OutcomeCode::StoreUnavailable => unavailable_ids.push(id),
                other => panic!("{id}: unexpected {other}"),
            }
        }
    }
    let unavailable = unavailable_ids.len();
    let read_errors = reader.await.expect("the reader did not panic");
    eprintln!(
        "sigkill: killed after {killed_at} calls; {} ok, {unavailable} store unavailable; \
         {read_errors} direct reads failed",
        ok.len()
    );
    assert!(read_errors > 0, "the kill hit some direct reads");
    assert!(ok.len() >= 80, "calls before the kill succeeded");
    assert!(unavailable > 0, "the kill hit some calls");
    assert_eq!(ok.len() + unavailable, ids.len());

    // No ok without a record, and no record without an ok.
    let performed: HashSet<String> = backend
        .records()
        .iter()
        .map(|r| r.approval_id.as_str().to_owned())
        .collect();
    assert_eq!(backend.len(), ok.len());
    assert_eq!(performed, ok);

    // Every grant consumed by an ok call before the kill is still consumed after the restart.
    let fresh = fast_store(server.url(), "sigkill", Some(store.prefix().to_owned())).await;
    for id in &ok {
        let id = countersign_approval_core::ApprovalId::parse(id).unwrap();
        let grant = fresh.get(&id).await.unwrap().unwrap();
        assert!(matches!(grant.state, GrantState::Consumed { .. }), "{id}");
    }
    // A call that answered STORE_UNAVAILABLE performed nothing; its grant is
    // used up only if its consume was applied and the give-back could not
    // reach the server in time (the figure docs/redis.md quotes).
    let mut burned = 0;
    for id in &unavailable_ids {
        let id = countersign_approval_core::ApprovalId::parse(id).unwrap();
        let grant = fresh.get(&id).await.unwrap().unwrap();
        if matches!(grant.state, GrantState::Consumed { .. }) {
            burned += 1;
        }
    }
    eprintln!(
        "sigkill: {burned} of {unavailable} store-unavailable grants left consumed without an action"
    );
    drop(server);
}

/// Long enough for a server doing `appendfsync always` on a saturated
/// machine: nothing in the test waits for a timeout, so a short one only
/// turns a slow fsync into a failure.
const UNDER_LOAD: Duration = Duration::from_secs(10);

/// How long Redis may postpone writing its append-only file under
/// `appendfsync everysec` while the previous fsync is still running (a slow
/// disk), plus a margin for its once-every-100-ms retry: a write
/// acknowledged longer ago than this is in the file.
const EVERYSEC_POSTPONE: Duration = Duration::from_secs(4);

/// With an append-only file, a SIGKILL of redis loses no acknowledged write
/// under `appendfsync always` or `no`: redis writes the AOF before it
/// replies (`appendfsync` only decides when the OS is told to flush, which
/// matters for a crash of the host). Under `everysec`, Redis postpones that
/// write by up to 2 s while a slow disk is still busy with the previous
/// fsync, so writes acknowledged in those last 2 s may be lost: what the
/// docs promise for it is a bounded loss. So the consumes are made in two
/// batches, the first more than [`EVERYSEC_POSTPONE`] before the kill:
/// the first batch always survives exactly; of the second, each grant
/// reads back either as acknowledged or as it was before (never anything
/// else), and the lost ones are counted, which must be 0 unless
/// `everysec`.
async fn consumes_survive_sigkill_and_restart(appendfsync: &str) {
    let bounded_loss = appendfsync == "everysec";
    let server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", appendfsync]);
    let store = RedisApprovalStore::connect(
        RedisStoreOptions::single(server.url())
            .key_prefix(support::fresh_prefix("aof"))
            .command_timeout(UNDER_LOAD),
    )
    .await
    .expect("an append-only server is accepted by default");
    let t0 = now();
    let mut grants = Vec::new();
    for i in 0..60 {
        let approval = grant(&format!("a#aof{i}"), TTL, t0).await;
        store.issue(approval.clone()).await.unwrap();
        grants.push(approval);
    }
    let mut attempts = Vec::new();
    let consume = async |approval: &Approval| {
        let attempt = AttemptId::generate().unwrap();
        assert_eq!(
            store
                .consume_once(&approval.id, &approval.binding(), t0, &attempt)
                .await
                .unwrap(),
            ConsumeOutcome::Consumed { replay: false }
        );
        attempt
    };
    for approval in &grants[..20] {
        attempts.push(consume(approval).await);
    }
    store.revoke(&grants[59].id).await.unwrap();
    if bounded_loss {
        tokio::time::sleep(EVERYSEC_POSTPONE).await;
    }
    for approval in &grants[20..40] {
        attempts.push(consume(approval).await);
    }
    // No shutdown, no flush: SIGKILL right after the last reply.
    let server = sigkill_and_restart(server).await;

    let after = RedisApprovalStore::connect(
        RedisStoreOptions::single(server.url())
            .key_prefix(store.prefix())
            .command_timeout(UNDER_LOAD),
    )
    .await
    .unwrap();
    let mut lost = 0;
    for (n, (approval, attempt)) in grants.iter().zip(&attempts).enumerate() {
        let consumed = GrantState::Consumed {
            at: t0,
            by: attempt.clone(),
        };
        let state = after.get(&approval.id).await.unwrap().unwrap().state;
        if n >= 20 && state == GrantState::Active {
            lost += 1;
            continue;
        }
        assert_eq!(state, consumed, "grant {n}");
        assert_eq!(
            after
                .consume_once(&approval.id, &approval.binding(), t0, &fresh_attempt())
                .await
                .unwrap(),
            ConsumeOutcome::Stale(StaleReason::Consumed)
        );
        assert_eq!(
            after
                .consume_once(&approval.id, &approval.binding(), t0, attempt)
                .await
                .unwrap(),
            ConsumeOutcome::Consumed { replay: true }
        );
    }
    eprintln!(
        "appendfsync {appendfsync}: {lost} of 20 consumes acknowledged in the last batch lost by a SIGKILL"
    );
    if !bounded_loss {
        assert_eq!(
            lost, 0,
            "appendfsync {appendfsync} lost acknowledged consumes"
        );
    }
    for approval in &grants[40..59] {
        assert_eq!(
            after.get(&approval.id).await.unwrap().unwrap().state,
            GrantState::Active
        );
    }
    assert_eq!(
        after.get(&grants[59].id).await.unwrap().unwrap().state,
        GrantState::Revoked
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumes_survive_sigkill_and_restart_with_appendfsync_always() {
    consumes_survive_sigkill_and_restart("always").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumes_survive_sigkill_and_restart_with_appendfsync_everysec() {
    consumes_survive_sigkill_and_restart("everysec").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumes_survive_sigkill_and_restart_with_appendfsync_no() {
    consumes_survive_sigkill_and_restart("no").await;
}

/// Grants in the RDB resurrection test.
const RESURRECTED: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_append_only_file_a_restart_brings_consumed_grants_back() {
    // `appendonly no`, `save ""`: the issue's setting. By default the store
    // refuses this server.
    let server = RedisServer::start();
    let refused = RedisApprovalStore::connect(RedisStoreOptions::single(server.url())).await;
    assert!(
        matches!(refused, Err(ConnectError::NotDurable { .. })),
        "{refused:?}"
    );

    // Under the opt-in: issue, one manual SAVE, consume every grant, SIGKILL, restart.
    let store = fast_store(server.url(), "rdb", None).await;
    let t0 = now();
    let mut grants = Vec::new();
    for i in 0..RESURRECTED {
        let approval = grant(&format!("a#rdb{i}"), TTL, t0).await;
        store.issue(approval.clone()).await.unwrap();
        grants.push(approval);
    }
    let _: () = redis::cmd("SAVE").query(&mut server.conn()).unwrap();
    for approval in &grants {
        assert_eq!(
            store
                .consume_once(&approval.id, &approval.binding(), t0, &fresh_attempt())
                .await
                .unwrap(),
            ConsumeOutcome::Consumed { replay: false }
        );
    }
    let server = sigkill_and_restart(server).await;

    // Every acknowledged consume was undone: each grant is consumable again.
    let after = fast_store(server.url(), "rdb", Some(store.prefix().to_owned())).await;
    let mut consumable_again = 0;
    for approval in &grants {
        let outcome = after
            .consume_once(
                &approval.id,
                &approval.binding(),
                t0,
                &AttemptId::generate().unwrap(),
            )
            .await
            .unwrap();
        if outcome == (ConsumeOutcome::Consumed { replay: false }) {
            consumable_again += 1;
        }
    }
    eprintln!(
        "rdb resurrection: {consumable_again} of {RESURRECTED} consumed grants consumable again"
    );
    assert_eq!(consumable_again, RESURRECTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_under_load_is_recovered_without_errors() {
    let server = support::shared_server();
    let store = Arc::new(fast_store(server.url(), "flush", None).await);
    let t0 = now();
    let mut ids = Vec::new();
    for _ in 0..400 {
        let approval = grant("a#flush", TTL, t0).await;
        ids.push(approval.id.as_str().to_owned());
        store.issue(approval).await.unwrap();
    }
    let backend = FakeBackend::new();
    let operations = Arc::new(InMemoryOperationStore::new());
    // No retries: an error from the store would surface as STORE_UNAVAILABLE.
    let act = Arc::new(act_over(
        store.clone(),
        &backend,
        &operations,
        RetryPolicy::no_retry(),
    ));

    let stop = Arc::new(AtomicBool::new(false));
    let flushes = Arc::new(AtomicUsize::new(0));
    let flusher = {
        let (stop, flushes) = (stop.clone(), flushes.clone());
        let mut conn = server.conn();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
                flushes.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };
    let ids = Arc::new(ids);
    let mut tasks = Vec::new();
    for task in 0..8 {
        let (act, ids, store) = (act.clone(), ids.clone(), store.clone());
        tasks.push(tokio::spawn(async move {
            let mut codes = Vec::new();
            // Two contenders per grant, plus reads.
            for (i, id) in ids.iter().enumerate() {
                if i % 4 != task % 4 {
                    continue;
                }
                let result = act.execute_json(&call(id, "a#flush")).await;
                codes.push(result["error"]["code"].as_str().unwrap_or("ok").to_owned());
                let id = countersign_approval_core::ApprovalId::parse(id).unwrap();
                store.get(&id).await.expect("reads never fail either");
            }
            codes
        }));
    }
    let mut ok = 0;
    let mut stale = 0;
    for task in tasks {
        for code in task.await.unwrap() {
            match code.as_str() {
                "ok" => ok += 1,
                "APPROVAL_STALE" => stale += 1,
                other => panic!("an error surfaced: {other}"),
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    flusher.join().unwrap();
    eprintln!(
        "script flush: {} flushes, {ok} ok, {stale} stale",
        flushes.load(Ordering::SeqCst)
    );
    assert!(flushes.load(Ordering::SeqCst) > 10);
    assert_eq!(ok, 400);
    assert_eq!(stale, 400);
    assert_eq!(backend.len(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_consume_reply_is_a_replay_when_retried() {
    let server = support::shared_server();
    let proxy = ReplyDropper::start(server.port());
    let prefix = support::fresh_prefix("lost");
    let through_proxy = Arc::new(
        RedisApprovalStore::connect(
            RedisStoreOptions::single(proxy.url())
                .allow_non_durable_persistence()
                .key_prefix(prefix.clone())
                .command_timeout(Duration::from_millis(500)),
        )
        .await
        .unwrap(),
    );
    let direct = fast_store(server.url(), "lost", Some(prefix)).await;
    let consume_sha = through_proxy.script_sha(GrantScript::Consume).to_owned();
    let t0 = now();

    // Store level: the consume is applied, its reply never arrives.
    let approval = grant("a#lost", TTL, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    through_proxy.issue(approval).await.unwrap();
    let attempt = AttemptId::generate().unwrap();
    proxy.arm(&consume_sha);
    let lost = through_proxy
        .consume_once(&id, &binding, t0, &attempt)
        .await
        .unwrap_err();
    assert!(
        matches!(
            lost,
            StoreError::Unavailable { .. } | StoreError::Timeout { .. }
        ),
        "{lost}"
    );
    assert!(lost.is_retryable());
    assert_eq!(proxy.dropped(), 1);
    assert_eq!(
        direct.get(&id).await.unwrap().unwrap().state,
        GrantState::Consumed {
            at: t0,
            by: attempt.clone()
        }
    );
    assert_eq!(
        through_proxy
            .consume_once(&id, &binding, t0, &attempt)
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: true }
    );

    // Through Act: the first try's reply is lost, its retry (same attempt
    // id) is a replay, and the action is performed exactly once.
    let backend = FakeBackend::new();
    let operations = Arc::new(InMemoryOperationStore::new());
    let act = act_over(
        through_proxy.clone(),
        &backend,
        &operations,
        RetryPolicy::default(),
    );
    let approval = grant("a#lost-act", TTL, now()).await;
    let id = approval.id.clone();
    through_proxy.issue(approval).await.unwrap();
    proxy.arm(&consume_sha);
    let result = act.execute_json(&call(id.as_str(), "a#lost-act")).await;
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(proxy.dropped(), 2, "the first try's reply was dropped");
    assert_eq!(backend.len(), 1);
    assert_eq!(backend.records()[0].approval_id, id);
    let again = act.execute_json(&call(id.as_str(), "a#lost-act")).await;
    assert_eq!(again["error"]["code"], "APPROVAL_STALE");
    assert_eq!(backend.len(), 1);
}

/// Calls of the scripts (`EVALSHA` and `EVAL`, refused ones included) the
/// server ran since its statistics were last reset: the store's round
/// trips, counted by the server itself.
fn script_calls(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .filter(|line| line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:"))
        .flat_map(|line| line.split([':', ',']))
        .filter_map(|field| {
            let (name, value) = field.split_once('=')?;
            ["calls", "rejected_calls"]
                .contains(&name)
                .then(|| value.parse::<u64>().unwrap())
        })
        .sum()
}

fn config_set(conn: &mut redis::Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(conn)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_memory_is_refused_at_once_and_the_grant_stays_usable() {
    // A server of its own: its memory limit and statistics are the test's.
    let server = RedisServer::start();
    let store = Arc::new(fast_store(server.url(), "oom", None).await);
    let mut admin = server.conn();
    let t0 = now();
    let direct = grant("a#oom-direct", TTL, t0).await;
    let through_act = grant("a#oom-act", TTL, t0).await;
    let (direct_id, binding) = (direct.id.clone(), direct.binding());
    let act_id = through_act.id.clone();
    store.issue(direct).await.unwrap();
    store.issue(through_act).await.unwrap();
    let keys = |id| {
        support::grant_keys(&store, id)
            .into_iter()
            .map(|(_, key)| key)
            .collect::<Vec<_>>()
    };
    let dump = |conn: &mut redis::Connection, keys: &[String]| -> Vec<Option<Vec<u8>>> {
        keys.iter()
            .map(|key| redis::cmd("DUMP").arg(key).query(conn).unwrap())
            .collect()
    };
    let (direct_keys, act_keys) = (keys(&direct_id), keys(&act_id));
    let (direct_before, act_before) = (dump(&mut admin, &direct_keys), dump(&mut admin, &act_keys));

    // Every byte in use is over a 1-byte limit: each write is refused.
    config_set(&mut admin, "maxmemory", "1");

    // Store level: a refusal that says why, that is not worth repeating,
    // and that wrote nothing (the script's first write was the one refused).
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut admin)
        .unwrap();
    let attempt = fresh_attempt();
    let refused = store
        .consume_once(&direct_id, &binding, now(), &attempt)
        .await
        .unwrap_err();
    assert!(matches!(refused, StoreError::Rejected { .. }), "{refused}");
    assert!(!refused.is_retryable(), "{refused}");
    assert!(refused.to_string().contains("out of memory"), "{refused}");
    assert!(refused.to_string().contains("`maxmemory`"), "{refused}");
    assert_eq!(script_calls(&mut admin), 1, "one round trip, no retry");
    let gave_back = store
        .abandon(&direct_id, &attempt, now())
        .await
        .unwrap_err();
    assert!(
        matches!(gave_back, StoreError::Rejected { .. }),
        "{gave_back}"
    );
    let issued = store
        .issue(grant("a#oom-new", TTL, now()).await)
        .await
        .unwrap_err();
    assert!(
        matches!(&issued, countersign_approval_core::IssueError::Store(e) if !e.is_retryable()),
        "{issued}"
    );
    // Reads still answer.
    assert_eq!(
        store.get(&direct_id).await.unwrap().unwrap().state,
        GrantState::Active
    );
    assert_eq!(dump(&mut admin, &direct_keys), direct_before);

    // Through Act with its default retries (3 tries, then a give-back
    // retried for up to its 1 s abandon timeout): one consume, one
    // give-back, each refused at once; nothing performed, nothing written.
    let backend = FakeBackend::new();
    let operations = Arc::new(InMemoryOperationStore::new());
    let act = act_over(store.clone(), &backend, &operations, RetryPolicy::default());
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut admin)
        .unwrap();
    let started = std::time::Instant::now();
    let result = act
        .execute_tool_call(&call(act_id.as_str(), "a#oom-act"))
        .await;
    let took = started.elapsed();
    let calls = script_calls(&mut admin);
    eprintln!("out of memory: one refused Act call took {took:?}, {calls} script calls");
    assert_eq!(result.code(), OutcomeCode::StoreUnavailable);
    assert_eq!(calls, 2, "one consume and one give-back, neither retried");
    assert!(backend.is_empty());
    assert_eq!(dump(&mut admin, &act_keys), act_before);

    // Memory freed: both grants are usable, each exactly once.
    config_set(&mut admin, "maxmemory", "0");
    let result = act
        .execute_tool_call(&call(act_id.as_str(), "a#oom-act"))
        .await;
    assert!(result.is_ok(), "{}", result.to_json());
    assert_eq!(backend.len(), 1);
    let again = act
        .execute_tool_call(&call(act_id.as_str(), "a#oom-act"))
        .await;
    assert_eq!(again.code(), OutcomeCode::ApprovalStale);
    assert_eq!(
        store
            .consume_once(&direct_id, &binding, now(), &fresh_attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}
