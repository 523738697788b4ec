//! The JSON a model sees, the typed entry point, and what is never logged.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Harness, URL, call_for, click};
use countersign_act_tool::approval::OutcomeCode;
use countersign_act_tool::{ActCall, ActResult};
use serde_json::json;

fn is_operation_id(text: &str) -> bool {
    text.len() == 35
        && text.starts_with("op_")
        && text[3..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[tokio::test]
async fn ok_result_has_exactly_the_documented_shape() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let result = h.run(&call_for(URL, grant.id.as_str(), &click())).await;
    let op = result["operation_id"].as_str().unwrap().to_owned();
    assert!(is_operation_id(&op), "{op}");
    assert_eq!(
        result,
        json!({
            "status": "ok",
            "operation_id": op,
            "locator": {
                "approval_id": grant.id.as_str(),
                "url": "https://docs.example.com/",
                "method": "click",
                "selector": "a#docs",
            },
            "action": {
                "arguments": {},
                "description": "click a#docs",
                "method": "click",
                "selector": "a#docs",
            },
        })
    );
}

#[tokio::test]
async fn serialised_text_keeps_the_documented_field_order() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let typed = h
        .act
        .execute(ActCall::new(URL, grant.id.as_str(), "click", "a#docs"))
        .await;
    let text = serde_json::to_string(&typed).unwrap();
    let expected = format!(
        r#"{{"status":"ok","operation_id":"{}","locator":{{"approval_id":"{}","url":"https://docs.example.com/","method":"click","selector":"a#docs"}},"action":{{"arguments":{{}},"description":"click a#docs","method":"click","selector":"a#docs"}}}}"#,
        typed.operation_id(),
        grant.id
    );
    assert_eq!(text, expected);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        typed.to_json()
    );

    let denied = h
        .act
        .execute(ActCall::new(URL, grant.id.as_str(), "click", "a#docs"))
        .await;
    let text = serde_json::to_string(&denied).unwrap();
    assert_eq!(
        text,
        format!(
            r#"{{"status":"error","operation_id":"{}","error":{{"code":"APPROVAL_STALE","message":"approval was already used"}}}}"#,
            denied.operation_id()
        )
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        denied.to_json()
    );
}

#[tokio::test]
async fn error_result_has_exactly_the_documented_shape() {
    let h = Harness::new();
    let result = h
        .run(&call_for(
            URL,
            "apr_0123456789abcdef0123456789abcdef",
            &click(),
        ))
        .await;
    let op = result["operation_id"].as_str().unwrap().to_owned();
    assert!(is_operation_id(&op));
    assert_eq!(
        result,
        json!({
            "status": "error",
            "operation_id": op,
            "error": {
                "code": "APPROVAL_REQUIRED",
                "message": "approval id is unknown; the host must issue an approval for this action",
            },
        })
    );
}

#[tokio::test]
async fn typed_results_carry_the_canonical_action() {
    let h = Harness::new();
    let action = json!({"method": "fill", "selector": "input#q", "arguments": {"text": "docs", "n": 3, "b": true}});
    let grant = h.grant(URL, &action).await;
    let call = ActCall::new(URL, grant.id.as_str(), "fill", "input#q")
        .with_argument("text", "docs")
        .with_argument("n", 3)
        .with_argument("b", true);
    let result = h.act.execute(call).await;
    assert!(result.is_ok());
    assert_eq!(result.code(), OutcomeCode::Ok);
    let ActResult::Ok(done) = &result else {
        panic!()
    };
    assert_eq!(done.approval_id, grant.id);
    assert_eq!(done.action, grant.action);
    assert_eq!(done.action.arguments()["n"], "3");
    assert_eq!(result.error(), None);

    let again = h
        .act
        .execute(ActCall::new(URL, grant.id.as_str(), "fill", "input#q"))
        .await;
    assert_eq!(again.code(), OutcomeCode::ApprovalStale);
    assert_eq!(
        again.error().unwrap().to_string(),
        "APPROVAL_STALE: approval was already used"
    );
}

#[tokio::test]
async fn operation_ids_are_unique_per_call() {
    let h = Harness::new();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let result = h.run(&json!({})).await;
        assert!(seen.insert(result["operation_id"].as_str().unwrap().to_owned()));
    }
    assert_eq!(h.records().len(), 50);
}
