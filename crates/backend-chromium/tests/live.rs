//! The backend in real headless Chromium against a page this test serves on
//! 127.0.0.2. One browser serves every case (Chromium starts slowly); each
//! case loads its page afresh, so every counter starts at zero.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use countersign_act_tool::{issue_grant, issue_page_grant};
use countersign_approval_core::policy::AuthorizedUrl;
use countersign_approval_core::{
    ActionRequest, ApprovalId, ApprovalStore, Backend, BackendError, GrantState, PageBinding,
};
use countersign_backend_chromium::Tab;
use serde_json::{Value, json};
use support::host::{
    Accepts, Host, KEPT, Outcome, STALE_KEPT, TTL, USED, front_tab, host, host_on, read_on,
};
use support::{Case, Fixture};

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|f| Box::pin($name(f))) as Case)),*]
    };
}

#[test]
fn live_backend_in_headless_chromium() {
    support::run_cases(
        support::options(),
        &cases![
            observation_names_session_tab_url_and_revision,
            click_clicks_once,
            dblclick_double_clicks,
            hover_moves_the_pointer_over,
            focus_focuses,
            fill_replaces_the_text,
            fill_with_empty_text_clears,
            type_types_each_character,
            press_sends_the_key,
            select_chooses_the_option_by_keyboard,
            check_and_uncheck_toggle_the_box,
            check_on_a_checked_box_dispatches_nothing,
            two_matching_elements_dispatch_nothing,
            hidden_disabled_or_covered_elements_dispatch_nothing,
            fill_on_a_read_only_field_dispatches_nothing,
            a_navigation_since_approval_is_refused,
            a_redirect_that_lands_elsewhere_is_refused,
            a_changed_revision_is_refused,
            a_revision_change_after_the_consume_gives_the_grant_back,
            an_observation_from_another_tab_or_session_is_refused,
            loopback_other_than_the_site_stays_refused,
            the_browsers_own_traffic_passes_the_guard,
            act_performs_a_page_bound_grant_once,
            a_navigation_between_approval_and_act_is_stale_and_burns_nothing,
            a_grant_from_another_tab_or_session_is_stale,
            an_unbound_grant_needs_the_hosts_opt_in,
            sixteen_concurrent_acts_click_once,
            a_transparent_target_is_refused_and_the_grant_kept,
            a_target_painted_over_is_refused_and_the_grant_kept,
            a_swap_on_our_scroll_is_refused_and_the_grant_kept,
            a_swap_on_our_pointer_move_is_refused_before_the_press,
            a_swap_on_pointerover_is_refused_before_the_press,
            focus_moved_away_on_focus_is_refused_before_any_key,
            a_target_below_the_fold_is_scrolled_to_and_clicked_once,
            a_relabelled_target_is_stale_and_the_grant_kept,
            a_target_replaced_under_the_same_id_is_stale,
            a_rewritten_body_is_stale,
            a_document_rewritten_in_place_is_stale,
            a_relabel_on_our_pointer_move_is_refused_before_the_press,
            a_ticking_clock_and_an_unrelated_rerender_still_click_once,
        ],
    );
}

/// Performs `action` on `/`; every refusal the cases expect comes before
/// any input, so each must say that nothing was dispatched.
async fn perform(f: &Fixture, action: Value) -> Result<(), String> {
    let request = f.request("/", action).await;
    f.tab.backend().perform(&request).await.map_err(|e| {
        assert!(!e.may_have_acted(), "said it may have acted: {e}");
        e.message().to_owned()
    })
}

async fn observation_names_session_tab_url_and_revision(f: &Fixture) {
    f.load("/").await;
    let first = f.tab.observe().await.unwrap();
    assert_eq!(first.session(), f.session.id());
    assert_eq!(first.target(), f.tab.target());
    assert_eq!(first.url().as_str(), f.url("/"));
    assert_eq!(first.revision(), f.tab.observe().await.unwrap().revision());

    // A reload is a new document: a new revision, the same URL.
    f.load("/").await;
    let reloaded = f.tab.observe().await.unwrap();
    assert_eq!(reloaded.url(), first.url());
    assert_ne!(reloaded.revision(), first.revision());

    // A same-document change keeps the revision and changes the URL.
    f.read("(history.pushState(null, '', '/pushed'), 0)").await;
    let pushed = f.tab.observe().await.unwrap();
    assert_eq!(pushed.revision(), reloaded.revision());
    assert_eq!(pushed.url().as_str(), f.url("/pushed"));
}

