//! Standing grants on one server this test binary starts: the key layout
//! and expiries, corrupt records (an error, never an outcome, and never
//! written to), the fingerprint a write checks, and a long random run of
//! calls answered exactly as the in-memory store answers them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, ActorId, ApprovalStore, Approver, ApproverId, AttemptId, ProposalStore, RunId,
    StandingGrant, StandingId, StandingScope, StandingState, StoreError, Timestamp,
};
use countersign_store_memory::InMemoryApprovalStore;
use countersign_store_redis::{GrantScript, RedisApprovalStore};
use support::{now, shared_server, store_on};

const TTL: Duration = Duration::from_secs(60);
/// The store's default retention, which `store_on` keeps.
const RETENTION_MS: i64 = 15 * 60 * 1000;

fn scope(name: &str) -> StandingScope {
    StandingScope::from_facts(
        "https://shop.example.com/results?page=2",
        "click",
        "button",
        name,
    )
    .unwrap()
}

fn standing(actor: &ActorId, run: &RunId, uses: u32, at: Timestamp) -> StandingGrant {
    let approver = Approver {
        id: ApproverId::new("approver-carol").unwrap(),
        approved_at: at,
    };
    StandingGrant::new(
        actor.clone(),
        run.clone(),
        &scope("Next page"),
        uses,
        TTL,
        at,
        approver,
    )
    .unwrap()
}

fn fresh_actor(tag: &str) -> ActorId {
    ActorId::new(format!("{tag}-{}", StandingId::generate().unwrap())).unwrap()
}

fn attempt() -> AttemptId {
    AttemptId::generate().unwrap()
}

/// A call's answer as its debug text, so that answers of any type compare.
fn debugged<T: std::fmt::Debug>(result: Result<T, StoreError>) -> Result<String, StoreError> {
    result.map(|value| format!("{value:?}"))
}

/// Arguments as the byte slices a command takes.
fn borrowed(args: &[Vec<u8>]) -> Vec<&[u8]> {
    args.iter().map(Vec::as_slice).collect()
}

fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).unwrap()
}

fn dump(conn: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(conn).unwrap()
}

/// The fields of a standing record (after its format byte), `None` for an
/// absent one: the layout only, for tests that damage records on purpose.
fn fields(raw: &[u8]) -> Vec<Option<Vec<u8>>> {
    assert_eq!(raw[0], 1, "standing record format");
    let (mut at, mut out) = (1, Vec::new());
    while at < raw.len() {
        let (start, len) = match raw[at] {
            0xFD => {
                out.push(None);
                at += 1;
                continue;
            }
            0xFE => {
                let len = u32::from_be_bytes(raw[at + 1..at + 5].try_into().unwrap());
                (at + 5, usize::try_from(len).unwrap())
            }
            n => (at + 1, usize::from(n)),
        };
        out.push(Some(raw[start..start + len].to_vec()));
        at = start + len;
    }
    out
}

/// A standing record of `fields`, short ones only.
fn record_of(fields: &[Option<Vec<u8>>]) -> Vec<u8> {
    let mut out = vec![1u8];
    for field in fields {
        match field {
            Some(value) => {
                out.push(u8::try_from(value.len()).unwrap());
                out.extend_from_slice(value);
            }
            None => out.push(0xFD),
        }
    }
    out
}

