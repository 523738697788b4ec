//! MCP over Streamable HTTP: an axum Router a host merges into the same
//! application as the approval pages.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::identity::Tokens;
use crate::server::McpServer;
use crate::wire::{MAX_MESSAGE_BYTES, WireError, check_message};

/// The path of the MCP endpoint in [`router`]'s Router.
pub const MCP_PATH: &str = "/mcp";

/// How the HTTP endpoint checks where requests come from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The `Host` values (`name` or `name:port`) accepted: loopback only by
    /// default, against DNS rebinding; a public deployment lists its own
    /// host names.
    pub allowed_hosts: Vec<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
        }
    }
}

impl HttpOptions {
    /// These options, accepting the `Host` values `hosts` instead.
    pub fn allowed_hosts(mut self, hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }
}

/// A Router serving MCP's Streamable HTTP transport at [`MCP_PATH`].
///
/// Every request first passes the host's `tokens`: without
/// `Authorization: Bearer <token>` naming an identity it is answered
/// `401` with an empty body and nothing else. A `POST` body is then read
/// up to [`MAX_MESSAGE_BYTES`] (`413` beyond) and refused (`400`, a
/// JSON-RPC error) when it is not JSON or repeats a key in one object.
/// Only then does the MCP SDK see it, with the caller's identity attached.
pub fn router(server: McpServer, tokens: impl Tokens + 'static, options: HttpOptions) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(options.allowed_hosts)
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let tokens: Arc<dyn Tokens> = Arc::new(tokens);
    Router::new()
        .route_service(MCP_PATH, service)
        .route_layer(middleware::from_fn_with_state(tokens, guard))
}

/// Authenticates, bounds and checks one request before the SDK sees it.
async fn guard(State(tokens): State<Arc<dyn Tokens>>, request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let identity = match token {
        Some(token) => tokens.identify(token).await,
        None => None,
    };
    let Some(identity) = identity else {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
        )
            .into_response();
    };
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(identity);
    if parts.method == Method::DELETE {
        return session_closed(next.run(Request::from_parts(parts, body)).await);
    }
    if parts.method != Method::POST {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let Some(bytes) = read_bounded(body).await else {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, &WireError::TooLarge, b"");
    };
    if let Err(error) = check_message(&bytes) {
        return refuse(StatusCode::BAD_REQUEST, &error, &bytes);
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The answer to a session's `DELETE`: the SDK says `202 Accepted`, but the
/// session is closed by then, and the official clients take only `200` or
/// `204` as a closed session (the Python SDK logs "Session termination
/// failed: 202" on every close otherwise), so a closed session is `204`.
fn session_closed(mut response: Response) -> Response {
    if response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
        *response.body_mut() = Body::empty();
        response.headers_mut().remove(header::CONTENT_LENGTH);
        response.headers_mut().remove(header::CONTENT_TYPE);
    }
    response
}

/// How much of an oversized body is still read, and dropped, past the
/// bound, and for how long: a client still sending when the server
/// answers and closes gets a reset instead of the `413` that says why.
const DRAIN_BYTES: usize = 16 * MAX_MESSAGE_BYTES;
const DRAIN_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// The whole body, or `None` when it is longer than [`MAX_MESSAGE_BYTES`]
/// or cannot be read whole (the client went away). Past the bound the rest
/// is read and dropped, up to [`DRAIN_BYTES`] within [`DRAIN_WITHIN`], so
/// that the refusal reaches the client; never kept in memory.
async fn read_bounded(body: Body) -> Option<axum::body::Bytes> {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut kept: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.ok()?;
        if kept.len() + chunk.len() > MAX_MESSAGE_BYTES {
            let mut seen = kept.len() + chunk.len();
            drop(kept);
            let drain = async {
                while seen <= DRAIN_BYTES {
                    match stream.next().await {
                        Some(Ok(chunk)) => seen += chunk.len(),
                        _ => return,
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_WITHIN, drain).await;
            return None;
        }
        kept.extend_from_slice(&chunk);
    }
    Some(kept.into())
}

fn refuse(status: StatusCode, error: &WireError, message: &[u8]) -> Response {
    let body = error.response(message).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
