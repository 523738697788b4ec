//! The launched browser, its sessions (browser contexts) and tabs.

use std::sync::Arc;

use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, CloseParams, EventDownloadWillBegin, SetDownloadBehaviorBehavior,
    SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::page::{
    CreateIsolatedWorldParams, DialogType, EventJavascriptDialogOpening, FrameId,
    GetFrameTreeParams, HandleJavaScriptDialogParams, NavigateParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CloseTargetParams, CreateBrowserContextParams, CreateTargetParams, EventTargetCreated,
};
use chromiumoxide::cdp::js_protocol::runtime::ExecutionContextId;
use chromiumoxide::{Browser, BrowserConfig, Page};
use countersign_approval_core::PageBinding;
use countersign_canonical_policy::{AuthorizedUrl, Policy};
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use crate::error::ChromiumError;
use crate::form_key::FormKey;
use crate::observation::{PageObservation, PageRevision, SessionId, TargetId};
use crate::options::ChromiumOptions;
use crate::refs::Refs;
use crate::write_gate::WriteGate;

pub(crate) struct Running {
    browser: Browser,
    /// Binds the password fields of forms the tabs submit.
    pub(crate) form_key: FormKey,
    handler: JoinHandle<()>,
    proxy: Option<(String, String)>,
    navigation_timeout: std::time::Duration,
    // Dropped after the browser, which kills the child process.
    _profile: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.handler.abort();
    }
}

/// A headless Chromium this process launched, driven over the DevTools
/// protocol. Cheap to clone; the browser is killed when the last clone (and
/// every [`Session`] and [`Tab`] made from it) is dropped, or by
/// [`close`](Self::close).
#[derive(Clone)]
pub struct Chromium {
    pub(crate) running: Arc<Running>,
}

impl std::fmt::Debug for Chromium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chromium").finish_non_exhaustive()
    }
}

impl Chromium {
    /// Launches headless Chromium with a fresh profile directory.
    ///
    /// Refused before anything starts when `options` chose no egress (see
    /// [`ChromiumOptions::egress_proxy`]) or adds a flag it refuses (see
    /// [`ChromiumOptions::arg`]). Must run inside a Tokio runtime, which
    /// drives the DevTools connection for the browser's lifetime.
    pub async fn launch(options: ChromiumOptions) -> Result<Chromium, ChromiumError> {
        let flags = options.launch_flags()?;
        let executable = options.executable_path().display().to_string();
        let launch_error = |reason: String| ChromiumError::Launch {
            executable: executable.clone(),
            reason,
        };
        let profile = tempfile::Builder::new()
            .prefix("countersign-chromium-")
            .tempdir()
            .map_err(|e| launch_error(format!("no profile directory: {e}")))?;
        // The config builder prefixes each flag with `--` itself, and passes
        // them in no particular order: no two may name the same switch.
        let flags = flags
            .into_iter()
            .filter_map(|f| f.strip_prefix("--").map(str::to_owned));
        let mut builder = BrowserConfig::builder()
            .chrome_executable(options.executable_path())
            .disable_default_args()
            .respect_https_errors()
            .user_data_dir(profile.path())
            .launch_timeout(options.timeout())
            .args(flags);
        if !options.sandbox() {
            builder = builder.no_sandbox();
        }
        let config = builder.build().map_err(launch_error)?;
        let form_key = FormKey::generate()
            .map_err(|e| launch_error(format!("no random key for form fields: {e}")))?;
        let (browser, mut handler) = Browser::launch(config)
            .await
            .map_err(|e| launch_error(e.to_string()))?;
        let handler = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                if let Err(error) = event {
                    tracing::debug!(%error, "chromium connection reported an error");
                }
            }
        });
        let navigation_timeout = options.navigation_wait();
        let proxy = options
            .proxy()
            .map(|p| (p.to_owned(), "<-loopback>".to_owned()));
        Ok(Chromium {
            running: Arc::new(Running {
                browser,
                form_key,
                handler,
                proxy,
                navigation_timeout,
                _profile: profile,
            }),
        })
    }

    /// A new, empty browser context (no cookies, storage or cache shared
    /// with any other session) whose tabs check URLs with `policy`.
    pub async fn new_session(&self, policy: Policy) -> Result<Session, ChromiumError> {
        let mut params = CreateBrowserContextParams::default();
        if let Some((server, bypass)) = &self.running.proxy {
            params.proxy_server = Some(server.clone());
            params.proxy_bypass_list = Some(bypass.clone());
        }
        let context = self
            .running
            .browser
            .create_browser_context(params)
            .await
            .map_err(|e| ChromiumError::protocol("Target.createBrowserContext", e))?;
        // No download reaches the disk: a page (or a navigation) that
        // starts one is refused by the browser itself. Events on, so a tab
        // can tell that a navigation became a refused download.
        let deny = SetDownloadBehaviorParams {
            behavior: SetDownloadBehaviorBehavior::Deny,
            browser_context_id: Some(context.clone()),
            download_path: None,
            events_enabled: Some(true),
        };
        self.running
            .browser
            .execute(deny)
            .await
            .map_err(|e| ChromiumError::protocol("Browser.setDownloadBehavior", e))?;
        Ok(Session {
            chromium: self.clone(),
            id: SessionId::new(context.inner().clone()),
            context,
            policy,
        })
    }

    /// The browser's DevTools WebSocket address, for attaching a tool such as
    /// a debugger or a benchmark. Whoever holds it controls the browser
    /// without any grant: keep it inside the host.
    pub fn devtools_url(&self) -> &str {
        self.running.browser.websocket_address()
    }

    /// Asks the browser to exit. Dropping the last handle kills it instead.
    pub async fn close(self) -> Result<(), ChromiumError> {
        self.running
            .browser
            .execute(CloseParams::default())
            .await
            .map_err(|e| ChromiumError::protocol("Browser.close", e))?;
        Ok(())
    }
}

