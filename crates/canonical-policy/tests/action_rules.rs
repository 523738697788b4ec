#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `Policy::authorize_action`: every rule of DESIGN §2, at its edges.

use countersign_canonical_policy::{
    Action, ActionDigest, DEFAULT_METHODS, Denial, MAX_ARGUMENT_KEY_BYTES,
    MAX_ARGUMENT_VALUE_BYTES, MAX_ARGUMENTS, MAX_DESCRIPTION_BYTES, MAX_SAFE_INTEGER,
    MAX_SELECTOR_BYTES, NOT_AUTHORIZED, Policy, StaticResolver,
};
use serde_json::{Value, json};

fn policy() -> Policy {
    Policy::builder()
        .allow_host("docs.example.com")
        .resolver(StaticResolver::new())
        .build()
        .unwrap()
}

fn ok(action: Value) -> Action {
    match policy().authorize_action(&action) {
        Ok(a) => a,
        Err(denial) => panic!("{action} was refused: {denial}"),
    }
}

fn refused(action: Value) -> Denial {
    match policy().authorize_action(&action) {
        Ok(a) => panic!("{action} was accepted as {a}"),
        Err(denial) => {
            assert_eq!(denial.code(), NOT_AUTHORIZED);
            denial
        }
    }
}

/// Refused as an invalid action whose reason contains `needle`.
fn invalid(action: Value, needle: &str) {
    let denial = refused(action.clone());
    match &denial {
        Denial::InvalidAction { reason } => {
            assert!(
                reason.contains(needle),
                "{action}: {reason:?} lacks {needle:?}"
            );
            assert!(denial.to_string().starts_with("action is invalid: "));
        }
        other => panic!("{action}: expected InvalidAction, got {other:?}"),
    }
}

fn with_selector(selector: &str) -> Value {
    json!({"method": "click", "selector": selector})
}

fn with_description(description: &str) -> Value {
    json!({"method": "click", "selector": "a#docs", "description": description})
}

fn with_arguments(arguments: Value) -> Value {
    json!({"method": "fill", "selector": "#q", "arguments": arguments})
}

// ---------------------------------------------------------------------------
// The DESIGN example and the shape of the result.

#[test]
fn design_example() {
    let action = ok(json!({"method": "click", "selector": "a#docs"}));
    assert_eq!(
        action.canonical_json(),
        r#"{"arguments":{},"description":"click a#docs","method":"click","selector":"a#docs"}"#
    );
    assert_eq!(
        action.digest().to_hex(),
        "cecff7f76758bc956b845d97c1ea48bd3a553050b866370981447cdfad0f998d"
    );
    assert_eq!(action.method(), "click");
    assert_eq!(action.selector(), "a#docs");
    assert_eq!(action.description(), "click a#docs");
    assert!(action.arguments().is_empty());
    assert_eq!(action.to_string(), action.canonical_json());
    assert_eq!(
        action.to_json_value(),
        json!({"arguments": {}, "description": "click a#docs", "method": "click", "selector": "a#docs"})
    );
}

#[test]
fn digest_text_round_trips_and_rejects_non_canonical_hex() {
    let digest = ok(with_selector("a#docs")).digest();
    let hex = digest.to_hex();
    assert_eq!(hex.len(), 64);
    assert_eq!(digest.to_string(), hex);
    assert_eq!(hex.parse::<ActionDigest>().unwrap(), digest);
    assert_eq!(digest.as_bytes().len(), 32);
    assert!(format!("{digest:?}").contains(&hex));
    for bad in [
        "",
        &hex[..63],
        &format!("{hex}0"),
        &hex.to_uppercase(),
        &format!("g{}", &hex[1..]),
        &format!(" {}", &hex[1..]),
    ] {
        assert!(bad.parse::<ActionDigest>().is_err(), "{bad:?}");
    }
}

