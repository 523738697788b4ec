#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! `PolicyBuilder::allow_special_use`: named special-use ranges pass the
//! public-address check, nothing else does; and `Policy::allows_scheme`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use countersign_canonical_policy::{Denial, Policy, PolicyBuildError, StaticResolver, is_public};
use proptest::prelude::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

fn policy(hosts: &[&str], ranges: &[&str], answer: &[&str]) -> Policy {
    let mut builder = Policy::builder()
        .allow_hosts(hosts.iter().copied())
        .allow_schemes(["http", "https"])
        .resolver(StaticResolver::answering_all(answer.iter().map(|a| ip(a))));
    for range in ranges {
        builder = builder.allow_special_use(*range);
    }
    builder.build().unwrap()
}

fn build_error(range: &str) -> PolicyBuildError {
    Policy::builder()
        .allow_host("site.test")
        .allow_special_use(range)
        .resolver(StaticResolver::new())
        .build()
        .unwrap_err()
}

async fn assert_non_public(policy: &Policy, url: &str, host: &str, address: &str) {
    assert_eq!(
        policy.authorize_destination(url).await.unwrap_err(),
        Denial::NonPublicAddress {
            host: host.into(),
            address: ip(address)
        },
        "{url} answering {address}"
    );
}

#[tokio::test]
async fn loopback_site_passes_only_with_its_range() {
    let url = "http://site.test/";
    let without = policy(&["site.test"], &[], &["127.0.0.2"]);
    assert_non_public(&without, url, "site.test", "127.0.0.2").await;
    let with = policy(&["site.test"], &["127.0.0.2/32"], &["127.0.0.2"]);
    let ok = with.authorize_destination(url).await.unwrap();
    assert_eq!(ok.as_str(), "http://site.test/");
    assert_eq!(ok.addresses(), [ip("127.0.0.2")]);
}

#[tokio::test]
async fn other_loopback_addresses_stay_refused() {
    for answer in [
        "127.0.0.1",
        "127.0.0.3",
        "::1",
        "::ffff:127.0.0.2",
        "10.0.0.1",
    ] {
        let policy = policy(&["site.test"], &["127.0.0.2/32"], &[answer]);
        assert_non_public(&policy, "http://site.test/", "site.test", answer).await;
    }
}

#[tokio::test]
async fn every_address_of_the_answer_must_pass() {
    let policy = policy(
        &["site.test"],
        &["127.0.0.2/32"],
        &["127.0.0.2", "93.184.216.34", "127.0.0.1"],
    );
    assert_non_public(&policy, "http://site.test/", "site.test", "127.0.0.1").await;
    let mixed = policy_mixed();
    let ok = mixed
        .authorize_destination("http://site.test/")
        .await
        .unwrap();
    assert_eq!(ok.addresses(), [ip("10.9.8.7"), ip("93.184.216.34")]);
}

fn policy_mixed() -> Policy {
    policy(
        &["site.test"],
        &["10.0.0.0/8"],
        &["93.184.216.34", "10.9.8.7"],
    )
}

#[tokio::test]
async fn ip_literal_must_still_be_on_the_host_list() {
    let policy = policy(
        &["127.0.0.2", "site.test"],
        &["127.0.0.0/8"],
        &["127.0.0.2"],
    );
    let ok = policy
        .authorize_destination("http://127.0.0.2:8080/x")
        .await
        .unwrap();
    assert_eq!(ok.as_str(), "http://127.0.0.2:8080/x");
    assert_eq!(ok.addresses(), [ip("127.0.0.2")]);
    assert_eq!(
        policy
            .authorize_destination("http://127.0.0.3/")
            .await
            .unwrap_err(),
        Denial::HostNotAllowed {
            host: "127.0.0.3".into()
        }
    );
    // A listed literal outside the range is still refused as non-public.
    let narrow = self::policy(&["127.0.0.1"], &["127.0.0.2/32"], &[]);
    assert_non_public(&narrow, "http://127.0.0.1/", "127.0.0.1", "127.0.0.1").await;
}

#[tokio::test]
async fn ipv6_ranges_work_in_their_own_family() {
    let policy = policy(&["site.test", "[fd00::5]"], &["fd00::/8"], &["fd12::1"]);
    let ok = policy
        .authorize_destination("http://site.test/")
        .await
        .unwrap();
    assert_eq!(ok.addresses(), [ip("fd12::1")]);
    assert!(
        policy
            .authorize_destination("http://[fd00::5]/")
            .await
            .is_ok()
    );
}

#[test]
fn malformed_ranges_are_build_errors() {
    for (range, reason) in [
        (
            "127.0.0.2",
            "expected an IP address, `/` and a prefix length",
        ),
        ("localhost/8", "expected an IP address before `/`"),
        ("[::1]/128", "expected an IP address before `/`"),
        ("127.0.0.2/33", "prefix length must be 0 to 32"),
        ("127.0.0.2/+32", "prefix length must be 0 to 32"),
        ("127.0.0.2/", "prefix length must be 0 to 32"),
        ("::1/129", "prefix length must be 0 to 128"),
        ("127.0.0.1/8", "address has bits set after the prefix"),
        ("10.0.0.0/7", "it holds public address `11.0.0.0`"),
        ("0.0.0.0/0", "it holds public address `1.0.0.0`"),
        (
            "93.184.216.34/32",
            "it holds public address `93.184.216.34`",
        ),
        ("192.0.0.0/24", "it holds public address `192.0.0.9`"),
        ("::/0", "it holds public address `64:ff9b::100:0`"),
        ("64:ff9b::/96", "it holds public address `64:ff9b::100:0`"),
        ("2001::/16", "it holds public address `2001:1::1`"),
    ] {
        assert_eq!(
            build_error(range),
            PolicyBuildError::InvalidSpecialUseRange {
                range: range.into(),
                reason: reason.into()
            },
            "{range}"
        );
    }
    assert_eq!(
        build_error("10.0.0.0/7").to_string(),
        "special-use range `10.0.0.0/7` is invalid: it holds public address `11.0.0.0`"
    );
}

