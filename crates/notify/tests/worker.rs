//! The delivery worker over the in-memory store's outbox, with the injected
//! clock: what each event says, when the time-driven ones come, and that a
//! notifier's faults only delay its own notices.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use countersign_approval_core::{
    ActorId, ApprovalStore, ApproverId, Clock, DecisionOutcome, NotificationKind,
    NotificationOutbox, Proposal, ProposalStore, RunId,
};
use countersign_notify::{
    DeliveryRound, NotificationWorker, NotifyError, ProposalNotice, ProposalNotifier, WorkerOptions,
};
use serde_json::json;

const TTL: Duration = Duration::from_secs(600);
const SECRET_VALUE: &str = "hunter2-secret-value";

/// What a notifier does with each notice, in turn (the last repeats).
#[derive(Clone, Copy, Debug)]
enum Script {
    Take,
    Fail,
    Refuse,
    Panic,
    Hang,
}

/// A notifier that follows a script and keeps what it took.
struct Scripted {
    script: Mutex<VecDeque<Script>>,
    taken: Mutex<Vec<ProposalNotice>>,
    calls: AtomicUsize,
    /// Told when a hang begins.
    hanging: tokio::sync::Notify,
}

impl Scripted {
    fn new(script: &[Script]) -> Arc<Self> {
        Arc::new(Scripted {
            script: Mutex::new(script.iter().copied().collect()),
            taken: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
            hanging: tokio::sync::Notify::new(),
        })
    }

    fn kinds(&self) -> Vec<NotificationKind> {
        self.taken
            .lock()
            .unwrap()
            .iter()
            .map(|n| n.event.kind)
            .collect()
    }
}

#[async_trait]
impl ProposalNotifier for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn notify(&self, notice: &ProposalNotice) -> Result<(), NotifyError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let step = {
            let mut script = self.script.lock().unwrap();
            if script.len() > 1 {
                script.pop_front().unwrap()
            } else {
                *script.front().unwrap()
            }
        };
        match step {
            Script::Take => {
                self.taken.lock().unwrap().push(notice.clone());
                Ok(())
            }
            Script::Fail => Err(NotifyError::Failed("down".into())),
            Script::Refuse => Err(NotifyError::Refused("404".into())),
            Script::Panic => panic!("a notifier's bug"),
            Script::Hang => {
                self.hanging.notify_one();
                std::future::pending::<()>().await;
                Ok(())
            }
        }
    }
}

use support::{Host, START};

impl Host {
    fn notified(
        &self,
        notifiers: Vec<Arc<dyn ProposalNotifier>>,
        options: WorkerOptions,
    ) -> NotificationWorker {
        self.worker(notifiers, options, "")
    }

    /// Proposes filling `input#card` with a value no notice may carry.
    async fn propose(&self) -> Proposal {
        support::propose_fill(
            &*self.store,
            "https://shop.example.com:8443/checkout?step=2",
            "input#card",
            SECRET_VALUE,
            TTL,
            self.clock.now(),
        )
        .await
    }

    async fn approve(&self, proposal: &Proposal, by: &str) {
        let grant = proposal
            .grant(TTL, self.clock.now(), Some(ApproverId::new(by).unwrap()))
            .unwrap();
        let outcome = self
            .store
            .approve_proposal(&proposal.id, grant, self.clock.now())
            .await
            .unwrap();
        assert_eq!(outcome, DecisionOutcome::Approved);
    }
}

fn round(delivered: usize, skipped: usize, retried: usize, given_up: usize) -> DeliveryRound {
    DeliveryRound {
        delivered,
        skipped,
        retried,
        given_up,
    }
}

#[tokio::test]
async fn a_created_notice_holds_the_summary_expiry_and_link_and_never_a_value() {
    let host = Host::new();
    let taker = Scripted::new(&[Script::Take]);
    let worker = host.notified(vec![taker.clone()], WorkerOptions::default());
    let proposal = host.propose().await;
    assert_eq!(worker.deliver_due().await.unwrap(), round(1, 0, 0, 0));
    let notice = taker.taken.lock().unwrap()[0].clone();
    assert_eq!(
        notice.headline(),
        "Approval needed: demo-agent wants to fill the element `input#card` on shop.example.com:8443"
    );
    let body = notice.to_json();
    assert_eq!(
        body,
        json!({
            "type": "proposal.created",
            "timestamp": START.to_rfc3339(),
            "data": {
                "event_id": notice.event.id.as_str(),
                "actor_id": "demo-agent",
                "run_id": "run-7",
                "proposal_id": proposal.id.as_str(),
                "headline": notice.headline(),
                "summary": {
                    "sentence": "demo-agent wants to fill the element `input#card` on shop.example.com:8443",
                    "method": "fill",
                    "role": null,
                    "name": null,
                    "selector": "input#card",
                    "host": "shop.example.com:8443",
                    "path": "/checkout",
                },
                "expires_at": proposal.expires_at.to_rfc3339(),
                "approval_url": format!("https://approve.example.com/proposals/{}", proposal.id),
            }
        })
    );
    assert!(!body.to_string().contains(SECRET_VALUE));
    // Delivered once: nothing more is due now.
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 0, 0));
}