#[test]
fn canonical_json_round_trips_through_from_canonical_json() {
    let action = ok(json!({
        "method": " Fill ", "selector": "#q", "description": "Search",
        "arguments": {"value": "x\ny", "n": 3}
    }));
    let text = action.canonical_json();
    assert_eq!(Action::from_canonical_json(&text).unwrap(), action);
    // Anything but the exact canonical bytes is refused.
    for bad in [
        text.replace(',', ", "),
        format!(" {text}"),
        r#"{"method":"click","selector":"a#docs"}"#.to_owned(),
        r#"{"arguments":{},"description":"click a#docs","method":"Click","selector":"a#docs"}"#
            .to_owned(),
        r#"{"arguments":{},"description":"x","method":"click","selector":" a"}"#.to_owned(),
        "not json".to_owned(),
    ] {
        let denial = Action::from_canonical_json(&bad).unwrap_err();
        assert!(matches!(denial, Denial::InvalidAction { .. }), "{bad}");
    }
}

// ---------------------------------------------------------------------------
// method

#[test]
fn method_is_trimmed_and_ascii_lower_cased() {
    for raw in [
        "click",
        " click",
        "click\t",
        "\n CLICK \r\n",
        "Click",
        "cLiCk",
        "\u{3000}click",
    ] {
        assert_eq!(
            ok(json!({"method": raw, "selector": "a"})).method(),
            "click",
            "{raw:?}"
        );
    }
}

#[test]
fn default_method_set() {
    assert_eq!(
        DEFAULT_METHODS,
        [
            "click", "dblclick", "hover", "focus", "fill", "type", "press", "select", "check",
            "uncheck"
        ]
    );
    let policy = policy();
    let mut allowed: Vec<&str> = policy.allowed_methods().collect();
    allowed.sort_unstable();
    let mut expected = DEFAULT_METHODS.to_vec();
    expected.sort_unstable();
    assert_eq!(allowed, expected);
    for method in DEFAULT_METHODS {
        let upper = method.to_uppercase();
        assert_eq!(
            ok(json!({"method": upper, "selector": "a"})).method(),
            *method
        );
    }
}

#[test]
fn methods_outside_the_set_are_refused() {
    for (raw, shown) in [
        ("navigate", "navigate"),
        ("evaluate", "evaluate"),
        ("submit", "submit"),
        ("goto", "goto"),
        ("", ""),
        ("   ", ""),
        ("click click", "click click"),
        ("cl\u{0}ick", "cl\\0ick"),
        ("clİck", "clİck"),
    ] {
        let denial = refused(json!({"method": raw, "selector": "a"}));
        assert!(
            matches!(&denial, Denial::MethodNotAllowed { method } if method == shown),
            "{raw:?}: {denial:?}"
        );
        assert_eq!(
            denial.to_string(),
            format!("method `{shown}` is not allowed")
        );
    }
}

#[test]
fn custom_method_set() {
    let policy = Policy::builder()
        .allow_host("docs.example.com")
        .allow_methods(["click", "Submit"])
        .resolver(StaticResolver::new())
        .build()
        .unwrap();
    let action = policy
        .authorize_action(&json!({"method": "SUBMIT", "selector": "form"}))
        .unwrap();
    assert_eq!(action.method(), "submit");
    let denial = policy
        .authorize_action(&json!({"method": "fill", "selector": "#q"}))
        .unwrap_err();
    assert!(matches!(denial, Denial::MethodNotAllowed { .. }));
}

// ---------------------------------------------------------------------------
// Shape: required keys, unknown keys, wrong types.

#[test]
fn not_an_object_is_refused() {
    for value in [
        json!(null),
        json!([]),
        json!("click"),
        json!(1),
        json!(true),
    ] {
        invalid(value, "json object");
    }
}

#[test]
fn unknown_keys_are_refused() {
    for key in [
        "url",
        "actor_id",
        "run_id",
        "approval_id",
        "Method",
        "selector ",
        "args",
        "",
    ] {
        let mut action = json!({"method": "click", "selector": "a"});
        action[key] = json!("x");
        invalid(action, "unknown field");
    }
    // Even when null.
    invalid(
        json!({"method": "click", "selector": "a", "extra": null}),
        "unknown field",
    );
}

