#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `Policy::authorize_destination`: tricks that must be refused, equivalents
//! that must canonicalise identically, host patterns, ports, schemes, the
//! resolver contract and the builder's errors.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use countersign_canonical_policy::{
    AuthorizedUrl, Denial, NOT_AUTHORIZED, Policy, PolicyBuildError, ResolveError, Resolver,
    StaticResolver,
};

const PUBLIC: &str = "93.184.216.34";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A resolver that records every name it is asked for and answers a fixed list.
#[derive(Clone, Default)]
struct Recording {
    calls: Arc<Mutex<Vec<String>>>,
    answer: Vec<IpAddr>,
}

impl Recording {
    fn answering(answer: &[&str]) -> Self {
        Recording {
            calls: Arc::default(),
            answer: answer.iter().map(|s| ip(s)).collect(),
        }
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

// `Resolver` is declared with `async_trait`; this is the signature it expands to.
impl Resolver for Recording {
    fn resolve<'life0, 'life1, 'async_trait>(
        &'life0 self,
        host: &'life1 str,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<IpAddr>, ResolveError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.calls.lock().unwrap().push(host.to_owned());
        let answer = self.answer.clone();
        Box::pin(async move { Ok(answer) })
    }
}

/// `allowed.com` only, every name answering a public address.
fn allowed_com() -> Policy {
    Policy::builder()
        .allow_host("allowed.com")
        .resolver(StaticResolver::answering_all([ip(PUBLIC)]))
        .build()
        .unwrap()
}

fn policy_with(hosts: &[&str], resolver: impl Resolver + 'static) -> Policy {
    Policy::builder()
        .allow_hosts(hosts.iter().copied())
        .resolver(resolver)
        .build()
        .unwrap()
}

async fn refused(policy: &Policy, url: &str) -> Denial {
    match policy.authorize_destination(url).await {
        Ok(ok) => panic!("{url:?} was authorised as {ok}"),
        Err(denial) => {
            assert_eq!(denial.code(), NOT_AUTHORIZED, "{url:?}");
            assert_eq!(denial.code(), "NOT_AUTHORIZED", "{url:?}");
            assert!(!denial.to_string().is_empty());
            denial
        }
    }
}

async fn accepted(policy: &Policy, url: &str) -> AuthorizedUrl {
    match policy.authorize_destination(url).await {
        Ok(ok) => ok,
        Err(denial) => panic!("{url:?} was refused: {denial}"),
    }
}

/// Refused by `allowed_com()` with a `Denial` matching the pattern; the
/// resolver is never consulted for a refused host.
macro_rules! refused_tricks {
    ($( $name:ident: $url:expr => $pattern:pat $(if $guard:expr)?, )+) => {
        mod tricks {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    let denial = refused(&allowed_com(), $url).await;
                    assert!(
                        matches!(&denial, $pattern $(if $guard)?),
                        "{:?} gave {denial:?}",
                        $url
                    );
                }
            )+
        }
    };
}

