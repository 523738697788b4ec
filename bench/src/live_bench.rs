//! Benchmark 6: Act on the live Chromium backend (memory stores, a grant
//! bound to the page and to the target element the approver's snapshot
//! recorded) against a bare DevTools click of the same element on the same
//! page, and against the peer — Playwright's own `locator.click()` on the
//! same page, driving the same Chromium binary — in the same run.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use chromiumoxide::Browser;
use chromiumoxide::cdp::browser_protocol::page::GetFrameTreeParams;
use chromiumoxide::layout::Point;
use countersign_act_tool::{Act, Context, issue_page_grant};
use countersign_approval_core::{ActorId, RunId};
use countersign_backend_chromium::{Chromium, ChromiumOptions, DEFAULT_EXECUTABLE};
use countersign_canonical_policy::{Policy, StaticResolver};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use futures_util::StreamExt;

use crate::harness::{Budget, Row, Side, Target, compare, median};

const PAGE: &str = r#"<!doctype html>
<button id="count" style="margin: 40px">count</button> <output id="clicks">0</output>
<script>
  const clicks = document.getElementById("clicks");
  document.getElementById("count").addEventListener("click", (e) => {
    if (e.isTrusted) clicks.textContent = String(Number(clicks.textContent) + 1);
  });
</script>"#;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Whether `node` and `npm` run here; says that `rows` are skipped when
/// they do not.
pub(crate) fn node_available(rows: &str) -> bool {
    let runs = |program: &str| {
        Command::new(program)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let available = runs("node") && runs("npm");
    if !available {
        eprintln!("bench: no node/npm; {rows} skipped");
    }
    available
}

/// The Playwright peer: `bench/playwright/click.mjs` in a Node process of
/// its own, with its own headless Chromium from the same binary.
struct Playwright {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Playwright {
    /// Where the peer's script and its `package.json` live.
    fn dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("playwright")
    }

    /// Installs `playwright-core` (pinned by the committed lock file; it
    /// downloads no browser) when it is missing, then starts the peer on
    /// `url`. `None` when no `node`/`npm` is installed.
    fn start(url: &str, executable: &str) -> Result<Option<Playwright>, String> {
        if !node_available("the Playwright row is") {
            return Ok(None);
        }
        let dir = Self::dir();
        if !dir
            .join("node_modules/playwright-core/package.json")
            .exists()
        {
            let status = Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&dir)
                .status()
                .map_err(|e| format!("cannot run `npm ci` for the Playwright peer: {e}"))?;
            if !status.success() {
                return Err(format!(
                    "`npm ci` in `{}` failed with {status}",
                    dir.display()
                ));
            }
        }
        let mut child = Command::new("node")
            .arg(dir.join("click.mjs"))
            .args([url, executable])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the Playwright peer: {e}"))?;
        let input = child
            .stdin
            .take()
            .ok_or("the Playwright peer has no stdin")?;
        let output = BufReader::new(
            child
                .stdout
                .take()
                .ok_or("the Playwright peer has no stdout")?,
        );
        let mut peer = Playwright {
            child,
            input,
            output,
        };
        let ready = peer.line()?;
        if ready != "ready" {
            return Err(format!(
                "the Playwright peer answered `{ready}` instead of `ready`"
            ));
        }
        Ok(Some(peer))
    }

    fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        let read = self.output.read_line(&mut line).map_err(err)?;
        if read == 0 {
            return Err("the Playwright peer exited".to_owned());
        }
        Ok(line.trim().to_owned())
    }

    fn ask(&mut self, command: &str) -> Result<String, String> {
        writeln!(self.input, "{command}").map_err(err)?;
        self.input.flush().map_err(err)?;
        self.line()
    }

    /// `n` Playwright clicks; their elapsed time.
    fn click(&mut self, n: u64) -> Result<Duration, String> {
        let answer = self.ask(&format!("click {n}"))?;
        let nanos: u64 = answer
            .parse()
            .map_err(|_| format!("the Playwright peer answered `{answer}` to a click"))?;
        Ok(Duration::from_nanos(nanos))
    }

    /// The peer page's own count of trusted clicks.
    fn count(&mut self) -> Result<u64, String> {
        let answer = self.ask("count")?;
        answer
            .parse()
            .map_err(|_| format!("the Playwright peer's page counted `{answer}`"))
    }

    fn close(mut self) -> Result<(), String> {
        drop(self.input);
        let status = self.child.wait().map_err(err)?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("the Playwright peer exited with {status}"))
        }
    }
}

