//! Benchmark 6: Act on the live Chromium backend (memory stores, a
//! page-bound grant) against a bare DevTools click of the same element on
//! the same page, in the same run.

use std::time::{Duration, Instant};

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use chromiumoxide::Browser;
use chromiumoxide::layout::Point;
use countersign_act_tool::{Act, Context, issue_page_grant};
use countersign_approval_core::{ActorId, RunId};
use countersign_backend_chromium::{Chromium, ChromiumOptions, DEFAULT_EXECUTABLE};
use countersign_canonical_policy::{Policy, StaticResolver};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use futures_util::StreamExt;

use crate::harness::{Budget, Row, Target, compare};

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

/// Runs the comparison; `None` when no Chromium is installed.
pub fn click(budget: Budget) -> Result<Option<Row>, String> {
    let executable =
        std::env::var("COUNTERSIGN_CHROMIUM").unwrap_or_else(|_| DEFAULT_EXECUTABLE.to_owned());
    if !std::path::Path::new(&executable).exists() {
        eprintln!("bench: no chromium at `{executable}`; the live row is skipped");
        return Ok(None);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(err)?;

    let listener = rt
        .block_on(tokio::net::TcpListener::bind(("127.0.0.2", 0)))
        .map_err(err)?;
    let site = format!("http://{}/", listener.local_addr().map_err(err)?);
    let app = Router::new().route("/", get(|| async { Html(PAGE) }));
    rt.spawn(async move { axum::serve(listener, app).await });

    let policy = Policy::builder()
        .allow_host("127.0.0.2")
        .allow_schemes(["http"])
        .allow_special_use("127.0.0.2/32")
        .resolver(StaticResolver::new())
        .build()
        .map_err(err)?;
    // The page makes no request of its own and input causes none, so the
    // browser needs no egress guard here.
    let options = ChromiumOptions::new()
        .executable(&executable)
        .no_sandbox()
        .allow_unproxied_egress();
    let (chromium, tab) = rt.block_on(async {
        let chromium = Chromium::launch(options).await.map_err(err)?;
        let session = chromium.new_session(policy.clone()).await.map_err(err)?;
        let url = policy.authorize_destination(&site).await.map_err(err)?;
        let tab = session.open(&url).await.map_err(err)?;
        Ok::<_, String>((chromium, tab))
    })?;

    // The baseline attaches its own DevTools client to the same tab.
    let (bare, point) = rt.block_on(async {
        let (mut browser, mut handler) = Browser::connect(chromium.devtools_url())
            .await
            .map_err(err)?;
        tokio::spawn(async move { while handler.next().await.is_some() {} });
        browser.fetch_targets().await.map_err(err)?;
        // The second client learns of the tab asynchronously: poll, bounded.
        let mut page = None;
        for _ in 0..100 {
            page = browser
                .pages()
                .await
                .map_err(err)?
                .into_iter()
                .find(|p| p.target_id().inner() == tab.target().as_str());
            if page.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let page = page.ok_or("the benchmark tab is not visible to a second client within 10 s")?;
        let centre = tab
            .inspect(
                "function () { const r = document.getElementById('count').getBoundingClientRect(); \
                 return [r.left + r.width / 2, r.top + r.height / 2]; }",
            )
            .await
            .map_err(err)?;
        let x = centre[0].as_f64().ok_or("no x")?;
        let y = centre[1].as_f64().ok_or("no y")?;
        Ok::<_, String>((page, Point { x, y }))
    })?;

    let approvals = std::sync::Arc::new(InMemoryApprovalStore::new());
    let context = Context::builder()
        .actor_id(ActorId::new("bench-actor").map_err(err)?)
        .run_id(RunId::new("bench-run").map_err(err)?)
        .backend(tab.backend())
        .source_policy(policy)
        .operation_store(InMemoryOperationStore::new())
        .approval_store(approvals)
        .build()
        .map_err(err)?;
    let act = Act::new(context.clone());
    let page = rt.block_on(tab.observe()).map_err(err)?.binding();
    let action = serde_json::json!({"method": "click", "selector": "#count"});

    let mut failures = 0u64;
    let mut bare_clicks = 0u64;
    let mut act_clicks = 0u64;
    let (subject, baseline) = compare(
        budget,
        |n| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..n {
                    if bare.click(point).await.is_ok() {
                        bare_clicks += 1;
                    }
                }
                start.elapsed()
            })
        },
        |n| {
            rt.block_on(async {
                // Issuing is the host's side, untimed.
                let mut calls = Vec::new();
                for _ in 0..n {
                    match issue_page_grant(
                        &context,
                        &page,
                        &site,
                        &action,
                        Duration::from_secs(600),
                    )
                    .await
                    {
                        Ok(grant) => calls.push(serde_json::json!({
                            "url": site, "approval_id": grant.id.as_str(),
                            "method": "click", "selector": "#count",
                        })),
                        Err(_) => failures += 1,
                    }
                }
                let start = Instant::now();
                for call in &calls {
                    if act.execute_json(call).await["status"] == "ok" {
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
            tab.inspect("function () { return document.getElementById('clicks').textContent; }"),
        )
        .map_err(err)?;
    rt.block_on(chromium.close()).map_err(err)?;
    if failures > 0 {
        return Err(format!("{failures} live Act calls failed"));
    }
    let counted: u64 = on_page.as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
    if counted != bare_clicks + act_clicks {
        return Err(format!(
            "the page counted {counted} clicks, expected {}",
            bare_clicks + act_clicks
        ));
    }
    Ok(Some(Row {
        name: "Act click on live Chromium (memory store, page-bound grant)".to_owned(),
        baseline_name: "bare DevTools click (move, press, release) of the same element".to_owned(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.25),
        note: format!(
            "same tab and run; {act_clicks} Act clicks and {bare_clicks} bare clicks, every one counted by the page"
        ),
    }))
}