#[tokio::test]
async fn a_standing_grant_lives_in_its_actors_slot_beside_its_fences() {
    let store = store_on(shared_server(), "standing-layout").await;
    let mut conn = shared_server().conn();
    let (actor, run) = (fresh_actor("layout"), RunId::new("run {1}").unwrap());
    let t0 = now();
    let grant = standing(&actor, &run, 3, t0);
    store.issue_standing(grant.clone()).await.unwrap();

    let key = store.standing_key(&actor, &grant.id);
    let slot = store.slot_prefix(&actor);
    assert_eq!(key, format!("{slot}:standing:{}", grant.id));
    let index = store.standings_key(&actor, &run);
    assert_eq!(index, format!("{slot}:standings:run {{1}}"));
    let raw: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut conn).unwrap();
    let stored = fields(&raw);
    assert_eq!(stored.len(), 16);
    assert_eq!(stored[3].as_deref(), Some(grant.scope.as_str().as_bytes()));
    assert_eq!(stored[12].as_deref(), Some(&b"a"[..]));
    assert_eq!(stored[14], None, "no use taken");
    // Kept until its expiry plus the retention.
    let ttl = pttl(&mut conn, &key);
    let wanted = i64::try_from(TTL.as_millis()).unwrap() + RETENTION_MS;
    assert!((wanted - 5_000..=wanted).contains(&ttl), "{ttl}");
    // The index scores it by issued_at, and lives as long.
    let score: f64 = redis::cmd("ZSCORE")
        .arg(&index)
        .arg(grant.id.as_str())
        .query(&mut conn)
        .unwrap();
    assert_eq!(score, t0.as_millis() as f64);
    assert!(pttl(&mut conn, &index) >= ttl - 1_000);
    // The pointer names the actor's tag, as raw bytes.
    let pointer: Vec<u8> = redis::cmd("GET")
        .arg(store.standing_pointer_key(&grant.id))
        .query(&mut conn)
        .unwrap();
    let tag = RedisApprovalStore::actor_tag(&actor);
    let hex: String = pointer.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, tag);
    assert_eq!(
        store.standing_pointer_key(&grant.id),
        format!("{}:sid:{{{}}}", store.prefix(), grant.id)
    );

    // A stop moves the run's fence on, and the record reads stopped; the
    // stopped fence never expires, and once resumed it outlives the record.
    store.stop_run(&actor, &run, t0).await.unwrap();
    assert_eq!(pttl(&mut conn, &store.run_fence_key(&actor, &run)), -1);
    store.resume_run(&actor, &run).await.unwrap();
    assert!(pttl(&mut conn, &store.run_fence_key(&actor, &run)) >= ttl - 1_000);
    let read = store.get_standing(&grant.id).await.unwrap().unwrap();
    assert_eq!(read.state, StandingState::Stopped);
    assert!(
        store
            .standing_grants(&actor, &run, t0)
            .await
            .unwrap()
            .is_empty()
    );
    // The list dropped the stopped grant from the index for good.
    let left: Vec<String> = redis::cmd("ZRANGE")
        .arg(&index)
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn a_write_after_expiry_keeps_the_record_and_its_pointer_longer() {
    let store = store_on(shared_server(), "standing-expiry").await;
    let mut conn = shared_server().conn();
    let actor = fresh_actor("expiry");
    let run = RunId::new("run").unwrap();
    let t0 = now();
    let grant = standing(&actor, &run, 1, t0);
    store.issue_standing(grant.clone()).await.unwrap();
    let key = store.standing_key(&actor, &grant.id);
    let before = pttl(&mut conn, &key);
    // A give-back an hour after the caller's now: the record is kept for
    // the retention from then, and its pointer as long.
    let later = t0.saturating_add(Duration::from_secs(3600));
    assert_eq!(
        store
            .give_back_use(&grant.id, &attempt(), later)
            .await
            .unwrap(),
        AbandonOutcome::Expired
    );
    let after = pttl(&mut conn, &key);
    assert!(after > before + 3_000_000, "{before} {after}");
    let pointer = pttl(&mut conn, &store.standing_pointer_key(&grant.id));
    assert!(pointer >= after - 1_000, "{pointer} {after}");
    assert!(pttl(&mut conn, &store.standings_key(&actor, &run)) >= after - 1_000);
}

