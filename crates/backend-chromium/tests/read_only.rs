//! Read-only mode in real headless Chromium behind the egress guard
//! (issue 42 §3): after an act a rule approved, every request that could
//! write is refused before it leaves the browser, from the page, a
//! cross-site frame (another host, out of process) and a worker, at once
//! or seconds later; a person's act opens writing again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse};
use axum::routing::{any, get};
use countersign_approval_core::{AllowedWrite, Backend, OperationId, WriteAccess};
use serde_json::json;
use support::{Case, Fixture, OTHER_SITE_IP, SITE_IP};

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|f| Box::pin($name(f))) as Case)),*]
    };
}

#[test]
fn read_only_mode_in_headless_chromium() {
    support::run_cases(
        support::options(),
        &cases![
            a_next_button_whose_script_pays_pays_nothing,
            every_way_a_page_writes_is_refused,
            a_cross_site_frame_and_a_worker_cannot_write_either,
            a_person_approved_payment_right_after_goes_through,
            an_allowed_write_goes_through_and_nothing_else,
            a_new_websocket_is_refused_until_a_person_acts,
            a_frame_and_a_worker_cannot_open_a_websocket_either,
            a_tab_the_page_opens_sends_nothing,
        ],
    );
}

/// What the shop server received, by `METHOD path`.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<String>>>);

impl Received {
    fn count(&self, what: &str) -> usize {
        self.0.lock().unwrap().iter().filter(|r| *r == what).count()
    }
    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// The shop: `/shop` (the page), `/frame` (a checkout frame that pays as
/// soon as it loads), `/worker.js` (a worker that pays), and every other
/// path recorded by method (`POST /pay`, `GET /more` …).
const SHOP: &str = r#"<!doctype html>
<title>Shop</title>
<button id="next" onclick="fetch('/pay', {method: 'POST', body: 'amount=5'})">Next</button>
<button id="later" onclick="setTimeout(() => fetch('/pay-later', {method: 'POST', body: 'amount=5'}), 5000)">Continue</button>
<button id="beacon" onclick="navigator.sendBeacon('/beacon', 'amount=5')">Show more</button>
<button id="script-submit" onclick="const f = document.createElement('form'); f.method = 'post'; f.action = '/form-pay'; document.body.append(f); f.submit()">Go on</button>
<button id="xhr" onclick="const x = new XMLHttpRequest(); x.open('PUT', '/basket'); x.send('1')">Refresh</button>
<button id="more" onclick="fetch('/more').then(() => document.getElementById('got').textContent = 'more')">More</button>
<button id="frame" onclick="const i = document.createElement('iframe'); i.src = FRAME; document.body.append(i)">Details</button>
<button id="worker" onclick="new Worker('/worker.js')">Compute</button>
<button id="graphql" onclick="fetch('/graphql', {method: 'POST', body: '{}'}); fetch('/graphql-other', {method: 'POST', body: '{}'})">Load</button>
<button id="socket" onclick="const s = new WebSocket(SOCKET); s.onopen = () => s.send('amount=5')">Chat</button>
<button id="frame-socket" onclick="const i = document.createElement('iframe'); i.src = FRAME_SOCKET; document.body.append(i)">Help</button>
<button id="worker-socket" onclick="new Worker('/socket-worker.js')">Sync</button>
<button id="popup" onclick="window.open('/popup-pay?amount=5')">Receipt</button>
<form method="post" action="/blank-pay" target="_blank"><button id="blank-pay">Confirm</button></form>
<a id="noopener" href="/noopener-pay?amount=5" target="_blank" rel="noopener">Invoice</a>
<button id="pay" onclick="fetch('/pay', {method: 'POST', body: 'amount=5'})">Pay $5</button>
<p id="got"></p>
"#;

const FRAME: &str = r#"<!doctype html><p>checkout</p><script>fetch('/frame-pay', {method: 'POST', body: 'amount=5'})</script>"#;
const WORKER: &str = r#"fetch('/worker-pay', {method: 'POST', body: 'amount=5'});"#;
/// A frame and a worker that open a WebSocket to where they came from
/// (`SOCKET` is that host's socket address).
const FRAME_SOCKET: &str = r#"<!doctype html><p>help</p><script>new WebSocket(SOCKET)</script>"#;
const WORKER_SOCKET: &str = r#"new WebSocket(SOCKET);"#;

/// Accepts WebSockets on `ip`, recording `WS /path` for each handshake
/// that reached it; answers the `ws:` address to use.
async fn serve_sockets(ip: &str, received: Received) -> String {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let received = received.clone();
            tokio::spawn(async move {
                // The callback's error type is tungstenite's, not ours.
                #[allow(clippy::result_large_err)]
                let record =
                    |request: &tokio_tungstenite::tungstenite::handshake::server::Request,
                     response| {
                        received
                            .0
                            .lock()
                            .unwrap()
                            .push(format!("WS {}", request.uri().path()));
                        Ok(response)
                    };
                if let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, record).await {
                    while let Some(Ok(_)) = futures_util::StreamExt::next(&mut socket).await {}
                }
            });
        }
    });
    format!("ws://{address}/socket")
}

