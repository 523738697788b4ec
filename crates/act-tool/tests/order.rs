//! The malformed-call check and the order of checks (DESIGN §5).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Harness, URL, call_for, click};
use serde_json::json;

#[tokio::test]
async fn actor_id_or_run_id_from_the_model_is_refused() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    for (key, value) in [
        ("actor_id", json!("actor-1")),
        ("run_id", json!("run-1")),
        ("actor_id", json!("someone-else")),
        ("run_id", json!(null)),
    ] {
        let mut call = call_for(URL, grant.id.as_str(), &click());
        call[key] = value;
        let result = h.expect_refused(&call, "NOT_AUTHORIZED").await;
        assert_eq!(
            result["error"]["message"],
            format!("unknown argument `{key}`")
        );
    }
    // The grant was not burnt by the refused calls.
    h.expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
}

#[tokio::test]
async fn unknown_arguments_are_refused_without_echoing_odd_names() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let mut call = call_for(URL, grant.id.as_str(), &click());
    call["secret password: hunter2"] = json!(1);
    let result = h.expect_refused(&call, "NOT_AUTHORIZED").await;
    assert_eq!(result["error"]["message"], "unknown argument");
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn non_object_calls_are_not_authorized() {
    let h = Harness::new();
    for call in [
        json!(null),
        json!("click"),
        json!(1),
        json!([URL]),
        json!(true),
    ] {
        let result = h.expect_refused(&call, "NOT_AUTHORIZED").await;
        assert_eq!(
            result["error"]["message"],
            "tool call arguments must be a json object"
        );
    }
}

#[tokio::test]
async fn missing_or_mistyped_url_is_not_authorized_even_without_a_store() {
    for h in [Harness::new(), Harness::without_store()] {
        for url in [
            None,
            Some(json!(null)),
            Some(json!(5)),
            Some(json!(["https://docs.example.com/"])),
        ] {
            let mut call = json!({"approval_id": "apr_x", "method": "click", "selector": "a#docs"});
            if let Some(url) = url {
                call["url"] = url;
            }
            h.expect_refused(&call, "NOT_AUTHORIZED").await;
        }
    }
}

#[tokio::test]
async fn url_is_checked_before_approval_id_before_unknown_arguments() {
    let h = Harness::new();
    // Missing url and missing approval id: url first.
    h.expect_refused(&json!({"method": "click"}), "NOT_AUTHORIZED")
        .await;
    // Missing approval id and an unknown argument: approval id first.
    h.expect_refused(&json!({"url": URL, "actor_id": "a"}), "APPROVAL_REQUIRED")
        .await;
    // Both present, unknown argument: refused.
    h.expect_refused(
        &json!({"url": URL, "approval_id": "apr_x", "actor_id": "a"}),
        "NOT_AUTHORIZED",
    )
    .await;
}

#[tokio::test]
async fn no_store_comes_before_the_policy() {
    let h = Harness::without_store();
    // A disallowed host and a disallowed method: still APPROVAL_REQUIRED.
    let call = call_for(
        "https://evil.example.net/",
        "apr_x",
        &json!({"method": "explode", "selector": ""}),
    );
    h.expect_refused(&call, "APPROVAL_REQUIRED").await;
    let record = h.last_record();
    assert_eq!(record.url, None);
    // But a malformed call is refused as such first.
    let mut call = call_for(URL, "apr_x", &click());
    call["run_id"] = json!("run-9");
    h.expect_refused(&call, "NOT_AUTHORIZED").await;
}

#[tokio::test]
async fn the_policy_comes_before_the_approval_id() {
    let h = Harness::new();
    // Malformed and unknown ids with a disallowed URL or action: NOT_AUTHORIZED.
    for id in ["apr_!!", "apr_0123456789abcdef0123456789abcdef"] {
        h.expect_refused(
            &call_for("https://evil.example.net/", id, &click()),
            "NOT_AUTHORIZED",
        )
        .await;
        h.expect_refused(
            &call_for(URL, id, &json!({"method": "explode", "selector": "a"})),
            "NOT_AUTHORIZED",
        )
        .await;
    }
}

#[tokio::test]
async fn the_url_is_judged_before_the_action() {
    let h = Harness::new();
    let result = h
        .expect_refused(
            &call_for(
                "https://evil.example.net/",
                "apr_x",
                &json!({"method": "explode", "selector": "a"}),
            ),
            "NOT_AUTHORIZED",
        )
        .await;
    assert_eq!(
        result["error"]["message"],
        "host `evil.example.net` is not allowed"
    );
}

#[tokio::test]
async fn the_approval_id_comes_before_staleness() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    h.store().revoke(&grant.id).await.unwrap();
    // A malformed id next to a revoked grant: the id is judged first.
    h.expect_refused(&call_for(URL, "apr_ !", &click()), "APPROVAL_REQUIRED")
        .await;
    h.expect_refused(
        &call_for(URL, grant.id.as_str(), &click()),
        "APPROVAL_STALE",
    )
    .await;
}

#[tokio::test]
async fn revoked_is_judged_before_mismatch_and_expiry() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    h.store().revoke(&grant.id).await.unwrap();
    h.clock.advance(std::time::Duration::from_secs(3600));
    let result = h
        .expect_refused(
            &call_for(
                URL,
                grant.id.as_str(),
                &json!({"method": "hover", "selector": "a#docs"}),
            ),
            "APPROVAL_STALE",
        )
        .await;
    assert_eq!(result["error"]["message"], "approval was revoked");
}
