#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Rules decide proposals on the element the snapshot bound: `auto` is the
//! ordinary single-use grant approved by `rule:<id>`, `person` is today's
//! pending proposal, `deny` refuses; the policy is checked first and a
//! target not found is never `auto`.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{ElementPage, START, URL, call_for, check_message, policy};
use countersign_act_tool::approval::{
    ActorId, AllowedWrite, ApprovalStore, ElementIdentity, FrameIdentity, ManualClock,
    OperationLog, OutcomeCode, ProposalStore, RunId, WriteAccess,
};
use countersign_act_tool::rules::{Rule, RuleSet};
use countersign_act_tool::{Context, Toolset};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};

fn link(name: &str, href: &str) -> ElementIdentity {
    ElementIdentity::new(
        "link",
        name,
        "a",
        name,
        BTreeMap::from([("href".to_owned(), href.to_owned())]),
        vec![FrameIdentity::new("https://docs.example.com", "rev-1")],
    )
    .unwrap()
}

struct Host {
    store: Arc<InMemoryApprovalStore>,
    operations: Arc<InMemoryOperationStore>,
    tools: Toolset,
    page: ElementPage,
}

fn rules() -> RuleSet {
    RuleSet::builder()
        .rule(
            Rule::deny(
                "no-internal-links",
                "the agent stays off the internal pages",
            )
            .hosts(["docs.example.com"])
            .link_hosts(["internal.example.com"]),
        )
        .default_pack(["docs.example.com"])
        .allow_write(AllowedWrite::new("POST", "https://docs.example.com/graphql").unwrap())
        .build()
        .unwrap()
}

fn host(element: Option<ElementIdentity>) -> Host {
    let store = Arc::new(InMemoryApprovalStore::new());
    let operations = Arc::new(InMemoryOperationStore::new());
    let page = ElementPage::showing(element);
    let context = Context::builder()
        .actor_id(ActorId::new("actor").unwrap())
        .run_id(RunId::new("run").unwrap())
        .backend(page.clone())
        .source_policy(policy())
        .operation_store(operations.clone())
        .proposal_store(store.clone())
        .clock(ManualClock::new(START))
        .rules(rules())
        .build()
        .unwrap();
    Host {
        store,
        operations,
        tools: Toolset::new(context).with_act().with_propose(),
        page,
    }
}

fn click_call(url: &str) -> Value {
    json!({"url": url, "method": "click", "selector": "a#next"})
}

impl Host {
    async fn call(&self, name: &str, args: &Value) -> Value {
        self.tools.call(name, args).await.unwrap()
    }
    async fn records(&self) -> Vec<(OutcomeCode, Option<String>, String)> {
        self.operations
            .records_for_run(&RunId::new("run").unwrap())
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.outcome, r.approver_id.map(|a| a.to_string()), r.reason))
            .collect()
    }
    async fn pending(&self) -> usize {
        self.store
            .pending_proposals(
                &ActorId::new("actor").unwrap(),
                &RunId::new("run").unwrap(),
                START,
            )
            .await
            .unwrap()
            .len()
    }
}