/// A form of `controls` named fields (hidden and visible, as a checkout
/// has) and its submit button `#count`, whose trusted clicks the page
/// counts; the submit itself is kept on the page, so every sample acts on
/// the same document.
fn form_page(controls: usize) -> String {
    let mut page =
        String::from("<!doctype html><form id=\"checkout\" action=\"/pay\" method=\"post\">");
    for i in 0..controls {
        if i % 2 == 0 {
            page.push_str(&format!(
                "<input type=hidden name=h{i} value=\"hidden value {i}\">"
            ));
        } else {
            page.push_str(&format!(
                "<label>Field {i} <input type=text name=f{i} value=\"visible value {i}\"></label>"
            ));
        }
    }
    page.push_str(
        "<button id=\"count\" type=\"submit\" style=\"margin: 40px\">Pay</button></form>\
         <output id=\"clicks\">0</output>\
         <script>\
           const clicks = document.getElementById(\"clicks\");\
           document.getElementById(\"count\").addEventListener(\"click\", (e) => {\
             if (e.isTrusted) clicks.textContent = String(Number(clicks.textContent) + 1);\
           });\
           document.getElementById(\"checkout\").addEventListener(\"submit\", (e) => e.preventDefault());\
         </script>",
    );
    page
}

/// How many controls the submit row's form binds.
const FORM_CONTROLS: usize = 20;

/// The Chromium binary the live rows drive, `None` (and a line saying
/// which `rows` are skipped) when it is not installed.
pub(crate) fn chromium_executable(rows: &str) -> Option<String> {
    let executable =
        std::env::var("COUNTERSIGN_CHROMIUM").unwrap_or_else(|_| DEFAULT_EXECUTABLE.to_owned());
    if std::path::Path::new(&executable).exists() {
        Some(executable)
    } else {
        eprintln!("bench: no chromium at `{executable}`; {rows} skipped");
        None
    }
}

/// The live rows' policy (plain http on 127.0.0.2) and launch options:
/// their pages are on loopback, so the browser needs no egress guard.
pub(crate) fn loopback_browser(executable: &str) -> Result<(Policy, ChromiumOptions), String> {
    let policy = Policy::builder()
        .allow_host("127.0.0.2")
        .allow_schemes(["http"])
        .allow_special_use("127.0.0.2/32")
        .resolver(StaticResolver::new())
        .build()
        .map_err(err)?;
    let options = ChromiumOptions::new()
        .executable(executable)
        .no_sandbox()
        .allow_unproxied_egress();
    Ok((policy, options))
}

