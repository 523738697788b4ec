//! Slots moving under the store: with the cluster client's own retries off,
//! the store follows `ASK` (a slot being migrated) and `MOVED` (a slot that
//! moved) itself, and every call succeeds without an error reaching the
//! caller.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use std::collections::HashSet;

use countersign_approval_core::{
    ActorId, Approval, ApprovalStore, AttemptId, ConsumeOutcome, RevokeOutcome,
};
use support::{RedisCluster, RedisServer, cluster_store, grant, now};

fn node_id(node: &RedisServer) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node.conn())
        .unwrap()
}

fn slot_of(node: &RedisServer, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut node.conn())
        .unwrap()
}

/// The node that owns `slot` (answers the key itself rather than `MOVED`).
fn owner_of<'a>(cluster: &'a RedisCluster, key: &str) -> &'a RedisServer {
    cluster
        .nodes
        .iter()
        .find(|node| {
            let reply: redis::RedisResult<String> =
                redis::cmd("TYPE").arg(key).query(&mut node.conn());
            reply.is_ok()
        })
        .expect("some node owns the key")
}

fn setslot(node: &RedisServer, slot: u16, args: &[&str]) {
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(args)
        .query(&mut node.conn())
        .unwrap();
}

/// Starts moving `slot` from `from` to `to` and moves its keys: the slot
/// stays `from`'s, which answers `ASK` for them.
fn migrate_keys(from: &RedisServer, to: &RedisServer, slot: u16) {
    setslot(to, slot, &["IMPORTING", &node_id(from)]);
    setslot(from, slot, &["MIGRATING", &node_id(to)]);
    let keys: Vec<String> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query(&mut from.conn())
        .unwrap();
    assert!(!keys.is_empty());
    let _: () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(to.port())
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(&keys)
        .query(&mut from.conn())
        .unwrap();
}

/// Ends the move: every node learns that `to` owns `slot`, the importing
/// node first (as Redis's resharding does, so gossip cannot hand the slot
/// back to the old owner).
fn finish_migration(cluster: &RedisCluster, to: &RedisServer, slot: u16) {
    let to_id = node_id(to);
    setslot(to, slot, &["NODE", &to_id]);
    for node in cluster.nodes.iter().filter(|n| n.port() != to.port()) {
        setslot(node, slot, &["NODE", &to_id]);
    }
}

/// A grant like `grant(selector, …)` for an actor of its own whose slot no
/// earlier grant of the test used: every grant of one actor shares its
/// slot, and each move here must move one grant alone.
async fn grant_in_a_slot_of_its_own(
    store: &countersign_store_redis::RedisApprovalStore,
    cluster: &RedisCluster,
    selector: &str,
    t0: countersign_approval_core::Timestamp,
    used: &mut HashSet<u16>,
) -> Approval {
    for n in 0.. {
        let mut approval = grant(selector, Duration::from_secs(600), t0).await;
        approval.actor_id = ActorId::new(format!("reshard-{selector}-{n}")).unwrap();
        let key = store.grant_key(&approval.actor_id, &approval.id);
        if used.insert(slot_of(&cluster.nodes[0], &key)) {
            return approval;
        }
    }
    unreachable!("some actor has a fresh slot")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_follow_ask_and_moved_while_slots_move() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let store = cluster_store(&cluster, "reshard").await;
    let t0 = now();
    let mut asked = 0;
    let mut moved = 0;
    let mut used = HashSet::new();
    for i in 0..6 {
        // Two grants per round, each alone in its slot's move.
        let first =
            grant_in_a_slot_of_its_own(&store, &cluster, &format!("a#r{i}"), t0, &mut used).await;
        let second =
            grant_in_a_slot_of_its_own(&store, &cluster, &format!("a#s{i}"), t0, &mut used).await;
        for approval in [&first, &second] {
            store.issue(approval.clone()).await.unwrap();
        }
        for (approval, finish) in [(&first, false), (&second, true)] {
            let key = store.grant_key(&approval.actor_id, &approval.id);
            let from = owner_of(&cluster, &key);
            let to = cluster
                .nodes
                .iter()
                .find(|n| n.port() != from.port())
                .unwrap();
            let slot = slot_of(from, &key);
            migrate_keys(from, to, slot);
            if finish {
                finish_migration(&cluster, to, slot);
                moved += 1;
            } else {
                asked += 1;
            }
            // Mid-move (ASK) or moved (MOVED): every call answers, no error.
            let attempt = AttemptId::generate().unwrap();
            assert!(store.get(&approval.id).await.unwrap().is_some(), "{i}");
            assert_eq!(
                store
                    .consume_once(&approval.id, &approval.binding(), t0, &attempt)
                    .await
                    .unwrap(),
                ConsumeOutcome::Consumed { replay: false },
                "{i} finish={finish}"
            );
            assert_eq!(
                store.revoke(&approval.id).await.unwrap(),
                RevokeOutcome::AlreadyConsumed
            );
            if !finish {
                finish_migration(&cluster, to, slot);
            }
        }
    }
    eprintln!("resharding: {asked} grants consumed mid-move (ask), {moved} after the move (moved)");
}