#[tokio::test]
async fn an_auto_rule_approves_at_once_with_an_ordinary_single_use_grant() {
    let host = host(Some(link("Next", "https://docs.example.com/guide/2")));
    let answer = host.call("browser_propose", &click_call(URL)).await;
    assert_eq!(answer["status"], "approved", "{answer}");
    assert_eq!(answer["decided_by"], "rule");
    let approval_id = answer["approval_id"].as_str().unwrap().to_owned();
    assert_eq!(host.pending().await, 0);
    // The grant is bound to the page and element and names the rule.
    let grant = host
        .store
        .get(&countersign_act_tool::approval::ApprovalId::parse(&approval_id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        grant.approval.approver.as_ref().map(|a| a.id.as_str()),
        Some("rule:default.same-host-link")
    );
    assert!(grant.approval.element.is_some());
    let status = host
        .call(
            "browser_proposal_status",
            &json!({"proposal_id": answer["proposal_id"]}),
        )
        .await;
    assert_eq!(
        (status["status"].as_str(), status["decided_by"].as_str()),
        (Some("approved"), Some("rule"))
    );
    // The model is never told which rule.
    assert!(!answer.to_string().contains("same-host-link"), "{answer}");

    let act = call_for(
        URL,
        &approval_id,
        &json!({"method": "click", "selector": "a#next"}),
    );
    let done = host.call("browser_act", &act).await;
    assert_eq!(
        (done["status"].as_str(), done["decided_by"].as_str()),
        (Some("ok"), Some("rule")),
        "{done}"
    );
    // The model learns what the page tried to write, never the query.
    assert_eq!(
        done["refused_writes"],
        json!(["POST https://docs.example.com/pay"])
    );
    let again = host.call("browser_act", &act).await;
    assert_eq!(again["error"]["code"], "APPROVAL_STALE", "{again}");
    assert_eq!(host.page.performed(), 1);
    // Performed read-only, with the host's allowed writes and no other.
    assert_eq!(
        host.page.writes(),
        [WriteAccess::ReadOnly {
            allowed: vec![AllowedWrite::new("POST", "https://docs.example.com/graphql").unwrap()]
        }]
    );
    let rule = Some("rule:default.same-host-link".to_owned());
    // The act that used the rule's grant names the rule; the replay none.
    let records = host.records().await;
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(
        (records[0].0, records[0].1.clone()),
        (OutcomeCode::Ok, rule)
    );
    // Its record lists what read-only mode refused, without the query.
    assert_eq!(
        records[0].2,
        "read-only mode refused 1 write: POST https://docs.example.com/pay (XHR)"
    );
    assert_eq!(
        (records[1].0, records[1].1.clone()),
        (OutcomeCode::ApprovalStale, None)
    );
}

#[tokio::test]
async fn a_person_rule_or_no_rule_leaves_the_proposal_pending() {
    for element in [
        link("Delete account", "https://docs.example.com/account/delete"),
        link("Docs", "https://elsewhere.example/"),
    ] {
        let host = host(Some(element));
        let answer = host.call("browser_propose", &click_call(URL)).await;
        assert_eq!(answer["status"], "pending", "{answer}");
        assert!(answer.get("decided_by").is_none() && answer.get("approval_id").is_none());
        assert_eq!(host.pending().await, 1);
        assert!(host.records().await.is_empty());
    }
}

#[tokio::test]
async fn a_target_not_found_is_never_auto() {
    let host = host(None);
    let answer = host.call("browser_propose", &click_call(URL)).await;
    assert_eq!(answer["status"], "pending", "{answer}");
    assert_eq!(host.pending().await, 1);
}

#[tokio::test]
async fn a_deny_rule_refuses_with_its_reason_and_records_its_id() {
    let host = host(Some(link("Next", "https://internal.example.com/admin")));
    let answer = host.call("browser_propose", &click_call(URL)).await;
    assert_eq!(answer["error"]["code"], "NOT_AUTHORIZED", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    check_message(message);
    assert_eq!(
        message,
        "the host's rules refuse this action: the agent stays off the internal pages"
    );
    assert_eq!(host.pending().await, 0);
    assert_eq!(
        host.records().await,
        [(
            OutcomeCode::NotAuthorized,
            None,
            "browser_propose: refused by rule `no-internal-links`: the agent stays off the internal pages".to_owned()
        )]
    );
    assert_eq!(host.page.performed(), 0);
}

#[tokio::test]
async fn the_policy_is_checked_before_any_rule() {
    // The pack's auto rule names a host the policy refuses: the policy wins.
    let store = Arc::new(InMemoryApprovalStore::new());
    let operations = Arc::new(InMemoryOperationStore::new());
    let context = Context::builder()
        .actor_id(ActorId::new("actor").unwrap())
        .run_id(RunId::new("run").unwrap())
        .backend(ElementPage::showing(Some(link(
            "Next",
            "https://evil.example/2",
        ))))
        .source_policy(policy())
        .operation_store(operations.clone())
        .proposal_store(store.clone())
        .rules(RuleSet::builder().default_pack(["*"]).build().unwrap())
        .build()
        .unwrap();
    let tools = Toolset::new(context).with_propose();
    let answer = tools
        .call("browser_propose", &click_call("https://evil.example/"))
        .await
        .unwrap();
    assert_eq!(answer["error"]["code"], "NOT_AUTHORIZED", "{answer}");
    assert!(
        !answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rules")
    );
}

#[tokio::test]
async fn an_auto_rule_approves_on_the_system_clock_too() {
    // The proposal and its grant are stamped by a clock that moves: the
    // grant is approved no earlier than the proposal was made.
    let store = Arc::new(InMemoryApprovalStore::new());
    let context = Context::builder()
        .actor_id(ActorId::new("actor").unwrap())
        .run_id(RunId::new("run").unwrap())
        .backend(ElementPage::showing(Some(link(
            "Next",
            "https://docs.example.com/guide/2",
        ))))
        .source_policy(policy())
        .operation_store(InMemoryOperationStore::new())
        .proposal_store(store)
        .rules(rules())
        .build()
        .unwrap();
    let tools = Toolset::new(context).with_act().with_propose();
    for _ in 0..20 {
        let answer = tools
            .call("browser_propose", &click_call(URL))
            .await
            .unwrap();
        assert_eq!(answer["status"], "approved", "{answer}");
        let act = call_for(
            URL,
            answer["approval_id"].as_str().unwrap(),
            &json!({"method": "click", "selector": "a#next"}),
        );
        assert_eq!(
            tools.call("browser_act", &act).await.unwrap()["status"],
            "ok"
        );
    }
}

#[tokio::test]
async fn no_picture_is_taken_for_a_decision_no_person_will_see() {
    let host = host(Some(link("Next", "https://docs.example.com/guide/2")));
    let answer = host.call("browser_propose", &click_call(URL)).await;
    assert_eq!(answer["decided_by"], "rule", "{answer}");
    assert_eq!(host.page.looks(), (0, 1), "bound once, no picture");

    // A person decides: the page is bound again with the picture, which
    // the proposal keeps.
    let host = host_with_link_to_another_host();
    let answer = host.call("browser_propose", &click_call(URL)).await;
    assert_eq!(answer["status"], "pending", "{answer}");
    assert_eq!(host.page.looks(), (1, 1));
    let id =
        countersign_act_tool::approval::ProposalId::parse(answer["proposal_id"].as_str().unwrap())
            .unwrap();
    let stored = host.store.get_proposal(&id).await.unwrap().unwrap();
    assert!(stored.proposal.snapshot.unwrap().screenshot_png.is_some());
}

/// A host whose page shows a link to another host, which no rule decides.
fn host_with_link_to_another_host() -> Host {
    host(Some(link("Elsewhere", "https://other.example.net/")))
}
