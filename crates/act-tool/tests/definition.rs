//! The tool definitions: each is valid draft 2020-12 JSON Schema, the strict
//! ones follow the OpenAI and Anthropic strict-mode rules, a call in any
//! shape maps to the same canonical action and digest, and on a corpus of
//! valid and invalid calls a maintained validator (`jsonschema`) and the
//! Act tool accept exactly the same calls, except the documented gaps the
//! schema cannot express.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use common::{Harness, URL, call_for, click};
use countersign_act_tool::{ARGUMENT_NAMES, Act, TOOL_NAME, ToolDefinition, ToolFormat};
use serde_json::{Map, Value, json};

const FORMATS: [ToolFormat; 3] = [
    ToolFormat::JsonSchema,
    ToolFormat::OpenAiStrict,
    ToolFormat::AnthropicStrict,
];

fn is_strict(format: ToolFormat) -> bool {
    format != ToolFormat::JsonSchema
}

fn validator(definition: &ToolDefinition) -> jsonschema::Validator {
    jsonschema::draft202012::new(&definition.parameters)
        .unwrap_or_else(|e| panic!("{:?}: schema does not compile: {e}", definition.format))
}

#[test]
fn definition_names_and_describes_the_tool() {
    for format in FORMATS {
        let d = Act::definition_for(format);
        assert_eq!(d.name, "browser_act");
        assert_eq!(d.format, format);
        for code in [
            "APPROVAL_REQUIRED",
            "APPROVAL_STALE",
            "NOT_AUTHORIZED",
            "STORE_UNAVAILABLE",
            "BACKEND_FAILED",
        ] {
            assert!(d.description.contains(code), "{code}");
        }
    }
    assert_eq!(TOOL_NAME, "browser_act");
    assert_eq!(Act::NAME, "browser_act");
    assert_eq!(
        Act::definition(),
        Act::definition_for(ToolFormat::JsonSchema)
    );
}

#[test]
fn each_format_has_its_apis_wrapper() {
    let generic = Act::definition();
    assert_eq!(
        generic.to_json(),
        json!({"name": "browser_act", "description": generic.description, "parameters": generic.parameters})
    );
    let openai = Act::definition_for(ToolFormat::OpenAiStrict);
    assert_eq!(
        openai.to_json(),
        json!({"type": "function", "function": {
            "name": "browser_act", "description": openai.description,
            "parameters": openai.parameters, "strict": true,
        }})
    );
    let anthropic = Act::definition_for(ToolFormat::AnthropicStrict);
    assert_eq!(
        anthropic.to_json(),
        json!({"name": "browser_act", "description": anthropic.description,
            "input_schema": anthropic.parameters, "strict": true})
    );
    // Both strict APIs get the same schema.
    assert_eq!(openai.parameters, anthropic.parameters);
}

#[tokio::test]
async fn every_definition_is_valid_draft_2020_12_and_closed() {
    let h = Harness::new();
    for format in FORMATS {
        for d in [
            Act::definition_for(format),
            h.act.tool_definition_for(format),
        ] {
            let schema = &d.parameters;
            jsonschema::meta::validate(schema)
                .unwrap_or_else(|e| panic!("{format:?}: not a valid schema: {e}"));
            validator(&d);
            assert_eq!(schema["type"], "object");
            assert_eq!(schema["additionalProperties"], false);
            let names: BTreeSet<&str> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(names, ARGUMENT_NAMES.into_iter().collect());
            let required = if is_strict(format) {
                json!([
                    "url",
                    "approval_id",
                    "method",
                    "selector",
                    "description",
                    "arguments"
                ])
            } else {
                json!(["url", "approval_id", "method", "selector"])
            };
            assert_eq!(schema["required"], required, "{format:?}");
            // The model never names the actor or run.
            assert!(schema["properties"].get("actor_id").is_none());
        }
    }
}

/// Keywords both strict modes document as supported, and used here.
const STRICT_KEYWORDS: [&str; 8] = [
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "pattern",
    "enum",
];

