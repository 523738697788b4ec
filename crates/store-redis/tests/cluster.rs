//! The Redis store on a 3-master Redis Cluster this test binary creates:
//! the whole conformance kit, plus routing and script reloading per node.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use countersign_approval_core::{
    ApprovalStore, AttemptId, ConsumeOutcome, GrantState, IssueError, RevokeOutcome, StoreError,
};
use countersign_store_redis::{ConnectError, Durability, RedisApprovalStore, RedisStoreOptions};
use support::{RedisServer, cluster_store, grant, now, shared_cluster};

async fn conformance_store() -> RedisApprovalStore {
    cluster_store(shared_cluster(), "kit").await
}

countersign_store_conformance::store_conformance_tests!(cluster_conformance, conformance_store());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_spread_over_every_master_and_work_there() {
    let cluster = shared_cluster();
    let store = cluster_store(cluster, "spread").await;
    let t0 = now();
    let mut grants = Vec::new();
    for i in 0..48 {
        let approval = grant(&format!("a#g{i}"), Duration::from_secs(60), t0).await;
        store.issue(approval.clone()).await.unwrap();
        grants.push(approval);
    }
    // Every master holds some of them, each key on the node owning its slot.
    for node in &cluster.nodes {
        let mut conn = node.conn();
        let held: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:grant:*", store.prefix()))
            .query(&mut conn)
            .unwrap();
        assert!(!held.is_empty(), "node {} holds no grant", node.port());
    }
    for (i, approval) in grants.iter().enumerate() {
        let attempt = AttemptId::generate().unwrap();
        if i % 3 == 0 {
            assert_eq!(
                store.revoke(&approval.id).await.unwrap(),
                RevokeOutcome::Revoked
            );
        } else {
            assert_eq!(
                store
                    .consume_once(&approval.id, &approval.binding(), t0, &attempt)
                    .await
                    .unwrap(),
                ConsumeOutcome::Consumed { replay: false }
            );
            assert_eq!(
                store
                    .consume_once(&approval.id, &approval.binding(), t0, &attempt)
                    .await
                    .unwrap(),
                ConsumeOutcome::Consumed { replay: true }
            );
        }
        assert!(store.get(&approval.id).await.unwrap().is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_on_every_node_is_recovered() {
    let cluster = shared_cluster();
    let store = cluster_store(cluster, "flush").await;
    let t0 = now();
    let mut grants = Vec::new();
    for i in 0..12 {
        let approval = grant(&format!("a#f{i}"), Duration::from_secs(60), t0).await;
        store.issue(approval.clone()).await.unwrap();
        grants.push(approval);
    }
    for node in &cluster.nodes {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut node.conn())
            .unwrap();
    }
    for approval in &grants {
        let attempt = AttemptId::generate().unwrap();
        assert_eq!(
            store
                .consume_once(&approval.id, &approval.binding(), t0, &attempt)
                .await
                .unwrap(),
            ConsumeOutcome::Consumed { replay: false }
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_checks_every_master() {
    let store = cluster_store(shared_cluster(), "probe").await;
    let warnings = store.startup_warnings();
    let persistence = warnings
        .iter()
        .filter(|w| w.contains("appendonly no"))
        .count();
    assert_eq!(persistence, 3, "{warnings:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durability_on_a_cluster_without_replicas_fails_closed() {
    // WAIT runs on the same connection as the write, on the key's primary;
    // these primaries have no replicas, so nothing is ever confirmed.
    let cluster = shared_cluster();
    let store = RedisApprovalStore::connect(
        RedisStoreOptions::cluster(cluster.urls())
            .allow_non_durable_persistence()
            .key_prefix(support::fresh_prefix("durable"))
            .durability(Durability::new(1, Duration::from_millis(20))),
    )
    .await
    .unwrap();
    let unconfirmed = StoreError::DurabilityUnconfirmed {
        wanted: 1,
        confirmed: 0,
    };
    let t0 = now();
    for i in 0..6 {
        let approval = grant(&format!("a#w{i}"), Duration::from_secs(60), t0).await;
        let (id, binding) = (approval.id.clone(), approval.binding());
        assert_eq!(
            store.issue(approval).await,
            Err(IssueError::Store(unconfirmed.clone()))
        );
        assert_eq!(
            store.get(&id).await.unwrap().unwrap().state,
            GrantState::Active
        );
        let attempt = AttemptId::generate().unwrap();
        assert_eq!(
            store.consume_once(&id, &binding, t0, &attempt).await,
            Err(unconfirmed.clone())
        );
        assert!(matches!(
            store.get(&id).await.unwrap().unwrap().state,
            GrantState::Consumed { .. }
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_is_refused_as_a_single_server() {
    let cluster = shared_cluster();
    let result = RedisApprovalStore::connect(
        RedisStoreOptions::single(cluster.urls()[0].clone()).allow_non_durable_persistence(),
    )
    .await;
    match result {
        Err(err @ ConnectError::WrongTopology { .. }) => {
            assert!(!err.is_retryable());
            assert!(err.to_string().contains("`cluster` option"), "{err}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_server_is_refused_as_a_cluster() {
    let plain = RedisServer::start();
    let result = RedisApprovalStore::connect(
        RedisStoreOptions::cluster([plain.url()]).allow_non_durable_persistence(),
    )
    .await;
    match result {
        Err(err @ ConnectError::WrongTopology { .. }) => {
            assert!(!err.is_retryable());
            let text = err.to_string();
            assert!(text.contains(&format!("`{}`", plain.url())), "{text}");
            assert!(text.contains("is a plain redis server"), "{text}");
            assert!(text.contains("`single` option"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_list_mixing_plain_and_cluster_nodes_is_refused() {
    let plain = RedisServer::start();
    let mut seeds = shared_cluster().urls();
    seeds.insert(1, plain.url());
    let result = RedisApprovalStore::connect(
        RedisStoreOptions::cluster(seeds).allow_non_durable_persistence(),
    )
    .await;
    match result {
        Err(err @ ConnectError::WrongTopology { .. }) => {
            assert!(!err.is_retryable());
            let text = err.to_string();
            assert!(text.contains("mixes plain redis servers"), "{text}");
            assert!(text.contains(&format!("`{}`", plain.url())), "{text}");
            assert!(text.contains("remove the plain servers"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}
