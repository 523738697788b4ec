//! Random and mutated tool calls: Act never panics, always answers in the
//! documented shape, writes one record per call, and never returns `ok`
//! (nor performs) without an active grant matching the call exactly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Harness, URL, call_for, check_message};
use countersign_act_tool::approval::{Approval, Timestamp};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use serde_json::{Value, json};

const SEARCH: &str = "https://docs.example.com/search";

fn grant_actions() -> [(&'static str, Value); 2] {
    [
        (URL, json!({"method": "click", "selector": "a#docs"})),
        (
            SEARCH,
            json!({"method": "fill", "selector": "input#q", "description": "type the query", "arguments": {"text": "docs", "limit": 5}}),
        ),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,16}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(".{0,8}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn pick(values: Vec<Value>) -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => proptest::sample::select(values),
        1 => arb_json(),
    ]
}

/// One change to a call. `@G0` and `@G1` stand for the grants' ids.
#[derive(Debug, Clone)]
enum Mutation {
    Set(&'static str, Value),
    Remove(&'static str),
    Add(String, Value),
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    let urls = vec![
        json!(URL),
        json!(SEARCH),
        json!("https://docs.example.com"),
        json!("HTTPS://DOCS.EXAMPLE.COM./"),
        json!("https://docs.example.com/other"),
        json!("http://docs.example.com/"),
        json!("https://evil.example.net/"),
        json!("https://internal.example.com/"),
        json!("https://u@docs.example.com/"),
        json!(""),
        json!(7),
    ];
    let ids = vec![
        json!("@G0"),
        json!("@G1"),
        json!("apr_0123456789abcdef0123456789abcdef"),
        json!("apr_!"),
        json!(""),
        json!(1),
        json!(null),
    ];
    let methods = vec![
        json!("click"),
        json!(" CLICK "),
        json!("fill"),
        json!("hover"),
        json!("explode"),
        json!(""),
        json!(1),
    ];
    let selectors = vec![
        json!("a#docs"),
        json!(" a#docs "),
        json!("input#q"),
        json!(""),
        json!("a\u{7f}"),
        json!(null),
    ];
    let descriptions = vec![
        json!(null),
        json!(""),
        json!("type the query"),
        json!("click a#docs"),
        json!("other"),
        json!(5),
    ];
    let arguments = vec![
        json!(null),
        json!({}),
        json!({"text": "docs", "limit": 5}),
        json!({"text": "docs", "limit": "5"}),
        json!({"text": "docs"}),
        json!({"text": ["docs"]}),
        json!({"bad key": "x"}),
        json!([]),
    ];
    prop_oneof![
        pick(urls).prop_map(|v| Mutation::Set("url", v)),
        pick(ids).prop_map(|v| Mutation::Set("approval_id", v)),
        pick(methods).prop_map(|v| Mutation::Set("method", v)),
        pick(selectors).prop_map(|v| Mutation::Set("selector", v)),
        pick(descriptions).prop_map(|v| Mutation::Set("description", v)),
        pick(arguments).prop_map(|v| Mutation::Set("arguments", v)),
        proptest::sample::select(vec![
            "url",
            "approval_id",
            "method",
            "selector",
            "description",
            "arguments"
        ])
        .prop_map(Mutation::Remove),
        (
            prop_oneof![
                Just("actor_id".to_owned()),
                Just("run_id".to_owned()),
                "[a-z_]{1,10}"
            ],
            arb_json()
        )
            .prop_map(|(k, v)| Mutation::Add(k, v)),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    /// The valid call for grant `usize`, then the mutations.
    Call(usize, Vec<Mutation>),
    /// A call with arbitrary JSON arguments.
    Raw(Value),
    Advance(u64),
    Revoke(usize),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..2usize, vec(arb_mutation(), 0..4)).prop_map(|(g, m)| Step::Call(g, m)),
        2 => arb_json().prop_map(Step::Raw),
        1 => (0..90u64).prop_map(Step::Advance),
        1 => (0..2usize).prop_map(Step::Revoke),
    ]
}

fn substitute(value: &mut Value, ids: &[String]) {
    match value {
        Value::String(s) if s == "@G0" => *s = ids[0].clone(),
        Value::String(s) if s == "@G1" => *s = ids[1].clone(),
        Value::Array(items) => items.iter_mut().for_each(|v| substitute(v, ids)),
        Value::Object(map) => map.values_mut().for_each(|v| substitute(v, ids)),
        _ => {}
    }
}

fn build_call(base: &Value, mutations: &[Mutation], ids: &[String]) -> Value {
    let mut call = base.clone();
    for m in mutations {
        let object = call.as_object_mut().unwrap();
        match m {
            Mutation::Set(k, v) => {
                object.insert((*k).to_owned(), v.clone());
            }
            Mutation::Remove(k) => {
                object.remove(*k);
            }
            Mutation::Add(k, v) => {
                object.insert(k.clone(), v.clone());
            }
        }
    }
    substitute(&mut call, ids);
    call
}

struct Model {
    grants: Vec<Approval>,
    used: BTreeSet<usize>,
    revoked: BTreeSet<usize>,
}

impl Model {
    fn active(&self, g: usize, now: Timestamp) -> bool {
        !self.used.contains(&g) && !self.revoked.contains(&g) && now < self.grants[g].expires_at
    }
}

fn check_shape(result: &Value) {
    let op = result["operation_id"].as_str().unwrap();
    assert!(op.starts_with("op_") && op.len() == 35);
    match result["status"].as_str().unwrap() {
        "ok" => {
            assert_eq!(result.as_object().unwrap().len(), 4);
        }
        "error" => {
            assert_eq!(result.as_object().unwrap().len(), 3);
            let code = result["error"]["code"].as_str().unwrap();
            assert!(
                [
                    "APPROVAL_REQUIRED",
                    "APPROVAL_STALE",
                    "NOT_AUTHORIZED",
                    "STORE_UNAVAILABLE",
                    "BACKEND_FAILED"
                ]
                .contains(&code),
                "{code}"
            );
            check_message(result["error"]["message"].as_str().unwrap());
        }
        other => panic!("status {other}"),
    }
}

fn run_steps(steps: Vec<Step>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let h = Harness::new();
        let actions = grant_actions();
        let mut model = Model {
            grants: Vec::new(),
            used: BTreeSet::new(),
            revoked: BTreeSet::new(),
        };
        for (url, action) in &actions {
            model.grants.push(h.grant(url, action).await);
        }
        let ids: Vec<String> = model.grants.iter().map(|g| g.id.to_string()).collect();
        let mut calls = 0;
        let mut oks = 0;
        for step in steps {
            let (call, exact) = match step {
                Step::Advance(secs) => {
                    h.clock.advance(Duration::from_secs(secs));
                    continue;
                }
                Step::Revoke(g) => {
                    h.store().revoke(&model.grants[g].id).await.unwrap();
                    if !model.used.contains(&g) {
                        model.revoked.insert(g);
                    }
                    continue;
                }
                Step::Raw(value) => (value, None),
                Step::Call(g, mutations) => {
                    let (url, action) = &actions[g];
                    let base = call_for(url, &ids[g], action);
                    let exact = mutations.is_empty().then_some(g);
                    (build_call(&base, &mutations, &ids), exact)
                }
            };
            let now = h.context.now();
            let result = h.run(&call).await;
            calls += 1;
            check_shape(&result);
            if result["status"] == "ok" {
                oks += 1;
                let id = result["locator"]["approval_id"].as_str().unwrap();
                let g = ids
                    .iter()
                    .position(|i| i == id)
                    .expect("ok names an issued grant");
                assert!(model.active(g, now), "ok without an active grant: {call}");
                let grant = &model.grants[g];
                assert_eq!(result["locator"]["url"], grant.url.as_str());
                assert_eq!(result["action"].to_string(), grant.action.canonical_json());
                assert_eq!(call["approval_id"], id);
                for key in call.as_object().unwrap().keys() {
                    assert!(countersign_act_tool::ARGUMENT_NAMES.contains(&key.as_str()));
                }
                model.used.insert(g);
            } else if let Some(g) = exact {
                assert!(
                    !model.active(g, now),
                    "the exact call for an active grant was refused: {result}"
                );
            }
            assert_eq!(
                h.backend.len(),
                oks,
                "every ok performed once, nothing else did"
            );
            assert_eq!(h.records().len(), calls, "one record per call");
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_and_mutated_calls_never_act_without_a_matching_grant(steps in vec(arb_step(), 1..12)) {
        run_steps(steps);
    }
}
