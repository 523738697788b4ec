//! A page server on 127.0.0.2 and one headless Chromium for a test binary.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Mutex;

use axum::Router;
use axum::response::{Html, Redirect};
use axum::routing::{get, post};
use countersign_approval_core::{
    ActionRequest, ActorId, ApprovalId, Backend, OperationId, PageSnapshot, RunId, WriteAccess,
};
use countersign_backend_chromium::{Chromium, ChromiumOptions, Session, Tab};
use countersign_canonical_policy::{Action, AuthorizedUrl, Policy, StaticResolver};
use countersign_egress_guard::EgressGuard;
use futures_util::FutureExt;
use serde_json::Value;

pub mod host;

/// One case of a live test binary: an async function of the shared
/// fixture.
pub type Case = for<'a> fn(&'a Fixture) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Starts one browser with `options` and runs every case against it in
/// order, each caught on its own, then closes the browser and fails with
/// the list of the cases that failed. `CASES=a,b` runs only those cases
/// (for debugging).
pub fn run_cases(options: ChromiumOptions, cases: &[(&str, Case)]) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let fixture = Fixture::start(options).await;
        let only = std::env::var("CASES").ok();
        let mut failed = Vec::new();
        for (name, case) in cases {
            if only
                .as_deref()
                .is_some_and(|only| !only.split(',').any(|c| c == *name))
            {
                continue;
            }
            eprintln!("case {name}");
            if let Err(panic) = AssertUnwindSafe(case(&fixture)).catch_unwind().await {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                failed.push(format!("{name}: {message}"));
            }
        }
        fixture.chromium.clone().close().await.unwrap();
        assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
    });
}

/// The test page: widgets for every method, each counting trusted events.
pub const SITE: &str = include_str!("site.html");

/// The snapshot test page: targets at fixed places, counting every event
/// and DOM mutation a snapshot must not cause.
pub const SNAPSHOT_SITE: &str = include_str!("snapshot.html");

/// The attack page: targets a person would not see, or that the page
/// swaps for another element when our own input reaches it; counts every
/// trusted click by the id of the element it reached.
pub const ATTACK_SITE: &str = include_str!("attacks.html");

/// The element-identity page: a payment button in a form, a button that
/// relabels itself on our pointer move, and a clock and an unrelated
/// element the tests can set ticking; counts trusted clicks as the attack
/// page does.
pub const ELEMENT_SITE: &str = include_str!("element.html");

/// The observation page: a heading, buttons (one disabled), a link, a
/// checked box, a required field with a value and plain text; counts
/// trusted clicks by element id in `data-clicks<id>` on `<html>`.
pub const EYES_SITE: &str = include_str!("eyes.html");

/// A page that replaces `document.querySelector`, `getAttribute`,
/// `innerText`, `textContent` and `document.title` for its own scripts;
/// records the id of the element a trusted click reached in
/// `data-clicked` on `<html>`.
pub const LIAR_SITE: &str = include_str!("liar.html");

/// A page that opens a window (`#open`, noting in `data-closed` on
/// `<html>` whether it was closed) and has a `target=_blank` link to
/// `/alive`, counting in `data-heard` the messages that tab sends while it
/// is open.
pub const POPUP_SITE: &str = include_str!("popup.html");

/// A page whose `beforeunload` asks to confirm leaving.
pub const LEAVE_SITE: &str = include_str!("leave.html");

/// The binding page: buttons labelled only by CSS, an icon font or an SVG
/// title, and targets disguised over visible decoys by a filter, a clip, a
/// mask, `visibility` and `content-visibility`; counts trusted clicks by
/// the id of the element (or of its nearest ancestor with one) in `#log`.
pub const BINDING_SITE: &str = include_str!("binding.html");

/// A checkout form that posts to `/submit`, which the server records.
pub const FORM_SITE: &str = include_str!("form.html");

/// Every body `POST /submit` received, in order (this test binary's).
static SUBMISSIONS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The bodies `POST /submit` received since the last call.
pub fn take_submissions() -> Vec<String> {
    std::mem::take(&mut *SUBMISSIONS.lock().unwrap())
}

