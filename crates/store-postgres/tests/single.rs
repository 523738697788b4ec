//! The PostgreSQL store on one server this test binary starts: row layout,
//! rows altered by hand, schema setup, purge, the operation log, options
//! and the start-up probe.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, Approval, ApprovalId, ApprovalStore, ApproverId, AttemptId,
    ConsumeOutcome, GivenApprovalId, GrantState, IssueError, OperationId, OperationLog,
    OperationRecord, OutcomeCode, ResumeOutcome, RevokeOutcome, RunId, StaleReason, StopOutcome,
    StoreError, Timestamp,
};
use countersign_store_postgres::{
    ConnectError, PostgresApprovalStore, PostgresStoreOptions, SCHEMA_VERSION, SchemaSetup,
    schema_sql, schema_upgrade_sql,
};
use support::{
    Isolation, PgServer, fresh_schema, grant, now, options_for, shared_server, store_on,
};

const MINUTE: Duration = Duration::from_secs(60);

fn attempt() -> AttemptId {
    AttemptId::generate().unwrap()
}

/// The whole row as text, to prove a refused call changed nothing.
async fn row_text(
    admin: &tokio_postgres::Client,
    store: &PostgresApprovalStore,
    id: &ApprovalId,
) -> String {
    support::row_json(admin, store.grants_table(), id.as_str()).await
}

