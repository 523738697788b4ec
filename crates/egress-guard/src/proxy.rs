//! The proxy itself: accepting browser connections, judging each request or
//! tunnel by the policy, and connecting only to checked addresses.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use countersign_canonical_policy::{AuthorizedUrl, Denial, Policy};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::refusal::{Refusal, RefusalLog, RequestKind};

/// How long a browser may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a tunnel may wait for the browser's first bytes when the guard
/// must see them to tell TLS from plain traffic.
const FIRST_BYTES_TIMEOUT: Duration = Duration::from_secs(30);
/// The first byte of a TLS record carrying a handshake (`ClientHello`).
const TLS_HANDSHAKE: u8 = 0x16;

type Body = BoxBody<Bytes, hyper::Error>;

/// State every listener and connection of one guard shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) navigation: Policy,
    /// `None`: subresources follow the navigation policy.
    pub(crate) subresources: Option<Policy>,
    pub(crate) refusals: RefusalLog,
    pub(crate) limit: Arc<Semaphore>,
    pub(crate) connect_timeout: Duration,
    pub(crate) shutdown: CancellationToken,
    pub(crate) tasks: TaskTracker,
}

impl Shared {
    fn policy_for(&self, kind: RequestKind) -> &Policy {
        match (kind, &self.subresources) {
            (RequestKind::Navigation, _) | (_, None) => &self.navigation,
            (_, Some(subresources)) => subresources,
        }
    }
}

