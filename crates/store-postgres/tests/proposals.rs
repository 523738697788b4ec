//! Proposals in the PostgreSQL store: the row layout and its seal, every
//! rule of the `ProposalStore` contract on real rows, approvals racing each
//! other from separate connections and racing a stop, rows altered by
//! hand, purge, the schema upgrade from version 2, and the server killed
//! inside an approval's transaction (both effects or neither).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign_approval_core::{
    ActorId, Approval, ApprovalStore, ApproveError, ApproverId, AttemptId, ConsumeOutcome,
    DecisionOutcome, GrantState, MAX_LISTED_PROPOSALS, PageBinding, PageSnapshot, Proposal,
    ProposalId, ProposalState, ProposalStore, ProposeError, ResumeOutcome, RunId, StopOutcome,
    StoreError, StoredGrant, StoredProposal, Timestamp,
};
use countersign_store_postgres::{
    ConnectError, PostgresApprovalStore, SCHEMA_VERSION, SchemaSetup, schema_sql,
    schema_upgrade_sql,
};
use support::{
    Isolation, KillGate, PgServer, now, options_for, schema_of, shared_server, store_on,
    url_and_action, wait_for_lock_waiters,
};

const MINUTE: Duration = Duration::from_secs(60);
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

fn actor() -> ActorId {
    ActorId::new(support::ACTOR).unwrap()
}

fn run() -> RunId {
    RunId::new(support::RUN).unwrap()
}

fn approver() -> ApproverId {
    ApproverId::new("approver-ada").unwrap()
}

/// A proposal by `ACTOR` in `run` to click `selector` on `URL`, made at
/// `at`, decidable for `ttl`.
async fn proposal_in(run: &str, selector: &str, ttl: Duration, at: Timestamp) -> Proposal {
    let (url, action) = url_and_action(selector).await;
    Proposal::for_action(actor(), RunId::new(run).unwrap(), &url, &action, ttl, at).unwrap()
}

async fn proposal(selector: &str, ttl: Duration, at: Timestamp) -> Proposal {
    proposal_in(support::RUN, selector, ttl, at).await
}

/// A screenshot of `len` bytes: the PNG signature, then random bytes.
fn screenshot(len: usize) -> Vec<u8> {
    let mut png = vec![0u8; len];
    getrandom::fill(&mut png).unwrap();
    png[..PNG_SIGNATURE.len()].copy_from_slice(PNG_SIGNATURE);
    png
}

fn observed(proposal: Proposal, screenshot_png: Option<Vec<u8>>, target_found: bool) -> Proposal {
    proposal
        .observed(PageSnapshot {
            page: PageBinding {
                session_id: "session-7".to_owned(),
                target_id: "target-3".to_owned(),
                page_revision: "revision-12".to_owned(),
                element: Some(support::element()),
            },
            screenshot_png,
            target_found,
        })
        .unwrap()
}

/// The grant that approves `proposal` at `now`, by the approver.
fn grant_for(proposal: &Proposal, now: Timestamp) -> Approval {
    proposal.grant(MINUTE, now, Some(approver())).unwrap()
}

fn approved(grant: &Approval, at: Timestamp) -> ProposalState {
    ProposalState::Approved {
        approval_id: grant.id.clone(),
        by: Some(approver()),
        at,
    }
}

/// The whole proposal row as text, to prove a refused call changed nothing.
async fn proposal_row(
    admin: &tokio_postgres::Client,
    store: &PostgresApprovalStore,
    id: &ProposalId,
) -> String {
    admin
        .query_one(
            &format!(
                "SELECT row_to_json(p)::text FROM {} p WHERE id = $1",
                store.proposals_table()
            ),
            &[&id.as_str()],
        )
        .await
        .unwrap()
        .get(0)
}

