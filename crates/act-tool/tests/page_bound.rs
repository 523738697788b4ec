//! Page-bound grants through Act, with the fake backend showing a page.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Harness, TTL, URL, bound_page, call_for, click};
use std::collections::BTreeMap;

use countersign_act_tool::approval::{
    ApprovalId, ApprovalStore, ElementIdentity, FrameIdentity, GrantState, OutcomeCode, PageBinding,
};
use countersign_act_tool::policy::{Policy, StaticResolver};
use countersign_act_tool::{
    Act, Context, ContextBuilder, GrantError, issue_grant, issue_page_grant,
};
use serde_json::json;

/// The page `revision` with the click's target, as a snapshot binds it.
fn page(revision: &str) -> PageBinding {
    bound_page(revision)
}

/// A harness whose fake backend shows `page("r1")`.
fn on_a_page() -> Harness {
    let h = Harness::new();
    h.backend.set_page(Some(page("r1")));
    h
}

async fn page_grant(h: &Harness, bound: &PageBinding) -> String {
    issue_page_grant(&h.context, bound, URL, &click(), TTL)
        .await
        .unwrap()
        .id
        .as_str()
        .to_owned()
}

#[tokio::test]
async fn a_grant_bound_to_the_current_page_is_performed_once() {
    let h = on_a_page();
    let id = page_grant(&h, &page("r1")).await;
    h.expect_ok(&call_for(URL, &id, &click())).await;
    h.expect_refused(&call_for(URL, &id, &click()), "APPROVAL_STALE")
        .await;
}

#[tokio::test]
async fn another_page_is_stale_and_the_grant_stays_unused() {
    let h = on_a_page();
    for other in [
        page("r2"),
        PageBinding {
            target_id: "TAB2".to_owned(),
            ..page("r1")
        },
        PageBinding {
            session_id: "CTX2".to_owned(),
            ..page("r1")
        },
    ] {
        let id = page_grant(&h, &other).await;
        let refused = h
            .expect_refused(&call_for(URL, &id, &click()), "APPROVAL_STALE")
            .await;
        assert_eq!(
            refused["error"]["message"],
            "the page changed since approval (another document, tab or session); the approval was not used"
        );
        let stored = h
            .store()
            .get(&countersign_act_tool::approval::ApprovalId::parse(&id).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.state, GrantState::Active);
    }
}

#[tokio::test]
async fn the_grant_is_kept_when_the_page_comes_back() {
    // Whether a page can come back is the backend's matter (Chromium's
    // revisions never repeat); the grant itself was never consumed.
    let h = on_a_page();
    let id = page_grant(&h, &page("r1")).await;
    h.backend.set_page(Some(page("r2")));
    h.expect_refused(&call_for(URL, &id, &click()), "APPROVAL_STALE")
        .await;
    h.backend.set_page(Some(page("r1")));
    h.expect_ok(&call_for(URL, &id, &click())).await;
}

#[tokio::test]
async fn an_unbound_grant_on_a_backend_with_pages_needs_the_hosts_opt_in() {
    let h = on_a_page();
    let grant = issue_grant(&h.context, URL, &click(), TTL).await.unwrap();
    let call = call_for(URL, grant.id.as_str(), &click());
    let refused = h.expect_refused(&call, "APPROVAL_REQUIRED").await;
    assert_eq!(
        refused["error"]["message"],
        "approval is not bound to a page; the host must approve on the page the browser shows"
    );

    let lenient = lenient_context(&h, ContextBuilder::accept_unbound_grants);
    assert!(lenient.accepts_unbound_grants());
    assert!(!h.context.accepts_unbound_grants());
    let performed = Act::new(lenient).execute_json(&call).await;
    assert_eq!(performed["status"], "ok", "{performed}");
    assert_eq!(h.backend.len(), 1);
}

#[tokio::test]
async fn an_unknown_id_on_a_backend_with_pages_is_approval_required() {
    let h = on_a_page();
    let call = call_for(URL, "apr_00000000000000000000000000000000", &click());
    h.expect_refused(&call, "APPROVAL_REQUIRED").await;
}

#[tokio::test]
async fn a_backend_without_pages_reads_no_grant_first() {
    // The fake without a page: the v1 flow, unchanged.
    let h = Harness::new();
    let id = page_grant(&h, &page("r1")).await;
    h.expect_ok(&call_for(URL, &id, &click())).await;
}

fn pay_button(label: &str) -> ElementIdentity {
    ElementIdentity::new(
        "button",
        label,
        "button",
        label,
        BTreeMap::from([("type".to_owned(), "submit".to_owned())]),
        vec![FrameIdentity::new("https://docs.example.com", "r1")],
    )
    .unwrap()
}

