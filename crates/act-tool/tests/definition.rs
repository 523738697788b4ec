//! The tool definition: its schema is well-formed JSON Schema and accepts
//! the example call.
//!
//! Checked by hand rather than with a JSON Schema crate (which would add a
//! large dependency tree for one test): `check_schema` checks every keyword
//! the definition uses against the draft 2020-12 meta-schema's rules for
//! that keyword and refuses any other keyword; `validate` implements those
//! keywords' validation semantics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Harness, URL, call_for, click};
use countersign_act_tool::{ARGUMENT_NAMES, Act, TOOL_NAME};
use serde_json::{Map, Value, json};

const TYPES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "string", "integer",
];

fn non_negative_integer(v: &Value) -> bool {
    v.as_u64().is_some()
}

/// The definition's schema uses only these keywords, each well-formed.
fn check_schema(schema: &Value, path: &str) {
    let object = schema
        .as_object()
        .unwrap_or_else(|| panic!("{path}: a schema is an object"));
    for (keyword, value) in object {
        let at = format!("{path}/{keyword}");
        match keyword.as_str() {
            "type" => match value {
                Value::String(t) => assert!(TYPES.contains(&t.as_str()), "{at}"),
                Value::Array(ts) => {
                    assert!(!ts.is_empty(), "{at}");
                    let mut seen = Vec::new();
                    for t in ts {
                        let t = t.as_str().unwrap();
                        assert!(TYPES.contains(&t) && !seen.contains(&t), "{at}");
                        seen.push(t);
                    }
                }
                _ => panic!("{at}: type is a string or array"),
            },
            "description" => assert!(value.is_string(), "{at}"),
            "properties" => {
                for (name, sub) in value.as_object().unwrap() {
                    check_schema(sub, &format!("{at}/{name}"));
                }
            }
            "required" => {
                let names: Vec<&str> = value
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                let mut unique = names.clone();
                unique.sort();
                unique.dedup();
                assert_eq!(unique.len(), names.len(), "{at}: unique");
                let props = object["properties"].as_object().unwrap();
                for n in names {
                    assert!(props.contains_key(n), "{at}: `{n}` is a property");
                }
            }
            "additionalProperties" | "propertyNames" => match value {
                Value::Bool(_) => {}
                sub => check_schema(sub, &at),
            },
            "minLength" | "maxLength" | "maxProperties" => {
                assert!(non_negative_integer(value), "{at}")
            }
            "pattern" => {
                let p = value.as_str().unwrap();
                assert!(Pattern::parse(p).is_some(), "{at}: unsupported pattern {p}");
            }
            "enum" => {
                let items = value.as_array().unwrap();
                assert!(!items.is_empty(), "{at}");
                for (i, a) in items.iter().enumerate() {
                    assert!(!items[i + 1..].contains(a), "{at}: unique");
                }
            }
            other => panic!("{at}: keyword `{other}` not expected"),
        }
    }
    if let (Some(min), Some(max)) = (object.get("minLength"), object.get("maxLength")) {
        assert!(min.as_u64() <= max.as_u64(), "{path}");
    }
}

/// The patterns the definition uses: `^[class]{m,n}$`.
struct Pattern {
    class: Vec<(char, char)>,
    min: usize,
    max: usize,
}

impl Pattern {
    fn parse(text: &str) -> Option<Pattern> {
        let body = text.strip_prefix("^[")?.strip_suffix('$')?;
        let (class, counts) = body.split_once("]{")?;
        let (min, max) = counts.strip_suffix('}')?.split_once(',')?;
        let chars: Vec<char> = class.chars().collect();
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            if i + 2 < chars.len() && chars[i + 1] == '-' {
                ranges.push((chars[i], chars[i + 2]));
                i += 3;
            } else {
                ranges.push((chars[i], chars[i]));
                i += 1;
            }
        }
        Some(Pattern {
            class: ranges,
            min: min.parse().ok()?,
            max: max.parse().ok()?,
        })
    }

    fn matches(&self, s: &str) -> bool {
        let n = s.chars().count();
        (self.min..=self.max).contains(&n)
            && s.chars()
                .all(|c| self.class.iter().any(|(a, b)| (*a..=*b).contains(&c)))
    }
}

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "number" => v.is_number(),
        "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
        "string" => v.is_string(),
        _ => false,
    }
}

/// Validation semantics of the keywords above.
fn validate(schema: &Value, v: &Value) -> bool {
    let Some(schema) = schema.as_object() else {
        return schema.as_bool().unwrap_or(false);
    };
    let ok_type = match schema.get("type") {
        None => true,
        Some(Value::String(t)) => type_matches(t, v),
        Some(Value::Array(ts)) => ts.iter().any(|t| type_matches(t.as_str().unwrap(), v)),
        Some(_) => false,
    };
    if !ok_type {
        return false;
    }
    if let Some(items) = schema.get("enum").and_then(Value::as_array)
        && !items.contains(v)
    {
        return false;
    }
    if let Value::String(s) = v {
        let n = s.chars().count() as u64;
        if schema
            .get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| n < m)
            || schema
                .get("maxLength")
                .and_then(Value::as_u64)
                .is_some_and(|m| n > m)
        {
            return false;
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str)
            && !Pattern::parse(p).unwrap().matches(s)
        {
            return false;
        }
    }
    if let Value::Object(map) = v {
        return validate_object(schema, map);
    }
    true
}

