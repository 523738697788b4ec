//! A Redis Cluster master killed (SIGKILL, no `WAIT`) under load: calls on
//! its slots wait for its replica's promotion and succeed, and no grant is
//! ever performed twice.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use countersign_act_tool::RetryPolicy;
use countersign_approval_core::{ApprovalStore, GrantState, OutcomeCode};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use countersign_store_redis::{Durability, RedisApprovalStore, RedisStoreOptions};
use support::{RedisCluster, act_over, call, fresh_prefix, grant, now};

const GRANTS: usize = 240;
const TASKS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_under_load_fails_no_call_while_its_replica_is_promoted() {
    let mut cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with_replicas(1))
        .await
        .unwrap();
    let prefix = fresh_prefix("failover");
    // Grants are issued through a store that waits for a replica, so that
    // the kill loses none of them; the load goes through a store with the
    // default options, which never waits.
    let issuer = RedisApprovalStore::connect(
        RedisStoreOptions::cluster(cluster.urls())
            .key_prefix(prefix.clone())
            .durability(Durability::new(1, Duration::from_secs(2)))
            .allow_non_durable_persistence(),
    )
    .await
    .unwrap();
    let store = Arc::new(
        RedisApprovalStore::connect(
            RedisStoreOptions::cluster(cluster.urls())
                .key_prefix(prefix)
                .allow_non_durable_persistence(),
        )
        .await
        .unwrap(),
    );
    let t0 = now();
    let mut ids = Vec::new();
    for i in 0..GRANTS {
        let approval = grant(&format!("a#f{i}"), Duration::from_secs(600), t0).await;
        ids.push(approval.id.clone());
        issuer.issue(approval).await.unwrap();
    }
    // Every grant lives in the actor's slot: its primary is the one killed.
    let key = store.grant_key(&support::actor(), &ids[0]);
    let victim = cluster.primary_of(0, &key).unwrap();
    let asker = (victim + 1) % cluster.nodes.len();

    let backend = FakeBackend::new();
    let operations = Arc::new(InMemoryOperationStore::new());
    let act = Arc::new(act_over(
        store.clone(),
        &backend,
        &operations,
        RetryPolicy::default(),
    ));
    // The kill is forced into the load: half the tasks wait at their
    // share's middle until the primary is dead, the others run on through
    // the kill; it happens once a quarter of the calls have ended.
    let done = Arc::new(AtomicUsize::new(0));
    let (killed_tx, killed) = tokio::sync::watch::channel(false);
    let (quarter_tx, mut quarter) = tokio::sync::watch::channel(false);
    let quarter_tx = Arc::new(quarter_tx);
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (act, done, quarter_tx) = (act.clone(), done.clone(), quarter_tx.clone());
        let mut killed = killed.clone();
        let mine: Vec<(usize, String)> = ids
            .iter()
            .enumerate()
            .filter(|(i, _)| i % TASKS == task)
            .map(|(i, id)| (i, id.as_str().to_owned()))
            .collect();
        let waits_at = (task % 2 == 0).then_some(mine.len() / 2);
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            for (k, (i, id)) in mine.into_iter().enumerate() {
                if waits_at == Some(k) {
                    killed.wait_for(|k| *k).await.unwrap();
                }
                let started = Instant::now();
                let result = act.execute_tool_call(&call(&id, &format!("a#f{i}"))).await;
                results.push((id, result.code(), started.elapsed()));
                if done.fetch_add(1, Ordering::SeqCst) + 1 == GRANTS / 4 {
                    quarter_tx.send_replace(true);
                }
            }
            results
        }));
    }
    quarter.wait_for(|q| *q).await.unwrap();
    let mut victim_node = std::mem::replace(
        &mut cluster.nodes[victim],
        tokio::task::spawn_blocking(support::RedisServer::start)
            .await
            .unwrap(),
    );
    let killed_at = Instant::now();
    tokio::task::spawn_blocking(move || victim_node.kill())
        .await
        .unwrap();
    killed_tx.send_replace(true);
    // The promotion, as a surviving node sees it.
    let promoted = {
        let (cluster, key) = (&cluster, key.clone());
        tokio::task::block_in_place(|| {
            loop {
                let mut conn = cluster.nodes[asker].conn();
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap();
                let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut conn).unwrap();
                let failed = nodes.lines().any(|l| l.contains("master,fail "));
                let owner = cluster.primary_of(asker, &key);
                if info.contains("cluster_state:ok") && failed && owner.is_some_and(|o| o != victim)
                {
                    break killed_at.elapsed();
                }
                assert!(
                    killed_at.elapsed() < Duration::from_secs(60),
                    "no promotion: {nodes}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let mut codes: HashMap<OutcomeCode, usize> = HashMap::new();
    let mut slowest = Duration::ZERO;
    let mut ok_ids = Vec::new();
    for task in tasks {
        for (id, code, took) in task.await.unwrap() {
            *codes.entry(code).or_default() += 1;
            slowest = slowest.max(took);
            if code == OutcomeCode::Ok {
                ok_ids.push(id);
            }
        }
    }
    let failures = GRANTS - codes.get(&OutcomeCode::Ok).copied().unwrap_or(0);
    eprintln!(
        "failover: promoted {promoted:?} after the kill; {GRANTS} calls: {codes:?}; \
         {failures} failed; slowest call {slowest:?}"
    );
    // Never two performs of one grant; every `ok` performed exactly once.
    let mut performed: HashMap<String, usize> = HashMap::new();
    for record in backend.records() {
        *performed
            .entry(record.approval_id.as_str().to_owned())
            .or_default() += 1;
    }
    assert!(performed.values().all(|n| *n == 1), "{performed:?}");
    assert_eq!(performed.len(), ok_ids.len());
    assert!(ok_ids.iter().all(|id| performed.contains_key(id)));
    // The new primary holds each of them consumed, unless the kill lost
    // that consume before it was replicated (no `WAIT`): count those.
    let mut lost = 0;
    for id in &ids {
        if performed.contains_key(id.as_str()) {
            let grant = store.get(id).await.unwrap().unwrap();
            if !matches!(grant.state, GrantState::Consumed { .. }) {
                lost += 1;
            }
        }
    }
    eprintln!("failover: {lost} consumes lost with the killed primary");
    for record in operations.records().unwrap() {
        if record.outcome != OutcomeCode::Ok {
            eprintln!("failover: reason {}", record.reason);
        }
    }
    assert_eq!(failures, 0, "{codes:?}");
}