refused_tricks! {
    userinfo_naming_the_allowed_host: "https://allowed.com@evil.com/" => Denial::UserinfoPresent,
    userinfo_with_password: "https://allowed.com:443@evil.com/" => Denial::UserinfoPresent,
    userinfo_on_the_allowed_host: "https://user:secret@allowed.com/" => Denial::UserinfoPresent,
    allowed_as_a_subdomain_of_evil: "https://allowed.com.evil.com/" =>
        Denial::HostNotAllowed { host } if host == "allowed.com.evil.com",
    allowed_as_a_suffix_without_dot: "https://evilallowed.com/" =>
        Denial::HostNotAllowed { host } if host == "evilallowed.com",
    subdomain_of_an_exact_entry: "https://www.allowed.com/" =>
        Denial::HostNotAllowed { host } if host == "www.allowed.com",
    two_trailing_dots: "https://allowed.com../" =>
        Denial::HostNotAllowed { host } if host == "allowed.com.",
    backslash_before_at_is_a_path: "https://evil.com\\@allowed.com/" =>
        Denial::HostNotAllowed { host } if host == "evil.com",
    backslash_as_path_separator: "https://evil.com\\allowed.com" =>
        Denial::HostNotAllowed { host } if host == "evil.com",
    backslashes_as_authority_slashes: "https:\\\\evil.com\\@allowed.com/" =>
        Denial::HostNotAllowed { host } if host == "evil.com",
    slash_backslash: "https:/\\evil.com/allowed.com" =>
        Denial::HostNotAllowed { host } if host == "evil.com",
    tab_inside_userinfo: "https://allowed.com\t@evil.com/" => Denial::UserinfoPresent,
    newline_inside_userinfo: "https://allowed.com\n@evil.com/" => Denial::UserinfoPresent,
    newline_joins_labels: "https://allowed.com\n.evil.com/" =>
        Denial::HostNotAllowed { host } if host == "allowed.com.evil.com",
    carriage_return_joins_labels: "https://allowed.\rcom.evil.com/" =>
        Denial::HostNotAllowed { host } if host == "allowed.com.evil.com",
    tab_in_evil_host: "https://evil\t.com/allowed.com" =>
        Denial::HostNotAllowed { host } if host == "evil.com",
    percent_encoded_dot: "https://allowed%2ecom.evil.com/" =>
        Denial::HostNotAllowed { host } if host == "allowed.com.evil.com",
    percent_encoded_at: "https://allowed.com%40evil.com/" => Denial::UnparsableUrl { .. },
    fragment_before_host: "https://evil.com#@allowed.com" =>
        Denial::HostNotAllowed { host } if host == "evil.com",
    allowed_in_path_only: "https://evil.com/allowed.com" =>
        Denial::HostNotAllowed { host } if host == "evil.com",
    decimal_ipv4: "https://2130706433/" =>
        Denial::HostNotAllowed { host } if host == "127.0.0.1",
    hex_ipv4: "https://0x7f.1/" =>
        Denial::HostNotAllowed { host } if host == "127.0.0.1",
    hex_ipv4_single_number: "https://0x7f000001/" =>
        Denial::HostNotAllowed { host } if host == "127.0.0.1",
    octal_ipv4: "https://0177.0.0.1/" =>
        Denial::HostNotAllowed { host } if host == "127.0.0.1",
    short_ipv4: "https://127.1/" =>
        Denial::HostNotAllowed { host } if host == "127.0.0.1",
    dotted_ipv4: "https://127.0.0.1/" =>
        Denial::HostNotAllowed { host } if host == "127.0.0.1",
    zero_ipv4: "https://0/" =>
        Denial::HostNotAllowed { host } if host == "0.0.0.0",
    decimal_ipv4_over_http: "http://2130706433/" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "http",
    ipv4_mapped_loopback: "https://[::ffff:127.0.0.1]/" =>
        Denial::HostNotAllowed { host } if host == "[::ffff:7f00:1]",
    ipv6_loopback: "https://[::1]/" =>
        Denial::HostNotAllowed { host } if host == "[::1]",
    localhost: "https://localhost/" =>
        Denial::HostNotAllowed { host } if host == "localhost",
    javascript_url: "javascript:alert(document.domain)" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "javascript",
    javascript_url_mixed_case: "JavaScript:fetch('https://allowed.com/')" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "javascript",
    data_url: "data:text/html,<script>alert(1)</script>" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "data",
    file_url: "file:///etc/passwd" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "file",
    file_url_naming_the_host: "file://allowed.com/etc/passwd" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "file",
    ftp_url: "ftp://allowed.com/" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "ftp",
    websocket_url: "wss://allowed.com/" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "wss",
    blob_url: "blob:https://allowed.com/0e4b0d5c" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "blob",
    view_source_url: "view-source:https://allowed.com/" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "view-source",
    scheme_relative: "//allowed.com/" => Denial::UnparsableUrl { .. },
    no_scheme: "allowed.com" => Denial::UnparsableUrl { .. },
    empty: "" => Denial::UnparsableUrl { .. },
    bad_port: "https://allowed.com:99999/" => Denial::UnparsableUrl { .. },
    plain_http: "http://allowed.com/" =>
        Denial::SchemeNotAllowed { scheme } if scheme == "http",
}

