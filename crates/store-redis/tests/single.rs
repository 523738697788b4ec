//! The Redis store on one server this test binary starts: record layout,
//! expiry, corrupt records, options, the start-up probe, timeouts and
//! durability.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashMap;
use std::time::Duration;

use countersign_approval_core::{
    ActorId, ApprovalId, ApprovalStore, AttemptId, Binding, ConsumeOutcome, GrantState, IssueError,
    RevokeOutcome, RunId, StaleReason, StoreError, Timestamp,
};
use countersign_store_redis::{
    ConnectError, Durability, GrantScript, RedisApprovalStore, RedisStoreOptions,
};
use redis::Commands;
use support::{RedisServer, grant, now, shared_server, store_on};

const MINUTE: Duration = Duration::from_secs(60);

async fn conformance_store() -> RedisApprovalStore {
    store_on(shared_server(), "kit").await
}

countersign_store_conformance::store_conformance_tests!(single_conformance, conformance_store());

fn attempt() -> AttemptId {
    AttemptId::generate().unwrap()
}

#[tokio::test]
async fn record_layout_holds_every_field_and_a_version() {
    let server = shared_server();
    let store = store_on(server, "layout").await;
    let t0 = now();
    let approval = grant("a#layout", MINUTE, t0)
        .await
        .with_note("approved by ops")
        .unwrap();
    let id = approval.id.clone();
    store.issue(approval.clone()).await.unwrap();

    let key = store.grant_key(&id);
    assert_eq!(key, format!("{}:grant:{{{}}}", store.prefix(), id));
    let mut conn = server.conn();
    let fields: HashMap<String, String> = conn.hgetall(&key).unwrap();
    assert_eq!(fields["v"], "1");
    assert_eq!(fields["id"], id.as_str());
    assert_eq!(fields["actor"], support::ACTOR);
    assert_eq!(fields["run"], support::RUN);
    assert_eq!(fields["url"], support::URL);
    assert_eq!(fields["action"], approval.action.canonical_json());
    assert_eq!(fields["digest"], approval.action_digest.to_hex());
    assert_eq!(fields["issued_at"], t0.as_millis().to_string());
    assert_eq!(
        fields["expires_at"],
        approval.expires_at.as_millis().to_string()
    );
    assert_eq!(fields["note"], "approved by ops");
    assert_eq!(fields["state"], "active");
    assert_eq!(fields["issue_token"].len(), 32);
    assert!(!fields.contains_key("consumed_at"));
    assert_eq!(fields.len(), 12, "{fields:?}");

    // Expiry: max(expires_at, now) + 24 h.
    let expire_at: i64 = redis::cmd("PEXPIRETIME")
        .arg(&key)
        .query(&mut conn)
        .unwrap();
    let wanted = approval.expires_at.as_millis() as i64 + 24 * 3600 * 1000;
    assert!(
        (expire_at - wanted).abs() < 2_000,
        "{expire_at} vs {wanted}"
    );

    let attempt = attempt();
    let outcome = store
        .consume_once(&id, &approval.binding(), t0, &attempt)
        .await
        .unwrap();
    assert_eq!(outcome, ConsumeOutcome::Consumed { replay: false });
    let fields: HashMap<String, String> = conn.hgetall(&key).unwrap();
    assert_eq!(fields["state"], "consumed");
    assert_eq!(fields["consumed_at"], t0.as_millis().to_string());
    assert_eq!(fields["consumed_by"], attempt.as_str());

    let stored = store.get(&id).await.unwrap().unwrap();
    assert_eq!(stored.approval, approval);
    assert_eq!(
        stored.state,
        GrantState::Consumed {
            at: t0,
            by: attempt
        }
    );
}