/// One browser context: the session a host approves in.
#[derive(Debug, Clone)]
pub struct Session {
    chromium: Chromium,
    id: SessionId,
    context: BrowserContextId,
    policy: Policy,
}

impl Session {
    /// The browser context's id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// Opens a new tab in this session at `url` (already accepted by a
    /// policy) and waits for it to load.
    pub async fn open(&self, url: &AuthorizedUrl) -> Result<Tab, ChromiumError> {
        let tab = self.open_blank().await?;
        tab.navigate(url).await?;
        Ok(tab)
    }

    /// Opens a new tab in this session showing `about:blank`, having loaded
    /// nothing from the network: for a host that leaves the first page to
    /// the model's `browser_navigate` (through [`Tab::backend`]), which then
    /// answers every way that navigation can end.
    pub async fn open_blank(&self) -> Result<Tab, ChromiumError> {
        let mut params = CreateTargetParams::new("about:blank");
        params.browser_context_id = Some(self.context.clone());
        let page = self
            .chromium
            .running
            .browser
            .new_page(params)
            .await
            .map_err(|e| ChromiumError::protocol("Target.createTarget", e))?;
        let target = TargetId::new(page.target_id().inner().clone());
        let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
        let watchers = watch(&self.chromium, &page, &target, &seen).await?;
        let writes = WriteGate::attach(self.chromium.devtools_url(), target.as_str()).await?;
        let tab = Tab {
            inner: Arc::new(TabInner {
                target,
                session: self.id.clone(),
                page,
                policy: self.policy.clone(),
                chromium: self.chromium.clone(),
                input: tokio::sync::Mutex::new(()),
                refs: tokio::sync::Mutex::new(Refs::default()),
                seen,
                navigation_timeout: self.chromium.running.navigation_timeout,
                watchers,
                writes,
            }),
        };
        Ok(tab)
    }
}

pub(crate) struct TabInner {
    pub(crate) page: Page,
    pub(crate) session: SessionId,
    pub(crate) target: TargetId,
    pub(crate) policy: Policy,
    /// One action at a time per tab: input sequences never interleave.
    pub(crate) input: tokio::sync::Mutex<()>,
    /// The refs of the document last observed.
    pub(crate) refs: tokio::sync::Mutex<Refs>,
    /// What the watchers dismissed, closed or refused since a navigation
    /// began.
    pub(crate) seen: Arc<std::sync::Mutex<Seen>>,
    /// How long a navigation may take.
    pub(crate) navigation_timeout: std::time::Duration,
    watchers: Vec<JoinHandle<()>>,
    /// Holds the page's requests; refuses writes in read-only mode.
    pub(crate) writes: WriteGate,
    pub(crate) chromium: Chromium,
}

impl Drop for TabInner {
    fn drop(&mut self) {
        for watcher in &self.watchers {
            watcher.abort();
        }
    }
}