#[tokio::test]
async fn expiring_soon_comes_at_the_lead_and_expired_at_the_expiry() {
    let host = Host::new();
    let taker = Scripted::new(&[Script::Take]);
    let lead = Duration::from_secs(120);
    let worker = host.notified(
        vec![taker.clone()],
        WorkerOptions::default().expiring_lead(lead),
    );
    let proposal = host.propose().await;
    worker.deliver_due().await.unwrap();
    host.clock.advance(TTL - lead - Duration::from_millis(1));
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 0, 0));
    host.clock.advance(Duration::from_millis(1));
    assert_eq!(worker.deliver_due().await.unwrap(), round(1, 0, 0, 0));
    assert_eq!(
        taker.taken.lock().unwrap()[1].headline(),
        format!(
            "Expires at {}: demo-agent wants to fill the element `input#card` on shop.example.com:8443",
            proposal.expires_at.to_rfc3339()
        )
    );
    host.clock.advance(lead - Duration::from_millis(1));
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 0, 0));
    host.clock.advance(Duration::from_millis(1));
    assert_eq!(worker.deliver_due().await.unwrap(), round(1, 0, 0, 0));
    assert_eq!(
        taker.kinds(),
        [
            NotificationKind::Created,
            NotificationKind::Expiring,
            NotificationKind::Expired
        ]
    );
}

#[tokio::test]
async fn a_decided_proposal_says_who_and_never_expires() {
    let host = Host::new();
    let taker = Scripted::new(&[Script::Take]);
    let worker = host.notified(
        vec![taker.clone()],
        WorkerOptions::default().expiring_lead(Duration::from_secs(30)),
    );
    let proposal = host.propose().await;
    worker.deliver_due().await.unwrap();
    host.clock.advance(Duration::from_secs(5));
    host.approve(&proposal, "alice").await;
    assert_eq!(worker.deliver_due().await.unwrap(), round(1, 0, 0, 0));
    let decided = taker.taken.lock().unwrap()[1].clone();
    assert_eq!(
        decided.headline(),
        "approved by alice: demo-agent wants to fill the element `input#card` on shop.example.com:8443"
    );
    assert_eq!(
        decided.to_json()["data"]["decision"],
        json!({"outcome": "approved", "decided_by": "person", "approver": "alice",
               "at": START.saturating_add(Duration::from_secs(5)).to_rfc3339()})
    );
    // Past the expiry: both time-driven events find it decided, unsent.
    host.clock.advance(TTL);
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 2, 0, 0));
    assert_eq!(
        taker.kinds(),
        [NotificationKind::Created, NotificationKind::Decided]
    );
}

#[tokio::test]
async fn a_rules_decision_names_no_person_and_a_stop_names_the_run() {
    let host = Host::new();
    let taker = Scripted::new(&[Script::Take]);
    let worker = host.notified(vec![taker.clone()], WorkerOptions::default());
    let proposal = host.propose().await;
    host.approve(&proposal, "rule:low-risk-links").await;
    host.store
        .stop_run(
            &ActorId::new("demo-agent").unwrap(),
            &RunId::new("run-7").unwrap(),
            host.clock.now(),
        )
        .await
        .unwrap();
    // Decided before anyone was asked: no "approval needed", only the
    // decision and the stop.
    assert_eq!(worker.deliver_due().await.unwrap(), round(2, 1, 0, 0));
    let taken = taker.taken.lock().unwrap().clone();
    assert_eq!(
        taker.kinds(),
        [NotificationKind::Decided, NotificationKind::RunStopped]
    );
    assert_eq!(
        taken[0].to_json()["data"]["decision"]["approver"],
        json!(null)
    );
    assert!(taken[0].headline().starts_with("approved by a rule: "));
    assert_eq!(taken[1].headline(), "Run `run-7` of demo-agent was stopped");
    assert_eq!(taken[1].to_json()["type"], "run.stopped");
}

