#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The published digest vectors in `docs/digest-vectors.json` are reproduced
//! exactly by the crate, and every digest is re-checked with `sha2` directly.

use std::collections::BTreeSet;

use countersign_canonical_policy::{Action, ActionDigest, Policy, StaticResolver};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const VECTORS: &str = include_str!("../../../docs/digest-vectors.json");

const DESIGN_CANONICAL: &str =
    r#"{"arguments":{},"description":"click a#docs","method":"click","selector":"a#docs"}"#;
const DESIGN_DIGEST: &str = "cecff7f76758bc956b845d97c1ea48bd3a553050b866370981447cdfad0f998d";

struct Vector {
    name: String,
    input: Value,
    canonical_json: String,
    sha256: String,
}

fn vectors() -> Vec<Vector> {
    let file: Value = serde_json::from_str(VECTORS).unwrap();
    file["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| Vector {
            name: v["name"].as_str().unwrap().to_owned(),
            input: v["input"].clone(),
            canonical_json: v["canonical_json"].as_str().unwrap().to_owned(),
            sha256: v["sha256"].as_str().unwrap().to_owned(),
        })
        .collect()
}

/// SHA-256 in lower-case hex, computed without the crate.
fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn policy() -> Policy {
    Policy::builder()
        .allow_host("docs.example.com")
        .resolver(StaticResolver::new())
        .build()
        .unwrap()
}

#[test]
fn design_vector_literal_is_sha256_of_its_canonical_json() {
    assert_eq!(sha256_hex(DESIGN_CANONICAL), DESIGN_DIGEST);
    let action = policy()
        .authorize_action(&json!({"method": "click", "selector": "a#docs"}))
        .unwrap();
    assert_eq!(action.canonical_json(), DESIGN_CANONICAL);
    assert_eq!(action.digest().to_hex(), DESIGN_DIGEST);
    assert_eq!(
        action.digest().as_bytes(),
        Sha256::digest(DESIGN_CANONICAL.as_bytes()).as_slice()
    );
}

#[test]
fn design_vector_is_published() {
    let design = vectors()
        .into_iter()
        .find(|v| v.input == json!({"method": "click", "selector": "a#docs"}))
        .expect("the DESIGN §2 example is among the vectors");
    assert_eq!(design.canonical_json, DESIGN_CANONICAL);
    assert_eq!(design.sha256, DESIGN_DIGEST);
}

#[test]
fn every_vector_is_reproduced_exactly() {
    let policy = policy();
    for v in vectors() {
        let action = policy
            .authorize_action(&v.input)
            .unwrap_or_else(|e| panic!("vector {}: refused: {e}", v.name));
        assert_eq!(
            action.canonical_json(),
            v.canonical_json,
            "vector {}",
            v.name
        );
        assert_eq!(action.digest().to_hex(), v.sha256, "vector {}", v.name);
        assert_eq!(
            sha256_hex(&v.canonical_json),
            v.sha256,
            "vector {}: independent sha256",
            v.name
        );
        assert_eq!(
            v.sha256.parse::<ActionDigest>().unwrap(),
            action.digest(),
            "vector {}",
            v.name
        );
        assert_eq!(
            Action::from_canonical_json(&v.canonical_json).unwrap(),
            action,
            "vector {}",
            v.name
        );
    }
}

/// The numbers the issue asks the vectors to pin, each with a text or a refusal.
const REQUIRED_NUMBERS: [&str; 15] = [
    "0",
    "-0",
    "1",
    "1.0",
    "1.5",
    "0.1",
    "1e3",
    "1e20",
    "1e21",
    "1e-6",
    "1e-7",
    "5e-324",
    "1.7976931348623157e308",
    "9007199254740993",
    "18446744073709551616",
];

