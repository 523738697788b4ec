//! The pages' configuration and the Router they hand the host.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use countersign_approval_core::{
    ActorId, Clock, MAX_TTL, ProposalId, ProposalStore, RunId, SystemClock,
};

use crate::auth::Approvers;
use crate::forms::{FORM_KEY_BYTES, FormKey};
use crate::paths::{proposal_path, run_path};
use crate::router;
use crate::state::Shared;

/// How long a grant approved on the pages stays usable, unless the host
/// sets another lifetime: 5 minutes.
pub const DEFAULT_GRANT_TTL: Duration = Duration::from_secs(5 * 60);

/// [`ApprovalPagesBuilder::build`] refused the configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalPagesError {
    /// The grant lifetime is zero or longer than 24 hours.
    #[error("grant ttl must be more than 0 and at most 24 hours, got {millis}ms")]
    InvalidGrantTtl {
        /// The requested lifetime in milliseconds.
        millis: u128,
    },
    /// No form key was given and none could be generated.
    #[error("could not make a form key: {message}")]
    FormKey {
        /// What failed.
        message: String,
    },
}

/// The approval pages: where a person sees what a model proposed and
/// approves or denies it, once, and can stop a run.
///
/// Build one with [`ApprovalPages::builder`] and mount
/// [`router`](ApprovalPages::router) in the host's own application,
/// preferably nested under a path of its own:
///
/// ```no_run
/// # use countersign_approval_web::ApprovalPages;
/// # fn f(pages: ApprovalPages) -> axum::Router {
/// axum::Router::new().nest("/approvals", pages.router())
/// # }
/// ```
///
/// The routes, relative to where the router is mounted (links and
/// redirects on the pages follow the mount point by themselves):
///
/// | method | path | what |
/// | --- | --- | --- |
/// | `GET` | `/runs/{actor}/{run}` | the run's pending proposals, and its Stop-run control |
/// | `POST` | `/runs/{actor}/{run}/stop` | stops the run, then `303` to the run's page saying how many grants it stopped |
/// | `GET` | `/proposals/{id}` | one proposal: everything its grant would bind, Approve and Deny |
/// | `GET` | `/proposals/{id}/screenshot.png` | the live backend's screenshot of the page (`image/png`) |
/// | `GET` | `/proposals/{id}/target.png` | that screenshot cropped around the outlined target, at its own scale (`image/png`; 404 when the backend recorded no target) |
/// | `POST` | `/proposals/{id}/approve` | approves and issues the grant, then `303` to the proposal's page |
/// | `POST` | `/proposals/{id}/deny` | denies, then `303` to the proposal's page |
/// | `GET` | `/style.css` | the stylesheet (public: it holds no data) |
///
/// `{actor}` and `{run}` are the host's ids, each percent-encoded as one
/// path segment ([`run_path`](ApprovalPages::run_path) builds the link).
///
/// Cheap to clone; every clone serves the same store with the same key.
#[derive(Clone)]
pub struct ApprovalPages {
    shared: Arc<Shared>,
}

impl fmt::Debug for ApprovalPages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalPages")
            .field("grant_ttl", &self.shared.grant_ttl)
            .field("now", &self.shared.clock.now())
            .finish_non_exhaustive()
    }
}

impl ApprovalPages {
    /// Starts a builder over `store` (an `Arc<dyn ProposalStore>`, or any
    /// store, which is wrapped in an `Arc`), with `approvers` as the
    /// host's authentication.
    pub fn builder(
        store: impl ProposalStore + 'static,
        approvers: impl Approvers + 'static,
    ) -> ApprovalPagesBuilder {
        ApprovalPagesBuilder {
            store: Arc::new(store),
            approvers: Arc::new(approvers),
            grant_ttl: DEFAULT_GRANT_TTL,
            clock: None,
            form_key: None,
        }
    }

    /// The lifetime of every grant approved on these pages.
    pub fn grant_ttl(&self) -> Duration {
        self.shared.grant_ttl
    }

    /// The axum Router serving the pages; mount it with `Router::nest`
    /// (or `Router::merge` to serve it at the root). Every response carries
    /// the strict security headers described in the crate docs, and every
    /// `POST` passes the cross-site check before any handler runs.
    pub fn router(&self) -> Router {
        router::router(Arc::clone(&self.shared))
    }

    /// The path of `run`'s page, relative to where the router is mounted:
    /// `/runs/{actor}/{run}`, each id percent-encoded as one segment.
    ///
    /// ```
    /// use countersign_approval_core::{ActorId, RunId};
    /// use countersign_approval_web::ApprovalPages;
    ///
    /// let path = ApprovalPages::run_path(&ActorId::new("team/a b")?, &RunId::new("run-1")?);
    /// assert_eq!(path, "/runs/team%2Fa%20b/run-1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run_path(actor: &ActorId, run: &RunId) -> String {
        run_path("", actor.as_str(), run.as_str())
    }

    /// The path of a proposal's page, relative to where the router is
    /// mounted: `/proposals/{id}`.
    pub fn proposal_path(id: &ProposalId) -> String {
        proposal_path("", id)
    }
}

/// Builds [`ApprovalPages`].
pub struct ApprovalPagesBuilder {
    store: Arc<dyn ProposalStore>,
    approvers: Arc<dyn Approvers>,
    grant_ttl: Duration,
    clock: Option<Arc<dyn Clock>>,
    form_key: Option<[u8; FORM_KEY_BYTES]>,
}

impl fmt::Debug for ApprovalPagesBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalPagesBuilder")
            .field("grant_ttl", &self.grant_ttl)
            .field("has_clock", &self.clock.is_some())
            .field("has_form_key", &self.form_key.is_some())
            .finish_non_exhaustive()
    }
}

impl ApprovalPagesBuilder {
    /// How long a grant approved on the pages stays usable: more than zero,
    /// at most 24 hours ([`MAX_TTL`]); default [`DEFAULT_GRANT_TTL`]. The
    /// page shows it, and the expiry it would have if approved now.
    pub fn grant_ttl(mut self, ttl: Duration) -> Self {
        self.grant_ttl = ttl;
        self
    }

    /// The clock for decisions, grant lifetimes and proposal expiry
    /// (default [`SystemClock`]). Give the pages the same clock as the Act
    /// tool's context; a
    /// [`ManualClock`](countersign_approval_core::ManualClock) clone shares
    /// its time with the original.
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// A clock the host already shares as an `Arc<dyn Clock>`.
    pub fn shared_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The 32-byte secret the form tokens and result links are signed
    /// with. By default a fresh random key is made at
    /// [`build`](Self::build), so tokens stop verifying when the process
    /// restarts (an open page then asks the approver to reload). Give every
    /// instance behind one load balancer the same key, from the host's
    /// secret store.
    pub fn form_key(mut self, key: [u8; FORM_KEY_BYTES]) -> Self {
        self.form_key = Some(key);
        self
    }

    /// Checks the configuration and builds the pages.
    pub fn build(self) -> Result<ApprovalPages, ApprovalPagesError> {
        if self.grant_ttl.is_zero() || self.grant_ttl > MAX_TTL {
            return Err(ApprovalPagesError::InvalidGrantTtl {
                millis: self.grant_ttl.as_millis(),
            });
        }
        let key = match &self.form_key {
            Some(bytes) => FormKey::new(bytes),
            None => FormKey::generate(),
        }
        .map_err(|e| ApprovalPagesError::FormKey { message: e.0 })?;
        Ok(ApprovalPages {
            shared: Arc::new(Shared {
                store: self.store,
                approvers: self.approvers,
                grant_ttl: self.grant_ttl,
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                key,
            }),
        })
    }
}
