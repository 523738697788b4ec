//! The Redis store on a 3-master Redis Cluster this test binary creates:
//! the whole conformance kit, plus routing and script reloading per node.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalStore, AttemptId, Binding, ConsumeOutcome,
    GrantState, IssueError, ResumeOutcome, RevokeOutcome, RunId, StaleReason, StopOutcome,
    StoreError, Timestamp,
};
use countersign_store_redis::{ConnectError, Durability, RedisApprovalStore, RedisStoreOptions};
use support::{RedisServer, cluster_store, grant, now, shared_cluster};

async fn conformance_store() -> RedisApprovalStore {
    cluster_store(shared_cluster(), "kit").await
}

countersign_store_conformance::store_conformance_tests!(cluster_conformance, conformance_store());
countersign_store_conformance::proposal_store_conformance_tests!(
    cluster_proposal_conformance,
    conformance_store()
);
countersign_store_conformance::outbox_conformance_tests!(
    cluster_outbox_conformance,
    support::cluster_store_with(shared_cluster(), "outbox-kit", |options| {
        options.notification_outbox(true)
    })
);

/// A grant of `actor` in `RUN`, as `support::grant` makes them for `ACTOR`.
async fn grant_of(actor: &ActorId, selector: &str, t0: Timestamp) -> Approval {
    Approval {
        actor_id: actor.clone(),
        ..grant(selector, Duration::from_secs(60), t0).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_spread_over_every_master_by_actor_and_work_there() {
    let cluster = shared_cluster();
    let store = cluster_store(cluster, "spread").await;
    let t0 = now();
    let mut grants = Vec::new();
    // 16 actors with 3 grants each: an actor's grants share its slot.
    for i in 0..48 {
        let actor = ActorId::new(format!("actor {{{}}}", i / 3)).unwrap();
        let approval = grant_of(&actor, &format!("a#g{i}"), t0).await;
        store.issue(approval.clone()).await.unwrap();
        grants.push(approval);
    }
    // Every master holds some of them, each key on the node owning its
    // slot, every grant beside its actor's fence.
    let mut slots = std::collections::HashSet::new();
    for node in &cluster.nodes {
        let mut conn = node.conn();
        let held: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:{{a*}}:grant:*", store.prefix()))
            .query(&mut conn)
            .unwrap();
        assert!(!held.is_empty(), "node {} holds no grant", node.port());
        for approval in &grants {
            let key = store.grant_key(&approval.actor_id, &approval.id);
            if held.contains(&key) {
                let fence: bool = redis::cmd("EXISTS")
                    .arg(store.actor_fence_key(&approval.actor_id))
                    .query(&mut conn)
                    .unwrap();
                assert!(fence, "{key}: its actor's fence is on another node");
                let slot: u16 = redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(&key)
                    .query(&mut conn)
                    .unwrap();
                slots.insert(slot);
            }
        }
    }
    assert_eq!(slots.len(), 16, "one slot per actor");
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

/// A store that did not issue the grants (so remembers no slot) finds them
/// through their pointers, on other nodes than their slots: get, revoke,
/// abandon, and a consume whose binding names another actor (which counts a
/// failed attempt in the grant's own slot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_are_found_through_their_pointers_on_other_nodes() {
    let cluster = shared_cluster();
    let prefix = support::fresh_prefix("pointer");
    let connect = || {
        RedisApprovalStore::connect(
            RedisStoreOptions::cluster(cluster.urls())
                .key_prefix(prefix.clone())
                .allow_non_durable_persistence(),
        )
    };
    let (issuer, other) = (connect().await.unwrap(), connect().await.unwrap());
    let t0 = now();
    let mut on_another_node = 0;
    for i in 0..12 {
        let actor = ActorId::new(format!("pointer-actor-{i}")).unwrap();
        let approval = grant_of(&actor, &format!("a#p{i}"), t0).await;
        issuer.issue(approval.clone()).await.unwrap();
        let mut conn = cluster.nodes[0].conn();
        let slot_of = |conn: &mut redis::Connection, key: &str| -> u16 {
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key)
                .query(conn)
                .unwrap()
        };
        let grant_slot = slot_of(&mut conn, &issuer.grant_key(&actor, &approval.id));
        let pointer_slot = slot_of(&mut conn, &issuer.pointer_key(&approval.id));
        if grant_slot != pointer_slot {
            on_another_node += 1;
        }
        let fresh = || connect();
        let reader = fresh().await.unwrap();
        assert_eq!(
            reader.get(&approval.id).await.unwrap().unwrap().approval,
            approval
        );
        let stranger = Binding {
            actor_id: ActorId::new("someone else").unwrap(),
            ..approval.binding()
        };
        let fresh_store = fresh().await.unwrap();
        assert_eq!(
            fresh_store
                .consume_once(&approval.id, &stranger, t0, &AttemptId::generate().unwrap())
                .await
                .unwrap(),
            ConsumeOutcome::Stale(StaleReason::Mismatch)
        );
        assert_eq!(
            other
                .get(&approval.id)
                .await
                .unwrap()
                .unwrap()
                .failed_attempts,
            1
        );
        let attempt = AttemptId::generate().unwrap();
        assert_eq!(
            fresh()
                .await
                .unwrap()
                .abandon(&approval.id, &attempt, t0)
                .await
                .unwrap(),
            AbandonOutcome::Usable { restored: false }
        );
        if i % 2 == 0 {
            assert_eq!(
                fresh().await.unwrap().revoke(&approval.id).await.unwrap(),
                RevokeOutcome::Revoked
            );
        }
    }
    assert!(on_another_node > 0);
}

/// A stop is one script in the actor's slot on a cluster too: it stops
/// every grant of the run, whichever store issued them, and the fence it
/// leaves never expires while stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_is_one_script_in_the_actors_slot() {
    let cluster = shared_cluster();
    let store = cluster_store(cluster, "stop").await;
    let t0 = now();
    let actor = ActorId::new("stop {actor}").unwrap();
    let run = RunId::new(support::RUN).unwrap();
    let mut grants = Vec::new();
    for i in 0..20 {
        let approval = grant_of(&actor, &format!("a#s{i}"), t0).await;
        store.issue(approval.clone()).await.unwrap();
        grants.push(approval);
    }
    assert_eq!(
        store
            .consume_once(
                &grants[0].id,
                &grants[0].binding(),
                t0,
                &AttemptId::generate().unwrap()
            )
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    assert_eq!(
        store.stop_run(&actor, &run, t0).await.unwrap(),
        StopOutcome {
            stopped_grants: 19,
            stopped_standing: 0,
            was_stopped: false
        }
    );
    for approval in &grants[1..] {
        assert_eq!(
            store
                .consume_once(
                    &approval.id,
                    &approval.binding(),
                    t0,
                    &AttemptId::generate().unwrap()
                )
                .await
                .unwrap(),
            ConsumeOutcome::Stale(StaleReason::Stopped)
        );
        assert_eq!(
            store.get(&approval.id).await.unwrap().unwrap().state,
            GrantState::Stopped
        );
    }
    let fence = store.run_fence_key(&actor, &run);
    let owner = cluster
        .nodes
        .iter()
        .find(|node| {
            redis::cmd("EXISTS")
                .arg(&fence)
                .query::<bool>(&mut node.conn())
                .unwrap_or(false)
        })
        .expect("a node holds the fence");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&fence)
        .query(&mut owner.conn())
        .unwrap();
    assert_eq!(ttl, -1, "a stopped fence never expires");
    assert_eq!(
        store.resume_run(&actor, &run).await.unwrap(),
        ResumeOutcome::Resumed
    );
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&fence)
        .query(&mut owner.conn())
        .unwrap();
    assert!(ttl > 0, "{ttl}");
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