/// What a tab's watchers did for it, counted since the last
/// [`take`](Seen::take).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The kinds of the JavaScript dialogs dismissed.
    pub(crate) dialogs: Vec<DialogType>,
    /// How many tabs or popups the page opened, each closed.
    pub(crate) popups: u32,
    /// How many downloads the main frame began, each refused.
    pub(crate) downloads: u32,
}

impl Seen {
    /// Everything counted so far.
    pub(crate) fn peek(shared: &std::sync::Mutex<Seen>) -> Seen {
        shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Everything counted so far, leaving nothing counted.
    pub(crate) fn take(shared: &std::sync::Mutex<Seen>) -> Seen {
        let mut seen = shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut *seen)
    }

    fn note(shared: &std::sync::Mutex<Seen>, f: impl FnOnce(&mut Seen)) {
        let mut seen = shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut seen);
    }
}

/// How long after a tab the page opened was reported the watcher closes
/// it, should the read-only gate (which closes it within 3 s) not have.
const POPUP_CLOSE_BACKSTOP: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts a tab's watchers, for the tab's lifetime: nothing a page opens is
/// accepted on the model's behalf. Every JavaScript dialog (`alert`,
/// `confirm`, `prompt`, `beforeunload`) is dismissed as it opens; every
/// target the tab opens (a `window.open` popup, a `target=_blank` link) is
/// held by the read-only gate with every request refused, and closed;
/// downloads the main frame begins are counted (the session's download
/// behaviour already refuses them).
async fn watch(
    chromium: &Chromium,
    page: &Page,
    target: &TargetId,
    seen: &Arc<std::sync::Mutex<Seen>>,
) -> Result<Vec<JoinHandle<()>>, ChromiumError> {
    let browser = &chromium.running.browser;
    let mut dialogs = page
        .event_listener::<EventJavascriptDialogOpening>()
        .await
        .map_err(|e| ChromiumError::protocol("Page.javascriptDialogOpening", e))?;
    let mut created = browser
        .event_listener::<EventTargetCreated>()
        .await
        .map_err(|e| ChromiumError::protocol("Target.targetCreated", e))?;
    let mut downloads = browser
        .event_listener::<EventDownloadWillBegin>()
        .await
        .map_err(|e| ChromiumError::protocol("Browser.downloadWillBegin", e))?;

    let dialog_page = page.clone();
    let dialog_seen = Arc::clone(seen);
    let dismiss = tokio::spawn(async move {
        while let Some(dialog) = dialogs.next().await {
            // Noted first: a navigation the dismissal cancels must find it.
            Seen::note(&dialog_seen, |s| s.dialogs.push(dialog.r#type.clone()));
            if let Err(error) = dialog_page
                .execute(HandleJavaScriptDialogParams::new(false))
                .await
            {
                tracing::warn!(%error, "a javascript dialog could not be dismissed");
            }
        }
    });

    let opener = target.as_str().to_owned();
    // Closed through the browser's own connection: the opened target may
    // not be attached yet.
    let closer = chromium.clone();
    let popup_seen = Arc::clone(seen);
    let close = tokio::spawn(async move {
        while let Some(event) = created.next().await {
            let info = &event.target_info;
            if info.opener_id.as_ref().map(|id| id.inner().as_str()) != Some(opener.as_str()) {
                continue;
            }
            Seen::note(&popup_seen, |s| s.popups += 1);
            // The read-only gate holds the tab, refuses its requests and
            // closes it once its first request is on record; this is the
            // backstop, should the gate not have.
            let closer = closer.clone();
            let opened = info.target_id.clone();
            tokio::spawn(async move {
                tokio::time::sleep(POPUP_CLOSE_BACKSTOP).await;
                if let Err(error) = closer
                    .running
                    .browser
                    .execute(CloseTargetParams::new(opened))
                    .await
                {
                    tracing::debug!(%error, "a tab the page opened was closed already");
                }
            });
        }
    });

    // The main frame's id is the target's id.
    let frame = target.as_str().to_owned();
    let download_seen = Arc::clone(seen);
    let count = tokio::spawn(async move {
        while let Some(event) = downloads.next().await {
            if event.frame_id.inner() == &frame {
                Seen::note(&download_seen, |s| s.downloads += 1);
            }
        }
    });
    Ok(vec![dismiss, close, count])
}

/// One tab of a [`Session`]. Cheap to clone; clones drive the same tab.
#[derive(Clone)]
pub struct Tab {
    pub(crate) inner: Arc<TabInner>,
}

impl std::fmt::Debug for Tab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tab")
            .field("session", &self.inner.session)
            .field("target", &self.inner.target)
            .finish_non_exhaustive()
    }
}

