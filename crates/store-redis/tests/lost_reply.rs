//! A consume whose reply is lost (the server ran the script, the client
//! never heard) ends in `ok` with exactly one action, on a single server and
//! on Redis Cluster: neither client resends a script by itself, and the
//! caller's retry with the same attempt id answers a replay.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use countersign_act_tool::RetryPolicy;
use countersign_approval_core::{ApprovalStore, AttemptId, ConsumeOutcome, GrantState, StoreError};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use countersign_store_redis::{GrantScript, RedisApprovalStore, RedisStoreOptions};
use support::{ProxiedCluster, RedisServer, ReplyDropper, act_over, call, grant, now};

const TTL: Duration = Duration::from_secs(600);
/// Calls through Act, each with one applied consume reply dropped.
const ACT_CALLS: usize = 50;
/// Direct `consume_once` calls, each with one applied reply dropped.
const DIRECT_CALLS: usize = 20;

/// The options of a store behind reply-dropping proxies (in front of
/// throw-away servers without persistence).
fn through_proxy(options: RedisStoreOptions) -> RedisStoreOptions {
    options
        .key_prefix(support::fresh_prefix("lost"))
        .command_timeout(Duration::from_secs(1))
        .allow_non_durable_persistence()
}

/// Drops one applied consume reply per call and checks: a direct call
/// fails retryably and its retry (same attempt) is a replay; through Act
/// every call is `ok` with exactly one action.
async fn lost_replies_end_in_ok(
    store: Arc<RedisApprovalStore>,
    arm: impl Fn(&str, &str),
    disarm: impl Fn(),
    dropped: impl Fn() -> usize,
) {
    let consume_sha = store.script_sha(GrantScript::Consume).to_owned();
    let t0 = now();
    for i in 0..DIRECT_CALLS {
        let approval = grant(&format!("a#direct{i}"), TTL, t0).await;
        let (id, binding) = (approval.id.clone(), approval.binding());
        store.issue(approval).await.unwrap();
        let attempt = AttemptId::generate().unwrap();
        let before = dropped();
        arm(&support::grant_key(&store, &id), &consume_sha);
        let lost = store
            .consume_once(&id, &binding, t0, &attempt)
            .await
            .expect_err("the reply was dropped: the first answer is an error, never a replay");
        assert!(
            matches!(
                lost,
                StoreError::Unavailable { .. } | StoreError::Timeout { .. }
            ),
            "{i}: {lost}"
        );
        assert!(lost.is_retryable());
        assert_eq!(dropped(), before + 1, "{i}: one reply dropped");
        disarm();
        assert_eq!(
            store.get(&id).await.unwrap().unwrap().state,
            GrantState::Consumed {
                at: t0,
                by: attempt.clone()
            },
            "{i}: the dropped consume was applied"
        );
        assert_eq!(
            store
                .consume_once(&id, &binding, t0, &attempt)
                .await
                .unwrap(),
            ConsumeOutcome::Consumed { replay: true },
            "{i}"
        );
    }

    let backend = FakeBackend::new();
    let operations = Arc::new(InMemoryOperationStore::new());
    let act = act_over(store.clone(), &backend, &operations, RetryPolicy::default());
    let mut ids = Vec::new();
    let before = dropped();
    for i in 0..ACT_CALLS {
        let selector = format!("a#act{i}");
        let approval = grant(&selector, TTL, now()).await;
        let id = approval.id.as_str().to_owned();
        let key = support::grant_key(&store, &approval.id);
        store.issue(approval).await.unwrap();
        arm(&key, &consume_sha);
        let result = act.execute_json(&call(&id, &selector)).await;
        assert_eq!(result["status"], "ok", "call {i}: {result}");
        assert_eq!(dropped(), before + i + 1, "call {i}: one reply dropped");
        ids.push(id);
    }
    disarm();
    assert_eq!(backend.len(), ACT_CALLS, "one action per call");
    let performed: Vec<String> = backend
        .records()
        .iter()
        .map(|r| r.approval_id.as_str().to_owned())
        .collect();
    assert_eq!(performed, ids, "each grant performed once, in order");
    assert_eq!(performed.iter().collect::<HashSet<_>>().len(), ACT_CALLS);
    eprintln!(
        "lost replies: {DIRECT_CALLS} direct calls retried to a replay, \
         {ACT_CALLS} of {ACT_CALLS} act calls ok with one action each, {} replies dropped",
        dropped() - before + DIRECT_CALLS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_consume_reply_on_a_cluster_ends_in_ok() {
    let proxied = tokio::task::spawn_blocking(ProxiedCluster::start)
        .await
        .unwrap();
    let store = Arc::new(
        RedisApprovalStore::connect(through_proxy(RedisStoreOptions::cluster(proxied.urls())))
            .await
            .unwrap(),
    );
    lost_replies_end_in_ok(
        store,
        |key, needle| proxied.arm_for(key, needle),
        || proxied.disarm(),
        || proxied.dropped(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_consume_reply_on_one_server_ends_in_ok() {
    let server = RedisServer::start();
    let proxy = ReplyDropper::start(server.port());
    let store = Arc::new(
        RedisApprovalStore::connect(through_proxy(RedisStoreOptions::single(proxy.url())))
            .await
            .unwrap(),
    );
    lost_replies_end_in_ok(
        store,
        |_, needle| proxy.arm(needle),
        || proxy.disarm(),
        || proxy.dropped(),
    )
    .await;
}
