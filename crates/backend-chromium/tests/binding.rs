//! Element binding tried as an attacker would, in real headless Chromium
//! behind the egress guard (issue 30): frames of the same and of another
//! site, buttons labelled by CSS, targets disguised over visible decoys,
//! the documented host path, and the form data a submit sends. One browser,
//! launched with the backend's default flags (site isolation on), serves
//! every case; each case opens its page afresh in a tab in front.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;

use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
use countersign_act_tool::{GrantError, issue_page_grant};
use countersign_approval_core::{
    ApprovalId, ApprovalStore, Backend, FormField, FormFieldKind, GrantState, PageSnapshot,
    SnapshotLimits,
};
use countersign_backend_chromium::Tab;
use futures_util::StreamExt;
use serde_json::{Value, json};
use support::host::{
    Accepts, Host, KEPT, Outcome, STALE_KEPT, TTL, attack_clicks, front_tab, host_on, read_on,
    wait_on,
};
use support::{Case, Fixture};

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|f| Box::pin($name(f))) as Case)),*]
    };
}

#[test]
fn element_binding_in_headless_chromium() {
    support::run_cases(
        support::options(),
        &cases![
            a_cross_site_frame_is_out_of_process,
            a_frame_element_that_never_changes_gets_no_click,
            a_frame_navigated_between_approval_and_act_gets_no_click,
            an_element_whose_centre_shows_a_frame_gets_no_click,
            a_button_labelled_by_generated_content_is_clicked_once,
            an_icon_font_button_is_clicked_once,
            an_svg_icon_button_is_clicked_once,
            generated_text_changed_after_approval_is_stale,
            observation_names_icon_buttons_as_the_tree_does,
            disguised_targets_get_no_click,
            the_same_targets_shown_are_clicked_once,
            a_clip_that_leaves_most_of_the_box_is_clicked_once,
            a_link_wrapped_onto_two_lines_is_clicked_once,
            a_covered_wrapped_link_gets_no_click,
            a_button_below_the_fold_is_approved_and_clicked_once,
            a_target_replaced_when_scrolled_to_binds_nothing,
            the_documented_path_binds_the_element,
            a_page_without_an_element_needs_the_hosts_opt_in,
            an_unchanged_form_submits_the_approved_data_once,
            a_hidden_input_changed_after_approval_submits_nothing,
            a_field_edited_by_the_page_submits_nothing,
            a_control_added_to_the_form_submits_nothing,
            a_control_removed_from_the_form_submits_nothing,
            an_enter_in_a_field_binds_the_implicit_submission,
            a_fill_approved_before_the_submit_is_submitted_once,
            a_password_is_bound_by_hash_and_a_file_by_name,
            a_form_past_the_bound_is_refused_by_name,
        ],
    );
}

/// The approver's snapshot of `action` on `path` in `tab`, taken the
/// documented way.
async fn snapshot(f: &Fixture, tab: &Tab, path: &str, action: &Value) -> PageSnapshot {
    let url = f.policy.authorize_destination(&f.url(path)).await.unwrap();
    tab.approval(&url, &f.policy.authorize_action(action).unwrap())
        .await
        .unwrap()
}

/// A grant for `action` on `path` issued from `snapshot` as it is.
async fn grant_from(
    f: &Fixture,
    host: &Host,
    snapshot: &PageSnapshot,
    path: &str,
    action: &Value,
) -> ApprovalId {
    issue_page_grant(&host.context, snapshot, &f.url(path), action, TTL)
        .await
        .unwrap()
        .id
}

/// Act's answer to `action` on `path` with the grant `id`.
async fn act(f: &Fixture, host: &Host, path: &str, id: &ApprovalId, action: &Value) -> Value {
    let mut call = action.clone();
    call["url"] = Value::from(f.url(path));
    call["approval_id"] = Value::from(id.as_str());
    host.act.execute_json(&call).await
}

// 1. Frames.

