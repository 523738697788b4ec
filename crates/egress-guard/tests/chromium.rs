#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! End to end in real headless Chromium behind the guard: pages served by
//! the tests on their own loopback addresses (127.0.0.2, 127.0.0.3);
//! 127.0.0.1 stays refused. Chromium is `/usr/bin/chromium` unless
//! `COUNTERSIGN_CHROMIUM` names another binary.
//!
//! Each test runs the browser with `--dump-dom`: the pages' scripts write
//! what happened into the DOM, and the tests also check what the test
//! servers received and what the guard refused.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use countersign_egress_guard::{EgressGuard, RequestKind};
use support::*;

fn chromium() -> String {
    std::env::var("COUNTERSIGN_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned())
}

/// Loads `url` in a fresh headless Chromium and returns the DOM it dumps.
/// With `proxy`, every request goes through it (no loopback bypass);
/// without, `direct` maps test names to loopback for a control run.
async fn dump_dom(proxy: Option<SocketAddr>, direct: &str, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(chromium());
    command.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--virtual-time-budget=8000",
    ]);
    command.arg(format!("--user-data-dir={}", profile.path().display()));
    match proxy {
        Some(proxy) => {
            command.args(countersign_egress_guard::chromium_proxy_args(proxy));
        }
        None => {
            command.arg(format!("--host-resolver-rules={direct}"));
        }
    }
    command.arg("--dump-dom").arg(url);
    command.kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("chromium finishes within 120 s")
        .unwrap_or_else(|e| panic!("cannot run `{}`: {e}", chromium()));
    let dom = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() && dom.contains("<html"),
        "chromium failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    dom
}

