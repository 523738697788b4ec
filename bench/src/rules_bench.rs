//! Rules: a 100-rule set decided on one element identity against a bare
//! `regex::RegexSet` match of the same name patterns, and a
//! `browser_propose` a rule approves against today's pending one.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use countersign_act_tool::rules::{ProposedTarget, Rule, RuleSet, Tier};
use countersign_act_tool::{Context, Propose};
use countersign_approval_core::{ActorId, Backend, ElementIdentity, FrameIdentity, RunId};
use countersign_backend_fake::{FakeBackend, FakeElement, FakePage, FakeSite};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use regex::RegexSetBuilder;

use crate::harness::{Budget, Row, Target, compare, time};
use crate::policy_bench::policy;

const URL: &str = "https://docs.example.com/guide/getting-started?lang=en#install";
/// Rules in the measured set: the default pack and host rules up to this.
const RULES: usize = 100;

/// The name pattern of host rule `i`, when it has one: the one source for
/// the rule and for the bare baseline's list.
fn host_name_pattern(i: usize) -> Option<String> {
    match i % 3 {
        1 => Some(format!(r"\b(refund|wire|export)\s*#?{i}\b")),
        2 => Some(format!(r"^chapter {i}$")),
        _ => None,
    }
}

/// The host's rules of the measured set: deny, person and auto rules on
/// hosts, roles and names that the measured element does not match, so
/// that every rule is looked at (no deny stops the scan early).
fn host_rules(count: usize) -> Vec<Rule> {
    (0..count)
        .map(|i| {
            let id = format!("host-{i}");
            match (i % 3, host_name_pattern(i)) {
                (1, Some(name)) => Rule::person(id, "asks")
                    .names([name])
                    .roles(["button", "link"]),
                (2, Some(name)) => Rule::auto(id, "reads")
                    .hosts(["docs.example.com"])
                    .roles(["link"])
                    .names([name]),
                _ => Rule::deny(id, "never")
                    .hosts([format!("admin{i}.example.com")])
                    .methods(["click"]),
            }
        })
        .collect()
}

/// Every name pattern of the measured set, in the set's order: the host
/// rules' then the pack's.
fn name_patterns(host_rules: usize) -> Vec<String> {
    let host = (0..host_rules).filter_map(host_name_pattern);
    let pack = countersign_act_tool::rules::DEFAULT_PACK
        .iter()
        .flat_map(|entry| entry.names.into_iter().flatten().map(|p| (*p).to_owned()));
    host.chain(pack).collect()
}

/// The 100-rule decision against the bare `RegexSet` match.
pub fn decide(budget: Budget) -> Result<Row, String> {
    let pack = countersign_act_tool::rules::DEFAULT_PACK.len();
    let rules = RuleSet::builder()
        .rules(host_rules(RULES - pack))
        .default_pack(["docs.example.com"])
        .build()
        .map_err(|e| e.to_string())?;
    let patterns = name_patterns(RULES - pack);
    let bare = RegexSetBuilder::new(&patterns)
        .case_insensitive(true)
        .build()
        .map_err(|e| e.to_string())?;
    let policy = policy()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    let url = rt
        .block_on(policy.authorize_destination(URL))
        .map_err(|e| e.to_string())?;
    let action = policy
        .authorize_action(&serde_json::json!({"method": "click", "selector": "a#install"}))
        .map_err(|e| e.to_string())?;
    let element = ElementIdentity::new(
        "link",
        "Installing on Linux",
        "a",
        "Installing on Linux",
        BTreeMap::from([(
            "href".to_owned(),
            "https://docs.example.com/guide/install/linux".to_owned(),
        )]),
        vec![FrameIdentity::new("https://docs.example.com", "D0C")],
    )
    .map_err(|e| e.to_string())?;
    let target = ProposedTarget {
        url: &url,
        action: &action,
        element: Some(&element),
    };
    let decided = rules.decide(target);
    if decided.tier != Tier::Auto || decided.rule.map(Rule::id) != Some("default.same-host-link") {
        return Err(format!("the measured element was decided {decided:?}"));
    }
    let (subject, baseline) = compare(
        budget,
        |n| {
            time(|| {
                for _ in 0..n {
                    black_box(bare.matches(black_box(element.name())).matched_any());
                }
            })
        },
        |n| {
            time(|| {
                for _ in 0..n {
                    black_box(rules.decide(black_box(target)).tier);
                }
            })
        },
    );
    Ok(Row {
        name: format!(
            "rules: RuleSet::decide, {RULES} rules (the default pack and host rules) on one element identity"
        ),
        baseline_name: format!(
            "regex::RegexSet::matches of the same {} name patterns on its name",
            patterns.len()
        ),
        note: format!(
            "p50 {:.2} µs per decision (target at most 10 µs); every rule looked at, no deny ends the scan",
            subject.median_ns / 1000.0
        ),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.5),
    })
}