/// Which site the checkout frame comes from.
#[derive(Debug, Clone, Copy)]
enum FrameSite {
    /// Another port of the page's own host: the same site, so the frame
    /// runs in the page's renderer.
    Same,
    /// Another host: another site, so site isolation puts the frame in a
    /// renderer of its own.
    Cross,
}

/// A fresh `/element` tab with a checkout frame at the top left showing
/// "Pay $5" from `site`, inside `div#wrapper`, loaded once; every trusted
/// click the frame receives is counted in the page's
/// `body.dataset.frameClicks`. Returns the tab and the frame's server.
async fn frame_tab(f: &Fixture, site: FrameSite) -> (Tab, SocketAddr) {
    let server = match site {
        FrameSite::Same => support::serve().await,
        FrameSite::Cross => support::serve_at(support::OTHER_SITE_IP).await,
    };
    let tab = front_tab(f, "/element").await;
    read_on(
        &tab,
        &format!(
            "(document.body.dataset.frameClicks = '0', \
             window.addEventListener('message', (e) => {{ \
             if (String(e.data).startsWith('click:')) document.body.dataset.frameClicks = \
             String(Number(document.body.dataset.frameClicks) + 1); }}), \
             document.body.insertAdjacentHTML('afterbegin', '<div id=\"wrapper\" \
             style=\"width: 300px; height: 100px\"><iframe id=\"checkout\" \
             src=\"http://{server}/frame-pay5\" onload=\"this.dataset.loads = \
             Number(this.dataset.loads || 0) + 1\" style=\"width: 300px; height: 100px; \
             border: 0\"></iframe></div>'), 0)"
        ),
    )
    .await;
    wait_on(&tab, "el('#checkout').dataset.loads === '1'").await;
    (tab, server)
}

const FRAME_REFUSAL: &str = "shows another document (a frame) at its centre, which no grant binds";

/// For each site: `selector` in a frame tab is not found in the snapshot
/// (no element is bound); a grant on the document alone (the host opted
/// in) is refused by the backend before any input, given back, and the
/// frame gets no click, after `between` ran between approval and Act.
async fn frame_gets_no_click(f: &Fixture, selector: &str, between: fn(SocketAddr) -> String) {
    for site in [FrameSite::Same, FrameSite::Cross] {
        let (tab, server) = frame_tab(f, site).await;
        let action = json!({"method": "click", "selector": selector});
        let seen = snapshot(f, &tab, "/element", &action).await;
        assert!(!seen.target_found, "{site:?}");
        assert_eq!(seen.page.element, None, "{site:?}");
        let host = host_on(f, tab.backend(), Accepts::WithoutElement);
        let id = grant_from(f, &host, &seen, "/element", &action).await;
        let change = between(server);
        if !change.is_empty() {
            read_on(&tab, &change).await;
            wait_on(&tab, "el('#checkout').dataset.loads === '2'").await;
        }
        let answer = act(f, &host, "/element", &id, &action).await;
        let outcome = Outcome::of(&host, tab, &id, answer).await;
        assert_eq!(
            outcome.answer["error"]["code"], "BACKEND_FAILED",
            "{site:?}"
        );
        assert_eq!(outcome.answer["error"]["message"], KEPT);
        assert_eq!(
            outcome.reason,
            format!(
                "backend refused before dispatching: `{selector}` {FRAME_REFUSAL}; nothing was \
                 dispatched; abandon: restored"
            ),
            "{site:?}"
        );
        assert_eq!(outcome.state, GrantState::Active, "{site:?}");
        assert_eq!(
            read_on(&outcome.tab, "document.body.dataset.frameClicks").await,
            json!("0"),
            "{site:?}"
        );
        assert_eq!(attack_clicks(&outcome.tab).await.0, 0, "{site:?}");
    }
}

