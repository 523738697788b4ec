//! Calls nested far deeper than any valid call are refused before any
//! recursive work: a host can build such a value without serde_json's
//! 128-level parse limit, and cloning or judging it recursively would
//! overflow the stack and abort the process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Harness, URL, call_for, click};
use countersign_act_tool::{ActCall, MAX_CALL_NESTING};
use serde_json::{Value, json};

const DEEP: usize = 20_000;

/// `levels` arrays, one inside the other, around a string; built without
/// the parser.
fn nested(levels: usize) -> Value {
    let mut value = json!("x");
    for _ in 0..levels {
        value = Value::Array(vec![value]);
    }
    value
}

/// Drops a value without recursion (serde_json's own drop recurses).
fn take_apart(value: Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// `{"k": value}`, built without `json!` (which would serialise `value`
/// recursively).
fn in_arguments(value: Value) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("k".to_owned(), value);
    Value::Object(map)
}

const MESSAGE: &str = "call is nested more than 8 levels deep";

#[tokio::test]
async fn a_deeply_nested_json_call_is_refused_before_any_recursive_work() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    for field in ["arguments", "description", "method", "selector"] {
        let mut call = call_for(URL, grant.id.as_str(), &click());
        call[field] = if field == "arguments" {
            in_arguments(nested(DEEP))
        } else {
            nested(DEEP)
        };
        let result = h.expect_refused(&call, "NOT_AUTHORIZED").await;
        assert_eq!(result["error"]["message"], MESSAGE, "{field}");
        let record = h.last_record();
        assert_eq!(record.reason, MESSAGE);
        assert_eq!(record.url, None);
        take_apart(call);
    }
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn a_deeply_nested_typed_call_is_refused_and_dropped_safely() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    let call =
        ActCall::new(URL, grant.id.as_str(), "click", "a#docs").with_argument("k", nested(DEEP));
    let result = h.act.execute(call).await;
    assert_eq!(result.code().as_str(), "NOT_AUTHORIZED");
    assert_eq!(result.error().unwrap().message, MESSAGE);
    assert_eq!(h.records().len(), 1);
    assert!(h.backend.is_empty());
}

#[tokio::test]
async fn the_limit_is_exact() {
    assert_eq!(MAX_CALL_NESTING, 8);
    let h = Harness::new();
    let grant = h.grant_click().await;
    // The call is level 1, `arguments` level 2, its value level 3: 6 more
    // arrays reach level 8, which the nesting check lets through to the
    // policy (which refuses an array value); 7 more is refused as nested.
    for (levels, message) in [
        (
            6,
            "action is invalid: argument `k` must be a string, number or boolean",
        ),
        (7, MESSAGE),
    ] {
        let mut call = call_for(URL, grant.id.as_str(), &click());
        call["arguments"] = in_arguments(nested(levels));
        let result = h.expect_refused(&call, "NOT_AUTHORIZED").await;
        assert_eq!(result["error"]["message"], message, "{levels}");
    }
}
