//! End to end through the live backend: a model proposes a click on a real
//! page in headless Chromium (behind the egress guard), a person approves
//! it on the proposal page in another Chromium, and the model performs it
//! once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::page::ScreenshotParams;
use countersign_act_tool::{Context, Toolset};
use countersign_approval_core::{
    ActorId, ApproverId, Backend, ManualClock, OutcomeCode, ProposalId, ProposalState,
    ProposalStore, RunId,
};
use countersign_approval_web::ApprovalPages;
use countersign_backend_chromium::{
    Chromium as LiveChromium, ChromiumOptions, DEFAULT_EXECUTABLE, Tab,
};
use countersign_canonical_policy::{Policy, StaticResolver};
use countersign_egress_guard::EgressGuard;
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};
use support::CookieApprovers;
use support::browser::{
    Chromium as ApproverChromium, PAGES_IP, click_and_wait, eval, serve, text, wait_for,
};

/// The loopback address the site the model acts on is served on: its own,
/// apart from the pages (127.0.0.1) and the hostile site (127.0.0.2).
const SITE_IP: &str = "127.0.0.3";

/// Where the invoice is, on the site.
const INVOICE_PATH: &str = "/invoices/2026-118";

/// The invoice: a Pay button that counts the clicks a user makes (trusted
/// events only) in the DOM.
const INVOICE: &str = r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Invoice 2026-118</title><style>
body { font: 15px/1.4 sans-serif; margin: 0; background: #eef1f5; color: #222; }
header { background: #1b2a41; color: #fff; padding: 12px 24px; font-weight: bold; }
header span { font-weight: normal; opacity: .75; margin-left: 8px; }
main { margin: 20px 24px; padding: 18px 24px; background: #fff; border: 1px solid #d5dbe3; }
h1 { font-size: 20px; margin: 0 0 4px; }
.meta { color: #555; margin: 0 0 14px; }
table { border-collapse: collapse; width: 100%; margin-bottom: 14px; }
th { text-align: left; font-weight: 600; border-bottom: 2px solid #ccd; padding: 5px 4px; }
td { border-bottom: 1px solid #e2e2e2; padding: 5px 4px; }
td:last-child, th:last-child { text-align: right; }
.method { margin: 0 0 14px; }
button { font: inherit; padding: 8px 18px; margin-right: 8px; border-radius: 4px; border: 1px solid #aab; background: #f4f4f4; }
#pay { background: #1c71d8; color: #fff; border-color: #1c71d8; }
.paid { margin: 12px 0 0; color: #555; }
</style></head><body>
<header>Example Hosting<span>Billing</span></header>
<main>
<h1>Invoice 2026-118</h1>
<p class="meta">Issued 1 May 2026 &middot; due 15 May 2026 &middot; ACME GmbH, customer 4711</p>
<table><thead><tr><th>Item</th><th>Amount</th></tr></thead><tbody>
<tr><td>Hosting, May 2026</td><td>80.00 EUR</td></tr>
<tr><td>Backups, May 2026</td><td>20.00 EUR</td></tr>
<tr><td>VAT 20 %</td><td>20.00 EUR</td></tr>
<tr><td><b>Total</b></td><td><b>120.00 EUR</b></td></tr>
</tbody></table>
<p class="method">Payment method: card ending 4242</p>
<button id="pay">Pay 120.00 EUR</button><button id="cancel">Cancel</button>
<p class="paid">Payments made: <output id="clicks">0</output></p>
</main>
<script>
  const clicks = document.getElementById("clicks");
  document.getElementById("pay").addEventListener("click", (e) => {
    if (e.isTrusted) clicks.textContent = String(Number(clicks.textContent) + 1);
  });
</script></body></html>"#;

/// What the first screen of a proposal page holds, measured as laid out.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct FirstScreen {
    inner: (f64, f64),
    scroll_width: f64,
    /// The decision's parts whose box is not wholly in the first viewport.
    outside: Vec<String>,
    approve: (f64, f64),
    deny: (f64, f64),
    crop_natural: (u32, u32),
    /// Pixels of the outline's colour in the crop.
    outline_pixels: u32,
}

const MEASURE_FIRST_SCREEN: &str = r#"(() => {
  const inner = [window.innerWidth, window.innerHeight];
  const outside = [];
  for (const id of ['summary', 'target-crop', 'approve', 'deny']) {
    const r = document.getElementById(id).getBoundingClientRect();
    if (r.left < 0 || r.top < 0 || r.right > inner[0] + 0.5 || r.bottom > inner[1] + 0.5 || r.width === 0) {
      outside.push(`${id} at ${r.left},${r.top}..${r.right},${r.bottom}`);
    }
  }
  const size = id => { const r = document.getElementById(id).getBoundingClientRect(); return [r.width, r.height]; };
  const crop = document.getElementById('target-crop');
  const canvas = document.createElement('canvas');
  canvas.width = crop.naturalWidth; canvas.height = crop.naturalHeight;
  const g = canvas.getContext('2d');
  g.drawImage(crop, 0, 0);
  const data = g.getImageData(0, 0, canvas.width, canvas.height).data;
  let outline = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (data[i] === 255 && data[i + 1] === 0 && data[i + 2] === 255) outline += 1;
  }
  return {
    inner, scrollWidth: document.documentElement.scrollWidth, outside,
    approve: size('approve'), deny: size('deny'),
    cropNatural: [crop.naturalWidth, crop.naturalHeight], outlinePixels: outline,
  };
})()"#;

/// The viewport as shown, at the device metrics set (not the full page).
async fn photograph_viewport(page: &chromiumoxide::Page) -> Vec<u8> {
    page.screenshot(ScreenshotParams::builder().full_page(false).build())
        .await
        .unwrap()
}

/// What the model proposes, and then performs.
fn pay() -> Value {
    json!({"method": "click", "selector": "button#pay", "description": "pay invoice 2026-118"})
}

/// The site's policy: plain http on [`SITE_IP`] only.
fn policy() -> Policy {
    Policy::builder()
        .allow_host(SITE_IP)
        .allow_schemes(["http"])
        .allow_special_use(format!("{SITE_IP}/32"))
        .resolver(StaticResolver::new())
        .build()
        .unwrap()
}

/// The clicks the invoice counted, read from its DOM.
async fn clicks(tab: &Tab) -> u64 {
    let count = tab
        .inspect("function () { return document.getElementById('clicks').textContent; }")
        .await
        .unwrap();
    count.as_str().unwrap().parse().unwrap()
}

/// A PNG's width and height, from its `IHDR` chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert_eq!(&png[12..16], b"IHDR");
    let at = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
    (at(16), at(20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_from_the_live_backend_is_approved_on_its_page_and_clicked_once() {
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(90), scenario())
        .await
        .expect("the scenario took more than 90 s");
    eprintln!("took {:?}", started.elapsed());
}

async fn scenario() {
    // The site, on a loopback address of its own.
    let listener = tokio::net::TcpListener::bind((SITE_IP, 0)).await.unwrap();
    let invoice_url = format!("http://{}{INVOICE_PATH}", listener.local_addr().unwrap());
    let app = Router::new().route(INVOICE_PATH, get(|| async { Html(INVOICE) }));
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The browser the model acts in, reaching the network only through a
    // guard applying the same policy (which refuses 127.0.0.1, where the
    // approval pages are).
    let policy = policy();
    let guard = EgressGuard::bind(policy.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let executable =
        std::env::var("COUNTERSIGN_CHROMIUM").unwrap_or_else(|_| DEFAULT_EXECUTABLE.to_owned());
    let live = LiveChromium::launch(
        ChromiumOptions::new()
            .executable(executable)
            .egress_proxy(format!("http://{}", guard.local_addr()))
            // CI runs as root, where Chromium refuses its sandbox.
            .no_sandbox(),
    )
    .await
    .unwrap();
    let session = live.new_session(policy.clone()).await.unwrap();
    let tab = session
        .open(&policy.authorize_destination(&invoice_url).await.unwrap())
        .await
        .unwrap();
    assert_eq!(clicks(&tab).await, 0);

    // The host: the in-memory store keeps proposals and grants, the
    // model's tools act in the tab; the tools and the pages share a clock
    // (stopped, so the picture's times read the same on every run).
    let clock = ManualClock::new(support::START);
    let store = Arc::new(InMemoryApprovalStore::new());
    let operations = Arc::new(InMemoryOperationStore::new());
    let context = Context::builder()
        .actor_id(ActorId::new("live-actor").unwrap())
        .run_id(RunId::new("live-run").unwrap())
        .backend(tab.backend())
        .source_policy(policy.clone())
        .operation_store(operations.clone())
        .proposal_store(store.clone())
        .clock(clock.clone())
        .build()
        .unwrap();
    let tools = Toolset::new(context).with_propose().with_act();

    // The model proposes; the live backend photographs the page as it stands.
    let mut call = pay();
    call["url"] = json!(invoice_url);
    let proposed = tools.call("browser_propose", &call).await.unwrap();
    assert_eq!(proposed["status"], "pending", "{proposed}");
    let proposal_id = ProposalId::parse(proposed["proposal_id"].as_str().unwrap()).unwrap();
    let stored = store.get_proposal(&proposal_id).await.unwrap().unwrap();
    let snapshot = stored.proposal.snapshot.clone().expect("a live snapshot");
    assert!(snapshot.target_found, "button#pay was not found");
    let current = tab.backend().current_page().await.unwrap().unwrap();
    assert!(
        snapshot.page.same_document(&current),
        "bound to the tab's current page"
    );
    // And to the element the approver sees outlined.
    let element = snapshot.page.element.clone().expect("the element approved");
    assert_eq!(
        (
            element.role(),
            element.name(),
            element.tag(),
            element.text()
        ),
        ("button", "Pay 120.00 EUR", "button", "Pay 120.00 EUR")
    );
    assert_eq!(
        snapshot.page,
        tab.observe().await.unwrap().binding().with_element(element)
    );
    let png = snapshot.screenshot_png.clone().expect("a screenshot");
    let (width, height) = png_size(&png);
    assert!(width > 100 && height > 100, "{width}×{height}");
    assert_eq!(clicks(&tab).await, 0, "proposing clicked nothing");

    // The approval pages, on 127.0.0.1, and the approver's own browser:
    // not the tab acted on, nor its browser (whose guard refuses 127.0.0.1).
    let pages = ApprovalPages::builder(store.clone(), CookieApprovers)
        .clock(clock.clone())
        .build()
        .unwrap();
    let (pages_at, log) = serve(pages.router(), PAGES_IP).await;
    let approver = ApproverChromium::launch().await;
    approver.sign_in(pages_at, "alice").await;
    let proposal_url = format!(
        "http://{pages_at}{}",
        ApprovalPages::proposal_path(&proposal_id)
    );
    let page = approver.open(&proposal_url).await;
    wait_for(
        &page,
        "document.querySelector('img.screenshot').complete && document.querySelector('img.screenshot').naturalWidth > 0",
    )
    .await;
    let shown: (u32, u32) = eval(
        &page,
        "(i => [i.naturalWidth, i.naturalHeight])(document.querySelector('img.screenshot'))",
    )
    .await;
    assert_eq!(shown, (width, height), "the page shows the snapshot's PNG");
    assert_eq!(
        text(&page, "figcaption").await,
        "The outlined element is the one the selector matched."
    );
    assert_eq!(text(&page, "#url").await, invoice_url);
    assert_eq!(text(&page, "#selector").await, "button#pay");
    let binding: String = text(&page, "dl.binding").await;
    for part in [
        &snapshot.page.session_id,
        &snapshot.page.target_id,
        &snapshot.page.page_revision,
    ] {
        assert!(binding.contains(part.as_str()), "`{part}` not shown");
    }
    assert_eq!(
        eval::<u32>(&page, "document.querySelectorAll('[role=alert]').length").await,
        0,
        "no target-not-found warning"
    );

    // The decision on the first screen, on a phone and on a laptop.
    let site_host = invoice_url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    for (width, height, mobile, name) in [
        (390, 844, true, "proposal-phone.png"),
        (1280, 800, false, "proposal-laptop.png"),
    ] {
        let screen = approver.browser.new_page("about:blank").await.unwrap();
        screen
            .execute(SetDeviceMetricsOverrideParams::new(
                width, height, 1.0, mobile,
            ))
            .await
            .unwrap();
        screen.goto(proposal_url.as_str()).await.unwrap();
        wait_for(
            &screen,
            "document.readyState === 'complete' && document.getElementById('target-crop').complete && document.getElementById('target-crop').naturalWidth > 0",
        )
        .await;
        assert_eq!(
            text(&screen, "#summary").await,
            format!("live-actor wants to click the button “Pay 120.00 EUR” on {site_host}.")
        );
        let first: FirstScreen = eval(&screen, MEASURE_FIRST_SCREEN).await;
        eprintln!("{width}×{height}: {first:?}");
        assert_eq!(
            first.inner,
            (f64::from(width as u32), f64::from(height as u32)),
            "{name}"
        );
        assert!(
            first.scroll_width <= first.inner.0,
            "{name}: the page scrolls sideways ({} > {})",
            first.scroll_width,
            first.inner.0
        );
        assert_eq!(
            first.outside,
            Vec::<String>::new(),
            "{name}: not on the first screen"
        );
        for (button, (w, h)) in [("approve", first.approve), ("deny", first.deny)] {
            assert!(w >= 44.0 && h >= 44.0, "{name}: {button} is {w}×{h}");
        }
        // The crop shows the target at the picture's own scale, outlined.
        assert!(
            first.crop_natural.0 >= 300 && first.crop_natural.0 <= width as u32,
            "{name}: {:?}",
            first.crop_natural
        );
        assert!(
            first.outline_pixels > 100,
            "{name}: {} outline pixels in the crop",
            first.outline_pixels
        );
        let picture = photograph_viewport(&screen).await;
        std::fs::write(
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name),
            &picture,
        )
        .unwrap();
        if std::env::var("COUNTERSIGN_UPDATE_DOCS").as_deref() == Ok("1") {
            let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/images");
            std::fs::write(docs.join(name), &picture).unwrap();
        }
    }

    // The picture for the docs: the page as the approver sees it.
    let picture = page
        .screenshot(ScreenshotParams::builder().full_page(true).build())
        .await
        .unwrap();
    png_size(&picture);
    assert!(
        picture.len() > 20_000,
        "a screenshot of {} bytes is too small",
        picture.len()
    );
    std::fs::write(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("approval-page-live.png"),
        &picture,
    )
    .unwrap();
    if std::env::var("COUNTERSIGN_UPDATE_DOCS").as_deref() == Ok("1") {
        let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/images");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::write(docs.join("approval-page.png"), &picture).unwrap();
    }

    // Nothing is issued before the person decides.
    let status_call = json!({"proposal_id": proposal_id.as_str()});
    let waiting = tools
        .call("browser_proposal_status", &status_call)
        .await
        .unwrap();
    assert_eq!(waiting["status"], "pending", "{waiting}");

    click_and_wait(&page, "#approve").await;
    assert_eq!(
        text(&page, ".notice").await,
        "Approved: one grant was issued for exactly this action."
    );
    assert_eq!(log.statuses("POST", "/approve"), [303]);

    // The model learns the decision and acts with it: once.
    let decided = tools
        .call("browser_proposal_status", &status_call)
        .await
        .unwrap();
    assert_eq!(decided["status"], "approved", "{decided}");
    let approval_id = decided["approval_id"].as_str().unwrap().to_owned();
    let ProposalState::Approved {
        approval_id: stored_id,
        by,
        ..
    } = store
        .get_proposal(&proposal_id)
        .await
        .unwrap()
        .unwrap()
        .state
    else {
        panic!("not approved in the store");
    };
    assert_eq!(stored_id.as_str(), approval_id);
    assert_eq!(by, Some(ApproverId::new("alice").unwrap()));

    let mut act_call = call.clone();
    act_call["approval_id"] = json!(approval_id);
    let first = tools.call("browser_act", &act_call).await.unwrap();
    assert_eq!(first["status"], "ok", "{first}");
    assert_eq!(clicks(&tab).await, 1, "clicked exactly once");

    let replay = tools.call("browser_act", &act_call).await.unwrap();
    assert_eq!(replay["error"]["code"], "APPROVAL_STALE", "{replay}");
    assert_eq!(clicks(&tab).await, 1, "the replay clicked nothing");

    let records = operations.records().unwrap();
    let performed: Vec<_> = records
        .iter()
        .filter(|r| r.outcome == OutcomeCode::Ok)
        .collect();
    assert_eq!(performed.len(), 1);
    assert_eq!(
        performed[0].approver_id.as_ref().map(|a| a.as_str()),
        Some("alice")
    );

    // The acted-on browser went through the guard, which let every
    // request for the site pass (it refuses the browser's own background
    // traffic, to hosts the policy does not allow).
    let refused: Vec<_> = guard
        .refusals()
        .into_iter()
        .filter(|r| r.host() == SITE_IP)
        .collect();
    assert!(
        refused.is_empty(),
        "the guard refused the site: {refused:?}"
    );

    approver.close().await;
    live.close().await.unwrap();
}
