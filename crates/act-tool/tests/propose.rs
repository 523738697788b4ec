#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The propose tools: a model proposes, the host decides once, the model
//! learns the decision and acts with the approval it names.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{START, URL, call_for, check_message, click, policy};
use countersign_act_tool::approval::{
    ActionRequest, ActorId, ApprovalStore, ApproverId, Backend, BackendError, Clock,
    DecisionOutcome, ElementIdentity, FrameIdentity, ManualClock, PageBinding, PageSnapshot,
    ProposalId, ProposalState, ProposalStore, RunId,
};
use countersign_act_tool::policy::{Action, AuthorizedUrl};
use countersign_act_tool::{
    Context, DEFAULT_PROPOSAL_TTL, PROPOSAL_ARGUMENT_NAMES, Propose, ToolFormat, Toolset,
};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};

struct Host {
    store: Arc<InMemoryApprovalStore>,
    backend: FakeBackend,
    clock: ManualClock,
    operations: Arc<InMemoryOperationStore>,
    tools: Toolset,
}

fn context_for(
    store: Arc<InMemoryApprovalStore>,
    backend: impl Backend + 'static,
    clock: &ManualClock,
    operations: Arc<InMemoryOperationStore>,
    run: &str,
) -> Context {
    Context::builder()
        .actor_id(ActorId::new("actor").unwrap())
        .run_id(RunId::new(run).unwrap())
        .backend(backend)
        .source_policy(policy())
        .operation_store(operations)
        .proposal_store(store)
        .clock(clock.clone())
        .build()
        .unwrap()
}

fn host() -> Host {
    let store = Arc::new(InMemoryApprovalStore::new());
    let backend = FakeBackend::new();
    let clock = ManualClock::new(START);
    let operations = Arc::new(InMemoryOperationStore::new());
    let context = context_for(
        store.clone(),
        backend.clone(),
        &clock,
        operations.clone(),
        "run",
    );
    Host {
        store,
        backend,
        clock,
        operations,
        tools: Toolset::new(context).with_act().with_propose(),
    }
}

fn proposal_call() -> Value {
    json!({"url": URL, "method": "CLICK", "selector": "  a#docs ", "description": null})
}

impl Host {
    async fn call(&self, name: &str, args: &Value) -> Value {
        self.tools.call(name, args).await.unwrap()
    }

    async fn propose(&self) -> ProposalId {
        let answer = self.call("browser_propose", &proposal_call()).await;
        assert_eq!(answer["status"], "pending", "{answer}");
        ProposalId::parse(answer["proposal_id"].as_str().unwrap()).unwrap()
    }

    async fn status(&self, id: &ProposalId) -> Value {
        self.call(
            "browser_proposal_status",
            &json!({"proposal_id": id.as_str()}),
        )
        .await
    }

    async fn approve(&self, id: &ProposalId) -> DecisionOutcome {
        let stored = self.store.get_proposal(id).await.unwrap().unwrap();
        let now = self.clock.now();
        let grant = stored
            .proposal
            .grant(
                Duration::from_secs(60),
                now,
                Some(ApproverId::new("carol").unwrap()),
            )
            .unwrap();
        self.store.approve_proposal(id, grant, now).await.unwrap()
    }
}

fn error_code(answer: &Value) -> &str {
    assert_eq!(answer["status"], "error", "{answer}");
    check_message(answer["error"]["message"].as_str().unwrap());
    answer["error"]["code"].as_str().unwrap()
}

