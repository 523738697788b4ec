#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Property: the guard refuses a request or tunnel exactly when the policy
//! denies its destination, and records the policy's own reason.

mod support;

use countersign_canonical_policy::Policy;
use countersign_egress_guard::EgressGuard;
use proptest::prelude::*;
use support::*;

fn host() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "site.test",
        "SITE.test",
        "site.test.",
        "cdn.test",
        "evil.test",
        "home.test",
        "unknown.test",
        "127.0.0.2",
        "127.0.0.3",
        "127.0.0.1",
        "169.254.169.254",
        "10.0.0.1",
        "[::1]",
        "0x7f.1",
        "2130706433",
    ])
}

fn guarded_policy() -> Policy {
    policy(
        &["site.test", "127.0.0.2", "home.test", "10.0.0.1"],
        names(),
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_tunnel_is_refused_exactly_when_the_policy_denies_it(host in host(), port in 1024u16..65535) {
        let rt = runtime();
        rt.block_on(async {
            let policy = guarded_policy();
            let guard = EgressGuard::bind(policy.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
            let (status, _) = connect(guard.local_addr(), &format!("{host}:{port}")).await;
            let decision = policy.authorize_destination(&format!("https://{host}:{port}/")).await;
            match decision {
                Ok(_) => prop_assert!(status == 200 || status == 502, "{host}:{port} gave {status}"),
                Err(denial) => {
                    prop_assert_eq!(status, 403);
                    let refusals = guard.refusals();
                    prop_assert_eq!(refusals.len(), 1);
                    prop_assert_eq!(refusals[0].reason(), denial.to_string());
                }
            }
            guard.shutdown().await;
            Ok(())
        })?;
    }

    #[test]
    fn a_request_is_refused_exactly_when_the_policy_denies_it(
        host in host(),
        port in 1024u16..65535,
        path in "/[a-z0-9/._-]{0,12}",
    ) {
        let rt = runtime();
        rt.block_on(async {
            let policy = guarded_policy();
            let guard = EgressGuard::bind(policy.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
            let url = format!("http://{host}:{port}{path}");
            let (status, _) = get(guard.local_addr(), &url, "").await;
            match policy.authorize_destination(&url).await {
                Ok(_) => prop_assert!(status != 403, "{url} gave {status}"),
                Err(denial) => {
                    prop_assert_eq!(status, 403, "{}", url);
                    let refusals = guard.refusals();
                    prop_assert_eq!(refusals[0].reason(), denial.to_string());
                }
            }
            guard.shutdown().await;
            Ok(())
        })?;
    }
}
