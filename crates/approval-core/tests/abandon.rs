#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The abandon rules, and consume after abandon.

mod common;

use std::time::Duration;

use common::fixtures;
use countersign_approval_core::{
    AbandonDecision, AbandonOutcome, Approval, AttemptId, ConsumeOutcome, GrantState,
    MAX_ABANDONED_ATTEMPTS, StaleReason, StoredGrant, Timestamp, decide_abandon, decide_consume,
};
use proptest::prelude::*;

const T0: Timestamp = Timestamp::from_millis(1_000);

fn approval() -> Approval {
    let (actor, run, url, action) = fixtures();
    Approval::for_action(actor, run, &url, &action, Duration::from_secs(60), T0).unwrap()
}

fn attempts(n: usize) -> Vec<AttemptId> {
    (0..n).map(|_| AttemptId::generate().unwrap()).collect()
}

fn with_state(state: GrantState) -> StoredGrant {
    StoredGrant {
        approval: approval(),
        state,
        failed_attempts: 0,
    }
}

const BEFORE_EXPIRY: Timestamp = Timestamp::from_millis(2_000);
const AT_EXPIRY: Timestamp = Timestamp::from_millis(61_000);

#[test]
fn abandon_undoes_the_attempts_own_consume() {
    let [a] = <[AttemptId; 1]>::try_from(attempts(1)).unwrap();
    let grant = with_state(GrantState::Consumed {
        at: BEFORE_EXPIRY,
        by: a.clone(),
    });
    assert_eq!(
        decide_abandon(&grant, &[], false, BEFORE_EXPIRY, &a),
        AbandonDecision {
            outcome: AbandonOutcome::Usable { restored: true },
            state: Some(GrantState::Active),
            remember: true,
        }
    );
    // Past expiry the consume is undone all the same, and the answer says expired.
    assert_eq!(
        decide_abandon(&grant, &[], false, AT_EXPIRY, &a),
        AbandonDecision {
            outcome: AbandonOutcome::Expired,
            state: Some(GrantState::Active),
            remember: true,
        }
    );
}

#[test]
fn abandon_of_other_states() {
    let [a, b] = <[AttemptId; 2]>::try_from(attempts(2)).unwrap();
    let remembered = |outcome| AbandonDecision {
        outcome,
        state: None,
        remember: true,
    };
    let active = with_state(GrantState::Active);
    assert_eq!(
        decide_abandon(&active, &[], false, BEFORE_EXPIRY, &a),
        remembered(AbandonOutcome::Usable { restored: false })
    );
    assert_eq!(
        decide_abandon(&active, &[], false, AT_EXPIRY, &a),
        remembered(AbandonOutcome::Expired)
    );
    let by_other = with_state(GrantState::Consumed {
        at: BEFORE_EXPIRY,
        by: b.clone(),
    });
    assert_eq!(
        decide_abandon(&by_other, &[], false, BEFORE_EXPIRY, &a),
        remembered(AbandonOutcome::ConsumedByOther)
    );
    assert_eq!(
        decide_abandon(
            &with_state(GrantState::Revoked),
            &[],
            false,
            BEFORE_EXPIRY,
            &a
        ),
        AbandonDecision {
            outcome: AbandonOutcome::Revoked,
            state: None,
            remember: false,
        }
    );
    // A repeat: already remembered, nothing more to do.
    assert_eq!(
        decide_abandon(&active, std::slice::from_ref(&a), false, BEFORE_EXPIRY, &a),
        AbandonDecision {
            outcome: AbandonOutcome::Usable { restored: false },
            state: None,
            remember: false,
        }
    );
}