pub(crate) async fn accept_loop(
    listener: TcpListener,
    label: Option<Arc<str>>,
    shared: Arc<Shared>,
) {
    loop {
        let permit = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            permit = Arc::clone(&shared.limit).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let accepted = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Typically out of file descriptors: back off, keep serving.
                tracing::warn!(target: "countersign_egress_guard", %error, "accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        // Latency matters more than packet count on a proxy.
        let _ = stream.set_nodelay(true);
        let client = Client {
            shared: Arc::clone(&shared),
            label: label.clone(),
            _permit: Arc::new(permit),
            upstream: Arc::default(),
        };
        shared.tasks.spawn(serve_client(stream, client));
    }
}

async fn serve_client(stream: TcpStream, client: Client) {
    let shutdown = client.shared.shutdown.clone();
    let service = service_fn(move |request| {
        let client = client.clone();
        async move { Ok::<_, Infallible>(client.handle(request).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::select! {
        _ = shutdown.cancelled() => {}
        result = connection => if let Err(error) = result {
            tracing::debug!(target: "countersign_egress_guard", %error, "browser connection ended");
        },
    }
}

/// One upstream HTTP/1.1 connection kept for the next plain-HTTP request of
/// the same browser connection.
struct Upstream {
    host: String,
    address: SocketAddr,
    sender: SendRequest<Body>,
}

/// One browser connection.
#[derive(Clone)]
struct Client {
    shared: Arc<Shared>,
    label: Option<Arc<str>>,
    /// Held by the connection and by any tunnel it opens, so that
    /// `max_connections` bounds both.
    _permit: Arc<OwnedSemaphorePermit>,
    upstream: Arc<Mutex<Option<Upstream>>>,
}

impl Client {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        if request.method() == Method::CONNECT {
            self.tunnel(request).await
        } else if request.uri().scheme().is_some() {
            self.forward(request).await
        } else {
            page(
                StatusCode::BAD_REQUEST,
                "the egress guard is a forward proxy: a request must name an absolute url",
            )
        }
    }

    /// A refusal of what this connection asked for.
    fn refusal(
        &self,
        host: &str,
        port: Option<u16>,
        kind: RequestKind,
        reason: String,
        referrer: Option<String>,
    ) -> Refusal {
        Refusal {
            host: host.to_owned(),
            port,
            kind,
            reason,
            referrer,
            label: self.label.clone(),
            at: SystemTime::now(),
        }
    }

    /// Records `refusal` and answers with the error page.
    fn refuse(&self, refusal: Refusal) -> Response<Body> {
        let shown = format!("the egress guard refused this request: {}", refusal.reason);
        self.shared.refusals.record(refusal);
        page(StatusCode::FORBIDDEN, &shown)
    }

    /// `CONNECT host:port`: authorise, connect to a checked address, then
    /// splice bytes both ways.
    async fn tunnel(&self, request: Request<Incoming>) -> Response<Body> {
        let Some(authority) = request.uri().authority().cloned() else {
            return page(
                StatusCode::BAD_REQUEST,
                "a tunnel request must name `host:port`",
            );
        };
        let host = authority.host().to_owned();
        let Some(port) = authority.port_u16() else {
            let reason = format!("tunnel to `{host}` names no port");
            return self.refuse(self.refusal(&host, None, RequestKind::Tunnel, reason, None));
        };
        let (checked, required_scheme) = match self.authorize_tunnel(&host, port).await {
            Ok(found) => found,
            Err(denial) => {
                return self.refuse(self.refusal(
                    &host,
                    Some(port),
                    RequestKind::Tunnel,
                    denial,
                    None,
                ));
            }
        };
        let (upstream, address) = match self.connect_checked(checked.addresses(), port).await {
            Ok(found) => found,
            Err(reason) => return self.unreachable(&host, &reason),
        };
        tracing::debug!(target: "countersign_egress_guard", %host, %address, "tunnel opened");

        let client = self.clone();
        self.shared.tasks.spawn(async move {
            let shutdown = client.shared.shutdown.clone();
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = client.splice(request, upstream, &host, port, required_scheme) => {}
            }
        });
        Response::new(empty())
    }

    /// Tries the navigation policy, then the subresource policy (a tunnel
    /// hides which it is). Returns the checked destination and, when the
    /// allowing policy admits only one scheme, that scheme.
    async fn authorize_tunnel(
        &self,
        host: &str,
        port: u16,
    ) -> Result<(AuthorizedUrl, Option<&'static str>), String> {
        let policies = std::iter::once(&self.shared.navigation).chain(&self.shared.subresources);
        let mut first_denial = None;
        for policy in policies {
            let scheme = if policy.allows_scheme("https") {
                "https"
            } else {
                "http"
            };
            match policy
                .authorize_destination(&format!("{scheme}://{host}:{port}/"))
                .await
            {
                Ok(checked) => {
                    let both = policy.allows_scheme("http") && policy.allows_scheme("https");
                    return Ok((checked, (!both).then_some(scheme)));
                }
                Err(denial) => {
                    first_denial.get_or_insert(denial.to_string());
                }
            }
        }
        Err(first_denial.unwrap_or_default())
    }

    async fn splice(
        &self,
        request: Request<Incoming>,
        mut upstream: TcpStream,
        host: &str,
        port: u16,
        required_scheme: Option<&'static str>,
    ) {
        let upgraded = match hyper::upgrade::on(request).await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!(target: "countersign_egress_guard", %error, "tunnel not upgraded");
                return;
            }
        };
        let mut browser = TokioIo::new(upgraded);
        if let Some(required) = required_scheme {
            // Only one scheme is allowed: the first byte tells a TLS
            // handshake (`https`, `wss`) from plain traffic (`http`, `ws`).
            let mut first = vec![0u8; 16 * 1024];
            let read = tokio::time::timeout(FIRST_BYTES_TIMEOUT, browser.read(&mut first)).await;
            let Ok(Ok(count @ 1..)) = read else {
                return;
            };
            let carried = if first[0] == TLS_HANDSHAKE {
                "https"
            } else {
                "http"
            };
            if carried != required {
                let denial = Denial::SchemeNotAllowed {
                    scheme: carried.to_owned(),
                };
                let refusal = self.refusal(
                    host,
                    Some(port),
                    RequestKind::Tunnel,
                    denial.to_string(),
                    None,
                );
                self.shared.refusals.record(refusal);
                return;
            }
            if upstream.write_all(&first[..count]).await.is_err() {
                return;
            }
        }
        if let Err(error) = tokio::io::copy_bidirectional(&mut browser, &mut upstream).await {
            tracing::debug!(target: "countersign_egress_guard", %error, "tunnel ended");
        }
    }

    /// A plain-HTTP request in absolute form: authorise its URL for its
    /// kind, then send it to a checked address with the checked `Host`.
    async fn forward(&self, request: Request<Incoming>) -> Response<Body> {
        let kind = classify(request.headers());
        let referrer = request
            .headers()
            .get(header::REFERER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let uri = request.uri().clone();
        let host = uri.host().unwrap_or_default().to_owned();
        let port = uri.port_u16().or(Some(80));
        if uri.scheme_str() != Some("http") {
            let reason = format!(
                "scheme `{}` cannot be forwarded; only `http` can (`https` goes through a tunnel)",
                uri.scheme_str().unwrap_or_default()
            );
            return self.refuse(self.refusal(&host, port, kind, reason, referrer));
        }
        let policy = self.shared.policy_for(kind);
        let checked = match policy.authorize_destination(&uri.to_string()).await {
            Ok(checked) => checked,
            Err(denial) => {
                return self.refuse(self.refusal(&host, port, kind, denial.to_string(), referrer));
            }
        };

        let url = checked.url();
        let mut target = url.path().to_owned();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        let checked_host = checked.host().to_owned();
        let host_header = match url.port() {
            Some(port) => format!("{checked_host}:{port}"),
            None => checked_host.clone(),
        };
        let checked_port = url.port_or_known_default().unwrap_or(80);
        let (mut parts, body) = request.into_parts();
        let (Ok(target), Ok(host_header)) = (target.parse(), HeaderValue::from_str(&host_header))
        else {
            return page(
                StatusCode::BAD_REQUEST,
                "the checked url cannot be sent as a request",
            );
        };
        parts.uri = target;
        parts.version = Version::HTTP_11;
        remove_hop_by_hop(&mut parts.headers);
        parts.headers.insert(header::HOST, host_header);
        let outgoing = Request::from_parts(parts, body.boxed());

        let mut upstream = match self.upstream_for(&checked, checked_port).await {
            Ok(upstream) => upstream,
            Err(reason) => return self.unreachable(&host, &reason),
        };
        let answer = upstream.sender.send_request(outgoing).await;
        match answer {
            Ok(response) => {
                *self.upstream.lock().unwrap_or_else(PoisonError::into_inner) = Some(upstream);
                let (mut parts, body) = response.into_parts();
                remove_hop_by_hop(&mut parts.headers);
                Response::from_parts(parts, body.boxed())
            }
            Err(error) => {
                self.unreachable(&host, &format!("`{checked_host}` answered badly: {error}"))
            }
        }
    }

    /// The kept upstream connection when it goes to an address that was
    /// just checked again for the same host and port; else a new one.
    async fn upstream_for(&self, checked: &AuthorizedUrl, port: u16) -> Result<Upstream, String> {
        let kept = self
            .upstream
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .filter(|kept| {
                kept.host == checked.host()
                    && kept.address.port() == port
                    && checked.addresses().contains(&kept.address.ip())
            });
        if let Some(mut kept) = kept
            && kept.sender.ready().await.is_ok()
        {
            return Ok(kept);
        }
        let (stream, address) = self.connect_checked(checked.addresses(), port).await?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| format!("handshake with `{address}` failed: {error}"))?;
        let shutdown = self.shared.shutdown.clone();
        self.shared.tasks.spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                result = connection => if let Err(error) = result {
                    tracing::debug!(target: "countersign_egress_guard", %error, "upstream connection ended");
                },
            }
        });
        Ok(Upstream {
            host: checked.host().to_owned(),
            address,
            sender,
        })
    }

    /// Connects to the first of the just-checked addresses that answers.
    async fn connect_checked(
        &self,
        addresses: &[IpAddr],
        port: u16,
    ) -> Result<(TcpStream, SocketAddr), String> {
        let mut last = String::from("no checked address");
        for ip in addresses {
            let address = SocketAddr::new(*ip, port);
            match tokio::time::timeout(self.shared.connect_timeout, TcpStream::connect(address))
                .await
            {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok((stream, address));
                }
                Ok(Err(error)) => last = format!("connecting to `{address}` failed: {error}"),
                Err(_) => {
                    last = format!(
                        "connecting to `{address}` timed out after {}ms",
                        self.shared.connect_timeout.as_millis()
                    );
                }
            }
        }
        Err(last)
    }

    fn unreachable(&self, host: &str, reason: &str) -> Response<Body> {
        tracing::warn!(target: "countersign_egress_guard", %host, %reason, "destination unreachable");
        page(
            StatusCode::BAD_GATEWAY,
            &format!("the egress guard allowed `{host}` but could not reach it: {reason}"),
        )
    }
}

