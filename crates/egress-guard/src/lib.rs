//! A forward proxy that confines a browser's own traffic to a countersign
//! destination [`Policy`].
//!
//! Point a browser at the guard (`--proxy-server=http://ADDR`, and for
//! Chromium `--proxy-bypass-list=<-loopback>`) and every connection it
//! makes — page loads, subresources, redirects, `fetch()`, WebSockets —
//! passes the policy first: the host allow-list, the schemes, and public
//! addresses only (plus the policy's explicit special-use ranges). The guard
//! resolves each destination through the policy's own resolver and connects
//! only to an address it has just checked; the browser never resolves a
//! destination itself. Everything else is refused with a clear error and
//! recorded as a [`Refusal`].
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use countersign_canonical_policy::{Policy, StaticResolver};
//! use countersign_egress_guard::EgressGuard;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! let policy = Policy::builder()
//!     .allow_host("docs.example.com")
//!     .allow_schemes(["http", "https"])
//!     .resolver(StaticResolver::answering_all(["93.184.216.34".parse().unwrap()]))
//!     .build()?;
//! let guard = EgressGuard::bind(policy, "127.0.0.1:0".parse()?).await?;
//!
//! // A browser behind the guard asks for the cloud metadata service.
//! let mut browser = tokio::net::TcpStream::connect(guard.local_addr()).await?;
//! browser
//!     .write_all(b"GET http://169.254.169.254/ HTTP/1.1\r\nHost: 169.254.169.254\r\nConnection: close\r\n\r\n")
//!     .await?;
//! let mut answer = String::new();
//! browser.read_to_string(&mut answer).await?;
//! assert!(answer.starts_with("HTTP/1.1 403 Forbidden"));
//!
//! let refusals = guard.refusals();
//! assert_eq!(refusals.len(), 1);
//! assert_eq!(refusals[0].host(), "169.254.169.254");
//! assert_eq!(refusals[0].reason(), "host `169.254.169.254` is not allowed");
//! guard.shutdown().await;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! One guard can serve several pages or browser contexts: each
//! [`bind_labelled`](EgressGuard::bind_labelled) listener stamps its label on
//! the refusals of the connections it accepts (Chromium can give each
//! browser context its own proxy), and plain-HTTP refusals also carry the
//! page's `Referer`.

mod proxy;
mod refusal;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use countersign_canonical_policy::Policy;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use refusal::{Refusal, RequestKind};

use proxy::Shared;
use refusal::RefusalLog;

/// The Chromium flags that send every request through the guard listening
/// on `proxy`: `--proxy-server=http://PROXY` and
/// `--proxy-bypass-list=<-loopback>`, which removes Chromium's implicit
/// bypass for loopback names so that they are judged too.
///
/// They confine neither WebRTC, whose UDP does not go through an HTTP
/// proxy, nor the names the browser resolves itself: add
/// `--webrtc-ip-handling-policy=disable_non_proxied_udp` and
/// `--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE <guard address>` (the
/// live backend, `countersign-backend-chromium`, passes both).
///
/// ```
/// let args = countersign_egress_guard::chromium_proxy_args("127.0.0.1:8080".parse().unwrap());
/// assert_eq!(args, ["--proxy-server=http://127.0.0.1:8080", "--proxy-bypass-list=<-loopback>"]);
/// ```
pub fn chromium_proxy_args(proxy: SocketAddr) -> [String; 2] {
    [
        format!("--proxy-server=http://{proxy}"),
        "--proxy-bypass-list=<-loopback>".to_owned(),
    ]
}

/// Settings of an [`EgressGuard`]; see [`EgressGuard::builder`].
#[derive(Debug, Clone)]
pub struct EgressGuardBuilder {
    navigation: Policy,
    subresources: Option<Policy>,
    max_connections: usize,
    connect_timeout: Duration,
    max_refusals: usize,
}

impl EgressGuardBuilder {
    /// Default for [`max_connections`](Self::max_connections).
    pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
    /// Default for [`connect_timeout`](Self::connect_timeout).
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default for [`max_refusals`](Self::max_refusals).
    pub const DEFAULT_MAX_REFUSALS: usize = 10_000;

    /// The policy for subresources (images, scripts, styles, `fetch()`,
    /// WebSockets), e.g. one that also allows the site's CDN. Default: the
    /// navigation policy. See [`RequestKind`] for how the guard tells them
    /// apart, and its limits.
    pub fn subresource_policy(mut self, policy: Policy) -> Self {
        self.subresources = Some(policy);
        self
    }

