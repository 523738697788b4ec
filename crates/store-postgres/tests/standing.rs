//! Standing grants in the PostgreSQL store, beyond the conformance kit: the
//! row layout and its seal, rows altered by hand, a use in flight and one
//! queued behind a stop, purge, and the schema upgrade from version 4.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, ApprovalStore, Approver, ApproverId, AttemptId, ConsumeOutcome,
    ProposalStore, RunId, StaleReason, StandingGrant, StandingScope, StandingState, StopOutcome,
    StoreError, StoredStanding, Timestamp, UseOutcome,
};
use countersign_store_postgres::{PostgresApprovalStore, SchemaSetup};
use support::{
    Isolation, now, options_for, schema_of, shared_server, store_on, wait_for_lock_waiters,
};

const MINUTE: Duration = Duration::from_secs(60);

fn actor() -> ActorId {
    ActorId::new(support::ACTOR).unwrap()
}

fn attempt() -> AttemptId {
    AttemptId::generate().unwrap()
}

/// A standing grant of `uses` uses for one minute from `t0`, in `run` of
/// the test actor.
fn standing(run: &str, uses: u32, t0: Timestamp) -> StandingGrant {
    let scope = StandingScope::from_facts(
        "https://docs.example.com/results?page=2",
        "click",
        "button",
        "Next «page»",
    )
    .unwrap();
    let approver = Approver {
        id: ApproverId::new("ops: ada «lovelace»").unwrap(),
        approved_at: Timestamp::from_millis(t0.as_millis() - 1_500),
    };
    StandingGrant::new(
        actor(),
        RunId::new(run).unwrap(),
        &scope,
        uses,
        MINUTE,
        t0,
        approver,
    )
    .unwrap()
}