#[tokio::test]
async fn a_corrupt_standing_record_is_an_error_and_never_written() {
    let store = store_on(shared_server(), "standing-corrupt").await;
    let mut conn = shared_server().conn();
    let actor = fresh_actor("corrupt");
    let run = RunId::new("run").unwrap();
    let t0 = now();
    // Each damage: which field (by place), and what it holds then.
    let damages: [(usize, Option<&[u8]>); 6] = [
        // A fixed field the scripts take as it is, but the library refuses.
        (3, Some(b"\xff not utf-8")),
        (1, Some(b"")),
        // Changing fields the scripts refuse as the library does.
        (12, Some(b"c")),
        (13, Some(b"05")),
        (14, Some(b"att_1 att_2 att_3")),
        (15, Some(b"att_1 att_1")),
    ];
    for (place, value) in damages {
        let grant = standing(&actor, &run, 2, t0);
        store.issue_standing(grant.clone()).await.unwrap();
        let key = store.standing_key(&actor, &grant.id);
        let raw: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut conn).unwrap();
        let mut damaged = fields(&raw);
        damaged[place] = value.map(<[u8]>::to_vec);
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(record_of(&damaged))
            .arg("KEEPTTL")
            .query(&mut conn)
            .unwrap();
        let before = dump(&mut conn, &key);
        // Each call names the record's key, but a list, which reads what
        // its index names, names the index when the library refuses a
        // record the script took.
        let index = store.standings_key(&actor, &run);
        let corrupt = |what: &str, result: Result<String, StoreError>| match result {
            Err(StoreError::Corrupt { key: at, .. }) => {
                assert!(at == key || (what == "list" && at == index), "{what}: {at}");
            }
            other => panic!("{what} of field {place} damaged answered {other:?}"),
        };
        corrupt("get", debugged(store.get_standing(&grant.id).await));
        corrupt(
            "use",
            debugged(
                store
                    .use_standing(&grant.id, &grant.key(), t0, &attempt())
                    .await,
            ),
        );
        corrupt(
            "give back",
            debugged(store.give_back_use(&grant.id, &attempt(), t0).await),
        );
        corrupt("revoke", debugged(store.revoke_standing(&grant.id).await));
        corrupt(
            "list",
            debugged(store.standing_grants(&actor, &run, t0).await),
        );
        assert!(dump(&mut conn, &key) == before, "field {place}: written");
        let _: () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
    }
    // A key of another type.
    let grant = standing(&actor, &run, 2, t0);
    store.issue_standing(grant.clone()).await.unwrap();
    let key = store.standing_key(&actor, &grant.id);
    let _: () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("state")
        .arg("a")
        .query(&mut conn)
        .unwrap();
    assert!(matches!(
        store.get_standing(&grant.id).await,
        Err(StoreError::Corrupt { .. })
    ));
    assert!(matches!(
        store
            .use_standing(&grant.id, &grant.key(), t0, &attempt())
            .await,
        Err(StoreError::Corrupt { .. })
    ));
    // A record in another actor's slot is not one this store wrote there.
    let other = fresh_actor("other");
    let moved = standing(&other, &run, 2, t0);
    store.issue_standing(moved.clone()).await.unwrap();
    let raw: Vec<u8> = redis::cmd("GET")
        .arg(store.standing_key(&other, &moved.id))
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(store.standing_key(&actor, &moved.id))
        .arg(raw)
        .query(&mut conn)
        .unwrap();
    let mut key = moved.key();
    key.actor_id = actor.clone();
    assert!(matches!(
        store.use_standing(&moved.id, &key, t0, &attempt()).await,
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn a_write_goes_only_to_the_record_the_library_validated() {
    let store = store_on(shared_server(), "standing-fingerprint").await;
    let mut conn = shared_server().conn();
    let actor = fresh_actor("fingerprint");
    let run = RunId::new("run").unwrap();
    let t0 = now();
    let grant = standing(&actor, &run, 2, t0);
    store.issue_standing(grant.clone()).await.unwrap();
    let key = store.standing_key(&actor, &grant.id);
    let slot = store.slot_prefix(&actor);
    let eval = |conn: &mut redis::Connection, script: GrantScript, args: &[&[u8]]| {
        let value: redis::Value = redis::cmd("EVALSHA")
            .arg(store.script_sha(script))
            .arg(1)
            .arg(&key)
            .arg(args)
            .query(conn)
            .unwrap();
        match value {
            redis::Value::Array(items) => items,
            other => panic!("{other:?}"),
        }
    };
    let word = |value: &redis::Value| match value {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        other => panic!("{other:?}"),
    };
    let now_text = t0.as_millis().to_string();
    let an_attempt = attempt();
    let use_args = |fingerprint: &str| -> Vec<Vec<u8>> {
        [
            grant.id.as_str(),
            slot.as_str(),
            fingerprint,
            "60000",
            now_text.as_str(),
            an_attempt.as_str(),
            actor.as_str(),
            run.as_str(),
            grant.scope.as_str(),
        ]
        .map(|arg| arg.as_bytes().to_vec())
        .to_vec()
    };
    let before = dump(&mut conn, &key);
    let reply = eval(
        &mut conn,
        GrantScript::UseStanding,
        &borrowed(&use_args(&"0".repeat(40))),
    );
    assert_eq!(word(&reply[0]), "changed");
    assert_eq!(reply.len(), 1);
    assert!(dump(&mut conn, &key) == before, "written");
    // With the fingerprint the get script hands out, the use is taken.
    let read = eval(
        &mut conn,
        GrantScript::GetStanding,
        &[grant.id.as_str().as_bytes(), slot.as_bytes()],
    );
    assert_eq!(word(&read[0]), "found");
    let fingerprint = word(&read[2]);
    let reply = eval(
        &mut conn,
        GrantScript::UseStanding,
        &borrowed(&use_args(&fingerprint)),
    );
    assert_eq!(word(&reply[0]), "used");
    assert_eq!(
        store
            .get_standing(&grant.id)
            .await
            .unwrap()
            .unwrap()
            .used_by,
        [an_attempt]
    );
}

/// A small deterministic generator (xorshift), so that a failure repeats.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % u64::try_from(n).unwrap()).unwrap()
    }

    /// Below `n`, and half the time below `hot`.
    fn mostly_below(&mut self, hot: usize, n: usize) -> usize {
        let bound = if self.below(2) == 0 { hot } else { n };
        self.below(bound)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_answers_every_standing_call_as_the_memory_store_does() {
    let redis = store_on(shared_server(), "standing-model").await;
    let memory = InMemoryApprovalStore::new();
    let stores: [&dyn ProposalStore; 2] = [&redis, &memory];
    let actor = fresh_actor("model");
    let runs = [RunId::new("run-a").unwrap(), RunId::new("run-b").unwrap()];
    let scopes = [scope("Next page"), scope("Buy now")];
    // A few attempts come often (they hold uses, give them back, retry),
    // the rest seldom (enough to fill a grant's list of given-back ones).
    let attempts: Vec<AttemptId> = (0..24).map(|_| attempt()).collect();
    let t0 = now();
    let ttl_ms = u64::try_from(TTL.as_millis()).unwrap();
    let mut grants: Vec<StandingGrant> = Vec::new();
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut seen = std::collections::BTreeSet::new();
    for step in 0..1_500 {
        let at = t0.saturating_add(Duration::from_millis(
            [1, ttl_ms / 2, ttl_ms - 1, ttl_ms, ttl_ms + 5][dice.below(5)],
        ));
        let pick = if grants.is_empty() {
            None
        } else {
            Some(grants[dice.below(grants.len())].clone())
        };
        let what = match (dice.below(100), &pick) {
            (0..8, _) | (_, None) => {
                let run = &runs[dice.below(2)];
                let mut grant =
                    standing(&actor, run, 1 + u32::try_from(dice.below(3)).unwrap(), t0);
                grant.issued_at =
                    t0.saturating_add(Duration::from_millis(u64::try_from(dice.below(3)).unwrap()));
                grant.attempt_limit = 2 + u32::try_from(dice.below(2)).unwrap();
                let mut answers = Vec::new();
                for store in stores {
                    answers.push(format!("{:?}", store.issue_standing(grant.clone()).await));
                }
                grants.push(grant);
                answers
            }
            (8..60, Some(grant)) => {
                // Mostly the grant's own key; now and then another run's,
                // another scope's or another actor's.
                let mut key = grant.key();
                match dice.below(12) {
                    0 => key.run_id = runs.iter().find(|r| **r != grant.run_id).unwrap().clone(),
                    1 => key.scope = scopes[1].clone(),
                    2 => key.actor_id = fresh_actor("stranger"),
                    _ => {}
                }
                let a = &attempts[dice.mostly_below(4, attempts.len())];
                let mut answers = Vec::new();
                for store in stores {
                    answers.push(format!(
                        "{:?}",
                        store.use_standing(&grant.id, &key, at, a).await
                    ));
                }
                answers
            }
            (60..90, Some(grant)) => {
                let a = &attempts[dice.mostly_below(4, attempts.len())];
                let mut answers = Vec::new();
                for store in stores {
                    answers.push(format!("{:?}", store.give_back_use(&grant.id, a, at).await));
                }
                answers
            }
            (90..95, Some(grant)) => {
                let mut answers = Vec::new();
                for store in stores {
                    answers.push(format!("{:?}", store.revoke_standing(&grant.id).await));
                }
                answers
            }
            (95, _) => {
                let run = &runs[dice.below(2)];
                let mut answers = Vec::new();
                for store in stores {
                    answers.push(format!("{:?}", store.stop_run(&actor, run, at).await));
                }
                answers
            }
            _ => {
                let run = &runs[dice.below(2)];
                let mut answers = Vec::new();
                for store in stores {
                    answers.push(format!("{:?}", store.resume_run(&actor, run).await));
                }
                answers
            }
        };
        assert_eq!(what[0], what[1], "step {step}: redis, then memory");
        seen.insert(what[0].clone());
        // Every grant reads the same, and each run lists the same.
        if step % 50 == 49 {
            for grant in &grants {
                let redis_read = redis.get_standing(&grant.id).await.unwrap();
                let memory_read = memory.get_standing(&grant.id).await.unwrap();
                assert_eq!(redis_read, memory_read, "step {step}: {}", grant.id);
            }
            for run in &runs {
                let redis_list = redis.standing_grants(&actor, run, at).await.unwrap();
                let memory_list = memory.standing_grants(&actor, run, at).await.unwrap();
                assert_eq!(redis_list, memory_list, "step {step}: {run}");
            }
        }
    }
    // The run went through every answer that matters.
    for answer in [
        "replay: false })",
        "replay: true })",
        "Ok(Stale(Abandoned))",
        "Ok(Stale(Consumed))",
        "Ok(Stale(Expired))",
        "Ok(Stale(Locked))",
        "Ok(Stale(Mismatch))",
        "Ok(Stale(Revoked))",
        "Ok(Stale(Stopped))",
        "Ok(Usable { restored: true })",
        "Ok(Usable { restored: false })",
        "Ok(Expired)",
        "Ok(Stopped)",
        "Ok(AlreadyEnded)",
        "Err(Stopped)",
    ] {
        assert!(
            seen.iter().any(|seen| seen.contains(answer)),
            "never answered {answer}: {seen:#?}"
        );
    }
}