fn validate_object(schema: &Map<String, Value>, map: &Map<String, Value>) -> bool {
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(required) = schema.get("required").and_then(Value::as_array)
        && required
            .iter()
            .any(|r| !map.contains_key(r.as_str().unwrap()))
    {
        return false;
    }
    if schema
        .get("maxProperties")
        .and_then(Value::as_u64)
        .is_some_and(|m| map.len() as u64 > m)
    {
        return false;
    }
    for (key, value) in map {
        if let Some(names) = schema.get("propertyNames")
            && !validate(names, &Value::String(key.clone()))
        {
            return false;
        }
        let ok = match props.get(key) {
            Some(sub) => validate(sub, value),
            None => match schema.get("additionalProperties") {
                None => true,
                Some(sub) => validate(sub, value),
            },
        };
        if !ok {
            return false;
        }
    }
    true
}

fn example_call() -> Value {
    json!({
        "url": "https://docs.example.com/",
        "approval_id": "apr_0123456789abcdef0123456789abcdef",
        "method": "click",
        "selector": "a#docs",
    })
}

#[test]
fn definition_names_and_describes_the_tool() {
    let d = Act::definition();
    assert_eq!(d.name, "browser_act");
    assert_eq!(TOOL_NAME, "browser_act");
    assert_eq!(Act::NAME, "browser_act");
    for code in [
        "APPROVAL_REQUIRED",
        "APPROVAL_STALE",
        "NOT_AUTHORIZED",
        "STORE_UNAVAILABLE",
        "BACKEND_FAILED",
    ] {
        assert!(d.description.contains(code), "{code}");
    }
    let j = d.to_json();
    assert_eq!(j["name"], "browser_act");
    assert_eq!(j["parameters"], d.parameters);
}

#[test]
fn schema_is_well_formed_and_closed() {
    let schema = Act::definition().parameters;
    check_schema(&schema, "#");
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        schema["required"],
        json!(["url", "approval_id", "method", "selector"])
    );
    let mut names: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    names.sort();
    let mut expected = ARGUMENT_NAMES.to_vec();
    expected.sort();
    assert_eq!(names, expected);
}

#[test]
fn schema_accepts_the_example_call_and_refuses_what_act_refuses_as_malformed() {
    let schema = Act::definition().parameters;
    assert!(validate(&schema, &example_call()));
    let mut full = example_call();
    full["description"] = json!("open the docs");
    full["arguments"] = json!({"text": "x", "count": 2, "force": true});
    assert!(validate(&schema, &full));

    for bad in [
        json!({"approval_id": "apr_1", "method": "click", "selector": "a"}),
        json!({"url": 5, "approval_id": "apr_1", "method": "click", "selector": "a"}),
        json!({"url": URL, "method": "click", "selector": "a"}),
        json!({"url": URL, "approval_id": "apr 1", "method": "click", "selector": "a"}),
        json!({"url": URL, "approval_id": "apr_1", "method": "click", "selector": "a", "actor_id": "x"}),
        json!({"url": URL, "approval_id": "apr_1", "method": "click", "selector": "a", "run_id": "x"}),
        json!({"url": URL, "approval_id": "apr_1", "method": "click", "selector": ""}),
        json!({"url": URL, "approval_id": "apr_1", "method": "click", "selector": "a", "arguments": {"k": [1]}}),
        json!({"url": URL, "approval_id": "apr_1", "method": "click", "selector": "a", "arguments": {"bad key": "v"}}),
        json!("not an object"),
    ] {
        assert!(!validate(&schema, &bad), "{bad}");
    }
}

#[tokio::test]
async fn the_contextual_definition_lists_the_policy_methods() {
    let h = Harness::new();
    let d = h.act.tool_definition();
    let schema = &d.parameters;
    check_schema(schema, "#");
    let methods: Vec<&str> = schema["properties"]["method"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(methods.contains(&"click") && methods.contains(&"fill"));
    assert!(validate(schema, &example_call()));
    assert!(!validate(
        schema,
        &json!({"url": URL, "approval_id": "apr_1", "method": "explode", "selector": "a"})
    ));

    // And the example call, with a real grant, is what Act performs.
    let grant = h.grant_click().await;
    let call = call_for(URL, grant.id.as_str(), &click());
    assert!(validate(schema, &call));
    h.expect_ok(&call).await;
}