#[tokio::test]
async fn a_failing_notifier_is_retried_with_backoff_and_the_others_told_once() {
    let host = Host::new();
    let flaky = Scripted::new(&[Script::Fail, Script::Panic, Script::Take]);
    let steady = Scripted::new(&[Script::Take]);
    let worker = host.notified(
        vec![flaky.clone(), steady.clone()],
        WorkerOptions::default().backoff(Duration::from_secs(1), Duration::from_secs(60)),
    );
    host.propose().await;
    // Attempt 1: flaky fails, steady takes it; retried 1 s later.
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 1, 0));
    host.clock.advance(Duration::from_millis(999));
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 0, 0));
    host.clock.advance(Duration::from_millis(1));
    // Attempt 2: flaky panics; retried 2 s later.
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 1, 0));
    host.clock.advance(Duration::from_millis(1_999));
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 0, 0));
    host.clock.advance(Duration::from_millis(1));
    // Attempt 3: flaky takes it.
    assert_eq!(worker.deliver_due().await.unwrap(), round(1, 0, 0, 0));
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 3);
    assert_eq!(flaky.kinds(), [NotificationKind::Created]);
    // The steady one was told once, not on every retry.
    assert_eq!(steady.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refused_notice_is_given_up_at_once() {
    let host = Host::new();
    let refusing = Scripted::new(&[Script::Refuse]);
    let worker = host.notified(vec![refusing.clone()], WorkerOptions::default());
    host.propose().await;
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 0, 1));
    host.clock.advance(Duration::from_secs(3_600));
    worker.deliver_due().await.unwrap();
    // The created notice was tried once; later calls are the expiry's.
    assert_eq!(refusing.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_hanging_notifier_times_out_and_decisions_go_on() {
    let host = Host::new();
    let hanging = Scripted::new(&[Script::Hang]);
    let worker = Arc::new(host.notified(
        vec![hanging.clone()],
        WorkerOptions::default().delivery_timeout(Duration::from_millis(50)),
    ));
    let proposal = host.propose().await;
    let delivering = tokio::spawn({
        let worker = worker.clone();
        async move { worker.deliver_due().await }
    });
    // While the notifier hangs, the proposal is decided as usual.
    hanging.hanging.notified().await;
    host.approve(&proposal, "alice").await;
    assert_eq!(delivering.await.unwrap().unwrap(), round(0, 0, 1, 0));
    let stored = host
        .store
        .get_proposal(&proposal.id)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        stored.state,
        countersign_approval_core::ProposalState::Approved { .. }
    ));
}

#[tokio::test]
async fn every_attempt_failing_gives_the_notice_up_after_the_last() {
    let host = Host::new();
    let failing = Scripted::new(&[Script::Fail]);
    let mut options =
        WorkerOptions::default().backoff(Duration::from_secs(1), Duration::from_secs(1));
    options.max_attempts = 3;
    let worker = host.notified(vec![failing.clone()], options);
    host.propose().await;
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 1, 0));
    host.clock.advance(Duration::from_secs(1));
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 1, 0));
    host.clock.advance(Duration::from_secs(1));
    assert_eq!(worker.deliver_due().await.unwrap(), round(0, 0, 0, 1));
    assert_eq!(failing.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_worker_that_died_mid_delivery_is_taken_over_after_its_lease() {
    let host = Host::new();
    let proposal = host.propose().await;
    // A worker claimed the created event and died before finishing it.
    let lease = WorkerOptions::default().lease;
    let lost = host
        .store
        .claim_due(host.clock.now(), lease, 32)
        .await
        .unwrap();
    assert_eq!(lost.len(), 1);
    let taker = Scripted::new(&[Script::Take]);
    let restarted = host.notified(vec![taker.clone()], WorkerOptions::default());
    assert_eq!(restarted.deliver_due().await.unwrap(), round(0, 0, 0, 0));
    host.clock.advance(lease);
    assert_eq!(restarted.deliver_due().await.unwrap(), round(1, 0, 0, 0));
    let taken = taker.taken.lock().unwrap().clone();
    assert_eq!(taken[0].event.proposal_id.as_ref(), Some(&proposal.id));
    assert_eq!(taken[0].event.id, lost[0].event.id);
}