#[test]
fn missing_required_keys_are_refused() {
    invalid(json!({"selector": "a"}), "`method` is required");
    invalid(
        json!({"method": null, "selector": "a"}),
        "`method` is required",
    );
    invalid(json!({"method": "click"}), "`selector` is required");
    invalid(
        json!({"method": "click", "selector": null}),
        "`selector` is required",
    );
    invalid(json!({}), "required");
}

#[test]
fn wrong_types_are_refused() {
    for (action, field) in [
        (json!({"method": 1, "selector": "a"}), "`method`"),
        (json!({"method": ["click"], "selector": "a"}), "`method`"),
        (
            json!({"method": {"name": "click"}, "selector": "a"}),
            "`method`",
        ),
        (json!({"method": true, "selector": "a"}), "`method`"),
        (json!({"method": "click", "selector": 7}), "`selector`"),
        (json!({"method": "click", "selector": ["a"]}), "`selector`"),
        (
            json!({"method": "click", "selector": "a", "description": 1}),
            "`description`",
        ),
        (
            json!({"method": "click", "selector": "a", "description": false}),
            "`description`",
        ),
        (
            json!({"method": "click", "selector": "a", "description": ["x"]}),
            "`description`",
        ),
        (
            json!({"method": "click", "selector": "a", "arguments": []}),
            "`arguments`",
        ),
        (
            json!({"method": "click", "selector": "a", "arguments": "x=1"}),
            "`arguments`",
        ),
        (
            json!({"method": "click", "selector": "a", "arguments": 1}),
            "`arguments`",
        ),
        (
            json!({"method": "click", "selector": "a", "arguments": true}),
            "`arguments`",
        ),
    ] {
        invalid(action, field);
    }
}

// ---------------------------------------------------------------------------
// selector

#[test]
fn selector_is_trimmed() {
    assert_eq!(ok(with_selector("  a#docs \n")).selector(), "a#docs");
    assert_eq!(
        ok(with_selector("\u{a0}a#docs\u{2003}")).selector(),
        "a#docs"
    );
    // Inner whitespace is kept.
    assert_eq!(ok(with_selector(" div  > a ")).selector(), "div  > a");
}

#[test]
fn selector_must_not_be_empty() {
    invalid(with_selector(""), "`selector` is empty");
    invalid(with_selector(" \t\n "), "`selector` is empty");
}

#[test]
fn selector_length_in_utf8_bytes() {
    assert_eq!(MAX_SELECTOR_BYTES, 2048);
    let at_limit = "a".repeat(2048);
    assert_eq!(ok(with_selector(&at_limit)).selector(), at_limit);
    invalid(with_selector(&"a".repeat(2049)), "longer than 2048 bytes");
    // Multi-byte: 682 × "€" (3 bytes) + "ab" = 2048 bytes; one more byte is too many.
    let euro = format!("{}ab", "€".repeat(682));
    assert_eq!(euro.len(), 2048);
    ok(with_selector(&euro));
    invalid(with_selector(&format!("{euro}c")), "longer than 2048 bytes");
    // 1025 "é" are 1025 characters but 2050 bytes.
    invalid(with_selector(&"é".repeat(1025)), "longer than 2048 bytes");
    // Trimming happens before measuring.
    ok(with_selector(&format!("  {at_limit}  ")));
}

#[test]
fn selector_control_characters_are_refused() {
    for c in [
        '\u{0}', '\u{1}', '\u{8}', '\t', '\n', '\r', '\u{1b}', '\u{1f}', '\u{7f}',
    ] {
        invalid(with_selector(&format!("a{c}b")), "control character");
    }
    // Outside U+0000–U+001F and U+007F nothing is a control character here.
    for c in ['\u{80}', '\u{9f}', '\u{2028}', '\u{200b}', '\u{feff}'] {
        assert_eq!(
            ok(with_selector(&format!("a{c}b"))).selector(),
            format!("a{c}b")
        );
    }
}

// ---------------------------------------------------------------------------
// description

