//! Host-issued, single-use grants for the browser actions an LLM agent proposes.
//!
//! A model may *propose* an action; only the host decides whether that
//! exact action, on that exact page, by that actor in that run, may happen
//! once. The host issues a grant; the Act tool consumes it atomically and
//! only then hands the action to a backend.
//!
//! ```
//! use std::time::Duration;
//! use countersign::prelude::*;
//! use countersign::serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let backend = FakeBackend::new();
//! let context = Context::builder()
//!     .actor_id(ActorId::new("demo-actor")?)
//!     .run_id(RunId::new("demo-run")?)
//!     .backend(backend.clone())
//!     .source_policy(
//!         Policy::builder()
//!             .allow_host("docs.example.com")
//!             .resolver(StaticResolver::answering_all(["93.184.216.34".parse()?]))
//!             .build()?,
//!     )
//!     .operation_store(InMemoryOperationStore::new())
//!     .approval_store(InMemoryApprovalStore::new())
//!     .build()?;
//!
//! let action = json!({"method": "click", "selector": "a#docs"});
//! let grant = issue_grant(&context, "https://docs.example.com/", &action, Duration::from_secs(60)).await?;
//!
//! let act = Act::new(context);
//! let call = json!({
//!     "url": "https://docs.example.com/", "approval_id": grant.id.as_str(),
//!     "method": "click", "selector": "a#docs",
//! });
//! assert_eq!(act.execute_json(&call).await["status"], "ok");
//! assert_eq!(act.execute_json(&call).await["error"]["code"], "APPROVAL_STALE");
//! assert_eq!(backend.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! # Features
//!
//! | feature | default | brings |
//! | --- | --- | --- |
//! | `memory` | yes | [`store::memory`]: process-local approval store and operation log |
//! | `fake` | yes | [`backend::fake`]: `FakeBackend`, records actions, clicks nothing |
//! | `system-resolver` | yes | `policy::SystemResolver`: DNS through the operating system |
//! | `redis` | no | `store::redis`: the Redis approval store and operation log |
//! | `postgres` | no | `store::postgres`: the PostgreSQL approval store and operation log |
//! | `chromium` | no | `backend::chromium`: performs actions as real input in headless Chromium |
//! | `conformance` | no | `conformance`: the approval-store and operation-log conformance kits |
//! | `egress-guard` | no | `egress`: the egress guard, a forward proxy confining a browser to the policy |
//! | `web` | no | `web`: the approval pages, an axum Router where a person approves or denies what a model proposed |
//!
//! # Crates
//!
//! Each module re-exports one crate, so a host may depend on the crates
//! directly instead: [`policy`] (`countersign-canonical-policy`),
//! [`approval`] (`countersign-approval-core`), [`store`]
//! (`countersign-store-memory`, `countersign-store-redis`,
//! `countersign-store-postgres`), [`backend`]
//! (`countersign-backend-fake`, `countersign-backend-chromium`), [`act`]
//! (`countersign-act-tool`), `egress` (`countersign-egress-guard`), `web`
//! (`countersign-approval-web`) and `conformance`
//! (`countersign-store-conformance`).

pub mod policy {
    //! URL and action canonicalisation, the destination policy and action
    //! digests: the `countersign-canonical-policy` crate.
    pub use countersign_canonical_policy::*;
}

pub mod approval {
    //! The grant model, ids, clocks and the store, log and backend traits:
    //! the `countersign-approval-core` crate.
    pub use countersign_approval_core::*;
}

pub mod store {
    //! Where grants and operation records live.
    //!
    //! The traits are [`ApprovalStore`] and [`OperationLog`]; implementations
    //! sit in the submodules, each behind its feature.

    pub use countersign_approval_core::{
        ApprovalStore, IssueError, OperationLog, ProposalStore, ProposeError, StoreError,
    };

    #[cfg(feature = "memory")]
    pub mod memory {
        //! Process-local stores: the `countersign-store-memory` crate
        //! (feature `memory`).
        pub use countersign_store_memory::*;
    }