    /// How many browser connections and tunnels may be open at once
    /// (default 512). Further connections wait to be accepted.
    pub fn max_connections(mut self, limit: usize) -> Self {
        self.max_connections = limit.max(1);
        self
    }

    /// How long connecting to a checked address may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How many refusals are kept (default 10 000); the oldest go first.
    pub fn max_refusals(mut self, limit: usize) -> Self {
        self.max_refusals = limit.max(1);
        self
    }

    /// Binds the guard's first listener (its connections carry no label)
    /// and starts serving on the current tokio runtime.
    pub async fn bind(self, addr: SocketAddr) -> io::Result<EgressGuard> {
        let listener = TcpListener::bind(addr).await?;
        let shared = Arc::new(Shared {
            navigation: self.navigation,
            subresources: self.subresources,
            refusals: RefusalLog::new(self.max_refusals),
            limit: Arc::new(Semaphore::new(self.max_connections)),
            connect_timeout: self.connect_timeout,
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        let mut guard = EgressGuard {
            local_addr: listener.local_addr()?,
            shared,
            listeners: Vec::new(),
        };
        guard.serve(listener, None);
        Ok(guard)
    }
}

/// A running egress guard: a forward proxy on one or more local addresses.
///
/// Dropping it stops every listener, connection and tunnel;
/// [`shutdown`](Self::shutdown) does the same and waits for them to end.
#[derive(Debug)]
pub struct EgressGuard {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    listeners: Vec<JoinHandle<()>>,
}

impl EgressGuard {
    /// Starts a builder for a guard that applies `policy` to navigations
    /// (and, unless told otherwise, to subresources).
    pub fn builder(policy: Policy) -> EgressGuardBuilder {
        EgressGuardBuilder {
            navigation: policy,
            subresources: None,
            max_connections: EgressGuardBuilder::DEFAULT_MAX_CONNECTIONS,
            connect_timeout: EgressGuardBuilder::DEFAULT_CONNECT_TIMEOUT,
            max_refusals: EgressGuardBuilder::DEFAULT_MAX_REFUSALS,
        }
    }

    /// A guard applying `policy` to everything, with default settings,
    /// listening on `addr` (port 0 picks a free port).
    pub async fn bind(policy: Policy, addr: SocketAddr) -> io::Result<EgressGuard> {
        Self::builder(policy).bind(addr).await
    }

    /// Opens another listener whose connections' refusals carry `label`
    /// (e.g. one per browser context or page), and returns its address.
    pub async fn bind_labelled(
        &mut self,
        label: impl Into<String>,
        addr: SocketAddr,
    ) -> io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        self.serve(listener, Some(Arc::from(label.into())));
        Ok(local)
    }

    fn serve(&mut self, listener: TcpListener, label: Option<Arc<str>>) {
        let shared = Arc::clone(&self.shared);
        self.listeners
            .push(tokio::spawn(proxy::accept_loop(listener, label, shared)));
    }

    /// The address of the first listener: give it to the browser as its proxy.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The Chromium flags that send every request of a browser through the
    /// first listener; see [`chromium_proxy_args`].
    pub fn chromium_args(&self) -> [String; 2] {
        chromium_proxy_args(self.local_addr)
    }

    /// Every refusal kept so far, oldest first.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.shared.refusals.all()
    }

    /// The refusals of connections accepted by the listener with `label`.
    pub fn refusals_for(&self, label: &str) -> Vec<Refusal> {
        self.shared.refusals.matching(|r| r.label() == Some(label))
    }

    /// Removes and returns every refusal kept so far.
    pub fn take_refusals(&self) -> Vec<Refusal> {
        self.shared.refusals.take()
    }

    /// How many connection and tunnel tasks are running now (browser
    /// connections, tunnels, upstream connections); 0 when idle.
    pub fn active_tasks(&self) -> usize {
        self.shared.tasks.len()
    }

    /// Stops accepting, closes every connection and tunnel, and waits until
    /// all of them have ended.
    pub async fn shutdown(mut self) {
        self.shared.shutdown.cancel();
        for listener in self.listeners.drain(..) {
            // A listener task ends on cancellation; a join error means it
            // already ended, which is the goal.
            let _ = listener.await;
        }
        self.shared.tasks.close();
        self.shared.tasks.wait().await;
    }
}

impl Drop for EgressGuard {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}