/// Runs the comparisons; empty when no Chromium is installed.
pub fn click(budget: Budget) -> Result<Vec<Row>, String> {
    let Some(executable) = chromium_executable("the live rows are") else {
        return Ok(Vec::new());
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(err)?;
    let (policy, options) = loopback_browser(&executable)?;
    let chromium = rt.block_on(Chromium::launch(options)).map_err(err)?;

    let button = LiveTab::open(&rt, &chromium, &policy, PAGE.to_owned(), budget)?;
    let (subject, baseline, note) = button.compare(&rt, budget)?;
    let bound = if button.page.element.is_some() {
        "page- and element-bound grant"
    } else {
        "page-bound grant; this backend recorded no element"
    };
    let mut rows = vec![Row {
        name: format!("Act click on live Chromium (memory store, {bound})"),
        baseline_name: "bare DevTools click (move, press, release) of the same element".to_owned(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.35),
        note,
    }];

    let form = LiveTab::open(&rt, &chromium, &policy, form_page(FORM_CONTROLS), budget)?;
    let bound_fields = form
        .page
        .element
        .as_ref()
        .and_then(|element| element.submission())
        .map(|set| set.fields().len());
    // Each control, and the submitter, which a named button is not.
    if bound_fields != Some(FORM_CONTROLS) {
        return Err(format!(
            "the submit's grant bound {bound_fields:?} form fields, expected {FORM_CONTROLS}"
        ));
    }
    let (subject, baseline, note) = form.compare(&rt, budget)?;
    rows.push(Row {
        name: format!(
            "Act submit on live Chromium (element-bound grant binding a form of {FORM_CONTROLS} controls)"
        ),
        baseline_name: "bare DevTools click (move, press, release) of the same submit button".to_owned(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.5),
        note: format!(
            "{note}; the form data set ({FORM_CONTROLS} fields) is read with the identity before each input event"
        ),
    });

    let peer = against_playwright(
        budget,
        &rt,
        &button.site,
        &executable,
        &button.context,
        &button.act,
        &button.page,
    );
    rt.block_on(chromium.close()).map_err(err)?;
    rows.extend(peer?);
    Ok(rows)
}

/// One page served on 127.0.0.2, open in a tab of its own session, with
/// the grant binding its approver's snapshot recorded and a second DevTools
/// client for the bare baseline.
struct LiveTab {
    site: String,
    tab: countersign_backend_chromium::Tab,
    context: Context,
    act: Act,
    /// What the approver's snapshot recorded: the page and, where the
    /// backend records one, the target element's identity.
    page: countersign_approval_core::PageBinding,
    snapshot_ms: f64,
    bare: chromiumoxide::Page,
    /// The centre of `#count`, where the bare baseline clicks.
    point: Point,
}

impl LiveTab {
    /// Serves `html` and opens it; takes the approver's snapshot of a click
    /// on `#count` (timed here, outside the click comparison).
    fn open(
        rt: &tokio::runtime::Runtime,
        chromium: &Chromium,
        policy: &Policy,
        html: String,
        budget: Budget,
    ) -> Result<LiveTab, String> {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(("127.0.0.2", 0)))
            .map_err(err)?;
        let site = format!("http://{}/", listener.local_addr().map_err(err)?);
        let app = Router::new().route("/", get(move || async move { Html(html) }));
        rt.spawn(async move { axum::serve(listener, app).await });
        rt.block_on(async {
            let session = chromium.new_session(policy.clone()).await.map_err(err)?;
            let url = policy.authorize_destination(&site).await.map_err(err)?;
            let tab = session.open(&url).await.map_err(err)?;
            // The baseline attaches its own DevTools client to the same tab.
            let bare = bare_client(chromium, &tab).await?;
            let centre = tab
                .inspect(
                    "function () { const r = document.getElementById('count').getBoundingClientRect(); \
                     return [r.left + r.width / 2, r.top + r.height / 2]; }",
                )
                .await
                .map_err(err)?;
            let x = centre[0].as_f64().ok_or("no x")?;
            let y = centre[1].as_f64().ok_or("no y")?;
            let context = Context::builder()
                .actor_id(ActorId::new("bench-actor").map_err(err)?)
                .run_id(RunId::new("bench-run").map_err(err)?)
                .backend(tab.backend())
                .source_policy(policy.clone())
                .operation_store(InMemoryOperationStore::new())
                .approval_store(std::sync::Arc::new(InMemoryApprovalStore::new()))
                .build()
                .map_err(err)?;
            let canonical = policy.authorize_action(&click_action()).map_err(err)?;
            let mut times = Vec::new();
            let mut page = None;
            for _ in 0..budget.samples.max(3) {
                let start = Instant::now();
                let snapshot = tab.approval(&url, &canonical).await.map_err(err)?;
                times.push(start.elapsed().as_secs_f64() * 1e3);
                page = Some(snapshot.page);
            }
            Ok(LiveTab {
                site,
                act: Act::new(context.clone()),
                context,
                page: page.ok_or("no snapshot was taken")?,
                snapshot_ms: median(&mut times),
                tab,
                bare,
                point: Point { x, y },
            })
        })
    }

    /// Act's element-bound click against the bare DevTools click, every
    /// one counted by the page: `(subject, baseline, note)`.
    fn compare(
        &self,
        rt: &tokio::runtime::Runtime,
        budget: Budget,
    ) -> Result<(Side, Side, String), String> {
        let mut failures = 0u64;
        let mut bare_clicks = 0u64;
        let mut first_bare_failure: Option<String> = None;
        let mut act_clicks = 0u64;
        let (subject, baseline) = compare(
            budget,
            |n| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..n {
                        match self.bare.click(self.point).await {
                            Ok(_) => bare_clicks += 1,
                            Err(e) => {
                                first_bare_failure.get_or_insert_with(|| e.to_string());
                            }
                        }
                    }
                    start.elapsed()
                })
            },
            |n| {
                rt.block_on(async {
                    let calls =
                        issue_clicks(&self.context, &self.page, &self.site, n, &mut failures).await;
                    let start = Instant::now();
                    for call in &calls {
                        if self.act.execute_json(call).await["status"] == "ok" {
                            act_clicks += 1;
                        } else {
                            failures += 1;
                        }
                    }
                    start.elapsed()
                })
            },
        );
        let on_page = rt
            .block_on(
                self.tab.inspect(
                    "function () { return document.getElementById('clicks').textContent; }",
                ),
            )
            .map_err(err)?;
        if failures > 0 {
            return Err(format!("{failures} live Act calls failed"));
        }
        // A baseline that did nothing would make any subject look slow.
        if let Some(failure) = first_bare_failure {
            return Err(format!("bare DevTools clicks failed, the first: {failure}"));
        }
        let counted: u64 = on_page.as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
        if counted != bare_clicks + act_clicks {
            return Err(format!(
                "the page counted {counted} clicks, expected {}",
                bare_clicks + act_clicks
            ));
        }
        let note = format!(
            "same tab and run; {act_clicks} Act clicks and {bare_clicks} bare clicks, every one counted by the page; \
             the approver's snapshot (page, element identity, outlined screenshot) takes {:.1} ms at p50",
            self.snapshot_ms
        );
        Ok((subject, baseline, note))
    }
}