#[test]
fn description_defaults_to_method_and_selector() {
    let expected = "click a#docs";
    assert_eq!(
        ok(json!({"method": " CLICK", "selector": " a#docs "})).description(),
        expected
    );
    for description in [json!(null), json!(""), json!("   "), json!("\n\t")] {
        let action =
            ok(json!({"method": "click", "selector": "a#docs", "description": description}));
        assert_eq!(action.description(), expected, "{description}");
    }
}

#[test]
fn explicit_description_is_trimmed_and_kept() {
    assert_eq!(
        ok(with_description("  Open the docs  ")).description(),
        "Open the docs"
    );
    assert_eq!(
        ok(with_description("Öffne „Docs“ ✓")).description(),
        "Öffne „Docs“ ✓"
    );
}

#[test]
fn description_length_in_utf8_bytes() {
    assert_eq!(MAX_DESCRIPTION_BYTES, 1024);
    ok(with_description(&"d".repeat(1024)));
    invalid(
        with_description(&"d".repeat(1025)),
        "longer than 1024 bytes",
    );
    // 512 × "é" = 1024 bytes (512 characters); one more byte is too many.
    ok(with_description(&"é".repeat(512)));
    invalid(
        with_description(&format!("{}x", "é".repeat(512))),
        "longer than 1024 bytes",
    );
    // 256 × "😀" = 1024 bytes.
    ok(with_description(&"😀".repeat(256)));
    invalid(
        with_description(&"😀".repeat(257)),
        "longer than 1024 bytes",
    );
}

/// Checks that `action` reads back from its canonical JSON as itself and
/// that its JSON form re-authorises to the same digest.
fn reads_back(action: &Action) {
    let text = action.canonical_json();
    assert_eq!(&Action::from_canonical_json(&text).unwrap(), action);
    assert_eq!(&ok(action.to_json_value()), action);
    assert_eq!(
        ok(serde_json::from_str(&text).unwrap()).digest(),
        action.digest()
    );
}

#[test]
fn a_long_default_description_reads_back() {
    // `click ` + 1019 bytes = 1025 bytes: longer than an explicit
    // description may be, yet the default of a valid selector.
    for len in [1017, 1018, 1019, 1020, MAX_SELECTOR_BYTES] {
        let selector = "s".repeat(len);
        let action = ok(with_selector(&selector));
        assert_eq!(action.description(), format!("click {selector}"));
        reads_back(&action);
        // Given explicitly (even padded or with another spelling of the
        // method), the default is the same action.
        let explicit = ok(json!({
            "method": " CLICK ", "selector": selector, "description": format!(" click {selector}\n"),
        }));
        assert_eq!(explicit, action);
    }
    // Any other description over the limit is still refused.
    let selector = "s".repeat(1020);
    for description in [
        format!("click {selector}x"),
        format!("click  {selector}"),
        format!("fill {selector}"),
        format!("Click {selector}"),
        format!("click{selector}"),
    ] {
        invalid(
            json!({"method": "click", "selector": selector, "description": description}),
            "`description` is longer than 1024 bytes",
        );
    }
}

#[test]
fn an_action_with_every_field_at_its_maximum_reads_back() {
    let arguments: serde_json::Map<String, Value> = (0..MAX_ARGUMENTS)
        .map(|i| {
            let key = format!("{i:0>width$}", width = MAX_ARGUMENT_KEY_BYTES);
            (key, Value::String("v".repeat(MAX_ARGUMENT_VALUE_BYTES)))
        })
        .collect();
    let selector = "s".repeat(MAX_SELECTOR_BYTES);
    for description in [None, Some("d".repeat(MAX_DESCRIPTION_BYTES))] {
        let mut input = json!({"method": "uncheck", "selector": selector, "arguments": arguments});
        if let Some(d) = &description {
            input["description"] = json!(d);
        }
        let action = ok(input);
        assert_eq!(action.arguments().len(), MAX_ARGUMENTS);
        reads_back(&action);
    }
}

#[test]
fn description_control_characters_are_refused() {
    for c in ['\u{0}', '\n', '\t', '\u{1f}', '\u{7f}'] {
        invalid(
            with_description(&format!("open{c}docs")),
            "control character",
        );
    }
}

// ---------------------------------------------------------------------------
// arguments

