//! The conformance kit for countersign approval stores.
//!
//! Whoever implements [`ApprovalStore`](countersign_approval_core::ApprovalStore)
//! — over Redis, SQL, anything — runs this kit to show the store keeps the
//! contract written in that trait's `# Contract` section. It has three parts:
//!
//! - [`scenarios`]: one check per rule — each denial condition, replays by
//!   the same attempt, revoke outcomes, duplicate issue, reads that never
//!   consume, the expiry boundary, the order of the checks, abandon
//!   (restores, late consumes of an abandoned attempt, outcomes, the bound);
//! - [`check_against_model`]: a model-based property test
//!   (proptest-state-machine) comparing the store with [`ReferenceModel`]
//!   over random sequences of issue / revoke / get / consume / abandon /
//!   clock advance;
//! - [`races`]: 64 concurrent consumes on each of 200 grants ⇒ exactly one
//!   winner per grant; revokes racing consumes ⇒ exactly one of them wins;
//!   an abandon racing its attempt's late consume and other consumes ⇒ at
//!   most one performance, never by the abandoned attempt.
//!
//! Every check returns `Result<(), CheckFailure>`; the error names the check
//! and the step that went wrong. [`store_conformance_tests!`] turns all of
//! them into one `#[test]` each:
//!
//! ```
//! // tests/conformance.rs of a store crate
//! use countersign_store_memory::InMemoryApprovalStore;
//!
//! countersign_store_conformance::store_conformance_tests!(
//!     in_memory,
//!     async { InMemoryApprovalStore::new() }
//! );
//! # fn main() {}
//! ```
//!
//! The checks can also be run one by one, for instance while developing a
//! store:
//!
//! ```
//! use std::sync::Arc;
//! use countersign_approval_core::ApprovalStore;
//! use countersign_store_conformance::{CheckFailure, RaceConfig, races, scenarios};
//! use countersign_store_memory::InMemoryApprovalStore;
//!
//! let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
//! runtime.block_on(async {
//!     let store = InMemoryApprovalStore::new();
//!     scenarios::reads_never_consume(&store).await?;
//!     scenarios::expiry_boundary(&store).await?;
//!
//!     let shared: Arc<dyn ApprovalStore> = Arc::new(store);
//!     let light = RaceConfig { grants: 10, ..RaceConfig::default() };
//!     races::concurrent_consumes_have_one_winner(shared, &light).await?;
//!     Ok::<(), CheckFailure>(())
//! })
//! .unwrap();
//! ```
//!
//! Stores that also keep proposals (`ProposalStore`) run
//! [`proposal_store_conformance_tests!`] beside it: one check per rule of
//! that contract ([`proposals`]) and a race of concurrent decisions, and
//! the checks of standing grants, counted grants with up to 100 uses
//! ([`standing`]), with a race of 16 concurrent uses of a grant with 3.
//!
//! Operation logs have a kit of their own: [`oplog`], run with
//! [`operation_log_conformance_tests!`] (one record per call under
//! concurrency, nothing lost, both queries in order, the bound kept).
//!
//! The kit's own tests run it against deliberately broken stores (a
//! check-then-mark that waits between its read and its write until another
//! call on the grant arrives, a store that burns grants on
//! mismatch, one whose reads consume, one that ignores expiry) and assert
//! that the checks named for each defect fail.

mod failure;
mod fixtures;
mod macros;
pub mod model;
pub mod oplog;
pub mod outbox;
pub mod proposals;
pub mod races;
pub mod scenarios;
pub mod standing;

pub use failure::CheckFailure;
pub use model::{BindingField, MODEL_CHECK, ModelConfig, ReferenceModel, check_against_model};
pub use oplog::OPERATION_LOG_CHECKS;
pub use outbox::{OUTBOX_CHECKS, OutboxStore};
pub use proposals::PROPOSAL_CHECKS;
pub use races::{RACE_CHECKS, RaceConfig};
pub use scenarios::SCENARIO_CHECKS;
pub use standing::STANDING_CHECKS;

