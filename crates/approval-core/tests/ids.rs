#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Generated ids, model-given id parsing and host id validation.

use std::collections::HashSet;

use countersign_approval_core::{
    ActorId, ApprovalId, ApproverId, AttemptId, MAX_HOST_ID_BYTES, OperationId, RunId,
};
use proptest::prelude::*;

fn is_lower_hex(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[test]
fn generated_approval_ids_are_apr_and_32_lower_case_hex() {
    for _ in 0..200 {
        let id = ApprovalId::generate().unwrap();
        let text = id.as_str();
        assert_eq!(text.len(), 36, "{text}");
        let hex = text.strip_prefix("apr_").expect("prefix");
        assert_eq!(hex.len(), 32);
        assert!(is_lower_hex(hex), "{text}");
        assert_eq!(
            ApprovalId::parse(text),
            Some(id.clone()),
            "a generated id parses"
        );
        assert_eq!(id.to_string(), text);
    }
    assert_eq!(ApprovalId::PREFIX, "apr_");
}

#[test]
fn other_generated_ids_have_their_prefix() {
    let attempt = AttemptId::generate().unwrap();
    let operation = OperationId::generate().unwrap();
    assert!(attempt.as_str().starts_with("att_"));
    assert!(operation.as_str().starts_with("op_"));
    assert!(is_lower_hex(&attempt.as_str()[4..]) && attempt.as_str().len() == 36);
    assert!(is_lower_hex(&operation.as_str()[3..]) && operation.as_str().len() == 35);
}

#[test]
fn generated_ids_are_unique() {
    let ids: HashSet<String> = (0..10_000)
        .map(|_| ApprovalId::generate().unwrap().as_str().to_owned())
        .collect();
    assert_eq!(ids.len(), 10_000);
    let attempts: HashSet<AttemptId> = (0..1_000).map(|_| AttemptId::generate().unwrap()).collect();
    assert_eq!(attempts.len(), 1_000);
}

#[test]
fn generated_ids_use_every_hex_digit() {
    // 128 random bits per id: over 100 ids every nibble value shows up.
    let seen: HashSet<u8> = (0..100)
        .flat_map(|_| {
            ApprovalId::generate().unwrap().as_str()[4..]
                .bytes()
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(seen.len(), 16);
}

#[test]
fn parse_edge_cases() {
    for ok in [
        "a",
        "A",
        "0",
        "_",
        "-",
        "apr_x",
        "APR-123_abc",
        &"z".repeat(128),
    ] {
        assert!(ApprovalId::parse(ok).is_some(), "{ok:?} should parse");
        assert_eq!(ApprovalId::parse(ok).unwrap().as_str(), ok);
    }
    for bad in [
        "",
        &"z".repeat(129),
        "apr 1",
        " apr_1",
        "apr_1\n",
        "apr.1",
        "apr/1",
        "apr:1",
        "ä",
        "apr_١",
        "apr_\u{0}",
        "{apr_1}",
        "apr_1*",
    ] {
        assert!(ApprovalId::parse(bad).is_none(), "{bad:?} should not parse");
    }
    assert!(AttemptId::parse("att_retry-1").is_some());
    assert!(OperationId::parse("op 1").is_none());
}

proptest! {
    #[test]
    fn parse_accepts_exactly_the_token_shape(text in "[A-Za-z0-9_-]{1,128}") {
        let id = ApprovalId::parse(&text);
        prop_assert_eq!(id.map(|id| id.as_str().to_owned()), Some(text));
    }

    #[test]
    fn parse_rejects_any_other_text(text in any::<String>()) {
        let shaped = (1..=128).contains(&text.len())
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        prop_assert_eq!(ApprovalId::parse(&text).is_some(), shaped);
    }

    #[test]
    fn parse_rejects_a_token_with_one_foreign_character(
        prefix in "[A-Za-z0-9_-]{0,60}",
        foreign in any::<char>().prop_filter("not a token character", |c| {
            !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        }),
        suffix in "[A-Za-z0-9_-]{0,60}",
    ) {
        let text = format!("{prefix}{foreign}{suffix}");
        prop_assert!(ApprovalId::parse(&text).is_none(), "{:?} parsed", text);
    }

    #[test]
    fn parse_rejects_tokens_longer_than_128(text in "[A-Za-z0-9_-]{129,300}") {
        prop_assert!(ApprovalId::parse(&text).is_none());
    }

    #[test]
    fn host_ids_refuse_every_control_character_anywhere(
        prefix in "[^\\x00-\\x1f\\x7f-\\x9f]{0,20}",
        control in prop_oneof![0u32..=0x1f, 0x7fu32..=0x9f],
        suffix in "[^\\x00-\\x1f\\x7f-\\x9f]{0,20}",
    ) {
        let control = char::from_u32(control).unwrap();
        let text = format!("{prefix}{control}{suffix}");
        prop_assert_eq!(
            ActorId::new(text.clone()).unwrap_err().to_string(),
            "actor id must be 1 to 256 bytes without control characters"
        );
        prop_assert_eq!(
            RunId::new(text.clone()).unwrap_err().to_string(),
            "run id must be 1 to 256 bytes without control characters"
        );
        prop_assert_eq!(
            ApproverId::new(text).unwrap_err().to_string(),
            "approver id must be 1 to 256 bytes without control characters"
        );
    }

    #[test]
    fn host_ids_accept_printable_text_up_to_256_bytes(text in "[^\\x00-\\x1f\\x7f-\\x9f]{1,64}") {
        prop_assume!(text.len() <= MAX_HOST_ID_BYTES);
        let actor = ActorId::new(text.clone()).unwrap();
        prop_assert_eq!(actor.as_str(), text.as_str());
        let run = RunId::new(text.clone()).unwrap();
        prop_assert_eq!(run.as_str(), text.as_str());
        let approver = ApproverId::new(text.clone()).unwrap();
        prop_assert_eq!(approver.as_str(), text.as_str());
    }
}

#[test]
fn host_ids_refuse_exactly_the_control_characters() {
    // Every code point from U+0000 to U+00A0 after `id`: exactly C0, DEL
    // and C1 are refused; space, printable ASCII and U+00A0 are accepted.
    for code in 0..=0xa0u32 {
        let c = char::from_u32(code).unwrap();
        let control = code <= 0x1f || (0x7f..=0x9f).contains(&code);
        let text = format!("id{c}");
        assert_eq!(ActorId::new(text.clone()).is_err(), control, "U+{code:04X}");
        assert_eq!(RunId::new(text.clone()).is_err(), control, "U+{code:04X}");
        assert_eq!(ApproverId::new(text).is_err(), control, "U+{code:04X}");
    }
}

#[test]
fn host_ids_are_non_empty_at_most_256_bytes_without_control_characters() {
    assert_eq!(MAX_HOST_ID_BYTES, 256);
    let longest = "a".repeat(256);
    let too_long = "a".repeat(257);
    // 128 two-byte characters are 256 bytes; one more is 258.
    let longest_multibyte = "é".repeat(128);
    let too_long_multibyte = "é".repeat(129);

    assert!(ActorId::new(&*longest).is_ok());
    assert!(RunId::new(&*longest).is_ok());
    assert!(ActorId::new(&*longest_multibyte).is_ok());
    assert!(RunId::new(&*longest_multibyte).is_ok());

    for bad in [
        String::new(),
        too_long,
        too_long_multibyte,
        "tab\there".to_owned(),
        "new\nline".to_owned(),
        "nul\0".to_owned(),
        "escape\u{1b}[0m".to_owned(),
        "delete\u{7f}".to_owned(),
        "\r".to_owned(),
        "next line\u{85}".to_owned(),
        "c1 \u{80}".to_owned(),
        "csi\u{9b}31m".to_owned(),
        "apc\u{9f}".to_owned(),
    ] {
        let actor = ActorId::new(bad.clone());
        let run = RunId::new(bad.clone());
        assert!(actor.is_err(), "actor {bad:?} accepted");
        assert!(run.is_err(), "run {bad:?} accepted");
        assert_eq!(
            actor.unwrap_err().to_string(),
            "actor id must be 1 to 256 bytes without control characters"
        );
        assert_eq!(
            run.unwrap_err().to_string(),
            "run id must be 1 to 256 bytes without control characters"
        );
    }

    // Spaces, punctuation and non-ASCII text are fine.
    for good in ["user 42", "tenant/acme:user@example.com", "ユーザー", "a"] {
        assert_eq!(ActorId::new(good).unwrap().as_str(), good);
        assert_eq!(RunId::new(good).unwrap().to_string(), good);
    }
}
