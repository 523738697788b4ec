//! Host controls through Act: stopping a run, the failed-attempt cap, and
//! the approver in every operation record of a call that used a grant.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Harness, TTL, URL, bound_page, call_for, click};
use countersign_act_tool::approval::{
    ApprovalStore, ApproverId, GrantState, IssueError, OutcomeCode, ResumeOutcome, StopOutcome,
};
use countersign_act_tool::{GrantError, GrantOptions, issue_grant, issue_grant_with};
use serde_json::json;

fn approver(name: &str) -> ApproverId {
    ApproverId::new(name).unwrap()
}

#[tokio::test]
async fn a_stopped_run_refuses_every_grant_and_every_new_one() {
    let h = Harness::new();
    let first = h.grant_click().await;
    let second = h
        .grant(URL, &json!({"method": "hover", "selector": "a#docs"}))
        .await;
    let used = h
        .grant(URL, &json!({"method": "focus", "selector": "a#docs"}))
        .await;
    h.expect_ok(&call_for(
        URL,
        used.id.as_str(),
        &json!({"method": "focus", "selector": "a#docs"}),
    ))
    .await;

    let stopped = h.act.stop_run().await.unwrap();
    assert_eq!(
        stopped,
        StopOutcome {
            stopped_grants: 2,
            stopped_standing: 0,
            was_stopped: false
        }
    );
    let refused = h
        .expect_refused(
            &call_for(URL, first.id.as_str(), &click()),
            "APPROVAL_STALE",
        )
        .await;
    assert_eq!(
        refused["error"]["message"],
        "the host stopped this run; none of its approvals can be used"
    );
    let record = h.last_record();
    assert_eq!(record.outcome, OutcomeCode::ApprovalStale);
    assert!(record.reason.contains("stopped"), "{}", record.reason);
    assert_eq!(record.approver_id, None);
    h.expect_refused(
        &call_for(
            URL,
            second.id.as_str(),
            &json!({"method": "hover", "selector": "a#docs"}),
        ),
        "APPROVAL_STALE",
    )
    .await;
    assert_eq!(h.backend.len(), 1, "only the call before the stop acted");

    // No new grant for the stopped run until the host resumes it.
    let again = issue_grant(&h.context, URL, &click(), TTL).await;
    assert_eq!(again, Err(GrantError::Issue(IssueError::Stopped)));
    assert_eq!(
        h.act.stop_run().await.unwrap(),
        StopOutcome {
            stopped_grants: 0,
            stopped_standing: 0,
            was_stopped: true
        }
    );
    let store = h.store();
    assert_eq!(
        store
            .resume_run(h.context.actor_id(), h.context.run_id())
            .await
            .unwrap(),
        ResumeOutcome::Resumed
    );
    let fresh = h.grant_click().await;
    h.expect_ok(&call_for(URL, fresh.id.as_str(), &click()))
        .await;
    // A resume never revives a grant stopped before it.
    h.expect_refused(
        &call_for(URL, first.id.as_str(), &click()),
        "APPROVAL_STALE",
    )
    .await;
    assert_eq!(
        store.get(&first.id).await.unwrap().unwrap().state,
        GrantState::Stopped
    );
    assert_eq!(h.backend.len(), 2);
}

#[tokio::test]
async fn another_run_of_the_same_actor_is_not_stopped() {
    let h = Harness::new();
    let other = h.as_other("actor-1", "run-2");
    let grant_elsewhere = issue_grant(other.context(), URL, &click(), TTL)
        .await
        .unwrap();
    h.act.stop_run().await.unwrap();
    let answer = other
        .execute_json(&call_for(URL, grant_elsewhere.id.as_str(), &click()))
        .await;
    assert_eq!(answer["status"], "ok", "{answer}");
}