#[tokio::test]
async fn the_row_holds_every_field_a_format_a_seal_and_the_uses_in_order() {
    let server = shared_server();
    let store = store_on(server, "stg_layout", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let grant = standing(support::RUN, 3, t0).with_attempt_limit(7).unwrap();
    store.issue_standing(grant.clone()).await.unwrap();
    let (first, second) = (attempt(), attempt());
    for (a, remaining) in [(&first, 2), (&second, 1)] {
        assert_eq!(
            store
                .use_standing(&grant.id, &grant.key(), t0, a)
                .await
                .unwrap(),
            UseOutcome::Used {
                remaining,
                replay: false
            }
        );
    }
    assert_eq!(
        store.give_back_use(&grant.id, &first, t0).await.unwrap(),
        AbandonOutcome::Usable { restored: true }
    );

    let mut row: serde_json::Value = serde_json::from_str(
        &support::row_json(&admin, store.standing_grants_table(), grant.id.as_str()).await,
    )
    .unwrap();
    let seal = row
        .as_object_mut()
        .and_then(|columns| columns.remove("seal"))
        .and_then(|seal| seal.as_str().map(str::to_owned))
        .unwrap();
    assert!(
        seal.len() == 64 && seal.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "the seal is sha-256 in lower-case hex: {seal}"
    );
    assert_eq!(
        row,
        serde_json::json!({
            "id": grant.id.as_str(),
            "format": 1,
            "actor_id": support::ACTOR,
            "run_id": support::RUN,
            "scope": grant.scope.as_str(),
            "uses": 3,
            "issued_at": t0.as_millis(),
            "expires_at": grant.expires_at.as_millis(),
            "approver_id": "ops: ada «lovelace»",
            "approved_at": grant.approver.approved_at.as_millis(),
            "attempt_limit": 7,
            "run_gen": 0,
            "actor_gen": 0,
            "state": "active",
            "failed_attempts": 0,
            "used_by": [second.as_str()],
            "given_back": [first.as_str()],
        })
    );

    let mut expected = StoredStanding::issued(grant.clone());
    expected.used_by = vec![second];
    assert_eq!(store.get_standing(&grant.id).await.unwrap(), Some(expected));
}

/// Issues a standing grant in a run of its own, takes one use, then alters
/// its row (or its run's fence) with `set`, an SQL `SET` list.
async fn issue_tampered(
    admin: &tokio_postgres::Client,
    store: &PostgresApprovalStore,
    n: usize,
    table: &str,
    set: &str,
) -> StandingGrant {
    let run = format!("run-tampered-{n}");
    let grant = standing(&run, 3, now());
    store.issue_standing(grant.clone()).await.unwrap();
    store
        .use_standing(&grant.id, &grant.key(), now(), &attempt())
        .await
        .unwrap();
    let filter = if table == store.standing_grants_table() {
        format!("id = '{}'", grant.id)
    } else {
        format!("run_id = '{run}'")
    };
    let changed = admin
        .execute(&format!("UPDATE {table} SET {set} WHERE {filter}"), &[])
        .await
        .unwrap();
    assert_eq!(changed, 1, "{set}");
    grant
}

/// Asserts that `what` answered a corrupt-record error on the row altered
/// with `set`.
fn refused<T: std::fmt::Debug>(set: &str, what: &str, answer: Result<T, StoreError>) {
    assert!(
        matches!(answer, Err(StoreError::Corrupt { .. })),
        "{set}: {what} answered {answer:?}"
    );
}

/// A row that does not read as one the store wrote is corrupt to every
/// call, never an outcome, and no call changes it.
#[tokio::test]
async fn a_row_altered_by_hand_is_refused_as_corrupt_and_left_unchanged() {
    let server = shared_server();
    let store = store_on(server, "stg_tampered", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let standing_table = store.standing_grants_table().to_owned();
    let fences = store.run_fences_table().to_owned();
    let tampers = [
        (&standing_table, "uses = 50"),
        (&standing_table, "scope = scope || ' '"),
        (&standing_table, "approved_at = approved_at + 1"),
        (&standing_table, "format = 2"),
        (&standing_table, "state = 'spent'"),
        (&standing_table, "failed_attempts = attempt_limit"),
        (&standing_table, "state = 'locked'"),
        (&standing_table, "used_by = used_by || used_by"),
        (&standing_table, "given_back = used_by"),
        (&standing_table, "used_by = ARRAY['not an attempt']"),
        (&standing_table, "given_back = ARRAY[NULL]::text[]"),
        (&fences, "gen = -1"),
    ];
    for (n, (table, set)) in tampers.into_iter().enumerate() {
        let grant = issue_tampered(&admin, &store, n, table, set).await;
        let before =
            support::row_json(&admin, store.standing_grants_table(), grant.id.as_str()).await;
        let (id, key, t) = (&grant.id, grant.key(), now());
        refused(set, "get_standing", store.get_standing(id).await);
        refused(
            set,
            "use_standing",
            store.use_standing(id, &key, t, &attempt()).await,
        );
        refused(
            set,
            "give_back_use",
            store.give_back_use(id, &attempt(), t).await,
        );
        refused(set, "revoke_standing", store.revoke_standing(id).await);
        // The list leaves out a row its filter does not select (an
        // unknown state); one it selects is corrupt.
        match store.standing_grants(&actor(), &grant.run_id, t).await {
            Err(StoreError::Corrupt { .. }) => {}
            Ok(listed) if set == "state = 'spent'" || set == "state = 'locked'" => {
                assert!(listed.is_empty(), "{set}: listed {listed:?}");
            }
            other => panic!("{set}: standing_grants answered {other:?}"),
        }
        assert_eq!(
            support::row_json(&admin, store.standing_grants_table(), grant.id.as_str()).await,
            before,
            "{set}"
        );
    }
}

/// A row written before scopes held their scheme and effective port (a
/// version 1 scope text), sealed as that release sealed it, is refused as
/// corrupt by every call: read as any one scheme it could cover pages the
/// person never approved.
#[tokio::test]
async fn a_row_with_a_scope_of_version_1_is_refused_never_read_wider() {
    let server = shared_server();
    let store = store_on(server, "stg_scope_v1", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let grant = standing("run-scope-v1", 3, now());
    store.issue_standing(grant.clone()).await.unwrap();
    let v1 = r#"{"v":1,"host":"shop.example.com","method":"click","path":"/results","role":"button","name":"Next"}"#;
    // The seal over the columns written at issue, each `len:text;`, as
    // the store computes it, here in SQL so that the row is what an
    // earlier release would have written.
    let sealed = [
        "format::text",
        "id",
        "actor_id",
        "run_id",
        "scope",
        "uses::text",
        "issued_at::text",
        "expires_at::text",
        "approver_id",
        "approved_at::text",
        "attempt_limit::text",
        "run_gen::text",
        "actor_gen::text",
    ]
    .map(|column| format!("octet_length({column})::text || ':' || {column} || ';'"))
    .join(" || ");
    let table = store.standing_grants_table().to_owned();
    let changed = admin
        .execute(
            &format!("UPDATE {table} SET scope = $1 WHERE id = $2"),
            &[&v1, &grant.id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(changed, 1);
    admin
        .execute(
            &format!(
                "UPDATE {table} SET seal = encode(sha256(convert_to({sealed}, 'UTF8')), 'hex') WHERE id = $1"
            ),
            &[&grant.id.as_str()],
        )
        .await
        .unwrap();
    let corrupt_message = |answer: Result<Option<StoredStanding>, StoreError>| match answer {
        Err(StoreError::Corrupt { message, .. }) => message,
        other => panic!("not corrupt: {other:?}"),
    };
    assert_eq!(
        corrupt_message(store.get_standing(&grant.id).await),
        "scope is not a scope this release writes"
    );
    refused(
        "v1 scope",
        "use_standing",
        store
            .use_standing(&grant.id, &grant.key(), now(), &attempt())
            .await,
    );
    // Written back as it was, the seal matches again: the message above
    // is about the scope, not the seal.
    admin
        .execute(
            &format!("UPDATE {table} SET scope = $1 WHERE id = $2"),
            &[&grant.scope.as_str(), &grant.id.as_str()],
        )
        .await
        .unwrap();
    admin
        .execute(
            &format!(
                "UPDATE {table} SET seal = encode(sha256(convert_to({sealed}, 'UTF8')), 'hex') WHERE id = $1"
            ),
            &[&grant.id.as_str()],
        )
        .await
        .unwrap();
    assert!(store.get_standing(&grant.id).await.unwrap().is_some());
}

/// A stop is ordered against uses by the run's advisory lock: a use in
/// flight when it is called (held up here by an admin lock on the row)
/// finishes first and takes its use; a use that begins while the stop
/// waits queues behind it and answers `Stopped`, also at SERIALIZABLE (a
/// change of a standing grant runs its own transaction at READ
/// COMMITTED). A retry of the first use after the stop is `Stopped` too,
/// and a resume never revives the grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_use_in_flight_is_ordered_before_a_stop_and_one_behind_it_after() {
    let server = shared_server();
    let store = Arc::new(store_on(server, "stg_stop_race", Isolation::Serializable).await);
    let t0 = now();
    let grant = standing(support::RUN, 3, t0);
    store.issue_standing(grant.clone()).await.unwrap();
    let locker = support::hold_row(server, store.standing_grants_table(), grant.id.as_str()).await;
    let use_one = |a: &AttemptId| {
        let (store, grant, a) = (store.clone(), grant.clone(), a.clone());
        tokio::spawn(async move { store.use_standing(&grant.id, &grant.key(), t0, &a).await })
    };
    let (first, second) = (attempt(), attempt());
    let in_flight = use_one(&first);
    let watcher = server.admin().await;
    let schema = schema_of(&store);
    wait_for_lock_waiters(&watcher, &schema, "WITH p0 AS", false, 1).await;
    let run = grant.run_id.clone();
    let stop = tokio::spawn({
        let store = store.clone();
        async move { store.stop_run(&actor(), &run, t0).await }
    });
    wait_for_lock_waiters(&watcher, &schema, "SELECT pg_advisory_xact_lock(", true, 1).await;
    let behind = use_one(&second);
    wait_for_lock_waiters(&watcher, &schema, "WITH p0 AS", true, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!in_flight.is_finished() && !stop.is_finished() && !behind.is_finished());

    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        in_flight.await.unwrap().unwrap(),
        UseOutcome::Used {
            remaining: 2,
            replay: false
        },
        "the use in flight is ordered before the stop"
    );
    assert_eq!(
        stop.await.unwrap().unwrap(),
        StopOutcome {
            stopped_grants: 0,
            stopped_standing: 1,
            was_stopped: false
        }
    );
    assert_eq!(
        behind.await.unwrap().unwrap(),
        UseOutcome::Stale(StaleReason::Stopped),
        "the use queued behind the stop"
    );
    let read = store.get_standing(&grant.id).await.unwrap().unwrap();
    assert_eq!(read.state, StandingState::Stopped);
    assert_eq!(read.used_by, std::slice::from_ref(&first));
    assert_eq!(
        store
            .use_standing(&grant.id, &grant.key(), t0, &first)
            .await
            .unwrap(),
        UseOutcome::Stale(StaleReason::Stopped)
    );
    store.resume_run(&actor(), &grant.run_id).await.unwrap();
    assert_eq!(
        store
            .use_standing(&grant.id, &grant.key(), t0, &attempt())
            .await
            .unwrap(),
        UseOutcome::Stale(StaleReason::Stopped)
    );
    assert_eq!(
        store.give_back_use(&grant.id, &first, t0).await.unwrap(),
        AbandonOutcome::Stopped
    );
    store
        .issue_standing(standing(support::RUN, 1, t0))
        .await
        .unwrap();
}

#[tokio::test]
async fn purge_drops_standing_grants_once_expired_past_the_retention() {
    let server = shared_server();
    let store = store_on(server, "stg_purge", Isolation::ReadCommitted).await;
    let t0 = now();
    let retention = Duration::from_secs(15 * 60);
    let early = standing(support::RUN, 2, t0);
    let later = standing(support::RUN, 2, t0.saturating_add(MINUTE));
    for g in [&early, &later] {
        store.issue_standing(g.clone()).await.unwrap();
    }
    store
        .use_standing(&early.id, &early.key(), t0, &attempt())
        .await
        .unwrap();
    let gone = early.expires_at.saturating_add(retention);
    let just_before = Timestamp::from_millis(gone.as_millis() - 1);
    assert_eq!(store.purge(just_before, retention).await.unwrap(), 0);
    assert!(store.get_standing(&early.id).await.unwrap().is_some());
    assert_eq!(store.purge(gone, retention).await.unwrap(), 1);
    assert_eq!(store.get_standing(&early.id).await.unwrap(), None);
    assert_eq!(
        store.get_standing(&later.id).await.unwrap(),
        Some(StoredStanding::issued(later.clone()))
    );
    assert_eq!(
        store
            .use_standing(&early.id, &early.key(), gone, &attempt())
            .await
            .unwrap(),
        UseOutcome::Unknown
    );
}

/// Every grant row of `schema`, as text.
async fn grants_text(admin: &tokio_postgres::Client, schema: &str) -> String {
    admin
        .query_one(
            &format!(
                "SELECT string_agg(row_to_json(g)::text, ',' ORDER BY id) FROM \"{schema}\".grants g"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// Version 5 only adds the standing grants table: the grants of version 4
/// are untouched and keep working, and standing grants work beside them.
#[tokio::test]
async fn a_version_4_schema_gains_the_standing_grants_table_and_keeps_its_rows() {
    let server = shared_server();
    let admin = server.admin().await;
    let options = options_for(server, "stg_upgrade_v4", Isolation::ReadCommitted);
    let schema = options.schema_name().to_owned();
    admin
        .batch_execute(&format!(
            "BEGIN;\n{}\nCOMMIT;",
            support::schema_sql_before(&options, 5)
        ))
        .await
        .unwrap();
    let source = store_on(server, "stg_upgrade_v4_src", Isolation::ReadCommitted).await;
    let t0 = now();
    let old = support::grant("a#v4-old", MINUTE, t0).await;
    source.issue(old.clone()).await.unwrap();
    admin
        .batch_execute(&format!(
            "INSERT INTO \"{schema}\".grants SELECT * FROM {}; \
             INSERT INTO \"{schema}\".run_fences SELECT * FROM {}; \
             INSERT INTO \"{schema}\".actor_fences SELECT * FROM {};",
            source.grants_table(),
            source.run_fences_table(),
            source.actor_fences_table()
        ))
        .await
        .unwrap();
    let before = grants_text(&admin, &schema).await;

    let err = PostgresApprovalStore::connect(options.clone().schema_setup(SchemaSetup::Verify))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("version 4"), "{err}");
    let store = PostgresApprovalStore::connect(options.clone())
        .await
        .unwrap();
    assert_eq!(
        support::schema_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5, 6]
    );
    assert_eq!(grants_text(&admin, &schema).await, before);
    assert_eq!(
        store.get(&old.id).await.unwrap(),
        source.get(&old.id).await.unwrap()
    );
    // Both kinds work side by side on the upgraded schema.
    let grant = standing(support::RUN, 1, t0);
    store.issue_standing(grant.clone()).await.unwrap();
    let key = grant.key();
    let used = store.use_standing(&grant.id, &key, t0, &attempt()).await;
    let binding = old.binding();
    let consumed = store.consume_once(&old.id, &binding, t0, &attempt()).await;
    assert_eq!(
        (used.unwrap(), consumed.unwrap()),
        (
            UseOutcome::Used {
                remaining: 0,
                replay: false
            },
            ConsumeOutcome::Consumed { replay: false }
        )
    );
    PostgresApprovalStore::connect(options.schema_setup(SchemaSetup::Verify))
        .await
        .unwrap();
}
