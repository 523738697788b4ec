//! Two `countersign-mcp` processes on one store (Redis, then PostgreSQL),
//! as a deployment behind a load balancer runs them: a proposal made
//! through one process is approved on the other's approval page and acted
//! on once; a run stopped through either refuses acts on both. With one
//! form key (`http.form_key`) a form rendered by one process is taken by
//! the other. With one webhook configured in both, each event reaches it
//! once, whichever process delivers it.
//!
//! Each test starts its own store server on a free loopback port; without
//! `redis-server` or `initdb` it says `SKIPPED` (see `support`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use countersign_approval_core::{OperationLog, RunId};
use countersign_store_postgres::{PostgresApprovalStore, PostgresStoreOptions};
use countersign_store_redis::{
    OperationLogRetention, RedisApprovalStore, RedisOperationLog, RedisStoreOptions,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{
    ACTOR, PgServer, Process, RUN, RedisServer, Session, approve_form, post_form, stop_form,
};

const URL: &str = "http://127.0.0.2:9/";

fn click(selector: &str) -> Value {
    json!({"url": URL, "method": "click", "selector": selector, "description": "count once"})
}

/// Proposes on `session`: the proposal id.
async fn propose(session: &mut Session, selector: &str) -> String {
    let proposed = session.call("browser_propose", click(selector)).await;
    assert_eq!(proposed["status"], "pending", "{proposed}");
    proposed["proposal_id"].as_str().unwrap().to_owned()
}

/// The approval id of an approved proposal, read through `session`.
async fn approval_of(session: &mut Session, proposal: &str) -> String {
    let status = session
        .call("browser_proposal_status", json!({"proposal_id": proposal}))
        .await;
    assert_eq!(status["status"], "approved", "{status}");
    status["approval_id"].as_str().unwrap().to_owned()
}

fn act(selector: &str, approval_id: &str) -> Value {
    let mut call = click(selector);
    call["approval_id"] = json!(approval_id);
    call
}

/// The whole flow on two processes sharing `store_url`.
async fn two_processes(store_url: &str) {
    let a = Process::start(store_url);
    let b = Process::start(store_url);
    assert_ne!(a.origin, b.origin);
    let mut on_a = Session::open(&a.mcp).await;
    let mut on_b = Session::open(&b.mcp).await;

    // Proposed through A; B sees it (one store), and its link points at A.
    let first = propose(&mut on_a, "button#first").await;
    let seen = on_b
        .call("browser_proposal_status", json!({"proposal_id": first}))
        .await;
    assert_eq!(seen["status"], "pending", "{seen}");
    assert_eq!(
        seen["approval_url"],
        format!("{}/approvals/proposals/{first}", b.origin)
    );

    // Approved on B's page. A form is signed with its process's own key:
    // B's form posted to A is refused and decides nothing.
    let form = approve_form(&b.origin, &first).await;
    assert_eq!(post_form(&a.origin, &form).await.0, StatusCode::FORBIDDEN);
    let pending = on_a
        .call("browser_proposal_status", json!({"proposal_id": first}))
        .await;
    assert_eq!(pending["status"], "pending", "{pending}");
    let (status, location) = post_form(&b.origin, &form).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        location.starts_with(&format!("/approvals/proposals/{first}?")),
        "{location}"
    );

    // Acted on through A: once. The replay is refused on both processes.
    let grant = approval_of(&mut on_a, &first).await;
    assert_eq!(approval_of(&mut on_b, &first).await, grant);
    assert_eq!(
        on_a.outcome("browser_act", act("button#first", &grant))
            .await,
        "ok"
    );
    assert_eq!(
        on_a.outcome("browser_act", act("button#first", &grant))
            .await,
        "APPROVAL_STALE"
    );
    assert_eq!(
        on_b.outcome("browser_act", act("button#first", &grant))
            .await,
        "APPROVAL_STALE"
    );
    assert_eq!(a.fake_actions().await, 1);
    assert_eq!(b.fake_actions().await, 0);

    // Two more grants, one approved on each page, neither used; then the
    // run is stopped through B's page.
    let second = propose(&mut on_a, "button#second").await;
    let third = propose(&mut on_b, "button#third").await;
    let form = approve_form(&a.origin, &second).await;
    assert_eq!(post_form(&a.origin, &form).await.0, StatusCode::SEE_OTHER);
    let form = approve_form(&b.origin, &third).await;
    assert_eq!(post_form(&b.origin, &form).await.0, StatusCode::SEE_OTHER);
    let second_grant = approval_of(&mut on_b, &second).await;
    let third_grant = approval_of(&mut on_a, &third).await;

    let stop = stop_form(&b.origin).await;
    assert_eq!(
        stop.action,
        format!("/approvals/runs/{ACTOR}/{RUN}/stop"),
        "the stop form posts elsewhere"
    );
    let (status, location) = post_form(&b.origin, &stop).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        location.starts_with(&format!(
            "/approvals/runs/{ACTOR}/{RUN}?stopped=2&standing=0&was=false&tag="
        )),
        "{location}"
    );

    // Every act of the stopped run is refused, on both processes, with
    // either grant; nothing new can be proposed.
    for (selector, grant) in [
        ("button#second", &second_grant),
        ("button#third", &third_grant),
    ] {
        for session in [&mut on_a, &mut on_b] {
            assert_eq!(
                session.outcome("browser_act", act(selector, grant)).await,
                "APPROVAL_STALE",
                "{selector}"
            );
        }
    }
    assert_eq!(
        on_a.outcome("browser_propose", click("button#fourth"))
            .await,
        "APPROVAL_STALE"
    );
    assert_eq!(
        on_b.outcome("browser_propose", click("button#fourth"))
            .await,
        "APPROVAL_STALE"
    );
    // A second stop, through A's page, says the run was stopped already.
    let stop = stop_form(&a.origin).await;
    let (status, location) = post_form(&a.origin, &stop).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        location.contains("?stopped=0&standing=0&was=true&tag="),
        "{location}"
    );
    assert_eq!(a.fake_actions().await, 1);
    assert_eq!(b.fake_actions().await, 0);

    // An MCP session lives in the process that opened it: its id means
    // nothing to the other one, which is why a deployment routes by it.
    let (status, body) = on_a.send_to(&b.mcp, "tools/list", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _) = on_a.send_to(&a.mcp, "tools/list", json!({})).await;
    assert_eq!(status, StatusCode::OK);

    // Nothing in either process's log points at a failure.
    for process in [&a, &b] {
        let log = process.stderr.lock().unwrap().clone();
        assert!(!log.contains("panicked"), "{log}");
    }
}