#[tokio::test]
async fn a_stopped_actor_refuses_every_run() {
    let h = Harness::new();
    let other = h.as_other("actor-1", "run-2");
    let mine = h.grant_click().await;
    let theirs = issue_grant(other.context(), URL, &click(), TTL)
        .await
        .unwrap();
    let stopped = h
        .store()
        .stop_actor(h.context.actor_id(), h.context.now())
        .await
        .unwrap();
    assert_eq!(stopped.stopped_grants, 2);
    h.expect_refused(&call_for(URL, mine.id.as_str(), &click()), "APPROVAL_STALE")
        .await;
    let answer = other
        .execute_json(&call_for(URL, theirs.id.as_str(), &click()))
        .await;
    assert_eq!(answer["error"]["code"], "APPROVAL_STALE", "{answer}");
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn mismatched_calls_lock_the_grant_at_the_limit() {
    let h = Harness::new();
    let grant = issue_grant_with(
        &h.context,
        URL,
        &click(),
        TTL,
        &GrantOptions::default().attempt_limit(3),
    )
    .await
    .unwrap();
    let id = grant.id.as_str();
    let probes = [
        json!({"method": "click", "selector": "a#other"}),
        json!({"method": "dblclick", "selector": "a#docs"}),
        json!({"method": "click", "selector": "a#docs", "description": "something else"}),
    ];
    for (n, probe) in probes.iter().enumerate() {
        let refused = h
            .expect_refused(&call_for(URL, id, probe), "APPROVAL_STALE")
            .await;
        let message = refused["error"]["message"].as_str().unwrap().to_owned();
        let record = h.last_record();
        if n < 2 {
            assert_eq!(
                message,
                "approval does not match this actor, run, url or action"
            );
        } else {
            assert!(message.contains("locked"), "{message}");
            assert!(record.reason.contains("locked"), "{}", record.reason);
        }
    }
    // The matching call now finds the grant locked; nothing is performed.
    let refused = h
        .expect_refused(&call_for(URL, id, &click()), "APPROVAL_STALE")
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("locked"),
        "{refused}"
    );
    let stored = h.store().get(&grant.id).await.unwrap().unwrap();
    assert_eq!(stored.state, GrantState::Locked);
    assert_eq!(stored.failed_attempts, 3);
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn the_default_cap_is_five_mismatches() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let probe = json!({"method": "click", "selector": "a#nope"});
    let mut codes = Vec::new();
    for _ in 0..6 {
        let answer = h.run(&call_for(URL, grant.id.as_str(), &probe)).await;
        codes.push(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("locked"),
        );
    }
    assert_eq!(codes, [false, false, false, false, true, true]);
}

#[tokio::test]
async fn every_record_of_a_used_grant_names_its_approver() {
    let h = Harness::new();
    let approved = issue_grant_with(
        &h.context,
        URL,
        &click(),
        TTL,
        &GrantOptions::default()
            .approved_by(approver("reviewer:alice"))
            .note("looked at the page"),
    )
    .await
    .unwrap();
    let stored = h.store().get(&approved.id).await.unwrap().unwrap();
    let recorded = stored.approval.approver.clone().unwrap();
    assert_eq!(recorded.id, approver("reviewer:alice"));
    assert_eq!(recorded.approved_at, h.context.now());
    assert_eq!(
        stored.approval.approver_note.as_deref(),
        Some("looked at the page")
    );

    h.expect_ok(&call_for(URL, approved.id.as_str(), &click()))
        .await;
    assert_eq!(
        h.last_record().approver_id,
        Some(approver("reviewer:alice"))
    );
    // A refused call used no grant: no approver in its record.
    h.expect_refused(
        &call_for(URL, approved.id.as_str(), &click()),
        "APPROVAL_STALE",
    )
    .await;
    assert_eq!(h.last_record().approver_id, None);

    // A grant issued without an approver.
    let anonymous = h.grant_click().await;
    h.expect_ok(&call_for(URL, anonymous.id.as_str(), &click()))
        .await;
    assert_eq!(h.last_record().approver_id, None);

    // A backend failure after the consume still names the approver.
    let failing = issue_grant_with(
        &h.context,
        URL,
        &click(),
        TTL,
        &GrantOptions::default().approved_by(approver("reviewer:bob")),
    )
    .await
    .unwrap();
    h.backend.fail_next();
    h.expect_refused(
        &call_for(URL, failing.id.as_str(), &click()),
        "BACKEND_FAILED",
    )
    .await;
    assert_eq!(h.last_record().approver_id, Some(approver("reviewer:bob")));
}

#[tokio::test]
async fn a_page_bound_grant_names_its_approver_from_the_page_check() {
    let h = Harness::new();
    let page = bound_page("r1");
    h.backend.set_page(Some(page.clone()));
    let grant = issue_grant_with(
        &h.context,
        URL,
        &click(),
        TTL,
        &GrantOptions::default()
            .page(page)
            .approved_by(approver("reviewer:carol")),
    )
    .await
    .unwrap();
    h.expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
    assert_eq!(
        h.last_record().approver_id,
        Some(approver("reviewer:carol"))
    );
}

#[test]
fn grant_options_refuse_what_a_grant_cannot_hold() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let h = Harness::new();
        for limit in [0, 101] {
            let refused = issue_grant_with(
                &h.context,
                URL,
                &click(),
                TTL,
                &GrantOptions::default().attempt_limit(limit),
            )
            .await
            .unwrap_err();
            assert_eq!(
                refused.to_string(),
                format!("attempt limit must be 1 to 100, got {limit}")
            );
        }
        let refused = issue_grant_with(
            &h.context,
            URL,
            &click(),
            TTL,
            &GrantOptions::default().note("a\nnote"),
        )
        .await
        .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "approver note must be at most 1024 bytes without control characters"
        );
        assert!(ApproverId::new("").is_err());
        assert!(ApproverId::new("a\u{7}").is_err());
        assert!(ApproverId::new("x".repeat(257)).is_err());
        assert!(ApproverId::new("x".repeat(256)).is_ok());
    });
}