async fn click_clicks_once(f: &Fixture) {
    f.load("/").await;
    perform(f, json!({"method": "click", "selector": "#counter"}))
        .await
        .unwrap();
    assert_eq!(f.text("#clicks").await, "1");
}

async fn dblclick_double_clicks(f: &Fixture) {
    f.load("/").await;
    perform(f, json!({"method": "dblclick", "selector": "#dbl"}))
        .await
        .unwrap();
    assert_eq!(f.text("#dblclicks").await, "1");
}

async fn hover_moves_the_pointer_over(f: &Fixture) {
    f.load("/").await;
    perform(f, json!({"method": "hover", "selector": "#hover"}))
        .await
        .unwrap();
    assert_eq!(f.text("#hovered").await, "yes");
}

async fn focus_focuses(f: &Fixture) {
    f.load("/").await;
    perform(f, json!({"method": "focus", "selector": "#focus-me"}))
        .await
        .unwrap();
    assert_eq!(f.text("#focused").await, "yes");
    assert_eq!(f.read("document.activeElement.id").await, "focus-me");
}

async fn fill_replaces_the_text(f: &Fixture) {
    f.load("/").await;
    let action =
        json!({"method": "fill", "selector": "#name", "arguments": {"text": "new text ✓"}});
    perform(f, action).await.unwrap();
    assert_eq!(f.read("el('#name').value").await, "new text ✓");
}

async fn fill_with_empty_text_clears(f: &Fixture) {
    f.load("/").await;
    let action = json!({"method": "fill", "selector": "#name", "arguments": {"text": ""}});
    perform(f, action).await.unwrap();
    assert_eq!(f.read("el('#name').value").await, "");
}

async fn type_types_each_character(f: &Fixture) {
    f.load("/").await;
    let action = json!({"method": "type", "selector": "#typed", "arguments": {"text": "Hi 5!"}});
    perform(f, action).await.unwrap();
    assert_eq!(f.read("el('#typed').value").await, "Hi 5!");
}

async fn press_sends_the_key(f: &Fixture) {
    f.load("/").await;
    let action =
        json!({"method": "press", "selector": "#keys-field", "arguments": {"key": "Enter"}});
    perform(f, action).await.unwrap();
    assert_eq!(f.text("#keys").await, "Enter;");
}

async fn select_chooses_the_option_by_keyboard(f: &Fixture) {
    f.load("/").await;
    let action = json!({"method": "select", "selector": "#choice", "arguments": {"value": "c"}});
    perform(f, action).await.unwrap();
    assert_eq!(f.read("el('#choice').value").await, "c");
    assert_eq!(f.text("#changes").await, "1");

    // A disabled option or an unknown value: nothing dispatched.
    f.load("/").await;
    for value in ["b", "zz"] {
        let action =
            json!({"method": "select", "selector": "#choice", "arguments": {"value": value}});
        let refused = perform(f, action).await.unwrap_err();
        assert!(refused.ends_with("nothing was dispatched"), "{refused}");
    }
    assert_eq!(f.read("el('#choice').value").await, "a");
    assert_eq!(f.trusted_events().await, 0);
}

async fn check_and_uncheck_toggle_the_box(f: &Fixture) {
    f.load("/").await;
    perform(f, json!({"method": "check", "selector": "#agree"}))
        .await
        .unwrap();
    assert_eq!(f.read("el('#agree').checked").await, true);
    perform(f, json!({"method": "uncheck", "selector": "#already"}))
        .await
        .unwrap();
    assert_eq!(f.read("el('#already').checked").await, false);
}

async fn check_on_a_checked_box_dispatches_nothing(f: &Fixture) {
    f.load("/").await;
    perform(f, json!({"method": "check", "selector": "#already"}))
        .await
        .unwrap();
    assert_eq!(f.read("el('#already').checked").await, true);
    assert_eq!(f.trusted_events().await, 0);
}

