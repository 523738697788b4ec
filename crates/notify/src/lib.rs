//! Tells people that an agent waits for them: notifications that never
//! decide.
//!
//! A store with an outbox ([`NotificationOutbox`]) records an event in the
//! same step as a proposal made, decided, or a run stopped. A
//! [`NotificationWorker`] claims the due events, adds the time-driven
//! ones (expiring soon, expired), and tells each [`ProposalNotifier`]: at
//! least once, across restarts and processes. A notice holds ids, the
//! proposal's summary, its expiry and the link to its approval page; never
//! an argument value or a picture (the link leads to them, behind sign-in).
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use countersign_approval_core::{
//!     ActorId, ManualClock, NotificationKind, Proposal, ProposalStore, RunId, Timestamp,
//! };
//! use countersign_approval_core::policy::{Policy, StaticResolver};
//! use countersign_notify::{
//!     NotificationWorker, NotifyError, ProposalNotice, ProposalNotifier, WorkerOptions,
//! };
//! use countersign_store_memory::InMemoryApprovalStore;
//!
//! /// Keeps every notice's headline.
//! #[derive(Default)]
//! struct Headlines(Mutex<Vec<String>>);
//!
//! #[async_trait::async_trait]
//! impl ProposalNotifier for Headlines {
//!     fn name(&self) -> &str { "headlines" }
//!     async fn notify(&self, notice: &ProposalNotice) -> Result<(), NotifyError> {
//!         self.0.lock().unwrap().push(notice.headline());
//!         Ok(())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let policy = Policy::builder()
//!     .allow_host("docs.example.com")
//!     .resolver(StaticResolver::answering_all(["93.184.216.34".parse().unwrap()]))
//!     .build()?;
//! let url = policy.authorize_destination("https://docs.example.com/").await?;
//! let action = policy.authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))?;
//! let clock = ManualClock::new(Timestamp::from_millis(1_000));
//! let store = Arc::new(InMemoryApprovalStore::new().with_notification_outbox());
//! let proposal = Proposal::for_action(
//!     ActorId::new("demo-agent")?, RunId::new("run-1")?, &url, &action,
//!     Duration::from_secs(600), Timestamp::from_millis(1_000),
//! )?;
//! store.propose(proposal).await?;
//!
//! let headlines = Arc::new(Headlines::default());
//! let worker = NotificationWorker::new(
//!     store,
//!     vec![headlines.clone()],
//!     Arc::new(clock),
//!     Arc::new(|id| format!("https://approve.example.com/proposals/{id}")),
//!     WorkerOptions::default(),
//! );
//! assert_eq!(worker.deliver_due().await?.delivered, 1);
//! assert_eq!(
//!     headlines.0.lock().unwrap().as_slice(),
//!     ["Approval needed: demo-agent wants to click the element `a#docs` on docs.example.com"]
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod email;
mod endpoint;
mod notice;
mod slack;
mod webhook;
mod worker;

pub use countersign_approval_core::NotificationOutbox;
pub use email::{EmailError, EmailNotifier, SmtpSecurity};
pub use notice::{ApprovalLink, NoticeDecision, ProposalNotice};
pub use slack::{SLACK_API, SlackError, SlackNotifier, SlackToken};
pub use webhook::{MIN_SECRET_BYTES, SECRET_PREFIX, WebhookError, WebhookNotifier, WebhookSecret};
pub use worker::{DeliveryRound, NotificationWorker, NotifyingStore, WorkerHandle, WorkerOptions};

use async_trait::async_trait;

/// Why a notifier did not deliver a notice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotifyError {
    /// It may work later (the service is down, answered `5xx`, timed out):
    /// the worker retries with backoff.
    #[error("notification failed: {0}")]
    Failed(String),
    /// It will never work (the service refused it, `4xx`): the worker
    /// gives it up and logs why.
    #[error("notification refused: {0}")]
    Refused(String),
}

/// Tells someone about a notice: a webhook, a chat, a mailbox.
///
/// # Contract
///
/// - `notify` may be called more than once for one notice (delivery is at
///   least once): a receiver deduplicates on `notice.event.id`.
/// - It never decides anything; whatever it answers, however long it
///   takes, and if it panics, no proposal, grant or run changes.
/// - It sends nothing beyond the notice: no argument value or picture
///   reaches it.
#[async_trait]
pub trait ProposalNotifier: Send + Sync {
    /// A short name for logs (`webhook`, `slack`, `email`).
    fn name(&self) -> &str;

    /// Delivers `notice`.
    async fn notify(&self, notice: &ProposalNotice) -> Result<(), NotifyError>;
}

/// The code blocks of `docs/notifications.md`, compiled and run as doc
/// tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/notifications.md")]
pub struct NotificationsDoc;
