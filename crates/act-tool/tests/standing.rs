#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Standing grants through the tools: a person's "up to N times" approves
//! later proposals of the same scope at once, each act takes one use in
//! the store, and nothing outside the scope, past N, after a revoke or a
//! stop is ever performed.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{ElementPage, START, URL, call_for, policy};
use countersign_act_tool::approval::{
    ActorId, ApprovalStore, Approver, ApproverId, ElementIdentity, FrameIdentity, ManualClock,
    OperationLog, OutcomeCode, ProposalId, ProposalStore, RunId, StandingId, WriteAccess,
    approve_standing,
};
use countersign_act_tool::{Context, Toolset};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};

fn button(name: &str) -> ElementIdentity {
    ElementIdentity::new(
        "button",
        name,
        "button",
        name,
        BTreeMap::new(),
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

fn actor() -> ActorId {
    ActorId::new("actor").unwrap()
}

fn run() -> RunId {
    RunId::new("run").unwrap()
}

fn host() -> Host {
    host_with(policy())
}

fn host_with(source_policy: countersign_act_tool::policy::Policy) -> Host {
    let store = Arc::new(InMemoryApprovalStore::new());
    host_on(store.clone(), store, source_policy)
}

/// A host whose tools use `used` as their store; `store` is the same
/// records, for the person's approvals and for reading them back.
fn host_on(
    store: Arc<InMemoryApprovalStore>,
    used: Arc<dyn ProposalStore>,
    source_policy: countersign_act_tool::policy::Policy,
) -> Host {
    let operations = Arc::new(InMemoryOperationStore::new());
    let page = ElementPage::showing(Some(button("Next page")));
    let context = Context::builder()
        .actor_id(actor())
        .run_id(run())
        .backend(page.clone())
        .source_policy(source_policy)
        .operation_store(operations.clone())
        .proposal_store(used)
        .clock(ManualClock::new(START))
        .build()
        .unwrap();
    Host {
        store,
        operations,
        tools: Toolset::new(context).with_act().with_propose(),
        page,
    }
}

const CLICK: &str = r#"{"method": "click", "selector": "button#next"}"#;

fn click() -> Value {
    serde_json::from_str(CLICK).unwrap()
}

fn propose_call(url: &str) -> Value {
    json!({"url": url, "method": "click", "selector": "button#next"})
}

impl Host {
    async fn call(&self, name: &str, args: &Value) -> Value {
        self.tools.call(name, args).await.unwrap()
    }

    /// Proposes the click on `url` and, when a person is asked, approves
    /// it "up to `uses` times" as the approval page does.
    async fn propose(&self, url: &str) -> Value {
        self.call("browser_propose", &propose_call(url)).await
    }

    async fn approve_up_to(&self, proposal: &Value, uses: u32) -> StandingId {
        let id = ProposalId::parse(proposal["proposal_id"].as_str().unwrap()).unwrap();
        let approver = Approver {
            id: ApproverId::new("carol").unwrap(),
            approved_at: START,
        };
        let approved = approve_standing(
            self.store.as_ref(),
            &id,
            uses,
            Duration::from_secs(3600),
            Duration::from_secs(300),
            approver,
            START,
        )
        .await
        .unwrap();
        approved.standing.unwrap().id
    }

    async fn approval_id(&self, proposal: &Value) -> String {
        let status = self
            .call(
                "browser_proposal_status",
                &json!({"proposal_id": proposal["proposal_id"]}),
            )
            .await;
        assert_eq!(status["status"], "approved", "{status}");
        status["approval_id"].as_str().unwrap().to_owned()
    }

    async fn act(&self, url: &str, approval_id: &str) -> Value {
        self.call("browser_act", &call_for(url, approval_id, &click()))
            .await
    }

    fn performed(&self) -> usize {
        self.page.performed()
    }

    async fn records(&self) -> Vec<(OutcomeCode, Option<String>, String)> {
        self.operations
            .records_for_run(&run())
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.outcome, r.approver_id.map(|a| a.to_string()), r.reason))
            .collect()
    }
}

