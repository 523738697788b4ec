//! A countersign [`Backend`](countersign_approval_core::Backend) that
//! performs approved actions as real input in headless Chromium, over the
//! DevTools protocol (through the `chromiumoxide` client).
//!
//! Launching is refused unless the host chose how the browser reaches the
//! network: through an egress proxy, or explicitly without one. Behind a
//! proxy nothing else leaves the browser's network stack on its own: WebRTC
//! may send no UDP outside the proxy
//! (`--webrtc-ip-handling-policy=disable_non_proxied_udp`) and the browser
//! resolves no name but the proxy's (`--host-resolver-rules`). The host may
//! add flags of its own ([`ChromiumOptions::arg`]); one that would reopen a
//! way around the proxy refuses the launch.
//!
//! ```
//! use countersign_backend_chromium::{Chromium, ChromiumError, ChromiumOptions};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // No egress chosen: refused before any process starts.
//! let refused = Chromium::launch(ChromiumOptions::new()).await.unwrap_err();
//! assert_eq!(refused, ChromiumError::NoEgressProxy);
//!
//! // A proxy that is not a single proxy URL is refused too.
//! let options = ChromiumOptions::new().egress_proxy("http://127.0.0.1:3128;direct://");
//! assert!(matches!(
//!     Chromium::launch(options).await,
//!     Err(ChromiumError::InvalidEgressProxy { .. })
//! ));
//!
//! // A flag that would route around the proxy is refused too.
//! let options = ChromiumOptions::new()
//!     .egress_proxy("http://127.0.0.1:3128")
//!     .arg("--lang=fr")
//!     .arg("--proxy-bypass-list=*");
//! assert_eq!(
//!     Chromium::launch(options).await.unwrap_err().to_string(),
//!     "refusing chromium flag `--proxy-bypass-list=*`: it would change how the \
//!      browser reaches the network; use `egress_proxy` or `allow_unproxied_egress`"
//! );
//! # });
//! ```
//!
//! A host launches once, opens a [`Session`] (a browser context) per
//! approval scope and a [`Tab`] in it, hands [`Tab::backend`] to the Act
//! tool's context, and approves each action from the tab's snapshot of it,
//! [`Tab::approval`]: the page (session, tab, document revision), the
//! target element as the browser names it (and, for a submit, the form
//! data it would send) and the picture a person approves from. The
//! snapshot goes as it is into the grant
//! (`countersign_act_tool::issue_page_grant`), and Act performs the grant
//! only while the tab still shows that document and that element:
//!
//! ```no_run
//! use countersign_backend_chromium::{Chromium, ChromiumOptions};
//! # use countersign_canonical_policy::{Policy, StaticResolver};
//! # async fn demo(policy: Policy) -> Result<(), Box<dyn std::error::Error>> {
//! let chromium = Chromium::launch(
//!     ChromiumOptions::new()
//!         .executable("/usr/bin/chromium")
//!         .egress_proxy("http://127.0.0.1:3128"),
//! )
//! .await?;
//! let session = chromium.new_session(policy.clone()).await?;
//! let url = policy.authorize_destination("https://docs.example.com/").await?;
//! let tab = session.open(&url).await?;
//! let action = policy.authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))?;
//! let snapshot = tab.approval(&url, &action).await?; // what the person approves
//! assert!(snapshot.target_found);
//! let element = snapshot.page.element.as_ref(); // role, name, text, form data
//! let backend = tab.backend(); // `impl Backend`, for the Act tool's context
//! # let _ = (backend, element);
//! # Ok(())
//! # }
//! ```
//!
//! The snapshot ([`Tab::approval`], or the backend's
//! [`snapshot`](countersign_approval_core::Backend::snapshot), the same
//! call) returns the page binding
//! [`current_page`](countersign_approval_core::Backend::current_page)
//! gives with the target's identity, a viewport PNG with the target
//! outlined in [`OUTLINE_COLOUR`], and whether the target passes the strict
//! checks; it dispatches no input and injects nothing into the page (see
//! [`ChromiumBackend`]). A target with no part in the viewport is
//! scrolled to its centre first, as performing does, so a target below the
//! fold can be approved and the person sees it where it will be acted on;
//! one in view is left where it is. A bare [`Tab::observe`] binds the
//! document only, and a grant from it is refused unless the host opts in
//! (`accept_grants_without_element`).
//!
//! # Navigating and observing
//!
//! The backend's [`navigate`](countersign_approval_core::Backend::navigate)
//! goes to a URL the caller's policy accepted and waits, bounded by
//! [`ChromiumOptions::navigation_timeout`] ([`DEFAULT_NAVIGATION_TIMEOUT`]),
//! for the page to load; every way it can end has a defined answer (see
//! [`ChromiumBackend`]'s `navigate`). Nothing is accepted on the model's
//! behalf, in any tab the backend opened and for as long as it is open:
//! JavaScript dialogs are dismissed, downloads are denied for the whole
//! session (`Browser.setDownloadBehavior`), and a tab or popup a page
//! opens is held before it runs, every request of it refused (its first
//! included), and closed as soon as the browser reports it.
//!
//! Its [`observe`](countersign_approval_core::Backend::observe) reads the
//! main frame's accessibility tree from the browser
//! (`Accessibility.getFullAXTree`, never from page script) and gives each
//! element shown a ref (`p3e12`). An action's selector `aria-ref=p3e12`
//! then names that exact DOM node, through the tab's table of refs, and
//! goes through the same strict checks (and element binding) as a CSS
//! selector; a ref of an earlier page, of another tab, never handed out or
//! whose node has left the page is refused as a stale target, so the model
//! observes again. Iframes are not walked: only the main frame's document
//! is observed, and refs name elements of the main frame only.
//!
//! # Methods and their arguments
//!
//! Every method performs the protocol's input events (`Input.dispatchMouseEvent`,
//! `Input.dispatchKeyEvent`, `Input.insertText`), not script assignment:
//!
//! | method | arguments | input |
//! | --- | --- | --- |
//! | `click` | optional `button` (`left`, `right`, `middle`) and `modifiers` (`Alt`, `Control`, `ControlOrMeta`, `Meta`, `Shift`, comma-separated) | mouse move, press, release at the element's centre with that button and those modifiers |
//! | `dblclick` | as `click` | as `click`, twice; the second with click count 2 |
//! | `hover` | none | mouse move to the element's centre |
//! | `focus` | none | `DOM.focus` (a user's Tab or click would do more) |
//! | `fill` | `text` | focus, Control+A (`selectAll`), then the text inserted at once (`Delete` when empty) |
//! | `type` | `text` | focus, then one key press per character (characters without a key are inserted) |
//! | `press` | `key` | focus, then one key press; `key` is a key name such as `Enter`, `Tab`, `ArrowDown`, `a` |
//! | `select` | `value` | focus, then arrow keys until the option with that `value` (else the first labelled so) is selected |
//! | `check`, `uncheck` | none | a click, unless the box is already in that state; then the state is read back |
//!
//! Any other argument, a missing one, an unknown key or another method is
//! refused before the page is touched. Selectors are CSS selectors
//! (`document.querySelectorAll`), evaluated in an isolated world that page
//! scripts cannot reach, or refs from the last observation of the page
//! (`aria-ref=p3e12`, resolved by the browser's node id).
//!
//! # What it promises
//!
//! See [`ChromiumBackend`] for the checks made before input is dispatched,
//! and `docs/security-model.md` ("Live actions") for what a page-bound
//! grant promises.
//! The target is checked again right before every input event; still, the
//! last check and the input event are separate protocol messages: a page
//! that changes in between (a timer, a server push) is not caught. A
//! page-bound grant shortens the window; it cannot close it.

mod axtree;
mod backend;
mod browser;
mod error;
mod form_key;
mod identity;
mod navigate;
mod observation;
mod options;
mod perform;
mod plan;
mod refs;
mod screenshot;
mod script;
mod snapshot;
mod target;
mod write_gate;

pub use backend::ChromiumBackend;
pub use browser::{Chromium, Session, Tab};
pub use error::ChromiumError;
pub use observation::{PageObservation, PageRevision, SessionId, TargetId};
pub use options::{
    ChromiumOptions, DEFAULT_EXECUTABLE, DEFAULT_LAUNCH_TIMEOUT, DEFAULT_NAVIGATION_TIMEOUT,
    running_as_root,
};
pub use screenshot::{OUTLINE_COLOUR, OUTLINE_WIDTH};
pub use target::{MIN_CLIPPED_POINTS, MIN_OPACITY};
pub use write_gate::MAX_REMEMBERED_REFUSALS;
