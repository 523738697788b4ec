//! Every row of the guide's denial table, through Act. Each refusal is
//! checked for its exact code, for nothing performed, and for exactly one
//! operation record with that outcome.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Harness, URL, call_for, click};
use countersign_act_tool::approval::{ApprovalId, GivenApprovalId, OutcomeCode, RevokeOutcome};
use serde_json::json;

// Row 1: the context has no approval store or the id is unknown ⇒ APPROVAL_REQUIRED.

#[tokio::test]
async fn no_approval_store_is_approval_required() {
    let h = Harness::without_store();
    let call = call_for(URL, "apr_0123456789abcdef0123456789abcdef", &click());
    let result = h.expect_refused(&call, "APPROVAL_REQUIRED").await;
    assert_eq!(
        result["error"]["message"],
        "no approval store is configured; the host must issue approvals"
    );
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn unknown_id_is_approval_required() {
    let h = Harness::new();
    h.grant_click().await;
    let unknown = ApprovalId::generate().unwrap();
    let call = call_for(URL, unknown.as_str(), &click());
    h.expect_refused(&call, "APPROVAL_REQUIRED").await;
    let record = h.last_record();
    assert_eq!(record.approval_id, GivenApprovalId::WellFormed(unknown));
    assert_eq!(record.url.as_deref(), Some(URL));
    assert!(record.action_digest.is_some());
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn malformed_ids_are_approval_required() {
    let h = Harness::new();
    h.grant_click().await;
    let long = "a".repeat(129);
    for (id, shown) in [
        ("", "<malformed id of 0 bytes: ``>"),
        ("apr_!", "<malformed id of 5 bytes: `apr_!`>"),
        ("apr 1", "<malformed id of 5 bytes: `apr 1`>"),
        ("apr_é", "<malformed id of 6 bytes: `apr_é`>"),
        (
            long.as_str(),
            &format!("<malformed id of 129 bytes: `{}…`>", "a".repeat(64)),
        ),
        ("../apr_1", "<malformed id of 8 bytes: `../apr_1`>"),
    ] {
        let call = call_for(URL, id, &click());
        h.expect_refused(&call, "APPROVAL_REQUIRED").await;
        assert_eq!(h.last_record().approval_id.to_string(), shown);
    }
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn missing_or_mistyped_approval_id_is_approval_required() {
    let h = Harness::new();
    h.grant_click().await;
    h.expect_refused(
        &json!({"url": URL, "method": "click", "selector": "a#docs"}),
        "APPROVAL_REQUIRED",
    )
    .await;
    h.expect_refused(
        &json!({"url": URL, "approval_id": null, "method": "click", "selector": "a#docs"}),
        "APPROVAL_REQUIRED",
    )
    .await;
    h.expect_refused(
        &json!({"url": URL, "approval_id": 42, "method": "click", "selector": "a#docs"}),
        "APPROVAL_REQUIRED",
    )
    .await;
    // A non-string id is recorded as such, not as absent.
    assert_eq!(
        h.last_record().approval_id,
        GivenApprovalId::not_a_string("number")
    );
    assert_eq!(h.records()[0].approval_id, GivenApprovalId::Absent);
    assert_eq!(h.records()[1].approval_id, GivenApprovalId::Absent);
    for (id, json_type) in [
        (json!(true), "boolean"),
        (json!(["apr_1"]), "array"),
        (json!({"id": "apr_1"}), "object"),
    ] {
        h.expect_refused(
            &json!({"url": URL, "approval_id": id, "method": "click", "selector": "a#docs"}),
            "APPROVAL_REQUIRED",
        )
        .await;
        assert_eq!(
            h.last_record().approval_id.to_string(),
            format!("<{json_type}, not a string>")
        );
    }
    assert!(h.backend.is_empty());
}

// Row 2: the grant expired, was revoked or consumed, or does not match ⇒ APPROVAL_STALE.

#[tokio::test]
async fn expired_grant_is_stale_at_exactly_expires_at() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    h.clock.set(grant.expires_at);
    let call = call_for(URL, grant.id.as_str(), &click());
    let result = h.expect_refused(&call, "APPROVAL_STALE").await;
    assert_eq!(result["error"]["message"], "approval has expired");
    h.clock.advance(Duration::from_secs(3600));
    h.expect_refused(&call, "APPROVAL_STALE").await;
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn grant_works_one_millisecond_before_expiry() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    h.clock
        .set(grant.expires_at.saturating_sub(Duration::from_millis(1)));
    h.expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
}

#[tokio::test]
async fn revoked_grant_is_stale() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    assert_eq!(
        h.store().revoke(&grant.id).await.unwrap(),
        RevokeOutcome::Revoked
    );
    let result = h
        .expect_refused(
            &call_for(URL, grant.id.as_str(), &click()),
            "APPROVAL_STALE",
        )
        .await;
    assert_eq!(result["error"]["message"], "approval was revoked");
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn consumed_grant_is_stale() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let call = call_for(URL, grant.id.as_str(), &click());
    h.expect_ok(&call).await;
    let result = h.expect_refused(&call, "APPROVAL_STALE").await;
    assert_eq!(result["error"]["message"], "approval was already used");
    assert_eq!(h.backend.len(), 1);
    // Revoking after use changes nothing.
    assert_eq!(
        h.store().revoke(&grant.id).await.unwrap(),
        RevokeOutcome::AlreadyConsumed
    );
}

#[tokio::test]
async fn another_actor_or_run_is_stale_and_the_grant_stays_usable() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let call = call_for(URL, grant.id.as_str(), &click());
    for (actor, run) in [
        ("actor-2", "run-1"),
        ("actor-1", "run-2"),
        ("actor-2", "run-2"),
    ] {
        let other = h.as_other(actor, run);
        let result = h.expect_refused_by(&other, &call, "APPROVAL_STALE").await;
        assert_eq!(
            result["error"]["message"],
            "approval does not match this actor, run, url or action"
        );
        let record = h.last_record();
        assert_eq!(record.actor_id.as_str(), actor);
        assert_eq!(record.run_id.as_str(), run);
    }
    assert!(h.backend.is_empty());
    h.expect_ok(&call).await;
}

