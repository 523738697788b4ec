//! Page-bound grants: what `bound_to_page` keeps and how `page` reads it back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use countersign_approval_core::policy::{Policy, StaticResolver};
use countersign_approval_core::{
    ActorId, Approval, ApprovalError, MAX_PAGE_ID_BYTES, PageBinding, RunId, Timestamp,
};

async fn approval() -> Approval {
    let policy = Policy::builder()
        .allow_host("docs.example.com")
        .resolver(StaticResolver::answering_all(["93.184.216.34"
            .parse()
            .unwrap()]))
        .build()
        .unwrap();
    let url = policy
        .authorize_destination("https://docs.example.com/")
        .await
        .unwrap();
    let action = policy
        .authorize_action(&serde_json::json!({"method": "click", "selector": "#go"}))
        .unwrap();
    Approval::for_action(
        ActorId::new("actor").unwrap(),
        RunId::new("run").unwrap(),
        &url,
        &action,
        Duration::from_secs(60),
        Timestamp::from_millis(1_000),
    )
    .unwrap()
}

fn page() -> PageBinding {
    PageBinding {
        session_id: "6A1F0C".to_owned(),
        target_id: "B7E2D9".to_owned(),
        page_revision: "4C3D2E".to_owned(),
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn a_grant_without_a_page_is_unbound() {
    let grant = block_on(approval());
    assert_eq!(grant.page(), None);
}

#[test]
fn a_bound_grant_keeps_session_tab_and_revision_in_the_reserved_fields() {
    let grant = block_on(approval()).bound_to_page(&page()).unwrap();
    assert_eq!(grant.session_id.as_deref(), Some("6A1F0C/B7E2D9"));
    assert_eq!(grant.page_revision.as_deref(), Some("4C3D2E"));
    assert_eq!(grant.page(), Some(page()));
    // The digest rules do not change.
    assert_eq!(grant.action_digest, block_on(approval()).action_digest);
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
        };
        assert_eq!(
            block_on(approval()).bound_to_page(&page),
            Err(ApprovalError::InvalidPage),
            "{page:?}"
        );
    }
    let longest = PageBinding {
        page_revision: "a".repeat(MAX_PAGE_ID_BYTES),
        ..page()
    };
    assert!(block_on(approval()).bound_to_page(&longest).is_ok());
}

#[test]
fn a_damaged_page_binding_matches_no_page() {
    let mut only_revision = block_on(approval());
    only_revision.page_revision = Some("4C3D2E".to_owned());
    let read = only_revision.page().unwrap();
    assert_eq!(read.session_id, "");
    assert_ne!(read, page());

    let mut no_separator = block_on(approval()).bound_to_page(&page()).unwrap();
    no_separator.session_id = Some("6A1F0CB7E2D9".to_owned());
    let read = no_separator.page().unwrap();
    assert_eq!(
        (read.session_id.as_str(), read.target_id.as_str()),
        ("", "")
    );
}
