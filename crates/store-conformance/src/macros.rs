//! The one macro that runs the whole kit.

/// Expands into a module of `#[test]` functions, one per conformance check,
/// run against stores made by a factory.
///
/// ```text
/// store_conformance_tests!(MODULE_NAME, FACTORY);
/// store_conformance_tests!(MODULE_NAME, optional: OPTIONAL_FACTORY);
/// ```
///
/// - `MODULE_NAME` names the generated module, so failures read
///   `MODULE_NAME::reads_never_consume` and so on.
/// - `FACTORY` is an expression that evaluates to a future (an `async`
///   block, or a call to an `async fn`) whose output is the store: any type
///   implementing `ApprovalStore + 'static`, including
///   `Arc<dyn ApprovalStore>`. The expression is evaluated afresh for every
///   test (and for every generated case of the model test), so each gets
///   its own store: a store shared between processes should use a fresh
///   namespace each time (for Redis, a fresh key prefix). It runs on a
///   multi-thread tokio runtime, so it may connect to servers; it may panic
///   if setting up fails (it runs inside a test).
/// - With `optional:`, the future's output is `Option<store>`; `None` skips
///   every check (each test passes after printing a note), for stores that
///   need a server that may be missing.
///
/// Each test returns `Result<(), CheckFailure>`; a failure prints the check's
/// name and the step whose answer broke the contract. The model test reads
/// [`ModelConfig::from_env`](crate::ModelConfig::from_env); the race checks
/// use [`RaceConfig::default`](crate::RaceConfig) (64 contenders on each of
/// 200 grants).
///
/// Invoke it at module level (it refers to the enclosing module's items
/// through `use super::*`), typically in `tests/conformance.rs`:
///
/// ```
/// use countersign_store_memory::InMemoryApprovalStore;
///
/// countersign_store_conformance::store_conformance_tests!(
///     in_memory,
///     async { InMemoryApprovalStore::new() }
/// );
///
/// // A store behind `Arc<dyn ApprovalStore>`, made by an async helper:
/// async fn shared_store() -> std::sync::Arc<dyn countersign_approval_core::ApprovalStore> {
///     std::sync::Arc::new(InMemoryApprovalStore::new())
/// }
/// countersign_store_conformance::store_conformance_tests!(shared, shared_store());
///
/// // A store that needs a server: skip when it is not configured.
/// async fn store_from_env() -> Option<InMemoryApprovalStore> {
///     std::env::var_os("MY_STORE_URL").map(|_| InMemoryApprovalStore::new())
/// }
/// countersign_store_conformance::store_conformance_tests!(from_env, optional: store_from_env());
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! store_conformance_tests {
    ($name:ident, optional: $factory:expr $(,)?) => {
        $crate::__store_conformance_tests! { @checks $name, $factory }
    };
    ($name:ident, $factory:expr $(,)?) => {
        $crate::__store_conformance_tests! {
            @checks $name,
            async { ::core::option::Option::Some($factory.await) }
        }
    };
}

/// The one list of the kit's checks: `__for_each_check!([callback] ARGS)`
/// calls `callback! { ARGS scenarios [..] races [..] }`, so the macro, the name constants and the kit's own tests
/// all enumerate the same checks. Not public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __for_each_check {
    ([$($callback:tt)+] $($args:tt)*) => {
        $($callback)+! {
            $($args)*
            scenarios [
                unknown_id_is_unknown,
                revoked_grant_is_stale_revoked,
                consumed_grant_is_stale_for_other_attempts,
                expired_grant_is_stale_expired,
                actor_mismatch_is_stale_and_does_not_burn,
                run_mismatch_is_stale_and_does_not_burn,
                url_mismatch_is_stale_and_does_not_burn,
                action_mismatch_is_stale_and_does_not_burn,
                replay_by_same_attempt_is_consumed_replay,
                replay_with_other_binding_is_stale_consumed,
                revoke_outcomes,
                duplicate_issue_is_refused,
                reads_never_consume,
                get_round_trips_grant_and_state,
                expiry_boundary,
                revoked_is_checked_before_expiry,
                consumed_is_checked_before_expiry,
                expiry_is_checked_before_mismatch,
                grants_are_independent,
                every_field_at_its_maximum,
                abandon_of_own_consume_restores_the_grant,
                late_consume_of_abandoned_attempt_never_consumes,
                abandon_outcomes,
                abandoned_attempts_are_bounded,
                stop_run_stops_its_grants_and_only_them,
                stopped_run_refuses_issue_until_resumed,
                stop_actor_stops_every_run,
                failed_attempts_lock_the_grant,
                approver_and_attempt_limit_round_trip,
            ]
            races [
                concurrent_consumes_have_one_winner,
                concurrent_retries_of_one_attempt_have_one_winner,
                revoke_racing_consume_has_one_winner,
                abandon_racing_consumes_never_performs_twice,
                stop_racing_consumes_orders_every_consume,
                concurrent_mismatches_lock_once,
            ]
        }
    };
}

