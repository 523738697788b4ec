//! The notification outbox in the Redis store, beyond the conformance kit:
//! a step whose directory hint never came is found by the next process's
//! sweep, a claim that died comes back as the next attempt, the actors of
//! a cluster are claimed from every slot, a claim that missed a step never
//! settles its actor past the step's event, and a store without the
//! outbox records nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use countersign_approval_core::{
    ActorId, ApprovalStore, NotificationEvent, NotificationKind, NotificationOutbox, Proposal,
    ProposalStore, RunId, StoreError, Timestamp,
};
use countersign_store_redis::{GrantScript, RedisApprovalStore, RedisStoreOptions};
use support::{now, options_for, shared_cluster, shared_server};

const MINUTE: Duration = Duration::from_secs(60);
const LEASE: Duration = Duration::from_secs(30);

async fn connect(options: &RedisStoreOptions) -> RedisApprovalStore {
    RedisApprovalStore::connect(options.clone())
        .await
        .expect("store connects")
}

async fn proposal_of(actor: &str, selector: &str, at: Timestamp) -> Proposal {
    let (url, action) = support::url_and_action(selector).await;
    Proposal::for_action(
        ActorId::new(actor).unwrap(),
        support::run(),
        &url,
        &action,
        MINUTE,
        at,
    )
    .unwrap()
}

fn events_and_attempts(
    claims: &[countersign_approval_core::ClaimedNotification],
) -> Vec<(NotificationEvent, u32)> {
    claims
        .iter()
        .map(|c| (c.event.clone(), c.attempt))
        .collect()
}

/// The process that made a proposal died before it told the directory
/// (its hint is gone): the next process's first claim sweeps the actors
/// registered before each step and finds the event.
#[tokio::test]
async fn a_step_whose_hint_never_came_is_found_by_the_sweep() {
    let options = options_for(shared_server(), "ob-sweep").notification_outbox(true);
    let t0 = now();
    let proposed = proposal_of(support::ACTOR, "a#swept", t0).await;
    connect(&options)
        .await
        .propose(proposed.clone())
        .await
        .unwrap();
    // As if the hint after the step never reached the directory.
    let mut raw = shared_server().conn();
    let due_key = format!("{}:{{notify}}:due", options.prefix());
    let removed: i64 = redis::cmd("DEL").arg(&due_key).query(&mut raw).unwrap();
    assert_eq!(removed, 1, "the step hinted the directory");

    let restarted = connect(&options).await;
    let claimed = restarted.claim_due(t0, LEASE, 10).await.unwrap();
    assert_eq!(
        events_and_attempts(&claimed),
        vec![(NotificationEvent::created(&proposed), 1)]
    );
}

/// A process that claimed an event and died before finishing it: another
/// process claims it once the lease lapsed, as attempt 2, and the dead
/// claim can no longer finish it.
#[tokio::test]
async fn a_claim_that_died_comes_back_after_its_lease() {
    let options = options_for(shared_server(), "ob-lease").notification_outbox(true);
    let t0 = now();
    let proposed = proposal_of(support::ACTOR, "a#lease", t0).await;
    let dead_claim = {
        let first = connect(&options).await;
        first.propose(proposed.clone()).await.unwrap();
        first.claim_due(t0, LEASE, 10).await.unwrap()
    };
    assert_eq!(dead_claim.len(), 1);
    let second = connect(&options).await;
    let early = t0.saturating_add(LEASE - Duration::from_millis(1));
    assert_eq!(second.claim_due(early, LEASE, 10).await.unwrap(), []);
    let lapsed = t0.saturating_add(LEASE);
    let again = second.claim_due(lapsed, LEASE, 10).await.unwrap();
    assert_eq!(
        events_and_attempts(&again),
        vec![(NotificationEvent::created(&proposed), 2)]
    );
    assert!(!second.finish(&dead_claim[0], lapsed).await.unwrap());
    assert!(second.finish(&again[0], lapsed).await.unwrap());
    let later = t0.saturating_add(MINUTE * 10);
    assert_eq!(second.claim_due(later, LEASE, 10).await.unwrap(), []);
}