/// The `browser_propose` call of the propose benches: the "Next page"
/// button of [`docs_propose_tools`]'s page.
pub(crate) fn docs_next_call() -> serde_json::Value {
    serde_json::json!({"url": "https://docs.example.com/", "method": "click", "selector": "button#next"})
}

/// Propose tools on the fake backend, already on a docs page with one
/// button ("Next page"), proposing into `store`, decided by `rules` when
/// given.
pub(crate) fn docs_propose_tools(
    rt: &tokio::runtime::Runtime,
    store: std::sync::Arc<InMemoryApprovalStore>,
    rules: Option<RuleSet>,
) -> Result<Propose, String> {
    let home = rt
        .block_on(policy()?.authorize_destination("https://docs.example.com/"))
        .map_err(|e| e.to_string())?;
    let backend = FakeBackend::with_site(
        FakeSite::new().page(
            "https://docs.example.com/",
            FakePage::new("docs").element(
                FakeElement::new("button", "Next page")
                    .selector("button#next")
                    .tag("button"),
            ),
        ),
    );
    rt.block_on(backend.navigate(&home))
        .map_err(|e| e.to_string())?;
    let mut context = Context::builder()
        .actor_id(ActorId::new("bench-actor").map_err(|e| e.to_string())?)
        .run_id(RunId::new("bench-run").map_err(|e| e.to_string())?)
        .backend(backend)
        .source_policy(policy()?)
        .operation_store(InMemoryOperationStore::new())
        .proposal_store(store);
    if let Some(rules) = rules {
        context = context.rules(rules);
    }
    Ok(Propose::new(context.build().map_err(|e| e.to_string())?))
}

/// A `browser_propose` the default pack approves (`auto`) against the same
/// proposal left pending (no rules), memory store, fake backend.
pub fn propose(budget: Budget) -> Result<Row, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    let tools = |rules: Option<RuleSet>| {
        docs_propose_tools(
            &rt,
            std::sync::Arc::new(InMemoryApprovalStore::new()),
            rules,
        )
    };
    let pending = tools(None)?;
    let auto = tools(Some(
        RuleSet::builder()
            .default_pack(["docs.example.com"])
            .build()
            .map_err(|e| e.to_string())?,
    ))?;
    let call = docs_next_call();
    for (tools, expected) in [(&pending, "pending"), (&auto, "approved")] {
        let answer = rt.block_on(tools.propose(&call)).to_json();
        if answer["status"] != expected {
            return Err(format!(
                "the bench's proposal answered {answer}, expected {expected}"
            ));
        }
    }
    let run = |tools: &Propose, n: u64| {
        rt.block_on(async {
            let start = Instant::now();
            for _ in 0..n {
                black_box(tools.propose(black_box(&call)).await);
            }
            start.elapsed()
        })
    };
    let (subject, baseline) = compare(budget, |n| run(&pending, n), |n| run(&auto, n));
    Ok(Row {
        name: "act: browser_propose decided auto by the default pack (memory store, fake backend)".into(),
        baseline_name: "the same browser_propose left pending, no rules".into(),
        note: "auto adds the rules' decision, building the rule's grant and approving the proposal with it in the store".into(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.2),
    })
}
