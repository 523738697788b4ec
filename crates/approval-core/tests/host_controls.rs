#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The decision rules of the host controls: where the stop and the
//! failed-attempt cap sit in the consume order, and the grant builders.

mod common;

use std::time::Duration;

use countersign_approval_core::{
    AbandonOutcome, Approval, ApprovalError, ApproverId, AttemptId, ConsumeOutcome,
    DEFAULT_ATTEMPT_LIMIT, GrantState, RevokeOutcome, StaleReason, StoredGrant, Timestamp,
    decide_abandon, decide_consume, decide_revoke,
};

const NOW: Timestamp = Timestamp::from_millis(2_000);

/// Issued at 1 s for 60 s.
fn approval() -> Approval {
    let (actor, run, url, action) = common::fixtures();
    Approval::for_action(
        actor,
        run,
        &url,
        &action,
        Duration::from_secs(60),
        Timestamp::from_millis(1_000),
    )
    .unwrap()
}

fn grant(state: GrantState, failed_attempts: u32, limit: u32) -> StoredGrant {
    StoredGrant {
        approval: approval().with_attempt_limit(limit).unwrap(),
        state,
        failed_attempts,
    }
}

#[test]
fn abandoned_comes_before_stopped_and_stopped_before_everything_else() {
    let a = AttemptId::generate().unwrap();
    let consumed = grant(
        GrantState::Consumed {
            at: NOW,
            by: a.clone(),
        },
        0,
        DEFAULT_ATTEMPT_LIMIT,
    );
    let binding = consumed.approval.binding();
    // An abandoned attempt is Abandoned, stopped or not.
    let abandoned = std::slice::from_ref(&a);
    assert_eq!(
        decide_consume(&consumed, abandoned, true, &binding, NOW, &a).outcome,
        ConsumeOutcome::Stale(StaleReason::Abandoned)
    );
    // A replay of a consume applied before the stop is refused after it.
    assert_eq!(
        decide_consume(&consumed, &[], true, &binding, NOW, &a).outcome,
        ConsumeOutcome::Stale(StaleReason::Stopped)
    );
    assert_eq!(
        decide_consume(&consumed, &[], false, &binding, NOW, &a).outcome,
        ConsumeOutcome::Consumed { replay: true }
    );
    // Revoked, locked, expired and mismatched grants all read Stopped once stopped.
    for state in [GrantState::Revoked, GrantState::Locked, GrantState::Active] {
        let g = grant(state, 0, DEFAULT_ATTEMPT_LIMIT);
        let late = Timestamp::from_millis(u64::MAX);
        let decision = decide_consume(&g, &[], true, &binding, late, &a);
        assert_eq!(
            decision.outcome,
            ConsumeOutcome::Stale(StaleReason::Stopped)
        );
        assert_eq!((decision.state, decision.failed_attempts), (None, None));
    }
}

#[test]
fn mismatches_count_and_the_limit_locks() {
    let a = AttemptId::generate().unwrap();
    let g = grant(GrantState::Active, 1, 3);
    let mut wrong = g.approval.binding();
    wrong.url.push_str("?other");
    let second = decide_consume(&g, &[], false, &wrong, NOW, &a);
    assert_eq!(second.outcome, ConsumeOutcome::Stale(StaleReason::Mismatch));
    assert_eq!((second.state, second.failed_attempts), (None, Some(2)));
    let g = grant(GrantState::Active, 2, 3);
    let third = decide_consume(&g, &[], false, &wrong, NOW, &a);
    assert_eq!(third.outcome, ConsumeOutcome::Stale(StaleReason::Locked));
    assert_eq!(
        (third.state, third.failed_attempts),
        (Some(GrantState::Locked), Some(3))
    );
    // A locked grant refuses a match and counts nothing more.
    let locked = grant(GrantState::Locked, 3, 3);
    let matching = decide_consume(&locked, &[], false, &locked.approval.binding(), NOW, &a);
    assert_eq!(matching.outcome, ConsumeOutcome::Stale(StaleReason::Locked));
    assert_eq!((matching.state, matching.failed_attempts), (None, None));
    // Expiry comes before the count.
    let expired = decide_consume(&g, &[], false, &wrong, Timestamp::from_millis(u64::MAX), &a);
    assert_eq!(expired.outcome, ConsumeOutcome::Stale(StaleReason::Expired));
    assert_eq!(expired.failed_attempts, None);
    // A match below the limit consumes and leaves the count as it was.
    let ok = decide_consume(&g, &[], false, &g.approval.binding(), NOW, &a);
    assert_eq!(ok.outcome, ConsumeOutcome::Consumed { replay: false });
    assert_eq!(ok.failed_attempts, None);
}

#[test]
fn revoke_and_abandon_leave_locked_and_stopped_grants_alone() {
    let a = AttemptId::generate().unwrap();
    for state in [GrantState::Locked, GrantState::Stopped] {
        assert_eq!(decide_revoke(&state), (RevokeOutcome::AlreadyRevoked, None));
    }
    let locked = grant(GrantState::Locked, 5, 5);
    let decision = decide_abandon(&locked, &[], false, NOW, &a);
    assert_eq!(decision.outcome, AbandonOutcome::Revoked);
    assert_eq!((decision.state, decision.remember), (None, false));
    let consumed = grant(
        GrantState::Consumed {
            at: NOW,
            by: a.clone(),
        },
        0,
        5,
    );
    let decision = decide_abandon(&consumed, &[], true, NOW, &a);
    assert_eq!(decision.outcome, AbandonOutcome::Stopped);
    assert_eq!((decision.state, decision.remember), (None, false));
}

#[test]
fn the_builders_keep_an_approver_and_a_limit_within_bounds() {
    let approval = approval();
    assert_eq!(approval.attempt_limit, DEFAULT_ATTEMPT_LIMIT);
    assert_eq!(approval.approver, None);
    let issued = approval.issued_at;
    let approved = approval
        .clone()
        .approved_by(ApproverId::new("user:1").unwrap(), issued)
        .unwrap();
    let who = approved.approver.unwrap();
    assert_eq!((who.id.as_str(), who.approved_at), ("user:1", issued));
    assert_eq!(
        approval.clone().approved_by(
            ApproverId::new("user:1").unwrap(),
            Timestamp::from_millis(issued.as_millis() + 1)
        ),
        Err(ApprovalError::ApprovedAfterIssue)
    );
    for limit in [0, 101] {
        assert_eq!(
            approval.clone().with_attempt_limit(limit),
            Err(ApprovalError::InvalidAttemptLimit { limit })
        );
    }
    assert_eq!(
        approval
            .clone()
            .with_attempt_limit(100)
            .unwrap()
            .attempt_limit,
        100
    );
    assert_eq!(approval.with_attempt_limit(1).unwrap().attempt_limit, 1);
}
