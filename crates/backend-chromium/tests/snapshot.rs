//! Snapshots in real headless Chromium, against the snapshot test page this
//! test serves on 127.0.0.2. One browser serves every case; each case loads
//! its page afresh, so every counter starts at zero.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use countersign_act_tool::{Act, Context};
use countersign_approval_core::{
    ActorId, ApprovalId, ApprovalStore, Backend, Clock, ElementIdentity, FrameIdentity, GrantState,
    MAX_SCREENSHOT_BYTES, PageSnapshot, Proposal, RunId, SystemClock,
};
use countersign_backend_chromium::{OUTLINE_COLOUR, OUTLINE_WIDTH};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use image::{ImageFormat, Rgb, RgbImage};
use serde_json::{Value, json};
use support::{Case, Fixture};

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|f| Box::pin($name(f))) as Case)),*]
    };
}

#[test]
fn snapshots_in_headless_chromium() {
    support::run_cases(
        support::options(),
        &cases![
            one_visible_target_is_found_and_outlined,
            hidden_duplicated_missing_or_unsuitable_targets_are_not_found,
            an_element_partly_outside_the_viewport_is_outlined_along_the_edge,
            a_target_below_the_fold_is_scrolled_to_and_outlined,
            the_binding_is_the_current_page,
            a_snapshot_dispatches_nothing_and_changes_nothing,
            a_snapshot_for_another_url_is_refused,
            a_grant_from_the_snapshot_is_performed_once,
            a_grant_from_the_snapshot_is_stale_on_a_new_document,
            transparent_or_painted_over_targets_are_not_outlined,
            a_tab_behind_another_is_still_pictured,
        ],
    );
}

const MAGENTA: Rgb<u8> = Rgb(OUTLINE_COLOUR);
const TARGET_GREEN: Rgb<u8> = Rgb([0, 160, 0]);

/// A snapshot of `action` on `path` from the fixture's tab.
async fn snapshot(f: &Fixture, path: &str, action: Value) -> PageSnapshot {
    let url = f.policy.authorize_destination(&f.url(path)).await.unwrap();
    f.snapshot_of(&url, &action).await.1
}

fn click(selector: &str) -> Value {
    json!({"method": "click", "selector": selector})
}

/// The snapshot's screenshot, decoded; it must be there, a PNG, within
/// the size limit, and the size of the viewport in device pixels.
async fn picture(f: &Fixture, snapshot: &PageSnapshot) -> RgbImage {
    let png = snapshot.screenshot_png.as_ref().expect("a screenshot");
    assert!(png.len() <= MAX_SCREENSHOT_BYTES, "{} bytes", png.len());
    let picture = image::load_from_memory_with_format(png, ImageFormat::Png)
        .unwrap()
        .to_rgb8();
    let viewport = f
        .read("[innerWidth * devicePixelRatio, innerHeight * devicePixelRatio]")
        .await;
    let (w, h) = picture.dimensions();
    assert_eq!(json!([w, h]), viewport, "screenshot size");
    picture
}

/// `selector`'s border box in screenshot pixels: left, top, right, bottom.
async fn pixel_box(f: &Fixture, selector: &str) -> [u32; 4] {
    let selector = serde_json::to_string(selector).unwrap();
    let value = f
        .read(&format!(
            "(() => {{ const r = el({selector}).getBoundingClientRect(); const d = devicePixelRatio; \
             return [r.left * d, r.top * d, r.right * d, r.bottom * d].map(Math.round); }})()"
        ))
        .await;
    let sides: Vec<i64> = serde_json::from_value(value).unwrap();
    let clamp = |v: i64| u32::try_from(v.max(0)).unwrap();
    [
        clamp(sides[0]),
        clamp(sides[1]),
        clamp(sides[2]),
        clamp(sides[3]),
    ]
}

fn magenta_pixels(picture: &RgbImage) -> usize {
    picture.pixels().filter(|p| **p == MAGENTA).count()
}

/// Every event and DOM mutation the page counted since it loaded.
async fn page_counts(f: &Fixture) -> Value {
    serde_json::from_str(&f.text("#log").await).unwrap()
}