#[tokio::test]
async fn up_to_three_times_approves_three_acts_of_the_scope_and_no_fourth() {
    let host = host();
    let first = host.propose(URL).await;
    assert_eq!(first["status"], "pending", "{first}");
    let standing = host.approve_up_to(&first, 3).await;
    let approver = format!("standing:{standing}");
    let first_grant = host.approval_id(&first).await;
    assert_eq!(host.act(URL, &first_grant).await["status"], "ok");

    // Pages of the same path, other queries: approved at once.
    let mut acted = Vec::new();
    for page in ["?page=2", "?page=3"] {
        let url = format!("{URL}{page}");
        let answer = host.propose(&url).await;
        assert_eq!(
            (answer["status"].as_str(), answer["decided_by"].as_str()),
            (Some("approved"), Some("standing")),
            "{answer}"
        );
        let grant = answer["approval_id"].as_str().unwrap().to_owned();
        let done = host.act(&url, &grant).await;
        assert_eq!(
            (done["status"].as_str(), done["decided_by"].as_str()),
            (Some("ok"), Some("standing")),
            "{done}"
        );
        acted.push(grant);
    }
    assert_eq!(host.performed(), 3);
    // A person gave the standing approval: its acts may write, as the
    // person's own first act may.
    assert_eq!(host.page.writes(), vec![WriteAccess::Open; 3]);

    // Spent: a fourth proposal waits for a person.
    let fourth = host.propose(URL).await;
    assert_eq!(fourth["status"], "pending", "{fourth}");

    let records = host.records().await;
    let expected: Vec<(OutcomeCode, Option<String>, String)> = [2, 1, 0]
        .iter()
        .map(|left| {
            let uses = if *left == 1 { "use" } else { "uses" };
            (
                OutcomeCode::Ok,
                Some(approver.clone()),
                format!("standing grant `{standing}`: {left} {uses} left"),
            )
        })
        .collect();
    assert_eq!(records, expected);
}

#[tokio::test]
async fn grants_approved_beyond_the_uses_left_are_refused_at_the_act() {
    let host = host();
    let first = host.propose(URL).await;
    host.approve_up_to(&first, 2).await;
    // Two more proposals while one use is left: both are approved (uses
    // are taken by acts, not by proposals) ...
    let second = host.propose(URL).await;
    let third = host.propose(URL).await;
    for answer in [&second, &third] {
        assert_eq!(answer["decided_by"], "standing", "{answer}");
    }
    let grants = [
        host.approval_id(&first).await,
        second["approval_id"].as_str().unwrap().to_owned(),
        third["approval_id"].as_str().unwrap().to_owned(),
    ];
    // ... but only two acts happen.
    let answers = [
        host.act(URL, &grants[0]).await,
        host.act(URL, &grants[1]).await,
        host.act(URL, &grants[2]).await,
    ];
    assert_eq!(answers[0]["status"], "ok");
    assert_eq!(answers[1]["status"], "ok");
    assert_eq!(
        answers[2]["error"]["code"], "APPROVAL_STALE",
        "{}",
        answers[2]
    );
    assert_eq!(
        answers[2]["error"]["message"],
        "the standing approval has no uses left; nothing was performed"
    );
    assert_eq!(host.performed(), 2);
    // The refused act gave its grant back: still unused in the store.
    let grant = host
        .store
        .get(&countersign_act_tool::approval::ApprovalId::parse(&grants[2]).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        grant.state,
        countersign_act_tool::approval::GrantState::Active
    );
}

/// An approval given on `https://H/` covers the pages of that origin only:
/// never `http://H/` (port 80), nor another port of the same scheme. A
/// default port written out is the same origin.
#[tokio::test]
async fn another_scheme_or_port_is_never_covered() {
    let policy = countersign_act_tool::policy::Policy::builder()
        .allow_host("docs.example.com")
        .allow_schemes(["https", "http"])
        .resolver(
            countersign_act_tool::policy::StaticResolver::new()
                .with_host("docs.example.com", ["93.184.216.34".parse().unwrap()]),
        )
        .build()
        .unwrap();
    let host = host_with(policy);
    let first = host.propose("https://docs.example.com/results").await;
    host.approve_up_to(&first, 100).await;
    for other in [
        "http://docs.example.com/results",
        "http://docs.example.com:443/results",
        "https://docs.example.com:8443/results",
    ] {
        let answer = host.propose(other).await;
        assert_eq!(answer["status"], "pending", "{other}: {answer}");
    }
    let same = host.propose("https://docs.example.com:443/results").await;
    assert_eq!(same["decided_by"], "standing", "{same}");
}