/// Navigation or subresource, from the markers the browser sets; see
/// [`RequestKind`].
pub(crate) fn classify(headers: &HeaderMap) -> RequestKind {
    match headers.get("sec-fetch-mode") {
        Some(mode) if mode == "navigate" => RequestKind::Navigation,
        Some(_) => RequestKind::Subresource,
        None if headers
            .get("upgrade-insecure-requests")
            .is_some_and(|v| v == "1") =>
        {
            RequestKind::Navigation
        }
        None => RequestKind::Subresource,
    }
}

/// Removes the headers that describe one hop (RFC 9110 §7.6.1), including
/// those the `Connection` header names.
fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("proxy-connection"),
        HeaderName::from_static("keep-alive"),
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

/// A short HTML page saying what happened, never cached.
fn page(status: StatusCode, message: &str) -> Response<Body> {
    let title = status.canonical_reason().unwrap_or("refused");
    let html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body><h1>{title}</h1><p id=\"countersign-egress\">{}</p></body></html>\n",
        escape_html(message)
    );
    let mut response = Response::new(
        Full::new(Bytes::from(html))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        HeaderName::from_static("x-countersign-egress"),
        HeaderValue::from_static("refused"),
    );
    response
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn classification_follows_the_browser_markers() {
        assert_eq!(
            classify(&headers(&[("sec-fetch-mode", "navigate")])),
            RequestKind::Navigation
        );
        assert_eq!(
            classify(&headers(&[
                ("sec-fetch-mode", "no-cors"),
                ("upgrade-insecure-requests", "1")
            ])),
            RequestKind::Subresource
        );
        assert_eq!(
            classify(&headers(&[("upgrade-insecure-requests", "1")])),
            RequestKind::Navigation
        );
        assert_eq!(classify(&headers(&[])), RequestKind::Subresource);
        assert_eq!(
            classify(&headers(&[("upgrade-insecure-requests", "0")])),
            RequestKind::Subresource
        );
    }

    #[test]
    fn hop_by_hop_headers_go() {
        let mut map = headers(&[
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("proxy-connection", "keep-alive"),
            ("proxy-authorization", "Basic eDp5"),
            ("accept", "*/*"),
        ]);
        remove_hop_by_hop(&mut map);
        let left: Vec<&str> = map.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["accept"]);
    }

    #[test]
    fn the_error_page_escapes_the_reason() {
        assert_eq!(
            escape_html("host `<a href=\"x\">` & 'y'"),
            "host `&lt;a href=&quot;x&quot;&gt;` &amp; &#39;y&#39;"
        );
    }
}