/// The action every live row performs.
fn click_action() -> serde_json::Value {
    serde_json::json!({"method": "click", "selector": "#count"})
}

/// The benchmark tab through a DevTools client of its own, for the
/// baselines. The second client learns of the tab asynchronously, and the
/// page it lists sometimes belongs to a session the browser has already
/// dropped ("Session with given id not found"), for good: the page is
/// taken only once a call through it answers, connecting afresh while
/// it does not, for at most 10 s.
async fn bare_client(
    chromium: &Chromium,
    tab: &countersign_backend_chromium::Tab,
) -> Result<chromiumoxide::Page, String> {
    let mut last = String::from("the tab was not listed");
    for _ in 0..50 {
        let (mut browser, mut handler) = Browser::connect(chromium.devtools_url())
            .await
            .map_err(err)?;
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        for _ in 0..10 {
            browser.fetch_targets().await.map_err(err)?;
            let page = browser
                .pages()
                .await
                .map_err(err)?
                .into_iter()
                .find(|p| p.target_id().inner() == tab.target().as_str());
            let Some(page) = page else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            // A call the browser itself answers through the page's session.
            match page.execute(GetFrameTreeParams::default()).await {
                Ok(_) => return Ok(page),
                Err(e) => {
                    last = e.to_string();
                    break;
                }
            }
        }
        handler.abort();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "the benchmark tab is not usable from a second client within 10 s: {last}"
    ))
}

/// Issues `n` grants bound to `page` for a click on `#count` (the host's
/// side, kept out of the timed part) and returns the Act calls that use
/// them; a grant that could not be issued counts in `failures`.
async fn issue_clicks(
    context: &Context,
    page: &countersign_approval_core::PageBinding,
    site: &str,
    n: u64,
    failures: &mut u64,
) -> Vec<serde_json::Value> {
    let action = click_action();
    let mut calls = Vec::new();
    for _ in 0..n {
        match issue_page_grant(context, page, site, &action, Duration::from_secs(600)).await {
            Ok(grant) => calls.push(serde_json::json!({
                "url": site, "approval_id": grant.id.as_str(),
                "method": "click", "selector": "#count",
            })),
            Err(_) => *failures += 1,
        }
    }
    calls
}

/// Act's element-bound click against Playwright's `locator.click()` on the
/// same page: samples alternate between the two, each on its own tab and
/// browser process (the peer starts its own from the same binary).
fn against_playwright(
    budget: Budget,
    rt: &tokio::runtime::Runtime,
    site: &str,
    executable: &str,
    context: &Context,
    act: &Act,
    page: &countersign_approval_core::PageBinding,
) -> Result<Option<Row>, String> {
    let Some(mut peer) = Playwright::start(site, executable)? else {
        return Ok(None);
    };
    let mut failures = 0u64;
    let mut first_failure = None;
    let mut peer_clicks = 0u64;
    let mut peer_error = None;
    let (subject, baseline) = compare(
        budget,
        |n| match peer.click(n) {
            Ok(elapsed) => {
                peer_clicks += n;
                elapsed
            }
            Err(e) => {
                peer_error = Some(e);
                Duration::ZERO
            }
        },
        |n| {
            rt.block_on(async {
                let calls = issue_clicks(context, page, site, n, &mut failures).await;
                let start = Instant::now();
                for call in &calls {
                    let result = act.execute_json(call).await;
                    if result["status"] != "ok" {
                        failures += 1;
                        first_failure.get_or_insert(result);
                    }
                }
                start.elapsed()
            })
        },
    );
    if let Some(e) = peer_error {
        return Err(e);
    }
    let counted = peer.count()?;
    peer.close()?;
    if failures > 0 {
        return Err(format!(
            "{failures} live Act calls failed beside Playwright, the first with {}",
            first_failure.unwrap_or_default()
        ));
    }
    if counted != peer_clicks {
        return Err(format!(
            "the Playwright peer's page counted {counted} clicks, expected {peer_clicks}"
        ));
    }
    Ok(Some(Row {
        name: "Act click on live Chromium (element-bound grant, every check) vs the peer".to_owned(),
        baseline_name: "Playwright 1.65.1 `locator.click()` (its actionability checks), same page, same Chromium binary".to_owned(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.0),
        note: format!(
            "samples alternate between the two; {peer_clicks} Playwright clicks, every one counted by its page"
        ),
    }))
}

