//! Who is looking: the host's authentication, asked on every request,
//! and a ready one for hosts whose approvers each hold a secret token.

use async_trait::async_trait;
use axum::http::header;
use axum::http::request::Parts;
use countersign_approval_core::{ActorId, ApproverId, RunId};

/// The host's authentication of the people (or systems) who decide
/// proposals. The pages keep no users, passwords or sessions of their own:
/// every request is passed to [`approver`](Approvers::approver), and
/// whoever it names is the [`ApproverId`] recorded in the grant
/// ([`Approval::approver`](countersign_approval_core::Approval::approver))
/// and in the proposal's decision.
///
/// Implement it over whatever the host already uses: a session cookie, a
/// header set by an authenticating reverse proxy, a bearer token. The
/// request's method, URI, headers and extensions are in `request` (an
/// extension a host middleware inserted is a good way to hand over a user
/// the host already looked up).
///
/// ```
/// use countersign_approval_core::ApproverId;
/// use countersign_approval_web::{Approvers, Parts, async_trait};
///
/// /// Trusts the user name an authenticating proxy put in `x-user`.
/// struct ProxyUser;
///
/// #[async_trait]
/// impl Approvers for ProxyUser {
///     async fn approver(&self, request: &Parts) -> Option<ApproverId> {
///         let name = request.headers.get("x-user")?.to_str().ok()?;
///         ApproverId::new(format!("user:{name}")).ok()
///     }
/// }
/// ```
#[async_trait]
pub trait Approvers: Send + Sync {
    /// Who sent `request`, or `None` when it is not authenticated (the page
    /// then answers `401` and shows nothing).
    async fn approver(&self, request: &Parts) -> Option<ApproverId>;

    /// Whether `approver` may see and decide the proposals of `run` of
    /// `actor`, and stop that run. Asked on every page of a run or of one
    /// of its proposals, before anything of it is shown or changed; `false`
    /// answers `403` (for a proposal, one that names nothing of it: not its
    /// run, actor or action).
    ///
    /// The default lets every authenticated approver review every run:
    /// override it when approvers may only decide for some actors or runs.
    async fn may_review(&self, approver: &ApproverId, actor: &ActorId, run: &RunId) -> bool {
        let _ = (approver, actor, run);
        true
    }
}

#[async_trait]
impl<A: Approvers + ?Sized> Approvers for std::sync::Arc<A> {
    async fn approver(&self, request: &Parts) -> Option<ApproverId> {
        (**self).approver(request).await
    }

    async fn may_review(&self, approver: &ApproverId, actor: &ActorId, run: &RunId) -> bool {
        (**self).may_review(approver, actor, run).await
    }
}

/// Whether `given` is `secret`, compared in constant time: every byte is
/// compared, without an early exit, so the time taken says nothing of how
/// much of a guess matched (only of its length, which is not a secret).
///
/// ```
/// use countersign_approval_web::same_secret;
///
/// assert!(same_secret("s3cr3t-token", "s3cr3t-token"));
/// assert!(!same_secret("s3cr3t-tokex", "s3cr3t-token"));
/// assert!(!same_secret("s3cr3t", "s3cr3t-token"));
/// ```
pub fn same_secret(given: &str, secret: &str) -> bool {
    given.len() == secret.len()
        && given
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

/// How long the sign-in cookie of [`TokenApprovers::session_cookie`] is
/// kept: 30 days.
pub const SESSION_COOKIE_MAX_AGE: std::time::Duration =
    std::time::Duration::from_secs(30 * 24 * 60 * 60);

/// Approvers who each hold a secret token, sent as a bearer token
/// (`Authorization: Bearer <token>`) or in a session cookie that the
/// host's sign-in link sets ([`session_cookie`](Self::session_cookie)):
/// an [`Approvers`] a host can use as it is.
///
/// A request that carries a bearer token is judged by that token alone;
/// otherwise by its cookie. Every token is compared with [`same_secret`],
/// and with every entry, so the time taken says nothing of which one
/// matched. The tokens are never printed (`Debug` counts them).
///
/// ```
/// use countersign_approval_core::ApproverId;
/// use countersign_approval_web::TokenApprovers;
///
/// let approvers = TokenApprovers::new()
///     .with("a-long-random-secret-for-alice", ApproverId::new("alice")?);
/// assert_eq!(
///     approvers.approver_for("a-long-random-secret-for-alice"),
///     Some(ApproverId::new("alice")?)
/// );
/// assert_eq!(approvers.approver_for("a guess"), None);
/// // What the host's sign-in route sets once the link's token is known:
/// assert_eq!(
///     approvers.session_cookie("a-long-random-secret-for-alice"),
///     "countersign-approver=a-long-random-secret-for-alice; HttpOnly; SameSite=Lax; Path=/; Max-Age=2592000"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct TokenApprovers {
    cookie: String,
    bearer: bool,
    tokens: Vec<(String, ApproverId)>,
}

