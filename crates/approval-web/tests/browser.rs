//! The pages in real headless Chromium: clicks and key presses through the
//! DevTools protocol, a hostile site on another origin, script payloads,
//! and a screenshot of the proposal page.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::page::ScreenshotParams;
use countersign_approval_core::{
    ApprovalStore, ApproverId, PageBinding, PageSnapshot, Proposal, ProposalState, ProposalStore,
};
use countersign_approval_web::ApprovalPages;
use serde_json::{Value, json};
use support::browser::{
    Chromium, OTHER_IP, PAGES_IP, click_and_wait, eval, photograph, press_enter_and_wait, serve,
    text, wait_for,
};
use support::{Host, PROPOSAL_TTL};

fn pay() -> Value {
    json!({"method": "click", "selector": "button#pay", "description": "pay invoice 2026-118", "arguments": {"amount": "120.00", "currency": "EUR"}})
}

async fn state(host: &Host, proposal: &Proposal) -> ProposalState {
    host.store
        .get_proposal(&proposal.id)
        .await
        .unwrap()
        .unwrap()
        .state
}

/// The notice a decision or a stop left at the top of the page.
async fn notice(page: &chromiumoxide::Page) -> String {
    text(page, ".notice").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_approved_with_a_click_is_performed_once_and_a_second_click_changes_nothing() {
    let host = Host::new();
    let (site, log) = serve(host.router(), PAGES_IP).await;
    let chromium = Chromium::launch().await;
    chromium.sign_in(site, "alice").await;
    let proposal = host.propose(&pay()).await;

    // The run's list shows it; the approver follows its link.
    let run_url = format!(
        "http://{site}{}",
        ApprovalPages::run_path(&host.actor, &host.run)
    );
    let tab = chromium.open(&run_url).await;
    assert_eq!(
        text(&tab, "ol.proposals a.review code").await,
        proposal.id.as_str()
    );
    click_and_wait(&tab, "ol.proposals a.review").await;
    let proposal_url = format!(
        "http://{site}{}",
        ApprovalPages::proposal_path(&proposal.id)
    );
    assert_eq!(eval::<String>(&tab, "location.href").await, proposal_url);
    assert_eq!(text(&tab, "#selector").await, "button#pay");
    assert_eq!(text(&tab, "#digest").await, proposal.action_digest.to_hex());

    // A second tab on the same page, left open: a stale form.
    let stale = chromium.open(&proposal_url).await;

    click_and_wait(&tab, "#approve").await;
    assert!(
        eval::<String>(&tab, "location.search")
            .await
            .starts_with("?outcome=approved&tag=")
    );
    assert_eq!(
        notice(&tab).await,
        "Approved: one grant was issued for exactly this action."
    );
    let ProposalState::Approved {
        approval_id, by, ..
    } = state(&host, &proposal).await
    else {
        panic!("the click did not approve");
    };
    assert_eq!(by, Some(ApproverId::new("alice").unwrap()));
    assert_eq!(host.store.len().unwrap(), 1, "exactly one grant");
    let grant = host
        .store
        .get(&approval_id)
        .await
        .unwrap()
        .unwrap()
        .approval;
    assert_eq!(grant.approver.unwrap().id.as_str(), "alice");
    assert_eq!(text(&tab, "code.grant-id").await, approval_id.as_str());

    // The model acts with it: once.
    let act = host.act();
    let call = Host::act_call(&pay(), approval_id.as_str());
    let first = act.execute_json(&call).await;
    assert_eq!(first["status"], "ok", "{first}");
    assert_eq!(host.backend.len(), 1);

    // Clicking Approve again, in the stale tab: nothing is issued, and the page says so.
    click_and_wait(&stale, "#approve").await;
    assert_eq!(
        notice(&stale).await,
        "Already approved, nothing changed: no second grant was issued."
    );
    assert_eq!(host.store.len().unwrap(), 1, "still exactly one grant");

    // History back in the first tab, then Approve again: Chromium may
    // show the page as it was (back/forward cache, buttons and all) or load
    // it afresh (decided, no buttons); either way nothing more is issued.
    tab.evaluate("history.back()").await.unwrap();
    wait_for(
        &tab,
        "location.search === '' && document.readyState === 'complete'",
    )
    .await;
    let buttons: u32 = eval(&tab, "document.querySelectorAll('#approve').length").await;
    if buttons == 1 {
        click_and_wait(&tab, "#approve").await;
        assert_eq!(
            notice(&tab).await,
            "Already approved, nothing changed: no second grant was issued."
        );
        assert_eq!(log.statuses("POST", "/approve"), [303, 303, 303]);
    } else {
        assert!(text(&tab, ".status").await.contains("Approved by alice"));
        assert_eq!(log.statuses("POST", "/approve"), [303, 303]);
    }
    assert_eq!(host.store.len().unwrap(), 1, "still exactly one grant");
    assert!(matches!(
        state(&host, &proposal).await,
        ProposalState::Approved { .. }
    ));

    let again = act.execute_json(&call).await;
    assert_eq!(again["error"]["code"], "APPROVAL_STALE");
    assert_eq!(host.backend.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_proposes_with_the_tool_a_person_approves_on_the_page_and_the_model_acts_once() {
    let host = Host::new();
    let (site, _) = serve(host.router(), PAGES_IP).await;
    let chromium = Chromium::launch().await;
    chromium.sign_in(site, "alice").await;
    let tools = host.toolset();

    // The scripted model proposes, then asks for the decision.
    let mut call = pay();
    call["url"] = json!(support::URL);
    let proposed = tools.call("browser_propose", &call).await.unwrap();
    assert_eq!(proposed["status"], "pending", "{proposed}");
    let proposal_id = proposed["proposal_id"].as_str().unwrap().to_owned();
    let status_call = json!({"proposal_id": proposal_id});
    let waiting = tools
        .call("browser_proposal_status", &status_call)
        .await
        .unwrap();
    assert_eq!(waiting["status"], "pending");
    let early = tools
        .call("browser_act", &Host::act_call(&pay(), &proposal_id))
        .await
        .unwrap();
    assert_eq!(
        early["error"]["code"], "APPROVAL_REQUIRED",
        "no grant before the decision"
    );

    // The person finds it in the run's list and approves it.
    let run_url = format!(
        "http://{site}{}",
        ApprovalPages::run_path(&host.actor, &host.run)
    );
    let tab = chromium.open(&run_url).await;
    assert_eq!(text(&tab, "ol.proposals a.review code").await, proposal_id);
    click_and_wait(&tab, "ol.proposals a.review").await;
    assert_eq!(text(&tab, "#description").await, "pay invoice 2026-118");
    click_and_wait(&tab, "#approve").await;
    assert_eq!(
        notice(&tab).await,
        "Approved: one grant was issued for exactly this action."
    );

    // The model learns the approval id and acts with it, once.
    let decided = tools
        .call("browser_proposal_status", &status_call)
        .await
        .unwrap();
    assert_eq!(decided["status"], "approved", "{decided}");
    let approval_id = decided["approval_id"].as_str().unwrap().to_owned();
    assert_eq!(text(&tab, "code.grant-id").await, approval_id);
    let act_call = Host::act_call(&pay(), &approval_id);
    let first = tools.call("browser_act", &act_call).await.unwrap();
    assert_eq!(first["status"], "ok", "{first}");
    let second = tools.call("browser_act", &act_call).await.unwrap();
    assert_eq!(second["error"]["code"], "APPROVAL_STALE");
    assert_eq!(host.backend.len(), 1);
    assert_eq!(host.store.len().unwrap(), 1);
    let records = host.operations.records().unwrap();
    let performed = records
        .iter()
        .find(|r| r.outcome == countersign_approval_core::OutcomeCode::Ok)
        .unwrap();
    assert_eq!(
        performed.approver_id.as_ref().map(|a| a.as_str()),
        Some("alice")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_site_form_post_is_refused_and_changes_nothing() {
    let host = Host::new();
    let (site, log) = serve(host.router(), PAGES_IP).await;
    let proposal = host.propose(&pay()).await;
    let chromium = Chromium::launch().await;
    chromium.sign_in(site, "alice").await;

    // The attacker even has a valid token for alice (as if it had leaked):
    // the cross-site check alone must refuse the post.
    let page = chromium
        .open(&format!(
            "http://{site}{}",
            ApprovalPages::proposal_path(&proposal.id)
        ))
        .await;
    let token: String = eval(
        &page,
        "document.querySelector('form.approve input[name=token]').value",
    )
    .await;
    let action = format!(
        "http://{site}{}/approve",
        ApprovalPages::proposal_path(&proposal.id)
    );
    let hostile = format!(
        "<!doctype html><title>win a prize</title>\
         <form id=f method=post action=\"{action}\"><input name=token value=\"{token}\"></form>\
         <script>document.getElementById('f').submit()</script>"
    );
    let (attacker, _) = serve(
        Router::new().route("/", get(move || async move { Html(hostile) })),
        OTHER_IP,
    )
    .await;

    let victim = chromium.browser.new_page("about:blank").await.unwrap();
    victim.goto(format!("http://{attacker}/")).await.unwrap();
    wait_for(&victim, "location.href.endsWith('/approve')").await;
    wait_for(&victim, "document.readyState === 'complete'").await;
    assert_eq!(
        eval::<String>(&victim, "document.body.innerText.trim()").await,
        "refused: this form was posted from another site; nothing changed"
    );
    assert_eq!(log.statuses("POST", "/approve"), [403]);
    assert_eq!(state(&host, &proposal).await, ProposalState::Pending);
    assert_eq!(host.store.len().unwrap(), 0, "no grant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_and_markup_in_a_proposal_render_as_inert_text() {
    const SCRIPT: &str = "<script>window.__pwned=1</script>";
    const IMG: &str = "\"><img src=x onerror=\"window.__pwned=1\">";
    let host = Host::for_run("<b>actor</b>", "\"><script>window.__pwned=1</script>");
    let arguments = json!({
        "text": SCRIPT,
        "link": "javascript:window.__pwned=1",
        "svg": "<svg/onload=window.__pwned=1>",
        "close": "</code></td></tr></table><iframe src=\"javascript:window.__pwned=1\"></iframe>",
        "style": "<style>*{display:none}</style><link rel=stylesheet href=//evil.test/x.css>",
        "attr": "' onmouseover='window.__pwned=1",
    });
    let action =
        json!({"method": "click", "selector": SCRIPT, "description": IMG, "arguments": arguments});
    let proposal = host.propose(&action).await;
    let (site, _) = serve(host.router(), PAGES_IP).await;
    let chromium = Chromium::launch().await;
    chromium.sign_in(site, "alice").await;

    let run_url = format!(
        "http://{site}{}",
        ApprovalPages::run_path(&host.actor, &host.run)
    );
    let proposal_url = format!(
        "http://{site}{}",
        ApprovalPages::proposal_path(&proposal.id)
    );
    for url in [&run_url, &proposal_url] {
        let tab = chromium.open(url).await;
        // Give an onerror or a timer every chance to run.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            eval::<String>(&tab, "typeof window.__pwned").await,
            "undefined",
            "{url}"
        );
        let created: u32 = eval(
            &tab,
            "document.querySelectorAll('script, img, svg, iframe, style, link:not([href$=\"/style.css\"]), [onerror], [onload], [onmouseover], a[href^=\"javascript\"]').length",
        )
        .await;
        assert_eq!(created, 0, "{url}: the payload made elements");
        assert_eq!(eval::<u32>(&tab, "document.scripts.length").await, 0);
        let body: String = eval(&tab, "document.body.textContent").await;
        for payload in [SCRIPT, IMG, "<b>actor</b>"] {
            assert!(
                body.contains(payload),
                "{url}: `{payload}` not shown as text"
            );
        }
    }

    let tab = chromium.open(&proposal_url).await;
    assert_eq!(text(&tab, "#selector").await, SCRIPT);
    assert_eq!(text(&tab, "#description").await, IMG);
    assert_eq!(text(&tab, "#actor").await, "<b>actor</b>");
    assert_eq!(
        text(&tab, "#run").await,
        "\"><script>window.__pwned=1</script>"
    );
    let shown: Vec<String> = eval(
        &tab,
        "Array.from(document.querySelectorAll('code.argument')).map(e => e.textContent)",
    )
    .await;
    // Arguments are listed in their canonical (sorted) order.
    let expected: Vec<String> = proposal.action.arguments().values().cloned().collect();
    assert_eq!(shown, expected);
    assert_eq!(shown.len(), 6);

    // Approving it still works, and binds exactly the payload.
    click_and_wait(&tab, "#approve").await;
    assert_eq!(
        eval::<String>(&tab, "typeof window.__pwned").await,
        "undefined"
    );
    let ProposalState::Approved { approval_id, .. } = state(&host, &proposal).await else {
        panic!("not approved");
    };
    let result = host
        .act()
        .execute_json(&Host::act_call(&action, approval_id.as_str()))
        .await;
    assert_eq!(result["status"], "ok", "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_expiry_and_a_stopped_run_each_end_with_act_refusing() {
    let host = Host::new();
    let (site, log) = serve(host.router(), PAGES_IP).await;
    let chromium = Chromium::launch().await;
    chromium.sign_in(site, "alice").await;
    let act = host.act();
    let url = |proposal: &Proposal| {
        format!(
            "http://{site}{}",
            ApprovalPages::proposal_path(&proposal.id)
        )
    };
    let refused_with = |proposal: &Proposal| Host::act_call(&pay(), proposal.id.as_str());

    // Deny, from the keyboard.
    let denied = host.propose(&pay()).await;
    let tab = chromium.open(&url(&denied)).await;
    press_enter_and_wait(&tab, "#deny").await;
    assert_eq!(notice(&tab).await, "Denied: no grant was issued.");
    assert!(matches!(
        state(&host, &denied).await,
        ProposalState::Denied { by: Some(_), .. }
    ));
    assert_eq!(
        act.execute_json(&refused_with(&denied)).await["error"]["code"],
        "APPROVAL_REQUIRED"
    );

    // Expiry: the page was loaded in time, the click comes too late.
    let expiring = host.propose(&pay()).await;
    let tab = chromium.open(&url(&expiring)).await;
    host.clock.advance(PROPOSAL_TTL);
    click_and_wait(&tab, "#approve").await;
    assert_eq!(
        notice(&tab).await,
        "Expired, nothing changed: the proposal can no longer be decided, and no grant was issued."
    );
    assert!(text(&tab, ".status").await.contains("without a decision"));
    assert_eq!(state(&host, &expiring).await, ProposalState::Pending);
    assert_eq!(host.store.len().unwrap(), 0);
    assert_eq!(
        act.execute_json(&refused_with(&expiring)).await["error"]["code"],
        "APPROVAL_REQUIRED"
    );

    // A stopped run: a grant approved before the stop is stale, and
    // approving after it is refused.
    let first = host.propose(&pay()).await;
    let second = host
        .propose(&json!({"method": "click", "selector": "button#cancel"}))
        .await;
    let tab = chromium.open(&url(&first)).await;
    click_and_wait(&tab, "#approve").await;
    let ProposalState::Approved { approval_id, .. } = state(&host, &first).await else {
        panic!("not approved");
    };
    let late = chromium.open(&url(&second)).await;
    let run = chromium
        .open(&format!(
            "http://{site}{}",
            ApprovalPages::run_path(&host.actor, &host.run)
        ))
        .await;
    click_and_wait(&run, "button.stop-run").await;
    assert_eq!(
        notice(&run).await,
        "Run stopped: 1 grant stopped. No grant of this run can be used, and none issued, until the host resumes it."
    );
    assert_eq!(
        text(&run, "p.empty").await,
        "No proposal of this run is waiting for a decision."
    );
    photograph(&run, "run-stopped.png").await;
    click_and_wait(&late, "#approve").await;
    assert!(
        notice(&late)
            .await
            .starts_with("The run is stopped, nothing changed: no grant was issued.")
    );
    photograph(&late, "approve-stopped.png").await;
    assert_eq!(state(&host, &second).await, ProposalState::Pending);
    assert_eq!(host.store.len().unwrap(), 1);

    let stale = act
        .execute_json(&Host::act_call(&pay(), approval_id.as_str()))
        .await;
    assert_eq!(stale["error"]["code"], "APPROVAL_STALE", "{stale}");
    let call = Host::act_call(
        &json!({"method": "click", "selector": "button#cancel"}),
        second.id.as_str(),
    );
    assert_eq!(
        act.execute_json(&call).await["error"]["code"],
        "APPROVAL_REQUIRED"
    );
    assert_eq!(host.backend.len(), 0);
    assert_eq!(log.statuses("POST", "/stop"), [303]);
}

/// A page on the site the model acts on, with the target outlined, as a
/// live backend's snapshot shows it.
const SITE_PAGE: &str = r#"<!doctype html><html lang="en"><head><style>
body { font: 15px/1.4 sans-serif; margin: 0; background: #f6f6f6; }
main { width: 560px; padding: 20px 24px; background: #fff; }
h1 { font-size: 19px; margin: 0 0 10px; }
table { border-collapse: collapse; width: 100%; margin-bottom: 16px; }
td { border-bottom: 1px solid #ddd; padding: 6px 4px; }
button { font: inherit; padding: 8px 18px; margin-right: 8px; }
#pay { outline: 3px solid #e01b24; outline-offset: 3px; background: #1c71d8; color: #fff; border: 0; }
</style></head><body><main>
<h1>Invoice 2026-118</h1>
<table><tr><td>Hosting, May 2026</td><td>100.00 EUR</td></tr><tr><td>VAT</td><td>20.00 EUR</td></tr><tr><td><b>Total</b></td><td><b>120.00 EUR</b></td></tr></table>
<button id="pay">Pay 120.00 EUR</button><button id="cancel">Cancel</button>
</main></body></html>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proposal_page_with_a_live_snapshot_is_keyboard_operable_and_photographed() {
    let host = Host::new();
    let (site, _) = serve(host.router(), PAGES_IP).await;
    let chromium = Chromium::launch().await;
    chromium.sign_in(site, "alice").await;

    // What a live backend would attach: a screenshot of the page.
    let shop = chromium.browser.new_page("about:blank").await.unwrap();
    shop.set_content(SITE_PAGE).await.unwrap();
    let screenshot = shop
        .find_element("main")
        .await
        .unwrap()
        .screenshot(CaptureScreenshotFormat::Png)
        .await
        .unwrap();
    let snapshot = PageSnapshot {
        page: PageBinding {
            session_id: "C0FFEE42".into(),
            target_id: "5A1E7AB0".into(),
            page_revision: "4D2B9E1F".into(),
            element: None,
        },
        screenshot_png: Some(screenshot),
        target_found: true,
    };
    let proposal = host.propose_observed(&pay(), snapshot).await;

    let tab = chromium
        .open(&format!(
            "http://{site}{}",
            ApprovalPages::proposal_path(&proposal.id)
        ))
        .await;
    wait_for(
        &tab,
        "document.querySelector('img.screenshot').complete && document.querySelector('img.screenshot').naturalWidth > 100",
    )
    .await;
    assert_eq!(
        text(&tab, "figcaption").await,
        "The outlined element is the one the selector matched."
    );
    let stylesheet_applied: String = eval(
        &tab,
        "getComputedStyle(document.querySelector('button.approve')).backgroundColor",
    )
    .await;
    assert_eq!(
        stylesheet_applied, "rgb(29, 107, 53)",
        "the stylesheet route is allowed by the CSP"
    );

    // Tab moves the focus through real controls to Approve, with a
    // visible ring.
    let body = tab.find_element("body").await.unwrap();
    let mut reached = false;
    for _ in 0..20 {
        body.press_key("Tab").await.unwrap();
        let id: String = eval(&tab, "document.activeElement.id").await;
        if id == "approve" {
            reached = true;
            break;
        }
    }
    assert!(reached, "Approve cannot be reached with Tab");
    let ring: String = eval(
        &tab,
        "(s => s.outlineStyle + ' ' + s.outlineWidth)(getComputedStyle(document.activeElement))",
    )
    .await;
    assert_eq!(ring, "solid 3px");
    let labelled: bool = eval(&tab, "document.getElementById('note').labels.length === 1").await;
    assert!(labelled);
    body.press_key("Tab").await.unwrap(); // Move the ring off Approve for the picture.
    tab.evaluate("document.activeElement.blur()").await.unwrap();

    let png = tab
        .screenshot(ScreenshotParams::builder().full_page(true).build())
        .await
        .unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(
        png.len() > 20_000,
        "a screenshot of {} bytes is too small",
        png.len()
    );
    // The picture in docs/ comes from tests/live_backend.rs (a real page
    // and outline); this one, of a synthetic snapshot, stays in target/.
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("approval-page.png");
    std::fs::write(&out, &png).unwrap();

    // The screenshot route serves the snapshot's bytes as they were stored.
    let served: u32 = eval(
        &tab,
        "document.querySelector('img.screenshot').naturalWidth",
    )
    .await;
    assert!(served > 100);
}

/// What the layout check in the browser found.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Fit {
    scroll_width: f64,
    inner_width: f64,
    cards: u32,
    flagged: u32,
    /// The narrowest URL cell, as a share of its card's width.
    url_share: f64,
    overflows: Vec<String>,
}

/// Measures the run list as laid out: the page's width, and every element
/// of every proposal against its card and every card against the panel.
const MEASURE_FIT: &str = r#"(() => {
  const panel = document.querySelector('main').getBoundingClientRect();
  const cards = Array.from(document.querySelectorAll('ol.proposals > li.proposal'));
  const overflows = [];
  let urlShare = 1;
  const describe = e => e.tagName.toLowerCase() + (e.className ? '.' + e.className.replace(/ /g, '.') : '');
  cards.forEach((card, i) => {
    const box = card.getBoundingClientRect();
    if (box.left < panel.left - 0.5 || box.right > panel.right + 0.5) {
      overflows.push(`card ${i} spans ${box.left}..${box.right}, the panel ${panel.left}..${panel.right}`);
    }
    if (card.scrollWidth > card.clientWidth) {
      overflows.push(`card ${i} scrolls: ${card.scrollWidth} > ${card.clientWidth}`);
    }
    for (const e of card.querySelectorAll('*')) {
      const r = e.getBoundingClientRect();
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5) {
        overflows.push(`card ${i}: ${describe(e)} spans ${r.left}..${r.right}, the card ${box.left}..${box.right}`);
      }
    }
    const url = card.querySelector('code.url').parentElement.getBoundingClientRect();
    urlShare = Math.min(urlShare, url.width / box.width);
  });
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    cards: cards.length,
    flagged: document.querySelectorAll('li.proposal .hidden-chars').length,
    urlShare,
    overflows,
  };
})()"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_list_fits_a_laptop_and_a_phone_with_long_values() {
    use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;

    let host = Host::for_run(
        "tenant:acme-corporation-international/agent:invoice-assistant",
        "run-2026-05-01T12:00:00Z-7f3c9a1e5b2d4f60",
    );
    host.propose(&pay()).await;
    let long_url = format!(
        "https://docs.example.com/admin/organisations/acme-corporation-international/billing/invoices/2026-118/line-items?session=3f9c2e7a4b1d8f6e0a5c9b2d7e4f1a3c&redirect=%2Fadmin%2Forganisations%2Facme-corporation-international%2Fbilling&token={}",
        "9e107d9d372bb6826bd81d3542a419d6".repeat(6)
    );
    let long = host.propose_at(
        &long_url,
        &json!({
            "method": "fill",
            "selector": "form#invoice-2026-118 > fieldset.payment-details:nth-of-type(2) > div.row > input[name=\"card-holder-name\"][data-testid=\"billing-card-holder-name-input\"]",
            "description": "enter the card holder's name exactly as printed on the company credit card used for the monthly hosting invoices of Acme Corporation International",
            "arguments": {"value": "Acme Corporation International Ltd."},
        }),
    )
    .await;
    host.propose_at(
        &format!("https://docs.example.com/{}", "x".repeat(400)),
        &json!({"method": "click", "selector": format!("#{}", "y".repeat(200))}),
    )
    .await;
    // Issue 21's example: reads "open the docs Delete All" unless flagged.
    host.propose(&json!({"method": "click", "selector": "a#docs", "description": "open the docs\u{202e}llA eteleD"}))
        .await;
    let (site, _) = serve(host.router(), PAGES_IP).await;
    let chromium = Chromium::launch().await;
    chromium.sign_in(site, "alice").await;
    let run_url = format!(
        "http://{site}{}",
        ApprovalPages::run_path(&host.actor, &host.run)
    );

    for (width, height, mobile, name) in [
        (1100, 1400, false, "run-page-laptop.png"),
        (390, 844, true, "run-page-phone.png"),
    ] {
        let tab = chromium.browser.new_page("about:blank").await.unwrap();
        tab.execute(SetDeviceMetricsOverrideParams::new(
            width, height, 1.0, mobile,
        ))
        .await
        .unwrap();
        tab.goto(run_url.as_str()).await.unwrap();
        wait_for(&tab, "document.readyState === 'complete'").await;
        let fit: Fit = eval(&tab, MEASURE_FIT).await;
        eprintln!("{width} px: {fit:?}");
        assert_eq!(fit.inner_width, f64::from(width as u32), "{name}");
        assert!(
            fit.scroll_width <= fit.inner_width,
            "{width} px: the page scrolls sideways ({} > {})",
            fit.scroll_width,
            fit.inner_width
        );
        assert_eq!(fit.cards, 4, "{width} px");
        assert_eq!(fit.overflows, Vec::<String>::new(), "{width} px");
        assert_eq!(
            fit.flagged, 1,
            "{width} px: the U+202E description is flagged"
        );
        assert!(
            fit.url_share >= 0.6,
            "{width} px: a URL gets only {:.0} % of its card",
            fit.url_share * 100.0
        );

        let picture = photograph(&tab, name).await;
        if std::env::var("COUNTERSIGN_UPDATE_DOCS").as_deref() == Ok("1") {
            let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/images");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::write(docs.join(name), &picture).unwrap();
        }
        // The long proposal's own page fits too. (A full-page screenshot
        // clears the device metrics: set them again.)
        tab.execute(SetDeviceMetricsOverrideParams::new(
            width, height, 1.0, mobile,
        ))
        .await
        .unwrap();
        tab.goto(format!(
            "http://{site}{}",
            ApprovalPages::proposal_path(&long.id)
        ))
        .await
        .unwrap();
        wait_for(&tab, "document.readyState === 'complete'").await;
        let (scroll_width, inner_width): (f64, f64) = eval(
            &tab,
            "[document.documentElement.scrollWidth, window.innerWidth]",
        )
        .await;
        assert_eq!(inner_width, f64::from(width as u32));
        assert!(
            scroll_width <= inner_width,
            "{width} px: the proposal page scrolls sideways ({scroll_width} > {inner_width})"
        );
        photograph(&tab, &format!("proposal-{name}")).await;
        tab.close().await.unwrap();
    }
    chromium.close().await;
}

/// A person signed in once (the cookie a host's sign-in route sets with
/// `TokenApprovers::session_cookie`), who then taps the approval link in
/// a notification on another site (a Slack or webmail page): the link
/// opens the proposal, signed in, with Approve on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_from_a_notice_on_another_site_opens_the_proposal_signed_in() {
    use countersign_approval_web::TokenApprovers;
    let host = Host::new();
    let proposal = host.propose(&pay()).await;
    let cookie = TokenApprovers::new()
        .cookie_name(support::APPROVER_COOKIE)
        .session_cookie("alice");
    let sign_in = Router::new().route(
        "/sign-in",
        get(move || async move { ([("set-cookie", cookie)], Html("signed in")) }),
    );
    let (site, log) = serve(host.router().merge(sign_in), PAGES_IP).await;
    let link = format!(
        "http://{site}{}",
        ApprovalPages::proposal_path(&proposal.id)
    );
    let notice_page = format!(
        "<!doctype html><title>#approvals</title><p>demo-agent waits for you: <a id=open href=\"{link}\">Review</a></p>"
    );
    let (chat, _) = serve(
        Router::new().route("/", get(move || async move { Html(notice_page) })),
        OTHER_IP,
    )
    .await;
    let chromium = Chromium::launch().await;
    let signed = chromium.open(&format!("http://{site}/sign-in")).await;
    assert_eq!(text(&signed, "body").await, "signed in");
    let page = chromium.open(&format!("http://{chat}/")).await;
    click_and_wait(&page, "#open").await;
    wait_for(&page, "location.href.includes('/proposals/')").await;
    wait_for(&page, "document.readyState === 'complete'").await;
    assert_eq!(
        log.statuses("GET", &ApprovalPages::proposal_path(&proposal.id)),
        [200],
        "the proposal page was answered as to a signed-in person"
    );
    assert_eq!(text(&page, "#approve").await, "Approve");
}