/// How many grant rows the store holds in all.
async fn grant_rows(admin: &tokio_postgres::Client, store: &PostgresApprovalStore) -> i64 {
    admin
        .query_one(
            &format!("SELECT count(*) FROM {}", store.grants_table()),
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_proposal_round_trips_with_its_snapshot_and_screenshot_bytes() {
    let server = shared_server();
    let store = store_on(server, "prp_layout", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let png = screenshot(300_000);
    let plain = proposal("a#plain", MINUTE, t0).await;
    let seen = observed(
        proposal("a#seen", MINUTE, t0).await,
        Some(png.clone()),
        true,
    );
    let unseen = observed(proposal("a#unseen", MINUTE, t0).await, None, false);
    for p in [&plain, &seen, &unseen] {
        store.propose(p.clone()).await.unwrap();
        let before = proposal_row(&admin, &store, &p.id).await;
        for _ in 0..3 {
            assert_eq!(
                store.get_proposal(&p.id).await.unwrap(),
                Some(StoredProposal::pending(p.clone()))
            );
        }
        assert_eq!(
            proposal_row(&admin, &store, &p.id).await,
            before,
            "reads change nothing"
        );
    }

    let row = admin
        .query_one(
            &format!(
                "SELECT format, seal, actor_id, run_id, url, action, action_digest, proposed_at, \
                 expires_at, page_session_id, page_target_id, page_revision, screenshot_png, \
                 target_found, run_gen, actor_gen, state, approval_id, decided_by, decided_at \
                 FROM {} WHERE id = $1",
                store.proposals_table()
            ),
            &[&seen.id.as_str()],
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
    assert_eq!(row.get::<_, String>(5), seen.action.canonical_json());
    assert_eq!(row.get::<_, String>(6), seen.action_digest.to_hex());
    assert_eq!(row.get::<_, i64>(7), t0.as_millis() as i64);
    assert_eq!(row.get::<_, i64>(8), seen.expires_at.as_millis() as i64);
    assert_eq!(
        row.get::<_, Option<String>>(9).as_deref(),
        Some("session-7")
    );
    assert_eq!(
        row.get::<_, Option<String>>(10).as_deref(),
        Some("target-3")
    );
    assert_eq!(
        row.get::<_, Option<String>>(11).as_deref(),
        Some("revision-12")
    );
    assert_eq!(
        row.get::<_, Option<Vec<u8>>>(12),
        Some(png),
        "bytea, as given"
    );
    assert_eq!(row.get::<_, Option<bool>>(13), Some(true));
    assert_eq!((row.get::<_, i64>(14), row.get::<_, i64>(15)), (0, 0));
    assert_eq!(row.get::<_, String>(16), "pending");
    assert_eq!(row.get::<_, Option<String>>(17), None);
    assert_eq!(row.get::<_, Option<String>>(18), None);
    assert_eq!(row.get::<_, Option<i64>>(19), None);

    // No snapshot: every snapshot column null.
    let row = admin
        .query_one(
            &format!(
                "SELECT page_session_id IS NULL AND page_target_id IS NULL \
                 AND page_revision IS NULL AND screenshot_png IS NULL AND target_found IS NULL \
                 FROM {} WHERE id = $1",
                store.proposals_table()
            ),
            &[&plain.id.as_str()],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0));
    // Propose created the run's and the actor's fences, at generation 0.
    let fences: i64 = admin
        .query_one(
            &format!(
                "SELECT (SELECT count(*) FROM {} WHERE actor_id = $1 AND run_id = $2 AND gen = 0) \
                 + (SELECT count(*) FROM {} WHERE actor_id = $1 AND gen = 0)",
                store.run_fences_table(),
                store.actor_fences_table()
            ),
            &[&support::ACTOR, &support::RUN],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(fences, 2);
}

#[tokio::test]
async fn a_duplicate_proposal_id_is_refused_and_the_first_is_kept() {
    let server = shared_server();
    let store = store_on(server, "prp_dup", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let first = proposal("a#first", MINUTE, t0).await;
    store.propose(first.clone()).await.unwrap();
    let before = proposal_row(&admin, &store, &first.id).await;
    let mut other = observed(
        proposal_in("run-2", "a#other", MINUTE, t0).await,
        None,
        true,
    );
    other.id = first.id.clone();
    assert_eq!(
        store.propose(other).await,
        Err(ProposeError::AlreadyExists(first.id.clone()))
    );
    assert_eq!(proposal_row(&admin, &store, &first.id).await, before);
    assert_eq!(
        store.get_proposal(&first.id).await.unwrap(),
        Some(StoredProposal::pending(first))
    );
}

#[tokio::test]
async fn approving_issues_exactly_one_grant_naming_its_approver() {
    let server = shared_server();
    let store = store_on(server, "prp_approve", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let p = observed(
        proposal("a#approve", MINUTE, t0).await,
        Some(screenshot(64)),
        true,
    );
    store.propose(p.clone()).await.unwrap();
    let at = t0.saturating_add(Duration::from_millis(1_500));
    let grant = grant_for(&p, at);
    assert_eq!(
        store
            .approve_proposal(&p.id, grant.clone(), at)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
    assert_eq!(grant_rows(&admin, &store).await, 1);
    let stored = store.get(&grant.id).await.unwrap().unwrap();
    assert_eq!(stored, StoredGrant::issued(grant.clone()));
    let by = stored.approval.approver.as_ref().unwrap();
    assert_eq!((&by.id, by.approved_at), (&approver(), at));
    assert_eq!(
        stored.approval.page(),
        p.snapshot.as_ref().map(|s| s.page.clone()),
        "bound to the page the proposal observed"
    );
    assert_eq!(
        store.get_proposal(&p.id).await.unwrap(),
        Some(StoredProposal {
            proposal: p.clone(),
            state: approved(&grant, at),
        })
    );
    assert!(
        store
            .pending_proposals(&actor(), &run(), at)
            .await
            .unwrap()
            .is_empty()
    );
    // The grant is an ordinary grant: consumed once with the proposal's binding.
    assert_eq!(
        store
            .consume_once(&grant.id, &p.binding(), at, &AttemptId::generate().unwrap())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    // Approving again issues nothing.
    let again = grant_for(&p, at);
    assert_eq!(
        store
            .approve_proposal(&p.id, again.clone(), at)
            .await
            .unwrap(),
        DecisionOutcome::AlreadyDecided(approved(&grant, at))
    );
    assert_eq!(store.get(&again.id).await.unwrap(), None);
    assert_eq!(grant_rows(&admin, &store).await, 1);
}

const CONTENDERS: usize = 16;
const RACE_ROUNDS: usize = 8;

/// 16 stores on one schema, each with a pool of one connection: 16
/// approvals of one proposal race from 16 server backends.
async fn approvals_race_from_separate_connections(isolation: Isolation, tag: &str) {
    let server = shared_server();
    let admin = server.admin().await;
    let options = options_for(server, tag, isolation).pool_size(1);
    let mut stores = Vec::new();
    for _ in 0..CONTENDERS {
        stores.push(Arc::new(
            PostgresApprovalStore::connect(options.clone())
                .await
                .unwrap(),
        ));
    }
    let t0 = now();
    for round in 0..RACE_ROUNDS {
        let p = proposal(&format!("a#race{round}"), MINUTE, t0).await;
        stores[0].propose(p.clone()).await.unwrap();
        let grants: Vec<Approval> = (0..CONTENDERS).map(|_| grant_for(&p, t0)).collect();
        let start = Arc::new(tokio::sync::Barrier::new(CONTENDERS));
        let tasks: Vec<_> = stores
            .iter()
            .zip(&grants)
            .map(|(store, grant)| {
                let (store, grant, start, id) =
                    (store.clone(), grant.clone(), start.clone(), p.id.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    store.approve_proposal(&id, grant, t0).await
                })
            })
            .collect();
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap().unwrap());
        }
        let winners: Vec<usize> = answers
            .iter()
            .enumerate()
            .filter(|(_, a)| **a == DecisionOutcome::Approved)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "{isolation:?} round {round}: exactly one approval is taken: {answers:?}"
        );
        let winner = &grants[winners[0]];
        let state = approved(winner, t0);
        for (i, answer) in answers.iter().enumerate() {
            if i != winners[0] {
                assert_eq!(*answer, DecisionOutcome::AlreadyDecided(state.clone()));
            }
        }
        let ids: Vec<&str> = grants.iter().map(|g| g.id.as_str()).collect();
        let existing: i64 = admin
            .query_one(
                &format!(
                    "SELECT count(*) FROM {} WHERE id = ANY($1)",
                    stores[0].grants_table()
                ),
                &[&ids],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(existing, 1, "{isolation:?} round {round}: one grant row");
        assert_eq!(
            stores[0].get_proposal(&p.id).await.unwrap().unwrap().state,
            state
        );
    }
    assert_eq!(grant_rows(&admin, &stores[0]).await, RACE_ROUNDS as i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_approvals_from_separate_connections_issue_one_grant_at_read_committed() {
    approvals_race_from_separate_connections(Isolation::ReadCommitted, "prp_race_rc").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_approvals_from_separate_connections_issue_one_grant_at_repeatable_read() {
    approvals_race_from_separate_connections(Isolation::RepeatableRead, "prp_race_rr").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_approvals_from_separate_connections_issue_one_grant_at_serializable() {
    approvals_race_from_separate_connections(Isolation::Serializable, "prp_race_ser").await;
}

#[tokio::test]
async fn deny_then_approve_is_already_decided_and_issues_no_grant() {
    let server = shared_server();
    let store = store_on(server, "prp_deny", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let p = proposal("a#deny", MINUTE, t0).await;
    store.propose(p.clone()).await.unwrap();
    let by = approver();
    assert_eq!(
        store.deny_proposal(&p.id, Some(&by), t0).await.unwrap(),
        DecisionOutcome::Denied
    );
    let denied = ProposalState::Denied {
        by: Some(by.clone()),
        at: t0,
    };
    let grant = grant_for(&p, t0);
    assert_eq!(
        store
            .approve_proposal(&p.id, grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::AlreadyDecided(denied.clone())
    );
    assert_eq!(store.get(&grant.id).await.unwrap(), None);
    assert_eq!(grant_rows(&admin, &store).await, 0);
    assert_eq!(
        store.deny_proposal(&p.id, None, t0).await.unwrap(),
        DecisionOutcome::AlreadyDecided(denied.clone())
    );
    assert_eq!(
        store.get_proposal(&p.id).await.unwrap().unwrap().state,
        denied
    );

    // A denial without a named approver is kept as such.
    let anonymous = proposal("a#anonymous", MINUTE, t0).await;
    store.propose(anonymous.clone()).await.unwrap();
    assert_eq!(
        store.deny_proposal(&anonymous.id, None, t0).await.unwrap(),
        DecisionOutcome::Denied
    );
    assert_eq!(
        store
            .get_proposal(&anonymous.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        ProposalState::Denied { by: None, at: t0 }
    );
}

#[tokio::test]
async fn an_expired_proposal_answers_expired_and_changes_nothing() {
    let server = shared_server();
    let store = store_on(server, "prp_expired", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let p = proposal("a#late", MINUTE, t0).await;
    store.propose(p.clone()).await.unwrap();
    let before = proposal_row(&admin, &store, &p.id).await;
    let expiry = p.expires_at;
    let grant = grant_for(&p, expiry);
    assert_eq!(
        store
            .approve_proposal(&p.id, grant.clone(), expiry)
            .await
            .unwrap(),
        DecisionOutcome::Expired
    );
    assert_eq!(
        store
            .deny_proposal(&p.id, Some(&approver()), expiry)
            .await
            .unwrap(),
        DecisionOutcome::Expired
    );
    assert_eq!(store.get(&grant.id).await.unwrap(), None);
    assert_eq!(proposal_row(&admin, &store, &p.id).await, before);
    assert!(
        store
            .pending_proposals(&actor(), &run(), expiry)
            .await
            .unwrap()
            .is_empty()
    );
    let just_before = Timestamp::from_millis(expiry.as_millis() - 1);
    assert_eq!(
        store
            .pending_proposals(&actor(), &run(), just_before)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .approve_proposal(&p.id, grant_for(&p, just_before), just_before)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
}

#[tokio::test]
async fn a_stop_ends_the_proposals_made_before_it_also_after_a_resume() {
    let server = shared_server();
    let store = store_on(server, "prp_stop", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let stopped = proposal("a#stopped", MINUTE, t0).await;
    let denied = proposal("a#denied", MINUTE, t0).await;
    let elsewhere = proposal_in("run-2", "a#elsewhere", MINUTE, t0).await;
    for p in [&stopped, &denied, &elsewhere] {
        store.propose(p.clone()).await.unwrap();
    }
    assert_eq!(
        store.stop_run(&actor(), &run(), t0).await.unwrap(),
        StopOutcome {
            stopped_grants: 0,
            stopped_standing: 0,
            was_stopped: false
        },
        "proposals are not grants: the stop counts none"
    );
    let before = proposal_row(&admin, &store, &stopped.id).await;
    let grant = grant_for(&stopped, t0);
    assert_eq!(
        store
            .approve_proposal(&stopped.id, grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Stopped
    );
    assert_eq!(store.get(&grant.id).await.unwrap(), None);
    assert_eq!(proposal_row(&admin, &store, &stopped.id).await, before);
    assert!(
        store
            .pending_proposals(&actor(), &run(), t0)
            .await
            .unwrap()
            .is_empty()
    );
    // A denial is still recorded in a stopped run.
    assert_eq!(
        store
            .deny_proposal(&denied.id, Some(&approver()), t0)
            .await
            .unwrap(),
        DecisionOutcome::Denied
    );
    // Proposing in the stopped run stores nothing.
    let refused = proposal("a#refused", MINUTE, t0).await;
    assert_eq!(
        store.propose(refused.clone()).await,
        Err(ProposeError::Stopped)
    );
    assert_eq!(store.get_proposal(&refused.id).await.unwrap(), None);

    assert_eq!(
        store.resume_run(&actor(), &run()).await.unwrap(),
        ResumeOutcome::Resumed
    );
    let grant = grant_for(&stopped, t0);
    assert_eq!(
        store
            .approve_proposal(&stopped.id, grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Stopped,
        "a resume never revives a proposal made before the stop"
    );
    assert_eq!(store.get(&grant.id).await.unwrap(), None);
    assert_eq!(
        store
            .get_proposal(&stopped.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        ProposalState::Pending
    );
    assert!(
        store
            .pending_proposals(&actor(), &run(), t0)
            .await
            .unwrap()
            .is_empty()
    );
    // The other run was never stopped.
    assert_eq!(
        store
            .approve_proposal(&elsewhere.id, grant_for(&elsewhere, t0), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
    // After the resume, new proposals can be approved...
    let fresh = proposal("a#fresh", MINUTE, t0).await;
    store.propose(fresh.clone()).await.unwrap();
    assert_eq!(
        store.pending_proposals(&actor(), &run(), t0).await.unwrap(),
        vec![StoredProposal::pending(fresh.clone())]
    );
    // ...until the actor is stopped, which ends them too, for good.
    store.stop_actor(&actor(), t0).await.unwrap();
    assert_eq!(
        store.propose(proposal("a#actor", MINUTE, t0).await).await,
        Err(ProposeError::Stopped)
    );
    assert_eq!(
        store.resume_actor(&actor()).await.unwrap(),
        ResumeOutcome::Resumed
    );
    assert_eq!(
        store
            .approve_proposal(&fresh.id, grant_for(&fresh, t0), t0)
            .await
            .unwrap(),
        DecisionOutcome::Stopped
    );
    assert_eq!(
        grant_rows(&admin, &store).await,
        1,
        "only the other run's grant"
    );
}

#[tokio::test]
async fn a_grant_not_for_the_proposal_is_refused_and_changes_nothing() {
    let server = shared_server();
    let store = store_on(server, "prp_notfor", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let p = observed(proposal("a#exact", MINUTE, t0).await, None, true);
    store.propose(p.clone()).await.unwrap();
    let before = proposal_row(&admin, &store, &p.id).await;
    let exact = grant_for(&p, t0);
    let (_, other_action) = url_and_action("a#other").await;
    let mut wrong: Vec<(&str, Approval)> = Vec::new();
    let mut g = exact.clone();
    g.actor_id = ActorId::new("actor-2").unwrap();
    wrong.push(("another actor", g));
    let mut g = exact.clone();
    g.run_id = RunId::new("run-2").unwrap();
    wrong.push(("another run", g));
    let mut g = exact.clone();
    g.url = "https://docs.example.com/other".to_owned();
    wrong.push(("another url", g));
    let mut g = exact.clone();
    g.action_digest = other_action.digest();
    g.action = other_action;
    wrong.push(("another action", g));
    let mut g = exact.clone();
    g.session_id = None;
    g.page_revision = None;
    wrong.push(("no page", g));
    let mut g = exact.clone();
    g.page_revision = Some("revision-13".to_owned());
    wrong.push(("another page", g));
    wrong.push(("a plain grant", {
        let (url, action) = url_and_action("a#exact").await;
        Approval::for_action(actor(), run(), &url, &action, MINUTE, t0).unwrap()
    }));
    for (what, grant) in &wrong {
        assert_eq!(
            store.approve_proposal(&p.id, grant.clone(), t0).await,
            Err(ApproveError::NotForProposal),
            "{what}"
        );
        assert_eq!(store.get(&grant.id).await.unwrap(), None, "{what}");
        assert_eq!(proposal_row(&admin, &store, &p.id).await, before, "{what}");
    }
    assert_eq!(
        store
            .approve_proposal(&p.id, exact.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
    // Once decided, a wrong grant is still refused first, as the contract orders.
    assert_eq!(
        store.approve_proposal(&p.id, wrong[0].1.clone(), t0).await,
        Err(ApproveError::NotForProposal)
    );
    assert_eq!(grant_rows(&admin, &store).await, 1);
}

#[tokio::test]
async fn a_grant_id_already_present_is_grant_exists_and_nothing_changes() {
    let server = shared_server();
    let store = store_on(server, "prp_exists", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let existing = support::grant("a#existing", MINUTE, t0).await;
    store.issue(existing.clone()).await.unwrap();
    let p = proposal("a#clash", MINUTE, t0).await;
    store.propose(p.clone()).await.unwrap();
    let before = proposal_row(&admin, &store, &p.id).await;
    let mut clashing = grant_for(&p, t0);
    clashing.id = existing.id.clone();
    assert_eq!(
        store.approve_proposal(&p.id, clashing, t0).await,
        Err(ApproveError::GrantExists(existing.id.clone()))
    );
    assert_eq!(proposal_row(&admin, &store, &p.id).await, before);
    assert_eq!(
        store.get(&existing.id).await.unwrap(),
        Some(StoredGrant::issued(existing))
    );
    assert_eq!(grant_rows(&admin, &store).await, 1);
    // The transaction rolled back: the proposal is still decidable.
    assert_eq!(
        store
            .approve_proposal(&p.id, grant_for(&p, t0), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
}

#[tokio::test]
async fn pending_lists_one_run_oldest_first_and_walks_its_index() {
    let server = shared_server();
    let store = store_on(server, "prp_pending", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = Timestamp::from_millis(now().as_millis() - 10_000);
    let at = |ms: u64| t0.saturating_add(Duration::from_millis(ms));
    // Made before a stop (and a resume): never listed again.
    let before_stop = proposal("a#before-stop", MINUTE, at(1)).await;
    store.propose(before_stop.clone()).await.unwrap();
    store.stop_run(&actor(), &run(), at(2)).await.unwrap();
    store.resume_run(&actor(), &run()).await.unwrap();

    let newest = proposal("a#newest", MINUTE, at(300)).await;
    let oldest = proposal("a#oldest", MINUTE, at(100)).await;
    let mut tied = [
        proposal("a#tied-1", MINUTE, at(200)).await,
        proposal("a#tied-2", MINUTE, at(200)).await,
    ];
    tied.sort_by(|a, b| a.id.cmp(&b.id));
    let approved_one = proposal("a#approved", MINUTE, at(150)).await;
    let denied_one = proposal("a#denied", MINUTE, at(160)).await;
    let short = proposal("a#short", Duration::from_millis(500), at(10)).await;
    let other_run = proposal_in("run-2", "a#other-run", MINUTE, at(50)).await;
    for p in [
        &newest,
        &oldest,
        &tied[1],
        &tied[0],
        &approved_one,
        &denied_one,
        &short,
        &other_run,
    ] {
        store.propose(p.clone()).await.unwrap();
    }
    store
        .approve_proposal(&approved_one.id, grant_for(&approved_one, at(400)), at(400))
        .await
        .unwrap();
    store
        .deny_proposal(&denied_one.id, None, at(400))
        .await
        .unwrap();
    let ids = |listed: Vec<StoredProposal>| -> Vec<ProposalId> {
        listed.into_iter().map(|s| s.proposal.id).collect()
    };
    assert_eq!(
        ids(store
            .pending_proposals(&actor(), &run(), at(1_000))
            .await
            .unwrap()),
        vec![
            oldest.id.clone(),
            tied[0].id.clone(),
            tied[1].id.clone(),
            newest.id.clone()
        ]
    );
    assert_eq!(
        ids(store
            .pending_proposals(&actor(), &run(), at(400))
            .await
            .unwrap())
        .first(),
        Some(&short.id),
        "unexpired, it comes first"
    );
    assert_eq!(
        ids(store
            .pending_proposals(&actor(), &RunId::new("run-2").unwrap(), at(1_000))
            .await
            .unwrap()),
        vec![other_run.id.clone()]
    );
    // Listed in full, every field.
    assert_eq!(
        store
            .pending_proposals(&actor(), &run(), at(1_000))
            .await
            .unwrap()[0],
        StoredProposal::pending(oldest.clone())
    );

    // At most MAX_LISTED_PROPOSALS, the oldest.
    let bulk = "run-bulk";
    let mut made = Vec::new();
    for i in 0..=MAX_LISTED_PROPOSALS {
        let p = proposal_in(bulk, "a#bulk", MINUTE, at(1_000 + i as u64)).await;
        made.push(p.id.clone());
        store.propose(p).await.unwrap();
    }
    let listed = ids(store
        .pending_proposals(&actor(), &RunId::new(bulk).unwrap(), at(5_000))
        .await
        .unwrap());
    assert_eq!(listed, made[..MAX_LISTED_PROPOSALS].to_vec());

    // The listing walks the partial index in order: no sort, no scan of
    // decided proposals.
    admin
        .batch_execute("SET enable_seqscan = off")
        .await
        .unwrap();
    let plan: Vec<String> = admin
        .query(
            &format!(
                "EXPLAIN SELECT id FROM {} WHERE actor_id = 'a' AND run_id = 'r' \
                 AND state = 'pending' AND expires_at > 5 ORDER BY proposed_at, id LIMIT 100",
                store.proposals_table()
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let plan = plan.join("\n");
    assert!(plan.contains("proposals_pending"), "{plan}");
    assert!(!plan.contains("Sort"), "{plan}");
}

#[tokio::test]
async fn a_proposal_row_altered_by_hand_is_corrupt_and_never_decided() {
    let server = shared_server();
    let store = store_on(server, "prp_tamper", Isolation::ReadCommitted).await;
    let admin = server.admin().await;
    let t0 = now();
    let p = store.proposals_table().to_owned();
    let tampers: [(&str, &str, String); 10] = [
        (
            "element removed",
            "run-element-removed",
            format!("UPDATE {p} SET element = NULL"),
        ),
        (
            "element changed to another valid identity",
            "run-element",
            format!(
                "UPDATE {p} SET element = \
                 replace(element, '\"role\":\"button\"', '\"role\":\"link\"')"
            ),
        ),
        (
            "url",
            "run-url",
            format!("UPDATE {p} SET url = 'https://evil.example.com/'"),
        ),
        (
            "screenshot",
            "run-png",
            format!(
                "UPDATE {p} SET screenshot_png = \
                 set_byte(screenshot_png, 11, 255 - get_byte(screenshot_png, 11))"
            ),
        ),
        (
            "target_found",
            "run-found",
            format!("UPDATE {p} SET target_found = NOT target_found"),
        ),
        (
            "run_gen",
            "run-gen",
            format!("UPDATE {p} SET run_gen = run_gen + 1"),
        ),
        ("format", "run-format", format!("UPDATE {p} SET format = 2")),
        (
            "approved without a grant",
            "run-state",
            format!("UPDATE {p} SET state = 'approved', decided_at = 1"),
        ),
        (
            "unknown state",
            "run-bogus",
            format!("UPDATE {p} SET state = 'maybe'"),
        ),
        (
            "run fence deleted",
            "run-fence",
            format!(
                "DELETE FROM {} WHERE actor_id = '{}' AND run_id = 'run-fence'",
                store.run_fences_table(),
                support::ACTOR
            ),
        ),
    ];
    for (what, run_name, sql) in tampers {
        let proposal = observed(
            proposal_in(run_name, "a#tamper", MINUTE, t0).await,
            Some(screenshot(100)),
            true,
        );
        store.propose(proposal.clone()).await.unwrap();
        let sql = if sql.starts_with("DELETE") {
            sql
        } else {
            format!("{sql} WHERE id = '{}'", proposal.id)
        };
        admin.batch_execute(&sql).await.unwrap();
        let before = proposal_row(&admin, &store, &proposal.id).await;
        let corrupt = |e: &StoreError| matches!(e, StoreError::Corrupt { .. });
        let read = store.get_proposal(&proposal.id).await;
        assert!(read.as_ref().is_err_and(corrupt), "{what}: {read:?}");
        let grant = grant_for(&proposal, t0);
        let approve = store
            .approve_proposal(&proposal.id, grant.clone(), t0)
            .await;
        assert!(
            matches!(&approve, Err(ApproveError::Store(e)) if corrupt(e)),
            "{what}: {approve:?}"
        );
        let deny = store.deny_proposal(&proposal.id, None, t0).await;
        assert!(deny.as_ref().is_err_and(corrupt), "{what}: {deny:?}");
        let listed = store
            .pending_proposals(&actor(), &RunId::new(run_name).unwrap(), t0)
            .await;
        if what == "url" || what == "run fence deleted" {
            assert!(listed.as_ref().is_err_and(corrupt), "{what}: {listed:?}");
        }
        assert_eq!(store.get(&grant.id).await.unwrap(), None, "{what}");
        assert_eq!(
            proposal_row(&admin, &store, &proposal.id).await,
            before,
            "{what}: nothing changed"
        );
    }
    assert_eq!(grant_rows(&admin, &store).await, 0);
}

#[tokio::test]
async fn purge_keeps_a_proposal_until_it_expires_and_an_approved_one_while_its_grant_is_kept() {
    let store = store_on(shared_server(), "prp_purge", Isolation::ReadCommitted).await;
    let t0 = Timestamp::from_millis(1_000_000_000);
    let retention = Duration::from_secs(3600);
    let pending = proposal("a#pending", MINUTE, t0).await;
    let denied = proposal("a#denied", MINUTE, t0).await;
    let approved_one = proposal("a#approved", MINUTE, t0).await;
    let later = proposal("a#later", 10 * MINUTE, t0).await;
    for p in [&pending, &denied, &approved_one, &later] {
        store.propose(p.clone()).await.unwrap();
    }
    store.deny_proposal(&denied.id, None, t0).await.unwrap();
    // Its grant lives two hours: the proposal is kept as long.
    let grant = approved_one
        .grant(2 * 60 * MINUTE, t0, Some(approver()))
        .unwrap();
    assert_eq!(
        store
            .approve_proposal(&approved_one.id, grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );

    let boundary = t0.saturating_add(MINUTE + retention);
    let just_before = Timestamp::from_millis(boundary.as_millis() - 1);
    assert_eq!(store.purge(just_before, retention).await.unwrap(), 0);
    assert_eq!(
        store.purge(boundary, retention).await.unwrap(),
        2,
        "the pending and the denied proposal"
    );
    for gone in [&pending.id, &denied.id] {
        assert_eq!(store.get_proposal(gone).await.unwrap(), None);
    }
    for kept in [&approved_one.id, &later.id] {
        assert!(store.get_proposal(kept).await.unwrap().is_some());
    }
    let later_gone = t0.saturating_add(10 * MINUTE + retention);
    assert_eq!(store.purge(later_gone, retention).await.unwrap(), 1);
    assert!(
        store
            .get_proposal(&approved_one.id)
            .await
            .unwrap()
            .is_some()
    );
    assert!(store.get(&grant.id).await.unwrap().is_some());

    // The grant goes, and its proposal with it, in the same purge.
    let grant_gone = grant.expires_at.saturating_add(retention);
    assert_eq!(store.purge(grant_gone, retention).await.unwrap(), 2);
    assert_eq!(store.get(&grant.id).await.unwrap(), None);
    assert_eq!(store.get_proposal(&approved_one.id).await.unwrap(), None);
    assert_eq!(store.purge(grant_gone, retention).await.unwrap(), 0);
}

/// A stop is ordered against approvals by the run's advisory lock: it waits
/// for the approval in flight (held up here by an admin lock on the
/// proposal's row), which then issues its grant, and the stop stops that
/// grant; an approval that begins while the stop waits queues behind it and
/// answers `Stopped`; a propose after the stop returned is `Stopped`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_waits_for_the_approval_in_flight_and_stops_its_grant() {
    let server = shared_server();
    let store = Arc::new(store_on(server, "prp_stop_race", Isolation::ReadCommitted).await);
    let t0 = now();
    let held = proposal("a#held", MINUTE, t0).await;
    let queued = proposal("a#queued", MINUTE, t0).await;
    for p in [&held, &queued] {
        store.propose(p.clone()).await.unwrap();
    }
    let locker = support::hold_row(server, store.proposals_table(), held.id.as_str()).await;
    let approve = |p: &Proposal| {
        let (store, p) = (store.clone(), p.clone());
        let grant = grant_for(&p, t0);
        let id = grant.id.clone();
        (
            id,
            tokio::spawn(async move { store.approve_proposal(&p.id, grant, t0).await }),
        )
    };
    let (held_grant, in_flight) = approve(&held);
    let watcher = server.admin().await;
    let schema = schema_of(&store);
    wait_for_lock_waiters(&watcher, &schema, "WITH p0 AS", false, 1).await;
    let stop = tokio::spawn({
        let store = store.clone();
        async move { store.stop_run(&actor(), &run(), t0).await }
    });
    wait_for_lock_waiters(&watcher, &schema, "SELECT pg_advisory_xact_lock(", true, 1).await;
    let (queued_grant, behind) = approve(&queued);
    wait_for_lock_waiters(&watcher, &schema, "WITH p0 AS", true, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!stop.is_finished() && !behind.is_finished());

    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        in_flight.await.unwrap().unwrap(),
        DecisionOutcome::Approved,
        "the approval in flight is ordered before the stop"
    );
    assert_eq!(
        stop.await.unwrap().unwrap(),
        StopOutcome {
            stopped_grants: 1,
            stopped_standing: 0,
            was_stopped: false
        },
        "the stop counts the grant the approval issued"
    );
    assert_eq!(
        behind.await.unwrap().unwrap(),
        DecisionOutcome::Stopped,
        "the approval queued behind the stop"
    );
    assert_eq!(
        store.get(&held_grant).await.unwrap().unwrap().state,
        GrantState::Stopped
    );
    assert_eq!(store.get(&queued_grant).await.unwrap(), None);
    assert_eq!(
        store.propose(proposal("a#after", MINUTE, t0).await).await,
        Err(ProposeError::Stopped)
    );
}

/// The text of `schema_sql` up to the version 3 step: a schema exactly as
/// the version 2 library created it.
fn version_2_sql(options: &countersign_store_postgres::PostgresStoreOptions) -> String {
    let sql = schema_sql(options).unwrap();
    let cut = sql
        .find("-- countersign PostgreSQL store, schema version 3")
        .expect("the version 3 step starts with its header");
    let v2 = sql[..cut].to_owned();
    assert!(v2.contains("VALUES (2, ") && !v2.contains("VALUES (3, "));
    v2
}

/// Copies the grants and fences of `from` (written by this library, whose
/// grant rows are laid out as version 2 laid them out) into the version 2
/// schema `to`.
async fn copy_grants(admin: &tokio_postgres::Client, from: &PostgresApprovalStore, to: &str) {
    // Without the `element` column version 4 added (null on every grant
    // copied here).
    admin
        .batch_execute(&format!(
            "CREATE TEMP TABLE copied AS SELECT * FROM {}; \
             ALTER TABLE copied DROP COLUMN element; \
             INSERT INTO \"{to}\".grants SELECT * FROM copied; DROP TABLE copied; \
             INSERT INTO \"{to}\".run_fences SELECT * FROM {}; \
             INSERT INTO \"{to}\".actor_fences SELECT * FROM {};",
            from.grants_table(),
            from.run_fences_table(),
            from.actor_fences_table()
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_version_2_schema_is_upgraded_in_place_to_the_current_version() {
    let server = shared_server();
    let admin = server.admin().await;
    let options = options_for(server, "prp_upgrade", Isolation::ReadCommitted);
    let schema = options.schema_name().to_owned();
    admin
        .batch_execute(&format!("BEGIN;\n{}\nCOMMIT;", version_2_sql(&options)))
        .await
        .unwrap();
    // Grants in every state that matters, written by the library elsewhere.
    let source = store_on(server, "prp_upgrade_src", Isolation::ReadCommitted).await;
    let t0 = now();
    let active = support::grant("a#v2-active", MINUTE, t0).await;
    let consumed = support::grant("a#v2-consumed", MINUTE, t0).await;
    let (url, action) = url_and_action("a#v2-stopped").await;
    let stopped = Approval::for_action(
        actor(),
        RunId::new("run-stopped").unwrap(),
        &url,
        &action,
        MINUTE,
        t0,
    )
    .unwrap();
    for g in [&active, &consumed, &stopped] {
        source.issue(g.clone()).await.unwrap();
    }
    let winner = AttemptId::generate().unwrap();
    source
        .consume_once(&consumed.id, &consumed.binding(), t0, &winner)
        .await
        .unwrap();
    source
        .stop_run(&stopped.actor_id, &stopped.run_id, t0)
        .await
        .unwrap();
    copy_grants(&admin, &source, &schema).await;

    // Verify mode refuses version 2 and names the way out.
    let err = PostgresApprovalStore::connect(options.clone().schema_setup(SchemaSetup::Verify))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ConnectError::Store(StoreError::Unsupported { message }) if message.contains("version 2")),
        "{err:?}"
    );
    let grants_before: String = admin
        .query_one(
            &format!("SELECT string_agg(row_to_json(g)::jsonb::text, ',' ORDER BY id) FROM \"{schema}\".grants g"),
            &[],
        )
        .await
        .unwrap()
        .get(0);

    // Apply mode upgrades it in place; the grant rows are untouched.
    let store = PostgresApprovalStore::connect(options.clone())
        .await
        .unwrap();
    let versions = support::schema_versions(&admin, &schema).await;
    assert_eq!(versions, vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(SCHEMA_VERSION, 6);
    let grants_after: String = admin
        .query_one(
            &format!("SELECT string_agg((row_to_json(g)::jsonb - 'element')::text, ',' ORDER BY id) FROM \"{schema}\".grants g"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(grants_after, grants_before);
    for g in [&active, &consumed, &stopped] {
        assert_eq!(
            store.get(&g.id).await.unwrap(),
            source.get(&g.id).await.unwrap()
        );
    }
    assert_eq!(
        store
            .consume_once(&consumed.id, &consumed.binding(), t0, &winner)
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: true }
    );
    assert_eq!(
        store.get(&stopped.id).await.unwrap().unwrap().state,
        GrantState::Stopped
    );
    // The fences carried over: the stopped run refuses proposals until resumed.
    let in_stopped = proposal_in("run-stopped", "a#v3", MINUTE, t0).await;
    assert_eq!(
        store.propose(in_stopped.clone()).await,
        Err(ProposeError::Stopped)
    );
    store
        .resume_run(&actor(), &RunId::new("run-stopped").unwrap())
        .await
        .unwrap();
    store.propose(in_stopped.clone()).await.unwrap();
    // Proposals work on the upgraded schema, on top of the old grants.
    let p = proposal("a#v3", MINUTE, t0).await;
    store.propose(p.clone()).await.unwrap();
    let grant = grant_for(&p, t0);
    assert_eq!(
        store
            .approve_proposal(&p.id, grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
    assert_eq!(
        store
            .consume_once(
                &active.id,
                &active.binding(),
                t0,
                &AttemptId::generate().unwrap()
            )
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    // Connecting again changes nothing; verify mode accepts the result.
    PostgresApprovalStore::connect(options.clone())
        .await
        .unwrap();
    PostgresApprovalStore::connect(options.schema_setup(SchemaSetup::Verify))
        .await
        .unwrap();
}

/// The schema at version 3, as the library before element-bound grants
/// created it.
fn version_3_sql(options: &countersign_store_postgres::PostgresStoreOptions) -> String {
    let sql = schema_sql(options).unwrap();
    let cut = sql
        .find("-- countersign PostgreSQL store, schema version 4")
        .expect("the version 4 step starts with its header");
    let v3 = sql[..cut].to_owned();
    assert!(v3.contains("VALUES (3, ") && !v3.contains("VALUES (4, "));
    v3
}

/// Version 4 only adds the nullable `element` columns: the rows of version 3
/// keep their seals and read as bound to no element (what they were
/// approved with), and an element added to one by hand breaks its seal.
#[tokio::test]
async fn a_version_3_schema_gains_the_element_columns_and_its_rows_bind_no_element() {
    let server = shared_server();
    let admin = server.admin().await;
    let options = options_for(server, "prp_upgrade_v3", Isolation::ReadCommitted);
    let schema = options.schema_name().to_owned();
    admin
        .batch_execute(&format!("BEGIN;\n{}\nCOMMIT;", version_3_sql(&options)))
        .await
        .unwrap();
    let source = store_on(server, "prp_upgrade_v3_src", Isolation::ReadCommitted).await;
    let t0 = now();
    let old = support::grant("a#v3-old", MINUTE, t0).await;
    let tampered = support::grant("a#v3-tampered", MINUTE, t0).await;
    for g in [&old, &tampered] {
        source.issue(g.clone()).await.unwrap();
    }
    copy_grants(&admin, &source, &schema).await;
    let pending = observed(proposal("a#v3-pending", MINUTE, t0).await, None, true);
    let mut pending = pending;
    if let Some(snapshot) = pending.snapshot.as_mut() {
        snapshot.page.element = None;
    }
    source.propose(pending.clone()).await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE TEMP TABLE copied_p AS SELECT * FROM {}; \
             ALTER TABLE copied_p DROP COLUMN element; \
             INSERT INTO \"{schema}\".proposals SELECT * FROM copied_p; DROP TABLE copied_p;",
            source.proposals_table()
        ))
        .await
        .unwrap();

    let store = PostgresApprovalStore::connect(options.clone())
        .await
        .unwrap();
    let versions = support::schema_versions(&admin, &schema).await;
    assert_eq!(versions, vec![1, 2, 3, 4, 5, 6]);
    let read = store.get(&old.id).await.unwrap().unwrap();
    assert_eq!(read, StoredGrant::issued(old.clone()));
    assert_eq!(read.approval.element, None);
    assert_eq!(
        store.get_proposal(&pending.id).await.unwrap(),
        Some(StoredProposal::pending(pending.clone()))
    );
    let grant = grant_for(&pending, t0);
    assert_eq!(grant.element, None);
    assert_eq!(
        store
            .approve_proposal(&pending.id, grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
    assert_eq!(
        store
            .consume_once(&old.id, &old.binding(), t0, &AttemptId::generate().unwrap())
            .await
            .unwrap(),
        ConsumeOutcome::Consumed { replay: false }
    );
    // An element-bound grant on the upgraded schema keeps its element.
    let page = PageBinding::new("session", "tab", "rev-1").with_element(support::element());
    let bound = support::grant("a#v4-bound", MINUTE, t0)
        .await
        .bound_to_page(&page)
        .unwrap();
    store.issue(bound.clone()).await.unwrap();
    assert_eq!(store.get(&bound.id).await.unwrap().unwrap().approval, bound);
    // An element added by hand to an old row: the seal no longer holds.
    admin
        .execute(
            &format!("UPDATE \"{schema}\".grants SET element = $2 WHERE id = $1"),
            &[&tampered.id.as_str(), &support::element().canonical_json()],
        )
        .await
        .unwrap();
    assert!(matches!(
        store.get(&tampered.id).await,
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn the_host_can_apply_the_printed_upgrade_from_version_2() {
    let server = shared_server();
    let admin = server.admin().await;
    let options = options_for(server, "prp_upgrade_sql", Isolation::ReadCommitted)
        .schema_setup(SchemaSetup::Verify);
    let schema = options.schema_name().to_owned();
    admin
        .batch_execute(&format!("BEGIN;\n{}\nCOMMIT;", version_2_sql(&options)))
        .await
        .unwrap();
    let source = store_on(server, "prp_upgrade_sql_src", Isolation::ReadCommitted).await;
    let t0 = now();
    let old = support::grant("a#v2sql", MINUTE, t0).await;
    source.issue(old.clone()).await.unwrap();
    copy_grants(&admin, &source, &schema).await;

    let sql = schema_upgrade_sql(&options, 2).unwrap();
    assert!(
        !sql.contains("VALUES (2, "),
        "only the step after version 2"
    );
    assert!(!sql.contains("ADD COLUMN approver_id"));
    admin
        .batch_execute(&format!("BEGIN;\n{sql}\nCOMMIT;"))
        .await
        .unwrap();
    let store = PostgresApprovalStore::connect(options).await.unwrap();
    assert_eq!(store.get(&old.id).await.unwrap().unwrap().approval, old);
    let p = proposal("a#v3sql", MINUTE, t0).await;
    store.propose(p.clone()).await.unwrap();
    assert_eq!(
        store
            .approve_proposal(&p.id, grant_for(&p, t0), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
}

/// A store on `server` that notices a dead server quickly.
async fn store_for_kill(server: &PgServer, tag: &str) -> Arc<PostgresApprovalStore> {
    Arc::new(
        PostgresApprovalStore::connect(
            options_for(server, tag, Isolation::ReadCommitted)
                .statement_timeout(Duration::from_secs(2))
                .pool_wait_timeout(Duration::from_secs(2))
                .connect_timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap(),
    )
}

/// SIGKILLs the server and starts it again (crash recovery runs).
async fn kill_and_restart(server: &Arc<PgServer>, pause: Duration) {
    let server = server.clone();
    tokio::task::spawn_blocking(move || {
        server.kill();
        std::thread::sleep(pause);
        server.restart();
    })
    .await
    .unwrap();
}

/// Waits until `store` answers again after a restart.
async fn wait_for_recovery(store: &PostgresApprovalStore, probe: &ProposalId) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.get_proposal(probe).await.is_err() {
        assert!(Instant::now() < deadline, "the store did not recover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server dies after the approval's transaction inserted the grant and
/// before it wrote the decision (a trigger holds the decision's `UPDATE` on
/// a lock the test holds): after recovery there is neither the grant nor
/// the decision, and the same approval then succeeds, once. An approval
/// that committed before a kill keeps both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_inside_an_approval_leaves_both_effects_or_neither() {
    let server = Arc::new(PgServer::start());
    let store = store_for_kill(&server, "prp_kill").await;
    let t0 = now();
    let committed = proposal("a#committed", MINUTE, t0).await;
    let caught = proposal("a#caught", MINUTE, t0).await;
    for p in [&committed, &caught] {
        store.propose(p.clone()).await.unwrap();
    }
    let committed_grant = grant_for(&committed, t0);
    assert_eq!(
        store
            .approve_proposal(&committed.id, committed_grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );

    let admin = server.admin().await;
    let schema = store
        .proposals_table()
        .split('.')
        .next()
        .unwrap()
        .to_owned();
    admin
        .batch_execute(&format!(
            "CREATE FUNCTION {schema}.hold_decisions() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NEW; END $$; \
             CREATE TRIGGER hold_decisions BEFORE UPDATE ON {} FOR EACH ROW \
             EXECUTE FUNCTION {schema}.hold_decisions(); \
             SELECT pg_advisory_lock(4242);",
            store.proposals_table()
        ))
        .await
        .unwrap();
    let caught_grant = grant_for(&caught, t0);
    let approving = tokio::spawn({
        let (store, grant, id) = (store.clone(), caught_grant.clone(), caught.id.clone());
        async move { store.approve_proposal(&id, grant, t0).await }
    });
    // The grant is inserted (uncommitted), the decision waits.
    wait_for_lock_waiters(&admin, &schema_of(&store), "UPDATE", true, 1).await;
    kill_and_restart(&server, Duration::from_millis(300)).await;
    let answer = approving.await.unwrap();
    assert!(
        matches!(&answer, Err(ApproveError::Store(e)) if e.is_retryable()),
        "the kill answers a retryable store error: {answer:?}"
    );

    wait_for_recovery(&store, &caught.id).await;
    assert_eq!(
        store.get_proposal(&caught.id).await.unwrap().unwrap().state,
        ProposalState::Pending,
        "neither: no decision"
    );
    assert_eq!(
        store.get(&caught_grant.id).await.unwrap(),
        None,
        "neither: no grant"
    );
    // The approval committed before the kill kept both.
    assert_eq!(
        store
            .get_proposal(&committed.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        approved(&committed_grant, t0)
    );
    assert_eq!(
        store.get(&committed_grant.id).await.unwrap(),
        Some(StoredGrant::issued(committed_grant))
    );

    // The host retries the same approval: it is taken, once.
    let admin = server.admin().await;
    admin
        .batch_execute(&format!(
            "DROP TRIGGER hold_decisions ON {}",
            store.proposals_table()
        ))
        .await
        .unwrap();
    assert_eq!(
        store
            .approve_proposal(&caught.id, caught_grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::Approved
    );
    assert_eq!(
        store.get(&caught_grant.id).await.unwrap(),
        Some(StoredGrant::issued(caught_grant.clone()))
    );
    assert_eq!(
        store
            .approve_proposal(&caught.id, caught_grant.clone(), t0)
            .await
            .unwrap(),
        DecisionOutcome::AlreadyDecided(approved(&caught_grant, t0))
    );
}

const BURST_PROPOSALS: usize = 160;
const BURST_TASKS: usize = 8;

/// The server SIGKILLed in the middle of a burst of approvals: after
/// recovery every proposal is either approved with the very grant its
/// approval sent, which exists, or pending with that grant absent; every
/// `Approved` answered before the kill is kept; a second pass approves the
/// rest, each once. Half the tasks wait half-way until the server is dead
/// (the others run on through the kill), and it restarts only once an
/// approval failed against it, so the kill always hits some approvals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_burst_of_approvals_leaves_each_with_both_or_neither() {
    let server = Arc::new(PgServer::start());
    let store = store_for_kill(&server, "prp_burst").await;
    let t0 = now();
    let mut proposals = Vec::new();
    for i in 0..BURST_PROPOSALS {
        let p = proposal(&format!("a#burst{i}"), 10 * MINUTE, t0).await;
        store.propose(p.clone()).await.unwrap();
        proposals.push(p);
    }
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let gate = KillGate::new();
    let mut tasks = Vec::new();
    for task in 0..BURST_TASKS {
        let mine: Vec<Proposal> = proposals
            .iter()
            .enumerate()
            .filter(|(i, _)| i % BURST_TASKS == task)
            .map(|(_, p)| p.clone())
            .collect();
        let (store, done, gate) = (store.clone(), done.clone(), gate.clone());
        let waits_at = (task % 2 == 0).then_some(mine.len() / 2);
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            for (k, p) in mine.into_iter().enumerate() {
                if waits_at == Some(k) {
                    gate.killed().await;
                }
                let grant = grant_for(&p, t0);
                let answer = store.approve_proposal(&p.id, grant.clone(), t0).await;
                if answer.is_err() {
                    gate.hit();
                }
                results.push((p.id.clone(), grant, answer));
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            results
        }));
    }
    while done.load(std::sync::atomic::Ordering::SeqCst) < BURST_PROPOSALS / 3 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let restarter = tokio::spawn({
        let (server, gate) = (server.clone(), gate.clone());
        async move {
            gate.kill_then_restart_after_a_hit(&server, Duration::from_millis(700))
                .await
        }
    });
    let mut sent: HashMap<ProposalId, (Approval, Result<DecisionOutcome, ApproveError>)> =
        HashMap::new();
    for task in tasks {
        for (id, grant, answer) in task.await.unwrap() {
            match &answer {
                Ok(DecisionOutcome::Approved) => {}
                Err(ApproveError::Store(e)) if e.is_retryable() => {}
                other => panic!("{id}: unexpected {other:?}"),
            }
            sent.insert(id, (grant, answer));
        }
    }
    restarter.await.unwrap();
    let failed = sent.values().filter(|(_, a)| a.is_err()).count();
    eprintln!("burst: {failed} of {BURST_PROPOSALS} approvals failed with the kill");
    assert!(failed > 0, "the kill hit some approvals");
    wait_for_recovery(&store, &proposals[0].id).await;

    for p in &proposals {
        let (grant, answer) = &sent[&p.id];
        let state = store.get_proposal(&p.id).await.unwrap().unwrap().state;
        let issued = store.get(&grant.id).await.unwrap();
        match &state {
            ProposalState::Approved { approval_id, .. } => {
                assert_eq!(approval_id, &grant.id, "{}: approved with its grant", p.id);
                assert_eq!(
                    issued,
                    Some(StoredGrant::issued(grant.clone())),
                    "{}: both",
                    p.id
                );
            }
            ProposalState::Pending => {
                assert!(answer.is_err(), "{}: an answered approval was lost", p.id);
                assert_eq!(issued, None, "{}: neither", p.id);
            }
            other => panic!("{}: {other:?}", p.id),
        }
        // The second pass: what the kill undid is approved now, once.
        let retry = grant_for(p, t0);
        let again = store
            .approve_proposal(&p.id, retry.clone(), t0)
            .await
            .unwrap();
        match state {
            ProposalState::Pending => assert_eq!(again, DecisionOutcome::Approved),
            decided => {
                assert_eq!(again, DecisionOutcome::AlreadyDecided(decided));
                assert_eq!(store.get(&retry.id).await.unwrap(), None);
            }
        }
    }
    let admin = server.admin().await;
    assert_eq!(
        grant_rows(&admin, &store).await,
        BURST_PROPOSALS as i64,
        "one grant per proposal, no more"
    );
    let unapproved: i64 = admin
        .query_one(
            &format!(
                "SELECT count(*) FROM {} WHERE state <> 'approved'",
                store.proposals_table()
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unapproved, 0);
}
