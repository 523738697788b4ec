//! The Redis store on one server this test binary starts: record layout,
//! expiry, corrupt records, options, the start-up probe, timeouts and
//! durability.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashMap;
use std::time::Duration;

use countersign_approval_core::Approval;
use countersign_approval_core::{
    AbandonOutcome, ActorId, ApprovalId, ApprovalStore, ApproverId, AttemptId, Binding,
    ConsumeOutcome, GrantState, IssueError, ResumeOutcome, RevokeOutcome, RunId, StaleReason,
    StopOutcome, StoreError, StoredGrant, Timestamp,
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
countersign_store_conformance::proposal_store_conformance_tests!(
    single_proposal_conformance,
    conformance_store()
);
async fn outbox_store() -> RedisApprovalStore {
    RedisApprovalStore::connect(
        support::options_for(shared_server(), "outbox-kit").notification_outbox(true),
    )
    .await
    .expect("store connects")
}

countersign_store_conformance::outbox_conformance_tests!(single_outbox_conformance, outbox_store());

fn attempt() -> AttemptId {
    AttemptId::generate().unwrap()
}

#[tokio::test]
async fn record_layout_holds_every_field_and_a_version() {
    let server = shared_server();
    let store = store_on(server, "layout").await;
    let t0 = now();
    let approver = ApproverId::new("ops «ü» {lead}").unwrap();
    let approval = grant("a#layout", MINUTE, t0)
        .await
        .with_note("approved by ops")
        .unwrap()
        .approved_by(approver.clone(), Timestamp::from_millis(t0.as_millis() - 5))
        .unwrap()
        .with_attempt_limit(7)
        .unwrap();
    let id = approval.id.clone();
    store.issue(approval.clone()).await.unwrap();

    let actor = support::actor();
    let tag = RedisApprovalStore::actor_tag(&actor);
    assert_eq!(tag.len(), 32);
    assert!(tag.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    let slot = format!("{}:{{a{tag}}}", store.prefix());
    assert_eq!(store.slot_prefix(&actor), slot);
    let key = support::grant_key(&store, &id);
    assert_eq!(key, format!("{slot}:grant:{id}"));
    assert_eq!(store.actor_fence_key(&actor), format!("{slot}:actor"));
    assert_eq!(
        store.run_fence_key(&actor, &support::run()),
        format!("{slot}:run:{}", support::RUN)
    );
    assert_eq!(
        store.live_key(&actor, &support::run()),
        format!("{slot}:live:{}", support::RUN)
    );
    assert_eq!(store.runs_key(&actor), format!("{slot}:runs"));
    assert_eq!(
        store.pointer_key(&id),
        format!("{}:id:{{{id}}}", store.prefix())
    );
    let mut conn = server.conn();
    // One string: the format byte, then every field in order.
    let raw: Vec<u8> = conn.get(&key).unwrap();
    assert_eq!(raw[0], 4);
    let kind: String = redis::cmd("TYPE").arg(&key).query(&mut conn).unwrap();
    assert_eq!(kind, "string");
    let fields = support::record(&mut conn, &key);
    let text = |name: &str| String::from_utf8(fields[name].clone()).unwrap();
    assert_eq!(text("id"), id.as_str());
    assert_eq!(text("actor"), support::ACTOR);
    assert_eq!(text("run"), support::RUN);
    assert_eq!(text("url"), support::URL);
    // The action as method, selector and (the default description) absent.
    assert_eq!(
        fields["action"],
        support::action_field(&[Some("click"), Some("a#layout"), None])
    );
    assert_eq!(fields["digest"], approval.action_digest.as_bytes());
    assert_eq!(text("issued_at"), t0.as_millis().to_string());
    assert_eq!(
        text("expires_at"),
        approval.expires_at.as_millis().to_string()
    );
    assert_eq!(text("note"), "approved by ops");
    assert_eq!(text("approver"), approver.as_str());
    assert_eq!(text("approved_at"), (t0.as_millis() - 5).to_string());
    assert_eq!(text("attempt_limit"), "7");
    assert_eq!(text("failed"), "0");
    assert_eq!(text("rgen"), "0");
    assert_eq!(text("agen"), "0");
    assert_eq!(text("state"), "a");
    assert_eq!(fields["issue_token"].len(), 16);
    assert!(!fields.contains_key("consumed_at"));
    assert_eq!(fields.len(), 17, "{fields:?}");
    // The round trip back to the record.
    let all = countersign_store_redis::record_fields(&raw).unwrap();
    assert_eq!(countersign_store_redis::record_from_fields(&all), raw);
    // The pointer names the actor's slot (the tag's raw bytes); the fences
    // start at generation 0; the run's live set and the actor's run set
    // hold the grant and run.
    let pointer: Vec<u8> = conn.get(store.pointer_key(&id)).unwrap();
    let hex: String = pointer.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, tag);
    for fence in [
        store.actor_fence_key(&actor),
        store.run_fence_key(&actor, &support::run()),
    ] {
        let fence: HashMap<String, String> = conn.hgetall(&fence).unwrap();
        assert_eq!(
            fence,
            HashMap::from([("gen".into(), "0".into()), ("stopped".into(), "0".into())])
        );
    }
    let live: Vec<Vec<u8>> = conn
        .zrange(store.live_key(&actor, &support::run()), 0, -1)
        .unwrap();
    assert_eq!(live, [support::live_member(&id)]);
    let runs: Vec<String> = conn.smembers(store.runs_key(&actor)).unwrap();
    assert_eq!(runs, [support::RUN]);

    // Expiry: max(expires_at, now) + the default retention (15 minutes),
    // for the grant and every key beside it.
    assert_eq!(
        countersign_store_redis::DEFAULT_RETENTION,
        Duration::from_secs(15 * 60)
    );
    let wanted = approval.expires_at.as_millis() as i64
        + countersign_store_redis::DEFAULT_RETENTION.as_millis() as i64;
    for (name, key) in support::grant_keys(&store, &id) {
        let expire_at: i64 = redis::cmd("PEXPIRETIME")
            .arg(&key)
            .query(&mut conn)
            .unwrap();
        assert!(
            (expire_at - wanted).abs() < 2_000,
            "{name}: {expire_at} vs {wanted}"
        );
    }

    let attempt = attempt();
    let outcome = store
        .consume_once(&id, &approval.binding(), t0, &attempt)
        .await
        .unwrap();
    assert_eq!(outcome, ConsumeOutcome::Consumed { replay: false });
    let fields = support::record(&mut conn, &key);
    assert_eq!(fields["state"], b"c");
    assert_eq!(fields["consumed_at"], t0.as_millis().to_string().as_bytes());
    assert_eq!(fields["consumed_by"], attempt.as_str().as_bytes());
    // A consumed grant leaves the live set (the last one: the set is gone).
    let live: i64 = conn
        .exists(store.live_key(&actor, &support::run()))
        .unwrap();
    assert_eq!(live, 0);

    let stored = store.get(&id).await.unwrap().unwrap();
    assert_eq!(stored.approval, approval);
    assert_eq!(
        stored.state,
        GrantState::Consumed {
            at: t0,
            by: attempt
        }
    );
    assert_eq!(stored.failed_attempts, 0);
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
    let key = support::grant_key(&store, &id);
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
        .arg(support::grant_key(&store, &old_id))
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

    // A foreign key under the grant's name, or under its pointer's, is not
    // overwritten either.
    let mut conn = server.conn();
    for key_of in [support::grant_key, RedisApprovalStore::pointer_key] {
        let foreign = grant("a#foreign", MINUTE, t0).await;
        let key = key_of(&store, &foreign.id);
        let _: () = conn.set(&key, "not ours").unwrap();
        assert_eq!(
            store.issue(foreign.clone()).await,
            Err(IssueError::AlreadyExists(foreign.id.clone()))
        );
        let value: String = conn.get(&key).unwrap();
        assert_eq!(value, "not ours");
    }

    // The same id issued for another actor: refused, by the pointer.
    let other = Approval {
        actor_id: ActorId::new("another-actor").unwrap(),
        ..approval.clone()
    };
    assert_eq!(
        store.issue(other).await,
        Err(IssueError::AlreadyExists(id.clone()))
    );
    assert!(matches!(
        store.get(&id).await.unwrap().unwrap().state,
        GrantState::Consumed { .. }
    ));
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

/// The keys a damage may alter: the grant's and its fences'.
struct Keys {
    grant: String,
    actor_fence: String,
    run_fence: String,
}

/// Each way a record can be damaged or foreign, applied to a fresh grant.
type Damage = fn(&mut redis::Connection, &Keys);

fn damages() -> Vec<(&'static str, Damage)> {
    fn set(conn: &mut redis::Connection, key: &str, field: &str, value: &str) {
        support::set_field(conn, key, field, Some(value.as_bytes()));
    }
    fn unset(conn: &mut redis::Connection, key: &str, field: &str) {
        support::set_field(conn, key, field, None);
    }
    fn raw(conn: &mut redis::Connection, key: &str) -> Vec<u8> {
        conn.get(key).unwrap()
    }
    fn hset(conn: &mut redis::Connection, key: &str, field: &str, value: &str) {
        let _: () = conn.hset(key, field, value).unwrap();
    }
    vec![
        ("foreign string", |c, k| support::set_raw(c, &k.grant, b"x")),
        ("empty string", |c, k| support::set_raw(c, &k.grant, b"")),
        ("list key", |c, k| {
            let _: () = c.del(&k.grant).unwrap();
            let _: () = c.rpush(&k.grant, "x").unwrap();
        }),
        ("a format v=2 hash record", |c, k| {
            let _: () = c.del(&k.grant).unwrap();
            hset(c, &k.grant, "v", "2");
            hset(c, &k.grant, "state", "active");
        }),
        ("missing actor", |c, k| unset(c, &k.grant, "actor")),
        ("missing format byte", |c, k| {
            let r = raw(c, &k.grant);
            support::set_raw(c, &k.grant, &r[1..]);
        }),
        ("missing issue token", |c, k| {
            unset(c, &k.grant, "issue_token")
        }),
        ("missing failed count", |c, k| unset(c, &k.grant, "failed")),
        ("missing generation", |c, k| unset(c, &k.grant, "rgen")),
        ("older version", |c, k| {
            let mut r = raw(c, &k.grant);
            r[0] = 2;
            support::set_raw(c, &k.grant, &r);
        }),
        ("other version", |c, k| {
            let mut r = raw(c, &k.grant);
            r[0] = 5;
            support::set_raw(c, &k.grant, &r);
        }),
        ("v=3 format byte on a v=4 record", |c, k| {
            let mut r = raw(c, &k.grant);
            r[0] = 3;
            support::set_raw(c, &k.grant, &r);
        }),
        ("element not an element identity", |c, k| {
            set(c, &k.grant, "element", "{}")
        }),
        ("element not in its canonical form", |c, k| {
            let spaced = support::element().canonical_json().replacen(':', ": ", 1);
            set(c, &k.grant, "element", &spaced)
        }),
        ("element empty", |c, k| set(c, &k.grant, "element", "")),
        ("element not utf-8", |c, k| {
            support::set_field(c, &k.grant, "element", Some(&[0xff, b'{']));
        }),
        ("cut short", |c, k| {
            let r = raw(c, &k.grant);
            support::set_raw(c, &k.grant, &r[..r.len() - 1]);
        }),
        ("bytes after the last field", |c, k| {
            let mut r = raw(c, &k.grant);
            r.push(0);
            support::set_raw(c, &k.grant, &r);
        }),
        ("a long length for a short field", |c, k| {
            // The id field, its one-byte length rewritten in the long form.
            let r = raw(c, &k.grant);
            let len = usize::from(r[1]);
            let mut damaged = vec![r[0], 0xFE, 0, 0, 0, r[1]];
            damaged.extend_from_slice(&r[2..]);
            assert!(len <= 0xFC);
            support::set_raw(c, &k.grant, &damaged);
        }),
        ("reserved length byte", |c, k| {
            let mut r = raw(c, &k.grant);
            r[1] = 0xFF;
            support::set_raw(c, &k.grant, &r);
        }),
        ("bad digest", |c, k| set(c, &k.grant, "digest", "xyz")),
        ("digest one byte short", |c, k| {
            let d = support::record(c, &k.grant)["digest"].clone();
            support::set_field(c, &k.grant, "digest", Some(&d[..31]));
        }),
        ("digest of another action", |c, k| {
            support::set_field(c, &k.grant, "digest", Some(&[0u8; 32]));
        }),
        ("non-canonical action", |c, k| {
            let action = support::action_field(&[Some("Click"), Some("a#c"), None]);
            support::set_field(c, &k.grant, "action", Some(&action));
        }),
        ("action with its default description spelt out", |c, k| {
            let action = support::action_field(&[Some("click"), Some("a#c"), Some("click a#c")]);
            support::set_field(c, &k.grant, "action", Some(&action));
        }),
        ("action arguments out of order", |c, k| {
            let action = support::action_field(&[
                Some("click"),
                Some("a#c"),
                None,
                Some("b"),
                Some("1"),
                Some("a"),
                Some("2"),
            ]);
            support::set_field(c, &k.grant, "action", Some(&action));
        }),
        ("action not an action", |c, k| {
            set(c, &k.grant, "action", "click")
        }),
        ("unknown state", |c, k| set(c, &k.grant, "state", "p")),
        ("state spelt out", |c, k| {
            set(c, &k.grant, "state", "active")
        }),
        ("stored as stopped", |c, k| set(c, &k.grant, "state", "s")),
        ("id of another grant", |c, k| {
            set(c, &k.grant, "id", "apr_other")
        }),
        ("timestamp with leading zero", |c, k| {
            let e = support::record_text(c, &k.grant, "expires_at");
            set(c, &k.grant, "expires_at", &format!("0{e}"));
        }),
        ("negative timestamp", |c, k| {
            set(c, &k.grant, "issued_at", "-5")
        }),
        ("timestamp beyond 64 bits", |c, k| {
            set(c, &k.grant, "expires_at", "18446744073709551616")
        }),
        ("consumed without consumer", |c, k| {
            set(c, &k.grant, "state", "c")
        }),
        ("active with consumer", |c, k| {
            set(c, &k.grant, "consumed_by", "att_x")
        }),
        ("bad attempt id", |c, k| {
            set(c, &k.grant, "state", "c");
            set(c, &k.grant, "consumed_at", "5");
            set(c, &k.grant, "consumed_by", "not an id!");
        }),
        ("consumed at beyond 64 bits", |c, k| {
            set(c, &k.grant, "state", "c");
            set(c, &k.grant, "consumed_at", "99999999999999999999");
            set(c, &k.grant, "consumed_by", "att_x");
        }),
        ("empty actor", |c, k| set(c, &k.grant, "actor", "")),
        ("invalid utf-8", |c, k| {
            support::set_field(c, &k.grant, "run", Some(&[0xff, 0xfe]));
        }),
        ("issue token too short", |c, k| {
            set(c, &k.grant, "issue_token", "short")
        }),
        ("attempt limit 0", |c, k| {
            set(c, &k.grant, "attempt_limit", "0")
        }),
        ("attempt limit above 100", |c, k| {
            set(c, &k.grant, "attempt_limit", "101")
        }),
        ("attempt limit not a number", |c, k| {
            set(c, &k.grant, "attempt_limit", "five")
        }),
        ("failed count with a sign", |c, k| {
            set(c, &k.grant, "failed", "+1")
        }),
        ("active at its limit of failures", |c, k| {
            set(c, &k.grant, "failed", "5")
        }),
        ("locked below its limit", |c, k| {
            set(c, &k.grant, "state", "l");
            set(c, &k.grant, "failed", "4");
        }),
        ("approver without approval time", |c, k| {
            set(c, &k.grant, "approver", "ops")
        }),
        ("approval time without approver", |c, k| {
            set(c, &k.grant, "approved_at", "5")
        }),
        ("empty approver", |c, k| {
            set(c, &k.grant, "approver", "");
            set(c, &k.grant, "approved_at", "5");
        }),
        ("approval time not a timestamp", |c, k| {
            set(c, &k.grant, "approver", "ops");
            set(c, &k.grant, "approved_at", "soon");
        }),
        ("generation not a number", |c, k| {
            set(c, &k.grant, "agen", "x")
        }),
        ("abandoned attempt id too long", |c, k| {
            set(
                c,
                &k.grant,
                "abandoned",
                &format!("att_{}", "a".repeat(130)),
            )
        }),
        ("abandoned attempt twice", |c, k| {
            set(c, &k.grant, "abandoned", "att_1 att_1")
        }),
        ("actor fence a string", |c, k| {
            let _: () = c.del(&k.actor_fence).unwrap();
            let _: () = c.set(&k.actor_fence, "x").unwrap();
        }),
        ("actor fence without generation", |c, k| {
            let _: () = c.hdel(&k.actor_fence, "gen").unwrap();
        }),
        ("run fence with an unknown field", |c, k| {
            hset(c, &k.run_fence, "extra", "1")
        }),
        ("run fence generation not a number", |c, k| {
            hset(c, &k.run_fence, "gen", "01")
        }),
        ("run fence with a bad stopped flag", |c, k| {
            hset(c, &k.run_fence, "stopped", "yes")
        }),
    ]
}

/// The serialized value of `key` (type, encoding and content; not its TTL),
/// `None` for a missing key.
fn dump(conn: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(conn).unwrap()
}

/// Every key of a grant, serialized.
fn dump_all(
    conn: &mut redis::Connection,
    store: &RedisApprovalStore,
    id: &ApprovalId,
) -> Vec<Option<Vec<u8>>> {
    support::grant_keys(store, id)
        .into_iter()
        .map(|(_, key)| dump(conn, &key))
        .collect()
}

/// Every damaged record (or fence) is an error for get, consume and
/// revoke, never an outcome; and, as every check that can refuse a record
/// runs before any write, a refused consume (with the grant's own binding,
/// which would consume a sound record), a refused mismatched consume
/// (which would count a failed attempt) and a refused revoke leave every
/// key of the grant byte for byte as it was. Each is tried by the store
/// that issued the grant (which knows the fingerprint of its fixed fields
/// and goes out in one round trip) and by another store (which reads the
/// record first).
#[tokio::test]
async fn corrupt_or_foreign_records_are_errors_never_outcomes() {
    let server = shared_server();
    let options = support::options_for(server, "corrupt");
    let issuer = RedisApprovalStore::connect(options.clone()).await.unwrap();
    let other = RedisApprovalStore::connect(options).await.unwrap();
    let mut conn = server.conn();
    let t0 = now();
    let (actor, run) = (support::actor(), support::run());
    for (name, damage) in damages() {
        for op in ["consume", "mismatched consume", "revoke"] {
            let approval = grant("a#c", MINUTE, t0).await;
            let (id, binding) = (approval.id.clone(), approval.binding());
            issuer.issue(approval).await.unwrap();
            let keys = Keys {
                grant: support::grant_key(&issuer, &id),
                actor_fence: issuer.actor_fence_key(&actor),
                run_fence: issuer.run_fence_key(&actor, &run),
            };
            damage(&mut conn, &keys);
            let before = dump_all(&mut conn, &issuer, &id);
            let fence_damage = name.contains("fence");
            let mismatched = Binding {
                url: "https://docs.example.com/other".to_owned(),
                ..binding.clone()
            };
            for (who, store) in [("issuer", &issuer), ("other store", &other)] {
                let refused = match op {
                    "consume" => store
                        .consume_once(&id, &binding, t0, &attempt())
                        .await
                        .map(|o| format!("{o:?}")),
                    "mismatched consume" => store
                        .consume_once(&id, &mismatched, t0, &attempt())
                        .await
                        .map(|o| format!("{o:?}")),
                    _ => store.revoke(&id).await.map(|o| format!("{o:?}")),
                };
                assert!(
                    matches!(refused, Err(StoreError::Corrupt { .. })),
                    "{name}: {op} by the {who} gave {refused:?}"
                );
                assert!(
                    dump_all(&mut conn, &issuer, &id) == before,
                    "{name}: changed by the {who}'s {op}"
                );
            }
            let get = other.get(&id).await;
            assert!(
                matches!(get, Err(StoreError::Corrupt { .. })),
                "{name}: get gave {get:?}"
            );
            let error = get.unwrap_err().to_string();
            let named = if fence_damage {
                &keys.actor_fence
            } else {
                &keys.grant
            };
            assert!(
                error.contains(named.as_str()) || error.contains(keys.run_fence.as_str()),
                "{name}: {error}"
            );
            if name.contains("v=2") {
                assert!(
                    error.contains("format v=2") && error.contains("issue the grant again"),
                    "{name}: {error}"
                );
            }
            if fence_damage {
                // A stop that meets a damaged fence is refused and changes nothing.
                let stop = issuer.stop_run(&actor, &run, t0).await;
                assert!(
                    matches!(stop, Err(StoreError::Corrupt { .. })),
                    "{name}: stop gave {stop:?}"
                );
                assert!(
                    dump_all(&mut conn, &issuer, &id) == before,
                    "{name}: changed by stop"
                );
                // Repaired, for the next damage.
                let _: () = conn.del(&keys.actor_fence).unwrap();
                let _: () = conn.del(&keys.run_fence).unwrap();
            }
        }
    }
}

/// A consumed record whose `consumed_at` or `consumed_by` is missing or
/// malformed is refused with a message that says which, and the same one
/// whether a script (a consume by the store that issued the grant, a
/// revoke) or the library's reader (a consume by another store, a get)
/// finds it.
#[tokio::test]
async fn a_damaged_consumed_record_says_what_is_wrong() {
    let server = shared_server();
    let options = support::options_for(server, "consumed_fields");
    let issuer = RedisApprovalStore::connect(options.clone()).await.unwrap();
    let other = RedisApprovalStore::connect(options).await.unwrap();
    let mut conn = server.conn();
    let t0 = now();
    let cases: [(Option<&str>, Option<&str>, &str); 7] = [
        (None, None, "consumed record lacks consumed_at"),
        (None, Some("att_x"), "consumed record lacks consumed_at"),
        (Some("5"), None, "consumed record lacks consumed_by"),
        (
            Some("soon"),
            Some("att_x"),
            "consumed_at is not a timestamp",
        ),
        (
            Some("99999999999999999999"),
            Some("att_x"),
            "consumed_at is not a timestamp",
        ),
        (
            Some("5"),
            Some("not an id!"),
            "consumed_by is not an attempt id",
        ),
        (Some("5"), Some(""), "consumed_by is not an attempt id"),
    ];
    for (consumed_at, consumed_by, message) in cases {
        let approval = grant("a#c", MINUTE, t0).await;
        let (id, binding) = (approval.id.clone(), approval.binding());
        issuer.issue(approval).await.unwrap();
        let key = support::grant_key(&issuer, &id);
        support::set_field(&mut conn, &key, "state", Some(b"c"));
        support::set_field(
            &mut conn,
            &key,
            "consumed_at",
            consumed_at.map(str::as_bytes),
        );
        support::set_field(
            &mut conn,
            &key,
            "consumed_by",
            consumed_by.map(str::as_bytes),
        );
        let answers = [
            (
                "the issuer's consume",
                issuer
                    .consume_once(&id, &binding, t0, &attempt())
                    .await
                    .map(|o| format!("{o:?}")),
            ),
            (
                "another store's consume",
                other
                    .consume_once(&id, &binding, t0, &attempt())
                    .await
                    .map(|o| format!("{o:?}")),
            ),
            ("revoke", issuer.revoke(&id).await.map(|o| format!("{o:?}"))),
            ("get", other.get(&id).await.map(|g| format!("{g:?}"))),
        ];
        for (who, answer) in answers {
            match answer {
                Err(StoreError::Corrupt {
                    key: named,
                    message: said,
                }) => {
                    assert_eq!(said, message, "{consumed_at:?} {consumed_by:?}: {who}");
                    assert_eq!(named, key, "{consumed_at:?} {consumed_by:?}: {who}");
                }
                other => panic!("{consumed_at:?} {consumed_by:?}: {who} answered {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn a_record_changed_after_it_was_read_is_not_written() {
    // The consume and revoke scripts write only to the record the library
    // validated: one whose fixed fields' fingerprint differs answers
    // `changed`, and the store reads it again. The fields its writes change
    // (a racing mismatch's failed count) are checked by the script itself,
    // as strictly as the library reads them, so racing writes never make a
    // call read again.
    let server = shared_server();
    let store = store_on(server, "changed").await;
    let mut conn = server.conn();
    let t0 = now();
    let approval = grant("a#changed", MINUTE, t0).await;
    let (id, binding) = (approval.id.clone(), approval.binding());
    store.issue(approval).await.unwrap();
    let key = support::grant_key(&store, &id);
    let slot = store.slot_prefix(&support::actor());
    let consume_args = |fingerprint: &str| {
        vec![
            id.as_str().as_bytes().to_vec(),
            t0.as_millis().to_string().into_bytes(),
            attempt().as_str().as_bytes().to_vec(),
            binding.actor_id.as_str().as_bytes().to_vec(),
            binding.run_id.as_str().as_bytes().to_vec(),
            binding.url.as_bytes().to_vec(),
            binding.action_digest.as_bytes().to_vec(),
            b"60000".to_vec(),
            fingerprint.as_bytes().to_vec(),
            slot.as_bytes().to_vec(),
        ]
    };
    let eval = |conn: &mut redis::Connection, script: GrantScript, args: &[Vec<u8>]| {
        redis::cmd("EVALSHA")
            .arg(store.script_sha(script))
            .arg(1)
            .arg(&key)
            .arg(args)
            .query::<redis::Value>(conn)
            .unwrap()
    };
    let status = |reply: &redis::Value| match reply {
        redis::Value::Array(items) => match items.first() {
            Some(redis::Value::BulkString(word)) => String::from_utf8(word.clone()).unwrap(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    for (script, args) in [
        (GrantScript::Consume, consume_args(&"0".repeat(40))),
        (
            GrantScript::Revoke,
            vec![
                id.as_str().as_bytes().to_vec(),
                b"60000".to_vec(),
                "0".repeat(40).into_bytes(),
                slot.as_bytes().to_vec(),
            ],
        ),
    ] {
        let before = dump(&mut conn, &key);
        let reply = eval(&mut conn, script, &args);
        assert_eq!(status(&reply), "changed", "{script:?}");
        assert!(dump(&mut conn, &key) == before, "{script:?} wrote");
    }
    // The fingerprint the get script hands out.
    let reply = eval(
        &mut conn,
        GrantScript::Get,
        &[id.as_str().as_bytes().to_vec(), slot.as_bytes().to_vec()],
    );
    let fingerprint = match &reply {
        redis::Value::Array(items) => match &items[2] {
            redis::Value::BulkString(f) => String::from_utf8(f.clone()).unwrap(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    // A fixed field changed since: `changed`, nothing written.
    support::set_field(&mut conn, &key, "note", Some(b"added later"));
    let before = dump(&mut conn, &key);
    assert_eq!(
        status(&eval(
            &mut conn,
            GrantScript::Consume,
            &consume_args(&fingerprint)
        )),
        "changed"
    );
    assert!(dump(&mut conn, &key) == before);
    support::set_field(&mut conn, &key, "note", None);
    // A changing field moved on (a failed attempt): the script consumes.
    support::set_field(&mut conn, &key, "failed", Some(b"1"));
    assert_eq!(
        status(&eval(
            &mut conn,
            GrantScript::Consume,
            &consume_args(&fingerprint)
        )),
        "consumed"
    );
    let second = grant("a#changed2", MINUTE, t0).await;
    store.issue(second.clone()).await.unwrap();
    assert_eq!(
        store
            .consume_once(&second.id, &second.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    // The issuing store goes out with the fingerprint it wrote; once a
    // fixed field changed (here to another sound record), the script
    // answers `changed`, and the store reads, validates and consumes the
    // record as it is now.
    let third = grant("a#changed3", MINUTE, t0).await;
    store.issue(third.clone()).await.unwrap();
    let third_key = support::grant_key(&store, &third.id);
    support::set_field(&mut conn, &third_key, "note", Some(b"added later"));
    assert_eq!(
        store
            .consume_once(&third.id, &third.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    let read = store.get(&third.id).await.unwrap().unwrap();
    assert_eq!(read.approval.approver_note.as_deref(), Some("added later"));
}

/// A v=3 record, written by the previous version of the store, has no
/// element field: it reads as a grant bound to no element (what it was
/// issued with), every script reads and writes it, and a write keeps it a
/// v=3 record. An element-bound grant keeps its element byte for byte.
#[tokio::test]
async fn v3_records_read_as_bound_to_no_element() {
    let server = shared_server();
    let options = support::options_for(server, "v3");
    let issuer = RedisApprovalStore::connect(options.clone()).await.unwrap();
    let other = RedisApprovalStore::connect(options).await.unwrap();
    let mut conn = server.conn();
    let t0 = now();
    let as_v3 = |conn: &mut redis::Connection, key: &str| {
        let raw: Vec<u8> = conn.get(key).unwrap();
        assert_eq!(raw[0], 4);
        let mut fields = countersign_store_redis::record_fields(&raw).unwrap();
        let (name, value) = fields.remove(16);
        assert_eq!((name, value), ("element", None));
        let mut old = countersign_store_redis::record_from_fields(&fields);
        old[0] = 3;
        assert_eq!(old.len(), raw.len() - 1);
        support::set_raw(conn, key, &old);
    };
    for store in [&issuer, &other] {
        let consumed = grant("a#v3-consumed", MINUTE, t0).await;
        let revoked = grant("a#v3-revoked", MINUTE, t0).await;
        for approval in [&consumed, &revoked] {
            issuer.issue(approval.clone()).await.unwrap();
            as_v3(&mut conn, &support::grant_key(&issuer, &approval.id));
            assert_eq!(
                store.get(&approval.id).await.unwrap(),
                Some(StoredGrant::issued(approval.clone()))
            );
        }
        let mut mismatched = consumed.binding();
        mismatched.url = "https://docs.example.com/other".to_owned();
        assert!(matches!(
            store
                .consume_once(&consumed.id, &mismatched, t0, &attempt())
                .await
                .unwrap(),
            ConsumeOutcome::Stale(_)
        ));
        let by = attempt();
        assert_eq!(
            store
                .consume_once(&consumed.id, &consumed.binding(), t0, &by)
                .await
                .unwrap(),
            ConsumeOutcome::Consumed { replay: false }
        );
        assert_eq!(
            store.revoke(&revoked.id).await.unwrap(),
            RevokeOutcome::Revoked
        );
        let key = support::grant_key(&issuer, &consumed.id);
        let raw: Vec<u8> = conn.get(&key).unwrap();
        assert_eq!(raw[0], 3, "a write keeps the record's format");
        let read = store.get(&consumed.id).await.unwrap().unwrap();
        assert_eq!(read.approval, consumed);
        assert_eq!(read.failed_attempts, 1);
        assert_eq!(read.state, GrantState::Consumed { at: t0, by });
        let read = other.get(&revoked.id).await.unwrap().unwrap();
        assert_eq!((read.approval, read.state), (revoked, GrantState::Revoked));
    }

    // An element-bound grant: the element's canonical JSON, as it is, in
    // the fixed fields the fingerprint covers.
    let page = countersign_approval_core::PageBinding::new("session", "tab", "rev-1")
        .with_element(support::element());
    let bound = grant("a#v4-element", MINUTE, t0)
        .await
        .bound_to_page(&page)
        .unwrap();
    issuer.issue(bound.clone()).await.unwrap();
    let key = support::grant_key(&issuer, &bound.id);
    assert_eq!(
        support::record(&mut conn, &key)["element"],
        support::element().canonical_json().into_bytes()
    );
    assert_eq!(
        other.get(&bound.id).await.unwrap(),
        Some(StoredGrant::issued(bound.clone()))
    );
    assert_eq!(
        issuer
            .consume_once(&bound.id, &bound.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    assert_eq!(other.get(&bound.id).await.unwrap().unwrap().approval, bound);
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
    // Wait for the replica link (a loaded machine can take seconds to sync).
    let mut conn = primary.conn();
    let mut online = false;
    for _ in 0..1200 {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut conn)
            .unwrap();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            online = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(online, "the replica did not come online within 30 s");
    let prefix = support::fresh_prefix("durable");
    // A confirmed write returns as soon as the replica acknowledges it: the
    // long bound only keeps a starved replica from failing the test.
    let one = RedisApprovalStore::connect(
        RedisStoreOptions::single(primary.url())
            .key_prefix(prefix.clone())
            .durability(Durability::new(1, Duration::from_secs(30)))
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
    let state = support::record_text(&mut rconn, &support::grant_key(&one, &id), "state");
    assert_eq!(state, "c");

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
    // Two wanted, one replica: never confirmed. How many acknowledged
    // within the 100 ms bound (the one replica, or none when the machine
    // starves it) is the scheduler's business, so either count is right.
    let unconfirmed = |error: &StoreError| {
        matches!(
            error,
            StoreError::DurabilityUnconfirmed {
                wanted: 2,
                confirmed: 0 | 1
            }
        )
    };
    assert!(matches!(
        two.issue(approval).await,
        Err(IssueError::Store(ref e)) if unconfirmed(e)
    ));
    assert_eq!(
        two.get(&id).await.unwrap().unwrap().state,
        GrantState::Active
    );
    let a = attempt();
    assert!(
        two.consume_once(&id, &binding, t0, &a)
            .await
            .is_err_and(|e| unconfirmed(&e))
    );
    // Applied on the primary: the same attempt is a replay (still unconfirmed),
    // any other attempt is stale. The stale answer needs no replica.
    assert!(
        two.consume_once(&id, &binding, t0, &a)
            .await
            .is_err_and(|e| unconfirmed(&e))
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
    let (actor, run) = (support::actor(), support::run());
    let key = support::grant_key(&store, &id);
    let keys = [
        key.clone(),
        store.actor_fence_key(&actor),
        store.run_fence_key(&actor, &run),
        store.live_key(&actor, &run),
        store.runs_key(&actor),
    ];
    let issue = |token: &[u8; 16]| {
        let at = now().as_millis();
        // The record up to the generations, with only its id and token.
        let fields: Vec<(&str, Option<Vec<u8>>)> = countersign_store_redis::RECORD_FIELDS[..17]
            .iter()
            .map(|&name| match name {
                "id" => (name, Some(id.as_str().as_bytes().to_vec())),
                "issue_token" => (name, Some(token.to_vec())),
                _ => (name, None),
            })
            .collect();
        redis::cmd("EVALSHA")
            .arg(store.script_sha(GrantScript::Issue))
            .arg(keys.len())
            .arg(&keys)
            .arg(&token[..])
            .arg(60_000)
            .arg(at)
            .arg(id.as_str())
            .arg(support::RUN)
            .arg(at + 60_000)
            .arg(store.slot_prefix(&actor))
            .arg(countersign_store_redis::record_from_fields(&fields))
            .clone()
    };
    // The pointer the store's issue writes first.
    let _: () = conn
        .set(
            store.pointer_key(&id),
            RedisApprovalStore::actor_tag(&actor),
        )
        .unwrap();
    let first: Vec<String> = issue(b"token-number-one").query(&mut conn).unwrap();
    // A new record's reply carries its fingerprint; a resent call's not.
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(first[0], "issued");
    let resent: Vec<String> = issue(b"token-number-one").query(&mut conn).unwrap();
    assert_eq!(resent, ["issued"]);
    let other: Vec<String> = issue(b"token-number-two").query(&mut conn).unwrap();
    assert_eq!(other, ["exists"]);
    // A record this incomplete is not one of the store's.
    assert!(matches!(
        store.get(&id).await,
        Err(StoreError::Corrupt { .. })
    ));
}

/// The keys a stop and a resume leave: a stopped fence is at the next
/// generation and never expires (the expiry its grants need is kept in
/// `keep`); the run's live set is gone; a refused issue leaves no pointer;
/// resuming gives the fence its expiry back.
#[tokio::test]
async fn a_stop_moves_the_fence_on_and_keeps_it_while_stopped() {
    let server = shared_server();
    let store = store_on(server, "stop-layout").await;
    let mut conn = server.conn();
    let t0 = now();
    let (actor, run) = (support::actor(), support::run());
    let first = grant("a#s1", MINUTE, t0).await;
    let second = grant("a#s2", MINUTE, t0).await;
    for approval in [&first, &second] {
        store.issue(approval.clone()).await.unwrap();
    }
    let fence = store.run_fence_key(&actor, &run);
    let pexpiretime = |conn: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("PEXPIRETIME").arg(key).query(conn).unwrap()
    };
    let kept = pexpiretime(&mut conn, &fence);
    assert!(kept > 0);
    assert_eq!(
        store.stop_run(&actor, &run, t0).await.unwrap(),
        StopOutcome {
            stopped_grants: 2,
            stopped_standing: 0,
            was_stopped: false
        }
    );
    let fields: HashMap<String, String> = conn.hgetall(&fence).unwrap();
    assert_eq!(fields["gen"], "1");
    assert_eq!(fields["stopped"], "1");
    assert!(
        (fields["keep"].parse::<i64>().unwrap() - kept).abs() < 5,
        "{fields:?}"
    );
    assert_eq!(
        pexpiretime(&mut conn, &fence),
        -1,
        "a stopped fence never expires"
    );
    let live: bool = conn.exists(store.live_key(&actor, &run)).unwrap();
    assert!(!live, "the live set of a stopped run is gone");
    let runs: Vec<String> = conn.smembers(store.runs_key(&actor)).unwrap();
    assert!(runs.is_empty(), "{runs:?}");
    // The grants keep their generations; they read stopped.
    let rgen = support::record_text(&mut conn, &support::grant_key(&store, &first.id), "rgen");
    assert_eq!(rgen, "0");
    assert_eq!(
        store.get(&first.id).await.unwrap().unwrap().state,
        GrantState::Stopped
    );
    // Refused: nothing stored, the pointer it claimed released.
    let refused = grant("a#s3", MINUTE, t0).await;
    assert_eq!(store.issue(refused.clone()).await, Err(IssueError::Stopped));
    for (name, key) in [
        ("grant", support::grant_key(&store, &refused.id)),
        ("pointer", store.pointer_key(&refused.id)),
    ] {
        let exists: bool = conn.exists(&key).unwrap();
        assert!(!exists, "{name} left by a refused issue");
    }
    assert_eq!(store.get(&refused.id).await.unwrap(), None);
    // Resumed: the fence expires again, no earlier than its grants.
    assert_eq!(
        store.resume_run(&actor, &run).await.unwrap(),
        ResumeOutcome::Resumed
    );
    let fields: HashMap<String, String> = conn.hgetall(&fence).unwrap();
    assert_eq!(
        fields,
        HashMap::from([("gen".into(), "1".into()), ("stopped".into(), "0".into())])
    );
    assert!(pexpiretime(&mut conn, &fence) >= kept);
    let third = grant("a#s4", MINUTE, t0).await;
    store.issue(third.clone()).await.unwrap();
    let rgen = support::record_text(&mut conn, &support::grant_key(&store, &third.id), "rgen");
    assert_eq!(rgen, "1");
    assert_eq!(
        store
            .consume_once(&third.id, &third.binding(), t0, &attempt())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    // Abandon on a stopped grant changes nothing, not even the expiry.
    let before = dump_all(&mut conn, &store, &first.id);
    assert_eq!(
        store.abandon(&first.id, &attempt(), t0).await.unwrap(),
        AbandonOutcome::Stopped
    );
    assert!(dump_all(&mut conn, &store, &first.id) == before);

    // An actor stop: the actor's fence, and its runs' live sets, the same way.
    let other_run = RunId::new("run-2").unwrap();
    let elsewhere = Approval {
        run_id: other_run.clone(),
        ..grant("a#s5", MINUTE, t0).await
    };
    store.issue(elsewhere.clone()).await.unwrap();
    assert_eq!(
        store.stop_actor(&actor, t0).await.unwrap(),
        StopOutcome {
            stopped_grants: 1,
            stopped_standing: 0,
            was_stopped: false
        }
    );
    let fields: HashMap<String, String> = conn.hgetall(store.actor_fence_key(&actor)).unwrap();
    assert_eq!(
        (fields["gen"].as_str(), fields["stopped"].as_str()),
        ("1", "1")
    );
    assert_eq!(pexpiretime(&mut conn, &store.actor_fence_key(&actor)), -1);
    for key in [store.live_key(&actor, &other_run), store.runs_key(&actor)] {
        let exists: bool = conn.exists(&key).unwrap();
        assert!(!exists, "{key}");
    }
    assert_eq!(
        store.resume_actor(&actor).await.unwrap(),
        ResumeOutcome::Resumed
    );
}

/// A mismatch whose binding names another actor goes first to that actor's
/// slot, finds no grant there, and is counted in the grant's own slot,
/// through the grant's pointer, by a store that never saw the grant.
#[tokio::test]
async fn a_mismatched_actor_is_counted_in_the_grants_own_slot() {
    let server = shared_server();
    let options = support::options_for(server, "stranger");
    let issuer = RedisApprovalStore::connect(options.clone()).await.unwrap();
    let t0 = now();
    let approval = grant("a#stranger", MINUTE, t0)
        .await
        .with_attempt_limit(2)
        .unwrap();
    issuer.issue(approval.clone()).await.unwrap();
    let stranger = Binding {
        actor_id: ActorId::new("stranger {x}").unwrap(),
        ..approval.binding()
    };
    let expected = [
        ConsumeOutcome::Stale(StaleReason::Mismatch),
        ConsumeOutcome::Stale(StaleReason::Locked),
        ConsumeOutcome::Stale(StaleReason::Locked),
    ];
    for outcome in expected {
        let fresh = RedisApprovalStore::connect(options.clone()).await.unwrap();
        assert_eq!(
            fresh
                .consume_once(&approval.id, &stranger, t0, &attempt())
                .await
                .unwrap(),
            outcome
        );
    }
    let stored = issuer.get(&approval.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.state, stored.failed_attempts),
        (GrantState::Locked, 2)
    );
    // Nothing was written in the stranger's slot.
    let mut conn = server.conn();
    let stray: bool = conn
        .exists(issuer.grant_key(&stranger.actor_id, &approval.id))
        .unwrap();
    assert!(!stray);
}

/// Memory per grant, measured on a server of its own with the default key
/// prefix: 2 000 grants over 20 runs of one actor (100 per run), as Act's
/// tests issue them; a typical record (a click with a short selector on a
/// short URL) takes at most 400 bytes, active or consumed, with the
/// server's default encodings.
#[tokio::test]
async fn memory_per_grant_is_measured() {
    const GRANTS: usize = 2_000;
    const RUNS: usize = 20;
    let server = RedisServer::start();
    let store = RedisApprovalStore::connect(
        RedisStoreOptions::single(server.url())
            .key_prefix(countersign_store_redis::DEFAULT_KEY_PREFIX)
            .allow_non_durable_persistence(),
    )
    .await
    .unwrap();
    let mut conn = server.conn();
    let used = |conn: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("memory").query(conn).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let usage = |conn: &mut redis::Connection, key: &str| -> u64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query(conn)
            .unwrap()
    };
    let runs: Vec<RunId> = (0..RUNS)
        .map(|n| RunId::new(format!("run-{n:02}")).unwrap())
        .collect();
    let t0 = now();
    let before = used(&mut conn);
    let mut ids = Vec::new();
    for n in 0..GRANTS {
        let approval = Approval {
            run_id: runs[n % RUNS].clone(),
            ..grant(&format!("button#buy-{n}"), Duration::from_secs(600), t0).await
        };
        ids.push(approval.id.clone());
        store.issue(approval).await.unwrap();
    }
    let after = used(&mut conn);
    let actor = support::actor();
    let sample: Vec<&ApprovalId> = ids.iter().step_by(100).collect();
    let mean = |conn: &mut redis::Connection, key: &dyn Fn(&ApprovalId) -> String| -> u64 {
        sample.iter().map(|id| usage(conn, &key(id))).sum::<u64>() / sample.len() as u64
    };
    let grant_bytes = mean(&mut conn, &|id| store.grant_key(&actor, id));
    let pointer_bytes = mean(&mut conn, &|id| store.pointer_key(id));
    let live: u64 = runs
        .iter()
        .map(|run| usage(&mut conn, &store.live_key(&actor, run)))
        .sum();
    let fences: u64 = runs
        .iter()
        .map(|run| usage(&mut conn, &store.run_fence_key(&actor, run)))
        .sum::<u64>()
        + usage(&mut conn, &store.actor_fence_key(&actor))
        + usage(&mut conn, &store.runs_key(&actor));
    let per_grant = (after - before) / GRANTS as u64;
    let key = store.grant_key(&actor, &ids[0]);
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(&key)
        .query(&mut conn)
        .unwrap();
    let length: u64 = redis::cmd("STRLEN").arg(&key).query(&mut conn).unwrap();
    eprintln!(
        "{GRANTS} grants over {RUNS} runs of one actor: record {grant_bytes} B ({encoding} \
         string of {length} B, key {} B), pointer {pointer_bytes} B, live sets {} B/grant, \
         fences and run set {fences} B in all; INFO used_memory grew {} B, {per_grant} B/grant",
        key.len(),
        live / GRANTS as u64,
        after - before
    );
    // After consuming them all, the live sets are gone.
    for (n, id) in ids.iter().enumerate() {
        let binding = Binding {
            run_id: runs[n % RUNS].clone(),
            ..store.get(id).await.unwrap().unwrap().approval.binding()
        };
        store
            .consume_once(id, &binding, t0, &attempt())
            .await
            .unwrap();
    }
    for run in &runs {
        let exists: bool = conn.exists(store.live_key(&actor, run)).unwrap();
        assert!(!exists);
    }
    let consumed = used(&mut conn);
    let consumed_bytes = mean(&mut conn, &|id| store.grant_key(&actor, id));
    eprintln!(
        "after consuming every grant: record {consumed_bytes} B; used_memory {} B over the \
         start, {} B/grant",
        consumed - before,
        (consumed - before) / GRANTS as u64
    );
    assert!(grant_bytes <= 400, "{grant_bytes} B per active record");
    assert!(
        consumed_bytes <= 400,
        "{consumed_bytes} B per consumed record"
    );
    // A generous sanity bound: the figures above go to docs/redis.md.
    assert!(per_grant < 1_024, "{per_grant} B per grant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_set_memory_is_measured_across_its_encodings() {
    // Redis keeps a sorted set of at most `zset-max-listpack-entries` (128
    // by default) members as one listpack, and a larger one as a skiplist
    // with a hash table: the bytes per live grant change at that size.
    let store = store_on(shared_server(), "live-memory").await;
    let mut conn = shared_server().conn();
    let live = store.live_key(&support::actor(), &support::run());
    let usage = |conn: &mut redis::Connection| -> (u64, String) {
        let bytes = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&live)
            .arg("SAMPLES")
            .arg(0)
            .query(conn)
            .unwrap();
        let encoding = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(&live)
            .query(conn)
            .unwrap();
        (bytes, encoding)
    };
    let t0 = now();
    let mut issued = 0;
    let mut figures = Vec::new();
    for size in [100, 128, 129, 1_000, 10_000] {
        while issued < size {
            let selector = format!("button#buy-{issued}");
            let approval = grant(&selector, Duration::from_secs(600), t0).await;
            store.issue(approval).await.unwrap();
            issued += 1;
        }
        let (bytes, encoding) = usage(&mut conn);
        eprintln!(
            "live set of {size} grants: {bytes} B by MEMORY USAGE ({encoding}), {:.1} B per grant",
            bytes as f64 / size as f64
        );
        figures.push((size, bytes, encoding));
    }
    let per = |from: usize, to: usize| {
        let bytes = |size| figures.iter().find(|f| f.0 == size).unwrap().1;
        (bytes(to) - bytes(from)) as f64 / (to - from) as f64
    };
    eprintln!(
        "live set, bytes per added grant: {:.1} B from 100 to 128, {:.1} B from 1 000 to 10 000",
        per(100, 128),
        per(1_000, 10_000)
    );
    assert_eq!(figures[1].2, "listpack");
    assert_eq!(figures[2].2, "skiplist");
    // Sanity bounds around the figures docs/redis.md gives.
    assert!(per(100, 128) < 48.0);
    assert!(per(1_000, 10_000) < 160.0);
}