async fn serve(ip: &str, other: Option<SocketAddr>, received: Received) -> SocketAddr {
    let socket = serve_sockets(ip, received.clone()).await;
    let frame_url = other.map_or(String::new(), |o| format!("http://{o}/frame"));
    let frame_socket_url = other.map_or(String::new(), |o| format!("http://{o}/socket-frame"));
    let page = SHOP
        .replace("FRAME_SOCKET", &format!("'{frame_socket_url}'"))
        .replace("FRAME", &format!("'{frame_url}'"))
        .replace("SOCKET", &format!("'{socket}'"));
    let frame_socket = FRAME_SOCKET.replace("SOCKET", &format!("'{socket}'"));
    let worker_socket = WORKER_SOCKET.replace("SOCKET", &format!("'{socket}'"));
    let app = Router::new()
        .route("/shop", get(move || async move { Html(page) }))
        .route("/frame", get(|| async { Html(FRAME) }))
        .route(
            "/socket-frame",
            get(move || async move { Html(frame_socket) }),
        )
        .route(
            "/worker.js",
            get(|| async { ([("content-type", "text/javascript")], WORKER) }),
        )
        .route(
            "/socket-worker.js",
            get(move || async move { ([("content-type", "text/javascript")], worker_socket) }),
        )
        .route(
            "/{*path}",
            any(
                |State(received): State<Received>,
                 method: axum::http::Method,
                 Path(path): Path<String>| async move {
                    received.0.lock().unwrap().push(format!("{method} /{path}"));
                    ([("access-control-allow-origin", "*")], "ok").into_response()
                },
            ),
        )
        .with_state(received);
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

/// A shop on the test site, its checkout frame on another host.
struct Shop {
    site: SocketAddr,
    received: Received,
}

async fn open_shop(f: &Fixture) -> Shop {
    let received = Received::default();
    let other = serve(OTHER_SITE_IP, None, received.clone()).await;
    let site = serve(SITE_IP, Some(other), received.clone()).await;
    let url = f
        .policy
        .authorize_destination(&format!("http://{site}/shop"))
        .await
        .unwrap();
    f.tab.navigate(&url).await.unwrap();
    Shop { site, received }
}

/// Clicks `selector` on the shop as Act would hand it over, with `writes`.
async fn click(f: &Fixture, shop: &Shop, selector: &str, writes: WriteAccess) -> OperationId {
    let request = f
        .request_at(
            &format!("http://{}/shop", shop.site),
            json!({"method": "click", "selector": selector}),
            writes,
        )
        .await;
    f.tab.backend().perform(&request).await.unwrap();
    request.operation_id
}

fn read_only() -> WriteAccess {
    WriteAccess::ReadOnly {
        allowed: Vec::new(),
    }
}

/// Waits until `done` holds, at most 10 s.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} never happened");
}