#[tokio::test]
async fn refused_hosts_never_reach_the_resolver() {
    let resolver = Recording::answering(&[PUBLIC]);
    let policy = policy_with(&["allowed.com"], resolver.clone());
    for url in [
        "https://allowed.com@evil.com/",
        "https://allowed.com.evil.com/",
        "https://evilallowed.com/",
        "https://evil.com\\@allowed.com/",
        "https://2130706433/",
        "javascript:alert(1)",
        "http://allowed.com/",
        "https://[::ffff:127.0.0.1]/",
    ] {
        refused(&policy, url).await;
    }
    assert_eq!(resolver.calls(), Vec::<String>::new());
}

// ---------------------------------------------------------------------------
// The parser sees `allowed.com`: judged on that, these are allowed.

#[tokio::test]
async fn backslash_after_the_allowed_host_is_a_path() {
    let url = accepted(&allowed_com(), "https://allowed.com\\@evil.com/").await;
    assert_eq!(url.as_str(), "https://allowed.com/@evil.com/");
    assert_eq!(url.host(), "allowed.com");
}

#[tokio::test]
async fn variants_the_parser_reads_as_the_allowed_host() {
    let policy = allowed_com();
    for (input, canonical) in [
        ("https://all\towed.com/", "https://allowed.com/"),
        ("https://allowed\n.com/", "https://allowed.com/"),
        ("  https://allowed.com/\u{1}  ", "https://allowed.com/"),
        ("https:allowed.com", "https://allowed.com/"),
        ("https:/allowed.com", "https://allowed.com/"),
        ("https:\\\\allowed.com\\x", "https://allowed.com/x"),
        ("https://allowed%2Ecom/", "https://allowed.com/"),
        ("https://ａｌｌｏｗｅｄ.com/", "https://allowed.com/"),
        ("https://allowed\u{3002}com/", "https://allowed.com/"),
        (
            "https://allowed.com#@evil.com/",
            "https://allowed.com/#@evil.com/",
        ),
        (
            "https://allowed.com?@evil.com/",
            "https://allowed.com/?@evil.com/",
        ),
        (
            "https://allowed.com/?next=https://evil.com/",
            "https://allowed.com/?next=https://evil.com/",
        ),
        ("https://:@allowed.com/", "https://allowed.com/"),
    ] {
        let url = accepted(&policy, input).await;
        assert_eq!(url.as_str(), canonical, "{input:?}");
        assert_eq!(url.host(), "allowed.com", "{input:?}");
    }
}

// ---------------------------------------------------------------------------
// IP literals: only when on the list, and only when public.

#[tokio::test]
async fn listed_loopback_literal_is_refused_in_every_spelling() {
    let resolver = Recording::answering(&[PUBLIC]);
    let policy = Policy::builder()
        .allow_host("127.0.0.1")
        .allow_schemes(["http", "https"])
        .resolver(resolver.clone())
        .build()
        .unwrap();
    for url in [
        "http://2130706433/",
        "https://0x7f.1/",
        "https://0177.0.0.1/",
        "https://127.1/",
        "https://127.0.0.1/",
        "https://127.0.0.1./",
    ] {
        let denial = refused(&policy, url).await;
        assert!(
            matches!(&denial, Denial::NonPublicAddress { host, address }
                if host == "127.0.0.1" && *address == ip("127.0.0.1")),
            "{url}: {denial:?}"
        );
    }
    assert!(resolver.calls().is_empty(), "literals are not resolved");
}

#[tokio::test]
async fn listed_ipv4_mapped_literals_are_refused() {
    for (entry, url, address) in [
        (
            "[::ffff:127.0.0.1]",
            "https://[::ffff:127.0.0.1]/",
            "::ffff:127.0.0.1",
        ),
        (
            "[::ffff:93.184.216.34]",
            "https://[::ffff:5db8:d822]/",
            "::ffff:93.184.216.34",
        ),
        ("10.0.0.5", "https://10.0.0.5/", "10.0.0.5"),
        ("[fe80::1]", "https://[fe80::1]/", "fe80::1"),
    ] {
        let policy = policy_with(&[entry], StaticResolver::failing());
        let denial = refused(&policy, url).await;
        assert!(
            matches!(&denial, Denial::NonPublicAddress { address: a, .. } if *a == ip(address)),
            "{url}: {denial:?}"
        );
    }
}