#[tokio::test]
async fn expiry_follows_the_callers_now_and_only_moves_forward() {
    let server = shared_server();
    let store = RedisApprovalStore::connect(
        support::options_for(server, "expiry").retention(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    let mut conn = server.conn();
    let t0 = now();
    let approval = grant("a#expiry", MINUTE, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    let expires = approval.expires_at.as_millis() as i64;
    store.issue(approval).await.unwrap();
    let key = store.grant_key(&id);
    let pexpiretime = |conn: &mut redis::Connection| -> i64 {
        redis::cmd("PEXPIRETIME").arg(&key).query(conn).unwrap()
    };
    assert!((pexpiretime(&mut conn) - (expires + 3_600_000)).abs() < 2_000);

    // A consume whose caller's now is past expires_at (but the grant is
    // stale then) does not write; a matching consume at a later "now" moves
    // the expiry to now + retention.
    let later = Timestamp::from_millis(t0.as_millis() + 30_000);
    store
        .consume_once(&id, &binding, later, &attempt())
        .await
        .unwrap();
    assert!((pexpiretime(&mut conn) - (expires + 3_600_000)).abs() < 2_000);

    // Records from a caller whose clock is far behind the server's are
    // still kept for `retention` after the server's own time.
    let past = Timestamp::from_millis(1_000);
    let old = grant("a#old", MINUTE, past).await;
    let old_id = old.id.clone();
    store.issue(old.clone()).await.unwrap();
    let server_now = now().as_millis() as i64;
    let kept = redis::cmd("PEXPIRETIME")
        .arg(store.grant_key(&old_id))
        .query::<i64>(&mut conn)
        .unwrap();
    assert!(kept >= server_now + 3_590_000, "{kept} vs {server_now}");
    // ... and the caller's clock still decides expiry: at t=1000 it is valid.
    assert_eq!(
        store
            .consume_once(&old_id, &old.binding(), past, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}

#[tokio::test]
async fn records_disappear_after_retention() {
    let server = shared_server();
    let store = RedisApprovalStore::connect(
        support::options_for(server, "retention").retention(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    let approval = grant("a#gone", Duration::from_millis(200), now()).await;
    let id = approval.id.clone();
    store.issue(approval).await.unwrap();
    assert!(store.get(&id).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(store.get(&id).await.unwrap(), None);
}

#[tokio::test]
async fn timestamps_compare_exactly_beyond_double_precision() {
    let server = shared_server();
    let store = store_on(server, "bigtime").await;
    let mut approval = grant("a#big", MINUTE, now()).await;
    approval.issued_at = Timestamp::from_millis(u64::MAX - 10);
    approval.expires_at = Timestamp::from_millis(u64::MAX - 1);
    let (id, binding) = (approval.id.clone(), approval.binding());
    store.issue(approval.clone()).await.unwrap();
    assert_eq!(store.get(&id).await.unwrap().unwrap().approval, approval);
    let at_expiry = Timestamp::from_millis(u64::MAX - 1);
    assert_eq!(
        store
            .consume_once(&id, &binding, at_expiry, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Stale(StaleReason::Expired)
    );
    let just_before = Timestamp::from_millis(u64::MAX - 2);
    assert_eq!(
        store
            .consume_once(&id, &binding, just_before, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}

#[tokio::test]
async fn issue_never_overwrites_whatever_the_state() {
    let server = shared_server();
    let store = store_on(server, "overwrite").await;
    let t0 = now();
    let approval = grant("a#once", MINUTE, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    store.issue(approval.clone()).await.unwrap();
    let attempt = attempt();
    store
        .consume_once(&id, &binding, t0, &attempt)
        .await
        .unwrap();
    assert_eq!(
        store.issue(approval.clone()).await,
        Err(IssueError::AlreadyExists(id.clone()))
    );
    assert!(matches!(
        store.get(&id).await.unwrap().unwrap().state,
        GrantState::Consumed { .. }
    ));

    // A foreign key under the grant's name is not overwritten either.
    let foreign = grant("a#foreign", MINUTE, t0).await;
    let mut conn = server.conn();
    let _: () = conn.set(store.grant_key(&foreign.id), "not ours").unwrap();
    assert_eq!(
        store.issue(foreign.clone()).await,
        Err(IssueError::AlreadyExists(foreign.id.clone()))
    );
    let value: String = conn.get(store.grant_key(&foreign.id)).unwrap();
    assert_eq!(value, "not ours");
}

#[tokio::test]
async fn an_inconsistent_digest_is_rejected_at_issue() {
    let store = store_on(shared_server(), "digest").await;
    let mut approval = grant("a#x", MINUTE, now()).await;
    approval.action_digest = grant("a#y", MINUTE, now()).await.action_digest;
    assert!(matches!(
        store.issue(approval.clone()).await,
        Err(IssueError::Store(StoreError::Rejected { .. }))
    ));
    assert_eq!(store.get(&approval.id).await.unwrap(), None);
}

#[tokio::test]
async fn mismatch_does_not_burn_and_replay_needs_the_same_binding() {
    let store = store_on(shared_server(), "mismatch").await;
    let t0 = now();
    let approval = grant("a#m", MINUTE, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    store.issue(approval).await.unwrap();
    let other_actor = Binding {
        actor_id: ActorId::new("someone-else").unwrap(),
        ..binding.clone()
    };
    let other_run = Binding {
        run_id: RunId::new("run-2").unwrap(),
        ..binding.clone()
    };
    let a = attempt();
    for wrong in [&other_actor, &other_run] {
        assert_eq!(
            store.consume_once(&id, wrong, t0, &a).await.unwrap(),
            ConsumeOutcome::Stale(StaleReason::Mismatch)
        );
    }
    assert_eq!(
        store.get(&id).await.unwrap().unwrap().state,
        GrantState::Active
    );
    assert_eq!(
        store.consume_once(&id, &binding, t0, &a).await.unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    assert_eq!(
        store.consume_once(&id, &binding, t0, &a).await.unwrap(),
        ConsumeOutcome::Consumed { replay: true }
    );
    assert_eq!(
        store.consume_once(&id, &other_actor, t0, &a).await.unwrap(),
        ConsumeOutcome::Stale(StaleReason::Consumed)
    );
    assert_eq!(
        store
            .consume_once(&id, &binding, t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Stale(StaleReason::Consumed)
    );
    assert_eq!(
        store.revoke(&id).await.unwrap(),
        RevokeOutcome::AlreadyConsumed
    );
}

/// Each way a record can be damaged or foreign, applied to a fresh grant.
type Damage = fn(&mut redis::Connection, &str);

fn damages() -> Vec<(&'static str, Damage)> {
    fn hset(conn: &mut redis::Connection, key: &str, field: &str, value: &str) {
        let _: () = conn.hset(key, field, value).unwrap();
    }
    vec![
        ("string key", |c, k| {
            let _: () = c.del(k).unwrap();
            let _: () = c.set(k, "x").unwrap();
        }),
        ("list key", |c, k| {
            let _: () = c.del(k).unwrap();
            let _: () = c.rpush(k, "x").unwrap();
        }),
        ("missing actor", |c, k| {
            let _: () = c.hdel(k, "actor").unwrap();
        }),
        ("missing version", |c, k| {
            let _: () = c.hdel(k, "v").unwrap();
        }),
        ("missing issue token", |c, k| {
            let _: () = c.hdel(k, "issue_token").unwrap();
        }),
        ("other version", |c, k| hset(c, k, "v", "2")),
        ("bad digest", |c, k| hset(c, k, "digest", "xyz")),
        ("upper-case digest", |c, k| {
            let d: String = c.hget(k, "digest").unwrap();
            hset(c, k, "digest", &d.to_uppercase());
        }),
        ("digest of another action", |c, k| {
            hset(c, k, "digest", &"0".repeat(64));
        }),
        ("non-canonical action", |c, k| {
            let a: String = c.hget(k, "action").unwrap();
            hset(c, k, "action", &a.replacen(':', ": ", 1));
        }),
        ("action not json", |c, k| hset(c, k, "action", "click")),
        ("unknown state", |c, k| hset(c, k, "state", "paused")),
        ("unknown field", |c, k| hset(c, k, "extra", "1")),
        ("id of another grant", |c, k| hset(c, k, "id", "apr_other")),
        ("timestamp with leading zero", |c, k| {
            let e: String = c.hget(k, "expires_at").unwrap();
            hset(c, k, "expires_at", &format!("0{e}"));
        }),
        ("negative timestamp", |c, k| hset(c, k, "issued_at", "-5")),
        ("consumed without consumer", |c, k| {
            hset(c, k, "state", "consumed")
        }),
        ("active with consumer", |c, k| {
            hset(c, k, "consumed_by", "att_x")
        }),
        ("bad attempt id", |c, k| {
            hset(c, k, "state", "consumed");
            hset(c, k, "consumed_at", "5");
            hset(c, k, "consumed_by", "not an id!");
        }),
        ("empty actor", |c, k| hset(c, k, "actor", "")),
        ("invalid utf-8", |c, k| {
            let _: () = c.hset(k, "run", &[0xffu8, 0xfe][..]).unwrap();
        }),
    ]
}

/// The serialized value of `key` (type, encoding and content; not its TTL).
fn dump(conn: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(conn).unwrap()
}

/// Every damaged record is an error for get, consume and revoke, never an
/// outcome; and, as every check that can refuse a record runs before any
/// write, a refused consume (with the grant's own binding, which would
/// consume a sound record) and a refused revoke leave it byte for byte as
/// it was.
#[tokio::test]
async fn corrupt_or_foreign_records_are_errors_never_outcomes() {
    let server = shared_server();
    let store = store_on(server, "corrupt").await;
    let mut conn = server.conn();
    let t0 = now();
    for (name, damage) in damages() {
        let approval = grant("a#c", MINUTE, t0).await;
        let (id, binding) = (approval.id.clone(), approval.binding());
        store.issue(approval).await.unwrap();
        let key = store.grant_key(&id);
        damage(&mut conn, &key);
        let before = dump(&mut conn, &key);

        let get = store.get(&id).await;
        assert!(
            matches!(get, Err(StoreError::Corrupt { .. })),
            "{name}: get gave {get:?}"
        );
        let consume = store.consume_once(&id, &binding, t0, &attempt()).await;
        assert!(
            matches!(consume, Err(StoreError::Corrupt { .. })),
            "{name}: consume gave {consume:?}"
        );
        assert!(
            dump(&mut conn, &key) == before,
            "{name}: changed by consume"
        );
        let revoke = store.revoke(&id).await;
        assert!(
            matches!(revoke, Err(StoreError::Corrupt { .. })),
            "{name}: revoke gave {revoke:?}"
        );
        assert!(dump(&mut conn, &key) == before, "{name}: changed by revoke");
        let error = get.unwrap_err().to_string();
        assert!(error.contains(&store.grant_key(&id)), "{error}");
    }
}

#[tokio::test]
async fn a_record_changed_after_it_was_read_is_not_written() {
    // The consume and revoke scripts write only to the record the library
    // validated: one whose fingerprint differs answers `changed`, and the
    // store reads it again.
    let server = shared_server();
    let store = store_on(server, "changed").await;
    let mut conn = server.conn();
    let t0 = now();
    let approval = grant("a#changed", MINUTE, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    store.issue(approval).await.unwrap();
    let key = store.grant_key(&id);
    for (script, args) in [
        (
            GrantScript::Consume,
            vec![
                id.as_str().to_owned(),
                t0.as_millis().to_string(),
                attempt().as_str().to_owned(),
                binding.actor_id.as_str().to_owned(),
                binding.run_id.as_str().to_owned(),
                binding.url.clone(),
                binding.action_digest.to_hex(),
                "60000".to_owned(),
                "0".repeat(40),
            ],
        ),
        (
            GrantScript::Revoke,
            vec![id.as_str().to_owned(), "60000".to_owned(), "0".repeat(40)],
        ),
    ] {
        let before = dump(&mut conn, &key);
        let reply: Vec<String> = redis::cmd("EVALSHA")
            .arg(store.script_sha(script))
            .arg(1)
            .arg(&key)
            .arg(&args)
            .query(&mut conn)
            .unwrap();
        assert_eq!(reply, vec!["changed".to_owned()], "{script:?}");
        assert!(dump(&mut conn, &key) == before, "{script:?} wrote");
    }
    assert_eq!(
        store
            .consume_once(&id, &binding, t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}

#[tokio::test]
async fn script_cache_loss_is_recovered() {
    let server = shared_server();
    let store = store_on(server, "noscript").await;
    let t0 = now();
    let approval = grant("a#n", MINUTE, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    let mut conn = server.conn();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    store.issue(approval).await.unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    assert!(store.get(&id).await.unwrap().is_some());
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    assert_eq!(
        store
            .consume_once(&id, &binding, t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    assert_eq!(
        store.revoke(&id).await.unwrap(),
        RevokeOutcome::AlreadyConsumed
    );
    // Reloaded by EVAL: the cache holds the script again.
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(store.script_sha(GrantScript::Revoke))
        .query(&mut conn)
        .unwrap();
    assert_eq!(exists, vec![true]);
}

#[tokio::test]
async fn bad_options_are_refused_before_connecting() {
    let err = RedisApprovalStore::connect(
        RedisStoreOptions::single("redis://127.0.0.1:1/").key_prefix("x{y}"),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ConnectError::InvalidOptions(_)), "{err}");
    let err = RedisApprovalStore::connect(RedisStoreOptions::single("not a url"))
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::InvalidOptions(_)), "{err}");
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    let port = support::free_port();
    let err = RedisApprovalStore::connect(
        RedisStoreOptions::single(format!("redis://127.0.0.1:{port}/"))
            .connect_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            ConnectError::Store(StoreError::Unavailable { .. } | StoreError::Timeout { .. })
        ),
        "{err}"
    );
}

/// `connect` with the default options (no opt-in) on `server`.
async fn connect_by_default(server: &RedisServer) -> Result<RedisApprovalStore, ConnectError> {
    RedisApprovalStore::connect(
        RedisStoreOptions::single(server.url()).key_prefix(support::fresh_prefix("default")),
    )
    .await
}

fn assert_not_durable(result: Result<RedisApprovalStore, ConnectError>, says: &[&str]) {
    match result {
        Err(err @ ConnectError::NotDurable { .. }) => {
            assert!(!err.is_retryable());
            let text = err.to_string();
            for part in says {
                assert!(text.contains(part), "{text} lacks {part}");
            }
            assert!(!text.ends_with('.'), "{text}");
        }
        other => panic!("expected a not-durable refusal, got {other:?}"),
    }
}

/// Connects with `options` (which opt in to a risk) and checks that a
/// start-up warning still names it.
async fn assert_opted_in_warns(options: RedisStoreOptions, says: &[&str]) {
    let store = RedisApprovalStore::connect(options).await.unwrap();
    let warnings = store.startup_warnings();
    assert!(
        warnings
            .iter()
            .any(|w| says.iter().all(|part| w.contains(part))),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn the_default_refuses_a_server_without_an_append_only_file() {
    // No persistence at all (the shared test server), and rdb snapshots only.
    let rdb_only = RedisServer::start_with(&["--save", "3600 1"]);
    for (server, save) in [
        (shared_server(), "no save points"),
        (&rdb_only, "save \"3600 1\""),
    ] {
        assert_not_durable(
            connect_by_default(server).await,
            &[
                "appendonly no",
                save,
                "set `appendonly yes`",
                "`allow_non_durable_persistence`",
            ],
        );
        // Opted in: connects, and still warns.
        assert_opted_in_warns(
            RedisStoreOptions::single(server.url()).allow_non_durable_persistence(),
            &["appendonly no", "becomes usable again"],
        )
        .await;
    }
}

#[tokio::test]
async fn the_probe_is_quiet_with_appendfsync_always() {
    let server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = connect_by_default(&server).await.unwrap();
    assert_eq!(store.startup_warnings(), &[] as &[String]);
}

#[tokio::test]
async fn everysec_is_accepted_with_a_warning_that_says_what_can_be_lost() {
    let server = RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--maxmemory-policy",
        "volatile-lru",
    ]);
    let store = connect_by_default(&server).await.unwrap();
    let warnings = store.startup_warnings();
    assert!(
        warnings.iter().any(|w| w.contains("appendfsync everysec")
            && w.contains("about the last second of writes")
            && w.contains("becomes usable again")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("maxmemory-policy volatile-lru")),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn unreadable_persistence_settings_are_refused_unless_accepted() {
    let server = RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--rename-command",
        "CONFIG",
        "",
    ]);
    assert_not_durable(
        connect_by_default(&server).await,
        &[
            "could not check persistence settings",
            "`allow_unverified_persistence`",
        ],
    );
    assert_opted_in_warns(
        RedisStoreOptions::single(server.url()).allow_unverified_persistence(),
        &[
            "could not check persistence",
            "allow_unverified_persistence",
        ],
    )
    .await;
}

#[tokio::test]
async fn a_server_that_cannot_run_scripts_is_refused_at_start_up() {
    for disabled in ["EVALSHA", "SCRIPT", "EVAL"] {
        let server = RedisServer::start_with(&["--rename-command", disabled, ""]);
        let result = RedisApprovalStore::connect(support::options_for(&server, "noscripts")).await;
        match (disabled, result) {
            // Without EVAL the store still runs (EVALSHA after SCRIPT LOAD), but it
            // could not recover from a flushed cache: refused too.
            (_, Err(ConnectError::Store(StoreError::Unsupported { message }))) => {
                assert!(message.starts_with(|c: char| c.is_lowercase()), "{message}");
            }
            (name, other) => panic!("{name} disabled: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_replica_is_refused() {
    let primary = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    let result = RedisApprovalStore::connect(support::options_for(&replica, "replica")).await;
    assert!(
        matches!(
            result,
            Err(ConnectError::Store(StoreError::Unsupported { .. }))
        ),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = RedisServer::start();
    let store = RedisApprovalStore::connect(
        support::options_for(&server, "slow").command_timeout(Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let approval = grant("a#slow", MINUTE, now()).await;
    let id = approval.id.clone();
    store.issue(approval).await.unwrap();
    let mut conn = server.conn();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1000)
        .arg("ALL")
        .query(&mut conn)
        .unwrap();
    let err = store.get(&id).await.unwrap_err();
    assert!(matches!(err, StoreError::Timeout { .. }), "{err}");
    assert!(err.is_retryable());
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut conn)
        .unwrap();
    assert!(store.get(&id).await.unwrap().is_some());
}

#[tokio::test]
async fn durability_waits_for_replicas_and_fails_closed() {
    let primary = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    // Wait for the replica link.
    let mut conn = primary.conn();
    for _ in 0..200 {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut conn)
            .unwrap();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let prefix = support::fresh_prefix("durable");
    let one = RedisApprovalStore::connect(
        RedisStoreOptions::single(primary.url())
            .key_prefix(prefix.clone())
            .durability(Durability::new(1, Duration::from_secs(2)))
            .allow_non_durable_persistence(),
    )
    .await
    .unwrap();
    assert_eq!(
        one.startup_warnings()
            .iter()
            .filter(|w| w.contains("replicas"))
            .count(),
        0
    );
    let t0 = now();
    let approval = grant("a#d", MINUTE, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    one.issue(approval).await.unwrap();
    let a = attempt();
    assert_eq!(
        one.consume_once(&id, &binding, t0, &a).await.unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    // The replica has it.
    let mut rconn = replica.conn();
    let state: String = rconn.hget(one.grant_key(&id), "state").unwrap();
    assert_eq!(state, "consumed");

    // Two replicas wanted, one present: every write fails closed, but is applied.
    let two = RedisApprovalStore::connect(
        RedisStoreOptions::single(primary.url())
            .key_prefix(prefix)
            .durability(Durability::new(2, Duration::from_millis(100)))
            .allow_non_durable_persistence(),
    )
    .await
    .unwrap();
    assert!(
        two.startup_warnings()
            .iter()
            .any(|w| w.contains("1 connected replicas")),
        "{:?}",
        two.startup_warnings()
    );
    let approval = grant("a#d2", MINUTE, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    let unconfirmed = StoreError::DurabilityUnconfirmed {
        wanted: 2,
        confirmed: 1,
    };
    assert_eq!(
        two.issue(approval).await,
        Err(IssueError::Store(unconfirmed.clone()))
    );
    assert_eq!(
        two.get(&id).await.unwrap().unwrap().state,
        GrantState::Active
    );
    let a = attempt();
    assert_eq!(
        two.consume_once(&id, &binding, t0, &a).await,
        Err(unconfirmed.clone())
    );
    // Applied on the primary: the same attempt is a replay (still unconfirmed),
    // any other attempt is stale. The stale answer needs no replica.
    assert_eq!(
        two.consume_once(&id, &binding, t0, &a).await,
        Err(unconfirmed.clone())
    );
    assert_eq!(
        one.consume_once(&id, &binding, t0, &a).await.unwrap(),
        ConsumeOutcome::Consumed { replay: true }
    );
    assert_eq!(
        two.consume_once(&id, &binding, t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Stale(StaleReason::Consumed)
    );
    let unknown = ApprovalId::parse("apr_unknown").unwrap();
    assert_eq!(two.revoke(&unknown).await.unwrap(), RevokeOutcome::Unknown);

    // NOSCRIPT inside the EVALSHA + WAIT pipeline is recovered too.
    let approval = grant("a#d3", MINUTE, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    one.issue(approval).await.unwrap();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
    assert_eq!(
        one.consume_once(&id, &binding, t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
}

#[tokio::test]
async fn the_issue_script_recognises_its_own_resent_call() {
    // A client library may resend a command after a dropped connection (the
    // cluster client does). The issue script answers `issued` to a resend of
    // the same call (same issue token) and `exists` to any other call.
    let server = shared_server();
    let store = store_on(server, "token").await;
    let mut conn = server.conn();
    let id = ApprovalId::parse("apr_token_test").unwrap();
    let key = store.grant_key(&id);
    let issue = |token: &str| {
        redis::cmd("EVALSHA")
            .arg(store.script_sha(GrantScript::Issue))
            .arg(1)
            .arg(&key)
            .arg(token)
            .arg(60_000)
            .arg(now().as_millis())
            .arg("v")
            .arg("1")
            .arg("issue_token")
            .arg(token)
            .clone()
    };
    let first: Vec<String> = issue("t1").query(&mut conn).unwrap();
    assert_eq!(first, ["issued"]);
    let resent: Vec<String> = issue("t1").query(&mut conn).unwrap();
    assert_eq!(resent, ["issued"]);
    let other: Vec<String> = issue("t2").query(&mut conn).unwrap();
    assert_eq!(other, ["exists"]);
    // A record this incomplete is not one of the store's.
    assert!(matches!(
        store.get(&id).await,
        Err(StoreError::Corrupt { .. })
    ));
}
