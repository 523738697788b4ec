//! The Slack notifier against a stand-in of Slack's Web API that checks
//! what Slack checks: the bearer token, JSON, a channel the bot is in, the
//! Block Kit limits, and that `chat.update` names a message it posted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use countersign_approval_core::{ApproverId, Clock, DecisionOutcome, Proposal, ProposalStore};
use countersign_notify::{
    DeliveryRound, NotificationWorker, SlackNotifier, SlackToken, WorkerOptions,
};
use serde_json::{Value, json};

const TOKEN: &str = "xoxb-1111-2222-countersigntest";
const CHANNEL_ID: &str = "C0123456789";
const TTL: Duration = Duration::from_secs(600);
const SECRET_VALUE: &str = "4111 1111 1111 1111";

/// What the stand-in received and keeps.
#[derive(Default)]
struct Slack {
    /// Every call that Slack would have taken: method and body.
    calls: Mutex<Vec<(String, Value)>>,
    /// `ts` of the messages posted, in order.
    posted: Mutex<Vec<String>>,
    /// Answer the next call 429 (rate-limited), once.
    throttle_once: AtomicBool,
}

/// Slack answers `200` with JSON, also for its errors.
fn answer(body: Value) -> Response {
    ([("content-type", "application/json")], body.to_string()).into_response()
}

fn slack_error(error: &str) -> Response {
    answer(json!({"ok": false, "error": error}))
}

/// Block Kit's limits for the blocks the notifier uses.
fn blocks_are_valid(blocks: &Value) -> bool {
    let Some(blocks) = blocks.as_array() else {
        return false;
    };
    let text_ok = |t: &Value, max: usize| {
        matches!(t["type"].as_str(), Some("mrkdwn" | "plain_text"))
            && t["text"]
                .as_str()
                .is_some_and(|s| !s.is_empty() && s.chars().count() <= max)
    };
    let mut action_ids = std::collections::HashSet::new();
    !blocks.is_empty()
        && blocks.len() <= 50
        && blocks.iter().all(|block| match block["type"].as_str() {
            Some("section") => match (block.get("text"), block.get("fields")) {
                (Some(text), None) => text_ok(text, 3000),
                (None, Some(fields)) => fields.as_array().is_some_and(|f| {
                    !f.is_empty() && f.len() <= 10 && f.iter().all(|t| text_ok(t, 2000))
                }),
                _ => false,
            },
            Some("context") => block["elements"].as_array().is_some_and(|e| {
                !e.is_empty() && e.len() <= 10 && e.iter().all(|t| text_ok(t, 3000))
            }),
            Some("actions") => block["elements"].as_array().is_some_and(|e| {
                !e.is_empty()
                    && e.len() <= 25
                    && e.iter().all(|button| {
                        button["type"] == "button"
                            && button["text"]["type"] == "plain_text"
                            && text_ok(&button["text"], 75)
                            && button["url"].as_str().is_some_and(|u| u.len() <= 3000)
                            && button["action_id"].as_str().is_some_and(|id| {
                                id.len() <= 255 && action_ids.insert(id.to_owned())
                            })
                    })
            }),
            _ => false,
        })
}