#[tokio::test]
async fn a_proposal_is_pending_canonical_and_performs_nothing() {
    let host = host();
    let answer = host.call("browser_propose", &proposal_call()).await;
    assert_eq!(answer["status"], "pending");
    let id = answer["proposal_id"].as_str().unwrap();
    assert!(id.starts_with("prp_") && id.len() == 36, "{id}");
    assert_eq!(answer["url"], "https://docs.example.com/");
    assert_eq!(
        answer["action"],
        json!({"method": "click", "selector": "a#docs", "description": "click a#docs", "arguments": {}})
    );
    let expires = START.as_millis() + u64::try_from(DEFAULT_PROPOSAL_TTL.as_millis()).unwrap();
    assert_eq!(answer["expires_at_ms"], expires);
    assert!(answer.get("approval_id").is_none());

    let stored = host
        .store
        .get_proposal(&ProposalId::parse(id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, ProposalState::Pending);
    assert_eq!(stored.proposal.actor_id.as_str(), "actor");
    assert_eq!(stored.proposal.run_id.as_str(), "run");
    assert_eq!(stored.proposal.url, "https://docs.example.com/");
    assert_eq!(stored.proposal.snapshot, None);
    assert_eq!(
        stored.proposal.action_digest,
        policy().authorize_action(&click()).unwrap().digest()
    );
    // Nothing was performed, no grant exists, Act was not called.
    assert_eq!(host.backend.len(), 0);
    assert_eq!(host.store.len().unwrap(), 0);
    assert_eq!(host.operations.len().unwrap(), 0);
}

#[tokio::test]
async fn approved_proposals_name_the_approval_and_act_works_once() {
    let host = host();
    let id = host.propose().await;
    assert_eq!(host.status(&id).await["status"], "pending");
    assert_eq!(host.approve(&id).await, DecisionOutcome::Approved);
    let status = host.status(&id).await;
    assert_eq!(status["status"], "approved", "{status}");
    let approval_id = status["approval_id"].as_str().unwrap().to_owned();
    assert!(approval_id.starts_with("apr_"));

    let call = call_for(URL, &approval_id, &click());
    let first = host.call("browser_act", &call).await;
    assert_eq!(first["status"], "ok", "{first}");
    assert_eq!(host.backend.len(), 1);
    let again = host.call("browser_act", &call).await;
    assert_eq!(error_code(&again), "APPROVAL_STALE");
    assert_eq!(host.backend.len(), 1);
    // The record names who approved.
    let records = host.operations.records().unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].approver_id.as_ref().unwrap().as_str(), "carol");
    // A second decision changes nothing.
    assert!(matches!(
        host.approve(&id).await,
        DecisionOutcome::AlreadyDecided(ProposalState::Approved { .. })
    ));
    assert_eq!(host.store.len().unwrap(), 1);
}

