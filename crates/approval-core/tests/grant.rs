#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Grant construction: TTL bounds, expiry, notes and the binding.

mod common;

use std::time::Duration;

use common::fixtures;
use countersign_approval_core::{
    ActorId, Approval, ApprovalError, Binding, MAX_NOTE_BYTES, MAX_PAGE_ID_BYTES, MAX_TTL,
    PageBinding, RunId, StaleReason, Timestamp,
};

fn grant(ttl: Duration, now: Timestamp) -> Result<Approval, ApprovalError> {
    let (actor, run, url, action) = fixtures();
    Approval::for_action(actor, run, &url, &action, ttl, now)
}

#[test]
fn ttl_must_be_more_than_zero_and_at_most_24_hours() {
    let now = Timestamp::from_millis(1_000);
    assert_eq!(MAX_TTL, Duration::from_secs(24 * 60 * 60));

    assert_eq!(
        grant(Duration::ZERO, now).unwrap_err(),
        ApprovalError::InvalidTtl { millis: 0 }
    );
    assert_eq!(
        grant(Duration::ZERO, now).unwrap_err().to_string(),
        "ttl must be more than 0 and at most 24 hours, got 0ms"
    );
    let day = grant(MAX_TTL, now).unwrap();
    assert_eq!(day.expires_at, Timestamp::from_millis(1_000 + 86_400_000));
    assert_eq!(
        grant(MAX_TTL + Duration::from_millis(1), now).unwrap_err(),
        ApprovalError::InvalidTtl { millis: 86_400_001 }
    );
    assert!(matches!(
        grant(Duration::MAX, now).unwrap_err(),
        ApprovalError::InvalidTtl { .. }
    ));

    let shortest = grant(Duration::from_millis(1), now).unwrap();
    assert_eq!(shortest.expires_at, Timestamp::from_millis(1_001));
    // A sub-millisecond part beyond 24 h is still more than 24 h.
    assert!(grant(MAX_TTL + Duration::from_nanos(1), now).is_err());
}

#[test]
fn expiry_overflow_is_an_error_not_a_wrap() {
    assert_eq!(
        grant(
            Duration::from_secs(1),
            Timestamp::from_millis(u64::MAX - 10)
        )
        .unwrap_err(),
        ApprovalError::ExpiryOverflow
    );
}

#[test]
fn a_grant_is_expired_from_expires_at_on() {
    let approval = grant(Duration::from_secs(60), Timestamp::from_millis(10_000)).unwrap();
    assert_eq!(approval.issued_at, Timestamp::from_millis(10_000));
    assert_eq!(approval.expires_at, Timestamp::from_millis(70_000));
    assert!(!approval.is_expired_at(Timestamp::from_millis(10_000)));
    assert!(!approval.is_expired_at(Timestamp::from_millis(69_999)));
    assert!(approval.is_expired_at(Timestamp::from_millis(70_000)));
    assert!(approval.is_expired_at(Timestamp::from_millis(u64::MAX)));
    assert_eq!(StaleReason::Expired.as_str(), "expired");
}

#[test]
fn new_grants_have_fresh_ids_and_no_reserved_fields() {
    let a = grant(Duration::from_secs(60), Timestamp::from_millis(0)).unwrap();
    let b = grant(Duration::from_secs(60), Timestamp::from_millis(0)).unwrap();
    assert_ne!(a.id, b.id);
    assert!(a.id.as_str().starts_with("apr_"));
    assert_eq!(a.approver_note, None);
    assert_eq!(
        (
            a.page_revision.clone(),
            a.operation_id.clone(),
            a.session_id.clone()
        ),
        (None, None, None)
    );
    assert_eq!(a.action_digest, a.action.digest());
}