#[tokio::test]
async fn another_url_or_action_is_stale_and_the_grant_stays_usable() {
    let h = Harness::new();
    // Seven mismatches below: a limit above them keeps the grant usable.
    let grant = countersign_act_tool::issue_grant_with(
        &h.context,
        URL,
        &json!({"method": "fill", "selector": "input#q", "arguments": {"text": "docs"}}),
        common::TTL,
        &countersign_act_tool::GrantOptions::default().attempt_limit(8),
    )
    .await
    .unwrap();
    let id = grant.id.as_str();
    let mismatches = [
        call_for(
            "https://docs.example.com/other",
            id,
            &json!({"method": "fill", "selector": "input#q", "arguments": {"text": "docs"}}),
        ),
        call_for(
            URL,
            id,
            &json!({"method": "type", "selector": "input#q", "arguments": {"text": "docs"}}),
        ),
        call_for(
            URL,
            id,
            &json!({"method": "fill", "selector": "input#r", "arguments": {"text": "docs"}}),
        ),
        call_for(
            URL,
            id,
            &json!({"method": "fill", "selector": "input#q", "arguments": {"text": "docs!"}}),
        ),
        call_for(
            URL,
            id,
            &json!({"method": "fill", "selector": "input#q", "arguments": {"text": "docs", "x": "1"}}),
        ),
        call_for(URL, id, &json!({"method": "fill", "selector": "input#q"})),
        call_for(
            URL,
            id,
            &json!({"method": "fill", "selector": "input#q", "arguments": {"text": "docs"}, "description": "something else"}),
        ),
    ];
    for call in &mismatches {
        h.expect_refused(call, "APPROVAL_STALE").await;
        let record = h.last_record();
        assert!(record.url.is_some() && record.action_digest.is_some());
    }
    assert!(h.backend.is_empty());

    // Canonically equal spellings of the same call match.
    let same = json!({
        "url": "HTTPS://Docs.Example.COM.", "approval_id": id,
        "method": " FILL ", "selector": " input#q ", "description": "  ",
        "arguments": {"text": "docs"},
    });
    let result = h.expect_ok(&same).await;
    assert_eq!(result["locator"]["url"], URL);
    assert_eq!(result["locator"]["method"], "fill");
    assert_eq!(h.backend.records()[0].action.arguments()["text"], "docs");
}

