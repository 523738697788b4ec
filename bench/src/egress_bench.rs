//! Benchmark 6: the egress guard. A local page with 50 subresources loaded
//! in headless Chromium through the guard against the same page loaded
//! directly (same binary, same run, alternating), and the guard's added p50
//! per new connection (a `CONNECT` tunnel against a direct TCP connection).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Path;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use countersign_canonical_policy::{Policy, StaticResolver};
use countersign_egress_guard::EgressGuard;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use crate::harness::{Row, Side, Target, median};

/// How many subresources the page loads.
const SUBRESOURCES: usize = 50;
/// Where the page is served; 127.0.0.1 stays refused by the guard.
const SITE_IP: &str = "127.0.0.2";

fn chromium() -> String {
    std::env::var("COUNTERSIGN_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned())
}

/// The measured page: 50 uncached images; on load it tells its parent
/// (the driver) its own `loadEventStart`.
fn page_html() -> String {
    let mut html = String::from("<!doctype html><html><head><title>fifty</title></head><body>");
    for i in 0..SUBRESOURCES {
        let _ = write!(html, "<img src=\"/img/{i}.png\" width=\"1\" height=\"1\">");
    }
    html.push_str(
        "<script>addEventListener('load', () => setTimeout(() => parent.postMessage(\
         performance.getEntriesByType('navigation')[0].loadEventStart, '*'), 0));</script>\
         </body></html>",
    );
    html
}

/// The driver page: loads the measured page `rounds` times under each
/// name, one iframe at a time, in the order direct, guarded, guarded,
/// direct, …, writes the load times into `#result`, then releases the
/// `/hold` image that keeps its own load event (and so `--dump-dom`) waiting.
fn driver_html(port: u16, rounds: usize) -> String {
    format!(
        r#"<!doctype html><html><head><title>driver</title></head><body>
<p id="result">pending</p><img src="/hold" width="1" height="1">
<script>
const out = {{ direct: [], guarded: [] }};
let i = 0, current = null;
function next() {{
  if (i >= 2 * {rounds}) {{
    document.getElementById('result').textContent =
      'direct=' + out.direct.join(',') + ';guarded=' + out.guarded.join(',') + ';';
    fetch('/release');
    return;
  }}
  const guarded = i % 4 === 1 || i % 4 === 2;
  const frame = document.createElement('iframe');
  frame.src = 'http://' + (guarded ? 'guarded' : 'direct') + '.test:{port}/page.html?i=' + i;
  current = {{ frame, guarded }};
  i += 1;
  document.body.appendChild(frame);
}}
addEventListener('message', (e) => {{
  out[current.guarded ? 'guarded' : 'direct'].push(e.data);
  current.frame.remove();
  next();
}});
next();
</script></body></html>"#
    )
}

/// A 1×1 transparent PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

async fn start_site(rounds: usize) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind((SITE_IP, 0))
        .await
        .map_err(|e| format!("cannot listen on {SITE_IP}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let html = Arc::new(page_html());
    let driver = Arc::new(driver_html(addr.port(), rounds));
    let held = Arc::new(Notify::new());
    let released = Arc::clone(&held);
    let router = Router::new()
        .route(
            "/driver.html",
            get(move || {
                let driver = Arc::clone(&driver);
                async move {
                    (
                        [(header::CONTENT_TYPE, "text/html")],
                        driver.as_str().to_owned(),
                    )
                }
            }),
        )
        .route(
            "/hold",
            get(move || {
                let held = Arc::clone(&held);
                async move {
                    // Never hold a broken run forever.
                    let _ = tokio::time::timeout(Duration::from_secs(300), held.notified()).await;
                    ([(header::CONTENT_TYPE, "image/png")], PNG)
                }
            }),
        )
        .route(
            "/release",
            get(move || {
                released.notify_one();
                async { "released" }
            }),
        )
        .route(
            "/page.html",
            get(move || {
                let html = Arc::clone(&html);
                async move {
                    (
                        [
                            (header::CONTENT_TYPE, "text/html"),
                            (header::CACHE_CONTROL, "no-store"),
                        ],
                        html.as_str().to_owned(),
                    )
                }
            }),
        )
        .route(
            "/img/{n}",
            get(|Path(_n): Path<String>| async {
                (
                    [
                        (header::CONTENT_TYPE, "image/png"),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                    PNG,
                )
                    .into_response()
            }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(addr)
}

async fn start_echo() -> Result<SocketAddr, String> {
    let listener = TcpListener::bind((SITE_IP, 0))
        .await
        .map_err(|e| format!("cannot listen on {SITE_IP}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    Ok(addr)
}

/// One headless Chromium behind the guard, except for `direct.test`, which
/// bypasses it; returns the driver's load times (ns), direct and guarded.
async fn run_driver(site: SocketAddr, guard: SocketAddr) -> Result<(Vec<f64>, Vec<f64>), String> {
    let profile =
        std::env::temp_dir().join(format!("countersign-bench-chromium-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    let mut command = tokio::process::Command::new(chromium());
    command.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ]);
    command.arg(format!("--user-data-dir={}", profile.display()));
    command.arg(format!("--proxy-server=http://{guard}"));
    command.arg("--proxy-bypass-list=<-loopback>;direct.test");
    command.arg(format!(
        "--host-resolver-rules=MAP direct.test {}",
        site.ip()
    ));
    command
        .arg("--dump-dom")
        .arg(format!("http://direct.test:{}/driver.html", site.port()))
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .map_err(|_| "chromium did not finish within 300 s".to_owned())?
        .map_err(|e| format!("cannot run `{}`: {e}", chromium()));
    let _ = std::fs::remove_dir_all(&profile);
    let output = output?;
    let dom = String::from_utf8_lossy(&output.stdout);
    let list = |name: &str| -> Result<Vec<f64>, String> {
        let text = dom
            .split(&format!("{name}="))
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .ok_or_else(|| format!("the driver reported no `{name}` times: {dom}"))?;
        text.split(',')
            .map(|ms| ms.trim().parse::<f64>().map(|ms| ms * 1e6))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("bad `{name}` time in {text:?}: {e}"))
    };
    Ok((list("direct")?, list("guarded")?))
}

/// One new connection and a one-byte round trip, directly or through a tunnel.
async fn connection_once(echo: SocketAddr, guard: Option<SocketAddr>) -> Result<f64, String> {
    let start = Instant::now();
    let mut stream = match guard {
        None => TcpStream::connect(echo).await.map_err(|e| e.to_string())?,
        Some(guard) => {
            let mut stream = TcpStream::connect(guard).await.map_err(|e| e.to_string())?;
            let authority = format!("site.test:{}", echo.port());
            stream
                .write_all(
                    format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
                )
                .await
                .map_err(|e| e.to_string())?;
            let mut head = Vec::with_capacity(64);
            let mut buf = [0u8; 256];
            while !head.ends_with(b"\r\n\r\n") {
                let n = stream.read(&mut buf).await.map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err("the guard closed the tunnel".to_owned());
                }
                head.extend_from_slice(&buf[..n]);
            }
            if !head.starts_with(b"HTTP/1.1 200") {
                return Err(format!(
                    "the guard refused: {}",
                    String::from_utf8_lossy(&head)
                ));
            }
            stream
        }
    };
    let _ = stream.set_nodelay(true);
    stream.write_all(b"x").await.map_err(|e| e.to_string())?;
    let mut one = [0u8; 1];
    stream
        .read_exact(&mut one)
        .await
        .map_err(|e| e.to_string())?;
    Ok(start.elapsed().as_nanos() as f64)
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// The page-load row and the section with its detail.
pub fn page_load(quick: bool) -> Result<(Row, String), String> {
    if !std::path::Path::new(&chromium()).exists() {
        return Err(format!(
            "the egress benchmark needs Chromium at `{}` (set COUNTERSIGN_CHROMIUM)",
            chromium()
        ));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let rounds = if quick { 2 } else { 41 };
        let site = start_site(rounds).await?;
        let echo = start_echo().await?;
        let policy = Policy::builder()
            .allow_host("guarded.test")
            .allow_host("site.test")
            .allow_schemes(["http", "https"])
            .allow_special_use(format!("{SITE_IP}/32"))
            .resolver(StaticResolver::answering_all([site.ip()]))
            .build()
            .map_err(|e| e.to_string())?;
        let guard = EgressGuard::bind(policy, "127.0.0.1:0".parse().map_err(|_| "bad address")?)
            .await
            .map_err(|e| e.to_string())?;
        let (mut direct, mut guarded) = run_driver(site, guard.local_addr()).await?;
        if direct.len() != rounds || guarded.len() != rounds {
            return Err(format!(
                "the driver loaded {} direct and {} guarded pages, not {rounds} each",
                direct.len(),
                guarded.len()
            ));
        }
        // The first load of each warms the connections and caches of its path.
        direct.remove(0);
        guarded.remove(0);
        let loads = rounds - 1;

        let connections = if quick { 20 } else { 2000 };
        let (mut bare, mut tunnelled) = (Vec::new(), Vec::new());
        for i in 0..connections {
            if i % 2 == 0 {
                bare.push(connection_once(echo, None).await?);
                tunnelled.push(connection_once(echo, Some(guard.local_addr())).await?);
            } else {
                tunnelled.push(connection_once(echo, Some(guard.local_addr())).await?);
                bare.push(connection_once(echo, None).await?);
            }
        }
        let refusals = guard.refusals();
        let mut refused_hosts = std::collections::BTreeMap::<String, usize>::new();
        for refusal in &refusals {
            *refused_hosts.entry(refusal.host().to_owned()).or_default() += 1;
        }
        guard.shutdown().await;

        let (direct_p50, guarded_p50) = (median(&mut direct), median(&mut guarded));
        let (bare_p50, tunnel_p50) = (median(&mut bare), median(&mut tunnelled));
        let added_us = (tunnel_p50 - bare_p50) / 1e3;
        let row = Row {
            name: format!("egress guard: page with {SUBRESOURCES} subresources in headless Chromium, through the guard"),
            baseline_name: "same page, same browser, same run, bypassing the guard".to_owned(),
            subject: Side { median_ns: guarded_p50 },
            baseline: Side { median_ns: direct_p50 },
            target: Target::TimeRatioAtMost(1.3),
            note: format!(
                "guard's added p50 per new connection: {added_us:.0} µs (tunnel {:.0} µs vs direct {:.0} µs)",
                tunnel_p50 / 1e3,
                bare_p50 / 1e3
            ),
        };
        let mut section = String::from("## Egress guard\n\n");
        let _ = writeln!(
            section,
            "A page on `{SITE_IP}` with {SUBRESOURCES} uncached images from the same host, loaded \
             {loads} times through the guard (as `guarded.test`) and {loads} times directly (as \
             `direct.test`, which the browser's proxy bypass list sends around the guard), one iframe \
             at a time in the order direct, guarded, guarded, direct, … in **one** headless Chromium \
             (after one untimed load of each). The figure is each page's own navigation timing \
             (`loadEventStart`). Median guarded load **{:.1} ms**, direct **{:.1} ms** \
             (guarded {:.1}–{:.1} ms, direct {:.1}–{:.1} ms).\n",
            guarded_p50 / 1e6,
            direct_p50 / 1e6,
            min(&guarded) / 1e6,
            max(&guarded) / 1e6,
            min(&direct) / 1e6,
            max(&direct) / 1e6
        );
        let _ = writeln!(
            section,
            "New connections: {connections} alternating samples of a fresh TCP connection and a one-byte \
             echo, directly against a `CONNECT` tunnel through the guard (policy check with a static \
             resolver, connect, splice). p50 direct **{:.0} µs**, through the guard **{:.0} µs**: \
             the guard adds **{added_us:.0} µs** per new connection at p50.",
            bare_p50 / 1e3,
            tunnel_p50 / 1e3
        );
        if !refused_hosts.is_empty() {
            let _ = writeln!(
                section,
                "\nChromium's own background requests, refused by the guard during the run \
                 (host, times): {}.",
                refused_hosts
                    .iter()
                    .map(|(host, n)| format!("`{host}` ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok((row, section))
    })
}