#[test]
fn notes_are_bounded_and_free_of_control_characters() {
    let approval = || grant(Duration::from_secs(60), Timestamp::from_millis(0)).unwrap();
    assert_eq!(MAX_NOTE_BYTES, 1024);
    let longest = "é".repeat(512);
    assert_eq!(
        approval().with_note(longest.clone()).unwrap().approver_note,
        Some(longest)
    );
    assert_eq!(
        approval().with_note("").unwrap().approver_note,
        Some(String::new())
    );
    for bad in [
        "x".repeat(1025),
        "line\nbreak".to_owned(),
        "\u{7f}".to_owned(),
    ] {
        assert_eq!(
            approval().with_note(bad).unwrap_err(),
            ApprovalError::InvalidNote
        );
    }
    // The same control characters as host ids: C0, DEL and C1, nothing else.
    for code in 0..=0xa0u32 {
        let c = char::from_u32(code).unwrap();
        let control = code <= 0x1f || (0x7f..=0x9f).contains(&code);
        let note = approval().with_note(format!("note{c}"));
        assert_eq!(
            note.err(),
            control.then_some(ApprovalError::InvalidNote),
            "U+{code:04X}"
        );
    }
}

#[test]
fn the_binding_is_actor_run_url_and_action_digest() {
    let (actor, run, url, action) = fixtures();
    let approval = Approval::for_action(
        actor.clone(),
        run.clone(),
        &url,
        &action,
        Duration::from_secs(1),
        Timestamp::from_millis(0),
    )
    .unwrap();
    let binding = Binding::new(&actor, &run, &url, &action);
    assert_eq!(approval.binding(), binding);
    assert!(approval.is_bound_to(&binding));
    assert_eq!(binding.url, url.as_str());
    assert_eq!(binding.action_digest, action.digest());

    let mut other = binding.clone();
    other.run_id = RunId::new("other run").unwrap();
    assert!(!approval.is_bound_to(&other));
    let mut other = binding.clone();
    other.actor_id = ActorId::new("other actor").unwrap();
    assert!(!approval.is_bound_to(&other));
    let mut other = binding.clone();
    other.url.push('x');
    assert!(!approval.is_bound_to(&other));
}

// Page-bound grants: what `bound_to_page` keeps and how `page` reads it back.

fn approval() -> Approval {
    grant(Duration::from_secs(60), Timestamp::from_millis(1_000)).unwrap()
}

fn page() -> PageBinding {
    PageBinding {
        session_id: "6A1F0C".to_owned(),
        target_id: "B7E2D9".to_owned(),
        page_revision: "4C3D2E".to_owned(),
        element: None,
    }
}

#[test]
fn a_grant_without_a_page_is_unbound() {
    let grant = approval();
    assert_eq!(grant.page(), None);
}

#[test]
fn a_bound_grant_keeps_session_tab_and_revision_in_the_reserved_fields() {
    let grant = approval().bound_to_page(&page()).unwrap();
    assert_eq!(grant.session_id.as_deref(), Some("6A1F0C/B7E2D9"));
    assert_eq!(grant.page_revision.as_deref(), Some("4C3D2E"));
    assert_eq!(grant.page(), Some(page()));
    // The digest rules do not change.
    assert_eq!(grant.action_digest, approval().action_digest);
}

#[test]
fn malformed_page_ids_are_refused() {
    let long = "a".repeat(MAX_PAGE_ID_BYTES + 1);
    for (session, target, revision) in [
        ("", "t", "r"),
        ("s", "", "r"),
        ("s", "t", ""),
        ("s/x", "t", "r"),
        ("s", "t x", "r"),
        ("s", "t", "r\n"),
        ("s", "t", long.as_str()),
    ] {
        let page = PageBinding {
            session_id: session.to_owned(),
            target_id: target.to_owned(),
            page_revision: revision.to_owned(),
            element: None,
        };
        assert_eq!(
            approval().bound_to_page(&page),
            Err(ApprovalError::InvalidPage),
            "{page:?}"
        );
    }
    let longest = PageBinding {
        page_revision: "a".repeat(MAX_PAGE_ID_BYTES),
        ..page()
    };
    assert!(approval().bound_to_page(&longest).is_ok());
}

#[test]
fn a_damaged_page_binding_matches_no_page() {
    let mut only_revision = approval();
    only_revision.page_revision = Some("4C3D2E".to_owned());
    let read = only_revision.page().unwrap();
    assert_eq!(read.session_id, "");
    assert_ne!(read, page());

    let mut no_separator = approval().bound_to_page(&page()).unwrap();
    no_separator.session_id = Some("6A1F0CB7E2D9".to_owned());
    let read = no_separator.page().unwrap();
    assert_eq!(
        (read.session_id.as_str(), read.target_id.as_str()),
        ("", "")
    );
}
