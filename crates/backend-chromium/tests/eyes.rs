//! The agent's eyes in real headless Chromium: `navigate` and its
//! outcomes, `observe` and its refs, and refs as action targets. One
//! browser behind the egress guard serves every case, as in `live.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use countersign_approval_core::{
    Backend, BackendError, ElementRef, Navigation, ObservedPage, SnapshotLimits,
};
use countersign_backend_chromium::Tab;
use serde_json::{Value, json};
use support::{Case, Fixture};

/// The tests' navigation timeout: short, so the hanging server's case
/// ends quickly.
const NAVIGATION_TIMEOUT: Duration = Duration::from_secs(3);

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|f| Box::pin($name(f))) as Case)),*]
    };
}

#[test]
fn navigate_and_observe_in_headless_chromium() {
    support::run_cases(
        support::options().navigation_timeout(NAVIGATION_TIMEOUT),
        &cases![
            navigate_lands_and_answers_the_page,
            navigate_follows_a_redirect_and_answers_where_it_landed,
            a_redirect_to_a_refused_host_fails_on_the_refused_url,
            a_page_the_browser_cannot_load_answers_its_failure,
            a_server_that_never_answers_times_out_and_the_tab_stays,
            dialogs_while_loading_are_dismissed,
            a_beforeunload_prompt_is_dismissed_and_the_old_page_kept,
            a_download_is_refused_and_the_old_page_kept,
            a_window_the_page_opens_is_closed,
            a_target_blank_link_opens_no_tab,
            observe_shows_roles_names_states_and_refs,
            the_same_document_keeps_its_refs_and_a_new_one_gets_new_ones,
            a_page_that_overrides_dom_functions_is_observed_truly,
            act_by_ref_clicks_the_right_element_once,
            a_ref_after_navigation_is_stale,
            a_ref_from_another_tab_is_stale,
            a_ref_of_a_removed_node_is_stale,
            a_ref_never_handed_out_or_malformed_is_refused,
            a_snapshot_by_ref_outlines_and_binds_the_element,
            a_model_navigates_observes_and_acts_by_ref_once,
        ],
    );
}

/// `navigate` to `path` on the test site, through the tab's backend.
async fn navigate(f: &Fixture, path: &str) -> Result<Navigation, BackendError> {
    navigate_on(f, &f.tab, path).await
}

async fn navigate_on(f: &Fixture, tab: &Tab, path: &str) -> Result<Navigation, BackendError> {
    let url = f.policy.authorize_destination(&f.url(path)).await.unwrap();
    tab.backend().navigate(&url).await
}

/// The URL the tab's main frame shows now.
async fn shown_url(f: &Fixture) -> String {
    f.read("location.href").await.as_str().unwrap().to_owned()
}

async fn observe(f: &Fixture) -> ObservedPage {
    f.tab.backend().observe().await.unwrap()
}

/// The ref of the first node with `role` and `name`.
fn ref_of(page: &ObservedPage, role: &str, name: &str) -> ElementRef {
    page.nodes
        .iter()
        .find(|n| n.role == role && n.name == name)
        .and_then(|n| n.element_ref)
        .unwrap_or_else(|| panic!("no {role} {name:?} with a ref in {page:#?}"))
}

fn click(selector: &str) -> Value {
    json!({"method": "click", "selector": selector})
}

/// Performs `action` on `path` as an unbound grant would.
async fn perform(f: &Fixture, path: &str, action: Value) -> Result<(), BackendError> {
    let request = f.request(path, action).await;
    f.tab.backend().perform(&request).await
}

/// How many trusted clicks `/eyes` counted on the element `id`.
async fn eyes_clicks(f: &Fixture, id: &str) -> u64 {
    let count = f
        .read(&format!(
            "document.documentElement.dataset['clicks{id}'] || '0'"
        ))
        .await;
    count.as_str().unwrap().parse().unwrap()
}