#[test]
fn a_full_list_retires_the_grant() {
    let full = attempts(MAX_ABANDONED_ATTEMPTS);
    let [a, b] = <[AttemptId; 2]>::try_from(attempts(2)).unwrap();
    let revoked = AbandonDecision {
        outcome: AbandonOutcome::Revoked,
        state: Some(GrantState::Revoked),
        remember: false,
    };
    assert_eq!(
        decide_abandon(
            &with_state(GrantState::Active),
            &full,
            false,
            BEFORE_EXPIRY,
            &a
        ),
        revoked
    );
    let by_a = with_state(GrantState::Consumed {
        at: BEFORE_EXPIRY,
        by: a.clone(),
    });
    assert_eq!(
        decide_abandon(&by_a, &full, false, BEFORE_EXPIRY, &a),
        revoked
    );
    assert_eq!(
        decide_abandon(&by_a, &full, false, BEFORE_EXPIRY, &b),
        AbandonDecision {
            outcome: AbandonOutcome::ConsumedByOther,
            state: None,
            remember: false,
        }
    );
    // One already in the full list is still answered normally.
    assert_eq!(
        decide_abandon(
            &with_state(GrantState::Active),
            &full,
            false,
            BEFORE_EXPIRY,
            &full[3]
        )
        .outcome,
        AbandonOutcome::Usable { restored: false }
    );
    // One short of full still has room.
    assert!(
        decide_abandon(
            &with_state(GrantState::Active),
            &full[1..],
            false,
            BEFORE_EXPIRY,
            &a
        )
        .remember
    );
}

#[test]
fn an_abandoned_attempt_never_consumes() {
    let [a, b] = <[AttemptId; 2]>::try_from(attempts(2)).unwrap();
    let grant = with_state(GrantState::Active);
    let binding = grant.approval.binding();
    let abandoned = std::slice::from_ref(&a);
    assert_eq!(
        decide_consume(&grant, abandoned, false, &binding, BEFORE_EXPIRY, &a),
        countersign_approval_core::ConsumeDecision {
            outcome: ConsumeOutcome::Stale(StaleReason::Abandoned),
            state: None,
            failed_attempts: None,
        }
    );
    // Another attempt still may.
    assert_eq!(
        decide_consume(&grant, abandoned, false, &binding, BEFORE_EXPIRY, &b).outcome,
        ConsumeOutcome::Consumed { replay: false }
    );
}

#[test]
fn outcome_words() {
    let words: Vec<&str> = [
        AbandonOutcome::Usable { restored: true },
        AbandonOutcome::Usable { restored: false },
        AbandonOutcome::ConsumedByOther,
        AbandonOutcome::Expired,
        AbandonOutcome::Revoked,
        AbandonOutcome::Unknown,
    ]
    .iter()
    .map(|o| o.as_str())
    .collect();
    assert_eq!(
        words,
        [
            "restored",
            "usable",
            "consumed by another attempt",
            "expired",
            "revoked",
            "unknown"
        ]
    );
    assert!(AbandonOutcome::Usable { restored: true }.is_usable());
    assert!(!AbandonOutcome::Expired.is_usable());
}

proptest! {
    /// Whatever the sequence of consumes and abandons, an abandoned attempt
    /// never holds the grant afterwards, the list never exceeds its bound,
    /// and a consume never succeeds twice without an abandon in between.
    #[test]
    fn abandoned_attempts_never_hold_the_grant(
        steps in proptest::collection::vec((any::<bool>(), 0usize..24), 1..120)
    ) {
        let pool = attempts(24);
        let mut grant = with_state(GrantState::Active);
        let binding = grant.approval.binding();
        let mut abandoned: Vec<AttemptId> = Vec::new();
        // Every attempt ever abandoned, remembered by the grant or not.
        let mut given_back: Vec<AttemptId> = Vec::new();
        for (is_abandon, who) in steps {
            let attempt = &pool[who];
            if is_abandon {
                given_back.push(attempt.clone());
                let decision = decide_abandon(&grant, &abandoned, false, BEFORE_EXPIRY, attempt);
                if decision.remember {
                    abandoned.push(attempt.clone());
                }
                if let Some(state) = decision.state {
                    grant.state = state;
                }
                prop_assert!(abandoned.len() <= MAX_ABANDONED_ATTEMPTS);
            } else {
                let decision = decide_consume(&grant, &abandoned, false, &binding, BEFORE_EXPIRY, attempt);
                let (outcome, next) = (decision.outcome, decision.state);
                if abandoned.contains(attempt) {
                    prop_assert_eq!(outcome, ConsumeOutcome::Stale(StaleReason::Abandoned));
                }
                if given_back.contains(attempt) {
                    prop_assert!(
                        !matches!(outcome, ConsumeOutcome::Consumed { .. }),
                        "an abandoned attempt consumed the grant"
                    );
                }
                if let Some(state) = next {
                    grant.state = state;
                }
            }
            if let GrantState::Consumed { by, .. } = &grant.state {
                prop_assert!(!given_back.contains(by), "an abandoned attempt holds the grant");
            }
        }
    }
}