impl TokenApprovers {
    /// The session cookie's name unless the host names another.
    pub const DEFAULT_COOKIE: &'static str = "countersign-approver";

    /// No approver yet (every request refused); tokens are taken as a
    /// bearer token or in the cookie [`DEFAULT_COOKIE`](Self::DEFAULT_COOKIE).
    pub fn new() -> Self {
        TokenApprovers {
            cookie: Self::DEFAULT_COOKIE.to_owned(),
            bearer: true,
            tokens: Vec::new(),
        }
    }

    /// Adds `token`, standing for `approver`.
    pub fn with(mut self, token: impl Into<String>, approver: ApproverId) -> Self {
        self.tokens.push((token.into(), approver));
        self
    }

    /// Reads the token from the cookie `name` instead of
    /// [`DEFAULT_COOKIE`](Self::DEFAULT_COOKIE).
    pub fn cookie_name(mut self, name: impl Into<String>) -> Self {
        self.cookie = name.into();
        self
    }

    /// Takes the token from the cookie only: a bearer token is not looked
    /// at.
    pub fn without_bearer(mut self) -> Self {
        self.bearer = false;
        self
    }

    /// The approver `token` stands for, or `None` when it stands for none.
    pub fn approver_for(&self, token: &str) -> Option<ApproverId> {
        // Every entry is compared, so timing says nothing of which matched.
        let mut found = None;
        for (secret, approver) in &self.tokens {
            if same_secret(token, secret) {
                found = Some(approver.clone());
            }
        }
        found
    }

    /// The `Set-Cookie` value that signs the holder of `token` in: the
    /// cookie these approvers read, `HttpOnly`, for every path of the
    /// origin, kept [`SESSION_COOKIE_MAX_AGE`] (a phone signed in once stays
    /// signed in across browser restarts).
    ///
    /// `SameSite=Lax`, not `Strict`: a person opens a proposal from a link
    /// on another site (a Slack or webmail notice), and a `Strict` cookie
    /// is not sent on that navigation, so a signed-in person would see
    /// "Sign-in required". `Lax` still keeps it off every cross-site
    /// `POST`, and the pages' forms do not rest on it: each decision
    /// carries a form token and must come from the pages' own origin.
    pub fn session_cookie(&self, token: &str) -> String {
        format!(
            "{}={token}; HttpOnly; SameSite=Lax; Path=/; Max-Age={}",
            self.cookie,
            SESSION_COOKIE_MAX_AGE.as_secs()
        )
    }

    /// The token `request` carries: its bearer token when it has one (and
    /// bearer tokens are taken), else its cookie.
    fn token<'a>(&self, request: &'a Parts) -> Option<&'a str> {
        let bearer = if self.bearer {
            request
                .headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        } else {
            None
        };
        let cookie = request
            .headers
            .get(header::COOKIE)
            .and_then(|v| v.to_str().ok())
            .and_then(|cookies| {
                cookies
                    .split(';')
                    .filter_map(|pair| pair.trim().split_once('='))
                    .find(|(name, _)| *name == self.cookie)
                    .map(|(_, value)| value)
            });
        bearer.or(cookie)
    }
}

impl Default for TokenApprovers {
    fn default() -> Self {
        TokenApprovers::new()
    }
}

impl std::fmt::Debug for TokenApprovers {
    // The tokens are secrets: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenApprovers")
            .field("cookie", &self.cookie)
            .field("bearer", &self.bearer)
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

#[async_trait]
impl Approvers for TokenApprovers {
    async fn approver(&self, request: &Parts) -> Option<ApproverId> {
        self.approver_for(self.token(request)?)
    }
}