async fn navigate_lands_and_answers_the_page(f: &Fixture) {
    f.load("/").await;
    let landed = navigate(f, "/other").await.unwrap();
    assert_eq!(landed.url, f.url("/other"));
    assert_eq!(landed.failure, None);
    let current = f.tab.backend().current_page().await.unwrap().unwrap();
    assert_eq!(landed.page, current);
    assert_eq!(f.text("#other").await, "another page");
}

async fn navigate_follows_a_redirect_and_answers_where_it_landed(f: &Fixture) {
    let landed = navigate(f, "/redirect").await.unwrap();
    assert_eq!(landed.url, f.url("/landed"));
    assert_eq!(landed.failure, None);
}

async fn a_redirect_to_a_refused_host_fails_on_the_refused_url(f: &Fixture) {
    f.load("/").await;
    f.guard.take_refusals();
    let landed = navigate(f, "/to-refused").await.unwrap();
    // The guard refused the redirect's host with its own 403 page, which
    // Chromium shows as the page at that URL: no failure, and the URL the
    // caller judges is the refused one.
    assert_eq!(landed.url, "http://refused.example/landing");
    assert_eq!(landed.failure, None);
    let refusals = f.guard.take_refusals();
    assert!(
        refusals.iter().any(|r| r.host() == "refused.example"),
        "{refusals:?}"
    );
    let refused = f
        .policy
        .authorize_destination(&landed.url)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "NOT_AUTHORIZED");
    assert_eq!(
        f.tab.backend().current_page().await.unwrap().unwrap(),
        landed.page
    );
    // Nothing of a page the policy refuses is shown.
    let hidden = f.tab.backend().observe().await.unwrap_err();
    assert!(!hidden.may_have_acted());
    assert!(hidden.is_page_not_allowed());
    assert!(
        hidden.message().starts_with(
            "the page is at `http://refused.example/landing`, which the policy refuses"
        ),
        "{}",
        hidden.message()
    );
}

async fn a_page_the_browser_cannot_load_answers_its_failure(f: &Fixture) {
    f.load("/").await;
    let failed = navigate(f, "/unsafe-redirect").await.unwrap();
    // Chromium's error page (`chrome-error://chromewebdata/`) stands for
    // the address it could not load, which is the answer's URL.
    assert_eq!(failed.url, f.url("/unsafe-redirect"));
    assert_eq!(failed.failure.as_deref(), Some("net::ERR_UNSAFE_REDIRECT"));
    assert_eq!(shown_url(f).await, "chrome-error://chromewebdata/");
    // Nothing of an error page is shown.
    let hidden = f.tab.backend().observe().await.unwrap_err();
    assert!(hidden.is_page_not_allowed());
    assert!(
        hidden.message().starts_with(
            "the page is at `chrome-error://chromewebdata/`, which the policy refuses"
        ),
        "{}",
        hidden.message()
    );
    assert_eq!(
        f.tab.backend().current_page().await.unwrap().unwrap(),
        failed.page
    );
}

async fn a_server_that_never_answers_times_out_and_the_tab_stays(f: &Fixture) {
    f.load("/other").await;
    let started = std::time::Instant::now();
    let timed_out = navigate(f, "/hang").await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(
        timed_out.message(),
        "the page did not finish loading within 3 s; loading was stopped"
    );
    assert!(
        took < NAVIGATION_TIMEOUT + Duration::from_secs(2),
        "{took:?}"
    );
    // Stopped: the old page stays, and the tab navigates again.
    assert_eq!(shown_url(f).await, f.url("/other"));
    let landed = navigate(f, "/").await.unwrap();
    assert_eq!(landed.url, f.url("/"));
}

async fn dialogs_while_loading_are_dismissed(f: &Fixture) {
    let landed = navigate(f, "/alert").await.unwrap();
    assert_eq!(landed.url, f.url("/alert"));
    assert_eq!(landed.failure, None);
    assert_eq!(f.text("#after").await, "after the dialogs");
    let seen = observe(f).await;
    assert_eq!(seen.title, "Alert");
}