async fn a_cross_site_frame_is_out_of_process(f: &Fixture) {
    // The configuration the cross-site cases rely on: Chromium, launched
    // with the backend's flags, gives the frame from another host a
    // target of its own (an out-of-process iframe), and none to the frame
    // from another port of the page's host.
    let (same, same_server) = frame_tab(f, FrameSite::Same).await;
    let (cross, cross_server) = frame_tab(f, FrameSite::Cross).await;
    let (browser, mut handler) = chromiumoxide::Browser::connect(f.chromium.devtools_url())
        .await
        .unwrap();
    let events = tokio::spawn(async move { while handler.next().await.is_some() {} });
    let targets = browser.execute(GetTargetsParams::default()).await.unwrap();
    events.abort();
    let frames: Vec<&str> = targets
        .result
        .target_infos
        .iter()
        .filter(|t| t.r#type == "iframe")
        .map(|t| t.url.as_str())
        .collect();
    assert!(
        frames.contains(&format!("http://{cross_server}/frame-pay5").as_str()),
        "{frames:?}"
    );
    assert!(
        !frames.contains(&format!("http://{same_server}/frame-pay5").as_str()),
        "{frames:?}"
    );
    drop((same, cross));
}

async fn a_frame_element_that_never_changes_gets_no_click(f: &Fixture) {
    frame_gets_no_click(f, "iframe#checkout", |_| String::new()).await;
}

async fn a_frame_navigated_between_approval_and_act_gets_no_click(f: &Fixture) {
    frame_gets_no_click(f, "iframe#checkout", |server| {
        format!("(el('#checkout').src = 'http://{server}/frame-pay5000', 0)")
    })
    .await;
}

async fn an_element_whose_centre_shows_a_frame_gets_no_click(f: &Fixture) {
    frame_gets_no_click(f, "#wrapper", |server| {
        format!("(el('#checkout').src = 'http://{server}/frame-pay5000', 0)")
    })
    .await;
}

// 2. Generated content and icon buttons.

/// Approves a click on `selector` in a fresh `/binding` tab after
/// `before` ran, checks the bound accessible name, runs `change`, calls
/// Act.
async fn click_on_binding(
    f: &Fixture,
    selector: &str,
    name: &str,
    before: &str,
    change: &str,
) -> Outcome {
    let tab = front_tab(f, "/binding").await;
    if !before.is_empty() {
        read_on(&tab, before).await;
    }
    let action = json!({"method": "click", "selector": selector});
    let seen = snapshot(f, &tab, "/binding", &action).await;
    assert!(seen.target_found, "{selector} was not found");
    let element = seen.page.element.clone().unwrap();
    assert_eq!(element.role(), "button");
    assert_eq!(element.name(), name);
    let host = host_on(f, tab.backend(), Accepts::ElementBound);
    let id = grant_from(f, &host, &seen, "/binding", &action).await;
    if !change.is_empty() {
        read_on(&tab, change).await;
    }
    let answer = act(f, &host, "/binding", &id, &action).await;
    Outcome::of(&host, tab, &id, answer).await
}

async fn a_button_labelled_by_generated_content_is_clicked_once(f: &Fixture) {
    click_on_binding(f, "#css-label", "Pay $5", "", "")
        .await
        .assert_clicked_once("css-label")
        .await;
}

async fn an_icon_font_button_is_clicked_once(f: &Fixture) {
    click_on_binding(f, "#icon-font", "Star this page", "", "")
        .await
        .assert_clicked_once("icon-font")
        .await;
}

async fn an_svg_icon_button_is_clicked_once(f: &Fixture) {
    click_on_binding(f, "#svg-icon", "Close", "", "")
        .await
        .assert_clicked_once("svg-icon")
        .await;
}

async fn generated_text_changed_after_approval_is_stale(f: &Fixture) {
    // The accessible name Chromium computes includes CSS content, so the
    // new label is a new identity.
    let outcome = click_on_binding(
        f,
        "#css-label",
        "Pay $5",
        "",
        "(document.head.insertAdjacentHTML('beforeend', \
         '<style>#css-label::before { content: \"Pay $5000\"; }</style>'), 0)",
    )
    .await;
    outcome
        .assert_refused(
            "APPROVAL_STALE",
            STALE_KEPT,
            "backend refused before dispatching: `#css-label` is not the element approved (its \
             accessible name changed); nothing was dispatched; abandon: restored",
            true,
        )
        .await;
}

async fn observation_names_icon_buttons_as_the_tree_does(f: &Fixture) {
    let tab = front_tab(f, "/binding").await;
    let text = tab
        .backend()
        .observe()
        .await
        .unwrap()
        .render(SnapshotLimits::default())
        .text;
    for shown in [
        "- button \"Pay $5\" [ref=",
        "- button \"Star this page\" [ref=",
        "- button \"Close\" [ref=",
    ] {
        assert!(text.contains(shown), "{shown} not in:\n{text}");
    }
}

// 3. What is drawn is what is outlined.

/// Each disguise over a visible "Cancel order" decoy, and why the strict
/// rule refuses it.
const DISGUISES: &[(&str, &str)] = &[
    (
        "#buy-filter",
        "is not visible (its effective opacity, with `filter: opacity()`, is below 0.1)",
    ),
    (
        "#buy-filter-ancestor",
        "is not visible (its effective opacity, with `filter: opacity()`, is below 0.1)",
    ),
    (
        "#buy-clipped",
        "is clipped so that only 1 of 9 points of its box are drawn, fewer than 5",
    ),
    (
        "#buy-masked",
        "is masked (`mask`), which may hide it from view and which the browser's hit test does \
         not see",
    ),
    ("#buy-invisible", "is not visible"),
    ("#buy-no-content", "is not visible"),
    ("#buy-skipped", "is not visible"),
];

async fn disguised_targets_get_no_click(f: &Fixture) {
    for (selector, why) in DISGUISES {
        let tab = front_tab(f, "/binding").await;
        let action = json!({"method": "click", "selector": selector});
        // The approver is not shown the decoy's pixels as the target.
        let seen = snapshot(f, &tab, "/binding", &action).await;
        assert!(!seen.target_found, "{selector}");
        assert_eq!(seen.page.element, None, "{selector}");
        // A grant on the document alone: the backend's own rule refuses.
        let host = host_on(f, tab.backend(), Accepts::WithoutElement);
        let id = grant_from(f, &host, &seen, "/binding", &action).await;
        let answer = act(f, &host, "/binding", &id, &action).await;
        Outcome::of(&host, tab, &id, answer)
            .await
            .assert_refused(
                "BACKEND_FAILED",
                KEPT,
                &format!(
                    "backend refused before dispatching: `{selector}` {why}; nothing was \
                     dispatched; abandon: restored"
                ),
                true,
            )
            .await;
    }
}

async fn the_same_targets_shown_are_clicked_once(f: &Fixture) {
    // The control: each disguise undone on the same element, which is then
    // on top of its decoy and drawn.
    let undo = [
        ("#buy-filter", "el('#buy-filter').style.filter = 'none'"),
        (
            "#buy-filter-ancestor",
            "el('#faint-filter').style.filter = 'none'",
        ),
        ("#buy-clipped", "el('#buy-clipped').style.clipPath = 'none'"),
        ("#buy-masked", "el('#buy-masked').style.maskImage = 'none'"),
        (
            "#buy-invisible",
            "el('#buy-invisible').style.visibility = 'visible'",
        ),
        (
            "#buy-no-content",
            "(el('#buy-no-content').style.contentVisibility = 'visible', \
             el('#buy-no-content').style.background = 'white')",
        ),
        (
            "#buy-skipped",
            "el('#skipped').style.contentVisibility = 'visible'",
        ),
    ];
    assert_eq!(undo.len(), DISGUISES.len());
    for (selector, shown) in undo {
        let id = selector.trim_start_matches('#');
        click_on_binding(f, selector, "Buy 100 units", &format!("({shown}, 0)"), "")
            .await
            .assert_clicked_once(id)
            .await;
    }
}

async fn a_clip_that_leaves_most_of_the_box_is_clicked_once(f: &Fixture) {
    // 6 of 9 points drawn: at or above the stated share.
    let tab = front_tab(f, "/binding").await;
    read_on(
        &tab,
        "(el('#buy-clipped').style.clipPath = 'inset(0 0 40% 0)', 0)",
    )
    .await;
    let action = json!({"method": "click", "selector": "#buy-clipped"});
    let seen = snapshot(f, &tab, "/binding", &action).await;
    assert!(seen.target_found);
    let host = host_on(f, tab.backend(), Accepts::ElementBound);
    let id = grant_from(f, &host, &seen, "/binding", &action).await;
    let answer = act(f, &host, "/binding", &id, &action).await;
    Outcome::of(&host, tab, &id, answer)
        .await
        .assert_clicked_once("buy-clipped")
        .await;
}

// 4. Targets of ordinary pages.

/// The snapshot of a click on `selector` in a fresh `/binding` tab, the
/// grant issued from it, and Act's outcome.
async fn click_as_seen(f: &Fixture, selector: &str) -> (PageSnapshot, Outcome) {
    let tab = front_tab(f, "/binding").await;
    let action = json!({"method": "click", "selector": selector});
    let seen = snapshot(f, &tab, "/binding", &action).await;
    let host = host_on(f, tab.backend(), Accepts::ElementBound);
    let id = grant_from(f, &host, &seen, "/binding", &action).await;
    let answer = act(f, &host, "/binding", &id, &action).await;
    (seen.clone(), Outcome::of(&host, tab, &id, answer).await)
}

async fn a_link_wrapped_onto_two_lines_is_clicked_once(f: &Fixture) {
    // The link really is on two lines, and its bounding box's centre is
    // the paragraph's, not the link's.
    let tab = front_tab(f, "/binding").await;
    let lines = read_on(
        &tab,
        "(() => { const a = el('#wrapped'); const r = a.getBoundingClientRect(); \
           const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2); \
           return [a.getClientRects().length, hit.id]; })()",
    )
    .await;
    assert_eq!(lines, json!([2, "wrap-box"]));
    drop(tab);
    let (seen, outcome) = click_as_seen(f, "#wrapped").await;
    assert!(seen.target_found);
    let element = seen.page.element.clone().unwrap();
    assert_eq!(
        (element.role(), element.name()),
        ("link", "the terms of this service")
    );
    outcome.assert_clicked_once("wrapped").await;
}

/// A snapshot of a click on `selector` in a fresh `/binding` tab that
/// binds no element: no grant can be issued from it, and nothing was
/// clicked.
async fn binds_nothing(f: &Fixture, selector: &str) {
    let tab = front_tab(f, "/binding").await;
    let action = json!({"method": "click", "selector": selector});
    let seen = snapshot(f, &tab, "/binding", &action).await;
    assert!(!seen.target_found, "{selector} was found");
    assert!(seen.page.element.is_none());
    let host = host_on(f, tab.backend(), Accepts::ElementBound);
    let refused = issue_page_grant(&host.context, &seen, &f.url("/binding"), &action, TTL).await;
    assert!(
        matches!(refused, Err(GrantError::NoElementBound { .. })),
        "{:?}",
        refused.map(|grant| grant.id)
    );
    assert_eq!(attack_clicks(&tab).await, (0, json!({})));
}

async fn a_covered_wrapped_link_gets_no_click(f: &Fixture) {
    binds_nothing(f, "#wrapped-covered").await;
}

async fn a_button_below_the_fold_is_approved_and_clicked_once(f: &Fixture) {
    let (seen, outcome) = click_as_seen(f, "#far-below").await;
    assert!(seen.target_found, "a button at 2,500 px was not found");
    assert_eq!(seen.page.element.as_ref().unwrap().name(), "Load more");
    outcome.assert_clicked_once("far-below").await;
}

async fn a_target_replaced_when_scrolled_to_binds_nothing(f: &Fixture) {
    binds_nothing(f, "#far-swapped").await;
}

// 5. The easy path is the safe path.

async fn the_documented_path_binds_the_element(f: &Fixture) {
    // The guide's "Drive a live browser" steps, as written: the snapshot
    // from `Tab::approval`, handed as it is to `issue_page_grant`.
    let tab = front_tab(f, "/element").await;
    let host = host_on(f, tab.backend(), Accepts::ElementBound);
    let url = f
        .policy
        .authorize_destination(&f.url("/element"))
        .await
        .unwrap();
    let proposed = json!({"method": "click", "selector": "#pay"});
    let action = f.policy.authorize_action(&proposed).unwrap();
    let snapshot = tab.approval(&url, &action).await.unwrap();
    let grant = issue_page_grant(&host.context, &snapshot, url.as_str(), &proposed, TTL)
        .await
        .unwrap();
    let element = grant
        .element
        .as_ref()
        .expect("the documented path binds the element");
    assert_eq!(element.name(), "Pay $5");
    // Relabelled after approval: refused, nothing clicked.
    read_on(&tab, "(el('#pay').textContent = 'Pay $5000', 0)").await;
    let answer = act(f, &host, "/element", &grant.id, &proposed).await;
    assert_eq!(answer["error"]["code"], "APPROVAL_STALE", "{answer}");
    assert_eq!(attack_clicks(&tab).await.0, 0);
}

async fn a_page_without_an_element_needs_the_hosts_opt_in(f: &Fixture) {
    let tab = front_tab(f, "/element").await;
    let action = json!({"method": "click", "selector": "#pay"});
    // The observation binds the document only: refused at issue, naming
    // the switch.
    let strict = host_on(f, tab.backend(), Accepts::ElementBound);
    let page = tab.observe().await.unwrap().binding();
    let refused = issue_page_grant(&strict.context, &page, &f.url("/element"), &action, TTL)
        .await
        .unwrap_err();
    assert!(matches!(refused, GrantError::NoElementBound { .. }));
    assert!(
        refused
            .to_string()
            .contains("opt in with `accept_grants_without_element`"),
        "{refused}"
    );
    // Opted in, the grant is issued and clicks; a grant bound so, used in
    // a context that did not opt in, is refused with the switch named.
    let lenient = host_on(f, tab.backend(), Accepts::WithoutElement);
    let old = issue_page_grant(&lenient.context, &page, &f.url("/element"), &action, TTL)
        .await
        .unwrap();
    strict.approvals.issue(old.clone()).await.unwrap();
    let answer = act(f, &strict, "/element", &old.id, &action).await;
    assert_eq!(answer["error"]["code"], "APPROVAL_REQUIRED", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`accept_grants_without_element`"),
        "{answer}"
    );
    assert_eq!(attack_clicks(&tab).await.0, 0);
    let answer = act(f, &lenient, "/element", &old.id, &action).await;
    assert_eq!(answer["status"], "ok", "{answer}");
    assert_eq!(attack_clicks(&tab).await, (1, json!({"pay": 1})));
}

// 5. The submission.

/// Approves `action` on a fresh `/form` tab (after `before` ran, as a
/// person's earlier approved steps would), runs `change`, calls Act, and
/// returns its answer and what the server received.
async fn submit(f: &Fixture, action: &Value, before: &str, change: &str) -> (Value, Vec<String>) {
    support::take_submissions();
    let tab = front_tab(f, "/form").await;
    if !before.is_empty() {
        read_on(&tab, before).await;
    }
    let seen = snapshot(f, &tab, "/form", action).await;
    assert!(seen.target_found, "{action}");
    assert!(
        seen.page.element.as_ref().unwrap().submission().is_some(),
        "{action} binds no submission"
    );
    let host = host_on(f, tab.backend(), Accepts::ElementBound);
    let id = grant_from(f, &host, &seen, "/form", action).await;
    if !change.is_empty() {
        read_on(&tab, change).await;
    }
    let answer = act(f, &host, "/form", &id, action).await;
    if answer["status"] == "ok" {
        wait_on(&tab, "el('#submitted') !== null").await;
    }
    let grant = host.approvals.get(&id).await.unwrap().unwrap();
    if answer["status"] != "ok" {
        assert_eq!(grant.state, GrantState::Active, "{answer}");
    }
    (answer, support::take_submissions())
}

const PAY: fn() -> Value = || json!({"method": "click", "selector": "#pay"});

/// Refused as stale with the form data named, nothing submitted.
fn assert_form_stale(answer: &Value, submitted: &[String]) {
    assert_eq!(answer["error"]["code"], "APPROVAL_STALE", "{answer}");
    assert_eq!(answer["error"]["message"], STALE_KEPT);
    assert!(submitted.is_empty(), "{submitted:?}");
}

async fn an_unchanged_form_submits_the_approved_data_once(f: &Fixture) {
    let (answer, submitted) = submit(f, &PAY(), "", "").await;
    assert_eq!(answer["status"], "ok", "{answer}");
    assert_eq!(submitted, ["amount=5&note=&pin=&go=pay"]);
}

async fn a_hidden_input_changed_after_approval_submits_nothing(f: &Fixture) {
    let (answer, submitted) = submit(
        f,
        &PAY(),
        "",
        "(document.querySelector('[name=amount]').value = '5000', 0)",
    )
    .await;
    assert_form_stale(&answer, &submitted);
}

async fn a_field_edited_by_the_page_submits_nothing(f: &Fixture) {
    let (answer, submitted) = submit(f, &PAY(), "", "(el('#note').value = 'to attacker', 0)").await;
    assert_form_stale(&answer, &submitted);
}

async fn a_control_added_to_the_form_submits_nothing(f: &Fixture) {
    let (answer, submitted) = submit(
        f,
        &PAY(),
        "",
        "(el('#checkout').insertAdjacentHTML('afterbegin', \
         '<input type=hidden name=to value=attacker>'), 0)",
    )
    .await;
    assert_form_stale(&answer, &submitted);
}

async fn a_control_removed_from_the_form_submits_nothing(f: &Fixture) {
    let (answer, submitted) = submit(f, &PAY(), "", "(el('#note').remove(), 0)").await;
    assert_form_stale(&answer, &submitted);
}

async fn an_enter_in_a_field_binds_the_implicit_submission(f: &Fixture) {
    let enter = json!({"method": "press", "selector": "#note", "arguments": {"key": "Enter"}});
    let (answer, submitted) = submit(
        f,
        &enter,
        "",
        "(document.querySelector('[name=amount]').value = '5000', 0)",
    )
    .await;
    assert_form_stale(&answer, &submitted);
    // Unchanged, Enter submits once, through the default button.
    let (answer, submitted) = submit(f, &enter, "", "").await;
    assert_eq!(answer["status"], "ok", "{answer}");
    assert_eq!(submitted, ["amount=5&note=&pin=&go=pay"]);
}

async fn a_fill_approved_before_the_submit_is_submitted_once(f: &Fixture) {
    // The person approved the fill, it was performed, then they approved
    // the submit: what they approved includes the text filled.
    support::take_submissions();
    let tab = front_tab(f, "/form").await;
    let host = host_on(f, tab.backend(), Accepts::ElementBound);
    let fill = json!({"method": "fill", "selector": "#note", "arguments": {"text": "for Ann"}});
    let seen = snapshot(f, &tab, "/form", &fill).await;
    // A fill submits nothing, so it binds no form data.
    assert_eq!(seen.page.element.as_ref().unwrap().submission(), None);
    let id = grant_from(f, &host, &seen, "/form", &fill).await;
    let answer = act(f, &host, "/form", &id, &fill).await;
    assert_eq!(answer["status"], "ok", "{answer}");
    let seen = snapshot(f, &tab, "/form", &PAY()).await;
    let bound = seen.page.element.as_ref().unwrap().submission().unwrap();
    assert_eq!(bound.fields()[1], FormField::text("note", "for Ann"));
    let id = grant_from(f, &host, &seen, "/form", &PAY()).await;
    let answer = act(f, &host, "/form", &id, &PAY()).await;
    assert_eq!(answer["status"], "ok", "{answer}");
    wait_on(&tab, "el('#submitted') !== null").await;
    assert_eq!(
        support::take_submissions(),
        ["amount=5&note=for+Ann&pin=&go=pay"]
    );
}

async fn a_password_is_bound_by_hash_and_a_file_by_name(f: &Fixture) {
    let tab = front_tab(f, "/form").await;
    read_on(
        &tab,
        "(el('#pin').value = '1234', el('#gift').checked = true, \
         el('#checkout').insertAdjacentHTML('beforeend', '<input type=file name=receipt>'), 0)",
    )
    .await;
    let seen = snapshot(f, &tab, "/form", &PAY()).await;
    let fields = seen
        .page
        .element
        .as_ref()
        .unwrap()
        .submission()
        .unwrap()
        .fields()
        .to_vec();
    let names: Vec<&str> = fields.iter().map(FormField::name).collect();
    assert_eq!(names, ["amount", "note", "pin", "gift", "go", "receipt"]);
    let pin = &fields[2];
    assert_eq!(pin.kind(), FormFieldKind::Password);
    assert_eq!(pin.value().len(), 64);
    assert!(!pin.value().contains("1234"));
    assert_eq!(fields[3], FormField::text("gift", "yes"));
    assert_eq!(fields[5], FormField::file("receipt", "", 0));
    // The same password reads the same; another one differs.
    let again = snapshot(f, &tab, "/form", &PAY()).await;
    assert_eq!(
        again
            .page
            .element
            .as_ref()
            .unwrap()
            .submission()
            .unwrap()
            .fields()[2],
        *pin
    );
    read_on(&tab, "(el('#pin').value = '9999', 0)").await;
    let changed = snapshot(f, &tab, "/form", &PAY()).await;
    assert_ne!(
        changed
            .page
            .element
            .as_ref()
            .unwrap()
            .submission()
            .unwrap()
            .fields()[2],
        *pin
    );
}

async fn a_form_past_the_bound_is_refused_by_name(f: &Fixture) {
    // Approved while the form was small; the page then adds 70 fields.
    support::take_submissions();
    let tab = front_tab(f, "/form").await;
    let host = host_on(f, tab.backend(), Accepts::ElementBound);
    let seen = snapshot(f, &tab, "/form", &PAY()).await;
    let id = grant_from(f, &host, &seen, "/form", &PAY()).await;
    read_on(
        &tab,
        "(el('#checkout').insertAdjacentHTML('afterbegin', \
         Array.from({length: 70}, (_, i) => `<input type=hidden name=f${i} value=x>`).join('')), 0)",
    )
    .await;
    let answer = act(f, &host, "/form", &id, &PAY()).await;
    let outcome = Outcome::of(&host, tab, &id, answer).await;
    assert_eq!(outcome.answer["error"]["code"], "APPROVAL_STALE");
    assert_eq!(
        outcome.reason,
        "backend refused before dispatching: `#pay` is not the element approved (the form \
         `checkout` cannot be bound: it would submit 74 fields, more than 64); nothing was \
         dispatched; abandon: restored"
    );
    assert_eq!(outcome.state, GrantState::Active);
    // And a snapshot of it now finds no target to bind.
    let now = snapshot(f, &outcome.tab, "/form", &PAY()).await;
    assert!(!now.target_found);
    assert!(support::take_submissions().is_empty());
}