#[test]
fn absent_or_null_arguments_are_empty() {
    assert!(
        ok(json!({"method": "click", "selector": "a"}))
            .arguments()
            .is_empty()
    );
    assert!(
        ok(json!({"method": "click", "selector": "a", "arguments": null}))
            .arguments()
            .is_empty()
    );
    assert!(
        ok(json!({"method": "click", "selector": "a", "arguments": {}}))
            .arguments()
            .is_empty()
    );
    assert_eq!(
        ok(json!({"method": "click", "selector": "a", "arguments": null})).canonical_json(),
        ok(json!({"method": "click", "selector": "a", "arguments": {}})).canonical_json()
    );
}

#[test]
fn argument_count_limit() {
    assert_eq!(MAX_ARGUMENTS, 32);
    let many = |n: usize| Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect());
    assert_eq!(ok(with_arguments(many(32))).arguments().len(), 32);
    invalid(with_arguments(many(33)), "more than 32 entries");
}

#[test]
fn argument_keys() {
    assert_eq!(MAX_ARGUMENT_KEY_BYTES, 64);
    for key in [
        "a",
        "Z",
        "0",
        "_",
        ".",
        "-",
        "value",
        "modifiers.shift",
        "a-b_c.d",
        &"k".repeat(64),
    ] {
        let action = ok(with_arguments(json!({ key: "v" })));
        assert_eq!(
            action.arguments().get(key).map(String::as_str),
            Some("v"),
            "{key:?}"
        );
    }
    for key in [
        "",
        "a b",
        "a/b",
        "a:b",
        "a@b",
        "a\"b",
        "a\\b",
        "a\nb",
        "ä",
        "ＡＢ",
        "key\u{0}",
        &"k".repeat(65),
    ] {
        invalid(with_arguments(json!({ key: "v" })), "argument key");
    }
}

#[test]
fn argument_values_are_kept_verbatim() {
    for value in [
        "",
        "  padded  ",
        "line1\nline2",
        "tab\there",
        "nul\u{0}byte",
        "quote \" backslash \\",
        "\u{2028}\u{2029}",
        "e\u{301}",
        "😀",
    ] {
        let action = ok(with_arguments(json!({ "value": value })));
        assert_eq!(action.arguments()["value"], value, "{value:?}");
    }
}

#[test]
fn argument_value_length_in_utf8_bytes() {
    assert_eq!(MAX_ARGUMENT_VALUE_BYTES, 8192);
    ok(with_arguments(json!({ "v": "x".repeat(8192) })));
    invalid(
        with_arguments(json!({ "v": "x".repeat(8193) })),
        "longer than 8192 bytes",
    );
    // 2048 × "😀" (4 bytes) = 8192 bytes; one more byte is too many.
    ok(with_arguments(json!({ "v": "😀".repeat(2048) })));
    invalid(
        with_arguments(json!({ "v": format!("{}x", "😀".repeat(2048)) })),
        "longer than 8192 bytes",
    );
    // Values are not trimmed, so surrounding spaces count.
    invalid(
        with_arguments(json!({ "v": format!(" {} ", "x".repeat(8191)) })),
        "longer than 8192 bytes",
    );
}

/// The argument text of the number written `text` in JSON, or `None` when
/// the policy refuses it (or serde_json cannot read it at all).
fn number_text(text: &str) -> Option<String> {
    let value: Value = serde_json::from_str(&format!(
        r##"{{"method":"fill","selector":"#q","arguments":{{"n":{text}}}}}"##
    ))
    .ok()?;
    match policy().authorize_action(&value) {
        Ok(action) => Some(action.arguments()["n"].clone()),
        Err(Denial::InvalidAction { reason }) => {
            assert_eq!(
                reason, "argument `n` is a number outside ±9007199254740991",
                "{text}"
            );
            None
        }
        Err(other) => panic!("{text}: {other}"),
    }
}