/// Expands the check list for [`store_conformance_tests!`]; not public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_tests {
    (@checks $name:ident, $factory:expr) => {
        $crate::__for_each_check! {
            [$crate::__store_conformance_tests] @expand $name, $factory,
        }
    };
    (@expand $name:ident, $factory:expr,
        scenarios [$($scenario:ident),* $(,)?]
        races [$($race:ident),* $(,)?]
    ) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(
                #[test]
                fn $scenario() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::__private::run_store_check(
                        ::core::stringify!($scenario),
                        || $factory,
                        |store| async move { $crate::scenarios::$scenario(&*store).await },
                    )
                }
            )*

            $(
                #[test]
                fn $race() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::__private::run_store_check(
                        ::core::stringify!($race),
                        || $factory,
                        |store| async move {
                            $crate::races::$race(store, &$crate::RaceConfig::default()).await
                        },
                    )
                }
            )*

            #[test]
            fn model_matches_reference() -> ::core::result::Result<(), $crate::CheckFailure> {
                $crate::__private::run_model_check(|| $factory)
            }
        }
    };
}

/// Expands into a module of `#[test]` functions, one per operation-log
/// check, run against logs made by a factory.
///
/// ```text
/// operation_log_conformance_tests!(MODULE_NAME, FACTORY);
/// operation_log_conformance_tests!(MODULE_NAME, optional: FACTORY);
/// ```
///
/// `FACTORY` is a closure taking `max_records: usize` and returning a
/// future whose output is a fresh, empty log (any `OperationLog + 'static`)
/// that keeps at most the newest `max_records` records — or, with
/// `optional:`, `Option` of one (`None` skips every check). It is called
/// afresh for every check, on a multi-thread tokio runtime. Checks:
/// [`oplog::OPERATION_LOG_CHECKS`](crate::oplog::OPERATION_LOG_CHECKS).
///
/// ```
/// use countersign_store_memory::InMemoryOperationStore;
///
/// countersign_store_conformance::operation_log_conformance_tests!(
///     in_memory_log,
///     |max_records| async move { InMemoryOperationStore::with_max_records(max_records) }
/// );
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! operation_log_conformance_tests {
    ($name:ident, optional: $factory:expr $(,)?) => {
        $crate::__operation_log_conformance_tests! { @checks $name, $factory }
    };
    ($name:ident, $factory:expr $(,)?) => {
        $crate::__operation_log_conformance_tests! {
            @checks $name,
            |max_records: usize| {
                let made = ($factory)(max_records);
                async move { ::core::option::Option::Some(made.await) }
            }
        }
    };
}

/// The one list of the operation-log checks:
/// `__for_each_operation_log_check!([callback])` calls
/// `callback! { [every check] }`, and the macro expands the groups. Not
/// public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __for_each_operation_log_check {
    ([$($callback:tt)+] $($args:tt)*) => {
        $($callback)+! {
            $($args)*
            [
                records_round_trip,
                unknown_queries_answer_nothing,
                runs_are_separate_and_in_order,
                a_resent_record_is_kept_once,
                concurrent_records_are_each_kept_once,
                the_oldest_records_beyond_the_bound_are_dropped,
            ]
        }
    };
}