// Row 3: the policy denies the action or URL ⇒ NOT_AUTHORIZED.

#[tokio::test]
async fn policy_denied_urls_are_not_authorized() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let id = grant.id.as_str();
    let urls = [
        (
            "https://evil.example.net/",
            "host `evil.example.net` is not allowed",
        ),
        ("http://docs.example.com/", "scheme `http` is not allowed"),
        (
            "https://user:pw@docs.example.com/",
            "url must not carry a user name or password",
        ),
        (
            "https://internal.example.com/",
            "host `internal.example.com` has non-public address `10.0.0.7`",
        ),
        (
            "not a url",
            "url could not be parsed: relative URL without a base",
        ),
        ("https://127.0.0.1/", "host `127.0.0.1` is not allowed"),
        ("file:///etc/passwd", "scheme `file` is not allowed"),
    ];
    for (url, message) in urls {
        let result = h
            .expect_refused(&call_for(url, id, &click()), "NOT_AUTHORIZED")
            .await;
        assert_eq!(result["error"]["message"], message);
        let record = h.last_record();
        assert_eq!(record.url, None);
        assert_eq!(record.action_digest, None);
    }
    assert!(h.backend.is_empty());
    // None of those burnt the grant.
    h.expect_ok(&call_for(URL, id, &click())).await;
}

#[tokio::test]
async fn policy_denied_actions_are_not_authorized() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let id = grant.id.as_str();
    let long_selector = "a".repeat(2049);
    let actions = [
        json!({"method": "explode", "selector": "a#docs"}),
        json!({"method": "click"}),
        json!({"selector": "a#docs"}),
        json!({"method": 1, "selector": "a#docs"}),
        json!({"method": "click", "selector": ""}),
        json!({"method": "click", "selector": "a\u{0}b"}),
        json!({"method": "click", "selector": long_selector}),
        json!({"method": "click", "selector": "a#docs", "description": 5}),
        json!({"method": "click", "selector": "a#docs", "arguments": "x"}),
        json!({"method": "click", "selector": "a#docs", "arguments": {"k": {"nested": true}}}),
        json!({"method": "click", "selector": "a#docs", "arguments": {"bad key": "x"}}),
    ];
    for action in &actions {
        h.expect_refused(&call_for(URL, id, action), "NOT_AUTHORIZED")
            .await;
        let record = h.last_record();
        assert_eq!(record.url.as_deref(), Some(URL));
        assert_eq!(record.action_digest, None);
    }
    assert!(h.backend.is_empty());
    h.expect_ok(&call_for(URL, id, &click())).await;
}

#[tokio::test]
async fn a_successful_call_records_everything_it_knows() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let result = h
        .expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
    let record = h.last_record();
    assert_eq!(record.approval_id.well_formed(), Some(&grant.id));
    assert_eq!(record.url.as_deref(), Some(URL));
    assert_eq!(record.action_digest, Some(grant.action_digest));
    assert_eq!(record.actor_id.as_str(), "actor-1");
    assert_eq!(record.run_id.as_str(), "run-1");
    assert_eq!(record.started_at, common::START);
    let performed = &h.backend.records()[0];
    assert_eq!(performed.approval_id, grant.id);
    assert_eq!(performed.operation_id.as_str(), result["operation_id"]);
    assert_eq!(
        performed.url.addresses(),
        ["93.184.216.34".parse::<std::net::IpAddr>().unwrap()]
    );
    let _ = Arc::clone(h.store());
    assert_eq!(
        h.records()
            .iter()
            .filter(|r| r.outcome == OutcomeCode::Ok)
            .count(),
        1
    );
}

#[tokio::test]
async fn a_huge_hostile_id_is_recorded_bounded_and_escaped() {
    let h = Harness::new();
    h.grant_click().await;
    let id = format!("apr_\n\u{202e}{}", "x".repeat(100_000));
    h.expect_refused(&call_for(URL, &id, &click()), "APPROVAL_REQUIRED")
        .await;
    let recorded = h.last_record().approval_id;
    assert_eq!(
        recorded.to_string(),
        format!(
            "<malformed id of {} bytes: `apr_\\n\\u{{202e}}{}…`>",
            id.len(),
            "x".repeat(50)
        )
    );
    assert!(recorded.to_string().len() < 120);
}
