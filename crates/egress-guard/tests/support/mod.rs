//! Test sites on their own loopback addresses, a trap that only counts
//! connections, an echo server, and a raw HTTP client that talks to the guard.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use countersign_canonical_policy::{Policy, ResolveError, Resolver, StaticResolver};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// What a site saw of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub path: String,
    pub host: Option<String>,
    pub referer: Option<String>,
}

/// A canned answer: status, headers, body.
type Canned = (StatusCode, Vec<(String, String)>, Vec<u8>);

#[derive(Default)]
struct SiteState {
    pages: Mutex<HashMap<String, Canned>>,
    seen: Mutex<Vec<Seen>>,
    /// Set by `/release`; `/hold` answers only once it is set.
    released: tokio::sync::watch::Sender<bool>,
}

/// An HTTP site (axum) on `ip`, port chosen by the system.
#[derive(Clone)]
pub struct Site {
    pub addr: SocketAddr,
    state: Arc<SiteState>,
}

impl Site {
    pub async fn start(ip_text: &str) -> Site {
        let listener = TcpListener::bind((ip(ip_text), 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(SiteState::default());
        let router = Router::new()
            .fallback(serve_page)
            .with_state(Arc::clone(&state));
        tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Site { addr, state }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Serves `body` at `path` with `content_type`.
    pub fn page(&self, path: &str, content_type: &str, body: impl Into<Vec<u8>>) -> &Self {
        self.state.pages.lock().unwrap().insert(
            path.to_owned(),
            (
                StatusCode::OK,
                vec![("content-type".into(), content_type.into())],
                body.into(),
            ),
        );
        self
    }

    /// Answers `path` with a 302 to `location`.
    pub fn redirect(&self, path: &str, location: &str) -> &Self {
        self.state.pages.lock().unwrap().insert(
            path.to_owned(),
            (
                StatusCode::FOUND,
                vec![("location".into(), location.into())],
                Vec::new(),
            ),
        );
        self
    }

    /// Every request the site received, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    pub fn paths(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.path).collect()
    }
}

async fn serve_page(State(state): State<Arc<SiteState>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let seen = {
        let header_text = |name: header::HeaderName| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Seen {
            path: path.clone(),
            host: header_text(header::HOST),
            referer: header_text(header::REFERER),
        }
    };
    state.seen.lock().unwrap().push(seen);
    // `/hold` stays unanswered until the page asks for `/release`: a pending
    // load pauses Chromium's virtual time and keeps the load event (and so
    // `--dump-dom`) waiting, which a WebSocket alone does not. Capped in
    // real time so a broken page cannot hang the test.
    if path == "/hold" {
        let mut released = state.released.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(60), released.wait_for(|r| *r)).await;
        return (StatusCode::NO_CONTENT, "").into_response();
    }
    if path == "/release" {
        state.released.send_replace(true);
        return ([(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")], "released").into_response();
    }
    if path == "/ws" {
        let (mut parts, _) = request.into_parts();
        let Ok(upgrade) = WebSocketUpgrade::from_request_parts(&mut parts, &()).await else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        return upgrade.on_upgrade(|mut socket| async move {
            while let Some(Ok(message)) = socket.recv().await {
                if socket.send(message).await.is_err() {
                    break;
                }
            }
        });
    }
    let found = state.pages.lock().unwrap().get(&path).cloned();
    match found {
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
        Some((status, headers, body)) => {
            let mut response = (status, body).into_response();
            for (name, value) in headers {
                response.headers_mut().insert(
                    header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(&value).unwrap(),
                );
            }
            let headers = response.headers_mut();
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            // Readable from any page, so only the guard can stop a fetch.
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
            response
        }
    }
}

/// A listener that only counts the connections it gets.
#[derive(Clone)]
pub struct Trap {
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl Trap {
    pub async fn start(ip_text: &str) -> Trap {
        Self::start_on(&format!("{ip_text}:0")).await
    }

    /// A trap on an exact `ip:port`.
    pub async fn start_on(addr: &str) -> Trap {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Trap { addr, hits }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A TCP echo server that counts open connections.
#[derive(Clone)]
pub struct Echo {
    pub addr: SocketAddr,
    open: Arc<AtomicUsize>,
    total: Arc<AtomicUsize>,
}

impl Echo {
    pub async fn start(ip_text: &str) -> Echo {
        let listener = TcpListener::bind((ip(ip_text), 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let open = Arc::new(AtomicUsize::new(0));
        let total = Arc::new(AtomicUsize::new(0));
        let (o, t) = (Arc::clone(&open), Arc::clone(&total));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                o.fetch_add(1, Ordering::SeqCst);
                t.fetch_add(1, Ordering::SeqCst);
                let o = Arc::clone(&o);
                tokio::spawn(async move {
                    let (mut r, mut w) = stream.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                    o.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Echo { addr, open, total }
    }

    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    pub fn total(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }
}

/// A policy allowing `hosts` over http and https, with the test loopback
/// addresses 127.0.0.2 and 127.0.0.3 as special-use ranges, resolving
/// through `resolver`.
pub fn policy(hosts: &[&str], resolver: impl Resolver + 'static) -> Policy {
    Policy::builder()
        .allow_hosts(hosts.iter().copied())
        .allow_schemes(["http", "https"])
        .allow_special_use("127.0.0.2/32")
        .allow_special_use("127.0.0.3/32")
        .resolver(resolver)
        .build()
        .unwrap()
}

/// Every `*.test` name of the tests, on its loopback address.
pub fn names() -> StaticResolver {
    StaticResolver::new()
        .with_host("site.test", [ip("127.0.0.2")])
        .with_host("cdn.test", [ip("127.0.0.3")])
        .with_host("evil.test", [ip("127.0.0.3")])
        .with_host("ws.test", [ip("127.0.0.2")])
        .with_host("home.test", [ip("127.0.0.1")])
}

/// A raw HTTP/1.1 exchange through the guard: status code and whole answer.
pub async fn through(guard: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(guard).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer))
        .await
        .expect("the guard answers in time")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"));
    (status, answer)
}

/// `GET url` through the guard, closing afterwards, with extra header lines.
pub async fn get(guard: SocketAddr, url: &str, extra: &str) -> (u16, String) {
    let host = url.split('/').nth(2).unwrap_or_default();
    through(
        guard,
        &format!("GET {url} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"),
    )
    .await
}

/// Sends `CONNECT authority` and reads the guard's answer head; the stream
/// is the open tunnel when the answer is 200.
pub async fn connect(guard: SocketAddr, authority: &str) -> (u16, TcpStream) {
    let mut stream = TcpStream::connect(guard).await.unwrap();
    stream
        .write_all(format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut byte))
            .await
            .expect("the guard answers in time")
            .unwrap();
        assert_eq!(n, 1, "connection closed mid-head: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, stream)
}

/// A resolver that gives its answers in turn (the last one forever) and
/// counts lookups: a rebinding name.
#[derive(Clone)]
pub struct Rebinding {
    answers: Arc<Vec<Vec<IpAddr>>>,
    calls: Arc<AtomicUsize>,
}

impl Rebinding {
    pub fn new(answers: &[&[&str]]) -> Self {
        Rebinding {
            answers: Arc::new(
                answers
                    .iter()
                    .map(|a| a.iter().map(|s| ip(s)).collect())
                    .collect(),
            ),
            calls: Arc::default(),
        }
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Resolver for Rebinding {
    async fn resolve(&self, _host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(self.answers[call.min(self.answers.len() - 1)].clone())
    }
}

/// Waits (up to 30 s, for a loaded 2-core machine) until `check` holds.
pub async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..600 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen within 30 s");
}