async fn two_matching_elements_dispatch_nothing(f: &Fixture) {
    f.load("/").await;
    let refused = perform(f, json!({"method": "click", "selector": ".twin"}))
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        "`.twin` matches 2 elements, not exactly one; nothing was dispatched"
    );
    let refused = perform(f, json!({"method": "click", "selector": "#nope"}))
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        "`#nope` matches no element; nothing was dispatched"
    );
    let refused = perform(f, json!({"method": "click", "selector": "#["}))
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        "`#[` is not a valid css selector; nothing was dispatched"
    );
    assert_eq!(f.text("#refused").await, "0");
    assert_eq!(f.trusted_events().await, 0);
}

async fn hidden_disabled_or_covered_elements_dispatch_nothing(f: &Fixture) {
    f.load("/").await;
    for (selector, why) in [
        ("#hidden", "is not visible"),
        ("#invisible", "is not visible"),
        ("#disabled", "is disabled"),
        ("#covered", "is covered by another element at its centre"),
    ] {
        let refused = perform(f, json!({"method": "click", "selector": selector}))
            .await
            .unwrap_err();
        assert_eq!(
            refused,
            format!("`{selector}` {why}; nothing was dispatched")
        );
    }
    assert_eq!(f.text("#refused").await, "0");
    assert_eq!(f.trusted_events().await, 0);
}

async fn fill_on_a_read_only_field_dispatches_nothing(f: &Fixture) {
    f.load("/").await;
    let action = json!({"method": "fill", "selector": "#readonly", "arguments": {"text": "x"}});
    let refused = perform(f, action).await.unwrap_err();
    assert_eq!(
        refused,
        "`#readonly` is not an editable field; nothing was dispatched"
    );
    let action = json!({"method": "fill", "selector": "#counter", "arguments": {"text": "x"}});
    assert!(perform(f, action).await.is_err());
    assert_eq!(f.read("el('#readonly').value").await, "read only");
    assert_eq!(f.trusted_events().await, 0);
}

async fn a_navigation_since_approval_is_refused(f: &Fixture) {
    f.load("/").await;
    let request = f
        .request("/", json!({"method": "click", "selector": "#counter"}))
        .await;
    f.load("/other").await;
    let refused = f.tab.backend().perform(&request).await.unwrap_err();
    assert!(!refused.may_have_acted());
    assert_eq!(
        refused.message(),
        format!(
            "the page is at `{}`, not at the approved `{}`; nothing was dispatched",
            f.url("/other"),
            f.url("/")
        )
    );
}

async fn a_redirect_that_lands_elsewhere_is_refused(f: &Fixture) {
    // The host approved `/redirect`; the browser landed on `/landed`, which
    // has a `#counter` too.
    f.load("/redirect").await;
    let request = f
        .request(
            "/redirect",
            json!({"method": "click", "selector": "#counter"}),
        )
        .await;
    let refused = f.tab.backend().perform(&request).await.unwrap_err();
    assert!(!refused.may_have_acted());
    assert_eq!(
        refused.message(),
        format!(
            "the page is at `{}`, not at the approved `{}`; nothing was dispatched",
            f.url("/landed"),
            f.url("/redirect")
        )
    );
}

async fn a_changed_revision_is_refused(f: &Fixture) {
    f.load("/").await;
    let approved = f.tab.observe().await.unwrap();
    f.load("/").await; // same URL, new document
    let request = f
        .request("/", json!({"method": "click", "selector": "#counter"}))
        .await;
    let refused = f
        .tab
        .backend()
        .perform_on_page(&request, &approved.binding())
        .await
        .unwrap_err();
    assert!(!refused.may_have_acted());
    assert_eq!(
        refused.message(),
        "the page has loaded a new document since approval; nothing was dispatched"
    );
    assert_eq!(f.text("#clicks").await, "0");
    // The current revision is accepted.
    let current = f.tab.observe().await.unwrap();
    f.tab
        .backend()
        .perform_on_page(&request, &current.binding())
        .await
        .unwrap();
    assert_eq!(f.text("#clicks").await, "1");
}

/// This tab's backend, reloading the page (a new document at the same URL)
/// after Act has checked the page and consumed the grant, before the
/// backend's own re-check: the window the re-check guards.
struct ReloadsBeforeActing {
    tab: Tab,
    url: AuthorizedUrl,
}

