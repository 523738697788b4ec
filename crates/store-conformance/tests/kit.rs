#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The macro's forms, its check list, and how the kit reports misuse.

use std::sync::Arc;

use countersign_approval_core::ApprovalStore;
use countersign_store_conformance::{
    CheckFailure, MODEL_CHECK, ModelConfig, PROPOSAL_CHECKS, RACE_CHECKS, RaceConfig,
    SCENARIO_CHECKS, STANDING_CHECKS, check_against_model, races, scenarios,
};
use countersign_store_memory::InMemoryApprovalStore;

async fn shared_store() -> Arc<dyn ApprovalStore> {
    Arc::new(InMemoryApprovalStore::new())
}

// A factory returning `Arc<dyn ApprovalStore>` from an async fn call.
countersign_store_conformance::store_conformance_tests!(behind_arc_dyn, shared_store());

// `optional:` with no store skips every check.
countersign_store_conformance::store_conformance_tests!(
    skipped_without_a_store,
    optional: async { None::<InMemoryApprovalStore> },
);

#[test]
fn the_macro_runs_every_check() {
    let source = include_str!("../src/macros.rs");
    for name in SCENARIO_CHECKS
        .iter()
        .chain(RACE_CHECKS)
        .chain([&MODEL_CHECK])
    {
        assert!(
            source.contains(&format!("{name},")) || source.contains(&format!("fn {name}(")),
            "the macro does not run `{name}`"
        );
    }
    assert_eq!(SCENARIO_CHECKS.len(), 29);
    assert_eq!(RACE_CHECKS.len(), 6);
}

// A proposal store behind `Arc`, through the proposal macro.
countersign_store_conformance::proposal_store_conformance_tests!(proposals_behind_arc, async {
    Arc::new(InMemoryApprovalStore::new())
});

#[test]
fn the_proposal_macro_runs_every_proposal_check() {
    let listed = listed_checks("__proposal_store_conformance_tests");
    let expected: Vec<&str> = PROPOSAL_CHECKS
        .iter()
        .chain(STANDING_CHECKS)
        .copied()
        .collect();
    assert_eq!(listed, expected);
    assert_eq!(PROPOSAL_CHECKS.len(), 12);
    assert_eq!(STANDING_CHECKS.len(), 8);
}

/// The check names a macro of `macros.rs` lists: the lines that are one
/// identifier and a comma, from `macro_rules! <name>` to the next macro.
fn listed_checks(name: &str) -> Vec<&'static str> {
    let source = include_str!("../src/macros.rs");
    let start = source.find(&format!("macro_rules! {name}")).unwrap() + 1;
    let end = source[start..]
        .find("macro_rules!")
        .map_or(source.len(), |at| start + at);
    source[start..end]
        .lines()
        .map(str::trim)
        .filter(|line| line.ends_with(',') && !line.contains(' ') && !line.contains('$'))
        .map(|line| line.trim_end_matches(','))
        .collect()
}

#[test]
fn the_outbox_macro_runs_every_outbox_check() {
    let listed = listed_checks("__outbox_conformance_tests");
    assert_eq!(listed, countersign_store_conformance::OUTBOX_CHECKS);
    assert_eq!(listed.len(), 7);
}

#[test]
fn race_checks_refuse_a_current_thread_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let failure = runtime
        .block_on(races::concurrent_consumes_have_one_winner(
            Arc::new(InMemoryApprovalStore::new()),
            &RaceConfig::default(),
        ))
        .unwrap_err();
    assert_eq!(failure.check(), "concurrent_consumes_have_one_winner");
    assert!(failure.message().contains("multi-thread"), "{failure}");
}

#[test]
fn race_checks_refuse_a_config_without_contention() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = RaceConfig {
        contenders: 1,
        ..RaceConfig::default()
    };
    let failure = runtime
        .block_on(races::concurrent_consumes_have_one_winner(
            Arc::new(InMemoryApprovalStore::new()),
            &config,
        ))
        .unwrap_err();
    assert!(failure.message().contains("two contenders"), "{failure}");
}

#[test]
fn the_model_check_refuses_to_run_inside_a_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let failure = runtime
        .block_on(async {
            check_against_model(
                || async { InMemoryApprovalStore::new() },
                &ModelConfig::default(),
            )
        })
        .unwrap_err();
    assert_eq!(failure.check(), MODEL_CHECK);
    assert!(failure.message().contains("own tokio runtime"), "{failure}");
}

#[test]
fn the_model_check_replays_a_seed() {
    let config = ModelConfig {
        cases: 8,
        max_transitions: 20,
        seed: Some(7),
    };
    check_against_model(|| async { InMemoryApprovalStore::new() }, &config).unwrap();
}

#[test]
fn scenario_checks_accept_a_store_that_already_holds_grants() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = InMemoryApprovalStore::new();
        scenarios::revoke_outcomes(&store).await.unwrap();
        scenarios::revoke_outcomes(&store).await.unwrap();
        scenarios::get_round_trips_grant_and_state(&store)
            .await
            .unwrap();
        assert!(store.len().unwrap() > 0);
    });
}

#[test]
fn a_failure_names_its_check_in_display_and_debug() {
    let failure = CheckFailure::new("reads_never_consume", "get consumed the grant");
    let text = "store conformance check `reads_never_consume` failed: get consumed the grant";
    assert_eq!(failure.to_string(), text);
    assert_eq!(format!("{failure:?}"), text);
    assert_eq!(failure.check(), "reads_never_consume");
    assert_eq!(failure.message(), "get consumed the grant");
}