async fn web_api(
    State(slack): State<Arc<Slack>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if slack.throttle_once.swap(false, Ordering::SeqCst) {
        return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response();
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {TOKEN}"))
    {
        return slack_error("invalid_auth");
    }
    let json_body = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let Ok(body) = serde_json::from_str::<Value>(&body) else {
        return slack_error("invalid_json");
    };
    if !json_body {
        return slack_error("invalid_form_data");
    }
    let channel_known = matches!(body["channel"].as_str(), Some(CHANNEL_ID | "#approvals"));
    if !channel_known {
        return slack_error("channel_not_found");
    }
    if body["text"].as_str().is_none_or(str::is_empty) {
        return slack_error("no_text");
    }
    if !blocks_are_valid(&body["blocks"]) {
        return slack_error("invalid_blocks");
    }
    let mut posted = slack.posted.lock().unwrap();
    let ts = match method.as_str() {
        "chat.postMessage" => {
            if let Some(thread) = body.get("thread_ts")
                && !posted.iter().any(|ts| Some(ts.as_str()) == thread.as_str())
            {
                return slack_error("thread_not_found");
            }
            let ts = format!("1800000000.{:06}", posted.len() + 1);
            posted.push(ts.clone());
            ts
        }
        "chat.update" => {
            let ts = body["ts"].as_str().unwrap_or_default().to_owned();
            if !posted.contains(&ts) {
                return slack_error("message_not_found");
            }
            ts
        }
        _ => return slack_error("unknown_method"),
    };
    slack.calls.lock().unwrap().push((method, body));
    answer(json!({"ok": true, "channel": CHANNEL_ID, "ts": ts}))
}

async fn stand_in() -> (Arc<Slack>, String) {
    let slack = Arc::new(Slack::default());
    let app = axum::Router::new()
        .route("/api/{method}", post(web_api))
        .with_state(Arc::clone(&slack));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (slack, format!("http://{address}/api"))
}

use support::Host;

impl Host {
    fn slack_worker(&self, notifier: SlackNotifier) -> NotificationWorker {
        self.worker(
            vec![Arc::new(notifier)],
            WorkerOptions::default().backoff(Duration::from_secs(1), Duration::from_secs(1)),
            "",
        )
    }

    /// A fill whose selector tries to make a Slack link and a mention.
    async fn propose(&self) -> Proposal {
        support::propose_fill(
            &*self.store,
            "https://shop.example.com/pay",
            "input[title=\"<https://evil.example|Approve> <!channel>\"]",
            SECRET_VALUE,
            TTL,
            self.clock.now(),
        )
        .await
    }
}

fn notifier(api: &str, token: &str, channel: &str) -> SlackNotifier {
    SlackNotifier::new(SlackToken::parse(token).unwrap(), channel)
        .unwrap()
        .with_api(api)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_is_posted_threaded_and_updated_when_decided() {
    let (slack, api) = stand_in().await;
    let host = Host::new();
    let worker = host.slack_worker(notifier(&api, TOKEN, "#approvals"));
    let proposal = host.propose().await;
    assert_eq!(
        worker.deliver_due().await.unwrap(),
        DeliveryRound {
            delivered: 1,
            ..DeliveryRound::default()
        }
    );
    let (method, posted) = slack.calls.lock().unwrap()[0].clone();
    assert_eq!(method, "chat.postMessage");
    assert_eq!(posted["channel"], "#approvals");
    let blocks = posted["blocks"].as_array().unwrap();
    assert_eq!(
        blocks[0]["text"]["text"],
        "*Approval needed: demo-agent wants to fill the element `input[title=\"&lt;https://evil.example|Approve&gt; &lt;!channel&gt;\"]` on shop.example.com*"
    );
    assert_eq!(
        blocks[1]["fields"][0]["text"],
        "*Host*\nshop.example.com/pay"
    );
    let button = &blocks[3]["elements"][0];
    assert_eq!(button["text"]["text"], "Review and decide");
    assert_eq!(
        button["url"],
        format!("https://approve.example.com/proposals/{}", proposal.id)
    );
    let everything = posted.to_string();
    assert!(!everything.contains(SECRET_VALUE));
    assert!(!everything.contains("<!channel>"));
    assert!(!everything.contains("<https://evil"));

    // Expiring soon: a reply in the message's thread.
    host.clock.advance(TTL - Duration::from_secs(120));
    worker.deliver_due().await.unwrap();
    let (method, reply) = slack.calls.lock().unwrap()[1].clone();
    assert_eq!(method, "chat.postMessage");
    assert_eq!(reply["thread_ts"], "1800000000.000001");

    // Approved: the first message is updated, its button gone.
    let grant = proposal
        .grant(
            TTL,
            host.clock.now(),
            Some(ApproverId::new("alice").unwrap()),
        )
        .unwrap();
    let outcome = host
        .store
        .approve_proposal(&proposal.id, grant, host.clock.now())
        .await
        .unwrap();
    assert_eq!(outcome, DecisionOutcome::Approved);
    worker.deliver_due().await.unwrap();
    let (method, update) = slack.calls.lock().unwrap()[2].clone();
    assert_eq!(method, "chat.update");
    assert_eq!(update["channel"], CHANNEL_ID);
    assert_eq!(update["ts"], "1800000000.000001");
    assert!(
        update["text"]
            .as_str()
            .unwrap()
            .starts_with("approved by alice: demo-agent wants to fill"),
        "{update}"
    );
    assert!(
        update["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["type"] != "actions")
    );
    assert_eq!(slack.calls.lock().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_token_or_channel_is_given_up_and_a_429_is_retried() {
    let (slack, api) = stand_in().await;
    for (token, channel) in [("xoxb-9999-wrong-token", CHANNEL_ID), (TOKEN, "#elsewhere")] {
        let host = Host::new();
        let worker = host.slack_worker(notifier(&api, token, channel));
        host.propose().await;
        assert_eq!(
            worker.deliver_due().await.unwrap(),
            DeliveryRound {
                given_up: 1,
                ..DeliveryRound::default()
            }
        );
    }
    assert!(slack.calls.lock().unwrap().is_empty());

    let host = Host::new();
    let worker = host.slack_worker(notifier(&api, TOKEN, CHANNEL_ID));
    host.propose().await;
    slack.throttle_once.store(true, Ordering::SeqCst);
    assert_eq!(worker.deliver_due().await.unwrap().retried, 1);
    host.clock.advance(Duration::from_secs(1));
    assert_eq!(worker.deliver_due().await.unwrap().delivered, 1);
    assert_eq!(slack.calls.lock().unwrap().len(), 1);
}