#[tokio::test]
async fn denied_expired_and_stopped_proposals_leave_act_refusing() {
    let host = host();
    // Denied.
    let denied = host.propose().await;
    let by = ApproverId::new("carol").unwrap();
    assert_eq!(
        host.store
            .deny_proposal(&denied, Some(&by), host.clock.now())
            .await
            .unwrap(),
        DecisionOutcome::Denied
    );
    let status = host.status(&denied).await;
    assert_eq!(status["status"], "denied");
    assert!(status.get("approval_id").is_none());
    // Act with the proposal id is not an approval.
    let act = host
        .call("browser_act", &call_for(URL, denied.as_str(), &click()))
        .await;
    assert_eq!(error_code(&act), "APPROVAL_REQUIRED");

    // Expired.
    let late = host.propose().await;
    host.clock
        .advance(DEFAULT_PROPOSAL_TTL - std::time::Duration::from_millis(1));
    let waiting = host.status(&late).await;
    assert_eq!(waiting["status"], "pending");
    assert!(waiting.get("expired_at").is_none());
    host.clock.advance(std::time::Duration::from_millis(1));
    // Expired, and when: never still "pending".
    let expired = host.status(&late).await;
    let at = host.clock.now().to_rfc3339();
    assert_eq!(expired["status"], "expired");
    assert_eq!(expired["expired_at"], at.as_str());
    assert_eq!(
        expired["message"],
        format!(
            "nobody decided in time; the proposal expired at {at}; do not act, and propose again only if the task still needs it"
        )
    );
    assert_eq!(host.approve(&late).await, DecisionOutcome::Expired);
    assert_eq!(host.store.len().unwrap(), 0);

    // Stopped: an approval issued before the stop is refused by Act, a
    // pending proposal can no longer be approved, and no new one is taken.
    let approved = host.propose().await;
    let pending = host.propose().await;
    assert_eq!(host.approve(&approved).await, DecisionOutcome::Approved);
    let approval_id = host.status(&approved).await["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let actor = ActorId::new("actor").unwrap();
    let run = RunId::new("run").unwrap();
    let stop = host
        .store
        .stop_run(&actor, &run, host.clock.now())
        .await
        .unwrap();
    assert_eq!(stop.stopped_grants, 1);
    let act = host
        .call("browser_act", &call_for(URL, &approval_id, &click()))
        .await;
    assert_eq!(error_code(&act), "APPROVAL_STALE");
    assert_eq!(host.approve(&pending).await, DecisionOutcome::Stopped);
    let refused = host.call("browser_propose", &proposal_call()).await;
    assert_eq!(error_code(&refused), "APPROVAL_STALE");
    assert_eq!(host.backend.len(), 0);
}

#[tokio::test]
async fn refused_proposals_store_nothing() {
    let host = host();
    let cases = [
        (
            json!({"url": "https://evil.example.net/", "method": "click", "selector": "a"}),
            "NOT_AUTHORIZED",
        ),
        (
            json!({"url": URL, "method": "launch", "selector": "a"}),
            "NOT_AUTHORIZED",
        ),
        (
            json!({"url": URL, "method": "click", "selector": "a", "approval_id": "apr_x"}),
            "NOT_AUTHORIZED",
        ),
        (
            json!({"url": URL, "method": "click", "selector": "a", "actor_id": "root"}),
            "NOT_AUTHORIZED",
        ),
        (
            json!({"method": "click", "selector": "a"}),
            "NOT_AUTHORIZED",
        ),
        (json!(["not", "an", "object"]), "NOT_AUTHORIZED"),
    ];
    for (call, code) in cases {
        let answer = host.call("browser_propose", &call).await;
        assert_eq!(error_code(&answer), code, "{call}");
    }
    let answer = host
        .call(
            "browser_propose",
            &json!({"url": URL, "method": "click", "selector": "a", "approval_id": "apr_x"}),
        )
        .await;
    assert_eq!(answer["error"]["message"], "unknown argument `approval_id`");
    let pending = host
        .store
        .pending_proposals(
            &ActorId::new("actor").unwrap(),
            &RunId::new("run").unwrap(),
            host.clock.now(),
        )
        .await
        .unwrap();
    assert!(pending.is_empty());
}

#[tokio::test]
async fn a_context_without_a_proposal_store_takes_no_proposals() {
    let context = Context::builder()
        .actor_id(ActorId::new("actor").unwrap())
        .run_id(RunId::new("run").unwrap())
        .backend(FakeBackend::new())
        .source_policy(policy())
        .operation_store(InMemoryOperationStore::new())
        .approval_store(InMemoryApprovalStore::new())
        .build()
        .unwrap();
    let tools = Toolset::new(context).with_propose();
    let answer = tools
        .call("browser_propose", &proposal_call())
        .await
        .unwrap();
    assert_eq!(error_code(&answer), "NOT_AUTHORIZED");
    assert_eq!(
        answer["error"]["message"],
        "the host does not take proposals"
    );
}

#[tokio::test]
async fn status_tells_nothing_of_other_runs_or_unknown_ids() {
    let host = host();
    let id = host.propose().await;
    let other = Toolset::new(context_for(
        host.store.clone(),
        FakeBackend::new(),
        &host.clock,
        host.operations.clone(),
        "other-run",
    ))
    .with_propose();
    let answer = other
        .call(
            "browser_proposal_status",
            &json!({"proposal_id": id.as_str()}),
        )
        .await
        .unwrap();
    assert_eq!(error_code(&answer), "APPROVAL_REQUIRED");
    for args in [
        json!({"proposal_id": "prp_00000000000000000000000000000000"}),
        json!({"proposal_id": "<script>"}),
        json!({"proposal_id": 5}),
        json!({}),
    ] {
        let answer = host.call("browser_proposal_status", &args).await;
        assert_eq!(error_code(&answer), "APPROVAL_REQUIRED", "{args}");
    }
    let answer = host
        .call(
            "browser_proposal_status",
            &json!({"proposal_id": id.as_str(), "run_id": "x"}),
        )
        .await;
    assert_eq!(error_code(&answer), "NOT_AUTHORIZED");
}

#[tokio::test]
async fn propose_tools_are_opt_in_and_defined_for_every_format() {
    let host = host();
    let context = host.tools.context().clone();
    let mut tools = Toolset::new(context);
    assert!(tools.definitions().is_empty());
    assert!(
        tools
            .call("browser_propose", &proposal_call())
            .await
            .is_err()
    );
    tools.enable_propose();
    let names: Vec<String> = tools.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["browser_propose", "browser_proposal_status"]);
    tools.enable_act();
    let names: Vec<String> = tools.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(
        names,
        ["browser_act", "browser_propose", "browser_proposal_status"]
    );
    tools.disable_propose();
    assert!(
        tools
            .call("browser_proposal_status", &json!({}))
            .await
            .is_err()
    );

    for format in [
        ToolFormat::JsonSchema,
        ToolFormat::OpenAiStrict,
        ToolFormat::AnthropicStrict,
    ] {
        let [propose, status] =
            Propose::new(host.tools.context().clone()).tool_definitions_for(format);
        let schema = &propose.parameters;
        assert_eq!(schema["additionalProperties"], false);
        let properties: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        let mut expected = PROPOSAL_ARGUMENT_NAMES.to_vec();
        expected.sort_unstable();
        let mut got: Vec<&str> = properties.iter().map(|s| s.as_str()).collect();
        got.sort_unstable();
        assert_eq!(got, expected);
        assert!(
            !schema["required"]
                .as_array()
                .unwrap()
                .contains(&json!("approval_id"))
        );
        assert_eq!(status.parameters["required"], json!(["proposal_id"]));
        assert_eq!(status.parameters["additionalProperties"], false);
    }
}