#[tokio::test]
async fn listed_public_literals_are_accepted_without_resolving() {
    let policy = policy_with(
        &[PUBLIC, "[2606:2800:220:1:248:1893:25c8:1946]"],
        StaticResolver::failing(),
    );
    for (input, canonical, address) in [
        ("https://93.184.216.34/", "https://93.184.216.34/", PUBLIC),
        ("https://1572395042/a", "https://93.184.216.34/a", PUBLIC),
        (
            "https://0x5d.0xb8.0xd8.0x22/",
            "https://93.184.216.34/",
            PUBLIC,
        ),
        (
            "https://[2606:2800:0220:0001:0248:1893:25C8:1946]/",
            "https://[2606:2800:220:1:248:1893:25c8:1946]/",
            "2606:2800:220:1:248:1893:25c8:1946",
        ),
    ] {
        let url = accepted(&policy, input).await;
        assert_eq!(url.as_str(), canonical);
        assert_eq!(url.addresses(), &[ip(address)]);
    }
}

#[tokio::test]
async fn literals_and_names_do_not_stand_for_each_other() {
    // A literal entry does not admit a name resolving to it, nor the IPv4-mapped form.
    let by_literal = policy_with(&[PUBLIC], StaticResolver::answering_all([ip(PUBLIC)]));
    let denial = refused(&by_literal, "https://allowed.com/").await;
    assert!(matches!(denial, Denial::HostNotAllowed { .. }));
    let denial = refused(&by_literal, "https://[::ffff:93.184.216.34]/").await;
    assert!(
        matches!(&denial, Denial::HostNotAllowed { host } if host == "[::ffff:5db8:d822]"),
        "{denial:?}"
    );
    // A name entry does not admit the literal it resolves to.
    let denial = refused(&allowed_com(), "https://93.184.216.34/").await;
    assert!(matches!(&denial, Denial::HostNotAllowed { host } if host == PUBLIC));
}

#[tokio::test]
async fn listed_nat64_literal_follows_its_embedded_address() {
    let policy = policy_with(
        &["[64:ff9b::93.184.216.34]", "[64:ff9b::127.0.0.1]"],
        StaticResolver::failing(),
    );
    let url = accepted(&policy, "https://[64:ff9b::5db8:d822]/").await;
    assert_eq!(url.as_str(), "https://[64:ff9b::5db8:d822]/");
    let denial = refused(&policy, "https://[64:ff9b::127.0.0.1]/").await;
    assert!(matches!(denial, Denial::NonPublicAddress { .. }));
}

// ---------------------------------------------------------------------------
// What the resolver answers.

#[tokio::test]
async fn public_name_answering_loopback_is_refused() {
    let policy = policy_with(
        &["allowed.com"],
        StaticResolver::answering_all([ip("127.0.0.1")]),
    );
    let denial = refused(&policy, "https://allowed.com/").await;
    assert!(
        matches!(&denial, Denial::NonPublicAddress { host, address }
            if host == "allowed.com" && *address == ip("127.0.0.1")),
        "{denial:?}"
    );
}

#[tokio::test]
async fn mixed_answer_is_refused_naming_the_private_address() {
    let policy = policy_with(
        &["allowed.com"],
        StaticResolver::new().with_host("allowed.com", [ip(PUBLIC), ip("10.0.0.5")]),
    );
    let denial = refused(&policy, "https://allowed.com/").await;
    assert!(
        matches!(&denial, Denial::NonPublicAddress { host, address }
            if host == "allowed.com" && *address == ip("10.0.0.5")),
        "{denial:?}"
    );
    assert_eq!(
        denial.to_string(),
        "host `allowed.com` has non-public address `10.0.0.5`"
    );
}

#[tokio::test]
async fn non_public_address_anywhere_in_the_answer_is_refused() {
    for bad in [
        "10.0.0.5",
        "127.0.0.1",
        "169.254.169.254",
        "::1",
        "::ffff:93.184.216.34",
        "fe80::1",
        "fd00::1",
        "64:ff9b::a00:5",
        "2001:db8::1",
    ] {
        for answer in [
            vec![ip(bad)],
            vec![ip(bad), ip(PUBLIC)],
            vec![
                ip(PUBLIC),
                ip("2606:2800:220:1:248:1893:25c8:1946"),
                ip(bad),
            ],
        ] {
            let policy = policy_with(&["allowed.com"], StaticResolver::answering_all(answer));
            let denial = refused(&policy, "https://allowed.com/").await;
            assert!(
                matches!(&denial, Denial::NonPublicAddress { address, .. } if *address == ip(bad)),
                "{bad}: {denial:?}"
            );
        }
    }
}

