//! What the guard refused, kept for the host to read.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

/// What kind of request the guard judged, which picks the policy it applies.
///
/// - A plain-HTTP request is a **navigation** when the browser marks it as
///   one: `Sec-Fetch-Mode: navigate`, or — where the browser sends no
///   `Sec-Fetch-*` headers (plain HTTP to a host that is not potentially
///   trustworthy) — `Upgrade-Insecure-Requests: 1`, which Chromium sends on
///   navigations. Anything else is a **subresource**.
/// - A `CONNECT` tunnel (HTTPS, WebSockets) hides its request inside, so it is
///   a **tunnel**: it passes when either policy allows its host and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RequestKind {
    /// A plain-HTTP page load (top-level or frame).
    Navigation,
    /// A plain-HTTP subresource: image, script, style, `fetch()`, XHR.
    Subresource,
    /// A `CONNECT` tunnel.
    Tunnel,
}

impl RequestKind {
    /// `navigation`, `subresource` or `tunnel`.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Navigation => "navigation",
            RequestKind::Subresource => "subresource",
            RequestKind::Tunnel => "tunnel",
        }
    }
}

impl fmt::Display for RequestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One connection or request the guard refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
    pub(crate) kind: RequestKind,
    pub(crate) reason: String,
    pub(crate) referrer: Option<String>,
    pub(crate) label: Option<Arc<str>>,
    pub(crate) at: SystemTime,
}

impl Refusal {
    /// The host the browser asked for, as it asked (IPv6 in brackets).
    pub fn host(&self) -> &str {
        &self.host
    }
    /// The port the browser asked for, when it named or implied one.
    pub fn port(&self) -> Option<u16> {
        self.port
    }
    /// What kind of request it was.
    pub fn kind(&self) -> RequestKind {
        self.kind
    }
    /// Why it was refused: the policy's denial message, or the guard's own
    /// (lower-case, user input in backticks).
    pub fn reason(&self) -> &str {
        &self.reason
    }
    /// The page that asked, from the request's `Referer` (plain HTTP only;
    /// the browser's referrer policy may cut it to the origin).
    pub fn referrer(&self) -> Option<&str> {
        self.referrer.as_deref()
    }
    /// The label of the listener the connection came through, if any.
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }
    /// When the guard refused it.
    pub fn at(&self) -> SystemTime {
        self.at
    }
}

/// A bounded log of refusals, oldest dropped first.
#[derive(Debug)]
pub(crate) struct RefusalLog {
    limit: usize,
    entries: Mutex<VecDeque<Refusal>>,
}

impl RefusalLog {
    pub(crate) fn new(limit: usize) -> Self {
        RefusalLog {
            limit,
            entries: Mutex::new(VecDeque::new()),
        }
    }

    pub(crate) fn record(&self, refusal: Refusal) {
        tracing::warn!(
            target: "countersign_egress_guard",
            host = %refusal.host,
            port = ?refusal.port,
            kind = %refusal.kind,
            reason = %refusal.reason,
            referrer = ?refusal.referrer,
            label = ?refusal.label,
            "egress refused"
        );
        // A poisoned log still holds valid entries: keep recording.
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.limit {
            entries.pop_front();
        }
        entries.push_back(refusal);
    }

    pub(crate) fn all(&self) -> Vec<Refusal> {
        self.matching(|_| true)
    }

    pub(crate) fn matching(&self, keep: impl Fn(&Refusal) -> bool) -> Vec<Refusal> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.iter().filter(|r| keep(r)).cloned().collect()
    }

    pub(crate) fn take(&self) -> Vec<Refusal> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.drain(..).collect()
    }
}