/// A backend with one page that snapshots it.
#[derive(Clone)]
struct OnePage;

/// The page with the proposed target bound, as a live backend's snapshot
/// binds it.
fn the_page() -> PageBinding {
    PageBinding::new("session", "tab", "rev-1").with_element(
        ElementIdentity::new(
            "link",
            "Docs",
            "a",
            "Docs",
            BTreeMap::new(),
            vec![FrameIdentity::new("https://docs.example.com", "rev-1")],
        )
        .unwrap(),
    )
}

#[async_trait]
impl Backend for OnePage {
    async fn perform(&self, _: &ActionRequest) -> Result<(), BackendError> {
        Err(BackendError::not_dispatched(
            "unbound grants are not performed here",
        ))
    }
    async fn current_page(&self) -> Result<Option<PageBinding>, BackendError> {
        Ok(Some(the_page()))
    }
    async fn snapshot(
        &self,
        _: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        if action.selector() == "#broken" {
            return Err(BackendError::not_dispatched("the tab is gone"));
        }
        Ok(Some(PageSnapshot {
            page: the_page(),
            screenshot_png: Some(b"\x89PNG\r\n\x1a\npixels".to_vec()),
            target_found: true,
        }))
    }
    async fn perform_on_page(
        &self,
        _: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        assert_eq!(*page, the_page());
        Ok(())
    }
}

#[tokio::test]
async fn a_live_backend_binds_the_proposal_and_its_grant_to_the_observed_page() {
    let store = Arc::new(InMemoryApprovalStore::new());
    let clock = ManualClock::new(START);
    let context = context_for(
        store.clone(),
        OnePage,
        &clock,
        Arc::new(InMemoryOperationStore::new()),
        "run",
    );
    let tools = Toolset::new(context).with_act().with_propose();
    let answer = tools
        .call("browser_propose", &proposal_call())
        .await
        .unwrap();
    let id = ProposalId::parse(answer["proposal_id"].as_str().unwrap()).unwrap();
    let stored = store.get_proposal(&id).await.unwrap().unwrap();
    let snapshot = stored.proposal.snapshot.clone().unwrap();
    assert_eq!(snapshot.page, the_page());
    assert_eq!(
        snapshot.screenshot_png.as_deref(),
        Some(&b"\x89PNG\r\n\x1a\npixels"[..])
    );
    let now = clock.now();
    let grant = stored
        .proposal
        .grant(Duration::from_secs(60), now, None)
        .unwrap();
    assert_eq!(grant.page(), Some(the_page()));
    let approval_id = grant.id.clone();
    assert_eq!(
        store.approve_proposal(&id, grant, now).await.unwrap(),
        DecisionOutcome::Approved
    );
    let act = tools
        .call(
            "browser_act",
            &call_for(URL, approval_id.as_str(), &click()),
        )
        .await
        .unwrap();
    assert_eq!(act["status"], "ok", "{act}");

    let broken = tools
        .call(
            "browser_propose",
            &json!({"url": URL, "method": "click", "selector": "#broken"}),
        )
        .await
        .unwrap();
    assert_eq!(error_code(&broken), "BACKEND_FAILED");
    assert_eq!(
        broken["error"]["message"],
        "the page could not be observed; nothing was proposed: the tab is gone"
    );
}

#[test]
fn the_proposal_ttl_is_checked_when_the_context_is_built() {
    for ttl in [Duration::ZERO, Duration::from_secs(24 * 3600 + 1)] {
        let error = Context::builder()
            .actor_id(ActorId::new("actor").unwrap())
            .run_id(RunId::new("run").unwrap())
            .backend(FakeBackend::new())
            .source_policy(policy())
            .operation_store(InMemoryOperationStore::new())
            .proposal_ttl(ttl)
            .build()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "context proposal ttl must be more than 0 and at most 24 hours"
        );
    }
}