#[tokio::test]
async fn a_page_without_an_element_is_refused_at_issue_unless_the_host_opts_in() {
    let h = on_a_page();
    let document_only = PageBinding::new("CTX1", "TAB1", "r1");
    let refused = issue_page_grant(&h.context, &document_only, URL, &click(), TTL)
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        GrantError::NoElementBound {
            method: "click".to_owned()
        }
    );
    assert_eq!(
        refused.to_string(),
        "the page binds no target element for `click`; approve from the backend's snapshot of \
         the action (for chromium, `Tab::approval`), or opt in with \
         `accept_grants_without_element`"
    );
    // A navigation's grant names its destination, not an element.
    let navigating = lenient_context(&h, |b| {
        b.source_policy(
            Policy::builder()
                .allow_host("docs.example.com")
                .allow_methods(["click", "navigate"])
                .resolver(
                    StaticResolver::new()
                        .with_host("docs.example.com", ["93.184.216.34".parse().unwrap()]),
                )
                .build()
                .unwrap(),
        )
    });
    let navigate = json!({"method": "navigate", "selector": ":root"});
    issue_page_grant(&navigating, &document_only, URL, &navigate, TTL)
        .await
        .unwrap();
    assert_eq!(
        issue_page_grant(&navigating, &document_only, URL, &click(), TTL).await,
        Err(GrantError::NoElementBound {
            method: "click".to_owned()
        })
    );
    // Opted in, the document-only grant is issued and performed.
    let lenient = lenient_context(&h, |b| b.accept_grants_without_element());
    assert!(lenient.accepts_grants_without_element());
    assert!(!h.context.accepts_grants_without_element());
    let grant = issue_page_grant(&lenient, &document_only, URL, &click(), TTL)
        .await
        .unwrap();
    let performed = Act::new(lenient)
        .execute_json(&call_for(URL, grant.id.as_str(), &click()))
        .await;
    assert_eq!(performed["status"], "ok", "{performed}");
    assert_eq!(h.backend.len(), 1);
}

#[tokio::test]
async fn a_grant_without_an_element_is_refused_at_act_naming_the_switch() {
    // Issued where the host opted in (or before element binding), acted
    // on where it did not: refused, consuming nothing, performing nothing.
    let h = on_a_page();
    let lenient = lenient_context(&h, |b| b.accept_grants_without_element());
    let old = issue_page_grant(
        &lenient,
        &PageBinding::new("CTX1", "TAB1", "r1"),
        URL,
        &click(),
        TTL,
    )
    .await
    .unwrap();
    let call = call_for(URL, old.id.as_str(), &click());
    let refused = h.expect_refused(&call, "APPROVAL_REQUIRED").await;
    assert_eq!(
        refused["error"]["message"],
        "approval binds no target element; the host must approve from a snapshot of the action \
         (or opt in with `accept_grants_without_element`)"
    );
    assert!(h.backend.is_empty());
    let stored = h.store().get(&old.id).await.unwrap().unwrap();
    assert_eq!(stored.state, GrantState::Active);
    // Where the host opted in, the same grant still works.
    let performed = Act::new(lenient).execute_json(&call).await;
    assert_eq!(performed["status"], "ok", "{performed}");
    assert_eq!(h.backend.len(), 1);
}

/// `h`'s context with `opt_in` applied: the same actor, run, backend,
/// stores and clock.
fn lenient_context(h: &Harness, opt_in: impl FnOnce(ContextBuilder) -> ContextBuilder) -> Context {
    opt_in(
        Context::builder()
            .actor_id(h.context.actor_id().clone())
            .run_id(h.context.run_id().clone())
            .backend(h.backend.clone())
            .source_policy(h.context.source_policy().clone())
            .operation_store(h.operations.clone())
            .approval_store(h.store().clone())
            .clock(h.clock.clone()),
    )
    .build()
    .unwrap()
}

#[tokio::test]
async fn an_element_bound_grant_acts_only_while_the_target_is_what_was_approved() {
    let h = Harness::new();
    let approved = page("r1").with_element(pay_button("Pay 5.00 EUR"));
    // The page still shows the document, but the target was relabelled.
    h.backend
        .set_page(Some(page("r1").with_element(pay_button("Pay 5000.00 EUR"))));
    let id = page_grant(&h, &approved).await;
    let stored = h
        .store()
        .get(&ApprovalId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.approval.page(), Some(approved.clone()));

    let refused = h
        .expect_refused(&call_for(URL, &id, &click()), "APPROVAL_STALE")
        .await;
    assert_eq!(
        refused["error"]["message"],
        "the page or its target changed since approval; the backend refused before acting; \
         nothing was performed; the approval is still usable"
    );
    let record = h.last_record();
    assert_eq!(record.outcome, OutcomeCode::ApprovalStale);
    assert_eq!(
        record.reason,
        "backend refused before dispatching: the target element changed since approval; \
         nothing was recorded; abandon: restored"
    );
    assert!(h.backend.is_empty());
    let stored = h
        .store()
        .get(&ApprovalId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, GrantState::Active);

    // The target is back to what the person approved: performed once.
    h.backend.set_page(Some(approved));
    h.expect_ok(&call_for(URL, &id, &click())).await;
    assert_eq!(h.backend.len(), 1);
    h.expect_refused(&call_for(URL, &id, &click()), "APPROVAL_STALE")
        .await;
    assert_eq!(h.backend.len(), 1);
}