#[tokio::test]
async fn empty_answer_is_refused() {
    let policy = policy_with(&["allowed.com"], StaticResolver::answering_all([]));
    let denial = refused(&policy, "https://allowed.com/").await;
    assert!(
        matches!(&denial, Denial::NoAddresses { host } if host == "allowed.com"),
        "{denial:?}"
    );
    assert_eq!(
        denial.to_string(),
        "host `allowed.com` resolved to no address"
    );
}

#[tokio::test]
async fn resolver_error_is_refused() {
    let policy = policy_with(&["allowed.com"], StaticResolver::failing());
    let denial = refused(&policy, "https://allowed.com/").await;
    assert!(
        matches!(&denial, Denial::ResolutionFailed { host, reason }
            if host == "allowed.com" && reason == "resolver is set to fail"),
        "{denial:?}"
    );
    // A static resolver that knows no answer for the name fails too.
    let policy = policy_with(
        &["allowed.com"],
        StaticResolver::new().with_host("other.com", [ip(PUBLIC)]),
    );
    let denial = refused(&policy, "https://allowed.com/").await;
    assert!(
        matches!(denial, Denial::ResolutionFailed { .. }),
        "{denial:?}"
    );
}

#[tokio::test]
async fn resolver_is_asked_for_the_ascii_name_without_trailing_dot() {
    let resolver = Recording::answering(&[PUBLIC]);
    let policy = policy_with(&["bücher.example", "allowed.com"], resolver.clone());
    accepted(&policy, "https://BÜCHER.example./").await;
    accepted(&policy, "https://ALLOWED.com.:443/").await;
    assert_eq!(resolver.calls(), ["xn--bcher-kva.example", "allowed.com"]);
}

#[tokio::test]
async fn addresses_are_sorted_and_deduplicated() {
    let policy = policy_with(
        &["allowed.com"],
        StaticResolver::answering_all([
            ip("2606:2800:220:1:248:1893:25c8:1946"),
            ip("93.184.216.35"),
            ip(PUBLIC),
            ip("93.184.216.35"),
        ]),
    );
    let url = accepted(&policy, "https://allowed.com/").await;
    assert_eq!(
        url.addresses(),
        &[
            ip(PUBLIC),
            ip("93.184.216.35"),
            ip("2606:2800:220:1:248:1893:25c8:1946")
        ]
    );
}

// ---------------------------------------------------------------------------
// The "done when" checks of issue 2.

#[tokio::test]
async fn done_when_docs_example_com_is_authorised() {
    let policy = policy_with(
        &["docs.example.com"],
        StaticResolver::answering_all([ip(PUBLIC)]),
    );
    let url = accepted(&policy, "https://docs.example.com").await;
    assert_eq!(url.as_str(), "https://docs.example.com/");
    assert_eq!(url.to_string(), "https://docs.example.com/");
    assert_eq!(url.url().as_str(), "https://docs.example.com/");
    assert_eq!(url.host(), "docs.example.com");
    assert_eq!(url.addresses(), &[ip(PUBLIC)]);
}

#[tokio::test]
async fn done_when_private_answer_is_refused() {
    let policy = policy_with(
        &["docs.example.com"],
        StaticResolver::answering_all([ip("10.0.0.1")]),
    );
    let denial = refused(&policy, "https://docs.example.com").await;
    assert!(
        matches!(&denial, Denial::NonPublicAddress { host, address }
            if host == "docs.example.com" && *address == ip("10.0.0.1")),
        "{denial:?}"
    );
}

#[tokio::test]
async fn done_when_answer_with_loopback_is_refused() {
    let policy = policy_with(
        &["docs.example.com"],
        StaticResolver::answering_all([ip(PUBLIC), ip("127.0.0.1")]),
    );
    let denial = refused(&policy, "https://docs.example.com").await;
    assert!(
        matches!(&denial, Denial::NonPublicAddress { address, .. } if *address == ip("127.0.0.1")),
        "{denial:?}"
    );
}

// ---------------------------------------------------------------------------
// Equivalent spellings: accepted and canonicalised identically.

