//! The webhook notifier against a receiver that checks what a Standard
//! Webhooks receiver checks, with the reference Python library
//! (`standardwebhooks` from PyPI, in `target/mcp-venv`): signatures,
//! retries on 5xx, none on 4xx, and propose → received on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use countersign_approval_core::policy::Policy;
use countersign_approval_core::{ActorId, Clock, Proposal, ProposalStore, RunId, SystemClock};
use countersign_notify::{
    DeliveryRound, NotificationWorker, ProposalNotifier, WebhookNotifier, WebhookSecret,
    WorkerOptions,
};
use countersign_store_memory::InMemoryApprovalStore;
use serde_json::{Value, json};

fn python() -> Option<PathBuf> {
    let path = std::env::var_os("COUNTERSIGN_MCP_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-venv/bin/python"),
        PathBuf::from,
    );
    let ready = Command::new(&path)
        .args(["-c", "import standardwebhooks"])
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        eprintln!(
            "SKIPPED: no `standardwebhooks` for `{}`; `cargo xtask ci` installs it in target/mcp-venv",
            path.display()
        );
        return None;
    }
    Some(path)
}

fn secret_text(byte: u8) -> String {
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode([byte; 32])
    )
}

/// The Python receiver, and what it printed for each request.
struct Receiver {
    child: Child,
    lines: std::sync::mpsc::Receiver<Value>,
    url: String,
}

