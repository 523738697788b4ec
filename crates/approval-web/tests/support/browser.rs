//! One headless Chromium per test, driven over the DevTools protocol, and
//! loopback servers for the pages and for a hostile site.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use chromiumoxide::cdp::browser_protocol::network::CookieParam;
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::{Browser, BrowserConfig, Page};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::APPROVER_COOKIE;

/// The loopback address the approval pages are served on.
pub const PAGES_IP: &str = "127.0.0.1";
/// Another origin (and another site) on loopback, for the hostile page.
pub const OTHER_IP: &str = "127.0.0.2";

/// Every response a server gave: method, path and query, status.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<(String, String, u16)>>>);

impl Log {
    pub fn entries(&self) -> Vec<(String, String, u16)> {
        self.0.lock().unwrap().clone()
    }

    /// The statuses of `method` requests whose path ends with `suffix`.
    pub fn statuses(&self, method: &str, suffix: &str) -> Vec<u16> {
        self.entries()
            .into_iter()
            .filter(|(m, path, _)| m == method && path.split('?').next().unwrap().ends_with(suffix))
            .map(|(_, _, status)| status)
            .collect()
    }
}

/// Serves `router` on `ip`, on a free port, logging every response.
pub async fn serve(router: Router, ip: &str) -> (SocketAddr, Log) {
    let log = Log::default();
    let recorder = log.clone();
    let app = router.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let recorder = recorder.clone();
            async move {
                let method = request.method().to_string();
                let path = request
                    .uri()
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default();
                let response: Response = next.run(request).await;
                recorder
                    .0
                    .lock()
                    .unwrap()
                    .push((method, path, response.status().as_u16()));
                response
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (address, log)
}

/// A headless Chromium with a fresh profile; killed when dropped.
pub struct Chromium {
    pub browser: Browser,
    handler: JoinHandle<()>,
    _profile: tempfile::TempDir,
}

impl Drop for Chromium {
    fn drop(&mut self) {
        self.handler.abort();
    }
}

impl Chromium {
    /// Launches `/usr/bin/chromium` (or `COUNTERSIGN_CHROMIUM`), headless,
    /// without the sandbox (CI runs as root), 1100×1400.
    pub async fn launch() -> Chromium {
        let executable = std::env::var("COUNTERSIGN_CHROMIUM")
            .unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
        let profile = tempfile::Builder::new()
            .prefix("countersign-approval-web-")
            .tempdir()
            .unwrap();
        let config = BrowserConfig::builder()
            .chrome_executable(executable)
            .user_data_dir(profile.path())
            .no_sandbox()
            .launch_timeout(Duration::from_secs(60))
            .request_timeout(Duration::from_secs(30))
            .viewport(Viewport {
                width: 1100,
                height: 1400,
                ..Viewport::default()
            })
            .window_size(1100, 1400)
            .args([
                "disable-gpu",
                "no-first-run",
                "no-default-browser-check",
                "disable-background-networking",
                "disable-component-update",
                "disable-sync",
                "disable-breakpad",
                "disable-domain-reliability",
                "no-pings",
                "metrics-recording-only",
                "password-store=basic",
                "use-mock-keychain",
                "font-render-hinting=none",
            ])
            .build()
            .unwrap();
        let (browser, mut handler) = Browser::launch(config).await.unwrap();
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        Chromium {
            browser,
            handler,
            _profile: profile,
        }
    }

    /// Asks the browser to exit and waits until it has, so its profile
    /// directory is removed whole (dropping kills it without waiting).
    pub async fn close(mut self) {
        self.browser.close().await.unwrap();
        self.browser.wait().await.unwrap();
    }

    /// A new tab showing `url`.
    pub async fn open(&self, url: &str) -> Page {
        eprintln!("open {url}");
        let page = self.browser.new_page("about:blank").await.unwrap();
        page.goto(url).await.unwrap();
        wait_for(&page, "document.readyState === 'complete'").await;
        page
    }

    /// Signs `approver` in for the pages at `origin` (the tests'
    /// authentication reads this cookie).
    pub async fn sign_in(&self, origin: SocketAddr, approver: &str) {
        let page = self.browser.new_page("about:blank").await.unwrap();
        page.set_cookie(
            CookieParam::builder()
                .name(APPROVER_COOKIE)
                .value(approver)
                .url(format!("http://{origin}/"))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
        page.close().await.unwrap();
    }
}

/// `expression` evaluated in the page (through the protocol, which the
/// pages' CSP does not govern).
pub async fn eval<T: DeserializeOwned>(page: &Page, expression: &str) -> T {
    page.evaluate(expression)
        .await
        .unwrap_or_else(|e| panic!("`{expression}` failed: {e}"))
        .into_value()
        .unwrap_or_else(|e| panic!("`{expression}` gave an unexpected value: {e}"))
}

/// Waits (at most 20 s) until `expression` is true in the page, which may
/// be navigating meanwhile.
pub async fn wait_for(page: &Page, expression: &str) {
    eprintln!("wait for {expression}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(result) = page.evaluate(expression).await
            && result.into_value::<bool>().unwrap_or(false)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for `{expression}`"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clicks `selector` with real mouse events (scrolled into view, pressed
/// and released at its centre) and waits until the page left `from`.
pub async fn click_and_wait(page: &Page, selector: &str) {
    let before: String = eval(page, "location.href").await;
    eprintln!("click {selector} on {before}");
    // Input goes to the foreground tab only; a background one never
    // answers the mouse events.
    page.bring_to_front().await.unwrap();
    page.find_element(selector)
        .await
        .unwrap_or_else(|e| panic!("no `{selector}`: {e}"))
        .click()
        .await
        .unwrap();
    wait_for_navigation_from(page, &before).await;
}

/// Focuses `selector` and presses Enter on it, as a keyboard user would,
/// and waits until the page left where it was.
pub async fn press_enter_and_wait(page: &Page, selector: &str) {
    let before: String = eval(page, "location.href").await;
    page.bring_to_front().await.unwrap();
    let element = page.find_element(selector).await.unwrap();
    element.focus().await.unwrap();
    let focused: bool = eval(
        page,
        &format!("document.activeElement === document.querySelector({selector:?})"),
    )
    .await;
    assert!(focused, "`{selector}` did not take the focus");
    element.press_key("Enter").await.unwrap();
    wait_for_navigation_from(page, &before).await;
}

async fn wait_for_navigation_from(page: &Page, before: &str) {
    let expression = format!("location.href !== {before:?} && document.readyState === 'complete'");
    wait_for(page, &expression).await;
}

/// The text of the first element matching `selector` ("" if none).
pub async fn text(page: &Page, selector: &str) -> String {
    eval(
        page,
        &format!("(document.querySelector({selector:?}) || {{textContent: ''}}).textContent"),
    )
    .await
}

/// A full-page screenshot of `page`, also written to the tests' temporary
/// directory as `name`.
pub async fn photograph(page: &Page, name: &str) -> Vec<u8> {
    let picture = page
        .screenshot(ScreenshotParams::builder().full_page(true).build())
        .await
        .unwrap();
    std::fs::write(
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name),
        &picture,
    )
    .unwrap();
    picture
}