async fn all_canonicalise_to(policy: &Policy, inputs: &[&str], canonical: &str) {
    for input in inputs {
        let url = accepted(policy, input).await;
        assert_eq!(url.as_str(), canonical, "{input:?}");
        // The canonical form re-authorises to itself.
        let again = accepted(policy, url.as_str()).await;
        assert_eq!(again, url, "{input:?}");
    }
}

#[tokio::test]
async fn case_default_port_and_dot_segments() {
    all_canonicalise_to(
        &allowed_com(),
        &[
            "HTTPS://Allowed.COM:443/a/../b",
            "https://allowed.com/b",
            "https://allowed.com/./b",
            "https://allowed.com/a/%2e%2E/b",
            "https://allowed.com:0443/b",
        ],
        "https://allowed.com/b",
    )
    .await;
}

#[tokio::test]
async fn trailing_dot_is_removed() {
    let policy = allowed_com();
    all_canonicalise_to(
        &policy,
        &[
            "https://allowed.com./",
            "https://allowed.com.",
            "https://Allowed.Com.:443/",
        ],
        "https://allowed.com/",
    )
    .await;
    let url = accepted(&policy, "https://allowed.com.:8443/x?y#z").await;
    assert_eq!(url.as_str(), "https://allowed.com:8443/x?y#z");
    assert_eq!(url.host(), "allowed.com");
}

#[tokio::test]
async fn idn_host_in_unicode_and_punycode() {
    for entry in ["bücher.example", "xn--bcher-kva.example", "BÜCHER.example."] {
        let policy = policy_with(&[entry], StaticResolver::answering_all([ip(PUBLIC)]));
        all_canonicalise_to(
            &policy,
            &[
                "https://bücher.example/",
                "https://xn--bcher-kva.example/",
                "https://BÜCHER.EXAMPLE/",
                "https://XN--BCHER-KVA.example./",
            ],
            "https://xn--bcher-kva.example/",
        )
        .await;
        let denial = refused(&policy, "https://bucher.example/").await;
        assert!(matches!(denial, Denial::HostNotAllowed { .. }));
    }
}

// ---------------------------------------------------------------------------
// Wildcards, ports, schemes.

#[tokio::test]
async fn wildcard_matches_strict_subdomains_only() {
    let policy = policy_with(
        &["*.example.com"],
        StaticResolver::answering_all([ip(PUBLIC)]),
    );
    for (input, canonical) in [
        ("https://a.example.com/", "https://a.example.com/"),
        ("https://a.b.example.com/", "https://a.b.example.com/"),
        ("https://A.Example.COM./", "https://a.example.com/"),
    ] {
        assert_eq!(accepted(&policy, input).await.as_str(), canonical);
    }
    for (input, host) in [
        ("https://example.com/", "example.com"),
        ("https://example.com./", "example.com"),
        ("https://badexample.com/", "badexample.com"),
        ("https://a.badexample.com/", "a.badexample.com"),
        ("https://a.example.com.evil.com/", "a.example.com.evil.com"),
        ("https://a.example.co/", "a.example.co"),
        ("https://example.com@a.example.com.evil.com/", ""),
    ] {
        let denial = refused(&policy, input).await;
        if host.is_empty() {
            assert!(matches!(denial, Denial::UserinfoPresent), "{input}");
        } else {
            assert!(
                matches!(&denial, Denial::HostNotAllowed { host: h } if h == host),
                "{input}: {denial:?}"
            );
        }
    }
    // The apex needs its own entry.
    let both = policy_with(
        &["*.example.com", "example.com"],
        StaticResolver::answering_all([ip(PUBLIC)]),
    );
    accepted(&both, "https://example.com/").await;
    accepted(&both, "https://a.example.com/").await;
}

#[tokio::test]
async fn wildcard_refuses_empty_labels() {
    let policy = policy_with(
        &["*.example.com"],
        StaticResolver::answering_all([ip(PUBLIC)]),
    );
    for (input, host) in [
        ("https://.example.com/", ".example.com"),
        ("https://..example.com/", "..example.com"),
        ("https://a..example.com/", "a..example.com"),
    ] {
        let denial = refused(&policy, input).await;
        assert!(
            matches!(&denial, Denial::HostNotAllowed { host: h } if h == host),
            "{input}: {denial:?}"
        );
    }
}

