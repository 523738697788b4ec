//! Proposals in Redis beyond the conformance kit (which `single.rs` and
//! `cluster.rs` run): separate connections racing on one proposal, records
//! altered by hand, the keys' layout and expiries, and a slot that moves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use countersign_approval_core::{
    ActorId, ApprovalStore, ApproveError, ApproverId, AttemptId, ConsumeOutcome, DecisionOutcome,
    PageBinding, PageSnapshot, Proposal, ProposalState, ProposalStore, ProposeError, RunId,
    StoreError, StoredGrant, StoredProposal, Timestamp,
};
use countersign_store_redis::{RedisApprovalStore, RedisStoreOptions};
use redis::Commands;
use support::{RedisCluster, RedisServer, cluster_store, now, shared_server, store_on};

const MINUTE: Duration = Duration::from_secs(60);

/// A PNG signature and a few bytes.
const SCREENSHOT: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\x00\x01";

fn actor(name: &str) -> ActorId {
    ActorId::new(name).unwrap()
}

fn run(name: &str) -> RunId {
    RunId::new(name).unwrap()
}

fn approver(n: usize) -> ApproverId {
    ApproverId::new(format!("approver-{n}")).unwrap()
}

/// A proposal of `actor` in `run` clicking `selector` on the test URL,
/// made at `at` for `ttl`, with a snapshot of an element-bound page and a
/// screenshot.
async fn observed(
    actor: &ActorId,
    run: &RunId,
    selector: &str,
    ttl: Duration,
    at: Timestamp,
) -> Proposal {
    let (url, action) = support::url_and_action(selector).await;
    Proposal::for_action(actor.clone(), run.clone(), &url, &action, ttl, at)
        .unwrap()
        .observed(PageSnapshot {
            page: PageBinding {
                session_id: "session-1".to_owned(),
                target_id: "target-1".to_owned(),
                page_revision: "revision-1".to_owned(),
                element: Some(support::element()),
            },
            screenshot_png: Some(SCREENSHOT.to_vec()),
            target_found: true,
        })
        .unwrap()
}

fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).unwrap()
}

/// Asserts that `key` expires in `(want - 10 s, want]`.
fn assert_expires_in(conn: &mut redis::Connection, key: &str, want: Duration) {
    let left = pttl(conn, key);
    let want = i64::try_from(want.as_millis()).unwrap();
    assert!(
        left <= want && left > want - 10_000,
        "{key} expires in {left} ms, expected about {want} ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn sixteen_stores_approving_one_proposal_issue_exactly_one_grant() {
    let server = shared_server();
    let prefix = support::fresh_prefix("race16");
    let mut stores = Vec::new();
    for _ in 0..16 {
        // Each its own connection: the race is between clients, not
        // between tasks on one socket.
        let options = RedisStoreOptions::single(server.url())
            .key_prefix(prefix.clone())
            .allow_non_durable_persistence();
        stores.push(Arc::new(
            RedisApprovalStore::connect(options).await.unwrap(),
        ));
    }
    let (who, run) = (actor("racer"), run("race"));
    let t0 = now();
    let mut conn = server.conn();
    for round in 0..8 {
        let proposal = observed(&who, &run, &format!("a#r{round}"), MINUTE, t0).await;
        stores[0].propose(proposal.clone()).await.unwrap();
        let decided_at = t0.saturating_add(Duration::from_millis(1));
        let grants: Vec<_> = (0..stores.len())
            .map(|n| {
                proposal
                    .grant(MINUTE, decided_at, Some(approver(n)))
                    .unwrap()
            })
            .collect();
        let start = Arc::new(tokio::sync::Barrier::new(stores.len()));
        let mut tasks = Vec::new();
        for (store, grant) in stores.iter().zip(&grants) {
            let (store, grant, start, id) = (
                Arc::clone(store),
                grant.clone(),
                Arc::clone(&start),
                proposal.id.clone(),
            );
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                store.approve_proposal(&id, grant, decided_at).await
            }));
        }
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap().unwrap());
        }
        let winners: Vec<usize> = answers
            .iter()
            .enumerate()
            .filter(|(_, a)| **a == DecisionOutcome::Approved)
            .map(|(n, _)| n)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {answers:?}");
        let winner = winners[0];
        let state = ProposalState::Approved {
            approval_id: grants[winner].id.clone(),
            by: Some(approver(winner)),
            at: decided_at,
        };
        for (n, answer) in answers.iter().enumerate() {
            if n != winner {
                assert_eq!(
                    *answer,
                    DecisionOutcome::AlreadyDecided(state.clone()),
                    "round {round}, store {n}"
                );
            }
        }
        // One grant, the winner's; the losers left no pointer behind.
        for (n, grant) in grants.iter().enumerate() {
            let stored = stores[n].get(&grant.id).await.unwrap();
            let pointer: bool = conn.exists(stores[0].pointer_key(&grant.id)).unwrap();
            if n == winner {
                assert_eq!(stored, Some(StoredGrant::issued(grant.clone())));
                assert!(pointer);
            } else {
                assert_eq!(stored, None, "round {round}, store {n}");
                assert!(
                    !pointer,
                    "round {round}: store {n} left its grant's pointer"
                );
            }
        }
        let read = stores[15].get_proposal(&proposal.id).await.unwrap();
        assert_eq!(read, Some(StoredProposal { proposal, state }));
    }
    // Every proposal was decided: the run's pending index is empty.
    let left: usize = conn.zcard(stores[0].pending_key(&who, &run)).unwrap();
    assert_eq!(left, 0);
}