#[async_trait::async_trait]
impl Backend for ReloadsBeforeActing {
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError> {
        self.tab.backend().perform(request).await
    }

    async fn current_page(&self) -> Result<Option<PageBinding>, BackendError> {
        self.tab.backend().current_page().await
    }

    async fn perform_on_page(
        &self,
        request: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        self.tab.navigate(&self.url).await.unwrap();
        self.tab.backend().perform_on_page(request, page).await
    }
}

async fn a_revision_change_after_the_consume_gives_the_grant_back(f: &Fixture) {
    f.load("/").await;
    let url = f.policy.authorize_destination(&f.url("/")).await.unwrap();
    let reloads = ReloadsBeforeActing {
        tab: f.tab.clone(),
        url,
    };
    let host = host_on(f, reloads, Accepts::ElementBound);
    let id = approve_here(f, &host).await;
    let answer = host.act.execute_json(&click_call(f, &id)).await;
    assert_eq!(answer["error"]["code"], "BACKEND_FAILED", "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "backend refused before acting; nothing was performed; the approval is still usable"
    );
    assert_eq!(f.text("#clicks").await, "0");
    assert_eq!(f.trusted_events().await, 0);
    let records = host
        .context
        .operation_store()
        .records_for_run(host.context.run_id())
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0].reason,
        "backend refused before dispatching: the page has loaded a new document since \
         approval; nothing was dispatched; abandon: restored"
    );
    // The grant was given back ...
    let id = ApprovalId::parse(&id).unwrap();
    let grant = host.approvals.get(&id).await.unwrap().unwrap();
    assert_eq!(grant.state, GrantState::Active);
    // ... and names a document that is gone: a later call is stale at
    // Act's own page check and consumes nothing.
    let again = host.act.execute_json(&click_call(f, id.as_str())).await;
    assert_eq!(again["error"]["code"], "APPROVAL_STALE", "{again}");
    let grant = host.approvals.get(&id).await.unwrap().unwrap();
    assert_eq!(grant.state, GrantState::Active);
    assert_eq!(f.trusted_events().await, 0);
}

async fn an_observation_from_another_tab_or_session_is_refused(f: &Fixture) {
    f.load("/").await;
    let home = f.policy.authorize_destination(&f.url("/")).await.unwrap();
    let request = f
        .request("/", json!({"method": "click", "selector": "#counter"}))
        .await;

    let same_session_tab = f.session.open(&home).await.unwrap();
    let other_tab = same_session_tab.observe().await.unwrap();
    let refused = f
        .tab
        .backend()
        .perform_on_page(&request, &other_tab.binding())
        .await
        .unwrap_err();
    assert!(!refused.may_have_acted());
    assert_eq!(
        refused.message(),
        "the approval was given in another tab; nothing was dispatched"
    );

    let other_session = f.chromium.new_session(f.policy.clone()).await.unwrap();
    let elsewhere = other_session
        .open(&home)
        .await
        .unwrap()
        .observe()
        .await
        .unwrap();
    assert_ne!(elsewhere.session(), f.session.id());
    let refused = f
        .tab
        .backend()
        .perform_on_page(&request, &elsewhere.binding())
        .await
        .unwrap_err();
    assert!(!refused.may_have_acted());
    assert_eq!(
        refused.message(),
        "the approval was given in another browser session; nothing was dispatched"
    );

    // The other tabs' grants do not reach this tab either way.
    assert_eq!(f.text("#clicks").await, "0");
    assert_eq!(f.trusted_events().await, 0);
    let other_backend = same_session_tab.backend();
    let own = f.tab.observe().await.unwrap();
    let refused = other_backend
        .perform_on_page(&request, &own.binding())
        .await
        .unwrap_err();
    assert!(!refused.may_have_acted());
    assert_eq!(
        refused.message(),
        "the approval was given in another tab; nothing was dispatched"
    );
}