#[test]
fn every_number_vector_is_reproduced_exactly() {
    let file: Value = serde_json::from_str(VECTORS).unwrap();
    let vectors = file["number_vectors"].as_array().unwrap();
    let policy = policy();
    for v in vectors {
        let number = v["number"].as_str().unwrap();
        let name = v["name"].as_str().unwrap();
        assert_eq!(name, format!("number {number}"));
        // The number is written verbatim into the JSON text, so the parser
        // sees exactly this spelling.
        let text = format!(r##"{{"method":"fill","selector":"#n","arguments":{{"n":{number}}}}}"##);
        let parsed = serde_json::from_str::<Value>(&text);
        if let Some(reason) = v.get("refused") {
            let parsed = match parsed {
                Ok(parsed) => parsed,
                Err(_) if v["parser_may_refuse"] == json!(true) => continue,
                Err(e) => panic!("{name}: does not parse: {e}"),
            };
            let denial = policy.authorize_action(&parsed).unwrap_err();
            assert_eq!(
                denial.to_string(),
                format!("action is invalid: {}", reason.as_str().unwrap()),
                "{name}"
            );
            continue;
        }
        let action = policy
            .authorize_action(&parsed.unwrap())
            .unwrap_or_else(|e| panic!("{name}: refused: {e}"));
        assert_eq!(
            action.arguments()["n"],
            v["text"].as_str().unwrap(),
            "{name}"
        );
        let canonical = v["canonical_json"].as_str().unwrap();
        assert_eq!(action.canonical_json(), canonical, "{name}");
        assert_eq!(
            action.digest().to_hex(),
            v["sha256"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            sha256_hex(canonical),
            v["sha256"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(Action::from_canonical_json(canonical).unwrap(), action);
    }
    for number in REQUIRED_NUMBERS {
        assert!(
            vectors.iter().any(|v| v["number"] == json!(number)),
            "no vector for {number}"
        );
    }
}

#[test]
fn vector_file_is_well_formed() {
    let vectors = vectors();
    assert!(vectors.len() >= 12, "only {} vectors", vectors.len());
    let names: BTreeSet<&str> = vectors.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names.len(), vectors.len(), "vector names repeat");
    for v in &vectors {
        assert_eq!(v.sha256.len(), 64, "vector {}", v.name);
        assert!(
            v.sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "vector {}",
            v.name
        );
    }
    // Equal digests exactly when the canonical JSON is equal.
    for a in &vectors {
        for b in &vectors {
            assert_eq!(
                a.sha256 == b.sha256,
                a.canonical_json == b.canonical_json,
                "{} / {}",
                a.name,
                b.name
            );
        }
    }
}

#[test]
fn vectors_cover_the_rules() {
    let vectors = vectors();
    let any = |what: &str, f: &dyn Fn(&Vector) -> bool| {
        assert!(vectors.iter().any(f), "no vector covers {what}");
    };
    let input_str =
        |v: &Vector, key: &str| v.input.get(key).and_then(Value::as_str).map(str::to_owned);
    any("an upper-case method", &|v| {
        input_str(v, "method").is_some_and(|m| m.chars().any(|c| c.is_ascii_uppercase()))
    });
    any("whitespace to trim", &|v| {
        input_str(v, "selector").is_some_and(|s| s.trim() != s)
    });
    any("an explicit description", &|v| {
        input_str(v, "description").is_some_and(|d| !d.trim().is_empty())
    });
    any("a blank description", &|v| {
        input_str(v, "description").is_some_and(|d| d.trim().is_empty())
    });
    any("null description and arguments", &|v| {
        v.input.get("description") == Some(&Value::Null)
            && v.input.get("arguments") == Some(&Value::Null)
    });
    let argument = |v: &Vector, f: &dyn Fn(&Value) -> bool| {
        v.input
            .get("arguments")
            .and_then(Value::as_object)
            .is_some_and(|m| m.values().any(f))
    };
    any("a number argument", &|v| argument(v, &Value::is_number));
    any("a fractional number argument", &|v| {
        argument(v, &Value::is_f64)
    });
    any("a boolean argument", &|v| argument(v, &Value::is_boolean));
    any("an escaped newline", &|v| v.canonical_json.contains("\\n"));
    any("an escaped quote", &|v| v.canonical_json.contains("\\\""));
    any("an escaped backslash", &|v| {
        v.canonical_json.contains("\\\\")
    });
    any("a \\u00XX escape", &|v| {
        v.canonical_json.contains("\\u0001")
    });
    any("raw U+2028", &|v| v.canonical_json.contains('\u{2028}'));
    any("raw non-ASCII", &|v| v.canonical_json.contains('😀'));
    any("keys sorted by bytes", &|v| {
        v.canonical_json
            .contains(r#""B":"0","_":"u","a":"1","b":"2""#)
    });
    let by_name = |name: &str| vectors.iter().find(|v| v.name == name).unwrap();
    // Trimming and lower-casing lead to the design example's digest; NFC and NFD do not meet.
    assert_eq!(by_name("trim-and-lowercase").sha256, DESIGN_DIGEST);
    assert_ne!(by_name("nfc").sha256, by_name("nfd").sha256);
}