#[tokio::test]
async fn ports_allow_list() {
    let only_443 = Policy::builder()
        .allow_host("allowed.com")
        .allow_ports([443])
        .resolver(StaticResolver::answering_all([ip(PUBLIC)]))
        .build()
        .unwrap();
    assert_eq!(
        accepted(&only_443, "https://allowed.com:443/")
            .await
            .as_str(),
        "https://allowed.com/"
    );
    accepted(&only_443, "https://allowed.com/").await;
    let denial = refused(&only_443, "https://allowed.com:8443/").await;
    assert!(
        matches!(denial, Denial::PortNotAllowed { port: 8443 }),
        "{denial:?}"
    );
    assert_eq!(denial.to_string(), "port `8443` is not allowed");

    let only_8443 = Policy::builder()
        .allow_host("allowed.com")
        .allow_host(PUBLIC)
        .allow_ports([8443])
        .resolver(StaticResolver::answering_all([ip(PUBLIC)]))
        .build()
        .unwrap();
    assert_eq!(
        accepted(&only_8443, "https://allowed.com:8443/x")
            .await
            .as_str(),
        "https://allowed.com:8443/x"
    );
    let denial = refused(&only_8443, "https://allowed.com/").await;
    assert!(
        matches!(denial, Denial::PortNotAllowed { port: 443 }),
        "{denial:?}"
    );
    let denial = refused(&only_8443, "https://93.184.216.34:22/").await;
    assert!(
        matches!(denial, Denial::PortNotAllowed { port: 22 }),
        "{denial:?}"
    );

    let http_443 = Policy::builder()
        .allow_host("allowed.com")
        .allow_schemes(["http", "https"])
        .allow_ports([443])
        .resolver(StaticResolver::answering_all([ip(PUBLIC)]))
        .build()
        .unwrap();
    let denial = refused(&http_443, "http://allowed.com/").await;
    assert!(
        matches!(denial, Denial::PortNotAllowed { port: 80 }),
        "{denial:?}"
    );

    // Without an allow-list any port goes.
    assert_eq!(
        accepted(&allowed_com(), "https://allowed.com:8443/")
            .await
            .as_str(),
        "https://allowed.com:8443/"
    );
}

#[tokio::test]
async fn http_only_when_allowed() {
    let denial = refused(&allowed_com(), "http://allowed.com/").await;
    assert!(matches!(&denial, Denial::SchemeNotAllowed { scheme } if scheme == "http"));
    assert_eq!(denial.to_string(), "scheme `http` is not allowed");

    let both = Policy::builder()
        .allow_host("allowed.com")
        .allow_schemes(["http", "https"])
        .resolver(StaticResolver::answering_all([ip(PUBLIC)]))
        .build()
        .unwrap();
    assert_eq!(
        accepted(&both, "http://allowed.com/").await.as_str(),
        "http://allowed.com/"
    );
    assert_eq!(
        accepted(&both, "HTTP://Allowed.com:80/").await.as_str(),
        "http://allowed.com/"
    );
    assert_eq!(
        accepted(&both, "https://allowed.com/").await.as_str(),
        "https://allowed.com/"
    );
    // Schemes other than http(s) stay refused.
    let denial = refused(&both, "ftp://allowed.com/").await;
    assert!(matches!(denial, Denial::SchemeNotAllowed { .. }));

    let http_only = Policy::builder()
        .allow_host("allowed.com")
        .allow_schemes([" HTTP "])
        .resolver(StaticResolver::answering_all([ip(PUBLIC)]))
        .build()
        .unwrap();
    accepted(&http_only, "http://allowed.com/").await;
    let denial = refused(&http_only, "https://allowed.com/").await;
    assert!(matches!(&denial, Denial::SchemeNotAllowed { scheme } if scheme == "https"));
}

// ---------------------------------------------------------------------------
// Builder errors.

