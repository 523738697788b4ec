#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Proposals: their ids, validation, the grant that approves one, and the
//! decision rules every store applies.

mod common;

use std::time::Duration;

use countersign_approval_core::{
    ApprovalError, ApproverId, Decision, DecisionOutcome, MAX_SCREENSHOT_BYTES, PageBinding,
    PageSnapshot, Proposal, ProposalError, ProposalId, ProposalState, ProposalStatus,
    StoredProposal, Timestamp, decide_proposal,
};
use proptest::prelude::*;

const TTL: Duration = Duration::from_secs(60);

fn proposal() -> Proposal {
    let (actor, run, url, action) = common::fixtures();
    Proposal::for_action(
        actor,
        run,
        &url,
        &action,
        TTL,
        Timestamp::from_millis(1_000),
    )
    .unwrap()
}

fn page() -> PageBinding {
    PageBinding {
        session_id: "s1".to_owned(),
        target_id: "t1".to_owned(),
        page_revision: "r1".to_owned(),
        element: None,
    }
}

fn snapshot(png: Option<Vec<u8>>) -> PageSnapshot {
    PageSnapshot {
        page: page(),
        screenshot_png: png,
        target_found: true,
    }
}

#[test]
fn ids_are_prefixed_random_and_parse() {
    let p = proposal();
    assert!(p.id.as_str().starts_with("prp_"));
    assert_eq!(p.id.as_str().len(), 36);
    assert_ne!(p.id, proposal().id);
    assert_eq!(ProposalId::parse(p.id.as_str()), Some(p.id.clone()));
    assert_eq!(ProposalId::parse("prp_<script>"), None);
    assert_eq!(p.expires_at, Timestamp::from_millis(61_000));
    assert_eq!(p.proposed_at, Timestamp::from_millis(1_000));
}

#[test]
fn lifetimes_outside_one_ms_to_a_day_are_refused() {
    let (actor, run, url, action) = common::fixtures();
    let now = Timestamp::from_millis(0);
    for (ttl, millis) in [
        (Duration::ZERO, 0),
        (Duration::from_secs(24 * 3600 + 1), 86_401_000),
    ] {
        let err =
            Proposal::for_action(actor.clone(), run.clone(), &url, &action, ttl, now).unwrap_err();
        assert_eq!(err, ProposalError::InvalidTtl { millis });
    }
    let err = Proposal::for_action(
        actor,
        run,
        &url,
        &action,
        TTL,
        Timestamp::from_millis(u64::MAX),
    )
    .unwrap_err();
    assert_eq!(err, ProposalError::ExpiryOverflow);
    assert_eq!(
        ProposalError::InvalidTtl { millis: 0 }.to_string(),
        "proposal ttl must be more than 0 and at most 24 hours, got 0ms"
    );
}

#[test]
fn snapshots_must_hold_valid_page_ids_and_a_bounded_png() {
    let png = b"\x89PNG\r\n\x1a\nrest".to_vec();
    assert!(proposal().observed(snapshot(Some(png.clone()))).is_ok());
    assert!(proposal().observed(snapshot(None)).is_ok());
    let mut too_big = png.clone();
    too_big.resize(MAX_SCREENSHOT_BYTES + 1, 0);
    assert_eq!(
        proposal().observed(snapshot(Some(too_big))).unwrap_err(),
        ProposalError::InvalidScreenshot
    );
    let mut at_limit = png;
    at_limit.resize(MAX_SCREENSHOT_BYTES, 0);
    assert!(proposal().observed(snapshot(Some(at_limit))).is_ok());
    assert_eq!(
        proposal()
            .observed(snapshot(Some(b"GIF89a".to_vec())))
            .unwrap_err(),
        ProposalError::InvalidScreenshot
    );
    let mut bad = snapshot(None);
    bad.page.target_id = "a/b".to_owned();
    assert_eq!(
        proposal().observed(bad).unwrap_err(),
        ProposalError::InvalidPage
    );
}

