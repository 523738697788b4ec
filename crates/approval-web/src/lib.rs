//! The approval pages of countersign: an axum Router where a person sees
//! exactly what a model proposed, approves or denies it once, and can stop
//! a run.
//!
//! A model proposes a browser action; the host's
//! [`ProposalStore`](countersign_approval_core::ProposalStore) keeps it
//! pending. [`ApprovalPages`] serves it to whoever the host's
//! [`Approvers`] authenticates: the canonical URL, method, selector,
//! description, every argument, the digest, the grant's lifetime, the
//! proposal's expiry, actor and run, and, from a live backend, a
//! screenshot with the target outlined. **Approve** issues the one grant
//! bound to exactly that proposal (and its page), recording the approver;
//! **Deny** issues nothing; a second decision changes nothing and says so.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use axum::body::Body;
//! use axum::http::{Request, StatusCode};
//! use countersign_approval_core::policy::{Policy, StaticResolver};
//! use countersign_approval_core::{
//!     ActorId, ApproverId, Clock, Proposal, ProposalStore, RunId, SystemClock,
//! };
//! use countersign_approval_web::{ApprovalPages, Approvers, Parts, async_trait};
//! use countersign_store_memory::InMemoryApprovalStore;
//! use tower::ServiceExt;
//!
//! /// The host's authentication; here, a header an authenticating proxy sets.
//! struct ProxyUser;
//!
//! #[async_trait]
//! impl Approvers for ProxyUser {
//!     async fn approver(&self, request: &Parts) -> Option<ApproverId> {
//!         let name = request.headers.get("x-user")?.to_str().ok()?;
//!         ApproverId::new(name).ok()
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let store = Arc::new(InMemoryApprovalStore::new());
//! let pages = ApprovalPages::builder(store.clone(), ProxyUser)
//!     .grant_ttl(Duration::from_secs(120))
//!     .build()?;
//! let app = axum::Router::new().nest("/approvals", pages.router());
//!
//! // What the propose tool does when a model proposes a click:
//! let policy = Policy::builder()
//!     .allow_host("docs.example.com")
//!     .resolver(StaticResolver::answering_all(["93.184.216.34".parse()?]))
//!     .build()?;
//! let url = policy.authorize_destination("https://docs.example.com/").await?;
//! let action = policy.authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))?;
//! let (actor, run) = (ActorId::new("demo-actor")?, RunId::new("demo-run")?);
//! let proposal = Proposal::for_action(actor, run, &url, &action, Duration::from_secs(600), SystemClock.now())?;
//! store.propose(proposal.clone()).await?;
//!
//! let page = format!("/approvals{}", ApprovalPages::proposal_path(&proposal.id));
//! let signed_in = Request::get(&page).header("x-user", "alice").body(Body::empty())?;
//! let response = app.clone().oneshot(signed_in).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! assert_eq!(response.headers()["x-frame-options"], "DENY");
//! assert_eq!(response.headers()["cache-control"], "no-store");
//!
//! // Without the host's authentication nothing is shown.
//! let anonymous = Request::get(&page).body(Body::empty())?;
//! assert_eq!(app.oneshot(anonymous).await?.status(), StatusCode::UNAUTHORIZED);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Routes
//!
//! See [`ApprovalPages`]: a run's list (`/runs/{actor}/{run}`), a
//! proposal's page (`/proposals/{id}`) and its screenshot, and the three
//! `POST` routes that approve, deny and stop a run. Each `POST` answers
//! `303 See Other` to the page that shows its result.
//!
//! # Security
//!
//! - **Only `POST` changes anything.** `GET` handlers read the store and
//!   never approve, deny or stop.
//! - **Cross-site requests are refused twice over.** Before any handler
//!   runs, a `POST` whose `Sec-Fetch-Site` is anything but `same-origin`
//!   (or `none`), or, from a browser that sends no `Sec-Fetch-Site`, whose
//!   `Origin` is not the request's host, is answered `403` (tower-http's
//!   CSRF layer). Every form also carries a token, HMAC-SHA256 under the
//!   pages' [form key](ApprovalPagesBuilder::form_key) of the approver's id
//!   and exactly what the form does (approve this proposal, deny it, stop
//!   this run): a form another approver was shown, or one for another
//!   proposal, is refused (`403`), and nothing changes.
//! - **Every value is escaped** by askama's HTML escaper; no template marks
//!   anything safe. Every value holding invisible, space-like or
//!   bidirectional characters (one set, for every page) is shown as it is
//!   and once more with those characters escaped.
//! - **Strict headers on every response**, refusals included:
//!   `Content-Security-Policy: default-src 'none'; img-src 'self';
//!   style-src 'self'; form-action 'self'; frame-ancestors 'none';
//!   base-uri 'none'` (no script at all; the stylesheet is its own route),
//!   `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`,
//!   `Cache-Control: no-store`, `X-Frame-Options: DENY` and
//!   `Cross-Origin-Resource-Policy: same-origin`.
//! - **Authentication is the host's.** Every route but the stylesheet asks
//!   [`Approvers::approver`] first: no approver ⇒ `401` and nothing shown;
//!   [`Approvers::may_review`] then guards each run (`403`).
//!
//! The pages use no JavaScript: every control is a real `<button>` in a
//! `<form>`, with a visible focus ring.

mod auth;
mod crop;
mod error;
mod extract;
mod forms;
mod handlers;
mod invisible;
mod pages;
mod paths;
mod router;
mod state;
mod view;

pub use auth::{Approvers, SESSION_COOKIE_MAX_AGE, TokenApprovers, same_secret};
pub use forms::FORM_KEY_BYTES;
pub use pages::{ApprovalPages, ApprovalPagesBuilder, ApprovalPagesError, DEFAULT_GRANT_TTL};

/// The request head the host's [`Approvers`] reads (`http::request::Parts`).
pub use axum::http::request::Parts;

/// The attribute the host's [`Approvers`] implementation is written with.
pub use async_trait::async_trait;

/// The grant model and store traits these pages decide with.
pub use countersign_approval_core as approval;

/// The Rust blocks of `docs/approval-web.md`, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/approval-web.md")]
pub struct Guide;
