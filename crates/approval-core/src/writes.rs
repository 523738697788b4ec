//! What a page may send once an act is performed: read-only mode after an
//! act a rule approved.
//!
//! A rule trusts what a page says about a target ("Next", "Show more"). A
//! backend with a live page makes the browser hold the rule to its claim:
//! from an act performed under [`WriteAccess::ReadOnly`] on, every request
//! the page starts that could write is refused before it leaves the
//! browser, until an act a person approved opens writing again.

use std::fmt;

use url::Url;

use crate::ids::OperationId;

/// The methods read-only mode lets through: the ones HTTP defines as safe.
pub const READ_ONLY_METHODS: [&str; 3] = ["GET", "HEAD", "OPTIONS"];

/// Whether the page may write from an act on.
///
/// ```
/// use countersign_approval_core::{AllowedWrite, WriteAccess};
///
/// let graphql = AllowedWrite::new("POST", "https://shop.example/graphql")?;
/// let access = WriteAccess::ReadOnly { allowed: vec![graphql] };
/// assert!(access.permits("GET", "https://tracker.example/pixel.gif"));
/// assert!(access.permits("POST", "https://shop.example/graphql"));
/// assert!(!access.permits("POST", "https://shop.example/pay"));
/// assert!(access.permits("POST", "https://shop.example/graphql?x=1"));
/// assert!(!access.permits("post", "https://shop.example/graphql"));
/// assert!(WriteAccess::Open.permits("DELETE", "https://shop.example/basket/1"));
/// # Ok::<(), countersign_approval_core::AllowedWriteError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteAccess {
    /// A person approved the act (its own grant, or a standing grant a
    /// person gave): the page may write until the next read-only act.
    Open,
    /// A rule approved the act: from it on, only
    /// [`READ_ONLY_METHODS`] and the host's `allowed` writes leave the
    /// browser (a backend says which kinds of request it can hold).
    ReadOnly {
        /// Writes the host allows in read-only mode; none unless it says.
        allowed: Vec<AllowedWrite>,
    },
}

impl WriteAccess {
    /// Whether a request with `method` to `url` may leave the browser.
    /// A method is compared as HTTP compares it, case-sensitively: `post`
    /// is not `POST`, and is refused in read-only mode.
    pub fn permits(&self, method: &str, url: &str) -> bool {
        match self {
            WriteAccess::Open => true,
            WriteAccess::ReadOnly { allowed } => {
                READ_ONLY_METHODS.contains(&method) || allowed.iter().any(|a| a.allows(method, url))
            }
        }
    }

    /// Whether writing is refused (apart from allowed writes).
    pub fn is_read_only(&self) -> bool {
        !matches!(self, WriteAccess::Open)
    }
}

/// A write the host allows in read-only mode: one method to one origin and
/// path (or every path under a prefix written with a final `/*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedWrite {
    method: String,
    origin: url::Origin,
    path: PathMatch,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PathMatch {
    Exact(String),
    /// Everything under this prefix, which ends with `/`.
    Under(String),
}

/// Why an [`AllowedWrite`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AllowedWriteError {
    /// The method is not an HTTP token in capitals, or is one read-only
    /// mode already lets through.
    #[error(
        "allowed write method `{0}` must be a method such as `POST` in capitals, other than GET, HEAD and OPTIONS"
    )]
    Method(String),
    /// The address is not an absolute http or https URL with a host and a
    /// path, without query or fragment.
    #[error(
        "allowed write address `{0}` must be an http or https URL with a path and no query or fragment, such as `https://shop.example/graphql` or `https://shop.example/api/*`"
    )]
    Address(String),
}

impl AllowedWrite {
    /// `method` to `address`: `https://shop.example/graphql` allows that
    /// path only; `https://shop.example/api/*` every path under `/api/`.
    /// The scheme and the effective port are part of the match.
    pub fn new(method: &str, address: &str) -> Result<AllowedWrite, AllowedWriteError> {
        let token = !method.is_empty()
            && method.len() <= 32
            && method.bytes().all(|b| b.is_ascii_uppercase() || b == b'-');
        if !token || READ_ONLY_METHODS.contains(&method) {
            return Err(AllowedWriteError::Method(method.to_owned()));
        }
        let bad = || AllowedWriteError::Address(address.to_owned());
        let (base, under) = match address.strip_suffix('*') {
            Some(base) if base.ends_with('/') => (base, true),
            Some(_) => return Err(bad()),
            None => (address, false),
        };
        let url = Url::parse(base).map_err(|_| bad())?;
        let plain = matches!(url.scheme(), "http" | "https")
            && url.host_str().is_some()
            && url.query().is_none()
            && url.fragment().is_none()
            && url.username().is_empty()
            && url.password().is_none()
            && !base.contains('*')
            && !base.contains('?')
            && !base.contains('#');
        if !plain {
            return Err(bad());
        }
        let path = url.path().to_owned();
        Ok(AllowedWrite {
            method: method.to_owned(),
            origin: url.origin(),
            path: if under {
                PathMatch::Under(path)
            } else {
                PathMatch::Exact(path)
            },
        })
    }