/// A checkout frame whose one button reads `label`; it tells its parent of
/// every trusted click it receives (`click:<id>` by `postMessage`), so a
/// test can count clicks that land in a frame of another origin.
fn frame_page(label: &str) -> String {
    format!(
        "<!doctype html><style>body {{ margin: 0; }} button {{ width: 280px; height: 80px; }}</style>\
         <button id=\"buy\">{label}</button><script>document.addEventListener(\"click\", (e) => \
         {{ if (e.isTrusted) parent.postMessage(\"click:\" + e.target.id, \"*\"); }}, true);</script>"
    )
}

/// The loopback address the tests serve on; 127.0.0.1 stays refused.
pub const SITE_IP: &str = "127.0.0.2";

/// Another site the policy allows, for frames embedded across sites: a
/// host of its own (not another port of [`SITE_IP`]), so Chromium's site
/// isolation puts its frames in another renderer process.
pub const OTHER_SITE_IP: &str = "127.0.0.4";

/// Serves `/` (the test page), `/other` (another page), `/redirect`
/// (302 to `/landed`), `/landed`, `/snapshot` (the snapshot test page) and
/// `/attacks` (the attack page) and `/element` (the element-identity page),
/// and for navigation and observation `/eyes`, `/liar`, `/popup`, `/leave`,
/// `/alert` (alerts while loading), `/hang` (never answers), `/download`
/// (an attachment), `/unsafe-redirect` (302 to a `file:` URL), `/to-refused` (302 to a host the policy refuses) on
/// 127.0.0.2, on a free port; and `/binding`, `/form` and `POST /submit`.
pub async fn serve() -> SocketAddr {
    serve_at(SITE_IP).await
}

