//! The PostgreSQL store on one server this test binary starts: row layout,
//! rows altered by hand, schema setup, purge, the operation log, options
//! and the start-up probe.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, ApprovalId, ApprovalStore, AttemptId, ConsumeOutcome, GivenApprovalId,
    GrantState, IssueError, OperationId, OperationLog, OperationRecord, OutcomeCode, RevokeOutcome,
    RunId, StaleReason, StoreError, Timestamp,
};
use countersign_store_postgres::{
    ConnectError, PostgresApprovalStore, PostgresStoreOptions, SCHEMA_VERSION, SchemaSetup,
    schema_sql,
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
    admin
        .query_one(
            &format!(
                "SELECT row_to_json(g)::text FROM {} g WHERE id = $1",
                store.grants_table()
            ),
            &[&id.as_str()],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn the_row_holds_every_field_a_format_and_a_seal() {
    let server = shared_server();
    let store = store_on(server, "layout", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let approval = grant("a#layout", MINUTE, t0)
        .await
        .with_note("approved by ops")
        .unwrap();
    let id = approval.id.clone();
    store.issue(approval.clone()).await.unwrap();

    let row = admin
        .query_one(
            &format!(
                "SELECT format, seal, actor_id, run_id, url, action, action_digest, issued_at, \
                 expires_at, approver_note, state, consumed_at, consumed_by, \
                 cardinality(abandoned_attempts) FROM {} WHERE id = $1",
                store.grants_table()
            ),
            &[&id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i16>(0), 1);
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

    let attempt = attempt();
    let outcome = store
        .consume_once(&id, &approval.binding(), t0, &attempt)
        .await
        .unwrap();
    assert_eq!(outcome, ConsumeOutcome::Consumed { replay: false });
    let row = admin
        .query_one(
            &format!(
                "SELECT state, consumed_at, consumed_by, seal FROM {} WHERE id = $1",
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
    ("format", "format = 2"),
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
    ("session", "session_id = 'session-forged'"),
];

#[tokio::test]
async fn a_row_altered_by_hand_is_refused_as_corrupt_and_left_unchanged() {
    let server = shared_server();
    let store = store_on(server, "tamper", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    for (what, change) in TAMPERS {
        let approval = grant("a#tamper", MINUTE, t0).await;
        let id = approval.id.clone();
        store.issue(approval.clone()).await.unwrap();
        admin
            .execute(
                &format!("UPDATE {} SET {change} WHERE id = $1", store.grants_table()),
                &[&id.as_str()],
            )
            .await
            .unwrap();
        let before = row_text(&admin, &store, &id).await;

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
    assert_eq!(versions, vec![SCHEMA_VERSION]);
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
            "cs_grants",
            "cs_grants_expires_at",
            "cs_grants_pkey",
            "cs_operations",
            "cs_operations_finished_at",
            "cs_operations_operation_id",
            "cs_operations_pkey",
            "cs_operations_run",
            "cs_schema_version",
            "cs_schema_version_pkey",
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
}