/// How many buttons the observation benchmark's page has.
const OBSERVED_ELEMENTS: usize = 1000;

/// A page of [`OBSERVED_ELEMENTS`] buttons in a list: as many elements an
/// observation gives refs to.
fn many_buttons() -> String {
    let mut page = String::from("<!doctype html><title>Many</title><ul>");
    for i in 0..OBSERVED_ELEMENTS {
        page.push_str(&format!("<li><button id=b{i}>Button {i}</button></li>"));
    }
    page.push_str("</ul>");
    page
}

/// `Backend::observe` on the live backend (a page of 1,000 buttons) against
/// a bare `Accessibility.getFullAXTree` of the same page from a DevTools
/// client of its own, in the same run; empty when no Chromium is
/// installed.
pub fn observe(budget: Budget) -> Result<Vec<Row>, String> {
    use chromiumoxide::cdp::browser_protocol::accessibility::GetFullAxTreeParams;
    use countersign_approval_core::{Backend, SnapshotLimits};

    let Some(executable) = chromium_executable("the observe row is") else {
        return Ok(Vec::new());
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(err)?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(("127.0.0.2", 0)))
        .map_err(err)?;
    let site = format!("http://{}/", listener.local_addr().map_err(err)?);
    let page_html = many_buttons();
    let app = Router::new().route("/", get(move || async move { Html(page_html) }));
    rt.spawn(async move { axum::serve(listener, app).await });
    let (policy, options) = loopback_browser(&executable)?;
    let (chromium, tab) = rt.block_on(async {
        let chromium = Chromium::launch(options).await.map_err(err)?;
        let session = chromium.new_session(policy.clone()).await.map_err(err)?;
        let url = policy.authorize_destination(&site).await.map_err(err)?;
        let tab = session.open(&url).await.map_err(err)?;
        Ok::<_, String>((chromium, tab))
    })?;
    let backend = tab.backend();

    // The baseline: the same tab through a DevTools client of its own.
    let bare = rt.block_on(bare_client(&chromium, &tab))?;
    let frame = rt
        .block_on(bare.mainframe())
        .map_err(err)?
        .ok_or("the benchmark tab has no main frame")?;

    // Both sides see the whole page: every button has a ref.
    let seen = rt.block_on(backend.observe()).map_err(err)?;
    let refs = seen
        .nodes
        .iter()
        .filter(|n| n.element_ref.is_some())
        .count();
    if refs < OBSERVED_ELEMENTS {
        return Err(format!(
            "the observation gave {refs} refs, expected at least {OBSERVED_ELEMENTS}"
        ));
    }
    let rendered = seen.render(SnapshotLimits::default());
    let mut bare_nodes = 0usize;
    let mut bare_failures = 0u64;
    let mut failures = 0u64;
    let mut first_failure: Option<String> = None;
    let mut first_bare_failure: Option<String> = None;
    let (subject, baseline) = compare(
        budget,
        |n| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..n {
                    let params = GetFullAxTreeParams {
                        depth: None,
                        frame_id: Some(frame.clone()),
                    };
                    match bare.execute(params).await {
                        Ok(tree) => bare_nodes = tree.result.nodes.len(),
                        Err(e) => {
                            bare_failures += 1;
                            first_bare_failure.get_or_insert_with(|| format!("bare read: {e}"));
                        }
                    }
                }
                start.elapsed()
            })
        },
        |n| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..n {
                    if let Err(e) = backend.observe().await {
                        failures += 1;
                        first_failure.get_or_insert_with(|| format!("observe: {e}"));
                    }
                }
                start.elapsed()
            })
        },
    );
    rt.block_on(chromium.close()).map_err(err)?;
    if failures + bare_failures > 0 {
        return Err(format!(
            "{failures} observations and {bare_failures} bare tree reads failed; first failures: {}",
            [first_failure, first_bare_failure]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    Ok(vec![Row {
        name: format!("Backend::observe on live Chromium ({OBSERVED_ELEMENTS} buttons)"),
        baseline_name: "bare DevTools Accessibility.getFullAXTree of the same page".to_owned(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.5),
        note: format!(
            "same tab and run; the observation shows {} nodes with {refs} refs \
             ({} bytes rendered with the default limits), the bare tree has {bare_nodes} nodes; \
             observe adds two Page.getFrameTree calls, the policy check and the mapping",
            seen.nodes.len(),
            rendered.text.len()
        ),
    }])
}
