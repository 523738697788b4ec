//! Webhook delivery in the Standard Webhooks shape: a JSON body, and the
//! headers `webhook-id` (the event id), `webhook-timestamp` (Unix seconds)
//! and `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of
//! `id.timestamp.body` under the shared secret), which a receiver checks
//! within its tolerance window (5 minutes in the reference libraries).

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::endpoint::{endpoint, https_client};
use crate::notice::ProposalNotice;
use crate::{NotifyError, ProposalNotifier};

/// The prefix of a secret written out (`whsec_` and base64), as Standard
/// Webhooks libraries read it.
pub const SECRET_PREFIX: &str = "whsec_";

/// Shortest secret accepted, in bytes (the reference libraries generate
/// 24 to 64).
pub const MIN_SECRET_BYTES: usize = 24;

/// A webhook endpoint or secret that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The secret is not `whsec_` and base64, or too short.
    #[error("the webhook secret must be `whsec_` and base64 of at least 24 bytes")]
    Secret,
    /// The URL does not parse, or is plain HTTP to a host that is not
    /// loopback.
    #[error("the webhook url `{0}` must be https (plain http only to a loopback address)")]
    Url(String),
    /// The HTTP client could not be built.
    #[error("the webhook client could not be built: {0}")]
    Client(String),
}

/// The key both sides sign with. Never shown: its `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(Vec<u8>);

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(…)")
    }
}

impl WebhookSecret {
    /// Reads `whsec_<base64>`.
    pub fn parse(text: &str) -> Result<WebhookSecret, WebhookError> {
        let encoded = text
            .trim()
            .strip_prefix(SECRET_PREFIX)
            .ok_or(WebhookError::Secret)?;
        let bytes = STANDARD.decode(encoded).map_err(|_| WebhookError::Secret)?;
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(WebhookError::Secret);
        }
        Ok(WebhookSecret(bytes))
    }

    /// `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        // HMAC takes a key of any length; the error arm cannot happen.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            return String::new();
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// Posts each notice to one endpoint, signed.
///
/// A `2xx` answer delivers it; `5xx`, a timeout or a connection failure
/// is retried by the worker with backoff; any other answer (`4xx`, and a
/// redirect, which is never followed) refuses it for good.
#[derive(Debug, Clone)]
pub struct WebhookNotifier {
    url: url::Url,
    secret: WebhookSecret,
    client: reqwest::Client,
}

impl WebhookNotifier {
    /// A notifier posting to `url` (https, or plain http to a loopback
    /// address), signing with `secret`.
    pub fn new(url: &str, secret: WebhookSecret) -> Result<WebhookNotifier, WebhookError> {
        let url = endpoint(url).ok_or_else(|| WebhookError::Url(url.to_owned()))?;
        Ok(WebhookNotifier {
            url,
            secret,
            client: https_client().map_err(WebhookError::Client)?,
        })
    }
}

#[async_trait]
impl ProposalNotifier for WebhookNotifier {
    fn name(&self) -> &str {
        "webhook"
    }

    async fn notify(&self, notice: &ProposalNotice) -> Result<(), NotifyError> {
        let body = notice.to_json().to_string().into_bytes();
        let id = notice.event.id.as_str();
        // The receiver checks this against its own clock: the time of
        // sending, not of the event.
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let answer = self
            .client
            .post(self.url.clone())
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", self.secret.sign(id, timestamp, &body))
            .body(body)
            .send()
            .await
            .map_err(|e| NotifyError::Failed(format!("the webhook was not reached: {e}")))?;
        let status = answer.status();
        if status.is_success() {
            Ok(())
        } else if status.is_server_error() {
            Err(NotifyError::Failed(format!(
                "the webhook answered {status}"
            )))
        } else {
            Err(NotifyError::Refused(format!(
                "the webhook answered {status}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_whsec_and_base64_of_enough_bytes() {
        let key = STANDARD.encode([7u8; 32]);
        assert!(WebhookSecret::parse(&format!("whsec_{key}")).is_ok());
        assert_eq!(WebhookSecret::parse(&key), Err(WebhookError::Secret));
        assert_eq!(
            WebhookSecret::parse("whsec_not base64!"),
            Err(WebhookError::Secret)
        );
        let short = STANDARD.encode([7u8; 16]);
        assert_eq!(
            WebhookSecret::parse(&format!("whsec_{short}")),
            Err(WebhookError::Secret)
        );
        assert_eq!(
            format!(
                "{:?}",
                WebhookSecret::parse(&format!("whsec_{key}")).unwrap()
            ),
            "WebhookSecret(…)"
        );
    }

    #[test]
    fn the_signature_is_the_hmac_of_id_timestamp_and_body() {
        // The example of the Standard Webhooks specification.
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn plain_http_goes_only_to_loopback() {
        let secret = || WebhookSecret(vec![1; 32]);
        assert!(WebhookNotifier::new("https://hooks.example.com/in", secret()).is_ok());
        assert!(WebhookNotifier::new("http://127.0.0.1:9/in", secret()).is_ok());
        assert!(WebhookNotifier::new("http://[::1]:9/in", secret()).is_ok());
        for bad in [
            "http://hooks.example.com/in",
            "ftp://127.0.0.1/in",
            "not a url",
        ] {
            assert_eq!(
                WebhookNotifier::new(bad, secret()).err(),
                Some(WebhookError::Url(bad.to_owned()))
            );
        }
    }
}