async fn loopback_other_than_the_site_stays_refused(f: &Fixture) {
    let refused = f
        .policy
        .authorize_destination(&format!("http://127.0.0.1:{}/", f.site.port()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "NOT_AUTHORIZED");
}

async fn the_browsers_own_traffic_passes_the_guard(f: &Fixture) {
    f.load("/").await;
    f.guard.take_refusals();
    // A page script asks for 127.0.0.1, which the policy refuses: the
    // request goes to the guard (no implicit loopback bypass) and fails.
    let port = f.site.port();
    let fetched = f
        .read(&format!(
            "fetch('http://127.0.0.1:{port}/').then(() => 'loaded', () => 'failed')"
        ))
        .await;
    assert_eq!(fetched, "failed");
    let refusals: Vec<_> = f
        .guard
        .take_refusals()
        .into_iter()
        .filter(|r| r.host() == "127.0.0.1")
        .collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].port(), Some(port));
}

const CLICK: fn() -> Value = || json!({"method": "click", "selector": "#counter"});

fn click_call(f: &Fixture, approval_id: &str) -> Value {
    json!({
        "url": f.url("/"), "approval_id": approval_id,
        "method": "click", "selector": "#counter",
    })
}

/// A grant for `CLICK` on the page the fixture's tab shows, approved the
/// documented way: from the tab's snapshot of the action.
async fn approve_here(f: &Fixture, host: &Host) -> String {
    approve_on(f, host, &f.tab).await
}

async fn approve_on(f: &Fixture, host: &Host, tab: &Tab) -> String {
    let url = f.policy.authorize_destination(&f.url("/")).await.unwrap();
    let action = f.policy.authorize_action(&CLICK()).unwrap();
    let snapshot = tab.approval(&url, &action).await.unwrap();
    assert!(snapshot.target_found);
    let grant = issue_page_grant(&host.context, &snapshot, &f.url("/"), &CLICK(), TTL)
        .await
        .unwrap();
    assert!(grant.element.is_some());
    grant.id.as_str().to_owned()
}

async fn act_performs_a_page_bound_grant_once(f: &Fixture) {
    f.load("/").await;
    let host = host(f, Accepts::ElementBound);
    let id = approve_here(f, &host).await;
    let first = host.act.execute_json(&click_call(f, &id)).await;
    assert_eq!(first["status"], "ok", "{first}");
    let replay = host.act.execute_json(&click_call(f, &id)).await;
    assert_eq!(replay["error"]["code"], "APPROVAL_STALE");
    assert_eq!(f.text("#clicks").await, "1");
}