#[test]
fn the_proposals_grant_binds_exactly_it_and_its_page() {
    let plain = proposal();
    let approver = ApproverId::new("carol").unwrap();
    let now = Timestamp::from_millis(2_000);
    let grant = plain.grant(TTL, now, Some(approver.clone())).unwrap();
    assert!(grant.id.as_str().starts_with("apr_"));
    assert_eq!(grant.binding(), plain.binding());
    assert_eq!(grant.page(), None);
    assert_eq!(grant.issued_at, now);
    assert_eq!(grant.expires_at, Timestamp::from_millis(62_000));
    assert_eq!(grant.approver.as_ref().unwrap().id, approver);
    assert_eq!(grant.approver.as_ref().unwrap().approved_at, now);
    assert!(plain.is_approved_by(&grant));

    let observed = proposal().observed(snapshot(None)).unwrap();
    let bound = observed.grant(TTL, now, None).unwrap();
    assert_eq!(bound.page(), Some(page()));
    assert_eq!(bound.approver, None);
    assert!(observed.is_approved_by(&bound));
    // The unbound grant does not approve the observed proposal, nor the
    // reverse; another action approves neither.
    let mut unbound = bound.clone();
    unbound.session_id = None;
    unbound.page_revision = None;
    assert!(!observed.is_approved_by(&unbound));
    assert!(!plain.is_approved_by(&bound));
    let mut other = grant.clone();
    other.url.push('x');
    assert!(!plain.is_approved_by(&other));
    assert_eq!(
        plain.grant(Duration::ZERO, now, None).unwrap_err(),
        ApprovalError::InvalidTtl { millis: 0 }
    );
}

fn state_strategy() -> impl Strategy<Value = ProposalState> {
    prop_oneof![
        Just(ProposalState::Pending),
        Just(ProposalState::Denied {
            by: None,
            at: Timestamp::from_millis(5)
        }),
        Just(ProposalState::Approved {
            approval_id: countersign_approval_core::ApprovalId::parse("apr_x").unwrap(),
            by: None,
            at: Timestamp::from_millis(5),
        }),
    ]
}

proptest! {
    /// The order of the decision rules: decided, then expired, then
    /// stopped (for approvals only), then taken.
    #[test]
    fn decisions_follow_the_contract_order(
        state in state_strategy(),
        offset in 0u64..120_000,
        stopped: bool,
        approve: bool,
    ) {
        let p = proposal();
        let stored = StoredProposal { proposal: p.clone(), state: state.clone() };
        let now = Timestamp::from_millis(1_000 + offset);
        let approver = ApproverId::new("carol").unwrap();
        let grant = p.grant(TTL, Timestamp::from_millis(1_000), Some(approver.clone())).unwrap();
        let decision = if approve { Decision::Approve(&grant) } else { Decision::Deny(Some(&approver)) };
        let ruled = decide_proposal(&stored, decision, stopped, now);
        let expired = now >= p.expires_at;
        let expected = if state != ProposalState::Pending {
            DecisionOutcome::AlreadyDecided(state.clone())
        } else if expired {
            DecisionOutcome::Expired
        } else if approve && stopped {
            DecisionOutcome::Stopped
        } else if approve {
            DecisionOutcome::Approved
        } else {
            DecisionOutcome::Denied
        };
        prop_assert_eq!(&ruled.outcome, &expected);
        match (&ruled.outcome, &ruled.state) {
            (DecisionOutcome::Approved, Some(ProposalState::Approved { approval_id, by, at })) => {
                prop_assert_eq!(approval_id, &grant.id);
                prop_assert_eq!(by.as_ref(), Some(&approver));
                prop_assert_eq!(*at, now);
            }
            (DecisionOutcome::Denied, Some(ProposalState::Denied { by, at })) => {
                prop_assert_eq!(by.as_ref(), Some(&approver));
                prop_assert_eq!(*at, now);
            }
            (_, None) => {}
            (outcome, state) => prop_assert!(false, "{outcome:?} came with {state:?}"),
        }
        let status = stored.status_at(now);
        let expected_status = match state {
            ProposalState::Pending if expired => ProposalStatus::Expired,
            ProposalState::Pending => ProposalStatus::Pending,
            ProposalState::Approved { .. } => ProposalStatus::Approved,
            ProposalState::Denied { .. } => ProposalStatus::Denied,
        };
        prop_assert_eq!(status, expected_status);
    }
}

#[test]
fn outcomes_and_statuses_have_lower_case_words() {
    assert_eq!(DecisionOutcome::Approved.as_str(), "approved");
    assert_eq!(
        DecisionOutcome::AlreadyDecided(ProposalState::Denied {
            by: None,
            at: Timestamp::from_millis(0)
        })
        .as_str(),
        "already denied"
    );
    assert_eq!(DecisionOutcome::Stopped.as_str(), "stopped");
    assert_eq!(ProposalStatus::Expired.as_str(), "expired");
    assert_eq!(ProposalStatus::Pending.as_str(), "pending");
}
