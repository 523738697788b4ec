//! The host's side for the live tests: an Act context over this tab's
//! backend with the in-memory stores, the page reads the cases assert on,
//! and what one Act call left behind.

use std::sync::Arc;
use std::time::Duration;

use countersign_act_tool::{Act, Context};
use countersign_approval_core::{ActorId, ApprovalId, ApprovalStore, Backend, GrantState, RunId};
use countersign_backend_chromium::Tab;
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};

use super::Fixture;

/// Act with the in-memory store and this tab's backend.
pub struct Host {
    pub context: Context,
    pub approvals: Arc<InMemoryApprovalStore>,
    pub act: Act,
}

/// Which grants the host's context accepts beyond element-bound ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepts {
    /// Only grants bound to a page and its target element (the default).
    ElementBound,
    /// Also page-bound grants without an element
    /// (`accept_grants_without_element`): the backend's own checks are
    /// then all that stands between a changed page and the click.
    WithoutElement,
    /// Also grants bound to no page (`accept_unbound_grants`).
    Unbound,
}

pub fn host(f: &Fixture, accepts: Accepts) -> Host {
    host_on(f, f.tab.backend(), accepts)
}

pub fn host_on(f: &Fixture, backend: impl Backend + 'static, accepts: Accepts) -> Host {
    let approvals = Arc::new(InMemoryApprovalStore::new());
    let mut builder = Context::builder()
        .actor_id(ActorId::new("live-actor").unwrap())
        .run_id(RunId::new("live-run").unwrap())
        .backend(backend)
        .source_policy(f.policy.clone())
        .operation_store(InMemoryOperationStore::new())
        .approval_store(approvals.clone());
    match accepts {
        Accepts::ElementBound => {}
        Accepts::WithoutElement => builder = builder.accept_grants_without_element(),
        Accepts::Unbound => builder = builder.accept_unbound_grants(),
    }
    let context = builder.build().unwrap();
    Host {
        act: Act::new(context.clone()),
        context,
        approvals,
    }
}

pub const TTL: Duration = Duration::from_secs(60);

/// `expression` against the DOM of `tab` (`el(sel)` is `querySelector`).
pub async fn read_on(tab: &Tab, expression: &str) -> Value {
    let function = format!(
        "function () {{ const el = (s) => document.querySelector(s); return {expression}; }}"
    );
    tab.inspect(&function).await.unwrap()
}

/// Trusted clicks the attack page in `tab` saw, in all and by the id of
/// the element each reached.
pub async fn attack_clicks(tab: &Tab) -> (u64, Value) {
    let seen = read_on(tab, "[el('#clicks').textContent, el('#log').textContent]").await;
    (
        seen[0].as_str().unwrap().parse().unwrap(),
        serde_json::from_str(seen[1].as_str().unwrap()).unwrap(),
    )
}

/// `path` in a new tab, which opens in front: the page is visible, so
/// animation frames run and the page's scroll and input handlers run as
/// they would in a person's browser (a tab behind others gets no frames).
pub async fn front_tab(f: &Fixture, path: &str) -> Tab {
    let url = f.policy.authorize_destination(&f.url(path)).await.unwrap();
    let tab = f.session.open(&url).await.unwrap();
    assert_eq!(read_on(&tab, "document.visibilityState").await, "visible");
    tab
}

/// What an Act call left: its answer, the one operation record's reason,
/// the grant's state after, and the tab, for counting.
pub struct Outcome {
    pub answer: Value,
    pub reason: String,
    pub state: GrantState,
    pub tab: Tab,
}

impl Outcome {
    /// Reads the call's record and the grant's state from `host`.
    pub async fn of(host: &Host, tab: Tab, id: &ApprovalId, answer: Value) -> Outcome {
        let records = host
            .context
            .operation_store()
            .records_for_run(host.context.run_id())
            .await
            .unwrap();
        assert_eq!(records.len(), 1);
        let state = host.approvals.get(id).await.unwrap().unwrap().state;
        Outcome {
            answer,
            reason: records[0].reason.clone(),
            state,
            tab,
        }
    }

    /// Refused with `code` and `message`, the record saying `reason`, the
    /// grant `Active` when `kept` (given back), else used; no click landed.
    pub async fn assert_refused(&self, code: &str, message: &str, reason: &str, kept: bool) {
        assert_eq!(
            self.answer["error"]["code"], code,
            "{} {}",
            self.answer, self.reason
        );
        assert_eq!(self.answer["error"]["message"], message, "{}", self.reason);
        assert_eq!(self.reason, reason);
        if kept {
            assert_eq!(self.state, GrantState::Active);
        } else {
            assert!(
                matches!(self.state, GrantState::Consumed { .. }),
                "{:?}",
                self.state
            );
        }
        assert_eq!(attack_clicks(&self.tab).await, (0, json!({})));
    }

    /// Performed: `ok`, the grant used, exactly one click, on `id`.
    pub async fn assert_clicked_once(&self, id: &str) {
        assert_eq!(
            self.answer["status"], "ok",
            "{} {}",
            self.answer, self.reason
        );
        assert!(
            matches!(self.state, GrantState::Consumed { .. }),
            "{:?}",
            self.state
        );
        assert_eq!(attack_clicks(&self.tab).await, (1, json!({ id: 1 })));
    }
}

pub const KEPT: &str =
    "backend refused before acting; nothing was performed; the approval is still usable";
pub const USED: &str = "backend failed to perform the action; the approval was used up";

pub const STALE_KEPT: &str = "the page or its target changed since approval; the backend refused \
                          before acting; nothing was performed; the approval is still usable";

/// Polls `expression` on `tab` until it is `true`, for at most 10 s.
/// A read that fails (the page is between two documents) counts as not
/// yet.
pub async fn wait_on(tab: &Tab, expression: &str) {
    let function = format!(
        "function () {{ const el = (s) => document.querySelector(s); return {expression}; }}"
    );
    for _ in 0..200 {
        if tab.inspect(&function).await.ok() == Some(Value::Bool(true)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("`{expression}` never held");
}