impl Receiver {
    fn start(python: &PathBuf, secret: &str, answers: &str) -> Receiver {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .args([secret, answers])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        let mut first = String::new();
        reader.read_line(&mut first).unwrap();
        let port = first.trim().strip_prefix("listening ").unwrap().to_owned();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { return };
                if send.send(serde_json::from_str(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        Receiver {
            child,
            lines,
            url: format!("http://127.0.0.1:{port}/hooks/countersign"),
        }
    }

    fn next(&self) -> Value {
        self.lines.recv_timeout(Duration::from_secs(10)).unwrap()
    }

    fn nothing_more(&self) {
        assert!(self.lines.recv_timeout(Duration::from_millis(300)).is_err());
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Host {
    store: Arc<InMemoryApprovalStore>,
    policy: Policy,
}

impl Host {
    fn new() -> Host {
        Host {
            store: Arc::new(InMemoryApprovalStore::new().with_notification_outbox()),
            policy: support::shop_policy(),
        }
    }

    fn worker(&self, notifier: WebhookNotifier, options: WorkerOptions) -> NotificationWorker {
        let notifiers: Vec<Arc<dyn ProposalNotifier>> = vec![Arc::new(notifier)];
        NotificationWorker::new(
            self.store.clone(),
            notifiers,
            Arc::new(SystemClock),
            Arc::new(|id| format!("https://approve.example.com/proposals/{id}")),
            options,
        )
    }

    async fn propose(&self, n: usize) -> Proposal {
        let url = self
            .policy
            .authorize_destination("https://shop.example.com/cart")
            .await
            .unwrap();
        let action = self
            .policy
            .authorize_action(&json!({"method": "click", "selector": format!("button#n{n}")}))
            .unwrap();
        let proposal = Proposal::for_action(
            ActorId::new("demo-agent").unwrap(),
            RunId::new("run-1").unwrap(),
            &url,
            &action,
            Duration::from_secs(600),
            SystemClock.now(),
        )
        .unwrap();
        self.store.propose(proposal.clone()).await.unwrap();
        proposal
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_library_verifies_every_notice() {
    let Some(python) = python() else { return };
    let secret = secret_text(7);
    let receiver = Receiver::start(&python, &secret, "204");
    let host = Host::new();
    let notifier =
        WebhookNotifier::new(&receiver.url, WebhookSecret::parse(&secret).unwrap()).unwrap();
    let worker = host.worker(notifier, WorkerOptions::default());
    let proposal = host.propose(1).await;
    assert_eq!(
        worker.deliver_due().await.unwrap(),
        DeliveryRound {
            delivered: 1,
            ..DeliveryRound::default()
        }
    );
    let got = receiver.next();
    assert_eq!(got["verified"], true, "{got}");
    assert_eq!(got["status"], 204);
    assert_eq!(got["payload"]["type"], "proposal.created");
    assert_eq!(got["payload"]["data"]["proposal_id"], proposal.id.as_str());
    assert_eq!(got["id"], got["payload"]["data"]["event_id"]);
    assert_eq!(
        got["payload"]["data"]["summary"]["sentence"],
        "demo-agent wants to click the element `button#n1` on shop.example.com"
    );
    receiver.nothing_more();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_fails_verification_and_is_not_retried() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&python, &secret_text(7), "204");
    let host = Host::new();
    let notifier = WebhookNotifier::new(
        &receiver.url,
        WebhookSecret::parse(&secret_text(8)).unwrap(),
    )
    .unwrap();
    let worker = host.worker(notifier, WorkerOptions::default());
    host.propose(1).await;
    // The receiver's library refuses the signature: 400, given up.
    assert_eq!(
        worker.deliver_due().await.unwrap(),
        DeliveryRound {
            given_up: 1,
            ..DeliveryRound::default()
        }
    );
    let got = receiver.next();
    assert_eq!(got["verified"], false);
    assert_eq!(got["status"], 400);
    receiver.nothing_more();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_is_retried_with_the_same_id_and_a_4xx_is_not() {
    let Some(python) = python() else { return };
    let secret = secret_text(9);
    let options =
        WorkerOptions::default().backoff(Duration::from_millis(100), Duration::from_millis(100));
    // 503, then 204: delivered on the second attempt, same webhook-id.
    let flaky = Receiver::start(&python, &secret, "503,204");
    let host = Host::new();
    let worker = host.worker(
        WebhookNotifier::new(&flaky.url, WebhookSecret::parse(&secret).unwrap()).unwrap(),
        options.clone(),
    );
    host.propose(1).await;
    assert_eq!(worker.deliver_due().await.unwrap().retried, 1);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(worker.deliver_due().await.unwrap().delivered, 1);
    let (first, second) = (flaky.next(), flaky.next());
    assert_eq!(
        (first["status"].clone(), second["status"].clone()),
        (json!(503), json!(204))
    );
    assert_eq!(first["id"], second["id"]);
    assert_eq!(first["verified"], true);
    assert_eq!(second["verified"], true);

    // 404: one request, given up.
    let gone = Receiver::start(&python, &secret, "404");
    let host = Host::new();
    let worker = host.worker(
        WebhookNotifier::new(&gone.url, WebhookSecret::parse(&secret).unwrap()).unwrap(),
        options,
    );
    host.propose(1).await;
    assert_eq!(worker.deliver_due().await.unwrap().given_up, 1);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        worker.deliver_due().await.unwrap(),
        DeliveryRound::default()
    );
    assert_eq!(gone.next()["status"], 404);
    gone.nothing_more();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propose_to_received_is_within_a_second_at_p95() {
    const PROPOSALS: usize = 20;
    let Some(python) = python() else { return };
    let secret = secret_text(5);
    let receiver = Receiver::start(&python, &secret, "204");
    let host = Host::new();
    let handle = host
        .worker(
            WebhookNotifier::new(&receiver.url, WebhookSecret::parse(&secret).unwrap()).unwrap(),
            WorkerOptions::default(),
        )
        .spawn();
    let mut latencies = Vec::with_capacity(PROPOSALS);
    for n in 0..PROPOSALS {
        let started = Instant::now();
        host.propose(n).await;
        // The worker runs on the other runtime thread meanwhile.
        let got = tokio::task::block_in_place(|| receiver.next());
        latencies.push(started.elapsed());
        assert_eq!(got["verified"], true);
    }
    handle.stop().await;
    latencies.sort();
    let p95 = latencies[PROPOSALS * 95 / 100 - 1];
    eprintln!(
        "propose -> received: p50 {:?}, p95 {p95:?}",
        latencies[PROPOSALS / 2]
    );
    assert!(p95 <= Duration::from_secs(1), "p95 {p95:?}");
}