/// Support for [`store_conformance_tests!`]; not public API.
#[doc(hidden)]
pub mod __private {
    use std::future::Future;
    use std::sync::Arc;

    use countersign_approval_core::{ApprovalStore, ProposalStore};

    use crate::CheckFailure;
    use crate::model::{ModelConfig, Ran, run_optional};

    pub use proptest;
    pub use tokio;

    fn runtime(check: &'static str) -> Result<tokio::runtime::Runtime, CheckFailure> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .map_err(|e| CheckFailure::new(check, format!("could not start a tokio runtime: {e}")))
    }

    /// Makes a store on a fresh multi-thread runtime, shares it as `D`
    /// through `share`, and runs one check on it.
    fn run_shared_check<F, Fut, S, D, C, CFut>(
        check: &'static str,
        factory: F,
        share: impl FnOnce(S) -> Arc<D>,
        run: C,
    ) -> Result<(), CheckFailure>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<S>>,
        D: ?Sized,
        C: FnOnce(Arc<D>) -> CFut,
        CFut: Future<Output = Result<(), CheckFailure>>,
    {
        runtime(check)?.block_on(async move {
            match factory().await {
                Some(store) => run(share(store)).await,
                None => {
                    eprintln!("{check}: skipped, the store factory gave no store");
                    Ok(())
                }
            }
        })
    }

    /// Makes a store on a fresh multi-thread runtime and runs one check on it.
    pub fn run_store_check<F, Fut, S, C, CFut>(
        check: &'static str,
        factory: F,
        run: C,
    ) -> Result<(), CheckFailure>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<S>>,
        S: ApprovalStore + 'static,
        C: FnOnce(Arc<dyn ApprovalStore>) -> CFut,
        CFut: Future<Output = Result<(), CheckFailure>>,
    {
        run_shared_check(
            check,
            factory,
            |s| Arc::new(s) as Arc<dyn ApprovalStore>,
            run,
        )
    }

    /// Makes a proposal store on a fresh multi-thread runtime and runs one
    /// proposal check on it.
    pub fn run_proposal_check<F, Fut, S, C, CFut>(
        check: &'static str,
        factory: F,
        run: C,
    ) -> Result<(), CheckFailure>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<S>>,
        S: ProposalStore + 'static,
        C: FnOnce(Arc<dyn ProposalStore>) -> CFut,
        CFut: Future<Output = Result<(), CheckFailure>>,
    {
        run_shared_check(
            check,
            factory,
            |s| Arc::new(s) as Arc<dyn ProposalStore>,
            run,
        )
    }

    /// Makes a store with an outbox on a fresh multi-thread runtime and
    /// runs one outbox check on it.
    pub fn run_outbox_check<F, Fut, S, C, CFut>(
        check: &'static str,
        factory: F,
        run: C,
    ) -> Result<(), CheckFailure>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<S>>,
        S: crate::OutboxStore + 'static,
        C: FnOnce(Arc<dyn crate::OutboxStore>) -> CFut,
        CFut: Future<Output = Result<(), CheckFailure>>,
    {
        run_shared_check(
            check,
            factory,
            |s| Arc::new(s) as Arc<dyn crate::OutboxStore>,
            run,
        )
    }

    /// Runs the model check with the configuration from the environment.
    pub fn run_model_check<F, Fut, S>(factory: F) -> Result<(), CheckFailure>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Option<S>>,
        S: ApprovalStore,
    {
        let config = ModelConfig::from_env()?;
        if run_optional(factory, &config)? == Ran::Skipped {
            eprintln!(
                "{}: skipped, the store factory gave no store",
                crate::model::MODEL_CHECK
            );
        }
        Ok(())
    }
}

/// The code blocks of `docs/writing-a-store.md`, compiled as doc tests so
/// the guide keeps matching the kit.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/writing-a-store.md")]
pub struct WritingAStoreGuide;