async fn a_next_button_whose_script_pays_pays_nothing(f: &Fixture) {
    let shop = open_shop(f).await;
    let op = click(f, &shop, "#next", read_only()).await;
    // Refused before the act was reported: its record can say so.
    let refused = f.tab.backend().refused_writes(&op).await.unwrap();
    assert_eq!(
        refused.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [format!("POST http://{}/pay (XHR)", shop.site)]
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        shop.received.count("POST /pay"),
        0,
        "{:?}",
        shop.received.all()
    );
    // Reading still works in read-only mode.
    click(f, &shop, "#more", read_only()).await;
    eventually("GET /more", || shop.received.count("GET /more") == 1).await;
}

async fn every_way_a_page_writes_is_refused(f: &Fixture) {
    let shop = open_shop(f).await;
    let kinds = |op: &OperationId| -> Vec<String> {
        f.tab
            .refused_writes()
            .iter()
            .filter(|w| &w.operation_id == op)
            .map(|w| {
                format!(
                    "{} {} {}",
                    w.method,
                    w.address.rsplit('/').next().unwrap_or(""),
                    w.kind
                )
            })
            .collect()
    };
    // A write 5 s after its click is refused all the same: read-only
    // mode holds until a person's act, however long that is.
    let later = click(f, &shop, "#later", read_only()).await;
    assert!(kinds(&later).is_empty());
    eventually("the delayed write refused", || {
        kinds(&later) == ["POST pay-later XHR"]
    })
    .await;
    let beacon = click(f, &shop, "#beacon", read_only()).await;
    assert_eq!(kinds(&beacon), ["POST beacon Ping"]);
    let xhr = click(f, &shop, "#xhr", read_only()).await;
    assert_eq!(kinds(&xhr), ["PUT basket XHR"]);
    // A form a script submits: the navigation's POST is refused.
    let submit = click(f, &shop, "#script-submit", read_only()).await;
    eventually("the form post refused", || {
        kinds(&submit) == ["POST form-pay Document"]
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let writes: Vec<String> = shop
        .received
        .all()
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "writes reached the server: {writes:?}");
}

async fn a_cross_site_frame_and_a_worker_cannot_write_either(f: &Fixture) {
    let shop = open_shop(f).await;
    let frame = click(f, &shop, "#frame", read_only()).await;
    eventually("the frame's write refused", || {
        f.tab.refused_writes().iter().any(|w| {
            w.operation_id == frame
                && w.address.starts_with(&format!("http://{OTHER_SITE_IP}:"))
                && w.address.ends_with("/frame-pay")
        })
    })
    .await;
    let worker = click(f, &shop, "#worker", read_only()).await;
    eventually("the worker's write refused", || {
        f.tab
            .refused_writes()
            .iter()
            .any(|w| w.operation_id == worker && w.address.ends_with("/worker-pay"))
    })
    .await;
    assert_eq!(shop.received.count("POST /frame-pay"), 0);
    assert_eq!(shop.received.count("POST /worker-pay"), 0);
}

async fn a_person_approved_payment_right_after_goes_through(f: &Fixture) {
    let shop = open_shop(f).await;
    click(f, &shop, "#next", read_only()).await;
    a_person_opens_writing_until_a_rule_act(f, &shop, "#pay", "#next", "POST /pay").await;
}

/// A person's act on `person` lets its write through (`what` reaches the
/// shop once, nothing refused), and the next rule-approved act, on `rule`,
/// closes writing again: one refusal, and `what` still reached it once.
async fn a_person_opens_writing_until_a_rule_act(
    f: &Fixture,
    shop: &Shop,
    person: &str,
    rule: &str,
    what: &str,
) {
    let by_person = click(f, shop, person, WriteAccess::Open).await;
    eventually(what, || shop.received.count(what) == 1).await;
    assert!(
        f.tab
            .backend()
            .refused_writes(&by_person)
            .await
            .unwrap()
            .is_empty()
    );
    let by_rule = click(f, shop, rule, read_only()).await;
    assert_eq!(
        f.tab
            .backend()
            .refused_writes(&by_rule)
            .await
            .unwrap()
            .len(),
        1
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(shop.received.count(what), 1);
}

async fn an_allowed_write_goes_through_and_nothing_else(f: &Fixture) {
    let shop = open_shop(f).await;
    let allowed = AllowedWrite::new("POST", &format!("http://{}/graphql", shop.site)).unwrap();
    let op = click(
        f,
        &shop,
        "#graphql",
        WriteAccess::ReadOnly {
            allowed: vec![allowed],
        },
    )
    .await;
    eventually("the allowed write", || {
        shop.received.count("POST /graphql") == 1
    })
    .await;
    let refused = f.tab.backend().refused_writes(&op).await.unwrap();
    assert_eq!(
        refused.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [format!("POST http://{}/graphql-other (XHR)", shop.site)]
    );
    assert_eq!(shop.received.count("POST /graphql-other"), 0);
}

async fn a_new_websocket_is_refused_until_a_person_acts(f: &Fixture) {
    let shop = open_shop(f).await;
    let socket = click(f, &shop, "#socket", read_only()).await;
    // Refused before the act was reported, with the socket's address.
    let refused = f.tab.backend().refused_writes(&socket).await.unwrap();
    let address = refused
        .first()
        .map(|w| w.address.clone())
        .unwrap_or_default();
    assert_eq!(
        refused.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [format!("GET {address} (WebSocket)")]
    );
    assert!(
        address.starts_with(&format!("ws://{SITE_IP}:")) && address.ends_with("/socket"),
        "{address}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        shop.received.count("WS /socket"),
        0,
        "{:?}",
        shop.received.all()
    );
    // A person's act opens writing again, WebSockets included, until the
    // next rule-approved act.
    a_person_opens_writing_until_a_rule_act(f, &shop, "#socket", "#socket", "WS /socket").await;
}

async fn a_frame_and_a_worker_cannot_open_a_websocket_either(f: &Fixture) {
    let shop = open_shop(f).await;
    let frame = click(f, &shop, "#frame-socket", read_only()).await;
    eventually("the cross-site frame's socket refused", || {
        f.tab.refused_writes().iter().any(|w| {
            w.operation_id == frame
                && w.kind == "WebSocket"
                && w.address.starts_with(&format!("ws://{OTHER_SITE_IP}:"))
        })
    })
    .await;
    let worker = click(f, &shop, "#worker-socket", read_only()).await;
    eventually("the worker's socket refused", || {
        f.tab.refused_writes().iter().any(|w| {
            w.operation_id == worker
                && w.kind == "WebSocket"
                && w.address.starts_with(&format!("ws://{SITE_IP}:"))
        })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        shop.received.count("WS /socket"),
        0,
        "{:?}",
        shop.received.all()
    );
}

async fn a_tab_the_page_opens_sends_nothing(f: &Fixture) {
    let shop = open_shop(f).await;
    // A form posted into a new tab after a rule's act: refused, and said.
    let blank = click(f, &shop, "#blank-pay", read_only()).await;
    eventually("the new tab's post refused", || {
        f.tab.refused_writes().iter().any(|w| {
            w.operation_id == blank && w.method == "POST" && w.address.ends_with("/blank-pay")
        })
    })
    .await;
    // A popup and a link into a new tab without an opener, whatever the
    // mode: the new tab is closed before its first request leaves.
    click(f, &shop, "#popup", WriteAccess::Open).await;
    click(f, &shop, "#noopener", WriteAccess::Open).await;
    click(f, &shop, "#blank-pay", WriteAccess::Open).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let opened: Vec<String> = shop
        .received
        .all()
        .into_iter()
        .filter(|r| r.contains("-pay"))
        .collect();
    assert!(opened.is_empty(), "a new tab's request left: {opened:?}");
    // The tab itself still works.
    click(f, &shop, "#more", read_only()).await;
    eventually("GET /more", || shop.received.count("GET /more") == 1).await;
}
