//! What performs the actions, per `[backend]`: the fake (a page model the
//! configuration describes) or headless Chromium, behind the egress guard
//! unless the configuration turns it off.
//!
//! Chromium: one browser per process, launched at start-up so that a
//! missing binary or a refused launch stops the server before it serves
//! anyone. Each identity (actor, run) gets a browser context of its own
//! (no cookies or storage shared with another identity) and one tab in it,
//! opened on the identity's first tool call that needs the page, showing
//! `about:blank` until its first `browser_navigate`. Every MCP session of
//! one identity drives that same tab, as they share one toolset.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use countersign_approval_core::policy::{Action, AuthorizedUrl};
use countersign_approval_core::{
    ActionRequest, Backend, BackendError, Navigation, ObservedPage, OperationId, PageBinding,
    PageSnapshot, RefusedWrite,
};
use countersign_backend_chromium::{Chromium, ChromiumBackend, ChromiumOptions, running_as_root};
use countersign_backend_fake::{FakeBackend, FakeElement, FakePage, FakeSite};
use countersign_canonical_policy::Policy;
use countersign_egress_guard::EgressGuard;

use crate::config::BackendConfig;

/// The backends of the process.
pub enum Backends {
    /// The fake: one per identity, each showing its own copy of the site.
    Fake {
        /// The site, when the configuration has pages.
        site: Option<FakeSite>,
        /// Every fake made so far, for the action count.
        made: Mutex<Vec<FakeBackend>>,
    },
    /// One headless Chromium.
    Chromium {
        /// The browser.
        chromium: Chromium,
        /// The egress guard the browser's traffic goes through, kept as
        /// long as the browser (dropping it stops it).
        guard: Option<EgressGuard>,
    },
}

impl Backends {
    /// Starts what `config` asks for: for Chromium, the guard (built from
    /// `policy`, the policy of the tools) and the browser.
    pub async fn start(config: &BackendConfig, policy: &Policy) -> Result<Backends, String> {
        if config.kind != "chromium" {
            return Ok(Backends::Fake {
                site: fake_site(config)?,
                made: Mutex::new(Vec::new()),
            });
        }
        let executable = chromium_executable(config.chromium_path.as_deref())?;
        if config.sandbox && running_as_root() {
            return Err(
                "chromium cannot use its sandbox when run as root: run countersign-mcp as another user, or set `backend.sandbox = false`"
                    .into(),
            );
        }
        let mut options = ChromiumOptions::new().executable(&executable);
        if !config.sandbox {
            options = options.no_sandbox();
        }
        let guard = if config.guard {
            let guard = EgressGuard::bind(policy.clone(), ([127, 0, 0, 1], 0).into())
                .await
                .map_err(|e| format!("the egress guard cannot listen on loopback: {e}"))?;
            options = options.egress_proxy(format!("http://{}", guard.local_addr()));
            Some(guard)
        } else {
            tracing::warn!(
                "`backend.guard = false`: nothing checks where the browser connects (subresources, redirects, form posts)"
            );
            options = options.allow_unproxied_egress();
            None
        };
        let chromium = Chromium::launch(options)
            .await
            .map_err(|e| format!("{e} (set `backend.chromium_path` to another binary)"))?;
        Ok(Backends::Chromium { chromium, guard })
    }