/// The shared operation log holds one record per act, from both
/// processes, in order: the one `ok`, then six refusals.
async fn check_log(log: &dyn OperationLog) {
    let records = log
        .records_for_run(&RunId::new(RUN).unwrap())
        .await
        .unwrap();
    let outcomes: Vec<&str> = records.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(
        outcomes,
        [
            "ok",
            "APPROVAL_STALE",
            "APPROVAL_STALE",
            "APPROVAL_STALE",
            "APPROVAL_STALE",
            "APPROVAL_STALE",
            "APPROVAL_STALE"
        ]
    );
    assert!(records.iter().all(|r| r.actor_id.as_str() == ACTOR));
    assert_eq!(records[0].approver_id.as_ref().unwrap().as_str(), "alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_redis_store() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    two_processes(&redis.url()).await;
    let store = RedisApprovalStore::connect(RedisStoreOptions::single(redis.url()))
        .await
        .unwrap();
    let log = RedisOperationLog::for_store(&store, OperationLogRetention::default())
        .await
        .unwrap();
    check_log(&log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_postgres_store() {
    let Some(postgres) = PgServer::start() else {
        return;
    };
    two_processes(&postgres.url()).await;
    let store = PostgresApprovalStore::connect(PostgresStoreOptions::new(postgres.url()))
        .await
        .unwrap();
    check_log(&store.operation_log()).await;
}

/// With the same `http.form_key`, a form one process rendered is taken by
/// the other, so the approval pages need no sticky routing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_form_key_lets_either_process_take_a_form() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let key = "form_key = \"8f0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766554433221100\"";
    let a = Process::start_with(&redis.url(), key);
    let b = Process::start_with(&redis.url(), key);
    let mut on_a = Session::open(&a.mcp).await;
    let proposal = propose(&mut on_a, "button#first").await;
    // Rendered by B, posted to A: taken.
    let form = approve_form(&b.origin, &proposal).await;
    let (status, location) = post_form(&a.origin, &form).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{location}");
    let approval = approval_of(&mut on_a, &proposal).await;
    assert_eq!(
        on_a.call("browser_act", act("button#first", &approval))
            .await["status"],
        "ok"
    );
    assert_eq!(a.fake_actions().await, 1);
    assert_eq!(b.fake_actions().await, 0);
}

/// Two processes with one webhook on one store: a proposal made through A
/// and approved on B's page is told once each (`proposal.created`, then
/// `proposal.decided` naming alice), whichever process's worker delivers
/// it, each signed as Standard Webhooks receivers check.
async fn two_processes_notify_once(store_url: &str) {
    let Some((receiver, secret_file)) = support::Receiver::with_secret_file() else {
        return;
    };
    let notify = format!(
        "\n[[notify]]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:{}/hooks\"\nsecret_file = \"{}\"\n",
        receiver.port,
        secret_file.path().display()
    );
    let a = Process::start_with(store_url, &notify);
    let b = Process::start_with(store_url, &notify);
    let mut on_a = Session::open(&a.mcp).await;
    let proposal = propose(&mut on_a, "button#notified").await;
    let hear = |within: u64| -> Option<Value> {
        let line = receiver
            .lines
            .recv_timeout(std::time::Duration::from_secs(within))
            .ok()?;
        Some(serde_json::from_str(&line).unwrap())
    };
    // The person hears of it, then approves it (a proposal decided before
    // its notice went out is not announced as waiting).
    let mut heard: Vec<Value> = hear(15).into_iter().collect();
    let form = approve_form(&b.origin, &proposal).await;
    assert_eq!(post_form(&b.origin, &form).await.0, StatusCode::SEE_OTHER);
    heard.extend(hear(15));
    // Quiet for a while after: no second delivery from the other process.
    heard.extend(hear(2));
    let told: Vec<(String, String, bool)> = heard
        .iter()
        .map(|got| {
            (
                got["payload"]["type"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                got["payload"]["data"]["proposal_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                got["verified"] == true,
            )
        })
        .collect();
    assert_eq!(
        told,
        [
            ("proposal.created".to_owned(), proposal.clone(), true),
            ("proposal.decided".to_owned(), proposal.clone(), true),
        ],
        "{heard:?}"
    );
    let decision = &heard[1]["payload"]["data"]["decision"];
    assert_eq!(
        (decision["outcome"].as_str(), decision["approver"].as_str()),
        (Some("approved"), Some("alice")),
        "{decision}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_redis_notify_once() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    two_processes_notify_once(&redis.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_postgres_notify_once() {
    let Some(postgres) = PgServer::start() else {
        return;
    };
    two_processes_notify_once(&postgres.url()).await;
}