async fn a_beforeunload_prompt_is_dismissed_and_the_old_page_kept(f: &Fixture) {
    // A tab of its own: the page can never be left by navigating.
    let leave = f
        .policy
        .authorize_destination(&f.url("/leave"))
        .await
        .unwrap();
    let tab = f.session.open(&leave).await.unwrap();
    let backend = tab.backend();
    // Chromium asks only on a page the user has interacted with.
    let touch = f.request("/leave", click("#touch")).await;
    backend.perform(&touch).await.unwrap();
    let before = backend.current_page().await.unwrap().unwrap();
    let kept = navigate_on(f, &tab, "/other").await.unwrap_err();
    assert_eq!(
        kept.message(),
        "the page asked to confirm leaving it and the prompt was dismissed; the tab still shows the previous page"
    );
    let shown = read_on(&tab, "location.href").await;
    assert_eq!(shown, f.url("/leave"));
    assert_eq!(backend.current_page().await.unwrap().unwrap(), before);
}

async fn read_on(tab: &Tab, expression: &str) -> Value {
    tab.inspect(&format!("function () {{ return {expression}; }}"))
        .await
        .unwrap()
}

async fn a_download_is_refused_and_the_old_page_kept(f: &Fixture) {
    f.load("/other").await;
    let before = f.tab.backend().current_page().await.unwrap().unwrap();
    let refused = navigate(f, "/download").await.unwrap_err();
    assert_eq!(
        refused.message(),
        "the address started a download, which is refused; the tab still shows the previous page"
    );
    assert_eq!(shown_url(f).await, f.url("/other"));
    assert_eq!(
        f.tab.backend().current_page().await.unwrap().unwrap(),
        before
    );
}