#[test]
fn numbers_become_their_ecmascript_text() {
    // ECMAScript's Number-to-String (RFC 8785 §3.2.2.3), whatever the
    // spelling and whatever serde_json's features.
    for (text, expected) in [
        ("0", "0"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("1", "1"),
        ("1.0", "1"),
        ("1.50", "1.5"),
        ("0.1", "0.1"),
        ("0.10000000000000001", "0.1"),
        ("1e3", "1000"),
        ("1E+3", "1000"),
        ("1000.0", "1000"),
        ("-12", "-12"),
        ("1e-6", "0.000001"),
        ("1e-7", "1e-7"),
        ("1.5e-7", "1.5e-7"),
        ("123456.789", "123456.789"),
        ("5e-324", "5e-324"),
        ("1e-400", "0"),
        ("9007199254740991", "9007199254740991"),
        ("-9007199254740991", "-9007199254740991"),
        ("9007199254740991.0", "9007199254740991"),
    ] {
        assert_eq!(number_text(text).as_deref(), Some(expected), "{text}");
    }
}

#[test]
fn numbers_beyond_the_safe_integers_are_refused() {
    for text in [
        "9007199254740992",
        "9007199254740993",
        "-9007199254740993",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "1e20",
        "1e21",
        "1.7976931348623157e308",
        "-1.7976931348623157e308",
        "1e400",
    ] {
        assert_eq!(number_text(text), None, "{text}");
    }
    assert_eq!(MAX_SAFE_INTEGER, 9_007_199_254_740_991);
}

#[test]
fn booleans_become_true_and_false() {
    let action = ok(with_arguments(json!({"yes": true, "no": false})));
    assert_eq!(action.arguments()["yes"], "true");
    assert_eq!(action.arguments()["no"], "false");
    // The string "true" and the boolean true are the same argument.
    assert_eq!(
        ok(with_arguments(json!({"yes": true}))).digest(),
        ok(with_arguments(json!({"yes": "true"}))).digest()
    );
}

#[test]
fn null_array_and_object_values_are_refused() {
    for value in [
        json!(null),
        json!([]),
        json!(["a"]),
        json!({}),
        json!({"k": "v"}),
    ] {
        invalid(
            with_arguments(json!({ "k": value })),
            "must be a string, number or boolean",
        );
    }
}

#[test]
fn argument_values_never_appear_in_denials() {
    let secret = "hunter2-secret";
    for action in [
        with_arguments(json!({ "v": format!("{secret}{}", "x".repeat(8192)) })),
        with_arguments(json!({ "bad key": secret })),
        with_arguments(json!({ "v": [secret] })),
        json!({"method": "click", "selector": "a", "arguments": {"k": secret}, "nope": 1}),
    ] {
        let denial = refused(action);
        assert!(!denial.to_string().contains(secret), "{denial}");
        assert!(!format!("{denial:?}").contains(secret), "{denial:?}");
    }
}

// ---------------------------------------------------------------------------
// Canonical JSON shape.

#[test]
fn canonical_json_sorts_argument_keys_by_utf8_bytes() {
    let action = ok(with_arguments(
        json!({"b": "2", "a": "1", "B": "0", "_": "u", "-": "h", ".": "d", "0": "z"}),
    ));
    assert_eq!(
        action.canonical_json(),
        r##"{"arguments":{"-":"h",".":"d","0":"z","B":"0","_":"u","a":"1","b":"2"},"description":"fill #q","method":"fill","selector":"#q"}"##
    );
}

#[test]
fn canonical_json_escapes_as_serde_json_does() {
    let action = ok(json!({
        "method": "type",
        "selector": "input[value=\"a\\b\"]",
        "arguments": {"text": "\n\t\"\\\u{1}\u{7f}\u{2028}é<>&/"}
    }));
    assert_eq!(
        action.canonical_json(),
        "{\"arguments\":{\"text\":\"\\n\\t\\\"\\\\\\u0001\u{7f}\u{2028}é<>&/\"},\"description\":\"type input[value=\\\"a\\\\b\\\"]\",\"method\":\"type\",\"selector\":\"input[value=\\\"a\\\\b\\\"]\"}"
    );
    // And it is valid JSON that reads back to the same values.
    let back: Value = serde_json::from_str(&action.canonical_json()).unwrap();
    assert_eq!(back, action.to_json_value());
}