/// One way to damage a record by hand.
type Damage = fn(&[u8]) -> Vec<u8>;

/// The record with the first occurrence of the bytes `from` replaced by `to`.
fn replaced(raw: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = raw
        .windows(from.len())
        .position(|w| w == from)
        .expect("the bytes occur in the record");
    [&raw[..at], to, &raw[at + from.len()..]].concat()
}

/// The length of the head, as the record's bytes 1..5 give it.
fn head_len(raw: &[u8]) -> usize {
    usize::try_from(u32::from_be_bytes(raw[1..5].try_into().unwrap())).unwrap()
}

#[tokio::test]
async fn a_proposal_altered_by_hand_is_corrupt_and_never_decided() {
    let store = store_on(shared_server(), "damage").await;
    let mut conn = shared_server().conn();
    let (who, run) = (actor("damage"), run("damage"));
    let t0 = now();
    let proposal = observed(&who, &run, "a#damaged", MINUTE, t0).await;
    store.propose(proposal.clone()).await.unwrap();
    let key = store.proposal_key(&who, &proposal.id);
    let raw: Vec<u8> = conn.get(&key).unwrap();
    let damages: [(&str, Damage, bool); 10] = [
        ("another format", |r| [&[3u8][..], &r[1..]].concat(), true),
        (
            "a format 1 byte on a format 2 record",
            |r| [&[1u8][..], &r[1..]].concat(),
            true,
        ),
        (
            "an element not in its canonical form",
            |r| replaced(r, b"\"tag\":\"button\"", b"\"tag\":\"BUTTON\""),
            true,
        ),
        (
            "a head one byte longer",
            |r| {
                let n = u32::try_from(head_len(r) + 1).unwrap().to_be_bytes();
                [&r[..1], &n[..], &r[5..]].concat()
            },
            true,
        ),
        (
            "an unknown state",
            // A pending head ends with the state `p` and three absent fields.
            |r| replaced(r, b"\x01p\xfd\xfd\xfd", b"\x01x\xfd\xfd\xfd"),
            true,
        ),
        (
            "an action edited without its digest",
            |r| replaced(r, b"a#damaged", b"a#altered"),
            true,
        ),
        (
            "a decision without its time",
            |r| {
                let head = 5 + head_len(r);
                let mut out = replaced(&r[..head], b"\x01p\xfd\xfd\xfd", b"\x01d\xfd\xfd\xfd");
                out.extend_from_slice(&r[head..]);
                out
            },
            true,
        ),
        ("an empty record", |_| Vec::new(), true),
        // The screenshot sits after the head: a list, which never reads
        // screenshots, still lists the proposal; everything else refuses it.
        ("a byte after the end", |r| [r, &[0u8][..]].concat(), false),
        (
            "a screenshot that is not a png",
            |r| replaced(r, b"\x89PNG", b"\x89JPG"),
            false,
        ),
    ];
    for (what, damage, in_head) in damages {
        support::set_raw(&mut conn, &key, &damage(&raw));
        let corrupt = |e: &StoreError| matches!(e, StoreError::Corrupt { .. });
        let got = store.get_proposal(&proposal.id).await;
        assert!(
            got.as_ref().is_err_and(corrupt),
            "{what}: get answered {got:?}"
        );
        let grant = proposal.grant(MINUTE, t0, Some(approver(1))).unwrap();
        match store
            .approve_proposal(&proposal.id, grant.clone(), t0)
            .await
        {
            Err(ApproveError::Store(e)) if corrupt(&e) => {}
            other => panic!("{what}: approve answered {other:?}"),
        }
        assert_eq!(store.get(&grant.id).await.unwrap(), None, "{what}");
        let pointer: bool = conn.exists(store.pointer_key(&grant.id)).unwrap();
        assert!(
            !pointer,
            "{what}: the refused approval left its grant's pointer"
        );
        let denied = store.deny_proposal(&proposal.id, None, t0).await;
        assert!(
            denied.as_ref().is_err_and(corrupt),
            "{what}: deny answered {denied:?}"
        );
        let listed = store.pending_proposals(&who, &run, t0).await;
        if in_head {
            assert!(
                listed.as_ref().is_err_and(corrupt),
                "{what}: list answered {listed:?}"
            );
        } else {
            assert_eq!(listed.unwrap().len(), 1, "{what}");
        }
        // Nothing was written to the damaged record.
        let now_raw: Vec<u8> = conn.get(&key).unwrap();
        assert_eq!(
            now_raw,
            damage(&raw),
            "{what}: the damaged record was written to"
        );
    }
    // A key of another type, and a pointer that names no slot.
    let _: () = conn.del(&key).unwrap();
    let _: () = conn.hset(&key, "state", "p").unwrap();
    assert!(matches!(
        store.get_proposal(&proposal.id).await,
        Err(StoreError::Corrupt { .. })
    ));
    let _: () = conn.del(&key).unwrap();
    support::set_raw(&mut conn, &key, &raw);
    let pointer = store.proposal_pointer_key(&proposal.id);
    let tag: Vec<u8> = conn.get(&pointer).unwrap();
    support::set_raw(&mut conn, &pointer, b"not a tag");
    assert!(matches!(
        store.get_proposal(&proposal.id).await,
        Err(StoreError::Corrupt { .. })
    ));
    support::set_raw(&mut conn, &pointer, &tag);
    // Restored, it was never decided, and it is still listed.
    assert_eq!(
        store.get_proposal(&proposal.id).await.unwrap(),
        Some(StoredProposal::pending(proposal.clone()))
    );
    let listed = store.pending_proposals(&who, &run, t0).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].proposal.id, proposal.id);
    let grant = proposal.grant(MINUTE, t0, None).unwrap();
    assert_eq!(
        store
            .approve_proposal(&proposal.id, grant, t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
}

#[tokio::test]
async fn records_pointers_and_indexes_expire_as_the_contract_needs() {
    let retention = Duration::from_secs(120);
    let store = RedisApprovalStore::connect(
        support::options_for(shared_server(), "ttl").retention(retention),
    )
    .await
    .unwrap();
    let mut conn = shared_server().conn();
    let (who, run) = (actor("ttl"), run("ttl"));
    let t0 = now();
    let ttl = Duration::from_secs(300);
    let approved = observed(&who, &run, "a#approved", ttl, t0).await;
    let denied = observed(&who, &run, "a#denied", ttl, t0).await;
    for p in [&approved, &denied] {
        store.propose(p.clone()).await.unwrap();
        // Kept until its expiry plus the retention: record, pointer, index.
        assert_expires_in(&mut conn, &store.proposal_key(&who, &p.id), ttl + retention);
        assert_expires_in(
            &mut conn,
            &store.proposal_pointer_key(&p.id),
            ttl + retention,
        );
    }
    assert_expires_in(&mut conn, &store.pending_key(&who, &run), ttl + retention);

    // Approved with a grant that outlives it: kept as long as the grant.
    let grant_ttl = Duration::from_secs(3_600);
    let grant = approved.grant(grant_ttl, t0, Some(approver(1))).unwrap();
    assert_eq!(
        store
            .approve_proposal(&approved.id, grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
    let kept = grant_ttl + retention;
    assert_expires_in(&mut conn, &store.proposal_key(&who, &approved.id), kept);
    assert_expires_in(&mut conn, &store.proposal_pointer_key(&approved.id), kept);
    assert_expires_in(&mut conn, &store.grant_key(&who, &grant.id), kept);
    assert_expires_in(&mut conn, &store.pointer_key(&grant.id), kept);
    // The fences outlive every record that holds their generations.
    for fence in [store.actor_fence_key(&who), store.run_fence_key(&who, &run)] {
        assert!(
            pttl(&mut conn, &fence)
                >= pttl(&mut conn, &store.proposal_key(&who, &approved.id)) - 1_000
        );
    }

    // Denied: its expiry stays.
    assert_eq!(
        store
            .deny_proposal(&denied.id, Some(&approver(2)), t0)
            .await
            .unwrap(),
        DecisionOutcome::Denied
    );
    assert_expires_in(
        &mut conn,
        &store.proposal_key(&who, &denied.id),
        ttl + retention,
    );

    // A proposal already expired by the server's clock: kept for the retention.
    let old = observed(
        &who,
        &run,
        "a#old",
        MINUTE,
        t0.saturating_sub(Duration::from_secs(600)),
    )
    .await;
    store.propose(old.clone()).await.unwrap();
    assert_expires_in(&mut conn, &store.proposal_key(&who, &old.id), retention);
    assert_expires_in(&mut conn, &store.proposal_pointer_key(&old.id), retention);
}

#[tokio::test]
async fn a_proposal_made_before_any_fence_keeps_its_fences_as_long_as_itself() {
    // No grant ever issued in this run: the proposal alone holds the
    // fences' generations, so it must make them and keep them.
    let store = RedisApprovalStore::connect(support::options_for(shared_server(), "fences"))
        .await
        .unwrap();
    let mut conn = shared_server().conn();
    let (who, run) = (actor("fences"), run("fences"));
    let t0 = now();
    let proposal = observed(&who, &run, "a#first", Duration::from_secs(300), t0).await;
    store.propose(proposal.clone()).await.unwrap();
    let record = pttl(&mut conn, &store.proposal_key(&who, &proposal.id));
    for fence in [store.actor_fence_key(&who), store.run_fence_key(&who, &run)] {
        assert!(pttl(&mut conn, &fence) >= record - 1_000, "{fence}");
    }
    // Stopped and resumed, the run's fence still outlives the proposal, so
    // the proposal stays stopped for as long as it exists.
    store.stop_run(&who, &run, t0).await.unwrap();
    store.resume_run(&who, &run).await.unwrap();
    assert!(pttl(&mut conn, &store.run_fence_key(&who, &run)) >= record - 1_000);
    let grant = proposal
        .grant(Duration::from_secs(60), t0, Some(approver(1)))
        .unwrap();
    assert_eq!(
        store
            .approve_proposal(&proposal.id, grant, t0)
            .await
            .unwrap(),
        DecisionOutcome::Stopped
    );
}

#[tokio::test]
async fn a_proposal_lives_in_its_actors_slot_and_is_indexed_oldest_first() {
    let store = store_on(shared_server(), "layout").await;
    let mut conn = shared_server().conn();
    let (who, run) = (actor("layout {x}"), run("layout"));
    let t0 = now();
    let proposal = observed(&who, &run, "a#layout", MINUTE, t0).await;
    store.propose(proposal.clone()).await.unwrap();
    let slot = store.slot_prefix(&who);
    assert_eq!(
        store.proposal_key(&who, &proposal.id),
        format!("{slot}:proposal:{}", proposal.id)
    );
    assert_eq!(
        store.pending_key(&who, &run),
        format!("{slot}:pending:{run}")
    );
    assert_eq!(
        store.proposal_pointer_key(&proposal.id),
        format!("{}:pid:{{{}}}", store.prefix(), proposal.id)
    );
    // The pointer holds the actor's tag as 16 raw bytes.
    let tag: Vec<u8> = conn.get(store.proposal_pointer_key(&proposal.id)).unwrap();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, RedisApprovalStore::actor_tag(&who));
    // The index: score 0, member `<proposed_at as 20 digits>:<id>`.
    let members: Vec<(String, f64)> = conn
        .zrange_withscores(store.pending_key(&who, &run), 0, -1)
        .unwrap();
    assert_eq!(
        members,
        vec![(format!("{:020}:{}", t0.as_millis(), proposal.id), 0.0)]
    );
    // The record: format 2, the head's length, the head, the screenshot last.
    let raw: Vec<u8> = conn.get(store.proposal_key(&who, &proposal.id)).unwrap();
    assert_eq!(raw[0], 2);
    let element = support::element().canonical_json();
    assert!(
        raw.windows(element.len() + 1)
            .any(|w| w[0] as usize == element.len() && &w[1..] == element.as_bytes()),
        "the head holds the element's canonical json as one field"
    );
    assert!(raw.ends_with(SCREENSHOT));
    assert_eq!(5 + head_len(&raw) + 1 + SCREENSHOT.len(), raw.len());
    // A listed proposal comes without its screenshot, everything else as stored.
    let listed = store.pending_proposals(&who, &run, t0).await.unwrap();
    let mut without = proposal.clone();
    if let Some(snapshot) = without.snapshot.as_mut() {
        snapshot.screenshot_png = None;
    }
    assert_eq!(listed, vec![StoredProposal::pending(without)]);
    // Decided, it leaves the index.
    store.deny_proposal(&proposal.id, None, t0).await.unwrap();
    let left: usize = conn.zcard(store.pending_key(&who, &run)).unwrap();
    assert_eq!(left, 0);
}

/// The fields of a proposal head, as their encoded bytes (length and value).
fn head_fields(head: &[u8]) -> Vec<&[u8]> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < head.len() {
        let len = match head[at] {
            0xFD => 0,
            0xFE => {
                4 + usize::try_from(u32::from_be_bytes(head[at + 1..at + 5].try_into().unwrap()))
                    .unwrap()
            }
            n => usize::from(n),
        };
        fields.push(&head[at..at + 1 + len]);
        at += 1 + len;
    }
    fields
}

/// A format 1 record, written by the previous version of the store, has no
/// element field: it reads as a page binding no element (what it was made
/// with), is listed, approved and denied, and a decision keeps it format 1.
#[tokio::test]
async fn format_1_records_read_as_binding_no_element() {
    let store = store_on(shared_server(), "format-1").await;
    let mut conn = shared_server().conn();
    let (who, run) = (actor("format-1"), run("format-1"));
    let t0 = now();
    let mut made = Vec::new();
    for selector in ["a#approved", "a#denied"] {
        let mut proposal = observed(&who, &run, selector, MINUTE, t0).await;
        if let Some(snapshot) = proposal.snapshot.as_mut() {
            snapshot.page.element = None;
        }
        store.propose(proposal.clone()).await.unwrap();
        let key = store.proposal_key(&who, &proposal.id);
        let raw: Vec<u8> = conn.get(&key).unwrap();
        assert_eq!(raw[0], 2);
        let n = head_len(&raw);
        let mut fields = head_fields(&raw[5..5 + n]);
        assert_eq!(fields.len(), 19);
        // `element`, absent, after `target_found`.
        assert_eq!(fields.remove(12), [0xFD]);
        let head = fields.concat();
        let len = u32::try_from(head.len()).unwrap().to_be_bytes();
        let old = [&[1u8][..], &len[..], &head, &raw[5 + n..]].concat();
        support::set_raw(&mut conn, &key, &old);
        assert_eq!(
            store.get_proposal(&proposal.id).await.unwrap(),
            Some(StoredProposal::pending(proposal.clone()))
        );
        made.push(proposal);
    }
    let listed = store.pending_proposals(&who, &run, t0).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|p| {
        p.proposal
            .snapshot
            .as_ref()
            .is_some_and(|s| s.page.element.is_none())
    }));
    let grant = made[0].grant(MINUTE, t0, Some(approver(1))).unwrap();
    assert_eq!(grant.element, None);
    assert_eq!(
        store
            .approve_proposal(&made[0].id, grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
    assert_eq!(
        store.get(&grant.id).await.unwrap(),
        Some(StoredGrant::issued(grant.clone()))
    );
    assert_eq!(
        store
            .deny_proposal(&made[1].id, Some(&approver(2)), t0)
            .await
            .unwrap(),
        DecisionOutcome::Denied
    );
    for proposal in &made {
        let raw: Vec<u8> = conn.get(store.proposal_key(&who, &proposal.id)).unwrap();
        assert_eq!(raw[0], 1, "a decision keeps the record's format");
        let read = store.get_proposal(&proposal.id).await.unwrap().unwrap();
        assert_eq!(read.proposal, *proposal);
        assert_ne!(read.state, ProposalState::Pending);
    }
}

#[tokio::test]
async fn refused_proposals_store_nothing_and_leave_no_pointer() {
    let store = store_on(shared_server(), "refused").await;
    let mut conn = shared_server().conn();
    let (who, run) = (actor("refused"), run("refused"));
    let t0 = now();
    // One the store could not read back: refused before anything is sent.
    let mut bad = observed(&who, &run, "a#bad", MINUTE, t0).await;
    if let Some(snapshot) = bad.snapshot.as_mut() {
        snapshot.screenshot_png = Some(b"not a png".to_vec());
    }
    assert!(matches!(
        store.propose(bad.clone()).await,
        Err(ProposeError::Store(StoreError::Rejected { .. }))
    ));
    let pointer: bool = conn.exists(store.proposal_pointer_key(&bad.id)).unwrap();
    assert!(!pointer);
    // A stopped run: the claim of the id goes again.
    store.stop_run(&who, &run, t0).await.unwrap();
    let stopped = observed(&who, &run, "a#stopped", MINUTE, t0).await;
    assert!(matches!(
        store.propose(stopped.clone()).await,
        Err(ProposeError::Stopped)
    ));
    let pointer: bool = conn
        .exists(store.proposal_pointer_key(&stopped.id))
        .unwrap();
    assert!(!pointer);
    let record: bool = conn.exists(store.proposal_key(&who, &stopped.id)).unwrap();
    assert!(!record);
    assert_eq!(store.get_proposal(&stopped.id).await.unwrap(), None);
    // An id another actor's proposal holds is taken.
    let other = actor("refused-other");
    store.resume_run(&who, &run).await.unwrap();
    let first = observed(&who, &run, "a#first", MINUTE, t0).await;
    store.propose(first.clone()).await.unwrap();
    let mut clash = observed(&other, &run, "a#clash", MINUTE, t0).await;
    clash.id = first.id.clone();
    assert!(matches!(
        store.propose(clash).await,
        Err(ProposeError::AlreadyExists(id)) if id == first.id
    ));
}

// --- A slot that moves (Redis Cluster) -----------------------------------

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

fn setslot(node: &RedisServer, slot: u16, args: &[&str]) {
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(args)
        .query(&mut node.conn())
        .unwrap();
}

/// The node that owns the slot of `key` (answers for it rather than `MOVED`).
fn owner_of<'a>(cluster: &'a RedisCluster, key: &str) -> &'a RedisServer {
    cluster
        .nodes
        .iter()
        .find(|node| {
            redis::cmd("TYPE")
                .arg(key)
                .query::<String>(&mut node.conn())
                .is_ok()
        })
        .expect("some node owns the key")
}

