//! The notification outbox in the PostgreSQL store, beyond the conformance
//! kit: events outlive the process that recorded or claimed them, a
//! decision rolled back records nothing, the row as an operator reads it, a
//! store without the outbox, and the upgrade from schema version 5.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use countersign_approval_core::{
    ActorId, ApprovalStore, ApproveError, ApproverId, NotificationEvent, NotificationKind,
    NotificationOutbox, Proposal, ProposalStore, RunId, StoreError, Timestamp,
};
use countersign_store_postgres::{PostgresApprovalStore, PostgresStoreOptions, SchemaSetup};
use support::{Isolation, now, options_for, shared_server};

const MINUTE: Duration = Duration::from_secs(60);
const LEASE: Duration = Duration::from_secs(30);

async fn connect(options: &PostgresStoreOptions) -> PostgresApprovalStore {
    PostgresApprovalStore::connect(options.clone())
        .await
        .expect("store connects")
}

async fn proposal(selector: &str, at: Timestamp) -> Proposal {
    let (url, action) = support::url_and_action(selector).await;
    Proposal::for_action(
        ActorId::new(support::ACTOR).unwrap(),
        RunId::new(support::RUN).unwrap(),
        &url,
        &action,
        MINUTE,
        at,
    )
    .unwrap()
}

/// A process that recorded an event and one that claimed it can both die:
/// another process on the same schema claims the unclaimed event at once
/// and the claimed one once its lease lapsed, as the next attempt, and the
/// dead claim can no longer finish it.
#[tokio::test]
async fn events_outlive_the_processes_that_recorded_and_claimed_them() {
    let options = options_for(shared_server(), "ob_restart", Isolation::ReadCommitted)
        .notification_outbox(true);
    let t0 = now();
    let (first, second) = (
        proposal("a#first", t0).await,
        proposal("a#second", t0).await,
    );
    let crashed_claim = {
        let before = connect(&options).await;
        before.propose(first.clone()).await.unwrap();
        let claimed = before.claim_due(t0, LEASE, 10).await.unwrap();
        before.propose(second.clone()).await.unwrap();
        // Gone before delivering: nothing finished, nothing retried.
        claimed
    };
    assert_eq!(crashed_claim.len(), 1);
    let after = connect(&options).await;
    // A second later: the crashed claim still holds its event.
    let t1 = t0.saturating_add(Duration::from_secs(1));
    let now_claimed = after.claim_due(t1, LEASE, 10).await.unwrap();
    assert_eq!(
        now_claimed
            .iter()
            .map(|c| (c.event.clone(), c.attempt))
            .collect::<Vec<_>>(),
        vec![(NotificationEvent::created(&second), 1)]
    );
    let lapsed = t0.saturating_add(LEASE);
    let again = after.claim_due(lapsed, LEASE, 10).await.unwrap();
    assert_eq!(
        again
            .iter()
            .map(|c| (c.event.clone(), c.attempt))
            .collect::<Vec<_>>(),
        vec![(NotificationEvent::created(&first), 2)]
    );
    assert!(!after.finish(&crashed_claim[0], lapsed).await.unwrap());
    assert!(after.finish(&again[0], lapsed).await.unwrap());
    assert!(after.finish(&now_claimed[0], lapsed).await.unwrap());
    let much_later = t0.saturating_add(MINUTE * 10);
    assert_eq!(after.claim_due(much_later, LEASE, 10).await.unwrap(), []);
}

/// An approval refused inside its transaction (its grant's id is taken)
/// rolls the decision back, and its event with it.
#[tokio::test]
async fn a_decision_rolled_back_records_no_event() {
    let options = options_for(shared_server(), "ob_rollback", Isolation::ReadCommitted)
        .notification_outbox(true);
    let store = connect(&options).await;
    let t0 = now();
    let proposed = proposal("a#taken", t0).await;
    store.propose(proposed.clone()).await.unwrap();
    let approver = ApproverId::new("approver-carol").unwrap();
    let grant = proposed.grant(MINUTE, t0, Some(approver)).unwrap();
    store.issue(grant.clone()).await.unwrap();
    let refused = store
        .approve_proposal(&proposed.id, grant.clone(), t0)
        .await;
    assert!(
        matches!(refused, Err(ApproveError::GrantExists(ref id)) if *id == grant.id),
        "{refused:?}"
    );
    let claimed = store.claim_due(t0, LEASE, 10).await.unwrap();
    let kinds: Vec<NotificationKind> = claimed.iter().map(|c| c.event.kind).collect();
    assert_eq!(kinds, [NotificationKind::Created]);
}