/// The main frame as one `Page.getFrameTree` answer shows it.
pub(crate) struct MainFrame {
    pub(crate) id: FrameId,
    pub(crate) revision: PageRevision,
    /// The URL with its fragment, as the browser reports it.
    pub(crate) url: String,
    /// The document's security origin, as the browser reports it.
    pub(crate) origin: String,
    /// For Chromium's error page (whose URL is
    /// `chrome-error://chromewebdata/`), the URL it could not load.
    pub(crate) unreachable: Option<String>,
}

impl Tab {
    /// The session (browser context) this tab lives in.
    pub fn session(&self) -> &SessionId {
        &self.inner.session
    }

    /// The tab's target id.
    pub fn target(&self) -> &TargetId {
        &self.inner.target
    }

    /// The requests read-only mode refused in this tab, oldest first: the
    /// last [`MAX_REMEMBERED_REFUSALS`](crate::MAX_REMEMBERED_REFUSALS),
    /// each naming the act whose mode refused it.
    pub fn refused_writes(&self) -> Vec<countersign_approval_core::RefusedWrite> {
        self.inner.writes.all_refused()
    }

    /// Navigates the tab to `url` (already accepted by a policy) and waits
    /// for the new document to load.
    pub async fn navigate(&self, url: &AuthorizedUrl) -> Result<(), ChromiumError> {
        self.inner
            .page
            .goto(NavigateParams::new(url.as_str()))
            .await
            .map_err(|e| ChromiumError::protocol("Page.navigate", e))?;
        Ok(())
    }

    /// Looks at the page: session, tab, canonical URL and revision. Refused
    /// when the policy refuses the page's current URL.
    pub async fn observe(&self) -> Result<PageObservation, ChromiumError> {
        let frame = self.main_frame().await?;
        let url = self
            .inner
            .policy
            .authorize_destination(&frame.url)
            .await
            .map_err(|denial| ChromiumError::PageNotAllowed {
                reason: denial.to_string(),
            })?;
        Ok(PageObservation {
            session: self.inner.session.clone(),
            target: self.inner.target.clone(),
            url,
            revision: frame.revision,
        })
    }

    /// The main frame's id, loader id and URL, in one protocol call.
    pub(crate) async fn main_frame(&self) -> Result<MainFrame, ChromiumError> {
        let tree = self
            .inner
            .page
            .execute(GetFrameTreeParams::default())
            .await
            .map_err(|e| ChromiumError::protocol("Page.getFrameTree", e))?;
        let frame = &tree.result.frame_tree.frame;
        let mut url = frame.url.clone();
        if let Some(fragment) = &frame.url_fragment {
            url.push_str(fragment);
        }
        Ok(MainFrame {
            id: frame.id.clone(),
            revision: PageRevision::new(frame.loader_id.inner().clone()),
            url,
            origin: frame.security_origin.clone(),
            unreachable: frame.unreachable_url.clone(),
        })
    }

    /// What a page-bound grant binds for this tab showing `revision`: the
    /// one binding [`Backend::current_page`](countersign_approval_core::Backend::current_page)
    /// and snapshots both give.
    pub(crate) fn binding(&self, revision: &PageRevision) -> PageBinding {
        PageBinding {
            session_id: self.inner.session.as_str().to_owned(),
            target_id: self.inner.target.as_str().to_owned(),
            page_revision: revision.as_str().to_owned(),
            element: None,
        }
    }

    /// A new isolated world in `frame`: page scripts cannot reach it.
    pub(crate) async fn isolated_world(
        &self,
        frame: FrameId,
    ) -> Result<ExecutionContextId, ChromiumError> {
        let mut params = CreateIsolatedWorldParams::new(frame);
        params.world_name = Some("countersign".to_owned());
        let world = self
            .inner
            .page
            .execute(params)
            .await
            .map_err(|e| ChromiumError::protocol("Page.createIsolatedWorld", e))?;
        Ok(world.result.execution_context_id)
    }
}
