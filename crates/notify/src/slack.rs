//! Slack: `chat.postMessage` with Block Kit for a new proposal (the
//! summary, the host, the element, and a button that *opens* the approval
//! page; it approves nothing), `chat.update` of that message once the
//! proposal is decided or expired, a reply in its thread when it expires
//! soon, and a message of its own when a run is stopped.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use countersign_approval_core::{NotificationKind, ProposalId};
use serde_json::{Value, json};

use crate::endpoint::{endpoint, https_client};
use crate::notice::ProposalNotice;
use crate::{NotifyError, ProposalNotifier};

/// Slack's Web API.
pub const SLACK_API: &str = "https://slack.com/api/";

/// Slack's errors that may pass: retried. Any other `"ok": false` is
/// refused for good (a bad token, a channel the bot is not in, blocks
/// Slack will not take).
const PASSING_ERRORS: &[&str] = &[
    "ratelimited",
    "internal_error",
    "fatal_error",
    "request_timeout",
    "service_unavailable",
];

/// A Slack endpoint, token or channel that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlackError {
    /// The token is not a Slack token (`xoxb-…`).
    #[error("the slack token must be a bot or user token (`xoxb-…`, `xoxp-…`)")]
    Token,
    /// The channel is empty or holds a space or a control character.
    #[error("the slack channel `{0}` must be a channel id or name without spaces")]
    Channel(String),
    /// The API address is not https (or plain http to loopback).
    #[error("the slack api address `{0}` must be https (plain http only to a loopback address)")]
    Api(String),
    /// The HTTP client could not be built.
    #[error("the slack client could not be built: {0}")]
    Client(String),
}

/// A Slack token; its `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct SlackToken(String);

impl std::fmt::Debug for SlackToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SlackToken(…)")
    }
}

impl SlackToken {
    /// Accepts `xox` tokens of printable ASCII.
    pub fn parse(text: &str) -> Result<SlackToken, SlackError> {
        let text = text.trim();
        let printable = text.bytes().all(|b| b.is_ascii_graphic());
        if text.starts_with("xox") && text.len() > 10 && printable {
            Ok(SlackToken(text.to_owned()))
        } else {
            Err(SlackError::Token)
        }
    }
}

/// Posts notices to one Slack channel.
#[derive(Debug)]
pub struct SlackNotifier {
    api: url::Url,
    token: SlackToken,
    channel: String,
    client: reqwest::Client,
    /// Where each proposal's message was posted (channel id and `ts`), so
    /// that its decision updates it. Kept in this process only: after a
    /// restart the decision is a message of its own.
    posted: Mutex<HashMap<ProposalId, (String, String)>>,
}

impl SlackNotifier {
    /// A notifier posting as `token` to `channel` (an id such as
    /// `C0123456789`, or `#name`).
    pub fn new(token: SlackToken, channel: &str) -> Result<SlackNotifier, SlackError> {
        let usable = !channel.is_empty()
            && channel.len() <= 80
            && !channel.chars().any(|c| c.is_whitespace() || c.is_control());
        if !usable {
            return Err(SlackError::Channel(channel.to_owned()));
        }
        Ok(SlackNotifier {
            api: endpoint(SLACK_API).ok_or_else(|| SlackError::Api(SLACK_API.to_owned()))?,
            token,
            channel: channel.to_owned(),
            client: https_client().map_err(SlackError::Client)?,
            posted: Mutex::new(HashMap::new()),
        })
    }

    /// This notifier calling the Web API at `base` instead of Slack's (a
    /// proxy, or a stand-in in tests).
    pub fn with_api(mut self, base: &str) -> Result<SlackNotifier, SlackError> {
        let with_slash = if base.ends_with('/') {
            base.to_owned()
        } else {
            format!("{base}/")
        };
        self.api = endpoint(&with_slash).ok_or_else(|| SlackError::Api(base.to_owned()))?;
        Ok(self)
    }

    /// Calls `method` with `body`; the answer's JSON when `"ok": true`.
    async fn call(&self, method: &str, body: Value) -> Result<Value, NotifyError> {
        let url = self
            .api
            .join(method)
            .map_err(|e| NotifyError::Refused(format!("slack method `{method}`: {e}")))?;
        let answer = self
            .client
            .post(url)
            .bearer_auth(&self.token.0)
            .header("content-type", "application/json; charset=utf-8")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| NotifyError::Failed(format!("slack was not reached: {e}")))?;
        let status = answer.status();
        if status.as_u16() == 429 || status.is_server_error() {
            return Err(NotifyError::Failed(format!("slack answered {status}")));
        }
        if !status.is_success() {
            return Err(NotifyError::Refused(format!("slack answered {status}")));
        }
        let bytes = answer
            .bytes()
            .await
            .map_err(|e| NotifyError::Failed(format!("slack's answer was cut off: {e}")))?;
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| NotifyError::Failed(format!("slack's answer was not JSON: {e}")))?;
        if answer["ok"] == true {
            return Ok(answer);
        }
        let error = answer["error"].as_str().unwrap_or("unknown").to_owned();
        if PASSING_ERRORS.contains(&error.as_str()) {
            Err(NotifyError::Failed(format!("slack: {error}")))
        } else {
            Err(NotifyError::Refused(format!("slack: {error}")))
        }
    }

    fn remembered(&self, proposal: Option<&ProposalId>) -> Option<(String, String)> {
        let proposal = proposal?;
        self.posted.lock().ok()?.get(proposal).cloned()
    }
}