/// On a cluster each actor's events live in its own slot: proposals of
/// actors on different primaries, and a stop, are all claimed, each once,
/// earliest first.
#[tokio::test]
async fn a_cluster_claims_the_events_of_every_slot() {
    let cluster = shared_cluster();
    let store =
        support::cluster_store_with(cluster, "ob-slots", |o| o.notification_outbox(true)).await;
    let t0 = now();
    // Actors until three of them live on three different primaries.
    let mut actors: Vec<String> = Vec::new();
    let mut primaries = std::collections::BTreeSet::new();
    for n in 0.. {
        let actor = format!("actor-slot-{n}");
        let key = store.actor_fence_key(&ActorId::new(actor.as_str()).unwrap());
        if primaries.insert(cluster.primary_of(0, &key).unwrap()) {
            actors.push(actor);
        }
        if actors.len() == 3 {
            break;
        }
    }
    let mut expected = Vec::new();
    for (i, actor) in actors.iter().enumerate() {
        let at = t0.saturating_add(Duration::from_millis(i as u64));
        let proposed = proposal_of(actor, "a#slot", at).await;
        store.propose(proposed.clone()).await.unwrap();
        expected.push(NotificationEvent::created(&proposed));
    }
    let stop_at = t0.saturating_add(Duration::from_millis(3));
    let stopped = ActorId::new(actors[0].as_str()).unwrap();
    store.stop_actor(&stopped, stop_at).await.unwrap();
    expected.push(NotificationEvent::run_stopped(&stopped, None, stop_at));

    let claimed = store.claim_due(stop_at, LEASE, 10).await.unwrap();
    let events: Vec<NotificationEvent> = claimed.iter().map(|c| c.event.clone()).collect();
    assert_eq!(events, expected);
    assert_eq!(store.claim_due(stop_at, LEASE, 10).await.unwrap(), []);
}

/// The directory's settle after a claim, with a step's hint forced in
/// between the claim's read of the directory and its settle: the actor
/// stays due at the step's time; without a step in between, an empty
/// outbox leaves the directory.
#[tokio::test]
async fn a_hint_between_a_claim_and_its_settle_keeps_the_actor_due() {
    let store = support::store_on(shared_server(), "ob-settle").await;
    let mut raw = shared_server().conn();
    let prefix = store.prefix().to_owned();
    let keys = [
        format!("{prefix}:{{notify}}:due"),
        format!("{prefix}:{{notify}}:actors"),
    ];
    let sha = store.script_sha(GrantScript::OutboxDirectory).to_owned();
    let call = |raw: &mut redis::Connection, args: &[&str]| -> redis::Value {
        redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(2)
            .arg(&keys[0])
            .arg(&keys[1])
            .arg(args)
            .query(raw)
            .unwrap()
    };
    let score = |raw: &mut redis::Connection| -> Option<String> {
        redis::cmd("ZSCORE")
            .arg(&keys[0])
            .arg("tag-a")
            .query(raw)
            .unwrap()
    };
    call(&mut raw, &["hint", "tag-a", "100"]);
    // The claim reads the actor due, with the count of hints so far.
    let due = call(&mut raw, &["due", "1000", "10"]);
    assert_eq!(
        format!("{due:?}"),
        format!(
            "{:?}",
            redis::Value::Array(vec![
                redis::Value::BulkString(b"due".to_vec()),
                redis::Value::Array(vec![redis::Value::Array(vec![
                    redis::Value::BulkString(b"tag-a".to_vec()),
                    redis::Value::BulkString(b"1".to_vec()),
                ])]),
            ])
        )
    );
    // A step records an event the claim did not see, and hints.
    call(&mut raw, &["hint", "tag-a", "500"]);
    // The claim found the outbox empty: its settle must not drop the actor.
    call(&mut raw, &["settle", "tag-a", "1", ""]);
    assert_eq!(score(&mut raw).as_deref(), Some("100"));
    // With no step in between, an empty outbox leaves the directory, and
    // one that holds events is due at its earliest.
    call(&mut raw, &["settle", "tag-a", "2", "700"]);
    assert_eq!(score(&mut raw).as_deref(), Some("700"));
    call(&mut raw, &["settle", "tag-a", "2", ""]);
    assert_eq!(score(&mut raw), None);
}

/// Off by default: the steps record nothing (a store with the outbox on,
/// over the same keys, finds nothing), and every outbox call is refused.
#[tokio::test]
async fn a_store_without_the_outbox_records_nothing() {
    let options = options_for(shared_server(), "ob-off");
    let off = connect(&options).await;
    let t0 = now();
    let proposed = proposal_of(support::ACTOR, "a#off", t0).await;
    off.propose(proposed.clone()).await.unwrap();
    off.deny_proposal(&proposed.id, None, t0).await.unwrap();
    off.stop_run(&support::actor(), &RunId::new("run-off").unwrap(), t0)
        .await
        .unwrap();
    let on = connect(&options.clone().notification_outbox(true)).await;
    assert_eq!(on.claim_due(t0, LEASE, 10).await.unwrap(), []);
    let refused = off
        .schedule(NotificationEvent::created(&proposed), t0)
        .await;
    assert!(
        matches!(refused, Err(StoreError::Unsupported { ref message })
            if message.contains("`notification_outbox(true)`")),
        "{refused:?}"
    );
    let kinds: Vec<NotificationKind> = on
        .claim_due(t0.saturating_add(MINUTE), LEASE, 10)
        .await
        .unwrap()
        .iter()
        .map(|c| c.event.kind)
        .collect();
    assert_eq!(kinds, []);
}
