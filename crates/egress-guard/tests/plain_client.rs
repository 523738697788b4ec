#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The guard driven by a plain HTTP client (raw TCP): forwarding, tunnels,
//! refusals and their records, rebinding, subresource policy, load and
//! shutdown.

mod support;

use std::time::Duration;

use countersign_canonical_policy::StaticResolver;
use countersign_egress_guard::{EgressGuard, RequestKind};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn guard_for(hosts: &[&str]) -> EgressGuard {
    EgressGuard::bind(policy(hosts, names()), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// An open tunnel through `guard` to `echo` under the name `site.test`.
async fn tunnel_to(guard: &EgressGuard, echo: &Echo) -> tokio::net::TcpStream {
    let (status, tunnel) = connect(
        guard.local_addr(),
        &format!("site.test:{}", echo.addr.port()),
    )
    .await;
    assert_eq!(status, 200);
    tunnel
}

#[tokio::test]
async fn an_allowed_request_reaches_the_checked_site_with_the_checked_host() {
    let site = Site::start("127.0.0.2").await;
    site.page("/hello", "text/plain", "hello from site");
    let guard = guard_for(&["site.test"]).await;
    let url = format!("http://site.test:{}/hello?x=1", site.port());
    // A `Host` header naming another site is replaced by the checked one.
    let (status, answer) = get(guard.local_addr(), &url, "X-Extra: 1\r\n").await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.ends_with("hello from site"), "{answer}");
    let (status, _) = through(
        guard.local_addr(),
        &format!("GET {url} HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(status, 200);
    let hosts: Vec<_> = site.seen().into_iter().map(|s| s.host).collect();
    let expected = Some(format!("site.test:{}", site.port()));
    assert_eq!(hosts, [expected.clone(), expected]);
    assert!(guard.refusals().is_empty());
    guard.shutdown().await;
}

#[tokio::test]
async fn a_host_off_the_list_is_refused_with_a_page_and_a_record() {
    let evil = Site::start("127.0.0.3").await;
    let guard = guard_for(&["site.test"]).await;
    let url = format!("http://evil.test:{}/steal", evil.port());
    let (status, answer) = get(
        guard.local_addr(),
        &url,
        "Referer: http://site.test/page.html\r\n",
    )
    .await;
    assert_eq!(status, 403);
    assert!(answer.contains("x-countersign-egress: refused"), "{answer}");
    assert!(
        answer.contains("the egress guard refused this request: host `evil.test` is not allowed"),
        "{answer}"
    );
    assert!(evil.seen().is_empty());
    let refusals = guard.refusals();
    assert_eq!(refusals.len(), 1);
    let refusal = &refusals[0];
    assert_eq!(refusal.host(), "evil.test");
    assert_eq!(refusal.port(), Some(evil.port()));
    assert_eq!(refusal.kind(), RequestKind::Subresource);
    assert_eq!(refusal.reason(), "host `evil.test` is not allowed");
    assert_eq!(refusal.referrer(), Some("http://site.test/page.html"));
    assert_eq!(refusal.label(), None);
    assert_eq!(guard.take_refusals().len(), 1);
    assert!(guard.refusals().is_empty());
}

#[tokio::test]
async fn ip_literals_metadata_and_other_loopback_addresses_are_refused() {
    let site = Site::start("127.0.0.2").await;
    let home = Trap::start("127.0.0.1").await;
    let guard = guard_for(&["site.test", "home.test"]).await;
    let cases = [
        (
            format!("http://127.0.0.2:{}/", site.port()),
            "host `127.0.0.2` is not allowed".to_owned(),
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "host `169.254.169.254` is not allowed".to_owned(),
        ),
        (
            format!("http://home.test:{}/", home.addr.port()),
            "host `home.test` has non-public address `127.0.0.1`".to_owned(),
        ),
        (
            format!("https://site.test:{}/", site.port()),
            "scheme `https` cannot be forwarded; only `http` can (`https` goes through a tunnel)"
                .to_owned(),
        ),
    ];
    for (url, _) in &cases {
        let (status, _) = get(guard.local_addr(), url, "").await;
        assert_eq!(status, 403, "{url}");
    }
    let reasons: Vec<String> = guard
        .refusals()
        .iter()
        .map(|r| r.reason().to_owned())
        .collect();
    let expected: Vec<String> = cases.into_iter().map(|(_, reason)| reason).collect();
    assert_eq!(reasons, expected);
    assert!(site.seen().is_empty());
    assert_eq!(home.hits(), 0);
}

#[tokio::test]
async fn a_request_that_is_not_a_proxy_request_is_a_bad_request() {
    let guard = guard_for(&["site.test"]).await;
    let (status, _) = through(
        guard.local_addr(),
        "GET / HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_rebinding_name_reaches_only_the_address_just_checked() {
    let site = Site::start("127.0.0.2").await;
    site.page("/", "text/plain", "checked");
    // 127.0.0.4 listens on the same port as the site, so a guard that
    // resolved again would reach it.
    let trap = Trap::start_on(&format!("127.0.0.4:{}", site.port())).await;
    let resolver = Rebinding::new(&[&["127.0.0.2"], &["127.0.0.4"]]);
    let guard = EgressGuard::bind(
        policy(&["rebind.test"], resolver.clone()),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let url = format!("http://rebind.test:{}/", site.port());
    let (first, answer) = get(guard.local_addr(), &url, "").await;
    assert_eq!(first, 200, "{answer}");
    assert_eq!(resolver.calls(), 1, "one lookup per request");
    let (second, _) = get(guard.local_addr(), &url, "").await;
    assert_eq!(second, 403);
    assert_eq!(resolver.calls(), 2);
    // The same through a tunnel.
    let (status, _) = connect(guard.local_addr(), &format!("rebind.test:{}", site.port())).await;
    assert_eq!(status, 403);
    assert_eq!(site.seen().len(), 1);
    assert_eq!(trap.hits(), 0);
    let reasons: Vec<_> = guard
        .refusals()
        .iter()
        .map(|r| r.reason().to_owned())
        .collect();
    assert_eq!(
        reasons,
        ["host `rebind.test` has non-public address `127.0.0.4`"; 2]
    );
}

#[tokio::test]
async fn a_kept_upstream_connection_is_reused_only_for_a_rechecked_address() {
    let site = Site::start("127.0.0.2").await;
    site.page("/a", "text/plain", "a");
    let resolver = Rebinding::new(&[&["127.0.0.2"], &["127.0.0.2"], &["127.0.0.4"]]);
    let guard = EgressGuard::bind(
        policy(&["rebind.test"], resolver.clone()),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let url = format!("http://rebind.test:{}/a", site.port());
    let one = format!("GET {url} HTTP/1.1\r\nHost: rebind.test\r\n\r\n");
    let last = format!("GET {url} HTTP/1.1\r\nHost: rebind.test\r\nConnection: close\r\n\r\n");
    let (_, answer) = through(guard.local_addr(), &format!("{one}{one}{last}")).await;
    let statuses: Vec<&str> = answer
        .match_indices("HTTP/1.1 ")
        .map(|(at, _)| &answer[at + 9..at + 12])
        .collect();
    assert_eq!(statuses, ["200", "200", "403"], "{answer}");
    assert_eq!(resolver.calls(), 3, "every request is checked again");
    assert_eq!(site.paths(), ["/a", "/a"]);
}

#[tokio::test]
async fn a_tunnel_to_an_allowed_host_carries_bytes_both_ways() {
    let echo = Echo::start("127.0.0.2").await;
    let guard = guard_for(&["site.test"]).await;
    let mut tunnel = tunnel_to(&guard, &echo).await;
    tunnel.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let mut back = [0u8; 16];
    tunnel.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"GET / HTTP/1.1\r\n");
    drop(tunnel);
    eventually("the tunnel closes", || echo.open() == 0).await;
    eventually("no task is left", || guard.active_tasks() == 0).await;
}

#[tokio::test]
async fn a_tunnel_to_a_refused_host_is_refused_and_recorded() {
    let echo = Echo::start("127.0.0.3").await;
    let mut guard = guard_for(&["site.test"]).await;
    let labelled = guard
        .bind_labelled("page-7", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    for (proxy, authority) in [
        (
            guard.local_addr(),
            format!("evil.test:{}", echo.addr.port()),
        ),
        (labelled, format!("evil.test:{}", echo.addr.port())),
        (labelled, format!("127.0.0.3:{}", echo.addr.port())),
        (labelled, "site.test".to_owned()),
    ] {
        let (status, _) = connect(proxy, &authority).await;
        assert_eq!(status, 403, "{authority}");
    }
    assert_eq!(echo.total(), 0);
    let all = guard.refusals();
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|r| r.kind() == RequestKind::Tunnel));
    let page: Vec<(String, String)> = guard
        .refusals_for("page-7")
        .iter()
        .map(|r| (r.host().to_owned(), r.reason().to_owned()))
        .collect();
    assert_eq!(
        page,
        [
            (
                "evil.test".to_owned(),
                "host `evil.test` is not allowed".to_owned()
            ),
            (
                "127.0.0.3".to_owned(),
                "host `127.0.0.3` is not allowed".to_owned()
            ),
            (
                "site.test".to_owned(),
                "tunnel to `site.test` names no port".to_owned()
            ),
        ]
    );
}

#[tokio::test]
async fn with_one_scheme_a_tunnel_must_carry_that_scheme() {
    let echo = Echo::start("127.0.0.2").await;
    let https_only = countersign_canonical_policy::Policy::builder()
        .allow_host("site.test")
        .allow_special_use("127.0.0.2/32")
        .resolver(names())
        .build()
        .unwrap();
    let guard = EgressGuard::bind(https_only, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let authority = format!("site.test:{}", echo.addr.port());

    // A TLS record passes and is echoed.
    let (status, mut tls) = connect(guard.local_addr(), &authority).await;
    assert_eq!(status, 200);
    tls.write_all(&[0x16, 0x03, 0x01, 0x00]).await.unwrap();
    let mut back = [0u8; 4];
    tls.read_exact(&mut back).await.unwrap();
    assert_eq!(back, [0x16, 0x03, 0x01, 0x00]);

    // Plain HTTP inside the tunnel is cut before it reaches the site.
    let before = echo.total();
    let (status, mut plain) = connect(guard.local_addr(), &authority).await;
    assert_eq!(status, 200);
    plain.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), plain.read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    // Connected (the echo server's accept may trail the guard's connect),
    // but sent nothing.
    eventually("the tunnel reaches the upstream", || {
        echo.total() == before + 1
    })
    .await;
    assert_eq!(echo.total(), before + 1);
    let reasons: Vec<_> = guard
        .refusals()
        .iter()
        .map(|r| r.reason().to_owned())
        .collect();
    assert_eq!(reasons, ["scheme `http` is not allowed"]);
}

#[tokio::test]
async fn subresources_may_have_their_own_list() {
    let cdn = Site::start("127.0.0.3").await;
    cdn.page("/lib.js", "text/javascript", "ok");
    let navigation = policy(&["site.test"], names());
    let subresources = policy(&["site.test", "cdn.test"], names());
    let guard = EgressGuard::builder(navigation)
        .subresource_policy(subresources)
        .bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let url = format!("http://cdn.test:{}/lib.js", cdn.port());
    let (script, _) = get(guard.local_addr(), &url, "Accept: */*\r\n").await;
    assert_eq!(script, 200);
    let (fetch, _) = get(guard.local_addr(), &url, "Sec-Fetch-Mode: cors\r\n").await;
    assert_eq!(fetch, 200);
    let (navigate, _) = get(guard.local_addr(), &url, "Upgrade-Insecure-Requests: 1\r\n").await;
    assert_eq!(navigate, 403);
    let (frame, _) = get(guard.local_addr(), &url, "Sec-Fetch-Mode: navigate\r\n").await;
    assert_eq!(frame, 403);
    // A tunnel hides its request: it passes when either list allows it.
    let (tunnel, _) = connect(guard.local_addr(), &format!("cdn.test:{}", cdn.port())).await;
    assert_eq!(tunnel, 200);
    let kinds: Vec<_> = guard
        .refusals()
        .iter()
        .map(|r| (r.kind(), r.reason().to_owned()))
        .collect();
    let refused = (
        RequestKind::Navigation,
        "host `cdn.test` is not allowed".to_owned(),
    );
    assert_eq!(kinds, [refused.clone(), refused]);
    assert_eq!(cdn.paths(), ["/lib.js", "/lib.js"]);
}

#[tokio::test]
async fn by_default_subresources_follow_the_navigation_list() {
    let cdn = Site::start("127.0.0.3").await;
    let guard = guard_for(&["site.test"]).await;
    let url = format!("http://cdn.test:{}/lib.js", cdn.port());
    let (status, _) = get(guard.local_addr(), &url, "Accept: */*\r\n").await;
    assert_eq!(status, 403);
    assert_eq!(guard.refusals()[0].kind(), RequestKind::Subresource);
}

#[tokio::test]
async fn an_unreachable_allowed_site_is_a_bad_gateway_not_a_refusal() {
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let guard = guard_for(&["site.test"]).await;
    let (status, answer) = get(
        guard.local_addr(),
        &format!("http://site.test:{closed}/"),
        "",
    )
    .await;
    assert_eq!(status, 502, "{answer}");
    assert!(
        answer.contains("could not reach it: connecting to `127.0.0.2:"),
        "{answer}"
    );
    let (status, _) = connect(guard.local_addr(), &format!("site.test:{closed}")).await;
    assert_eq!(status, 502);
    assert!(guard.refusals().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_tunnels_complete_and_leave_nothing_behind() {
    const TUNNELS: usize = 200;
    let echo = Echo::start("127.0.0.2").await;
    let guard = guard_for(&["site.test"]).await;
    let proxy = guard.local_addr();
    let authority = format!("site.test:{}", echo.addr.port());
    let started = std::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..TUNNELS {
        let authority = authority.clone();
        tasks.spawn(async move {
            let (status, mut tunnel) = connect(proxy, &authority).await;
            assert_eq!(status, 200);
            let message = format!("tunnel {i:04} ").repeat(64);
            tunnel.write_all(message.as_bytes()).await.unwrap();
            let mut back = vec![0u8; message.len()];
            tunnel.read_exact(&mut back).await.unwrap();
            assert_eq!(back, message.as_bytes());
        });
    }
    let all = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
    })
    .await;
    assert!(all.is_ok(), "200 tunnels did not finish within 120 s");
    assert_eq!(echo.total(), TUNNELS);
    eventually("every upstream connection closes", || echo.open() == 0).await;
    eventually("every guard task ends", || guard.active_tasks() == 0).await;
    eprintln!("200 tunnels in {:?}", started.elapsed());
    guard.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_wait_their_turn() {
    let echo = Echo::start("127.0.0.2").await;
    let guard = EgressGuard::builder(policy(&["site.test"], names()))
        .max_connections(2)
        .bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let authority = format!("site.test:{}", echo.addr.port());
    let (_, first) = connect(guard.local_addr(), &authority).await;
    let (_, second) = connect(guard.local_addr(), &authority).await;
    let (proxy, later) = (guard.local_addr(), authority.clone());
    let third = tokio::spawn(async move { connect(proxy, &later).await });
    // The two served tunnels reach the echo server (its accept task may run
    // after the guard's connect returns); a third must not, however long
    // it is given.
    eventually("the two tunnels reach the upstream", || echo.total() == 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !third.is_finished(),
        "a third tunnel was served beyond the limit"
    );
    assert_eq!(echo.total(), 2);
    drop(first);
    let (status, _) = tokio::time::timeout(Duration::from_secs(30), third)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
    drop(second);
}

#[tokio::test]
async fn shutdown_closes_open_tunnels_and_waits_for_them() {
    let echo = Echo::start("127.0.0.2").await;
    let guard = guard_for(&["site.test"]).await;
    let mut tunnel = tunnel_to(&guard, &echo).await;
    assert!(guard.active_tasks() >= 1);
    let proxy = guard.local_addr();
    tokio::time::timeout(Duration::from_secs(30), guard.shutdown())
        .await
        .unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), tunnel.read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    eventually("the upstream side closes", || echo.open() == 0).await;
    assert!(tokio::net::TcpStream::connect(proxy).await.is_err());
}

#[tokio::test]
async fn an_unresolvable_name_is_refused() {
    let guard = EgressGuard::bind(
        policy(&["site.test"], StaticResolver::failing()),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let (status, _) = get(guard.local_addr(), "http://site.test/", "").await;
    assert_eq!(status, 403);
    assert_eq!(
        guard.refusals()[0].reason(),
        "host `site.test` could not be resolved: resolver is set to fail"
    );
}

#[tokio::test]
async fn the_refusal_log_keeps_the_newest_entries() {
    let guard = EgressGuard::builder(policy(&["site.test"], names()))
        .max_refusals(2)
        .bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    for host in ["a.test", "b.test", "c.test"] {
        let (status, _) = get(guard.local_addr(), &format!("http://{host}/"), "").await;
        assert_eq!(status, 403);
    }
    let hosts: Vec<String> = guard
        .refusals()
        .iter()
        .map(|r| r.host().to_owned())
        .collect();
    assert_eq!(hosts, ["b.test", "c.test"]);
}