/// Expands the operation-log checks; not public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __operation_log_conformance_tests {
    (@checks $name:ident, $factory:expr) => {
        $crate::__for_each_operation_log_check! {
            [$crate::__operation_log_conformance_tests] @expand $name, $factory,
        }
    };
    (@expand $name:ident, $factory:expr, [$($check:ident),* $(,)?]) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(
                #[test]
                fn $check() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::__operation_log_conformance_tests!(@run $check, $factory)
                }
            )*
        }
    };
    (@run concurrent_records_are_each_kept_once, $factory:expr) => {
        $crate::oplog::run_log_check(
            "concurrent_records_are_each_kept_once",
            $crate::oplog::DEFAULT_MAX_RECORDS,
            $factory,
            |log| async move { $crate::oplog::concurrent_records_are_each_kept_once(log).await },
        )
    };
    (@run the_oldest_records_beyond_the_bound_are_dropped, $factory:expr) => {
        $crate::oplog::run_log_check(
            "the_oldest_records_beyond_the_bound_are_dropped",
            $crate::oplog::BOUNDED_MAX_RECORDS,
            $factory,
            |log| async move {
                $crate::oplog::the_oldest_records_beyond_the_bound_are_dropped(&*log).await
            },
        )
    };
    (@run $check:ident, $factory:expr) => {
        $crate::oplog::run_log_check(
            ::core::stringify!($check),
            $crate::oplog::DEFAULT_MAX_RECORDS,
            $factory,
            |log| async move { $crate::oplog::$check(&*log).await },
        )
    };
}

/// Expands into a module of `#[test]` functions, one per
/// [`ProposalStore`](countersign_approval_core::ProposalStore) check
/// ([`proposals::PROPOSAL_CHECKS`](crate::proposals::PROPOSAL_CHECKS)), run
/// against stores made by a factory.
///
/// ```text
/// proposal_store_conformance_tests!(MODULE_NAME, FACTORY);
/// proposal_store_conformance_tests!(MODULE_NAME, optional: OPTIONAL_FACTORY);
/// ```
///
/// The factory is as for [`store_conformance_tests!`]; its store must
/// implement `ProposalStore + 'static`. A store that keeps proposals runs
/// both macros.
///
/// ```
/// use countersign_store_memory::InMemoryApprovalStore;
///
/// countersign_store_conformance::proposal_store_conformance_tests!(
///     in_memory_proposals,
///     async { InMemoryApprovalStore::new() }
/// );
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! proposal_store_conformance_tests {
    ($name:ident, optional: $factory:expr $(,)?) => {
        $crate::__proposal_store_conformance_tests! { @checks $name, $factory }
    };
    ($name:ident, $factory:expr $(,)?) => {
        $crate::__proposal_store_conformance_tests! {
            @checks $name,
            async { ::core::option::Option::Some($factory.await) }
        }
    };
}

/// Expands the proposal checks; not public API. The list must equal
/// [`proposals::PROPOSAL_CHECKS`](crate::proposals::PROPOSAL_CHECKS) (the
/// kit's tests compare them).
#[doc(hidden)]
#[macro_export]
macro_rules! __proposal_store_conformance_tests {
    (@checks $name:ident, $factory:expr) => {
        $crate::__proposal_store_conformance_tests! {
            @expand $name, $factory,
            scenarios [
                unknown_proposal_is_unknown,
                proposal_round_trips_every_field,
                duplicate_proposal_is_refused,
                approve_issues_exactly_the_proposed_grant,
                a_second_decision_changes_nothing,
                a_grant_not_for_the_proposal_is_refused,
                an_existing_grant_id_is_refused,
                expired_proposal_cannot_be_decided,
                stopping_a_run_ends_its_proposals,
                stopping_an_actor_ends_its_proposals,
                pending_lists_one_run_oldest_first,
            ]
            races [
                concurrent_decisions_issue_one_grant,
            ]
            standing [
                standing_round_trips_and_counts_down,
                duplicate_standing_is_refused,
                standing_use_checks_in_order,
                give_back_frees_the_use,
                only_give_backs_of_taken_uses_count,
                stopping_a_run_ends_its_standing_grants,
                standing_grants_lists_usable_oldest_first,
            ]
            standing_races [
                concurrent_uses_never_exceed_the_count,
            ]
        }
    };
    (@expand $name:ident, $factory:expr,
        scenarios [$($scenario:ident),* $(,)?]
        races [$($race:ident),* $(,)?]
        standing [$($standing:ident),* $(,)?]
        standing_races [$($standing_race:ident),* $(,)?]
    ) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(
                #[test]
                fn $scenario() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::__private::run_proposal_check(
                        ::core::stringify!($scenario),
                        || $factory,
                        |store| async move { $crate::proposals::$scenario(&*store).await },
                    )
                }
            )*

            $(
                #[test]
                fn $race() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::__private::run_proposal_check(
                        ::core::stringify!($race),
                        || $factory,
                        |store| async move { $crate::proposals::$race(store).await },
                    )
                }
            )*

            $(
                #[test]
                fn $standing() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::__private::run_proposal_check(
                        ::core::stringify!($standing),
                        || $factory,
                        |store| async move { $crate::standing::$standing(&*store).await },
                    )
                }
            )*

            $(
                #[test]
                fn $standing_race() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::__private::run_proposal_check(
                        ::core::stringify!($standing_race),
                        || $factory,
                        |store| async move { $crate::standing::$standing_race(store).await },
                    )
                }
            )*
        }
    };
}