/// The row an operator reads: the event's kind by name, its ids, when it
/// happened and when it is claimable, its attempts; finishing keeps it with
/// the time it finished.
#[tokio::test]
async fn an_event_row_reads_as_the_event() {
    let server = shared_server();
    let options = options_for(server, "ob_row", Isolation::ReadCommitted).notification_outbox(true);
    let store = connect(&options).await;
    let t0 = Timestamp::from_millis(now().as_millis());
    let actor = ActorId::new(support::ACTOR).unwrap();
    let run = RunId::new("run-row").unwrap();
    store.stop_run(&actor, &run, t0).await.unwrap();
    let event = NotificationEvent::run_stopped(&actor, Some(&run), t0);
    let admin = server.admin().await;
    let table = format!("\"{}\".notifications", options.schema_name());
    let read = || async {
        let row = admin
            .query_one(
                &format!(
                    "SELECT kind, actor_id, run_id, proposal_id, occurred_at, claimable_at, \
                     attempt, finished_at FROM {table} WHERE event_id = $1"
                ),
                &[&event.id.as_str()],
            )
            .await
            .unwrap();
        (
            row.get::<_, String>(0),
            row.get::<_, String>(1),
            row.get::<_, Option<String>>(2),
            row.get::<_, Option<String>>(3),
            row.get::<_, i64>(4),
            row.get::<_, i64>(5),
            row.get::<_, i64>(6),
            row.get::<_, Option<i64>>(7),
        )
    };
    let at = i64::try_from(t0.as_millis()).unwrap();
    let recorded = (
        "run.stopped".to_owned(),
        support::ACTOR.to_owned(),
        Some("run-row".to_owned()),
        None,
        at,
        at,
        0,
        None,
    );
    assert_eq!(read().await, recorded);
    let claimed = store.claim_due(t0, LEASE, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(store.finish(&claimed[0], t0).await.unwrap());
    let lease_ms = i64::try_from(LEASE.as_millis()).unwrap();
    assert_eq!(
        read().await,
        (
            "run.stopped".to_owned(),
            support::ACTOR.to_owned(),
            Some("run-row".to_owned()),
            None,
            at,
            at + lease_ms,
            1,
            Some(at),
        )
    );
    // A row altered by hand is refused, never handed out as an event.
    admin
        .execute(
            &format!(
                "UPDATE {table} SET kind = 'proposal.approved', finished_at = NULL, \
                 claimable_at = $2 WHERE event_id = $1"
            ),
            &[&event.id.as_str(), &at],
        )
        .await
        .unwrap();
    let refused = store.claim_due(t0, LEASE, 10).await;
    assert!(
        matches!(refused, Err(StoreError::Corrupt { ref key, ref message })
            if *key == event.id.as_str() && message == "notification kind `proposal.approved` is unknown"),
        "{refused:?}"
    );
}

/// Off by default: the steps record nothing (a store with the outbox on,
/// on the same schema, finds nothing), and every outbox call is refused.
#[tokio::test]
async fn a_store_without_the_outbox_records_nothing() {
    let options = options_for(shared_server(), "ob_off", Isolation::ReadCommitted);
    let off = connect(&options).await;
    let t0 = now();
    let proposed = proposal("a#off", t0).await;
    off.propose(proposed.clone()).await.unwrap();
    off.deny_proposal(&proposed.id, None, t0).await.unwrap();
    off.stop_actor(&ActorId::new(support::ACTOR).unwrap(), t0)
        .await
        .unwrap();
    let on = connect(&options.clone().notification_outbox(true)).await;
    assert_eq!(on.claim_due(t0, LEASE, 10).await.unwrap(), []);
    let event = NotificationEvent::created(&proposed);
    let refused = off.schedule(event, t0).await;
    assert!(
        matches!(refused, Err(StoreError::Unsupported { ref message })
            if message.contains("`notification_outbox(true)`")),
        "{refused:?}"
    );
    assert!(matches!(
        off.claim_due(t0, LEASE, 10).await,
        Err(StoreError::Unsupported { .. })
    ));
}

/// Version 6 only adds the notifications table: a version 5 schema's
/// proposals are untouched and can be decided, with the decision's event
/// recorded, once upgraded.
#[tokio::test]
async fn a_version_5_schema_gains_the_notifications_table() {
    let server = shared_server();
    let admin = server.admin().await;
    let options =
        options_for(server, "ob_upgrade_v5", Isolation::ReadCommitted).notification_outbox(true);
    let schema = options.schema_name().to_owned();
    admin
        .batch_execute(&format!(
            "BEGIN;\n{}\nCOMMIT;",
            support::schema_sql_before(&options, 6)
        ))
        .await
        .unwrap();
    let err = PostgresApprovalStore::connect(options.clone().schema_setup(SchemaSetup::Verify))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("version 5"), "{err}");
    let store = connect(&options).await;
    assert_eq!(
        support::schema_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5, 6]
    );
    let t0 = now();
    let proposed = proposal("a#upgraded", t0).await;
    store.propose(proposed.clone()).await.unwrap();
    store.deny_proposal(&proposed.id, None, t0).await.unwrap();
    let events: Vec<NotificationEvent> = store
        .claim_due(t0, LEASE, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.event)
        .collect();
    assert_eq!(
        events,
        [
            NotificationEvent::created(&proposed),
            NotificationEvent::decided(&proposed, t0)
        ]
    );
}
