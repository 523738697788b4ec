//! Read-only mode's cost: a page with 50 GET subresources loaded in a tab
//! whose every request is held and judged by the read-only gate (after an
//! act a rule approved), against the same page loaded in a bare tab of the
//! same browser that nothing intercepts. Same run, alternating.

use std::fmt::Write as _;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::Path;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use chromiumoxide::Browser;
use countersign_approval_core::{
    ActionRequest, ActorId, ApprovalId, Backend, OperationId, RunId, WriteAccess,
};
use countersign_backend_chromium::Chromium;
use futures_util::StreamExt;

use crate::harness::{Row, Side, Target, median};

/// How many subresources the page loads.
const SUBRESOURCES: usize = 50;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A 1×1 transparent PNG.
const PIXEL: [u8; 67] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// `/start` (a button the read-only act clicks), `/page/N` (50 images
/// unique to load `N`, so none comes from the cache) and `/img`.
async fn serve() -> Result<SocketAddr, String> {
    let app = Router::new()
        .route(
            "/start",
            get(|| async { Html("<button id=more>Show more</button>") }),
        )
        .route(
            "/page/{n}",
            get(|Path(n): Path<u64>| async move {
                let mut html = String::from("<!doctype html><title>fifty</title>");
                for i in 0..SUBRESOURCES {
                    let _ = write!(
                        html,
                        "<img src=\"/img?n={n}&i={i}\" width=\"1\" height=\"1\">"
                    );
                }
                Html(html)
            }),
        )
        .route(
            "/img",
            get(|| async {
                (
                    [
                        (header::CONTENT_TYPE, "image/png"),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                    PIXEL,
                )
                    .into_response()
            }),
        );
    let listener = tokio::net::TcpListener::bind(("127.0.0.2", 0))
        .await
        .map_err(err)?;
    let address = listener.local_addr().map_err(err)?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(address)
}

const LOAD_EVENT_START: &str = "performance.getEntriesByType('navigation')[0].loadEventStart";

/// The read-only row; `None` when no Chromium is installed.
pub fn page_load(quick: bool) -> Result<Option<Row>, String> {
    let Some(executable) = crate::live_bench::chromium_executable("the read-only row is") else {
        return Ok(None);
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(err)?;
    rt.block_on(async {
        let site = serve().await?;
        let (policy, options) = crate::live_bench::loopback_browser(&executable)?;
        let chromium = Chromium::launch(options).await.map_err(err)?;
        let session = chromium.new_session(policy.clone()).await.map_err(err)?;
        let start = policy
            .authorize_destination(&format!("http://{site}/start"))
            .await
            .map_err(err)?;
        let tab = session.open(&start).await.map_err(err)?;
        // An act a rule approved: the tab is read-only from it on.
        let request = ActionRequest {
            operation_id: OperationId::generate().map_err(err)?,
            approval_id: ApprovalId::generate().map_err(err)?,
            actor_id: ActorId::new("bench").map_err(err)?,
            run_id: RunId::new("bench").map_err(err)?,
            url: start,
            action: policy
                .authorize_action(&serde_json::json!({"method": "click", "selector": "#more"}))
                .map_err(err)?,
            writes: WriteAccess::ReadOnly {
                allowed: Vec::new(),
            },
        };
        tab.backend().perform(&request).await.map_err(err)?;

        let (browser, mut handler) = Browser::connect(chromium.devtools_url())
            .await
            .map_err(err)?;
        let driver = tokio::spawn(async move { while handler.next().await.is_some() {} });
        let bare = browser.new_page("about:blank").await.map_err(err)?;

        let rounds: u64 = if quick { 3 } else { 41 };
        let (mut held, mut open) = (Vec::new(), Vec::new());
        for n in 0..2 * rounds {
            let url = format!("http://{site}/page/{n}");
            // Order held, bare, bare, held, …
            if n % 4 == 0 || n % 4 == 3 {
                let url = policy.authorize_destination(&url).await.map_err(err)?;
                tab.navigate(&url).await.map_err(err)?;
                let ms = tab
                    .inspect(&format!("function () {{ return {LOAD_EVENT_START}; }}"))
                    .await
                    .map_err(err)?;
                held.push(ms.as_f64().ok_or("no load time in the held tab")?);
            } else {
                bare.goto(url).await.map_err(err)?;
                let ms: f64 = bare
                    .evaluate(LOAD_EVENT_START)
                    .await
                    .map_err(err)?
                    .into_value()
                    .map_err(err)?;
                open.push(ms);
            }
        }
        let refused = tab.refused_writes().len();
        driver.abort();
        chromium.close().await.map_err(err)?;
        if refused != 0 {
            return Err(format!("read-only mode refused {refused} of the page's GETs"));
        }
        // The first load of each warms its connections.
        held.remove(0);
        open.remove(0);
        Ok(Some(Row {
            name: format!(
                "page with {SUBRESOURCES} GET subresources in a read-only tab (every request held and judged)"
            ),
            baseline_name: "same page, same browser, in a tab nothing intercepts".to_owned(),
            subject: Side {
                median_ns: median(&mut held) * 1e6,
            },
            baseline: Side {
                median_ns: median(&mut open) * 1e6,
            },
            target: Target::TimeRatioAtMost(1.3),
            note: format!(
                "{} loads each, alternating; each page's own navigation timing (`loadEventStart`); uncached images; 0 requests refused",
                held.len()
            ),
        }))
    })
}