async fn a_navigation_between_approval_and_act_is_stale_and_burns_nothing(f: &Fixture) {
    f.load("/").await;
    let host = host(f, Accepts::ElementBound);
    let id = approve_here(f, &host).await;
    f.load("/").await; // same URL, a new document
    let answer = host.act.execute_json(&click_call(f, &id)).await;
    assert_eq!(answer["error"]["code"], "APPROVAL_STALE", "{answer}");
    assert_eq!(f.trusted_events().await, 0);
    let grant = host
        .approvals
        .get(&ApprovalId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(grant.state, GrantState::Active);
    // The old document never comes back (every load has a new revision),
    // so the grant stays unused until it expires; a new approval works.
    let fresh = approve_here(f, &host).await;
    let answer = host.act.execute_json(&click_call(f, &fresh)).await;
    assert_eq!(answer["status"], "ok", "{answer}");
    assert_eq!(f.text("#clicks").await, "1");
}

async fn a_grant_from_another_tab_or_session_is_stale(f: &Fixture) {
    f.load("/").await;
    let host = host(f, Accepts::ElementBound);
    let home = f.policy.authorize_destination(&f.url("/")).await.unwrap();
    let other_tab = f.session.open(&home).await.unwrap();
    let other_session = f.chromium.new_session(f.policy.clone()).await.unwrap();
    let elsewhere = other_session.open(&home).await.unwrap();
    for tab in [&other_tab, &elsewhere] {
        let id = approve_on(f, &host, tab).await;
        let answer = host.act.execute_json(&click_call(f, &id)).await;
        assert_eq!(answer["error"]["code"], "APPROVAL_STALE", "{answer}");
    }
    assert_eq!(f.trusted_events().await, 0);
}

async fn an_unbound_grant_needs_the_hosts_opt_in(f: &Fixture) {
    f.load("/").await;
    let strict = host(f, Accepts::ElementBound);
    let grant = issue_grant(&strict.context, &f.url("/"), &CLICK(), TTL)
        .await
        .unwrap();
    let answer = strict
        .act
        .execute_json(&click_call(f, grant.id.as_str()))
        .await;
    assert_eq!(answer["error"]["code"], "APPROVAL_REQUIRED", "{answer}");
    assert_eq!(f.trusted_events().await, 0);

    let lenient = host(f, Accepts::Unbound);
    let grant = issue_grant(&lenient.context, &f.url("/"), &CLICK(), TTL)
        .await
        .unwrap();
    let answer = lenient
        .act
        .execute_json(&click_call(f, grant.id.as_str()))
        .await;
    assert_eq!(answer["status"], "ok", "{answer}");
    assert_eq!(f.text("#clicks").await, "1");
}

async fn sixteen_concurrent_acts_click_once(f: &Fixture) {
    f.load("/").await;
    let host = host(f, Accepts::ElementBound);
    let id = approve_here(f, &host).await;
    let call = click_call(f, &id);
    let calls = (0..16).map(|_| {
        let act = host.act.clone();
        let call = call.clone();
        tokio::spawn(async move { act.execute_json(&call).await })
    });
    let mut ok = 0;
    let mut stale = 0;
    for answer in futures_util::future::join_all(calls).await {
        let answer = answer.unwrap();
        match answer["status"].as_str() {
            Some("ok") => ok += 1,
            _ if answer["error"]["code"] == "APPROVAL_STALE" => stale += 1,
            _ => panic!("unexpected answer {answer}"),
        }
    }
    assert_eq!((ok, stale), (1, 15));
    assert_eq!(f.text("#clicks").await, "1");
}

/// A page-bound grant for `action` on `/attacks`, as the host would
/// approve it on the page `tab` shows now.
async fn approve_attack(f: &Fixture, host: &Host, tab: &Tab, action: &Value) -> ApprovalId {
    let page = tab.observe().await.unwrap().binding();
    let grant = issue_page_grant(&host.context, &page, &f.url("/attacks"), action, TTL)
        .await
        .unwrap();
    grant.id
}

/// The Act call for `action` on `/attacks` with the approval `id`.
fn attack_call(f: &Fixture, id: &ApprovalId, action: &Value) -> Value {
    let mut call = action.clone();
    call["url"] = Value::from(f.url("/attacks"));
    call["approval_id"] = Value::from(id.as_str());
    call
}

/// `/attacks` in a new tab, which opens in front: the page is visible, so
/// animation frames run and the page's scroll and input handlers run as
/// they would in a person's browser (a tab behind others gets no frames).
async fn attack_tab(f: &Fixture) -> Tab {
    front_tab(f, "/attacks").await
}

/// Approves `action` on a fresh `/attacks` tab and calls Act with it.
async fn attack(f: &Fixture, action: &Value) -> Outcome {
    let tab = attack_tab(f).await;
    // The document alone: these cases test the backend's own checks,
    // which hold whether or not an element is bound.
    let host = host_on(f, tab.backend(), Accepts::WithoutElement);
    let id = approve_attack(f, &host, &tab, action).await;
    let answer = host.act.execute_json(&attack_call(f, &id, action)).await;
    Outcome::of(&host, tab, &id, answer).await
}

/// Refused before any input: the grant is given back, no click landed.
async fn refused_and_kept(f: &Fixture, selector: &str, why: &str) {
    let attacked = attack(f, &json!({"method": "click", "selector": selector})).await;
    let reason = format!(
        "backend refused before dispatching: `{selector}` {why}; nothing was dispatched; \
         abandon: restored"
    );
    attacked
        .assert_refused("BACKEND_FAILED", KEPT, &reason, true)
        .await;
}

async fn a_transparent_target_is_refused_and_the_grant_kept(f: &Fixture) {
    // `#pay` (opacity 0) and `#pay-faint` (an ancestor at 0.05) lie over a
    // visible "Cancel order": a person sees, and approves, the other.
    for selector in ["#pay", "#pay-faint"] {
        refused_and_kept(
            f,
            selector,
            "is not visible (its effective opacity, with `filter: opacity()`, is below 0.1)",
        )
        .await;
    }
}

async fn a_target_painted_over_is_refused_and_the_grant_kept(f: &Fixture) {
    // "Keep my subscription" is drawn over `#cancel-sub` with
    // `pointer-events: none`: the pointer would pass through to the button.
    refused_and_kept(
        f,
        "#cancel-sub",
        "is painted over by another element at its centre",
    )
    .await;
    // A field under it is refused for keyboard input too.
    let tab = attack_tab(f).await;
    read_on(&tab, "(el('#keep-cover').style.top = '320px', 0)").await;
    let fill = json!({"method": "fill", "selector": "#search", "arguments": {"text": "x"}});
    let refused = tab
        .backend()
        .perform(&f.request("/attacks", fill).await)
        .await
        .unwrap_err();
    assert!(!refused.may_have_acted());
    assert_eq!(
        refused.message(),
        "`#search` is painted over by another element at its centre; nothing was dispatched"
    );
    assert_eq!(
        read_on(&tab, "[el('#search').value, el('#card').value]").await,
        json!(["", ""])
    );
}

async fn a_swap_on_our_scroll_is_refused_and_the_grant_kept(f: &Fixture) {
    // `#far-swap` is below the fold; the scroll our scrollIntoView causes
    // slides "Delete all" over it. The strict target waits two animation
    // frames after scrolling, so the page's scroll handler has run when
    // the hit test looks.
    refused_and_kept(
        f,
        "#far-swap",
        "is covered by another element at its centre",
    )
    .await;
}

/// A refusal after the pointer move: the move reached the page (its
/// handlers ran), so the backend says it may have acted and the grant
/// stays used; nothing was pressed.
async fn refused_after_the_move(f: &Fixture, selector: &str) {
    let attacked = attack(f, &json!({"method": "click", "selector": selector})).await;
    let reason = format!(
        "backend failed: `{selector}` is covered by another element at its centre; the \
         pointer was moved over it, nothing was pressed"
    );
    attacked
        .assert_refused("BACKEND_FAILED", USED, &reason, false)
        .await;
}

async fn a_swap_on_our_pointer_move_is_refused_before_the_press(f: &Fixture) {
    refused_after_the_move(f, "#save").await;
}

async fn a_swap_on_pointerover_is_refused_before_the_press(f: &Fixture) {
    refused_after_the_move(f, "#save-po").await;
}

async fn focus_moved_away_on_focus_is_refused_before_any_key(f: &Fixture) {
    let action =
        json!({"method": "fill", "selector": "#search", "arguments": {"text": "4111 1111"}});
    let attacked = attack(f, &action).await;
    let reason = "backend failed: `#search` lost focus while the action was being performed; \
                  input had begun, nothing more was dispatched";
    attacked
        .assert_refused("BACKEND_FAILED", USED, reason, false)
        .await;
    assert_eq!(
        read_on(&attacked.tab, "[el('#search').value, el('#card').value]").await,
        json!(["", ""])
    );
}

async fn a_target_below_the_fold_is_scrolled_to_and_clicked_once(f: &Fixture) {
    let attacked = attack(f, &json!({"method": "click", "selector": "#far"})).await;
    attacked.assert_clicked_once("far").await;
}

/// Approves a click on `selector` from a snapshot of a fresh `/element` tab
/// (so the grant binds the element's identity), runs `change` against the
/// page, then calls Act.
/// The approver's snapshot of `action` on `/element` in `tab`.
async fn element_snapshot(
    f: &Fixture,
    tab: &Tab,
    action: &Value,
) -> countersign_approval_core::PageSnapshot {
    let url = f
        .policy
        .authorize_destination(&f.url("/element"))
        .await
        .unwrap();
    tab.backend()
        .snapshot(&url, &f.policy.authorize_action(action).unwrap())
        .await
        .unwrap()
        .unwrap()
}

async fn act_on_element(f: &Fixture, selector: &str, change: &str) -> Outcome {
    let tab = front_tab(f, "/element").await;
    let host = host_on(f, tab.backend(), Accepts::ElementBound);
    let action = json!({"method": "click", "selector": selector});
    let snapshot = element_snapshot(f, &tab, &action).await;
    assert!(snapshot.target_found);
    let element = snapshot
        .page
        .element
        .clone()
        .expect("the snapshot binds the element");
    assert_eq!(element.tag(), "button");
    let grant = issue_page_grant(
        &host.context,
        &snapshot.page,
        &f.url("/element"),
        &action,
        TTL,
    )
    .await
    .unwrap();
    assert_eq!(grant.element.as_ref(), Some(&element));
    if !change.is_empty() {
        read_on(&tab, change).await;
    }
    let mut call = action.clone();
    call["url"] = Value::from(f.url("/element"));
    call["approval_id"] = Value::from(grant.id.as_str());
    let answer = host.act.execute_json(&call).await;
    Outcome::of(&host, tab, &grant.id, answer).await
}

/// Refused as stale before any input: `APPROVAL_STALE`, the grant given
/// back, no click.
async fn stale_before_input(f: &Fixture, change: &str, differ: &str) {
    let bound = act_on_element(f, "#pay", change).await;
    let reason = format!(
        "backend refused before dispatching: `#pay` is not the element approved (its {differ} \
         changed); nothing was dispatched; abandon: restored"
    );
    bound
        .assert_refused("APPROVAL_STALE", STALE_KEPT, &reason, true)
        .await;
}
async fn a_relabelled_target_is_stale_and_the_grant_kept(f: &Fixture) {
    stale_before_input(
        f,
        "(el('#pay').textContent = 'Pay $5000', 0)",
        "accessible name, text",
    )
    .await;
}

async fn a_target_replaced_under_the_same_id_is_stale(f: &Fixture) {
    // The same id and label, another element: a link elsewhere.
    stale_before_input(
        f,
        "(el('#pay').replaceWith(Object.assign(document.createElement('a'), \
         {id: 'pay', href: '/elsewhere', textContent: 'Pay $5', style: 'display: inline-block; \
         width: 200px; height: 40px; margin: 10px'})), 0)",
        "role, tag, attributes, form data",
    )
    .await;
}

async fn a_rewritten_body_is_stale(f: &Fixture) {
    // Same label, same place; the form now posts elsewhere.
    stale_before_input(
        f,
        "(document.body.innerHTML = '<form action=\"/steal\" method=\"post\"><button id=\"pay\" \
         style=\"width: 200px; height: 40px; margin: 10px\">Pay $5</button></form>\
         <output id=\"clicks\">0</output> <output id=\"log\">{}</output>', 0)",
        "attributes",
    )
    .await;
}

async fn a_document_rewritten_in_place_is_stale(f: &Fixture) {
    // `document.open()` and `write()` keep the loader id, so the page
    // check passes; the element's identity does not.
    let page = "<!doctype html><style>button { width: 200px; height: 40px; margin: 10px; }\
                </style><form action=\"/steal\" method=\"post\"><button id=\"pay\">Pay $5\
                </button></form><output id=\"clicks\">0</output> <output id=\"log\">{}</output>\
                <script>document.addEventListener(\"click\", (e) => { if (!e.isTrusted) return; \
                const c = document.getElementById(\"clicks\"); c.textContent = \
                String(Number(c.textContent) + 1); document.getElementById(\"log\").textContent = \
                JSON.stringify({[e.target.id]: 1}); }, true);</script>";
    let change = format!(
        "(document.open(), document.write({}), document.close(), 0)",
        serde_json::to_string(page).unwrap()
    );
    stale_before_input(f, &change, "attributes").await;
}

async fn a_relabel_on_our_pointer_move_is_refused_before_the_press(f: &Fixture) {
    let bound = act_on_element(f, "#pay-moved", "").await;
    let reason = "backend failed: `#pay-moved` is not the element approved (its accessible \
                  name, text changed); the pointer was moved over it, nothing was pressed";
    bound
        .assert_refused("BACKEND_FAILED", USED, reason, false)
        .await;
}

async fn a_ticking_clock_and_an_unrelated_rerender_still_click_once(f: &Fixture) {
    let bound = act_on_element(f, "#pay", "(document.dispatchEvent(new Event('tick')), 0)").await;
    bound.assert_clicked_once("pay").await;
    // The clock did tick meanwhile.
    assert_ne!(read_on(&bound.tab, "el('#clock').textContent").await, "0");
}
