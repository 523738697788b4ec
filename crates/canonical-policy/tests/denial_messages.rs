#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Every denial that quotes untrusted text (the model's URL, host, method,
//! field names, and the resolver's error text) escapes it first and then
//! cuts it to 64 characters, so a message stays short and free of raw
//! control or bidirectional characters whatever the input.

use std::net::IpAddr;

use async_trait::async_trait;
use countersign_canonical_policy::{Denial, Policy, ResolveError, Resolver, StaticResolver};
use serde_json::json;

/// The longest message any denial may have: the longest fixed wording plus
/// two quotes of 64 characters, each with its `…`.
const MAX_MESSAGE_CHARS: usize = 200;

/// A resolver whose error text is hostile: long, with a newline and U+202E.
struct Hostile;

#[async_trait]
impl Resolver for Hostile {
    async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        Err(ResolveError::new(format!(
            "lookup of {host} failed:\n{}",
            "\u{202e}é\u{0}".repeat(5000)
        )))
    }
}

fn policy(resolver: impl Resolver + 'static) -> Policy {
    Policy::builder()
        .allow_hosts(["*.example.com", "example.com", "127.0.0.1", "[::1]"])
        .resolver(resolver)
        .build()
        .unwrap()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

/// Checks the bound and that no raw control or bidirectional character survives.
fn check(denial: &Denial, what: &str) -> usize {
    let message = denial.to_string();
    let chars = message.chars().count();
    assert!(
        chars <= MAX_MESSAGE_CHARS,
        "{what}: {chars} characters, {} bytes: {message}",
        message.len()
    );
    assert!(
        !message
            .chars()
            .any(|c| c.is_control()
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
        "{what}: raw control character in {message:?}"
    );
    chars
}

/// Hosts that pass the allow-list (`*.example.com`) and reach the resolver.
fn long_hosts() -> Vec<String> {
    let label = "a".repeat(63);
    vec![
        format!("{label}.{label}.{label}.example.com"),
        format!("{}.example.com", "xn--bcher-kva.".repeat(16)),
        format!("{}example.com", "b\u{fc}cher-\u{e9}t\u{e9}.".repeat(12)),
        format!("{}.example.com", "x".repeat(194)),
    ]
}

#[test]
fn destination_denials_quote_hosts_and_resolver_errors_cut_after_escaping() {
    let mut longest = 0;
    for host in long_hosts() {
        let url = format!("https://{host}/");
        // Resolver error, no address, non-public address, host not allowed.
        for (what, denial) in [
            (
                "resolution failed",
                block_on(policy(Hostile).authorize_destination(&url)),
            ),
            (
                "no addresses",
                block_on(policy(StaticResolver::answering_all([])).authorize_destination(&url)),
            ),
            (
                "non-public",
                block_on(
                    policy(StaticResolver::answering_all(["10.0.0.1".parse().unwrap()]))
                        .authorize_destination(&url),
                ),
            ),
            (
                "not allowed",
                block_on(
                    policy(StaticResolver::new())
                        .authorize_destination(&format!("https://{host}.evil/")),
                ),
            ),
        ] {
            let denial = denial.unwrap_err();
            longest = longest.max(check(&denial, &format!("{what} for {host}")));
        }
    }
    // A 194-character host once gave a 446-byte message; now both the host
    // and the resolver's text are cut to 64 characters.
    let denial = block_on(
        policy(Hostile).authorize_destination(&format!("https://{}.example.com/", "x".repeat(194))),
    )
    .unwrap_err();
    let message = denial.to_string();
    assert!(
        message.starts_with(&format!(
            "host `{}…` could not be resolved: lookup of ",
            "x".repeat(64)
        )),
        "{message}"
    );
    assert!(message.ends_with('…'), "{message}");
    assert!(longest > 64, "the inputs are long enough to need cutting");
}

#[test]
fn literal_and_scheme_denials_are_bounded() {
    let policy = policy(StaticResolver::new());
    for url in [
        "https://127.0.0.1/",
        "https://[::1]/",
        "https://[1:2:3:4:5:6:7:8]/",
        &format!("{}://example.com/", "x".repeat(300)),
        "https://93.184.216.34/",
    ] {
        let denial = block_on(policy.authorize_destination(url)).unwrap_err();
        check(&denial, url);
    }
}

#[test]
fn action_denials_quote_method_and_field_names_cut_after_escaping() {
    let policy = policy(StaticResolver::new());
    let hostile = [
        "é\u{202e}".repeat(64),
        "\u{0}".repeat(1000),
        "😀".repeat(1000),
        "\u{202e}".repeat(100_000),
        format!("a{}", "\n".repeat(63)),
    ];
    for text in &hostile {
        let method = policy
            .authorize_action(&json!({"method": text, "selector": "a"}))
            .unwrap_err();
        check(&method, "method");
        let mut unknown = json!({"method": "click", "selector": "a"});
        unknown[text.as_str()] = json!(1);
        check(
            &policy.authorize_action(&unknown).unwrap_err(),
            "unknown field",
        );
        let key = policy
            .authorize_action(
                &json!({"method": "fill", "selector": "a", "arguments": {text.as_str(): "v"}}),
            )
            .unwrap_err();
        check(&key, "argument key");
    }
    // 64 × `é\u{202e}` once gave a 347-byte message: escaped first, it is
    // now cut at 64 characters, between two escapes, never inside one.
    let denial = policy
        .authorize_action(&json!({"method": "é\u{202e}".repeat(64), "selector": "a"}))
        .unwrap_err();
    let Denial::MethodNotAllowed { method } = &denial else {
        panic!("{denial:?}");
    };
    assert_eq!(method, &format!("{}é…", "é\\u{202e}".repeat(7)));
    assert_eq!(method.chars().count(), 64 + 1);
}