/// The fences of `ACTOR`/`RUN`: (run gen, run stopped, actor gen, actor stopped).
async fn fences(
    admin: &tokio_postgres::Client,
    store: &PostgresApprovalStore,
) -> (i64, bool, i64, bool) {
    let row = admin
        .query_one(
            &format!(
                "SELECT r.gen, r.stopped, a.gen, a.stopped FROM {} r JOIN {} a \
                 ON a.actor_id = r.actor_id WHERE r.actor_id = $1 AND r.run_id = $2",
                store.run_fences_table(),
                store.actor_fences_table()
            ),
            &[&support::ACTOR, &support::RUN],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

#[tokio::test]
async fn the_row_holds_every_field_a_format_and_a_seal() {
    let server = shared_server();
    let store = store_on(server, "layout", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let approved_at = Timestamp::from_millis(t0.as_millis() - 1_500);
    let approval = grant("a#layout", MINUTE, t0)
        .await
        .with_note("approved by ops")
        .unwrap()
        .approved_by(ApproverId::new("ops: ada «lovelace»").unwrap(), approved_at)
        .unwrap()
        .with_attempt_limit(7)
        .unwrap();
    let id = approval.id.clone();
    store.issue(approval.clone()).await.unwrap();

    let row = admin
        .query_one(
            &format!(
                "SELECT format, seal, actor_id, run_id, url, action, action_digest, issued_at, \
                 expires_at, approver_note, state, consumed_at, consumed_by, \
                 cardinality(abandoned_attempts), approver_id, approved_at, attempt_limit, \
                 failed_attempts, run_gen, actor_gen FROM {} WHERE id = $1",
                store.grants_table()
            ),
            &[&id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i16>(0), 2);
    let seal: String = row.get(1);
    assert_eq!(seal.len(), 64);
    assert!(
        seal.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(row.get::<_, String>(2), support::ACTOR);
    assert_eq!(row.get::<_, String>(3), support::RUN);
    assert_eq!(row.get::<_, String>(4), support::URL);
    assert_eq!(row.get::<_, String>(5), approval.action.canonical_json());
    assert_eq!(row.get::<_, String>(6), approval.action_digest.to_hex());
    assert_eq!(row.get::<_, i64>(7), t0.as_millis() as i64);
    assert_eq!(row.get::<_, i64>(8), approval.expires_at.as_millis() as i64);
    assert_eq!(
        row.get::<_, Option<String>>(9).as_deref(),
        Some("approved by ops")
    );
    assert_eq!(row.get::<_, String>(10), "active");
    assert_eq!(row.get::<_, Option<i64>>(11), None);
    assert_eq!(row.get::<_, Option<String>>(12), None);
    assert_eq!(row.get::<_, i32>(13), 0);
    assert_eq!(
        row.get::<_, Option<String>>(14).as_deref(),
        Some("ops: ada «lovelace»")
    );
    assert_eq!(
        row.get::<_, Option<i64>>(15),
        Some(approved_at.as_millis() as i64)
    );
    assert_eq!(row.get::<_, i64>(16), 7);
    assert_eq!(row.get::<_, i64>(17), 0);
    assert_eq!((row.get::<_, i64>(18), row.get::<_, i64>(19)), (0, 0));
    // Issue created the run's and the actor's fences, at generation 0.
    assert_eq!(fences(&admin, &store).await, (0, false, 0, false));

    // A mismatch counts in place; the seal never changes.
    let mut wrong = approval.binding();
    wrong.url = "https://docs.example.com/other".to_owned();
    assert_eq!(
        store
            .consume_once(&id, &wrong, t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Stale(StaleReason::Mismatch)
    );
    let attempt = attempt();
    let outcome = store
        .consume_once(&id, &approval.binding(), t0, &attempt)
        .await
        .unwrap();
    assert_eq!(outcome, ConsumeOutcome::Consumed { replay: false });
    let row = admin
        .query_one(
            &format!(
                "SELECT state, consumed_at, consumed_by, seal, failed_attempts FROM {} \
                 WHERE id = $1",
                store.grants_table()
            ),
            &[&id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "consumed");
    assert_eq!(row.get::<_, Option<i64>>(1), Some(t0.as_millis() as i64));
    assert_eq!(
        row.get::<_, Option<String>>(2).as_deref(),
        Some(attempt.as_str())
    );
    assert_eq!(row.get::<_, String>(3), seal, "the seal never changes");
    assert_eq!(row.get::<_, i64>(4), 1);
    let got = store.get(&id).await.unwrap().unwrap();
    assert_eq!(got.approval, approval);
    assert_eq!(got.failed_attempts, 1);
}

#[tokio::test]
async fn a_stop_moves_the_fences_and_leaves_the_grant_rows_alone() {
    let server = shared_server();
    let store = store_on(server, "stop_rows", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let (actor, run) = (
        ActorId::new(support::ACTOR).unwrap(),
        RunId::new(support::RUN).unwrap(),
    );
    let approval = grant("a#stoprows", MINUTE, t0).await;
    store.issue(approval.clone()).await.unwrap();
    let before = row_text(&admin, &store, &approval.id).await;
    assert_eq!(
        store.stop_run(&actor, &run, t0).await.unwrap(),
        StopOutcome {
            stopped_grants: 1,
            stopped_standing: 0,
            was_stopped: false
        }
    );
    assert_eq!(fences(&admin, &store).await, (1, true, 0, false));
    assert_eq!(row_text(&admin, &store, &approval.id).await, before);
    assert_eq!(
        store.get(&approval.id).await.unwrap().unwrap().state,
        GrantState::Stopped
    );
    assert_eq!(
        store.stop_actor(&actor, t0).await.unwrap(),
        StopOutcome {
            stopped_grants: 0,
            stopped_standing: 0,
            was_stopped: false
        }
    );
    assert_eq!(fences(&admin, &store).await, (1, true, 1, true));
    assert_eq!(
        store.resume_run(&actor, &run).await.unwrap(),
        ResumeOutcome::Resumed
    );
    assert_eq!(
        store.resume_actor(&actor).await.unwrap(),
        ResumeOutcome::Resumed
    );
    assert_eq!(fences(&admin, &store).await, (1, false, 1, false));
    // A new grant records the fences' generations then; the stopped one stays stopped.
    let fresh = grant("a#stoprows", MINUTE, t0).await;
    store.issue(fresh.clone()).await.unwrap();
    let gens: (i64, i64) = {
        let row = admin
            .query_one(
                &format!(
                    "SELECT run_gen, actor_gen FROM {} WHERE id = $1",
                    store.grants_table()
                ),
                &[&fresh.id.as_str()],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(gens, (1, 1));
    assert_eq!(
        store
            .consume_once(&approval.id, &approval.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Stale(StaleReason::Stopped)
    );
    assert_eq!(row_text(&admin, &store, &approval.id).await, before);
    assert_eq!(
        store
            .consume_once(&fresh.id, &fresh.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}

/// Each way of altering a row by hand, as SQL on the row of `$1`.
const TAMPERS: &[(&str, &str)] = &[
    (
        "action",
        "action = '{\"method\":\"click\",\"selector\":\"a#evil\"}'",
    ),
    ("url", "url = 'https://evil.example.com/'"),
    ("actor", "actor_id = 'someone-else'"),
    ("run", "run_id = 'other-run'"),
    ("expiry", "expires_at = expires_at + 86400000"),
    ("digest", "action_digest = repeat('0', 64)"),
    ("note", "approver_note = 'forged'"),
    ("format 1", "format = 1"),
    ("format 3", "format = 3"),
    ("seal", "seal = repeat('a', 64)"),
    ("state", "state = 'paused'"),
    ("half consumed", "consumed_by = 'att_0123'"),
    ("consumed without by", "state = 'consumed', consumed_at = 1"),
    (
        "bad attempt",
        "state = 'consumed', consumed_at = 1, consumed_by = 'not an attempt'",
    ),
    ("negative issued", "issued_at = -1"),
    ("abandoned junk", "abandoned_attempts = ARRAY['x y']"),
    ("abandoned null", "abandoned_attempts = ARRAY[NULL]::text[]"),
    (
        "abandoned repeated",
        "abandoned_attempts = ARRAY['att_1', 'att_1']",
    ),
    (
        "abandoned beyond the bound",
        "abandoned_attempts = ARRAY(SELECT 'att_' || n FROM generate_series(1, 17) AS n)",
    ),
    (
        "consumed by an abandoned attempt",
        "state = 'consumed', consumed_at = 1, consumed_by = 'att_1', \
         abandoned_attempts = ARRAY['att_1']",
    ),
    ("page revision", "page_revision = 'rev-forged'"),
    ("element removed", "element = NULL"),
    (
        "element changed to another valid identity",
        "element = replace(element, '\"role\":\"button\"', '\"role\":\"link\"')",
    ),
    ("element not an identity", "element = '{}'"),
    ("element not canonical", "element = ' ' || element"),
    ("session", "session_id = 'session-forged'"),
    ("approver", "approver_id = 'someone-else'"),
    ("approver added", "approver_id = 'ops', approved_at = 1"),
    ("approval time", "approved_at = approved_at - 1"),
    ("approver half removed", "approved_at = NULL"),
    ("attempt limit raised", "attempt_limit = 100"),
    ("attempt limit out of range", "attempt_limit = 4294967296"),
    ("run generation", "run_gen = run_gen + 1"),
    ("actor generation", "actor_gen = actor_gen - 1"),
    ("failed attempts negative", "failed_attempts = -1"),
    (
        "failed attempts out of range",
        "failed_attempts = 4294967296",
    ),
    (
        "locked with consumed columns",
        "state = 'locked', consumed_at = 1",
    ),
    ("active at its attempt limit", "failed_attempts = 5"),
    ("active far past its attempt limit", "failed_attempts = 999"),
    (
        "revoked at its attempt limit",
        "state = 'revoked', failed_attempts = 5",
    ),
    (
        "consumed past its attempt limit",
        "state = 'consumed', consumed_at = 1, consumed_by = 'att_1', failed_attempts = 6",
    ),
    (
        "locked below its attempt limit",
        "state = 'locked', failed_attempts = 4",
    ),
    (
        "locked past its attempt limit",
        "state = 'locked', failed_attempts = 6",
    ),
];

/// What is wrong with a row altered by hand, as consume and get say it (the
/// consume statement leaves the row alone, and the reader names the fault).
#[tokio::test]
async fn a_row_altered_by_hand_says_what_is_wrong() {
    let server = shared_server();
    let store = store_on(server, "tamper_said", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let cases = [
        (
            "state = 'consumed', consumed_by = 'att_1'",
            "consumed row lacks consumed_at",
        ),
        ("state = 'consumed'", "consumed row lacks consumed_at"),
        (
            "state = 'consumed', consumed_at = 1",
            "consumed row lacks consumed_by",
        ),
        (
            "state = 'consumed', consumed_at = -1, consumed_by = 'att_1'",
            "consumed_at is negative",
        ),
        (
            "state = 'consumed', consumed_at = 1, consumed_by = 'not an attempt'",
            "consumed_by is not an attempt id",
        ),
        (
            "failed_attempts = 999",
            "failed_attempts reaches the attempt limit of a row that is not locked",
        ),
        (
            "failed_attempts = 5",
            "failed_attempts reaches the attempt limit of a row that is not locked",
        ),
        (
            "state = 'locked', failed_attempts = 4",
            "locked row does not count its limit of failed attempts",
        ),
    ];
    for (change, message) in cases {
        let (approval, before) = issue_tampered(&store, &admin, change, t0).await;
        let id = approval.id.clone();
        let consumed = store
            .consume_once(&id, &approval.binding(), t0, &attempt())
            .await
            .map(|o| format!("{o:?}"));
        let read = store.get(&id).await.map(|g| format!("{g:?}"));
        for (what, answer) in [("consume", consumed), ("get", read)] {
            match answer {
                Err(StoreError::Corrupt { key, message: said }) => {
                    assert_eq!(said, message, "{change}: {what}");
                    assert_eq!(key, id.as_str(), "{change}: {what}");
                }
                other => panic!("{change}: {what} answered {other:?}"),
            }
        }
        assert_eq!(row_text(&admin, &store, &id).await, before, "{change}");
    }
}

/// Issues a fresh grant (approved by `ops`), alters its row by `change`
/// (SQL for the row of `$1`), and returns the grant and the altered row.
async fn issue_tampered(
    store: &PostgresApprovalStore,
    admin: &tokio_postgres::Client,
    change: &str,
    t0: Timestamp,
) -> (Approval, String) {
    // Bound to a page with an element, so tampering with the element's
    // column is among the cases.
    let page = countersign_approval_core::PageBinding::new("session", "tab", "rev-1")
        .with_element(support::element());
    let approval = grant("a#tamper", MINUTE, t0)
        .await
        .approved_by(ApproverId::new("ops").unwrap(), t0)
        .and_then(|a| a.bound_to_page(&page))
        .unwrap();
    store.issue(approval.clone()).await.unwrap();
    admin
        .execute(
            &format!("UPDATE {} SET {change} WHERE id = $1", store.grants_table()),
            &[&approval.id.as_str()],
        )
        .await
        .unwrap();
    let before = row_text(admin, store, &approval.id).await;
    (approval, before)
}

#[tokio::test]
async fn a_row_altered_by_hand_is_refused_as_corrupt_and_left_unchanged() {
    let server = shared_server();
    let store = store_on(server, "tamper", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    for (what, change) in TAMPERS {
        let (approval, before) = issue_tampered(&store, &admin, change, t0).await;
        let id = approval.id.clone();

        let consumed = store
            .consume_once(&id, &approval.binding(), t0, &attempt())
            .await;
        assert!(
            matches!(&consumed, Err(StoreError::Corrupt { key, .. }) if key == id.as_str()),
            "{what}: consume answered {consumed:?}"
        );
        let read = store.get(&id).await;
        assert!(
            matches!(read, Err(StoreError::Corrupt { .. })),
            "{what}: get answered {read:?}"
        );
        let revoked = store.revoke(&id).await;
        assert!(
            matches!(revoked, Err(StoreError::Corrupt { .. })),
            "{what}: revoke answered {revoked:?}"
        );
        let abandoned = store.abandon(&id, &attempt(), t0).await;
        assert!(
            matches!(abandoned, Err(StoreError::Corrupt { .. })),
            "{what}: abandon answered {abandoned:?}"
        );
        assert_eq!(
            row_text(&admin, &store, &id).await,
            before,
            "{what}: the row changed"
        );
        assert!(!consumed.unwrap_err().is_retryable(), "{what}");
    }
}

#[tokio::test]
async fn a_consumed_row_altered_by_hand_is_refused_too() {
    let server = shared_server();
    let store = store_on(server, "tamper_consumed", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let approval = grant("a#tamper2", MINUTE, t0).await;
    let id = approval.id.clone();
    store.issue(approval.clone()).await.unwrap();
    let attempt = attempt();
    store
        .consume_once(&id, &approval.binding(), t0, &attempt)
        .await
        .unwrap();
    admin
        .execute(
            &format!(
                "UPDATE {} SET run_id = 'other-run' WHERE id = $1",
                store.grants_table()
            ),
            &[&id.as_str()],
        )
        .await
        .unwrap();
    let before = row_text(&admin, &store, &id).await;
    // Even the replay of the winning attempt is refused.
    let replay = store
        .consume_once(&id, &approval.binding(), t0, &attempt)
        .await;
    assert!(
        matches!(replay, Err(StoreError::Corrupt { .. })),
        "{replay:?}"
    );
    assert_eq!(row_text(&admin, &store, &id).await, before);
}

#[tokio::test]
async fn a_late_timestamp_is_rejected_not_truncated() {
    let store = store_on(shared_server(), "late", Isolation::ReadCommitted).await;
    let mut approval = grant("a#late", MINUTE, now()).await;
    approval.expires_at = Timestamp::from_millis(u64::MAX);
    let err = store.issue(approval.clone()).await.unwrap_err();
    assert!(
        matches!(err, IssueError::Store(StoreError::Rejected { .. })),
        "{err:?}"
    );
    assert_eq!(store.get(&approval.id).await.unwrap(), None);
    // A `now` past bigint is simply later than every grant.
    let live = grant("a#late", MINUTE, now()).await;
    store.issue(live.clone()).await.unwrap();
    let outcome = store
        .consume_once(
            &live.id,
            &live.binding(),
            Timestamp::from_millis(u64::MAX),
            &attempt(),
        )
        .await
        .unwrap();
    assert_eq!(outcome, ConsumeOutcome::Stale(StaleReason::Expired));
}

/// Relations and functions outside the pg_catalog and information_schema,
/// and outside every test schema.
async fn objects_outside_test_schemas(admin: &tokio_postgres::Client) -> (i64, i64) {
    let row = admin
        .query_one(
            "SELECT \
               (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname NOT LIKE 't\\_%' AND n.nspname NOT LIKE 'pg\\_%' \
                 AND n.nspname <> 'information_schema'), \
               (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
                 WHERE n.nspname NOT LIKE 't\\_%' AND n.nspname NOT LIKE 'pg\\_%' \
                 AND n.nspname <> 'information_schema')",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn schema_setup_is_versioned_idempotent_and_stays_inside_its_schema() {
    let server = shared_server();
    let admin = server.admin().await;
    let outside = objects_outside_test_schemas(&admin).await;
    let options = options_for(server, "setup", Isolation::ReadCommitted).table_prefix("cs_");
    let schema = options.schema_name().to_owned();

    // Several hosts starting at once apply the schema once.
    let starts: Vec<_> = (0..4)
        .map(|_| tokio::spawn(PostgresApprovalStore::connect(options.clone())))
        .collect();
    for start in starts {
        start.await.unwrap().unwrap();
    }
    let store = PostgresApprovalStore::connect(options.clone())
        .await
        .unwrap();
    assert_eq!(store.grants_table(), format!("\"{schema}\".\"cs_grants\""));
    assert_eq!(
        store.operations_table(),
        format!("\"{schema}\".\"cs_operations\"")
    );
    let versions: Vec<i32> = admin
        .query(
            &format!("SELECT version FROM \"{schema}\".cs_schema_version"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, vec![1, 2, 3, 4, 5, SCHEMA_VERSION]);
    let mut names: Vec<String> = admin
        .query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'i') ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "cs_actor_fences",
            "cs_actor_fences_pkey",
            "cs_grants",
            "cs_grants_actor_run",
            "cs_grants_expires_at",
            "cs_grants_pkey",
            "cs_notifications",
            "cs_notifications_done",
            "cs_notifications_due",
            "cs_notifications_pkey",
            "cs_operations",
            "cs_operations_finished_at",
            "cs_operations_operation_id",
            "cs_operations_pkey",
            "cs_operations_run",
            "cs_proposals",
            "cs_proposals_expires_at",
            "cs_proposals_pending",
            "cs_proposals_pkey",
            "cs_run_fences",
            "cs_run_fences_pkey",
            "cs_schema_version",
            "cs_schema_version_pkey",
            "cs_standing_grants",
            "cs_standing_grants_expiry",
            "cs_standing_grants_pkey",
            "cs_standing_grants_usable",
        ]
    );
    assert_eq!(objects_outside_test_schemas(&admin).await, outside);

    // Verify mode accepts the schema as it is.
    PostgresApprovalStore::connect(options.clone().schema_setup(SchemaSetup::Verify))
        .await
        .unwrap();

    // A schema newer than this library is refused in both modes.
    admin
        .execute(
            &format!(
                "INSERT INTO \"{schema}\".cs_schema_version (version, description) VALUES ({}, 'future')",
                SCHEMA_VERSION + 1
            ),
            &[],
        )
        .await
        .unwrap();
    for setup in [SchemaSetup::Apply, SchemaSetup::Verify] {
        let err = PostgresApprovalStore::connect(options.clone().schema_setup(setup))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ConnectError::Store(StoreError::Unsupported { message }) if message.contains("upgrade the library")),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn the_host_can_apply_the_printed_sql_and_connect_in_verify_mode() {
    let server = shared_server();
    let admin = server.admin().await;
    let options =
        options_for(server, "hostsql", Isolation::ReadCommitted).schema_setup(SchemaSetup::Verify);

    // Nothing applied yet: verify mode refuses to start and creates nothing.
    let err = PostgresApprovalStore::connect(options.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ConnectError::Store(StoreError::Unsupported { message }) if message.contains("schema_sql")),
        "{err:?}"
    );
    let exists: bool = admin
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&options.schema_name()],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!exists);

    let sql = schema_sql(&options).unwrap();
    admin
        .batch_execute(&format!("BEGIN;\n{sql}\nCOMMIT;"))
        .await
        .unwrap();
    let store = PostgresApprovalStore::connect(options).await.unwrap();
    let t0 = now();
    let approval = grant("a#hostsql", MINUTE, t0).await;
    store.issue(approval.clone()).await.unwrap();
    assert_eq!(
        store
            .consume_once(&approval.id, &approval.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}

#[tokio::test]
async fn purge_drops_exactly_what_stopped_mattering_past_the_retention() {
    let store = store_on(shared_server(), "purge", Isolation::ReadCommitted).await;
    let t0 = Timestamp::from_millis(1_000_000_000);
    let retention = Duration::from_secs(3600);
    // Expires at t0 + 1 min, consumed at t0: purgeable from t0 + 1 min + 1 h.
    let consumed = grant("a#p1", MINUTE, t0).await;
    store.issue(consumed.clone()).await.unwrap();
    store
        .consume_once(&consumed.id, &consumed.binding(), t0, &attempt())
        .await
        .unwrap();
    let revoked = grant("a#p2", MINUTE, t0).await;
    store.issue(revoked.clone()).await.unwrap();
    assert_eq!(
        store.revoke(&revoked.id).await.unwrap(),
        RevokeOutcome::Revoked
    );
    let expired = grant("a#p3", MINUTE, t0).await;
    store.issue(expired.clone()).await.unwrap();
    let later = grant("a#p4", Duration::from_secs(7200), t0).await;
    store.issue(later.clone()).await.unwrap();

    let boundary = t0.saturating_add(MINUTE + retention);
    assert_eq!(
        store
            .purge(Timestamp::from_millis(0), retention)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .purge(Timestamp::from_millis(boundary.as_millis() - 1), retention)
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.purge(boundary, retention).await.unwrap(), 3);
    for gone in [&consumed.id, &revoked.id, &expired.id] {
        assert_eq!(store.get(gone).await.unwrap(), None);
        assert_eq!(
            store
                .consume_once(gone, &consumed.binding(), boundary, &attempt())
                .await
                .unwrap(),
            ConsumeOutcome::Unknown
        );
    }
    assert!(store.get(&later.id).await.unwrap().is_some());
    assert_eq!(store.purge(boundary, retention).await.unwrap(), 0);
}

#[tokio::test]
async fn purge_walks_the_expiry_index() {
    let server = shared_server();
    let store = store_on(server, "purge_plan", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    admin
        .batch_execute("SET enable_seqscan = off")
        .await
        .unwrap();
    let plan: Vec<String> = admin
        .query(
            &format!(
                "EXPLAIN SELECT id FROM {} WHERE expires_at <= 5 LIMIT 10",
                store.grants_table()
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(plan.join("\n").contains("grants_expires_at"), "{plan:?}");
}

fn record(op: &OperationId, run: &str, finished: u64) -> OperationRecord {
    OperationRecord {
        operation_id: op.clone(),
        actor_id: ActorId::new(support::ACTOR).unwrap(),
        run_id: RunId::new(run).unwrap(),
        approval_id: GivenApprovalId::from_text("apr_given"),
        url: Some(support::URL.to_owned()),
        action_digest: None,
        approver_id: None,
        outcome: OutcomeCode::ApprovalStale,
        reason: "grant expired".to_owned(),
        started_at: Timestamp::from_millis(finished - 5),
        finished_at: Timestamp::from_millis(finished),
    }
}

#[tokio::test]
async fn the_operation_log_records_once_reads_back_and_purges() {
    let server = shared_server();
    let store = store_on(server, "oplog", Isolation::Serializable).await;
    let log = store.operation_log();
    let (url, action) = support::url_and_action("a#log").await;
    let _ = url;
    let first = OperationId::generate().unwrap();
    let mut with_digest = record(&first, "run-a", 10_000);
    with_digest.action_digest = Some(action.digest());
    with_digest.outcome = OutcomeCode::Ok;
    with_digest.reason = String::new();
    with_digest.approver_id = Some(ApproverId::new("ops «ü» \"q\" ".repeat(16)).unwrap());
    log.record(with_digest.clone()).await.unwrap();
    assert_eq!(log.get(&first).await.unwrap(), Some(with_digest.clone()));
    // A retry of the same write is fine and adds nothing.
    log.record(with_digest.clone()).await.unwrap();
    // Something else under the same id is refused.
    let mut other = with_digest.clone();
    other.outcome = OutcomeCode::BackendFailed;
    let err = log.record(other).await.unwrap_err();
    assert!(matches!(err, StoreError::Rejected { .. }), "{err:?}");
    assert_eq!(log.get(&first).await.unwrap(), Some(with_digest));

    let second = OperationId::generate().unwrap();
    log.record(record(&second, "run-b", 20_000)).await.unwrap();
    let admin = server.admin().await;
    let count: i64 = admin
        .query_one(
            &format!("SELECT count(*) FROM {}", store.operations_table()),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 2);
    let retention = Duration::from_secs(5);
    assert_eq!(
        log.purge(Timestamp::from_millis(14_999), retention)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        log.purge(Timestamp::from_millis(15_000), retention)
            .await
            .unwrap(),
        1
    );
    assert_eq!(log.get(&first).await.unwrap(), None);
    assert!(log.get(&second).await.unwrap().is_some());
}

#[tokio::test]
async fn the_probe_warns_about_settings_that_lose_commits() {
    let server = shared_server();
    let store = store_on(server, "probe", Isolation::ReadCommitted).await;
    assert!(
        store.startup_warnings().is_empty(),
        "{:?}",
        store.startup_warnings()
    );
    let options =
        PostgresStoreOptions::new(server.connection("options='-c synchronous_commit=off'"))
            .schema(fresh_schema("probe_off"));
    let store = PostgresApprovalStore::connect(options).await.unwrap();
    assert_eq!(store.startup_warnings().len(), 1);
    assert!(store.startup_warnings()[0].starts_with("synchronous_commit is off"));
}

#[tokio::test]
async fn connect_fails_fast_and_closed() {
    // Invalid options: nothing contacted.
    let err =
        PostgresApprovalStore::connect(PostgresStoreOptions::new("host=127.0.0.1").schema("Bad"))
            .await
            .unwrap_err();
    assert!(matches!(err, ConnectError::InvalidOptions(_)), "{err:?}");
    // Nobody listening: unavailable, not a hang.
    let port = support::free_port();
    let started = std::time::Instant::now();
    let err = PostgresApprovalStore::connect(
        PostgresStoreOptions::new(format!("host=127.0.0.1 port={port} user=postgres"))
            .connect_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ConnectError::Store(e) if e.is_retryable()),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn a_grant_round_trips_through_get() {
    let store = store_on(shared_server(), "roundtrip", Isolation::RepeatableRead).await;
    let t0 = now();
    let mut approval = grant("a#rt", MINUTE, t0)
        .await
        .with_note("é ✓ note")
        .unwrap();
    approval.page_revision = Some("rev:1;2".to_owned());
    approval.session_id = Some(String::new());
    store.issue(approval.clone()).await.unwrap();
    let got = store.get(&approval.id).await.unwrap().unwrap();
    assert_eq!(got.approval, approval);
    assert_eq!(got.state, GrantState::Active);
    let err = store.issue(approval.clone()).await.unwrap_err();
    assert_eq!(err, IssueError::AlreadyExists(approval.id.clone()));
}

/// A separate server, so a test can shut it down.
#[tokio::test]
async fn a_store_on_a_stopped_server_answers_unavailable() {
    let server = PgServer::start();
    let store = store_on(&server, "stopped", Isolation::ReadCommitted).await;
    let t0 = now();
    let approval = grant("a#stop", MINUTE, t0).await;
    store.issue(approval.clone()).await.unwrap();
    server.kill();
    let err = store
        .consume_once(&approval.id, &approval.binding(), t0, &attempt())
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
}

#[tokio::test]
async fn abandon_restores_in_place_and_the_abandoned_attempt_never_consumes() {
    let server = shared_server();
    let store = store_on(server, "abandon_row", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let approval = grant("a#abandon", MINUTE, t0).await;
    let id = approval.id.clone();
    store.issue(approval.clone()).await.unwrap();
    let seal_of = |row: &tokio_postgres::Row| row.get::<_, String>(0);
    let select = format!(
        "SELECT seal, state, consumed_at, consumed_by, abandoned_attempts FROM {} WHERE id = $1",
        store.grants_table()
    );
    let issued = admin.query_one(&select, &[&id.as_str()]).await.unwrap();

    let lost = attempt();
    assert_eq!(
        store
            .consume_once(&id, &approval.binding(), t0, &lost)
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    assert_eq!(
        store.abandon(&id, &lost, t0).await.unwrap(),
        AbandonOutcome::Usable { restored: true }
    );
    let row = admin.query_one(&select, &[&id.as_str()]).await.unwrap();
    assert_eq!(seal_of(&row), seal_of(&issued), "the seal never changes");
    assert_eq!(row.get::<_, String>(1), "active");
    assert_eq!(row.get::<_, Option<i64>>(2), None);
    assert_eq!(row.get::<_, Option<String>>(3), None);
    assert_eq!(row.get::<_, Vec<String>>(4), vec![lost.as_str().to_owned()]);
    // Repeating it changes nothing and says so.
    assert_eq!(
        store.abandon(&id, &lost, t0).await.unwrap(),
        AbandonOutcome::Usable { restored: false }
    );
    let before = row_text(&admin, &store, &id).await;
    // The abandoned attempt is refused by the statement itself, the row unchanged.
    assert_eq!(
        store
            .consume_once(&id, &approval.binding(), t0, &lost)
            .await
            .unwrap(),
        ConsumeOutcome::Stale(StaleReason::Abandoned)
    );
    assert_eq!(row_text(&admin, &store, &id).await, before);
    // Another attempt still consumes it.
    assert_eq!(
        store
            .consume_once(&id, &approval.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}

#[tokio::test]
async fn abandoning_one_attempt_past_the_bound_revokes_the_grant() {
    let store = store_on(shared_server(), "abandon_cap", Isolation::Serializable).await;
    let t0 = now();
    let approval = grant("a#cap", MINUTE, t0).await;
    let id = approval.id.clone();
    store.issue(approval.clone()).await.unwrap();
    for _ in 0..countersign_approval_core::MAX_ABANDONED_ATTEMPTS {
        assert_eq!(
            store.abandon(&id, &attempt(), t0).await.unwrap(),
            AbandonOutcome::Usable { restored: false }
        );
    }
    assert_eq!(
        store.abandon(&id, &attempt(), t0).await.unwrap(),
        AbandonOutcome::Revoked
    );
    assert_eq!(
        store.get(&id).await.unwrap().unwrap().state,
        GrantState::Revoked
    );
    assert_eq!(
        store
            .abandon(&ApprovalId::generate().unwrap(), &attempt(), t0)
            .await
            .unwrap(),
        AbandonOutcome::Unknown
    );
}

#[tokio::test]
async fn the_operation_log_bound_hides_and_purges_the_oldest_records() {
    let store = store_on(shared_server(), "oplog_bound", Isolation::ReadCommitted).await;
    let log = store.operation_log().with_max_records(3);
    let run = RunId::new("run-bounded").unwrap();
    let mut ids = Vec::new();
    for n in 0..5u64 {
        let id = OperationId::generate().unwrap();
        log.record(record(&id, run.as_str(), 10_000 + n))
            .await
            .unwrap();
        ids.push(id);
    }
    let kept: Vec<OperationId> = log
        .records_for_run(&run)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.operation_id)
        .collect();
    assert_eq!(kept, ids[2..]);
    assert_eq!(log.record_for_operation(&ids[1]).await.unwrap(), None);
    // Nothing is old by age; the two beyond the bound go.
    assert_eq!(
        log.purge(Timestamp::from_millis(10_000), Duration::from_secs(60))
            .await
            .unwrap(),
        2
    );
    let unbounded = store.operation_log();
    assert_eq!(unbounded.records_for_run(&run).await.unwrap().len(), 3);
}

#[tokio::test]
async fn every_form_of_given_approval_id_round_trips_and_a_mixed_row_is_corrupt() {
    let store = store_on(shared_server(), "oplog_given", Isolation::ReadCommitted).await;
    let log = store.operation_log();
    let run = RunId::new("run-given").unwrap();
    let mut written = Vec::new();
    for given in [
        GivenApprovalId::Absent,
        GivenApprovalId::from_text("apr_given"),
        GivenApprovalId::from_text("not an id \u{2028} \"quoted\""),
        GivenApprovalId::not_a_string("object"),
    ] {
        let mut r = record(&OperationId::generate().unwrap(), run.as_str(), 30_000);
        r.approval_id = given;
        log.record(r.clone()).await.unwrap();
        written.push(r);
    }
    assert_eq!(log.records_for_run(&run).await.unwrap(), written);
    for r in &written {
        assert_eq!(
            log.record_for_operation(&r.operation_id)
                .await
                .unwrap()
                .as_ref(),
            Some(r)
        );
    }
    let admin = shared_server().admin().await;
    admin
        .execute(
            &format!(
                "UPDATE {} SET approval_id_json_type = 'number' WHERE operation_id = $1",
                store.operations_table()
            ),
            &[&written[1].operation_id.as_str()],
        )
        .await
        .unwrap();
    let read = log.record_for_operation(&written[1].operation_id).await;
    assert!(matches!(read, Err(StoreError::Corrupt { .. })), "{read:?}");
    // An approver id no host could have given is refused too.
    admin
        .execute(
            &format!(
                "UPDATE {} SET approver_id = 'ops' || chr(1) WHERE operation_id = $1",
                store.operations_table()
            ),
            &[&written[2].operation_id.as_str()],
        )
        .await
        .unwrap();
    let read = log.record_for_operation(&written[2].operation_id).await;
    assert!(matches!(read, Err(StoreError::Corrupt { .. })), "{read:?}");
}

#[tokio::test]
async fn a_fence_altered_by_hand_makes_its_grants_corrupt_and_changes_nothing() {
    let server = shared_server();
    let store = store_on(server, "fence_tamper", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let approval = grant("a#fence", MINUTE, t0).await;
    let id = approval.id.clone();
    store.issue(approval.clone()).await.unwrap();
    let run_fence = format!(
        "{} WHERE actor_id = '{}' AND run_id = '{}'",
        store.run_fences_table(),
        support::ACTOR,
        support::RUN
    );
    let actor_fence = format!(
        "{} WHERE actor_id = '{}'",
        store.actor_fences_table(),
        support::ACTOR
    );
    let tampers = [
        (
            "run fence deleted",
            format!("DELETE FROM {run_fence}"),
            format!(
                "INSERT INTO {} (actor_id, run_id) VALUES ('{}', '{}')",
                store.run_fences_table(),
                support::ACTOR,
                support::RUN
            ),
        ),
        (
            "actor fence deleted",
            format!("DELETE FROM {actor_fence}"),
            format!(
                "INSERT INTO {} (actor_id) VALUES ('{}')",
                store.actor_fences_table(),
                support::ACTOR
            ),
        ),
        (
            "run fence behind the grant",
            format!(
                "UPDATE {} SET gen = -1 WHERE actor_id = '{}' AND run_id = '{}'",
                store.run_fences_table(),
                support::ACTOR,
                support::RUN
            ),
            format!(
                "UPDATE {} SET gen = 0 WHERE actor_id = '{}' AND run_id = '{}'",
                store.run_fences_table(),
                support::ACTOR,
                support::RUN
            ),
        ),
        (
            "actor fence behind the grant",
            format!(
                "UPDATE {} SET gen = -1 WHERE actor_id = '{}'",
                store.actor_fences_table(),
                support::ACTOR
            ),
            format!(
                "UPDATE {} SET gen = 0 WHERE actor_id = '{}'",
                store.actor_fences_table(),
                support::ACTOR
            ),
        ),
    ];
    for (what, tamper, repair) in &tampers {
        admin.batch_execute(tamper).await.unwrap();
        let before = row_text(&admin, &store, &id).await;
        let consumed = store
            .consume_once(&id, &approval.binding(), t0, &attempt())
            .await;
        assert!(
            matches!(consumed, Err(StoreError::Corrupt { .. })),
            "{what}: consume answered {consumed:?}"
        );
        let read = store.get(&id).await;
        assert!(
            matches!(read, Err(StoreError::Corrupt { .. })),
            "{what}: {read:?}"
        );
        let revoked = store.revoke(&id).await;
        assert!(
            matches!(revoked, Err(StoreError::Corrupt { .. })),
            "{what}: {revoked:?}"
        );
        let abandoned = store.abandon(&id, &attempt(), t0).await;
        assert!(
            matches!(abandoned, Err(StoreError::Corrupt { .. })),
            "{what}: {abandoned:?}"
        );
        assert_eq!(row_text(&admin, &store, &id).await, before, "{what}");
        admin.batch_execute(repair).await.unwrap();
        assert_eq!(
            store.get(&id).await.unwrap().unwrap().state,
            GrantState::Active,
            "{what}: repaired"
        );
    }
    assert_eq!(
        store
            .consume_once(&id, &approval.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}

/// Schema version 1 exactly as that release created it (its SQL file,
/// with the placeholders filled in by hand), with its version recorded.
async fn create_version_1(admin: &tokio_postgres::Client, schema: &str) {
    let sql = include_str!("../src/sql/0001_grants_and_operations.sql");
    let mut rendered = sql.replace("{schema}", &format!("\"{schema}\""));
    for name in [
        "grants",
        "operations",
        "grants_expires_at",
        "operations_operation_id",
        "operations_run",
        "operations_finished_at",
    ] {
        rendered = rendered
            .replace(
                &format!("{{table:{name}}}"),
                &format!("\"{schema}\".\"{name}\""),
            )
            .replace(&format!("{{name:{name}}}"), &format!("\"{name}\""));
    }
    assert!(!rendered.contains('{'), "{rendered}");
    admin
        .batch_execute(&format!(
            "BEGIN; CREATE SCHEMA \"{schema}\"; \
             CREATE TABLE \"{schema}\".schema_version (version integer NOT NULL PRIMARY KEY, \
             description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now()); \
             {rendered}; \
             INSERT INTO \"{schema}\".schema_version (version, description) \
             VALUES (1, 'grants and operations'); COMMIT;"
        ))
        .await
        .unwrap();
}

/// Writes `approval` as a version 1 row (format 1, sealed as version 1
/// sealed), in `state`.
async fn insert_version_1_row(
    admin: &tokio_postgres::Client,
    schema: &str,
    approval: &countersign_approval_core::Approval,
    consumed: Option<(i64, &str)>,
) {
    let v1_seal = [
        "format::text",
        "id",
        "actor_id",
        "run_id",
        "url",
        "action",
        "action_digest",
        "issued_at::text",
        "expires_at::text",
        "approver_note",
        "page_revision",
        "operation_id",
        "session_id",
    ]
    .iter()
    .map(|c| format!("coalesce(octet_length({c})::text || ':' || {c}, '-') || ';'"))
    .collect::<Vec<_>>()
    .join(" || ");
    admin
        .execute(
            &format!(
                "INSERT INTO \"{schema}\".grants (id, format, seal, actor_id, run_id, url, action, \
                 action_digest, issued_at, expires_at, approver_note, state, consumed_at, \
                 consumed_by) VALUES ($1, 1, '', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
            ),
            &[
                &approval.id.as_str(),
                &approval.actor_id.as_str(),
                &approval.run_id.as_str(),
                &approval.url,
                &approval.action.canonical_json(),
                &approval.action_digest.to_hex(),
                &(approval.issued_at.as_millis() as i64),
                &(approval.expires_at.as_millis() as i64),
                &approval.approver_note,
                &if consumed.is_some() {
                    "consumed"
                } else {
                    "active"
                },
                &consumed.map(|(at, _)| at),
                &consumed.map(|(_, by)| by),
            ],
        )
        .await
        .unwrap();
    admin
        .execute(
            &format!(
                "UPDATE \"{schema}\".grants SET seal = \
                 encode(sha256(convert_to({v1_seal}, 'UTF8')), 'hex') WHERE id = $1"
            ),
            &[&approval.id.as_str()],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_version_1_schema_is_upgraded_in_place_at_connect() {
    let server = shared_server();
    let admin = server.admin().await;
    let options = options_for(server, "upgrade", Isolation::ReadCommitted);
    let schema = options.schema_name().to_owned();
    create_version_1(&admin, &schema).await;
    let t0 = now();
    let active = grant("a#v1", MINUTE, t0)
        .await
        .with_note("from version 1")
        .unwrap();
    let consumed = grant("a#v1", MINUTE, t0).await;
    let forged = grant("a#v1", MINUTE, t0).await;
    let other_run = {
        let (url, action) = support::url_and_action("a#v1").await;
        countersign_approval_core::Approval::for_action(
            ActorId::new("actor-v1").unwrap(),
            RunId::new("run-v1").unwrap(),
            &url,
            &action,
            MINUTE,
            t0,
        )
        .unwrap()
    };
    let winner = attempt();
    insert_version_1_row(&admin, &schema, &active, None).await;
    insert_version_1_row(
        &admin,
        &schema,
        &consumed,
        Some((t0.as_millis() as i64, winner.as_str())),
    )
    .await;
    insert_version_1_row(&admin, &schema, &forged, None).await;
    insert_version_1_row(&admin, &schema, &other_run, None).await;
    admin
        .execute(
            &format!(
                "UPDATE \"{schema}\".grants SET url = 'https://evil.example.com/' WHERE id = $1"
            ),
            &[&forged.id.as_str()],
        )
        .await
        .unwrap();
    let op = OperationId::generate().unwrap();
    admin
        .execute(
            &format!(
                "INSERT INTO \"{schema}\".operations (operation_id, actor_id, run_id, approval_id, \
                 outcome, reason, started_at, finished_at) \
                 VALUES ($1, 'actor-1', 'run-1', 'apr_given', 'ok', '', 1, 2)"
            ),
            &[&op.as_str()],
        )
        .await
        .unwrap();

    // Verify mode refuses the old schema and names the way out.
    let err = PostgresApprovalStore::connect(options.clone().schema_setup(SchemaSetup::Verify))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ConnectError::Store(StoreError::Unsupported { message }) if message.contains("version 1")),
        "{err:?}"
    );
    // Apply mode upgrades it in place.
    let store = PostgresApprovalStore::connect(options.clone())
        .await
        .unwrap();
    let versions = support::schema_versions(&admin, &schema).await;
    assert_eq!(versions, vec![1, 2, 3, 4, 5, 6]);
    let formats: Vec<(String, i16)> = admin
        .query(
            &format!("SELECT id, format FROM \"{schema}\".grants ORDER BY id"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for (id, format) in &formats {
        let wanted = if id == forged.id.as_str() { 1 } else { 2 };
        assert_eq!(*format, wanted, "{id}");
    }

    // The old grants read back as they were, with the defaults of the new fields.
    let got = store.get(&active.id).await.unwrap().unwrap();
    assert_eq!(got.approval, active);
    assert_eq!(got.approval.approver, None);
    assert_eq!(got.approval.attempt_limit, 5);
    assert_eq!((got.state, got.failed_attempts), (GrantState::Active, 0));
    assert_eq!(
        store.get(&consumed.id).await.unwrap().unwrap().state,
        GrantState::Consumed {
            at: Timestamp::from_millis(t0.as_millis()),
            by: winner.clone()
        }
    );
    assert_eq!(
        store
            .consume_once(&consumed.id, &consumed.binding(), t0, &winner)
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: true }
    );
    // A row whose version 1 seal did not hold is still refused.
    let err = store.get(&forged.id).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    // The fences of the old grants exist: a stop counts and stops them.
    assert_eq!(
        store
            .stop_run(&other_run.actor_id, &other_run.run_id, t0)
            .await
            .unwrap(),
        StopOutcome {
            stopped_grants: 1,
            stopped_standing: 0,
            was_stopped: false
        }
    );
    assert_eq!(
        store
            .consume_once(&other_run.id, &other_run.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Stale(StaleReason::Stopped)
    );
    assert_eq!(
        store
            .consume_once(&active.id, &active.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    // The old operation record reads back without an approver.
    let record = store.operation_log().get(&op).await.unwrap().unwrap();
    assert_eq!(record.approver_id, None);
    assert_eq!(record.outcome, OutcomeCode::Ok);
    // Connecting again changes nothing; verify mode accepts the result.
    PostgresApprovalStore::connect(options.clone())
        .await
        .unwrap();
    PostgresApprovalStore::connect(options.schema_setup(SchemaSetup::Verify))
        .await
        .unwrap();
}

#[tokio::test]
async fn the_host_can_apply_the_printed_upgrade_from_version_1() {
    let server = shared_server();
    let admin = server.admin().await;
    let options = options_for(server, "upgrade_sql", Isolation::ReadCommitted)
        .schema_setup(SchemaSetup::Verify);
    let schema = options.schema_name().to_owned();
    create_version_1(&admin, &schema).await;
    let t0 = now();
    let old = grant("a#v1sql", MINUTE, t0).await;
    insert_version_1_row(&admin, &schema, &old, None).await;

    let sql = schema_upgrade_sql(&options, 1).unwrap();
    assert!(
        !sql.contains("VALUES (1, "),
        "only the steps after version 1"
    );
    admin
        .batch_execute(&format!("BEGIN;\n{sql}\nCOMMIT;"))
        .await
        .unwrap();
    let store = PostgresApprovalStore::connect(options).await.unwrap();
    assert_eq!(store.get(&old.id).await.unwrap().unwrap().approval, old);
    assert_eq!(
        store
            .consume_once(&old.id, &old.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}