#[test]
fn non_public_blocks_are_accepted() {
    for range in [
        "127.0.0.0/8",
        "127.0.0.2/32",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.169.254/32",
        "224.0.0.0/3",
        "0.0.0.0/8",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
        "64:ff9b::a00:0/104",
        "::ffff:0:0/96",
        "2001:db8::/32",
    ] {
        Policy::builder()
            .allow_host("site.test")
            .allow_special_use(range)
            .resolver(StaticResolver::new())
            .build()
            .unwrap_or_else(|e| panic!("{range}: {e}"));
    }
}

fn network(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
        }
    }
}

/// A random range, biased towards non-public space so that many build.
fn range() -> impl Strategy<Value = (IpAddr, u8)> {
    let v4 = (
        prop_oneof![
            Just(0x7f00_0000u32),
            Just(0x0a00_0000),
            Just(0xc0a8_0000),
            Just(0xc000_0000),
            any::<u32>()
        ],
        any::<u32>(),
        0u8..=32,
    )
        .prop_map(|(base, noise, len)| {
            let addr = IpAddr::V4(Ipv4Addr::from(base | (noise & 0x00ff_ffff)));
            (network(addr, len), len)
        });
    let v6 = (
        prop_oneof![
            Just(0xfd00u128 << 112),
            Just(1u128),
            Just(0x0064_ff9b_u128 << 96),
            Just(0x2001u128 << 112),
            any::<u128>()
        ],
        any::<u128>(),
        0u8..=128,
    )
        .prop_map(|(base, noise, len)| {
            let addr = IpAddr::V6(Ipv6Addr::from(base | (noise >> 16)));
            (network(addr, len), len)
        });
    prop_oneof![v4, v6]
}

fn pick_inside(net: IpAddr, len: u8, noise: u128) -> IpAddr {
    match net {
        IpAddr::V4(a) => {
            let host = u32::MAX.checked_shr(u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) | (noise as u32 & host)))
        }
        IpAddr::V6(a) => {
            let host = u128::MAX.checked_shr(u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) | (noise & host)))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A range builds exactly when none of its addresses is public; a
    /// resolver answer passes exactly when each address is public or inside.
    #[test]
    fn only_public_or_allowed_addresses_pass(
        (net, len) in range(),
        noise in any::<u128>(),
        other in any::<u128>(),
        other_v4 in any::<u32>(),
    ) {
        let text = format!("{net}/{len}");
        let built = Policy::builder()
            .allow_host("site.test")
            .allow_special_use(text.clone())
            .resolver(StaticResolver::answering_all([pick_inside(net, len, noise)]))
            .build();
        let inside = pick_inside(net, len, noise);
        match built {
            Err(PolicyBuildError::InvalidSpecialUseRange { range, reason }) => {
                prop_assert_eq!(range, text);
                let public: IpAddr = reason
                    .strip_prefix("it holds public address `").unwrap()
                    .strip_suffix('`').unwrap()
                    .parse().unwrap();
                prop_assert!(is_public(public));
                prop_assert_eq!(network(public, len), net);
            }
            Err(other) => prop_assert!(false, "unexpected {other:?}"),
            Ok(policy) => {
                prop_assert!(!is_public(inside));
                let ok = block_on(policy.authorize_destination("https://site.test/")).unwrap();
                prop_assert_eq!(ok.addresses(), [inside]);
                for candidate in [IpAddr::V6(Ipv6Addr::from(other)), IpAddr::V4(Ipv4Addr::from(other_v4))] {
                    let expect_pass = is_public(candidate)
                        || (candidate.is_ipv4() == net.is_ipv4() && network(candidate, len) == net);
                    let policy = Policy::builder()
                        .allow_host("site.test")
                        .allow_special_use(text.clone())
                        .resolver(StaticResolver::answering_all([inside, candidate]))
                        .build()
                        .unwrap();
                    let result = block_on(policy.authorize_destination("https://site.test/"));
                    prop_assert_eq!(result.is_ok(), expect_pass, "{}", candidate);
                }
            }
        }
    }

    /// Scanning a whole small range agrees with the build decision.
    #[test]
    fn build_decision_matches_an_exhaustive_scan(base in any::<u32>(), len in 20u8..=32) {
        let net = network(IpAddr::V4(Ipv4Addr::from(base)), len);
        let any_public = (0..(1u64 << (32 - len)))
            .any(|i| is_public(pick_inside(net, len, u128::from(i))));
        let built = Policy::builder()
            .allow_host("site.test")
            .allow_special_use(format!("{net}/{len}"))
            .resolver(StaticResolver::new())
            .build();
        prop_assert_eq!(built.is_err(), any_public);
    }
}

#[test]
fn allows_scheme_reports_the_scheme_set() {
    let https_only = Policy::builder()
        .allow_host("site.test")
        .resolver(StaticResolver::new())
        .build()
        .unwrap();
    assert!(https_only.allows_scheme("https"));
    assert!(https_only.allows_scheme("HTTPS"));
    assert!(!https_only.allows_scheme("http"));
    let both = policy(&["site.test"], &[], &[]);
    assert!(both.allows_scheme("http") && both.allows_scheme("https"));
    assert!(!both.allows_scheme("ws"));
}