/// Moves `slot` and every key in it from `from` to `to`, telling the
/// importing node first (as Redis's resharding does).
fn move_slot(cluster: &RedisCluster, from: &RedisServer, to: &RedisServer, slot: u16) {
    setslot(to, slot, &["IMPORTING", &node_id(from)]);
    setslot(from, slot, &["MIGRATING", &node_id(to)]);
    let keys: Vec<String> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(1_000)
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
    let to_id = node_id(to);
    setslot(to, slot, &["NODE", &to_id]);
    for node in cluster.nodes.iter().filter(|n| n.port() != to.port()) {
        setslot(node, slot, &["NODE", &to_id]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_follow_their_slot_when_it_moves() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let store = cluster_store(&cluster, "reshard-proposals").await;
    let t0 = now();
    let run = run("reshard");
    let mut used = HashSet::new();
    for round in 0..3 {
        // An actor whose slot no earlier round moved.
        let who = (0..)
            .map(|n| actor(&format!("reshard-{round}-{n}")))
            .find(|a| used.insert(slot_of(&cluster.nodes[0], &store.slot_prefix(a))))
            .unwrap();
        let approved = observed(&who, &run, "a#approved", MINUTE, t0).await;
        let denied = observed(&who, &run, "a#denied", MINUTE, t0).await;
        for p in [&approved, &denied] {
            store.propose(p.clone()).await.unwrap();
        }
        let key = store.proposal_key(&who, &approved.id);
        let from = owner_of(&cluster, &key);
        let to = cluster
            .nodes
            .iter()
            .find(|n| n.port() != from.port())
            .unwrap();
        move_slot(&cluster, from, to, slot_of(from, &key));
        // Every call follows the slot (MOVED) to its new node.
        assert_eq!(
            store.pending_proposals(&who, &run, t0).await.unwrap().len(),
            2,
            "round {round}"
        );
        let grant = approved.grant(MINUTE, t0, Some(approver(round))).unwrap();
        assert_eq!(
            store
                .approve_proposal(&approved.id, grant.clone(), t0)
                .await
                .unwrap(),
            DecisionOutcome::Approved
        );
        assert_eq!(
            store.deny_proposal(&denied.id, None, t0).await.unwrap(),
            DecisionOutcome::Denied
        );
        assert!(matches!(
            store.get_proposal(&approved.id).await.unwrap().map(|p| p.state),
            Some(ProposalState::Approved { approval_id, .. }) if approval_id == grant.id
        ));
        let attempt = AttemptId::generate().unwrap();
        assert_eq!(
            store
                .consume_once(&grant.id, &approved.binding(), t0, &attempt)
                .await
                .unwrap(),
            ConsumeOutcome::Consumed { replay: false }
        );
        assert!(
            store
                .pending_proposals(&who, &run, t0)
                .await
                .unwrap()
                .is_empty()
        );
    }
}