#[async_trait]
impl ProposalNotifier for SlackNotifier {
    fn name(&self) -> &str {
        "slack"
    }

    async fn notify(&self, notice: &ProposalNotice) -> Result<(), NotifyError> {
        let proposal = notice.event.proposal_id.as_ref();
        let text = escape(&notice.headline());
        let blocks = blocks(notice);
        let earlier = self.remembered(proposal);
        match (notice.event.kind, earlier) {
            (NotificationKind::Decided | NotificationKind::Expired, Some((channel, ts))) => {
                self.call(
                    "chat.update",
                    json!({"channel": channel, "ts": ts, "text": text, "blocks": blocks}),
                )
                .await?;
                if let (Some(id), Ok(mut posted)) = (proposal, self.posted.lock()) {
                    posted.remove(id);
                }
            }
            (NotificationKind::Expiring, Some((channel, ts))) => {
                self.call(
                    "chat.postMessage",
                    json!({"channel": channel, "thread_ts": ts, "text": text, "blocks": blocks}),
                )
                .await?;
            }
            _ => {
                let answer = self
                    .call(
                        "chat.postMessage",
                        json!({"channel": self.channel, "text": text, "blocks": blocks}),
                    )
                    .await?;
                let place = (answer["channel"].as_str(), answer["ts"].as_str());
                if let (NotificationKind::Created, Some(id), (Some(channel), Some(ts))) =
                    (notice.event.kind, proposal, place)
                    && let Ok(mut posted) = self.posted.lock()
                {
                    posted.insert(id.clone(), (channel.to_owned(), ts.to_owned()));
                }
            }
        }
        Ok(())
    }
}

/// Text shown in Slack's `mrkdwn`: `&`, `<` and `>` escaped, so that a
/// page's element name cannot make a link or a mention.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The Block Kit blocks of `notice`: the headline, the host and element,
/// the expiry and ids, and, while the proposal waits, a button that opens
/// its approval page.
fn blocks(notice: &ProposalNotice) -> Value {
    let mut blocks = vec![json!({
        "type": "section",
        "text": {"type": "mrkdwn", "text": format!("*{}*", escape(&notice.headline()))},
    })];
    if let Some(summary) = &notice.summary {
        let element = match &summary.name {
            Some(name) => format!("{} “{}”", summary.what(), escape(name)),
            None => format!("{} `{}`", summary.what(), escape(&summary.selector)),
        };
        blocks.push(json!({
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": format!("*Host*\n{}{}", escape(&summary.host), escape(&summary.path))},
                {"type": "mrkdwn", "text": format!("*Element*\n{} ({})", element, escape(&summary.method))},
            ],
        }));
    }
    let mut context = format!(
        "actor {} · run {}",
        escape(notice.event.actor_id.as_str()),
        escape(
            notice
                .event
                .run_id
                .as_ref()
                .map_or("(every run)", |r| r.as_str())
        )
    );
    if let Some(at) = notice.expires_at {
        context.push_str(&format!(" · expires {}", at.to_rfc3339()));
    }
    blocks.push(json!({
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": context}],
    }));
    let waiting = matches!(
        notice.event.kind,
        NotificationKind::Created | NotificationKind::Expiring
    );
    if let (true, Some(link)) = (waiting, &notice.link) {
        blocks.push(json!({
            "type": "actions",
            "elements": [{
                "type": "button",
                "text": {"type": "plain_text", "text": "Review and decide"},
                "url": link,
                "action_id": "countersign_open_approval_page",
            }],
        }));
    }
    Value::Array(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_channels_are_checked() {
        assert!(SlackToken::parse("xoxb-1234-5678-abcdef").is_ok());
        assert_eq!(SlackToken::parse("hunter2"), Err(SlackError::Token));
        assert_eq!(
            SlackToken::parse("xoxb-12 34 56 78"),
            Err(SlackError::Token)
        );
        assert_eq!(
            format!("{:?}", SlackToken::parse("xoxb-1234-5678-abcdef").unwrap()),
            "SlackToken(…)"
        );
        let token = || SlackToken::parse("xoxb-1234-5678-abcdef").unwrap();
        assert!(SlackNotifier::new(token(), "C0123456789").is_ok());
        assert_eq!(
            SlackNotifier::new(token(), "two words").err(),
            Some(SlackError::Channel("two words".to_owned()))
        );
        assert_eq!(
            SlackNotifier::new(token(), "C1")
                .unwrap()
                .with_api("http://slack.example.com/api")
                .err(),
            Some(SlackError::Api("http://slack.example.com/api".to_owned()))
        );
    }

    #[test]
    fn mrkdwn_cannot_be_made_into_a_link_or_a_mention() {
        assert_eq!(
            escape("<https://evil.example|Approve> & <!channel>"),
            "&lt;https://evil.example|Approve&gt; &amp; &lt;!channel&gt;"
        );
    }
}