#[tokio::test]
async fn another_element_name_path_or_method_is_never_covered() {
    let host = host();
    let first = host.propose(URL).await;
    host.approve_up_to(&first, 100).await;
    // Another accessible name on the same page.
    host.page.show(Some(button("Pay now")));
    assert_eq!(host.propose(URL).await["status"], "pending");
    // Another path.
    host.page.show(Some(button("Next page")));
    let other_path = "https://docs.example.com/admin";
    assert_eq!(host.propose(other_path).await["status"], "pending");
    // Another method.
    let typed = host
        .call(
            "browser_propose",
            &json!({"url": URL, "method": "type", "selector": "button#next", "arguments": {"text": "x"}}),
        )
        .await;
    assert_ne!(typed["decided_by"], "standing", "{typed}");
    // No element found: never covered.
    host.page.show(None);
    assert_eq!(host.propose(URL).await["status"], "pending");
}

#[tokio::test]
async fn a_changed_element_is_refused_and_gives_the_use_back() {
    let host = host();
    let first = host.propose(URL).await;
    let standing = host.approve_up_to(&first, 2).await;
    let second = host.propose(URL).await;
    let grant = second["approval_id"].as_str().unwrap().to_owned();
    // Between approval and act the element changes its name.
    host.page.show(Some(button("Next page (pay $5)")));
    let answer = host.act(URL, &grant).await;
    assert_eq!(answer["error"]["code"], "APPROVAL_STALE", "{answer}");
    assert_eq!(host.performed(), 0);
    let stored = host.store.get_standing(&standing).await.unwrap().unwrap();
    assert_eq!(stored.remaining(), 2, "{stored:?}");
}

#[tokio::test]
async fn stop_run_and_revoke_end_a_standing_grant_at_once() {
    for end in ["revoke", "stop"] {
        let host = host();
        let first = host.propose(URL).await;
        let standing = host.approve_up_to(&first, 5).await;
        let second = host.propose(URL).await;
        let grant = second["approval_id"].as_str().unwrap().to_owned();
        match end {
            "revoke" => {
                host.store.revoke_standing(&standing).await.unwrap();
            }
            _ => {
                host.store.stop_run(&actor(), &run(), START).await.unwrap();
            }
        }
        let answer = host.act(URL, &grant).await;
        assert_eq!(answer["error"]["code"], "APPROVAL_STALE", "{end}: {answer}");
        assert_eq!(host.performed(), 0, "{end}");
        if end == "revoke" {
            // Later proposals go to a person.
            assert_eq!(host.propose(URL).await["status"], "pending");
        }
    }
}

#[tokio::test]
async fn a_deny_rule_added_mid_run_wins_at_the_next_act() {
    use countersign_act_tool::rules::{Rule, RuleSet};
    let host = host();
    let first = host.propose(URL).await;
    let standing = host.approve_up_to(&first, 5).await;
    let first_grant = host.approval_id(&first).await;
    let second = host.propose(URL).await;
    let second_grant = second["approval_id"].as_str().unwrap().to_owned();
    assert_eq!(host.act(URL, &first_grant).await["status"], "ok");

    // The host adds a deny rule for the button while the run goes on.
    let rules = RuleSet::builder()
        .rule(
            Rule::deny("no-next", "paging is over for today")
                .hosts(["docs.example.com"])
                .names(["^Next page$"]),
        )
        .build()
        .unwrap();
    host.tools.context().replace_rules(Some(Arc::new(rules)));
    let answer = host.act(URL, &second_grant).await;
    assert_eq!(answer["error"]["code"], "NOT_AUTHORIZED", "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "the host's rules refuse this action: paging is over for today"
    );
    assert_eq!(host.performed(), 1);
    // Nothing was consumed: neither the grant nor a use.
    let stored = host.store.get_standing(&standing).await.unwrap().unwrap();
    assert_eq!(stored.remaining(), 4);
    let record = host.records().await.pop().unwrap();
    assert_eq!(
        record,
        (
            OutcomeCode::NotAuthorized,
            None,
            "refused by rule `no-next`: paging is over for today".to_owned()
        )
    );
}