/// Checks one schema node against the strict-mode rules of OpenAI
/// (structured outputs) and Anthropic (strict tool use); returns its depth.
fn check_strict(schema: &Value, path: &str) -> usize {
    let object = schema.as_object().unwrap();
    for keyword in object.keys() {
        assert!(
            STRICT_KEYWORDS.contains(&keyword.as_str()),
            "{path}: `{keyword}` is not supported in strict mode"
        );
    }
    let types: Vec<&str> = match &object["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
        other => panic!("{path}: type {other}"),
    };
    // No type unions, except a type made nullable.
    match types.as_slice() {
        [_] => {}
        [_, "null"] => {}
        other => panic!("{path}: type union {other:?}"),
    }
    let mut depth = 1;
    if types[0] == "object" {
        assert_eq!(object["additionalProperties"], false, "{path}");
        let properties = object["properties"].as_object().unwrap();
        let required: BTreeSet<&str> = object["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let names: BTreeSet<&str> = properties.keys().map(String::as_str).collect();
        assert_eq!(required, names, "{path}: every property is required");
        for (name, sub) in properties {
            depth = depth.max(1 + check_strict(sub, &format!("{path}/{name}")));
        }
    } else {
        assert!(object.get("properties").is_none() && object.get("required").is_none());
    }
    if types[0] == "array" {
        depth = depth.max(1 + check_strict(&object["items"], &format!("{path}/items")));
    }
    if let Some(pattern) = object.get("pattern") {
        // Simple regular expressions only: no look-around, back-references
        // or word boundaries, and no large repetition counts.
        let pattern = pattern.as_str().unwrap();
        for refused in ["(?=", "(?!", "(?<", "\\b", "\\1", "{1,2048}", "{1,8192}"] {
            assert!(!pattern.contains(refused), "{path}: {pattern}");
        }
        assert!(pattern.starts_with('^') && pattern.ends_with('$'));
    }
    depth
}

#[tokio::test]
async fn strict_definitions_follow_both_apis_strict_rules() {
    let h = Harness::new();
    for format in [ToolFormat::OpenAiStrict, ToolFormat::AnthropicStrict] {
        for d in [
            Act::definition_for(format),
            h.act.tool_definition_for(format),
        ] {
            let depth = check_strict(&d.parameters, "#");
            assert!(depth <= 5, "nesting {depth}");
            // Tool names: `^[a-zA-Z0-9_-]{1,64}$` in both APIs.
            assert!(d.name.len() <= 64);
            assert!(
                d.name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Schema and library agreement.

/// Where a call is expected to land.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The schema and the Act tool both accept it, or both refuse it.
    Same,
    /// A documented gap: the schema accepts, the tool refuses.
    SchemaOnly(&'static str),
    /// A documented gap: the tool accepts, the schema refuses.
    ToolOnly(&'static str),
}

/// A call with every key, in the generic or strict shape.
fn base(format: ToolFormat) -> Value {
    if is_strict(format) {
        json!({
            "url": URL, "approval_id": "apr_0123456789abcdef0123456789abcdef",
            "method": "fill", "selector": "input#q", "description": null,
            "arguments": [{"name": "text", "value": "docs"}],
        })
    } else {
        json!({
            "url": URL, "approval_id": "apr_0123456789abcdef0123456789abcdef",
            "method": "fill", "selector": "input#q", "arguments": {"text": "docs"},
        })
    }
}

fn with(format: ToolFormat, key: &str, value: Value) -> Value {
    let mut call = base(format);
    call[key] = value;
    call
}

fn without(format: ToolFormat, key: &str) -> Value {
    let mut call = base(format);
    call.as_object_mut().unwrap().remove(key);
    call
}

/// Arguments in the format's own shape.
fn args(format: ToolFormat, pairs: &[(&str, Value)]) -> Value {
    if is_strict(format) {
        Value::Array(
            pairs
                .iter()
                .map(|(k, v)| json!({"name": k, "value": v}))
                .collect(),
        )
    } else {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect::<Map<_, _>>(),
        )
    }
}

fn text_args(format: ToolFormat, count: usize, value: &str) -> Value {
    let pairs: Vec<(String, Value)> = (0..count)
        .map(|i| (format!("k{i}"), json!(value)))
        .collect();
    let refs: Vec<(&str, Value)> = pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    args(format, &refs)
}

/// Valid and invalid calls, each with where it should land for `format`.
fn corpus(format: ToolFormat, methods_known: bool) -> Vec<(String, Value, Expect)> {
    use Expect::{Same, SchemaOnly, ToolOnly};
    let strict = is_strict(format);
    let bytes = "byte lengths beyond ASCII";
    let no_lengths = "strict shapes have no length or count keywords";
    let trimmed = "selector and description lengths are counted after trimming";
    let mut out: Vec<(&str, Value, Expect)> = vec![
        ("the base call", base(format), Same),
        ("not an object", json!("call"), Same),
        ("url missing", without(format, "url"), Same),
        ("url a number", with(format, "url", json!(5)), Same),
        ("id missing", without(format, "approval_id"), Same),
        ("id null", with(format, "approval_id", json!(null)), Same),
        (
            "id with a space",
            with(format, "approval_id", json!("apr 1")),
            Same,
        ),
        (
            "id of 128",
            with(format, "approval_id", json!("a".repeat(128))),
            Same,
        ),
        (
            "id of 129",
            with(format, "approval_id", json!("a".repeat(129))),
            Same,
        ),
        ("id empty", with(format, "approval_id", json!("")), Same),
        ("unknown key", with(format, "actor_id", json!("x")), Same),
        ("run_id", with(format, "run_id", json!("x")), Same),
        (
            "method upper-case",
            with(format, "method", json!("FILL")),
            Same,
        ),
        (
            "method padded",
            with(format, "method", json!(" Fill\t")),
            Same,
        ),
        ("method empty", with(format, "method", json!("")), Same),
        ("method null", with(format, "method", json!(null)), Same),
        (
            "method with a space",
            with(format, "method", json!("fi ll")),
            Same,
        ),
        ("selector empty", with(format, "selector", json!("")), Same),
        (
            "selector blank",
            with(format, "selector", json!(" \t\u{3000} ")),
            Same,
        ),
        (
            "selector padded",
            with(format, "selector", json!("\n input#q \u{a0}")),
            Same,
        ),
        (
            "selector with a newline inside",
            with(format, "selector", json!("a\nb")),
            Same,
        ),
        (
            "selector with NUL",
            with(format, "selector", json!("a\u{0}")),
            Same,
        ),
        (
            "selector with DEL",
            with(format, "selector", json!("a\u{7f}b")),
            Same,
        ),
        (
            "selector with U+2028 inside",
            with(format, "selector", json!("a\u{2028}b")),
            Same,
        ),
        (
            "selector with U+0085 inside",
            with(format, "selector", json!("a\u{85}b")),
            Same,
        ),
        (
            "selector with U+FEFF",
            with(format, "selector", json!("\u{feff}")),
            Same,
        ),
        (
            "selector a number",
            with(format, "selector", json!(7)),
            Same,
        ),
        (
            "selector of 2048",
            with(format, "selector", json!("s".repeat(2048))),
            Same,
        ),
        (
            "selector of 2048 with white space around",
            with(format, "selector", json!(format!(" {} ", "a".repeat(2048)))),
            Same,
        ),
        (
            "selector of 2048 with much white space around",
            with(
                format,
                "selector",
                json!(format!("{}{}\t\n", " ".repeat(5000), "a".repeat(2048))),
            ),
            Same,
        ),
        (
            "selector of 2049",
            with(format, "selector", json!("s".repeat(2049))),
            SchemaOnly(trimmed),
        ),
        (
            "selector of 1025 two-byte characters",
            with(format, "selector", json!("é".repeat(1025))),
            SchemaOnly(trimmed),
        ),
        (
            "description null",
            with(format, "description", json!(null)),
            Same,
        ),
        (
            "description blank",
            with(format, "description", json!("  ")),
            Same,
        ),
        (
            "description text",
            with(format, "description", json!(" open it ")),
            Same,
        ),
        (
            "description with a tab inside",
            with(format, "description", json!("a\tb")),
            Same,
        ),
        (
            "description a number",
            with(format, "description", json!(1)),
            Same,
        ),
        (
            "description of 1024",
            with(format, "description", json!("d".repeat(1024))),
            Same,
        ),
        (
            "description of 1024 with white space around",
            with(
                format,
                "description",
                json!(format!(" {} ", "d".repeat(1024))),
            ),
            Same,
        ),
        (
            "description of 1025",
            with(format, "description", json!("d".repeat(1025))),
            SchemaOnly(trimmed),
        ),
        (
            "a long description equal to the default",
            {
                let mut call = with(format, "selector", json!("s".repeat(1100)));
                call["description"] = json!(format!("fill {}", "s".repeat(1100)));
                call
            },
            Same,
        ),
        (
            "arguments null",
            with(format, "arguments", json!(null)),
            Same,
        ),
        (
            "arguments empty",
            with(format, "arguments", args(format, &[])),
            Same,
        ),
        (
            "arguments a string",
            with(format, "arguments", json!("x")),
            Same,
        ),
        (
            "arguments of 32",
            with(format, "arguments", text_args(format, 32, "v")),
            Same,
        ),
        (
            "arguments of 33",
            with(format, "arguments", text_args(format, 33, "v")),
            if strict { SchemaOnly(no_lengths) } else { Same },
        ),
        (
            "a value of 8192",
            with(format, "arguments", text_args(format, 1, &"v".repeat(8192))),
            Same,
        ),
        (
            "a value of 8193",
            with(format, "arguments", text_args(format, 1, &"v".repeat(8193))),
            if strict { SchemaOnly(no_lengths) } else { Same },
        ),
        (
            "a value of 4097 two-byte characters",
            with(format, "arguments", text_args(format, 1, &"é".repeat(4097))),
            SchemaOnly(if strict { no_lengths } else { bytes }),
        ),
        (
            "a value with control characters",
            with(format, "arguments", text_args(format, 1, "a\u{0}\n\u{7f}")),
            Same,
        ),
        (
            "a key of 64",
            with(
                format,
                "arguments",
                args(format, &[(&"k".repeat(64), json!("v"))]),
            ),
            Same,
        ),
        (
            "a key of 65",
            with(
                format,
                "arguments",
                args(format, &[(&"k".repeat(65), json!("v"))]),
            ),
            Same,
        ),
        (
            "a key with a space",
            with(format, "arguments", args(format, &[("a b", json!("v"))])),
            Same,
        ),
        (
            "an empty key",
            with(format, "arguments", args(format, &[("", json!("v"))])),
            Same,
        ),
        (
            "a null value",
            with(format, "arguments", args(format, &[("k", json!(null))])),
            Same,
        ),
        (
            "an array value",
            with(format, "arguments", args(format, &[("k", json!([1]))])),
            Same,
        ),
        (
            "a repeated name in the list form",
            with(
                format,
                "arguments",
                json!([{"name": "k", "value": "1"}, {"name": "k", "value": "2"}]),
            ),
            SchemaOnly("a repeated name"),
        ),
        (
            "a list item with an extra key",
            with(
                format,
                "arguments",
                json!([{"name": "k", "value": "1", "other": 1}]),
            ),
            Same,
        ),
        (
            "a list item without a value",
            with(format, "arguments", json!([{"name": "k"}])),
            Same,
        ),
        (
            "a list item that is a string",
            with(format, "arguments", json!(["k"])),
            Same,
        ),
        (
            "nested far too deep",
            {
                let mut deep = json!("x");
                for _ in 0..40 {
                    deep = json!([deep]);
                }
                with(format, "arguments", args(format, &[("k", deep)]))
            },
            Same,
        ),
    ];
    // Numbers and booleans: values of their own in the generic shape;
    // the strict shapes send every value as a string.
    let typed: [(&str, Value); 5] = [
        ("a number value", json!(5)),
        ("a boolean value", json!(true)),
        ("the largest safe integer", json!(9_007_199_254_740_991_u64)),
        ("a number beyond 2^53 - 1", json!(9_007_199_254_740_993_u64)),
        ("a fraction", json!(0.5)),
    ];
    for (what, value) in typed {
        let beyond = value.as_u64().is_some_and(|n| n > 9_007_199_254_740_991);
        let expect = if strict && !beyond {
            ToolOnly("strict shapes take values as strings")
        } else {
            Same
        };
        out.push((
            what,
            with(format, "arguments", args(format, &[("n", value)])),
            expect,
        ));
    }
    if strict {
        // The generic shape's object form and omitted keys are refused by
        // the strict schemas, whose every key is required; the tool still
        // accepts them.
        for (what, call) in [
            (
                "arguments as an object",
                with(format, "arguments", json!({"text": "docs"})),
            ),
            ("description omitted", without(format, "description")),
            ("arguments omitted", without(format, "arguments")),
        ] {
            out.push((what, call, ToolOnly("strict shapes require every key")));
        }
    } else {
        out.push((
            "arguments as a list",
            with(
                format,
                "arguments",
                json!([{"name": "text", "value": "docs"}]),
            ),
            Same,
        ));
        out.push(("description omitted", without(format, "description"), Same));
        out.push(("arguments omitted", without(format, "arguments"), Same));
    }
    if !methods_known {
        // Without a policy the schema cannot know the method set.
        out.push((
            "a method the policy does not allow",
            with(format, "method", json!("explode")),
            SchemaOnly("the method set without a policy"),
        ));
    } else {
        out.push((
            "a method the policy does not allow",
            with(format, "method", json!("explode")),
            Same,
        ));
    }
    out.into_iter()
        .map(|(what, call, expect)| (what.to_owned(), call, expect))
        .collect()
}

/// The tool accepts a call when it passes every check before the store:
/// with no grant issued, that is exactly the unknown-id answer.
async fn tool_accepts(h: &Harness, call: &Value) -> bool {
    let result = h.run(call).await;
    result["error"]["message"]
        == "approval id is unknown; the host must issue an approval for this action"
}

#[tokio::test]
async fn schema_and_tool_accept_the_same_calls() {
    let h = Harness::new();
    let mut gaps = BTreeSet::new();
    for format in FORMATS {
        for (methods_known, definition) in [
            (false, Act::definition_for(format)),
            (true, h.act.tool_definition_for(format)),
        ] {
            let schema = validator(&definition);
            for (what, call, expect) in corpus(format, methods_known) {
                let by_schema = schema.is_valid(&call);
                let by_tool = tool_accepts(&h, &call).await;
                let expected = match expect {
                    Expect::Same => by_schema == by_tool,
                    Expect::SchemaOnly(gap) => {
                        gaps.insert(gap);
                        by_schema && !by_tool
                    }
                    Expect::ToolOnly(gap) => {
                        gaps.insert(gap);
                        !by_schema && by_tool
                    }
                };
                assert!(
                    expected,
                    "{format:?} (methods known: {methods_known}), {what}: schema {by_schema}, tool {by_tool}, expected {expect:?}"
                );
            }
        }
    }
    // Every gap is one the definition's documentation lists.
    assert_eq!(gaps.len(), 7, "{gaps:?}");
}

/// Issue 24: a selector of 2048 bytes with a space on each side is 2050
/// characters, which a `maxLength` of 2048 refused although the tool trims
/// first and accepts it. Every shape and the policy now agree, and the
/// description likewise.
#[tokio::test]
async fn text_padded_past_its_limit_is_accepted_by_schema_and_tool_alike() {
    let h = Harness::new();
    let selector = format!(" {} ", "a".repeat(2048));
    let description = format!(" {} ", "d".repeat(1024));
    let action = h
        .context
        .source_policy()
        .authorize_action(
            &json!({"method": "fill", "selector": selector, "description": description}),
        )
        .unwrap();
    assert_eq!(action.selector(), "a".repeat(2048));
    assert_eq!(action.description(), "d".repeat(1024));
    for format in FORMATS {
        for definition in [
            Act::definition_for(format),
            h.act.tool_definition_for(format),
        ] {
            let schema = validator(&definition);
            for call in [
                with(format, "selector", json!(selector)),
                with(format, "description", json!(description)),
            ] {
                assert!(
                    schema.is_valid(&call),
                    "{format:?}: the schema refuses {call}"
                );
                assert!(
                    tool_accepts(&h, &call).await,
                    "{format:?}: the tool refuses {call}"
                );
            }
            for property in ["selector", "description"] {
                assert_eq!(
                    definition.parameters["properties"][property].get("maxLength"),
                    None,
                    "{format:?}: {property}"
                );
            }
        }
    }
    // One byte more, inside the white space, is refused by the tool.
    let call = with(
        ToolFormat::JsonSchema,
        "selector",
        json!(format!(" {}a ", "a".repeat(2048))),
    );
    let refused = h.run(&call).await;
    assert_eq!(refused["error"]["code"], "NOT_AUTHORIZED");
    assert_eq!(
        refused["error"]["message"],
        "action is invalid: `selector` is longer than 2048 bytes"
    );
}

/// The guide prints the generic definition in full: it is this one.
#[test]
fn the_guide_shows_the_generic_definition_as_it_is() {
    let guide = include_str!("../../../docs/guide.md");
    let block = guide
        .split("The generic shape, `Act::definition().to_json()`")
        .nth(1)
        .and_then(|rest| rest.split("```json\n").nth(1))
        .and_then(|rest| rest.split("\n```").next())
        .unwrap();
    let shown: Value = serde_json::from_str(block).unwrap();
    assert_eq!(shown, Act::definition().to_json());
}

#[tokio::test]
async fn the_corpus_has_both_outcomes_for_each_format() {
    let h = Harness::new();
    for format in FORMATS {
        let schema = validator(&h.act.tool_definition_for(format));
        let (mut accepted, mut refused) = (0, 0);
        for (_, call, _) in corpus(format, true) {
            if schema.is_valid(&call) {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(
            accepted >= 15 && refused >= 25,
            "{format:?}: {accepted} / {refused}"
        );
    }
}

// ---------------------------------------------------------------------------
// One grant, any shape.

#[tokio::test]
async fn a_grant_works_whichever_shape_the_model_speaks() {
    let action = json!({"method": "fill", "selector": "input#q", "arguments": {"text": "docs", "limit": 5, "exact": true}});
    let shapes = [
        // Generic: object arguments with typed values, no description.
        json!({"method": "fill", "selector": "input#q", "arguments": {"limit": 5, "exact": true, "text": "docs"}}),
        // Generic, list form and explicit nulls.
        json!({"method": "FILL", "selector": " input#q ", "description": null, "arguments": [
            {"name": "text", "value": "docs"}, {"name": "limit", "value": 5}, {"name": "exact", "value": true},
        ]}),
        // Strict (OpenAI and Anthropic): every key, values as strings.
        json!({"method": "fill", "selector": "input#q", "description": null, "arguments": [
            {"name": "exact", "value": "true"}, {"name": "limit", "value": "5"}, {"name": "text", "value": "docs"},
        ]}),
    ];
    let h = Harness::new();
    let strict = validator(&h.act.tool_definition_for(ToolFormat::OpenAiStrict));
    let generic = validator(&h.act.tool_definition());
    let mut digests = BTreeSet::new();
    for (i, shape) in shapes.iter().enumerate() {
        let grant = h.grant(URL, &action).await;
        let call = call_for(URL, grant.id.as_str(), shape);
        if i == 2 {
            assert!(strict.is_valid(&call), "{call}");
        } else {
            assert!(generic.is_valid(&call), "{call}");
        }
        let result = h.expect_ok(&call).await;
        assert_eq!(
            result["action"]["arguments"],
            json!({"exact": "true", "limit": "5", "text": "docs"})
        );
        digests.insert(h.backend.records()[i].action.digest());
        assert_eq!(h.backend.records()[i].action.digest(), grant.action_digest);
    }
    assert_eq!(digests.len(), 1);
}

#[tokio::test]
async fn list_form_errors_are_refused_with_their_reason() {
    let h = Harness::new();
    let grant = h.grant_click().await;
    for (arguments, message) in [
        (
            json!([{"name": "k", "value": "1"}, {"name": "k", "value": "1"}]),
            "argument `k` is given twice",
        ),
        (
            json!([{"name": "k"}]),
            "each item of an `arguments` list must be an object with exactly a string `name` and a `value`",
        ),
        (
            json!([{"name": 1, "value": "v"}]),
            "each item of an `arguments` list must be an object with exactly a string `name` and a `value`",
        ),
    ] {
        let mut call = call_for(URL, grant.id.as_str(), &click());
        call["arguments"] = arguments;
        let result = h.expect_refused(&call, "NOT_AUTHORIZED").await;
        assert_eq!(result["error"]["message"], message);
    }
    // The grant is untouched.
    h.expect_ok(&call_for(URL, grant.id.as_str(), &click()))
        .await;
}