    /// Whether this allows `method` to `url` (its query ignored).
    pub fn allows(&self, method: &str, url: &str) -> bool {
        if method != self.method {
            return false;
        }
        let Ok(url) = Url::parse(url) else {
            return false;
        };
        if url.origin() != self.origin {
            return false;
        }
        match &self.path {
            PathMatch::Exact(path) => url.path() == path,
            PathMatch::Under(prefix) => url.path().starts_with(prefix.as_str()),
        }
    }
}

impl fmt::Display for AllowedWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = self.origin.ascii_serialization();
        match &self.path {
            PathMatch::Exact(path) => write!(f, "{} {origin}{path}", self.method),
            PathMatch::Under(prefix) => write!(f, "{} {origin}{prefix}*", self.method),
        }
    }
}

/// A request read-only mode refused before it left the browser.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RefusedWrite {
    /// The act whose read-only mode refused it.
    pub operation_id: OperationId,
    /// The request's method.
    pub method: String,
    /// Where it was going: scheme, host, port and path, never the query
    /// (which may carry what the page meant to send).
    pub address: String,
    /// What started it, as the browser names it (`Fetch`, `XHR`, `Ping`
    /// for `sendBeacon`, `Document` for a form, …).
    pub kind: String,
}

impl RefusedWrite {
    /// A refused request; `url` is kept without its query and fragment.
    pub fn new(operation_id: OperationId, method: &str, url: &str, kind: &str) -> RefusedWrite {
        let address = match Url::parse(url) {
            Ok(mut url) => {
                url.set_query(None);
                url.set_fragment(None);
                let _ = url.set_username("");
                let _ = url.set_password(None);
                url.to_string()
            }
            Err(_) => "<not a URL>".to_owned(),
        };
        RefusedWrite {
            operation_id,
            method: method.chars().take(32).collect(),
            address,
            kind: kind.chars().take(32).collect(),
        }
    }
}

impl fmt::Display for RefusedWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({})", self.method, self.address, self.kind)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn read_only_lets_only_safe_methods_and_allowed_writes_through() {
        let strict = WriteAccess::ReadOnly { allowed: vec![] };
        for method in ["GET", "HEAD", "OPTIONS"] {
            assert!(strict.permits(method, "https://a.example/x"));
        }
        for method in ["POST", "PUT", "PATCH", "DELETE", "get", "PROPFIND", ""] {
            assert!(!strict.permits(method, "https://a.example/x"), "{method}");
        }
        let allowed = WriteAccess::ReadOnly {
            allowed: vec![
                AllowedWrite::new("POST", "https://a.example/graphql").unwrap(),
                AllowedWrite::new("PUT", "https://a.example/api/*").unwrap(),
            ],
        };
        assert!(allowed.permits("POST", "https://a.example/graphql?op=Q"));
        assert!(allowed.permits("POST", "https://a.example:443/graphql"));
        assert!(!allowed.permits("POST", "http://a.example/graphql"));
        assert!(!allowed.permits("POST", "https://a.example:8443/graphql"));
        assert!(!allowed.permits("POST", "https://b.example/graphql"));
        assert!(!allowed.permits("POST", "https://a.example/graphql/x"));
        assert!(!allowed.permits("PUT", "https://a.example/graphql"));
        assert!(allowed.permits("PUT", "https://a.example/api/cart/1"));
        assert!(!allowed.permits("PUT", "https://a.example/api"));
        assert!(!allowed.permits("PUT", "https://a.example/apis/1"));
        assert!(!allowed.permits("DELETE", "https://a.example/api/cart/1"));
        assert!(strict.is_read_only());
        assert!(!WriteAccess::Open.is_read_only());
    }

    #[test]
    fn an_allowed_write_is_refused_by_name_when_malformed() {
        for method in ["GET", "post", "", "PO ST"] {
            assert_eq!(
                AllowedWrite::new(method, "https://a.example/x"),
                Err(AllowedWriteError::Method(method.to_owned()))
            );
        }
        for address in [
            "a.example/x",
            "ftp://a.example/x",
            "https://a.example/x?y=1",
            "https://a.example/x#y",
            "https://a.example/x*",
            "https://a.example/*/y",
            "https://u:p@a.example/x",
        ] {
            assert_eq!(
                AllowedWrite::new("POST", address),
                Err(AllowedWriteError::Address(address.to_owned())),
                "{address}"
            );
        }
        assert_eq!(
            AllowedWrite::new("POST", "https://A.Example:443/api/*")
                .unwrap()
                .to_string(),
            "POST https://a.example/api/*"
        );
        assert_eq!(
            AllowedWriteError::Method("get".into()).to_string(),
            "allowed write method `get` must be a method such as `POST` in capitals, other than GET, HEAD and OPTIONS"
        );
    }

    #[test]
    fn a_refused_write_keeps_no_query() {
        let op = OperationId::generate().unwrap();
        let refused = RefusedWrite::new(
            op.clone(),
            "POST",
            "https://u:p@pay.example/charge?card=4242#x",
            "Fetch",
        );
        assert_eq!(refused.address, "https://pay.example/charge");
        assert_eq!(
            refused.to_string(),
            "POST https://pay.example/charge (Fetch)"
        );
        assert_eq!(refused.operation_id, op);
    }
}