const NAMES: [&str; 4] = ["Next page", "Pay now", "Next", "Delete account"];
const DENY_PATTERNS: [&str; 4] = ["^Next page$", "pay", "^Next$", "delete"];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("COUNTERSIGN_STANDING_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(64)
    ))]

    /// A deny added mid-run wins at the next act, whoever approved the
    /// grant (a person or a standing grant), exactly when it matches the
    /// grant's element; nothing is consumed when it does.
    #[test]
    fn a_deny_added_mid_run_wins_at_the_next_act(
        name in 0..4usize,
        pattern in 0..4usize,
        standing_grant in proptest::prelude::any::<bool>(),
    ) {
        use countersign_act_tool::rules::{Rule, RuleSet};
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let host = host();
            host.page.show(Some(button(NAMES[name])));
            let first = host.propose(URL).await;
            let grant = if standing_grant {
                host.approve_up_to(&first, 3).await;
                let second = host.propose(URL).await;
                second["approval_id"].as_str().unwrap().to_owned()
            } else {
                host.approve_up_to(&first, 1).await;
                host.approval_id(&first).await
            };
            let rules = RuleSet::builder()
                .rule(
                    Rule::deny("late-deny", "stopped for today")
                        .hosts(["docs.example.com"])
                        .names([DENY_PATTERNS[pattern]]),
                )
                .build()
                .unwrap();
            host.tools.context().replace_rules(Some(Arc::new(rules)));
            // Each pattern matches its own name in the tables, and no other.
            let matches = name == pattern;
            let answer = host.act(URL, &grant).await;
            if matches {
                assert_eq!(answer["error"]["code"], "NOT_AUTHORIZED", "{answer}");
                assert_eq!(host.performed(), 0);
                let id = countersign_act_tool::approval::ApprovalId::parse(&grant).unwrap();
                let stored = host.store.get(&id).await.unwrap().unwrap();
                assert_eq!(stored.state, countersign_act_tool::approval::GrantState::Active);
            } else {
                assert_eq!(answer["status"], "ok", "{answer}");
                assert_eq!(host.performed(), 1);
            }
        });
    }
}

/// An agent that retries one act through an outage (each use refused
/// before it reached the records, each given back) keeps the person's
/// standing approval: after 20 refused tries, more than the 16 give-backs
/// a standing grant remembers, the act goes through and the standing
/// grant has used one use of three. (The once-grant each try consumed
/// and gave back is revoked at its 17th give-back, as a grant's contract
/// says; the agent proposes again and the standing approval approves the
/// new proposal at once.)
#[tokio::test]
async fn retrying_one_act_through_an_outage_keeps_the_standing_approval() {
    let store = Arc::new(InMemoryApprovalStore::new());
    let outage = Arc::new(common::FlakyStore::around(
        store.clone(),
        countersign_act_tool::approval::StoreError::unavailable("connection refused"),
    ));
    let host = host_on(store, outage.clone(), policy());
    let first = host.propose(URL).await;
    let standing = host.approve_up_to(&first, 3).await;
    let mut grant = host.approval_id(&first).await;
    outage.refuse_uses(20);
    let mut proposed_again = 0;
    while outage.uses_refused() < 20 {
        let answer = host.act(URL, &grant).await;
        match answer["error"]["code"].as_str() {
            Some("STORE_UNAVAILABLE") => {}
            Some("APPROVAL_STALE") => {
                assert_eq!(answer["error"]["message"], "approval was revoked");
                let again = host.propose(URL).await;
                assert_eq!(again["decided_by"], "standing", "{again}");
                grant = again["approval_id"].as_str().unwrap().to_owned();
                proposed_again += 1;
            }
            _ => panic!("{answer}"),
        }
    }
    assert_eq!(proposed_again, 1);
    assert_eq!(host.performed(), 0);
    let done = host.act(URL, &grant).await;
    assert_eq!(done["status"], "ok", "{done}");
    assert_eq!(host.performed(), 1);
    let read = host.store.get_standing(&standing).await.unwrap().unwrap();
    assert_eq!(
        read.state,
        countersign_act_tool::approval::StandingState::Active
    );
    assert_eq!(read.remaining(), 2);
}