async fn guard(
    hosts: &[&str],
    resolver: impl countersign_canonical_policy::Resolver + 'static,
) -> EgressGuard {
    EgressGuard::bind(policy(hosts, resolver), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// The text of the element with `id` in a dumped DOM.
fn text_of(dom: &str, id: &str) -> String {
    let open = format!("id=\"{id}\">");
    let start = dom
        .find(&open)
        .unwrap_or_else(|| panic!("no #{id} in {dom}"))
        + open.len();
    let end = dom[start..].find('<').unwrap() + start;
    dom[start..end].to_owned()
}

/// Whether `host` is one the tests name (Chromium also makes requests of
/// its own, e.g. to `accounts.google.com`, which the guard refuses too).
fn is_test_host(host: &str) -> bool {
    host.ends_with(".test") || host.parse::<std::net::IpAddr>().is_ok()
}

/// The refusals of requests the tests' pages made.
fn test_refusals(guard: &EgressGuard) -> Vec<countersign_egress_guard::Refusal> {
    guard
        .refusals()
        .into_iter()
        .filter(|r| is_test_host(r.host()))
        .collect()
}

/// The paths a site served, without the browser's own favicon requests.
fn pages(site: &Site) -> Vec<String> {
    site.paths()
        .into_iter()
        .filter(|p| p != "/favicon.ico")
        .collect()
}

/// A page script that records each probe's outcome in `#<name>`.
const MARK: &str =
    "<script>function mark(id, text) { document.getElementById(id).textContent = text; }</script>";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subresources_from_refused_hosts_are_blocked_and_the_page_still_loads() {
    let site = Site::start("127.0.0.2").await;
    let evil = Site::start("127.0.0.3").await;
    let (p, q) = (site.port(), evil.port());
    evil.page("/pixel.png", "image/png", PNG.to_vec())
        .page("/evil.js", "text/javascript", "window.evilRan = true;")
        .page("/data", "text/plain", "secret");
    let page = format!(
        r#"<!doctype html><html><head><title>allowed</title>{MARK}</head><body>
<h1 id="title">allowed page</h1>
<p id="img">pending</p><p id="script">pending</p><p id="fetch">pending</p>
<p id="metadata">pending</p><p id="literal">pending</p><p id="own">pending</p>
<img src="http://evil.test:{q}/pixel.png" onload="mark('img','loaded')" onerror="mark('img','blocked')">
<script src="http://evil.test:{q}/evil.js" onload="mark('script','loaded')" onerror="mark('script','blocked')"></script>
<script>
const probe = (id, url) => fetch(url, {{mode: 'no-cors'}})
  .then(r => mark(id, r.type === 'opaque' ? 'opaque' : 'status ' + r.status), () => mark(id, 'blocked'));
fetch('http://evil.test:{q}/data').then(r => r.text()).then(t => mark('fetch', 'read ' + t), () => mark('fetch', 'blocked'));
probe('metadata', 'http://169.254.169.254/latest/meta-data/');
probe('literal', 'http://127.0.0.3:{q}/data');
fetch('/own.txt').then(r => r.text()).then(t => mark('own', t), () => mark('own', 'blocked'));
</script></body></html>"#
    );
    site.page("/page.html", "text/html", page)
        .page("/own.txt", "text/plain", "own data");
    // Without the guard the same page does reach the other host.
    let control = dump_dom(
        None,
        "MAP site.test 127.0.0.2, MAP evil.test 127.0.0.3",
        &format!("http://site.test:{p}/page.html"),
    )
    .await;
    assert_eq!(text_of(&control, "img"), "loaded", "{control}");
    assert_eq!(text_of(&control, "script"), "loaded");
    let reached = evil.paths();
    assert!(reached.contains(&"/pixel.png".to_owned()) && reached.contains(&"/evil.js".to_owned()));
    let evil_before = evil.seen().len();

    let guard = guard(&["site.test"], names()).await;
    let dom = dump_dom(
        Some(guard.local_addr()),
        "",
        &format!("http://site.test:{p}/page.html"),
    )
    .await;
    assert_eq!(text_of(&dom, "title"), "allowed page");
    assert_eq!(text_of(&dom, "img"), "blocked", "{dom}");
    assert_eq!(text_of(&dom, "script"), "blocked");
    assert_eq!(text_of(&dom, "fetch"), "blocked");
    assert_eq!(text_of(&dom, "own"), "own data");
    // A refusal answered to a no-cors probe is opaque to the page; the
    // servers and the guard's records say what happened.
    assert_ne!(text_of(&dom, "metadata"), "pending");
    assert_eq!(
        evil.seen().len(),
        evil_before,
        "the refused host got nothing"
    );

    let refused: Vec<(String, RequestKind, String)> = test_refusals(&guard)
        .iter()
        .map(|r| (r.host().to_owned(), r.kind(), r.reason().to_owned()))
        .collect();
    for (host, reason) in [
        ("evil.test", "host `evil.test` is not allowed"),
        ("169.254.169.254", "host `169.254.169.254` is not allowed"),
        ("127.0.0.3", "host `127.0.0.3` is not allowed"),
    ] {
        assert!(
            refused
                .iter()
                .any(|(h, k, r)| h == host && *k == RequestKind::Subresource && r == reason),
            "no refusal of {host} in {refused:?}"
        );
    }
    assert_eq!(
        refused.iter().filter(|(h, _, _)| h == "evil.test").count(),
        3,
        "image, script and fetch: {refused:?}"
    );
    let origin = format!("http://site.test:{p}/");
    assert!(
        test_refusals(&guard)
            .iter()
            .all(|r| r.referrer().is_some_and(|page| page.starts_with(&origin))),
        "every refusal names the page that asked"
    );
    guard.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_loopback_or_a_private_address_is_blocked() {
    let site = Site::start("127.0.0.2").await;
    let home = Trap::start("127.0.0.1").await;
    let t = home.addr.port();
    site.redirect("/to-literal", &format!("http://127.0.0.1:{t}/admin"))
        .redirect("/to-name", &format!("http://home.test:{t}/admin"))
        .redirect("/to-private", "http://10.0.0.1/");
    let guard = guard(&["site.test", "home.test", "10.0.0.1"], names()).await;
    let p = site.port();
    for (path, reason) in [
        ("/to-literal", "host `127.0.0.1` is not allowed".to_owned()),
        (
            "/to-name",
            "host `home.test` has non-public address `127.0.0.1`".to_owned(),
        ),
        (
            "/to-private",
            "host `10.0.0.1` has non-public address `10.0.0.1`".to_owned(),
        ),
    ] {
        let dom = dump_dom(
            Some(guard.local_addr()),
            "",
            &format!("http://site.test:{p}{path}"),
        )
        .await;
        assert!(
            dom.contains(&format!("the egress guard refused this request: {reason}")),
            "{path}: {dom}"
        );
        let navigations: Vec<_> = guard
            .take_refusals()
            .into_iter()
            .filter(|r| r.kind() == RequestKind::Navigation)
            .map(|r| r.reason().to_owned())
            .collect();
        assert_eq!(navigations, [reason], "{path}");
    }
    assert_eq!(home.hits(), 0, "nothing reached 127.0.0.1");
    assert_eq!(pages(&site), ["/to-literal", "/to-name", "/to-private"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebinding_name_never_reaches_its_second_answer() {
    let site = Site::start("127.0.0.2").await;
    let p = site.port();
    let trap = Trap::start_on(&format!("127.0.0.4:{p}")).await;
    site.page(
        "/page.html",
        "text/html",
        format!(
            r#"<!doctype html><html><head>{MARK}</head><body><p id="again">pending</p>
<script>fetch('/again').then(r => r.text()).then(t => mark('again', 'read ' + t), () => mark('again', 'blocked'));</script>
</body></html>"#
        ),
    )
    .page("/again", "text/plain", "second");
    // First answer allowed (127.0.0.2), every later answer private.
    let resolver = Rebinding::new(&[&["127.0.0.2"], &["127.0.0.4"]]);
    let guard = guard(&["rebind.test"], resolver.clone()).await;
    let dom = dump_dom(
        Some(guard.local_addr()),
        "",
        &format!("http://rebind.test:{p}/page.html"),
    )
    .await;
    // Same origin, so the page reads the guard's error page.
    assert!(
        text_of(&dom, "again").contains(
            "the egress guard refused this request: host `rebind.test` has non-public address `127.0.0.4`"
        ),
        "{dom}"
    );
    assert_eq!(trap.hits(), 0, "the second answer was never connected to");
    assert_eq!(pages(&site), ["/page.html"]);
    assert!(
        guard
            .refusals()
            .iter()
            .any(|r| r.reason() == "host `rebind.test` has non-public address `127.0.0.4`")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_reach_allowed_hosts_only() {
    let site = Site::start("127.0.0.2").await;
    let evil = Site::start("127.0.0.3").await;
    let (p, q) = (site.port(), evil.port());
    site.page(
        "/page.html",
        "text/html",
        format!(
            r#"<!doctype html><html><head>{MARK}</head><body>
<p id="allowed">pending</p><p id="refused">pending</p>
<img src="/hold" width="1" height="1">
<script>
// Virtual time does not wait for WebSockets: the held image keeps the dump
// waiting until both sockets have settled, then the page releases it.
let settled = 0;
function settle(id, text) {{
  if (document.getElementById(id).textContent !== 'pending') return;
  mark(id, text);
  if (++settled === 2) fetch('/release');
}}
function open(id, url) {{
  const ws = new WebSocket(url);
  ws.onopen = () => ws.send('hello ' + id);
  ws.onmessage = (e) => {{ settle(id, 'echo: ' + e.data); ws.close(); }};
  ws.onerror = () => settle(id, 'blocked');
}}
open('allowed', 'ws://ws.test:{p}/ws');
open('refused', 'ws://evil.test:{q}/ws');
</script></body></html>"#
        ),
    );
    let mut guard = guard(&["site.test", "ws.test"], names()).await;
    let labelled = guard
        .bind_labelled("tab-1", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dom = dump_dom(
        Some(labelled),
        "",
        &format!("http://site.test:{p}/page.html"),
    )
    .await;
    assert_eq!(text_of(&dom, "allowed"), "echo: hello allowed", "{dom}");
    assert_eq!(text_of(&dom, "refused"), "blocked");
    assert!(evil.seen().is_empty());
    let refusals: Vec<_> = guard
        .refusals_for("tab-1")
        .into_iter()
        .filter(|r| is_test_host(r.host()))
        .collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].host(), "evil.test");
    assert_eq!(refusals[0].port(), Some(q));
    assert_eq!(refusals[0].kind(), RequestKind::Tunnel);
    assert_eq!(refusals[0].reason(), "host `evil.test` is not allowed");
    guard.shutdown().await;
}

/// A 1×1 transparent PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];