/// Loads `/snapshot` afresh and lets it settle: the browser gives a new
/// document's window focus on its own, some time after the load, so the
/// counts are taken once the page has focus (or after a second). That
/// focus is the only thing the page may have seen by then.
async fn load(f: &Fixture) -> Value {
    f.load("/snapshot").await;
    for _ in 0..50 {
        if f.read("document.hasFocus()").await == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let counts = page_counts(f).await;
    let settled = counts.as_object().unwrap();
    assert!(
        settled.keys().all(|k| k == "window focus"),
        "the page saw more than its load: {counts}"
    );
    counts
}

/// The page saw nothing since `loaded`: no event, no mutation, no scroll,
/// no focus.
async fn assert_untouched(f: &Fixture, loaded: &Value) {
    assert_eq!(&page_counts(f).await, loaded, "the page saw something");
    assert_eq!(f.read("[scrollX, scrollY]").await, json!([0, 0]));
    assert_eq!(
        f.read("document.activeElement === document.body").await,
        true
    );
    assert_eq!(f.read("el('#field').value").await, "untouched");
    assert_eq!(f.text("#clicks").await, "0");
}

async fn one_visible_target_is_found_and_outlined(f: &Fixture) {
    let loaded = load(f).await;
    let snapshot = snapshot(f, "/snapshot", click("#target")).await;
    assert!(snapshot.target_found);
    let picture = picture(f, &snapshot).await;
    let [left, top, right, bottom] = pixel_box(f, "#target").await;
    let (mid_x, mid_y) = ((left + right) / 2, (top + bottom) / 2);
    // The band: OUTLINE_WIDTH pixels just outside each side of the box.
    for d in 1..=OUTLINE_WIDTH {
        for (x, y) in [
            (left - d, mid_y),
            (right - 1 + d, mid_y),
            (mid_x, top - d),
            (mid_x, bottom - 1 + d),
            (left - d, top - d),
        ] {
            assert_eq!(picture.get_pixel(x, y), &MAGENTA, "({x}, {y})");
        }
    }
    // Inside the element: the page's own pixels, not the outline.
    for (x, y) in [
        (mid_x, mid_y),
        (left + 4, mid_y),
        (right - 5, mid_y),
        (left + 4, top + 4),
    ] {
        assert_ne!(picture.get_pixel(x, y), &MAGENTA, "({x}, {y})");
    }
    assert_eq!(picture.get_pixel(left + 4, top + 4), &TARGET_GREEN);
    // Just past the band, the page's white again.
    let past = OUTLINE_WIDTH + 2;
    assert_eq!(picture.get_pixel(left - past, mid_y), &Rgb([255, 255, 255]));
    // Nothing else is magenta: the band alone, as wide as drawn.
    let (w, h) = (
        right - left + 2 * OUTLINE_WIDTH,
        bottom - top + 2 * OUTLINE_WIDTH,
    );
    let band = (w * h - (right - left) * (bottom - top)) as usize;
    assert_eq!(magenta_pixels(&picture), band);

    // Another method on a suitable element is found as well.
    let fill = json!({"method": "fill", "selector": "#field", "arguments": {"text": "x"}});
    assert!(snapshot_of(f, fill).await.target_found);
    assert_untouched(f, &loaded).await;
}

async fn snapshot_of(f: &Fixture, action: Value) -> PageSnapshot {
    snapshot(f, "/snapshot", action).await
}

async fn hidden_duplicated_missing_or_unsuitable_targets_are_not_found(f: &Fixture) {
    let loaded = load(f).await;
    for action in [
        click("#hidden"),
        click(".dup"),
        click("#nope"),
        click("#["),
        click("#covered"),
        json!({"method": "fill", "selector": "#readonly", "arguments": {"text": "x"}}),
        json!({"method": "fill", "selector": "#target", "arguments": {"text": "x"}}),
        json!({"method": "select", "selector": "#target", "arguments": {"value": "x"}}),
        json!({"method": "press", "selector": "#field", "arguments": {"key": "Hyper"}}),
        json!({"method": "click", "selector": "#target", "arguments": {"button": "back"}}),
    ] {
        let snapshot = snapshot_of(f, action.clone()).await;
        assert!(!snapshot.target_found, "{action}");
        // Still a picture, without any outline.
        let picture = picture(f, &snapshot).await;
        assert_eq!(magenta_pixels(&picture), 0, "{action}");
    }
    assert_untouched(f, &loaded).await;
}

/// A target with no part in the viewport is scrolled to the viewport's
/// centre, as performing does, and outlined there; the scroll is all the
/// page sees.
async fn a_target_below_the_fold_is_scrolled_to_and_outlined(f: &Fixture) {
    let loaded = load(f).await;
    let snapshot = snapshot_of(f, click("#below")).await;
    assert!(snapshot.target_found);
    let picture = picture(f, &snapshot).await;
    let [left, top, right, bottom] = pixel_box(f, "#below").await;
    assert!(top > 0 && left > 0, "scrolled into view: {top}");
    // The band just outside each side, where the scrolled box is now (the
    // page ends just below the button, so the scroll stops with it at the
    // viewport's bottom edge: no band below it).
    let (mid_x, mid_y) = ((left + right) / 2, (top + bottom) / 2);
    for (x, y) in [(left - 2, mid_y), (right + 1, mid_y), (mid_x, top - 2)] {
        assert_eq!(picture.get_pixel(x, y), &MAGENTA, "({x}, {y})");
    }
    assert_ne!(picture.get_pixel(mid_x, mid_y), &MAGENTA);
    let mut expected = loaded.as_object().unwrap().clone();
    let counts = page_counts(f).await;
    assert!(counts["scroll"].as_u64().unwrap() >= 1, "{counts}");
    expected.insert("scroll".to_owned(), counts["scroll"].clone());
    assert_eq!(counts, Value::Object(expected), "only the scroll");
    assert_ne!(f.read("scrollY").await, json!(0));
    assert_eq!(f.text("#clicks").await, "0");
}

async fn an_element_partly_outside_the_viewport_is_outlined_along_the_edge(f: &Fixture) {
    let loaded = load(f).await;
    let snapshot = snapshot_of(f, click("#edge")).await;
    assert!(snapshot.target_found);
    let picture = picture(f, &snapshot).await;
    let [left, top, right, bottom] = pixel_box(f, "#edge").await;
    assert_eq!(left, 0, "the element starts left of the viewport");
    let mid_y = (top + bottom) / 2;
    // Clamped: the left band runs along the viewport's edge.
    for x in 0..OUTLINE_WIDTH {
        assert_eq!(picture.get_pixel(x, mid_y), &MAGENTA, "({x}, {mid_y})");
    }
    assert_ne!(picture.get_pixel(OUTLINE_WIDTH + 1, mid_y), &MAGENTA);
    assert_eq!(picture.get_pixel(right, mid_y), &MAGENTA);
    assert_untouched(f, &loaded).await;
}

async fn the_binding_is_the_current_page(f: &Fixture) {
    f.load("/snapshot").await;
    let snapshot = snapshot_of(f, click("#target")).await;
    let current = f.tab.backend().current_page().await.unwrap().unwrap();
    // The same document, and the target's identity besides.
    assert!(snapshot.page.same_document(&current));
    assert_eq!(current.element, None);
    assert_eq!(
        snapshot.page,
        f.tab
            .observe()
            .await
            .unwrap()
            .binding()
            .with_element(target_identity(f, &current.page_revision))
    );
    // A proposal accepts it as observed.
    let proposal = proposal(f, click("#target"))
        .await
        .observed(snapshot.clone())
        .unwrap();
    assert_eq!(proposal.snapshot, Some(snapshot.clone()));

    // The snapshot of a new document binds the new revision.
    f.load("/snapshot").await;
    let again = snapshot_of(f, click("#target")).await;
    assert!(!again.page.same_document(&snapshot.page));
    let current = f.tab.backend().current_page().await.unwrap().unwrap();
    assert!(again.page.same_document(&current));
    assert_eq!(
        again.page.element,
        Some(target_identity(f, &current.page_revision))
    );

    // A target not found binds no element.
    let missing = snapshot_of(f, click("#nope")).await;
    assert_eq!(missing.page, current);
}

/// `#target`'s identity on the snapshot page showing `revision`: role and
/// name from the accessibility tree, a button's applied type and value,
/// the main frame's origin and loader id.
fn target_identity(f: &Fixture, revision: &str) -> ElementIdentity {
    ElementIdentity::new(
        "button",
        "target",
        "button",
        "target",
        BTreeMap::from([
            ("type".to_owned(), "submit".to_owned()),
            ("value".to_owned(), String::new()),
        ]),
        vec![FrameIdentity::new(format!("http://{}", f.site), revision)],
    )
    .unwrap()
}

async fn a_snapshot_dispatches_nothing_and_changes_nothing(f: &Fixture) {
    let loaded = load(f).await;
    assert_untouched(f, &loaded).await;
    for action in [
        click("#target"),
        json!({"method": "dblclick", "selector": "#target"}),
        json!({"method": "hover", "selector": "#target"}),
        json!({"method": "focus", "selector": "#field"}),
        json!({"method": "fill", "selector": "#field", "arguments": {"text": "typed"}}),
        json!({"method": "type", "selector": "#field", "arguments": {"text": "typed"}}),
        json!({"method": "press", "selector": "#field", "arguments": {"key": "Enter"}}),
        // Partly in view: left where it is.
        click("#edge"),
    ] {
        snapshot_of(f, action).await;
    }
    assert_untouched(f, &loaded).await;
}

async fn a_snapshot_for_another_url_is_refused(f: &Fixture) {
    let loaded = load(f).await;
    let url = f
        .policy
        .authorize_destination(&f.url("/other"))
        .await
        .unwrap();
    let action = f.policy.authorize_action(&click("#target")).unwrap();
    let refused = f.tab.backend().snapshot(&url, &action).await.unwrap_err();
    assert!(!refused.may_have_acted());
    assert_eq!(
        refused.message(),
        format!(
            "the page is at `{}`, not at the proposed `{}`; no snapshot was taken",
            f.url("/snapshot"),
            f.url("/other")
        )
    );
    assert_untouched(f, &loaded).await;

    // A redirect that landed elsewhere is another page too.
    f.load("/redirect").await;
    let url = f
        .policy
        .authorize_destination(&f.url("/redirect"))
        .await
        .unwrap();
    let refused = f.tab.backend().snapshot(&url, &action).await.unwrap_err();
    assert_eq!(
        refused.message(),
        format!(
            "the page is at `{}`, not at the proposed `{}`; no snapshot was taken",
            f.url("/landed"),
            f.url("/redirect")
        )
    );
}

/// Act with the in-memory store and this tab's backend, accepting only
/// page-bound grants.
struct Host {
    approvals: Arc<InMemoryApprovalStore>,
    act: Act,
}

fn host(f: &Fixture) -> Host {
    let approvals = Arc::new(InMemoryApprovalStore::new());
    let context = Context::builder()
        .actor_id(ActorId::new("live-actor").unwrap())
        .run_id(RunId::new("live-run").unwrap())
        .backend(f.tab.backend())
        .source_policy(f.policy.clone())
        .operation_store(InMemoryOperationStore::new())
        .approval_store(approvals.clone())
        .build()
        .unwrap();
    Host {
        act: Act::new(context),
        approvals,
    }
}

const TTL: Duration = Duration::from_secs(60);

/// The host's proposal for `action` on `/snapshot`, by the host's actor
/// in its run.
async fn proposal(f: &Fixture, action: Value) -> Proposal {
    let url = f
        .policy
        .authorize_destination(&f.url("/snapshot"))
        .await
        .unwrap();
    let action = f.policy.authorize_action(&action).unwrap();
    Proposal::for_action(
        ActorId::new("live-actor").unwrap(),
        RunId::new("live-run").unwrap(),
        &url,
        &action,
        TTL,
        SystemClock.now(),
    )
    .unwrap()
}

/// Snapshots `#target`'s click, makes the proposal's grant (bound to the
/// snapshot's page) and stores it, as approving from the snapshot would.
async fn approve_from_snapshot(f: &Fixture, host: &Host) -> ApprovalId {
    let snapshot = snapshot_of(f, click("#target")).await;
    assert!(snapshot.target_found);
    let proposal = proposal(f, click("#target"))
        .await
        .observed(snapshot.clone())
        .unwrap();
    let grant = proposal.grant(TTL, SystemClock.now(), None).unwrap();
    assert_eq!(grant.page(), Some(snapshot.page));
    let id = grant.id.clone();
    host.approvals.issue(grant).await.unwrap();
    id
}

fn click_call(f: &Fixture, id: &ApprovalId) -> Value {
    json!({
        "url": f.url("/snapshot"), "approval_id": id.as_str(),
        "method": "click", "selector": "#target",
    })
}

async fn a_grant_from_the_snapshot_is_performed_once(f: &Fixture) {
    f.load("/snapshot").await;
    let host = host(f);
    let id = approve_from_snapshot(f, &host).await;
    assert_eq!(f.text("#clicks").await, "0");
    let first = host.act.execute_json(&click_call(f, &id)).await;
    assert_eq!(first["status"], "ok", "{first}");
    assert_eq!(f.text("#clicks").await, "1");
    // The page's counters see real input (so their zeros elsewhere mean
    // something).
    let counts = page_counts(f).await;
    assert_eq!(counts["click"], 1, "{counts}");
    assert_eq!(counts["mousedown"], 1, "{counts}");
    let replay = host.act.execute_json(&click_call(f, &id)).await;
    assert_eq!(replay["error"]["code"], "APPROVAL_STALE", "{replay}");
    assert_eq!(f.text("#clicks").await, "1");
}

async fn a_grant_from_the_snapshot_is_stale_on_a_new_document(f: &Fixture) {
    f.load("/snapshot").await;
    let host = host(f);
    let id = approve_from_snapshot(f, &host).await;
    f.load("/snapshot").await; // same URL, a new document
    let answer = host.act.execute_json(&click_call(f, &id)).await;
    assert_eq!(answer["error"]["code"], "APPROVAL_STALE", "{answer}");
    assert_eq!(f.text("#clicks").await, "0");
    let grant = host.approvals.get(&id).await.unwrap().unwrap();
    assert_eq!(grant.state, GrantState::Active);
}

async fn transparent_or_painted_over_targets_are_not_outlined(f: &Fixture) {
    f.load("/attacks").await;
    // A transparent target (own opacity 0, or an ancestor's 0.05) over a
    // visible button, a target painted over by a box the pointer passes
    // through, and the visible button under a transparent one: the outline
    // would frame pixels of another element, so there is none.
    for selector in ["#pay", "#pay-faint", "#cancel-sub", "#cancel-order"] {
        let snapshot = snapshot(f, "/attacks", click(selector)).await;
        assert!(!snapshot.target_found, "{selector}");
        let picture = picture(f, &snapshot).await;
        assert_eq!(magenta_pixels(&picture), 0, "{selector}");
    }
    // A plain button on the same page is outlined.
    let snapshot = snapshot(f, "/attacks", click("#save")).await;
    assert!(snapshot.target_found);
    assert!(magenta_pixels(&picture(f, &snapshot).await) > 0);
    assert_eq!(f.text("#clicks").await, "0");
}

async fn a_tab_behind_another_is_still_pictured(f: &Fixture) {
    f.load("/snapshot").await;
    let other = f
        .policy
        .authorize_destination(&f.url("/other"))
        .await
        .unwrap();
    let _in_front = f.session.open(&other).await.unwrap();
    // Opening the tab hid this one (a visibility change and a blur); the
    // snapshot adds nothing to that, and does not bring the tab back.
    let before = page_counts(f).await;
    let snapshot = snapshot_of(f, click("#target")).await;
    assert!(snapshot.target_found);
    let picture = picture(f, &snapshot).await;
    assert!(magenta_pixels(&picture) > 0);
    assert_eq!(page_counts(f).await, before);
    assert_eq!(f.read("document.visibilityState").await, "hidden");
}
