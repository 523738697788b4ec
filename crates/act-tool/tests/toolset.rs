//! Act is opt-in; the host helper that issues grants; the context builder.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Harness, URL, call_for, click, policy};
use countersign_act_tool::approval::{
    ActorId, ApprovalError, ApprovalStore, GrantState, IssueError, RunId,
};
use countersign_act_tool::{Context, GrantError, RetryPolicy, ToolFormat, Toolset, issue_grant};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::InMemoryOperationStore;
use serde_json::json;

#[tokio::test]
async fn a_new_toolset_holds_no_act_until_enabled() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let mut tools = Toolset::new(h.context.clone());
    assert!(tools.act().is_none());
    assert!(tools.definitions().is_empty());
    assert!(tools.definitions_for(ToolFormat::OpenAiStrict).is_empty());
    let call = call_for(URL, grant.id.as_str(), &click());
    let refused = tools.call("browser_act", &call).await.unwrap_err();
    assert_eq!(refused.name(), "browser_act");
    assert!(h.backend.is_empty());
    assert!(
        h.records().is_empty(),
        "a disabled tool is not called at all"
    );

    tools.enable_act();
    tools.enable_act(); // idempotent
    assert!(tools.act().is_some());
    let definitions = tools.definitions();
    assert_eq!(definitions.len(), 1);
    assert_eq!(definitions[0].name, "browser_act");
    for format in [ToolFormat::OpenAiStrict, ToolFormat::AnthropicStrict] {
        let shaped = tools.definitions_for(format);
        assert_eq!(shaped.len(), 1);
        assert_eq!(shaped[0], tools.act().unwrap().tool_definition_for(format));
        assert_eq!(shaped[0].format, format);
    }
    assert!(tools.call("browser_other", &call).await.is_err());
    let result = tools.call("browser_act", &call).await.unwrap();
    assert_eq!(result["status"], "ok");
    assert_eq!(h.backend.len(), 1);

    tools.disable_act();
    assert!(tools.act().is_none());
    assert!(tools.call("browser_act", &call).await.is_err());
    assert!(Toolset::new(h.context.clone()).with_act().act().is_some());
}

#[tokio::test]
async fn issue_grant_binds_the_context_actor_run_and_canonical_forms() {
    let h = Harness::new();
    let grant = issue_grant(
        &h.context,
        "HTTPS://DOCS.example.com.",
        &json!({"method": " Click", "selector": "a#docs "}),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(grant.actor_id.as_str(), "actor-1");
    assert_eq!(grant.run_id.as_str(), "run-1");
    assert_eq!(grant.url, URL);
    assert_eq!(
        grant.action.canonical_json(),
        r#"{"arguments":{},"description":"click a#docs","method":"click","selector":"a#docs"}"#
    );
    assert_eq!(grant.issued_at, common::START);
    assert_eq!(
        grant.expires_at.as_millis(),
        common::START.as_millis() + 30_000
    );
    assert!(
        grant.page_revision.is_none() && grant.operation_id.is_none() && grant.session_id.is_none()
    );
    let stored = h.store().get(&grant.id).await.unwrap().unwrap();
    assert_eq!(stored.state, GrantState::Active);
}

#[tokio::test]
async fn issue_grant_refuses_what_the_policy_refuses_and_bad_ttls() {
    let h = Harness::new();
    let err = issue_grant(
        &h.context,
        "https://evil.example.net/",
        &click(),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, GrantError::Denied(_)));
    assert_eq!(
        err.to_string(),
        "policy refused the grant: host `evil.example.net` is not allowed"
    );
    let err = issue_grant(
        &h.context,
        URL,
        &json!({"method": "explode", "selector": "a"}),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, GrantError::Denied(_)));
    for ttl in [Duration::ZERO, Duration::from_secs(24 * 3600 + 1)] {
        let err = issue_grant(&h.context, URL, &click(), ttl)
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            GrantError::Approval(ApprovalError::InvalidTtl { .. })
        ));
    }
    let none = Harness::without_store();
    let err = issue_grant(&none.context, URL, &click(), Duration::from_secs(30))
        .await
        .unwrap_err();
    assert_eq!(err, GrantError::NoApprovalStore);
    assert_eq!(err.to_string(), "no approval store is configured");
    // Re-issuing an existing grant is refused by the store, never overwritten.
    let grant = h.grant_click().await;
    let err = h.store().issue(grant.clone()).await.unwrap_err();
    assert!(matches!(err, IssueError::AlreadyExists(_)));
}

#[test]
fn the_context_builder_names_what_is_missing() {
    let err = Context::builder().build().unwrap_err();
    assert_eq!(err.to_string(), "context is missing its actor id");
    let err = Context::builder()
        .actor_id(ActorId::new("a").unwrap())
        .run_id(RunId::new("r").unwrap())
        .backend(FakeBackend::new())
        .source_policy(policy())
        .build()
        .unwrap_err();
    assert_eq!(err.missing(), "operation store");
    let context = Context::builder()
        .actor_id(ActorId::new("a").unwrap())
        .run_id(RunId::new("r").unwrap())
        .backend(FakeBackend::new())
        .source_policy(policy())
        .operation_store(Arc::new(InMemoryOperationStore::new()))
        .build()
        .unwrap();
    assert!(context.approval_store().is_none());
    assert_eq!(context.consume_retry(), RetryPolicy::DEFAULT);
    assert!(
        context.now().as_millis() > 1_600_000_000_000,
        "system clock by default"
    );
    assert!(format!("{context:?}").contains("has_approval_store: false"));
    assert_eq!(RetryPolicy::new(0, Duration::ZERO).max_attempts(), 1);
}

#[tokio::test]
async fn hosts_keep_handles_to_what_they_put_in_the_context() {
    let h = Harness::new();
    let store: &Arc<dyn ApprovalStore> = h.store();
    let grant = h.grant_click().await;
    assert!(store.get(&grant.id).await.unwrap().is_some());
    assert!(
        h.context
            .approval_store()
            .unwrap()
            .get(&grant.id)
            .await
            .unwrap()
            .is_some()
    );
}
