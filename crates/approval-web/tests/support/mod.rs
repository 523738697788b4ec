//! What every test of the pages shares: a store, a manual clock, the
//! pages, a policy and an Act tool over the same store and clock.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod browser;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use countersign_act_tool::{Act, Context, Toolset};
use countersign_approval_core::{
    ActorId, ApproverId, ManualClock, PageSnapshot, Proposal, ProposalStore, RunId, Timestamp,
};
use countersign_approval_web::{ApprovalPages, Approvers, Parts};
use countersign_backend_fake::FakeBackend;
use countersign_canonical_policy::{Policy, StaticResolver};
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};
use serde_json::{Value, json};

/// The cookie the tests' authentication reads.
pub const APPROVER_COOKIE: &str = "test-approver";

/// A run no test approver may review.
pub const OFF_LIMITS_RUN: &str = "off-limits";

/// The URL every proposal acts on.
pub const URL: &str = "https://docs.example.com/account";

/// When the tests' clock starts: 2026-05-01 12:00:00 UTC.
pub const START: Timestamp = Timestamp::from_millis(1_777_636_800_000);

/// How long proposals stay decidable in the tests.
pub const PROPOSAL_TTL: Duration = Duration::from_secs(600);

/// The tests' authentication: whoever the `test-approver` cookie names;
/// nobody may review the run `off-limits`.
pub struct CookieApprovers;

#[async_trait]
impl Approvers for CookieApprovers {
    async fn approver(&self, request: &Parts) -> Option<ApproverId> {
        let cookies = request.headers.get("cookie")?.to_str().ok()?;
        let value = cookies.split(';').find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == APPROVER_COOKIE).then_some(value)
        })?;
        ApproverId::new(value).ok()
    }

    async fn may_review(&self, _: &ApproverId, _: &ActorId, run: &RunId) -> bool {
        run.as_str() != OFF_LIMITS_RUN
    }
}

/// One host: store, clock, pages and Act for one actor and run.
pub struct Host {
    pub store: Arc<InMemoryApprovalStore>,
    pub clock: ManualClock,
    pub pages: ApprovalPages,
    pub policy: Policy,
    pub actor: ActorId,
    pub run: RunId,
    pub backend: FakeBackend,
    pub operations: Arc<InMemoryOperationStore>,
}

impl Host {
    pub fn new() -> Host {
        Host::for_run("actor-1", "run-1")
    }

    pub fn for_run(actor: &str, run: &str) -> Host {
        let store = Arc::new(InMemoryApprovalStore::new());
        let clock = ManualClock::new(START);
        let pages = ApprovalPages::builder(store.clone(), CookieApprovers)
            .clock(clock.clone())
            .build()
            .unwrap();
        Host {
            store,
            clock,
            pages,
            policy: policy(),
            actor: ActorId::new(actor).unwrap(),
            run: RunId::new(run).unwrap(),
            backend: FakeBackend::new(),
            operations: Arc::new(InMemoryOperationStore::new()),
        }
    }

    pub fn router(&self) -> Router {
        self.pages.router()
    }

    /// The Act tool for this host's actor and run, over the same store and
    /// clock, with the fake backend.
    pub fn act(&self) -> Act {
        let context = Context::builder()
            .actor_id(self.actor.clone())
            .run_id(self.run.clone())
            .backend(self.backend.clone())
            .source_policy(self.policy.clone())
            .operation_store(self.operations.clone())
            .approval_store(self.store.clone())
            .clock(self.clock.clone())
            .build()
            .unwrap();
        Act::new(context)
    }

    /// The tools a model is offered for this host's actor and run:
    /// `browser_propose`, `browser_proposal_status` and `browser_act`, over
    /// the same store and clock.
    pub fn toolset(&self) -> Toolset {
        let context = Context::builder()
            .actor_id(self.actor.clone())
            .run_id(self.run.clone())
            .backend(self.backend.clone())
            .source_policy(self.policy.clone())
            .operation_store(self.operations.clone())
            .proposal_store(self.store.clone())
            .proposal_ttl(PROPOSAL_TTL)
            .clock(self.clock.clone())
            .build()
            .unwrap();
        Toolset::new(context).with_propose().with_act()
    }

    /// A proposal of `action` on [`URL`], stored pending, as the propose
    /// tool would store it.
    pub async fn propose(&self, action: &Value) -> Proposal {
        let proposal = self.proposal(action).await;
        self.store.propose(proposal.clone()).await.unwrap();
        proposal
    }

    /// The same, with what a live backend saw.
    pub async fn propose_observed(&self, action: &Value, snapshot: PageSnapshot) -> Proposal {
        let proposal = self.proposal(action).await.observed(snapshot).unwrap();
        self.store.propose(proposal.clone()).await.unwrap();
        proposal
    }

    /// A proposal of `action` on `url` (on `docs.example.com`), stored
    /// pending.
    pub async fn propose_at(&self, url: &str, action: &Value) -> Proposal {
        let proposal = self.proposal_at(url, action).await;
        self.store.propose(proposal.clone()).await.unwrap();
        proposal
    }

    async fn proposal(&self, action: &Value) -> Proposal {
        self.proposal_at(URL, action).await
    }

    async fn proposal_at(&self, url: &str, action: &Value) -> Proposal {
        let url = self.policy.authorize_destination(url).await.unwrap();
        let action = self.policy.authorize_action(action).unwrap();
        Proposal::for_action(
            self.actor.clone(),
            self.run.clone(),
            &url,
            &action,
            PROPOSAL_TTL,
            self.clock_now(),
        )
        .unwrap()
    }

    pub fn clock_now(&self) -> Timestamp {
        countersign_approval_core::Clock::now(&self.clock)
    }

    /// What the model sends to Act for `action` with `approval_id`.
    pub fn act_call(action: &Value, approval_id: &str) -> Value {
        let mut call = action.clone();
        call["url"] = json!(URL);
        call["approval_id"] = json!(approval_id);
        call
    }
}

/// The tests' policy: `docs.example.com` at a public address.
pub fn policy() -> Policy {
    Policy::builder()
        .allow_host("docs.example.com")
        .resolver(StaticResolver::answering_all(["93.184.216.34"
            .parse()
            .unwrap()]))
        .build()
        .unwrap()
}

/// The smallest PNG there is, for snapshots that need one: 1×1, opaque.
pub const TINY_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Pulls the `value` of the hidden `token` input of the form whose action
/// ends with `action_suffix` out of a page.
pub fn form_token(html: &str, action_suffix: &str) -> Option<String> {
    let form_start = html.find(&format!("{action_suffix}\""))?;
    let rest = &html[form_start..];
    let marker = "name=\"token\" value=\"";
    let start = rest.find(marker)? + marker.len();
    let end = rest[start..].find('"')?;
    Some(rest[start..start + end].to_owned())
}