/// Waits until `expression` is true in the tab's page.
async fn wait_for(f: &Fixture, expression: &str) {
    for _ in 0..150 {
        if f.read(expression).await == true {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("`{expression}` never became true");
}

async fn a_window_the_page_opens_is_closed(f: &Fixture) {
    navigate(f, "/popup").await.unwrap();
    perform(f, "/popup", click("#open")).await.unwrap();
    wait_for(f, "document.documentElement.dataset.closed === 'true'").await;
    // The answers go on about this tab.
    let seen = observe(f).await;
    assert_eq!(seen.url, f.url("/popup"));
}

async fn a_target_blank_link_opens_no_tab(f: &Fixture) {
    navigate(f, "/popup").await.unwrap();
    perform(f, "/popup", click("#blank")).await.unwrap();
    // An open `/alive` tab would say so every 20 ms: after a settling
    // pause, nothing more is heard.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let heard = || f.read("Number(document.documentElement.dataset.heard || 0)");
    let settled = heard().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(heard().await, settled);
    assert_eq!(shown_url(f).await, f.url("/popup"));
}

async fn observe_shows_roles_names_states_and_refs(f: &Fixture) {
    navigate(f, "/eyes").await.unwrap();
    let seen = observe(f).await;
    assert_eq!(seen.url, f.url("/eyes"));
    assert_eq!(seen.title, "Eyes");
    assert_eq!(
        seen.page,
        f.tab.backend().current_page().await.unwrap().unwrap()
    );
    let page = ref_of(&seen, "heading", "Cart").page();
    let r = |n: u64| page.element(n);
    let text = seen.render(SnapshotLimits::default()).text;
    assert_eq!(
        text,
        format!(
            "- main [ref={}]\n\
             \x20 - heading \"Cart\" [ref={}] [level=1]\n\
             \x20 - button \"Pay $5\" [ref={}]\n\
             \x20 - button \"Cancel\" [ref={}] [disabled]\n\
             \x20 - link \"Other page\" [ref={}]\n\
             \x20 - checkbox \"Gift wrap\" [ref={}] [checked]\n\
             \x20 - textbox \"Note\" [ref={}] [required] [value=\"hi\"]\n\
             \x20 - StaticText \"Total $5\"\n",
            r(1),
            r(2),
            r(3),
            r(4),
            r(5),
            r(6),
            r(7),
        ),
        "{text}"
    );
    // A link's address, as the page writes it, is kept beside it.
    let link = seen.nodes.iter().find(|n| n.role == "link").unwrap();
    let others: Vec<_> = seen.nodes.iter().filter(|n| n.url.is_some()).collect();
    assert_eq!(others.len(), 1, "only the link has an address");
    assert!(
        link.url
            .as_deref()
            .is_some_and(|url| url.ends_with("/other")),
        "{:?}",
        link.url
    );
}

async fn the_same_document_keeps_its_refs_and_a_new_one_gets_new_ones(f: &Fixture) {
    navigate(f, "/eyes").await.unwrap();
    let first = observe(f).await;
    let second = observe(f).await;
    assert_eq!(first.nodes, second.nodes);
    // A change to the page keeps the refs of the nodes that stay.
    f.read("(document.querySelector('#cancel').remove(), 0)")
        .await;
    let third = observe(f).await;
    assert_eq!(
        ref_of(&third, "button", "Pay $5"),
        ref_of(&first, "button", "Pay $5")
    );
    assert!(!third.nodes.iter().any(|n| n.name == "Cancel"));
    // A reload is a new document: a new page of refs.
    navigate(f, "/eyes").await.unwrap();
    let reloaded = observe(f).await;
    let (old, new) = (
        ref_of(&first, "button", "Pay $5"),
        ref_of(&reloaded, "button", "Pay $5"),
    );
    assert_ne!(old.page(), new.page());
    assert_eq!(old.element(), new.element());
}

async fn a_page_that_overrides_dom_functions_is_observed_truly(f: &Fixture) {
    navigate(f, "/liar").await.unwrap();
    let seen = observe(f).await;
    assert_eq!(seen.title, "Liar");
    let text = seen.render(SnapshotLimits::default()).text;
    let pay = ref_of(&seen, "button", "Pay $5");
    let other = ref_of(&seen, "button", "Other");
    assert_eq!(
        text,
        format!("- button \"Pay $5\" [ref={pay}]\n- button \"Other\" [ref={other}]\n"),
        "{text}"
    );
    // Acting by ref reaches the true element too.
    perform(f, "/liar", click(&pay.to_selector()))
        .await
        .unwrap();
    assert_eq!(
        f.read("document.documentElement.getAttribute('data-clicked')")
            .await,
        "pay"
    );
}

async fn act_by_ref_clicks_the_right_element_once(f: &Fixture) {
    navigate(f, "/eyes").await.unwrap();
    let seen = observe(f).await;
    let pay = ref_of(&seen, "button", "Pay $5");
    let page = f.tab.backend().current_page().await.unwrap().unwrap();
    let request = f.request("/eyes", click(&pay.to_selector())).await;
    f.tab
        .backend()
        .perform_on_page(&request, &page)
        .await
        .unwrap();
    assert_eq!(eyes_clicks(f, "pay").await, 1);
    assert_eq!(eyes_clicks(f, "cancel").await, 0);
    assert_eq!(eyes_clicks(f, "gift").await, 0);
    // A disabled element named by ref passes no more than by CSS.
    let cancel = ref_of(&seen, "button", "Cancel");
    let refused = perform(f, "/eyes", click(&cancel.to_selector()))
        .await
        .unwrap_err();
    assert!(!refused.may_have_acted());
    assert_eq!(
        refused.message(),
        format!(
            "`{}` is disabled; nothing was dispatched",
            cancel.to_selector()
        )
    );
    assert_eq!(eyes_clicks(f, "pay").await, 1);
}

/// A stale-target refusal: nothing dispatched, the target changed (Act
/// gives the grant back and answers `APPROVAL_STALE`).
fn assert_stale(error: &BackendError, message: &str) {
    assert!(!error.may_have_acted(), "{error:?}");
    assert!(error.target_changed(), "{error:?}");
    assert_eq!(error.message(), message);
}

async fn a_ref_after_navigation_is_stale(f: &Fixture) {
    navigate(f, "/eyes").await.unwrap();
    let pay = ref_of(&observe(f).await, "button", "Pay $5");
    // The same URL again: a new document, whose `#pay` was never observed.
    navigate(f, "/eyes").await.unwrap();
    let stale = perform(f, "/eyes", click(&pay.to_selector()))
        .await
        .unwrap_err();
    assert_stale(&stale, "this ref belongs to an earlier page; observe again");
    // Still stale once the new document is observed.
    observe(f).await;
    let stale = perform(f, "/eyes", click(&pay.to_selector()))
        .await
        .unwrap_err();
    assert_stale(&stale, "this ref belongs to an earlier page; observe again");
    assert_eq!(eyes_clicks(f, "pay").await, 0);
}

async fn a_ref_from_another_tab_is_stale(f: &Fixture) {
    navigate(f, "/eyes").await.unwrap();
    observe(f).await;
    let home = f
        .policy
        .authorize_destination(&f.url("/eyes"))
        .await
        .unwrap();
    let other = f.session.open(&home).await.unwrap();
    let theirs = other.backend().observe().await.unwrap();
    let pay = ref_of(&theirs, "button", "Pay $5");
    let stale = perform(f, "/eyes", click(&pay.to_selector()))
        .await
        .unwrap_err();
    assert_stale(&stale, "this ref belongs to an earlier page; observe again");
    assert_eq!(eyes_clicks(f, "pay").await, 0);
    drop(other);
}

async fn a_ref_of_a_removed_node_is_stale(f: &Fixture) {
    navigate(f, "/eyes").await.unwrap();
    let seen = observe(f).await;
    let pay = ref_of(&seen, "button", "Pay $5");
    // Replaced by a twin under the same id: the ref names the old node.
    f.read("(el('#pay').replaceWith(el('#pay').cloneNode(true)), 0)")
        .await;
    let stale = perform(f, "/eyes", click(&pay.to_selector()))
        .await
        .unwrap_err();
    assert_stale(
        &stale,
        &format!("`{pay}` is no longer in the page; observe again"),
    );
    assert_eq!(eyes_clicks(f, "pay").await, 0);
    // Observed again, the twin has a ref of its own, which acts.
    let twin = ref_of(&observe(f).await, "button", "Pay $5");
    assert_ne!(twin, pay);
    perform(f, "/eyes", click(&twin.to_selector()))
        .await
        .unwrap();
    assert_eq!(eyes_clicks(f, "pay").await, 1);
}

async fn a_ref_never_handed_out_or_malformed_is_refused(f: &Fixture) {
    navigate(f, "/eyes").await.unwrap();
    let seen = observe(f).await;
    let page = ref_of(&seen, "button", "Pay $5").page();
    let unknown = page.element(9999);
    let stale = perform(f, "/eyes", click(&unknown.to_selector()))
        .await
        .unwrap_err();
    assert_stale(
        &stale,
        &format!("`{unknown}` was never shown on this page; observe again"),
    );
    let malformed = perform(f, "/eyes", click("aria-ref=pay"))
        .await
        .unwrap_err();
    assert!(!malformed.may_have_acted());
    assert!(!malformed.target_changed());
    assert_eq!(
        malformed.message(),
        "`aria-ref=pay` does not name a ref: a ref is `p` and a page number, then `e` and an \
         element number, as observed (e.g. `p3e12`); nothing was dispatched"
    );
    assert_eq!(eyes_clicks(f, "pay").await, 0);
}

async fn a_snapshot_by_ref_outlines_and_binds_the_element(f: &Fixture) {
    navigate(f, "/eyes").await.unwrap();
    let pay = ref_of(&observe(f).await, "button", "Pay $5");
    let url = f
        .policy
        .authorize_destination(&f.url("/eyes"))
        .await
        .unwrap();
    let (action, snapshot) = f.snapshot_of(&url, &click(&pay.to_selector())).await;
    assert!(snapshot.target_found);
    let element = snapshot.page.element.clone().unwrap();
    assert_eq!(element.role(), "button");
    assert_eq!(element.name(), "Pay $5");
    assert_eq!(element.tag(), "button");
    // The bound element is acted on, once.
    let request = f.request("/eyes", click(&pay.to_selector())).await;
    f.tab
        .backend()
        .perform_on_page(&request, &snapshot.page)
        .await
        .unwrap();
    assert_eq!(eyes_clicks(f, "pay").await, 1);

    // On the next document the approver is shown nothing for that ref:
    // the snapshot refuses it as stale, so no proposal is made from it.
    navigate(f, "/eyes").await.unwrap();
    let stale = f.tab.backend().snapshot(&url, &action).await.unwrap_err();
    assert_stale(&stale, "this ref belongs to an earlier page; observe again");
}

/// The whole path through the tools a model calls: `browser_navigate`,
/// `browser_observe`, `browser_propose` by ref, a person's approval, then
/// `browser_act` by ref, once.
async fn a_model_navigates_observes_and_acts_by_ref_once(f: &Fixture) {
    use std::sync::Arc;

    use countersign_act_tool::{Context, Toolset};
    use countersign_approval_core::{
        ActorId, ApproverId, Clock, ProposalId, ProposalStore, RunId, SystemClock,
    };
    use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};

    let store = Arc::new(InMemoryApprovalStore::new());
    let context = Context::builder()
        .actor_id(ActorId::new("eyes-actor").unwrap())
        .run_id(RunId::new("eyes-run").unwrap())
        .backend(f.tab.backend())
        .source_policy(f.policy.clone())
        .operation_store(InMemoryOperationStore::new())
        .approval_store(store.clone())
        .proposal_store(store.clone())
        .build()
        .unwrap();
    let tools = Toolset::new(context)
        .with_browse()
        .with_act()
        .with_propose();

    let url = f.url("/eyes");
    let landed = tools
        .call("browser_navigate", &json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(landed["url"], url, "{landed}");
    let seen = tools.call("browser_observe", &json!({})).await.unwrap();
    let snapshot = seen["page_content"]["snapshot"].as_str().unwrap();
    let line = snapshot
        .lines()
        .find(|l| l.contains("button \"Pay $5\""))
        .unwrap();
    let pay = line
        .split("[ref=")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();

    let call = json!({"url": url, "method": "click", "ref": pay});
    let proposed = tools.call("browser_propose", &call).await.unwrap();
    let id = ProposalId::parse(proposed["proposal_id"].as_str().unwrap()).unwrap();
    let stored = store.get_proposal(&id).await.unwrap().unwrap();
    // The approver's snapshot bound the ref's element.
    let element = stored
        .proposal
        .snapshot
        .as_ref()
        .and_then(|snapshot| snapshot.page.element.clone());
    assert_eq!(
        element.map(|e| e.name().to_owned()).as_deref(),
        Some("Pay $5")
    );
    let grant = stored
        .proposal
        .grant(
            Duration::from_secs(60),
            SystemClock.now(),
            Some(ApproverId::new("carol").unwrap()),
        )
        .unwrap();
    store
        .approve_proposal(&id, grant.clone(), SystemClock.now())
        .await
        .unwrap();

    let mut act = call.clone();
    act["approval_id"] = json!(grant.id.as_str());
    let done = tools.call("browser_act", &act).await.unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    let again = tools.call("browser_act", &act).await.unwrap();
    assert_ne!(again["status"], "ok", "{again}");
    assert_eq!(eyes_clicks(f, "pay").await, 1);
    assert_eq!(eyes_clicks(f, "cancel").await, 0);
}