    #[cfg(feature = "redis")]
    pub mod redis {
        //! The Redis approval store and operation log
        //! (`RedisApprovalStore`, `RedisOperationLog`): the
        //! `countersign-store-redis` crate (feature `redis`).
        pub use countersign_store_redis::*;
    }

    #[cfg(feature = "postgres")]
    pub mod postgres {
        //! The PostgreSQL approval store and operation log: the
        //! `countersign-store-postgres` crate (feature `postgres`).
        pub use countersign_store_postgres::*;
    }
}

pub mod backend {
    //! What performs approved actions.
    //!
    //! The trait is [`Backend`]; the fake sits behind the `fake` feature,
    //! the live Chromium backend behind the `chromium` feature.

    pub use countersign_approval_core::{ActionRequest, Backend, BackendError};

    #[cfg(feature = "fake")]
    pub mod fake {
        //! A backend that records actions and performs nothing: the
        //! `countersign-backend-fake` crate (feature `fake`).
        pub use countersign_backend_fake::*;
    }

    #[cfg(feature = "chromium")]
    pub mod chromium {
        //! A backend that performs approved actions as real input in
        //! headless Chromium over the DevTools protocol: the
        //! `countersign-backend-chromium` crate (feature `chromium`).
        pub use countersign_backend_chromium::*;
    }
}

pub mod act {
    //! The Act tool, its context, toolset and JSON surface: the
    //! `countersign-act-tool` crate.
    pub use countersign_act_tool::*;
}

pub mod rules {
    //! Rules that decide who approves a proposal, on its target element's
    //! facts: the `countersign-rules` crate.
    pub use countersign_rules::*;
}

#[cfg(feature = "egress-guard")]
pub mod egress {
    //! The egress guard, a forward proxy that confines a browser's own
    //! traffic to the policy: the `countersign-egress-guard` crate (feature
    //! `egress-guard`).
    pub use countersign_egress_guard::*;
}

#[cfg(feature = "web")]
pub mod web {
    //! The approval pages: an axum Router where a person sees exactly what
    //! a model proposed and approves or denies it once: the
    //! `countersign-approval-web` crate (feature `web`).
    pub use countersign_approval_web::*;
}

#[cfg(feature = "conformance")]
pub mod conformance {
    //! The conformance kits for approval stores and operation logs: the
    //! `countersign-store-conformance` crate (feature `conformance`).
    pub use countersign_store_conformance::*;
}

/// The `serde_json` the tool's JSON surface speaks, so hosts build calls
/// and read results with the same version.
pub use serde_json;

pub mod prelude {
    //! The names a host needs for the usual flow: `use countersign::prelude::*;`.

    pub use crate::act::{
        Act, ActCall, ActResult, Context, GrantError, GrantOptions, RetryPolicy, Toolset,
        issue_grant, issue_grant_with, issue_page_grant,
    };
    pub use crate::approval::{
        ActorId, Approval, ApprovalId, ApprovalStore, ApproverId, Backend, Clock, GrantState,
        ManualClock, OperationLog, OutcomeCode, PageBinding, ResumeOutcome, RevokeOutcome, RunId,
        StopOutcome, SystemClock, Timestamp,
    };
    #[cfg(feature = "fake")]
    pub use crate::backend::fake::FakeBackend;
    #[cfg(feature = "system-resolver")]
    pub use crate::policy::SystemResolver;
    pub use crate::policy::{Policy, Resolver, StaticResolver};
    #[cfg(feature = "memory")]
    pub use crate::store::memory::{InMemoryApprovalStore, InMemoryOperationStore};
}

/// The code blocks of `docs/guide.md`, `docs/architecture.md`,
/// `docs/security-model.md` and the workspace `README.md`, compiled and run as doc tests (they use the
/// in-memory stores and the fake backend).
#[cfg(all(doctest, feature = "memory", feature = "fake"))]
pub mod docs {
    #[doc = include_str!("../../../docs/guide.md")]
    pub struct Guide;

    #[doc = include_str!("../../../docs/architecture.md")]
    pub struct Architecture;

    #[doc = include_str!("../../../docs/security-model.md")]
    pub struct SecurityModel;

    #[doc = include_str!("../../../README.md")]
    pub struct Readme;
}