    /// A new backend for one identity: a fake showing the site from its
    /// start, or a tab of its own in a browser context of its own.
    pub fn for_identity(&self, policy: &Policy) -> Arc<dyn Backend> {
        match self {
            Backends::Fake { site, made } => {
                let fake = match site {
                    Some(site) => FakeBackend::with_site(site.clone()),
                    None => FakeBackend::new(),
                };
                made.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(fake.clone());
                Arc::new(fake)
            }
            Backends::Chromium { chromium, .. } => Arc::new(LazyTab {
                chromium: chromium.clone(),
                policy: policy.clone(),
                tab: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// How many actions the fakes performed, all identities together;
    /// `None` for Chromium.
    pub fn fake_actions(&self) -> Option<usize> {
        match self {
            Backends::Fake { made, .. } => Some(
                made.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .iter()
                    .map(FakeBackend::len)
                    .sum(),
            ),
            Backends::Chromium { .. } => None,
        }
    }
}

/// The fake's site from `[[backend.pages]]`, `None` without pages.
fn fake_site(config: &BackendConfig) -> Result<Option<FakeSite>, String> {
    if config.pages.is_empty() {
        return Ok(None);
    }
    let mut site = FakeSite::new();
    for page in &config.pages {
        // The policy's canonical form of a plain URL (`http://a` is
        // `http://a/`), which is what a navigation asks the fake for.
        let url = url::Url::parse(&page.url)
            .map_err(|e| format!("`backend.pages` has the url `{}`: {e}", page.url))?;
        let mut fake = FakePage::new(page.title.as_str());
        for element in &page.elements {
            let mut made = FakeElement::new(element.role.as_str(), element.name.as_str());
            if let Some(selector) = &element.selector {
                made = made.selector(selector.as_str());
            }
            if let Some(tag) = &element.tag {
                made = made.tag(tag.as_str());
            }
            fake = fake.element(made);
        }
        site = site.page(url.to_string(), fake);
    }
    Ok(Some(site))
}

/// The binary `chromium_path` names, or `chromium` on `PATH`.
fn chromium_executable(configured: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = configured {
        if !path.is_file() {
            return Err(format!(
                "`backend.chromium_path` is `{}`, which is not a file: install Chromium there or name its binary",
                path.display()
            ));
        }
        return Ok(path.to_path_buf());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("chromium"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            "no `chromium` on `PATH`: install Chromium (Debian: `apt install chromium`) or set `backend.chromium_path`"
                .to_owned()
        })
}

/// One identity's tab: a browser context of its own and a tab in it,
/// opened (at `about:blank`) on first use, since the toolset is built
/// before anyone names a page.
struct LazyTab {
    chromium: Chromium,
    policy: Policy,
    tab: tokio::sync::OnceCell<ChromiumBackend>,
}

impl LazyTab {
    async fn tab(&self) -> Result<&ChromiumBackend, BackendError> {
        self.tab
            .get_or_try_init(|| async {
                let session = self.chromium.new_session(self.policy.clone()).await?;
                let tab = session.open_blank().await?;
                Ok(tab.backend())
            })
            .await
            .map_err(|error: countersign_backend_chromium::ChromiumError| {
                BackendError::not_dispatched(format!("no browser tab could be opened: {error}"))
            })
    }
}

#[async_trait]
impl Backend for LazyTab {
    async fn perform(&self, request: &ActionRequest) -> Result<(), BackendError> {
        self.tab().await?.perform(request).await
    }

    async fn current_page(&self) -> Result<Option<PageBinding>, BackendError> {
        self.tab().await?.current_page().await
    }

    async fn snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        self.tab().await?.snapshot(url, action).await
    }

    async fn binding_snapshot(
        &self,
        url: &AuthorizedUrl,
        action: &Action,
    ) -> Result<Option<PageSnapshot>, BackendError> {
        self.tab().await?.binding_snapshot(url, action).await
    }

    async fn perform_on_page(
        &self,
        request: &ActionRequest,
        page: &PageBinding,
    ) -> Result<(), BackendError> {
        self.tab().await?.perform_on_page(request, page).await
    }

    async fn navigate(&self, url: &AuthorizedUrl) -> Result<Navigation, BackendError> {
        self.tab().await?.navigate(url).await
    }

    async fn observe(&self) -> Result<ObservedPage, BackendError> {
        self.tab().await?.observe().await
    }

    async fn refused_writes(
        &self,
        operation: &OperationId,
    ) -> Result<Vec<RefusedWrite>, BackendError> {
        self.tab().await?.refused_writes(operation).await
    }
}