/// The same pages on `ip`, on a free port.
pub async fn serve_at(ip: &str) -> SocketAddr {
    let app = Router::new()
        .route("/", get(|| async { Html(SITE) }))
        .route(
            "/other",
            get(|| async { Html("<p id=other>another page</p>") }),
        )
        .route("/snapshot", get(|| async { Html(SNAPSHOT_SITE) }))
        .route("/attacks", get(|| async { Html(ATTACK_SITE) }))
        .route("/element", get(|| async { Html(ELEMENT_SITE) }))
        .route("/binding", get(|| async { Html(BINDING_SITE) }))
        .route("/form", get(|| async { Html(FORM_SITE) }))
        .route(
            "/submit",
            post(|body: String| async move {
                SUBMISSIONS.lock().unwrap().push(body);
                Html("<p id=submitted>submitted</p>")
            }),
        )
        .route("/frame-pay5", get(|| async { Html(frame_page("Pay $5")) }))
        .route(
            "/frame-pay5000",
            get(|| async { Html(frame_page("Pay $5000 to attacker")) }),
        )
        .route("/eyes", get(|| async { Html(EYES_SITE) }))
        .route("/liar", get(|| async { Html(LIAR_SITE) }))
        .route("/popup", get(|| async { Html(POPUP_SITE) }))
        .route("/leave", get(|| async { Html(LEAVE_SITE) }))
        .route(
            "/alive",
            get(|| async {
                Html("<script>const c = new BroadcastChannel('alive'); setInterval(() => c.postMessage(1), 20);</script>")
            }),
        )
        .route(
            "/alert",
            get(|| async {
                Html("<title>Alert</title><script>alert('hello'); confirm('sure?'); prompt('name?')</script><p id=after>after the dialogs</p>")
            }),
        )
        .route(
            "/hang",
            get(|| async { std::future::pending::<Html<&'static str>>().await }),
        )
        .route(
            "/download",
            get(|| async {
                (
                    [
                        ("content-type", "application/octet-stream"),
                        ("content-disposition", "attachment; filename=\"x.bin\""),
                    ],
                    "not for disk",
                )
            }),
        )
        .route(
            "/unsafe-redirect",
            get(|| async { Redirect::to("file:///etc/passwd") }),
        )
        .route(
            "/to-refused",
            get(|| async { Redirect::to("http://refused.example/landing") }),
        )
        .route("/redirect", get(|| async { Redirect::to("/landed") }))
        .route(
            "/landed",
            get(|| async { Html("<button id=counter>landed</button>") }),
        );
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

/// The tests' policy: plain http on 127.0.0.2 and 127.0.0.4 only.
pub fn policy() -> Policy {
    Policy::builder()
        .allow_host(SITE_IP)
        .allow_host(OTHER_SITE_IP)
        .allow_special_use(format!("{OTHER_SITE_IP}/32"))
        .allow_schemes(["http"])
        .allow_special_use("127.0.0.2/32")
        .resolver(StaticResolver::new())
        .build()
        .unwrap()
}

/// Launch options for tests: the Debian binary (or `COUNTERSIGN_CHROMIUM`),
/// no sandbox (CI runs as root).
pub fn options() -> ChromiumOptions {
    let executable = std::env::var("COUNTERSIGN_CHROMIUM")
        .unwrap_or_else(|_| countersign_backend_chromium::DEFAULT_EXECUTABLE.to_owned());
    ChromiumOptions::new().executable(executable).no_sandbox()
}

/// One browser behind an in-process egress guard, one session and one tab,
/// with the page server.
pub struct Fixture {
    pub guard: EgressGuard,
    pub chromium: Chromium,
    pub session: Session,
    pub tab: Tab,
    pub site: SocketAddr,
    pub policy: Policy,
}

impl Fixture {
    /// Launches Chromium with `options` and the guard as its egress proxy.
    pub async fn start(options: ChromiumOptions) -> Fixture {
        let site = serve().await;
        let policy = policy();
        let guard = EgressGuard::bind(policy.clone(), "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let options = options.egress_proxy(format!("http://{}", guard.local_addr()));
        let chromium = Chromium::launch(options).await.unwrap();
        let session = chromium.new_session(policy.clone()).await.unwrap();
        let home = policy
            .authorize_destination(&format!("http://{site}/"))
            .await
            .unwrap();
        let tab = session.open(&home).await.unwrap();
        Fixture {
            guard,
            chromium,
            session,
            tab,
            site,
            policy,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.site)
    }

    /// Loads `path` afresh in the tab: a new document, every counter at zero.
    pub async fn load(&self, path: &str) {
        self.open(&self.url(path)).await;
    }

    /// Loads `address` (on any site the policy allows) in the tab; answers
    /// it as the policy accepted it.
    pub async fn open(&self, address: &str) -> AuthorizedUrl {
        let url = self.policy.authorize_destination(address).await.unwrap();
        self.tab.navigate(&url).await.unwrap();
        url
    }

    /// The snapshot `browser_propose` takes of `action` on `url` (the
    /// tab's page), with the action as the policy canonicalised it.
    pub async fn snapshot_of(&self, url: &AuthorizedUrl, action: &Value) -> (Action, PageSnapshot) {
        let action = self.policy.authorize_action(action).unwrap();
        let snapshot = self
            .tab
            .backend()
            .snapshot(url, &action)
            .await
            .unwrap()
            .expect("the chromium backend always answers with a snapshot");
        (action, snapshot)
    }

    /// An action request for `path` as Act would hand it over.
    pub async fn request(&self, path: &str, action: Value) -> ActionRequest {
        self.request_at(&self.url(path), action, WriteAccess::Open)
            .await
    }

    /// An action request for `url` with `writes`, as Act would hand it over.
    pub async fn request_at(&self, url: &str, action: Value, writes: WriteAccess) -> ActionRequest {
        ActionRequest {
            operation_id: OperationId::generate().unwrap(),
            approval_id: ApprovalId::generate().unwrap(),
            actor_id: ActorId::new("live-actor").unwrap(),
            run_id: RunId::new("live-run").unwrap(),
            url: self.policy.authorize_destination(url).await.unwrap(),
            action: self.policy.authorize_action(&action).unwrap(),
            writes,
        }
    }

    /// `expression` evaluated against the page's DOM (a JavaScript
    /// expression; `el(sel)` is `document.querySelector(sel)`).
    pub async fn read(&self, expression: &str) -> Value {
        let function = format!(
            "function () {{ const el = (s) => document.querySelector(s); return {expression}; }}"
        );
        self.tab.inspect(&function).await.unwrap()
    }

    /// The text of the element `selector`.
    pub async fn text(&self, selector: &str) -> String {
        let value = self
            .read(&format!(
                "el({}).textContent",
                serde_json::to_string(selector).unwrap()
            ))
            .await;
        value.as_str().unwrap().to_owned()
    }

    /// How many trusted input events the page has seen since it loaded.
    pub async fn trusted_events(&self) -> u64 {
        self.text("#trusted").await.parse().unwrap()
    }
}