#[test]
fn empty_allow_list_is_a_build_error() {
    let resolver = || StaticResolver::answering_all([ip(PUBLIC)]);
    assert_eq!(
        Policy::builder().resolver(resolver()).build().unwrap_err(),
        PolicyBuildError::NoAllowedHosts
    );
    assert_eq!(
        Policy::builder()
            .allow_hosts(Vec::<String>::new())
            .resolver(resolver())
            .build()
            .unwrap_err(),
        PolicyBuildError::NoAllowedHosts
    );
    assert_eq!(
        Policy::builder().build().unwrap_err(),
        PolicyBuildError::NoAllowedHosts
    );
    assert_eq!(
        PolicyBuildError::NoAllowedHosts.to_string(),
        "at least one allowed host is required"
    );
}

#[test]
fn missing_resolver_is_a_build_error() {
    assert_eq!(
        Policy::builder()
            .allow_host("allowed.com")
            .build()
            .unwrap_err(),
        PolicyBuildError::NoResolver
    );
}

#[test]
fn unsupported_or_empty_schemes_are_build_errors() {
    for scheme in ["ftp", "javascript", "file", "data", "wss", "", "https "] {
        let result = Policy::builder()
            .allow_host("allowed.com")
            .allow_schemes(["https", scheme])
            .resolver(StaticResolver::new())
            .build();
        if scheme.trim() == "https" {
            assert!(result.is_ok(), "{scheme:?}");
        } else {
            assert_eq!(
                result.unwrap_err(),
                PolicyBuildError::UnsupportedScheme(scheme.to_owned()),
                "{scheme:?}"
            );
        }
    }
    assert_eq!(
        Policy::builder()
            .allow_host("allowed.com")
            .allow_schemes(Vec::<String>::new())
            .resolver(StaticResolver::new())
            .build()
            .unwrap_err(),
        PolicyBuildError::NoSchemes
    );
}

#[test]
fn invalid_host_entries_are_build_errors() {
    for entry in [
        "",
        "   ",
        "*",
        "*.",
        "*.*.example.com",
        "a*.example.com",
        "*example.com",
        "allowed.com/path",
        "allowed.com:443",
        "https://allowed.com",
        "user@allowed.com",
        "exa mple.com",
        "::1",
        "[::1",
        "*.127.0.0.1",
        "*.[::1]",
        ".",
        "..",
        ".allowed.com",
        "allowed..com",
        "*..example.com",
        "allowed.com..",
    ] {
        let result = Policy::builder()
            .allow_host("good.example")
            .allow_host(entry)
            .resolver(StaticResolver::new())
            .build();
        assert!(
            matches!(&result, Err(PolicyBuildError::InvalidHost { entry: e, .. }) if e == entry),
            "{entry:?}: {result:?}"
        );
    }
}

#[test]
fn valid_host_entries_build() {
    for entry in [
        "allowed.com",
        " Allowed.COM. ",
        "*.example.com",
        "bücher.example",
        "93.184.216.34",
        "[2606:2800:220:1:248:1893:25c8:1946]",
        "localhost",
    ] {
        let result = Policy::builder()
            .allow_host(entry)
            .resolver(StaticResolver::new())
            .build();
        assert!(result.is_ok(), "{entry:?}: {result:?}");
    }
}

#[test]
fn method_and_port_settings_are_checked() {
    let base = || {
        Policy::builder()
            .allow_host("allowed.com")
            .resolver(StaticResolver::new())
    };
    assert_eq!(
        base()
            .allow_methods(Vec::<String>::new())
            .build()
            .unwrap_err(),
        PolicyBuildError::NoMethods
    );
    for bad in ["", "cl ick", "click()", "clíck"] {
        assert_eq!(
            base().allow_methods(["click", bad]).build().unwrap_err(),
            PolicyBuildError::InvalidMethod(bad.to_owned()),
            "{bad:?}"
        );
    }
    assert_eq!(
        base().allow_ports([]).build().unwrap_err(),
        PolicyBuildError::NoPorts
    );
    let policy = base().allow_methods([" Submit ", "click"]).build().unwrap();
    let mut methods: Vec<&str> = policy.allowed_methods().collect();
    methods.sort_unstable();
    assert_eq!(methods, ["click", "submit"]);
}

#[test]
fn policy_is_cheap_to_clone_and_debuggable() {
    let policy = allowed_com();
    let copy = policy.clone();
    let shown = format!("{copy:?}");
    assert!(shown.contains("allowed.com"), "{shown}");
    assert!(format!("{:?}", Policy::builder().allow_host("x.example")).contains("x.example"));
}