/// Expands into a module of `#[test]` functions, one per
/// [`NotificationOutbox`](countersign_approval_core::NotificationOutbox)
/// check ([`outbox::OUTBOX_CHECKS`](crate::outbox::OUTBOX_CHECKS)), run
/// against stores made by a factory:
///
/// ```text
/// outbox_conformance_tests!(MODULE_NAME, FACTORY);
/// outbox_conformance_tests!(MODULE_NAME, optional: OPTIONAL_FACTORY);
/// ```
///
/// As [`store_conformance_tests!`], but the store must implement
/// `ProposalStore + NotificationOutbox + 'static` with its outbox on, and
/// each check needs a store of its own whose outbox is empty:
///
/// ```
/// use countersign_store_memory::InMemoryApprovalStore;
///
/// countersign_store_conformance::outbox_conformance_tests!(
///     in_memory_outbox,
///     async { InMemoryApprovalStore::new().with_notification_outbox() }
/// );
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! outbox_conformance_tests {
    ($name:ident, optional: $factory:expr $(,)?) => {
        $crate::__outbox_conformance_tests! { @checks $name, $factory }
    };
    ($name:ident, $factory:expr $(,)?) => {
        $crate::__outbox_conformance_tests! {
            @checks $name,
            async { ::core::option::Option::Some($factory.await) }
        }
    };
}

/// Expands the outbox checks; not public API. The list must equal
/// [`outbox::OUTBOX_CHECKS`](crate::outbox::OUTBOX_CHECKS) (the kit's tests
/// compare them).
#[doc(hidden)]
#[macro_export]
macro_rules! __outbox_conformance_tests {
    (@checks $name:ident, $factory:expr) => {
        $crate::__outbox_conformance_tests! {
            @expand $name, $factory,
            scenarios [
                steps_record_their_events_once,
                schedule_is_idempotent_by_event_id,
                claims_hold_for_their_lease_then_lapse,
                a_retry_comes_back_at_its_time,
                claims_come_in_order_up_to_the_limit,
            ]
            races [
                concurrent_claims_hand_each_event_once,
            ]
            model [
                outbox_sequences_match_the_model,
            ]
        }
    };
    (@expand $name:ident, $factory:expr,
        scenarios [$($scenario:ident),* $(,)?]
        races [$($race:ident),* $(,)?]
        model [$($model:ident),* $(,)?]
    ) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(
                #[test]
                fn $scenario() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::__private::run_outbox_check(
                        ::core::stringify!($scenario),
                        || $factory,
                        |store| async move { $crate::outbox::$scenario(&*store).await },
                    )
                }
            )*

            $(
                #[test]
                fn $race() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::__private::run_outbox_check(
                        ::core::stringify!($race),
                        || $factory,
                        |store| async move { $crate::outbox::$race(store).await },
                    )
                }
            )*

            $(
                #[test]
                fn $model() -> ::core::result::Result<(), $crate::CheckFailure> {
                    $crate::outbox::$model(|| $factory)
                }
            )*
        }
    };
}
