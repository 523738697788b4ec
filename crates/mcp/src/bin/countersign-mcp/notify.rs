//! `[[notify]]` and `[notifications]`: who is told that a proposal waits,
//! and the worker that tells them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use countersign_approval_core::SystemClock;
use countersign_approval_web::ApprovalPages;
use countersign_notify::{
    EmailNotifier, NotificationWorker, NotifyingStore, ProposalNotifier, SlackNotifier, SlackToken,
    SmtpSecurity, WebhookNotifier, WebhookSecret, WorkerHandle, WorkerOptions,
};
use serde::Deserialize;

use crate::secrets::read_secret;

/// `[[notify]]`: one notifier. Secrets come from the environment or a file,
/// never from the configuration itself, and are never logged.
#[derive(Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum NotifyConfig {
    /// A signed webhook (Standard Webhooks).
    Webhook {
        /// Where notices are posted: `https`, or `http` to a loopback
        /// address.
        url: String,
        /// The environment variable holding the secret (`whsec_…`).
        secret_env: Option<String>,
        /// The file holding the secret.
        secret_file: Option<PathBuf>,
    },
    /// A Slack channel (`chat.postMessage`, Block Kit).
    Slack {
        /// The channel id (`C0123456789`) or `#name`.
        channel: String,
        /// The environment variable holding the bot token (`xoxb-…`).
        token_env: Option<String>,
        /// The file holding the bot token.
        token_file: Option<PathBuf>,
        /// Another address for Slack's Web API (a proxy); Slack's own by
        /// default.
        api: Option<String>,
    },
    /// Mail over SMTP, STARTTLS required unless `tls = "none"`.
    Email {
        /// The relay's host name.
        relay: String,
        /// Its port (587).
        #[serde(default = "default_smtp_port")]
        port: u16,
        /// `starttls` (the default) or `none`.
        #[serde(default)]
        tls: SmtpTls,
        /// The sender.
        from: String,
        /// The recipients.
        to: Vec<String>,
        /// The relay's user name, when it asks for one.
        user: Option<String>,
        /// The environment variable holding the relay's password.
        password_env: Option<String>,
        /// The file holding the relay's password.
        password_file: Option<PathBuf>,
    },
}

/// `tls` of an email table.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SmtpTls {
    /// STARTTLS, required.
    #[default]
    Starttls,
    /// None: the host trusts the path to the relay.
    None,
}

fn default_smtp_port() -> u16 {
    587
}

impl std::fmt::Debug for NotifyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotifyConfig::Webhook { url, .. } => write!(f, "webhook to {url}"),
            NotifyConfig::Slack { channel, .. } => write!(f, "slack to {channel}"),
            NotifyConfig::Email { relay, .. } => write!(f, "email through {relay}"),
        }
    }
}

/// `[notifications]`: timing shared by every notifier.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationsConfig {
    /// How long before a pending proposal's expiry "expiring soon" goes
    /// out (120 s).
    #[serde(default = "default_expiring_lead_secs")]
    pub expiring_lead_secs: u64,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig {
            expiring_lead_secs: default_expiring_lead_secs(),
        }
    }
}

fn default_expiring_lead_secs() -> u64 {
    120
}

/// The notifiers `configs` describe, secrets read.
pub fn notifiers(configs: &[NotifyConfig]) -> Result<Vec<Arc<dyn ProposalNotifier>>, String> {
    let mut built: Vec<Arc<dyn ProposalNotifier>> = Vec::with_capacity(configs.len());
    for (index, config) in configs.iter().enumerate() {
        match config {
            NotifyConfig::Webhook {
                url,
                secret_env,
                secret_file,
            } => {
                let what = format!("`notify[{index}]` (webhook)");
                let secret =
                    read_secret(&what, "secret", secret_env.as_deref(), secret_file.as_ref())?;
                let secret = WebhookSecret::parse(&secret).map_err(|e| format!("{what}: {e}"))?;
                let notifier =
                    WebhookNotifier::new(url, secret).map_err(|e| format!("{what}: {e}"))?;
                built.push(Arc::new(notifier));
            }
            NotifyConfig::Slack {
                channel,
                token_env,
                token_file,
                api,
            } => {
                let what = format!("`notify[{index}]` (slack)");
                let token = read_secret(&what, "token", token_env.as_deref(), token_file.as_ref())?;
                let token = SlackToken::parse(&token).map_err(|e| format!("{what}: {e}"))?;
                let mut notifier =
                    SlackNotifier::new(token, channel).map_err(|e| format!("{what}: {e}"))?;
                if let Some(api) = api {
                    notifier = notifier.with_api(api).map_err(|e| format!("{what}: {e}"))?;
                }
                built.push(Arc::new(notifier));
            }
            NotifyConfig::Email {
                relay,
                port,
                tls,
                from,
                to,
                user,
                password_env,
                password_file,
            } => {
                let what = format!("`notify[{index}]` (email)");
                let credentials = match user {
                    Some(user) => Some((
                        user.clone(),
                        read_secret(
                            &what,
                            "password",
                            password_env.as_deref(),
                            password_file.as_ref(),
                        )?,
                    )),
                    None if password_env.is_some() || password_file.is_some() => {
                        return Err(format!("{what}: a password needs a `user`"));
                    }
                    None => None,
                };
                let security = match tls {
                    SmtpTls::Starttls => SmtpSecurity::StartTlsRequired,
                    SmtpTls::None => SmtpSecurity::Plain,
                };
                let to: Vec<&str> = to.iter().map(String::as_str).collect();
                let notifier = EmailNotifier::new(relay, *port, security, credentials, from, &to)
                    .map_err(|e| format!("{what}: {e}"))?;
                built.push(Arc::new(notifier));
            }
        }
    }
    Ok(built)
}

/// Starts the worker that tells `notifiers` about `store`'s events, each
/// linking to its approval page under `public`.
pub fn start(
    store: Arc<dyn NotifyingStore>,
    notifiers: Vec<Arc<dyn ProposalNotifier>>,
    timing: &NotificationsConfig,
    public: &str,
) -> WorkerHandle {
    let pages = format!("{public}/approvals");
    let options =
        WorkerOptions::default().expiring_lead(Duration::from_secs(timing.expiring_lead_secs));
    NotificationWorker::new(
        store,
        notifiers,
        Arc::new(SystemClock),
        Arc::new(move |id| format!("{pages}{}", ApprovalPages::proposal_path(id))),
        options,
    )
    .spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_email_table_needs_recipients_and_a_user_for_its_password() {
        let email = |to: Vec<String>, user: Option<String>| NotifyConfig::Email {
            relay: "smtp.example.com".to_owned(),
            port: 587,
            tls: SmtpTls::Starttls,
            from: "countersign@example.com".to_owned(),
            to,
            user,
            password_env: Some("COUNTERSIGN_TEST_SMTP_PASSWORD_UNSET".to_owned()),
            password_file: None,
        };
        let oncall = || vec!["oncall@example.com".to_owned()];
        assert_eq!(
            notifiers(&[email(oncall(), None)]).err().unwrap(),
            "`notify[0]` (email): a password needs a `user`"
        );
        assert_eq!(
            notifiers(&[email(oncall(), Some("relay-user".to_owned()))])
                .err()
                .unwrap(),
            "`notify[0]` (email): the environment variable `COUNTERSIGN_TEST_SMTP_PASSWORD_UNSET` is not set"
        );
        let no_password = NotifyConfig::Email {
            relay: "smtp.example.com".to_owned(),
            port: 587,
            tls: SmtpTls::Starttls,
            from: "countersign@example.com".to_owned(),
            to: Vec::new(),
            user: None,
            password_env: None,
            password_file: None,
        };
        assert_eq!(
            notifiers(&[no_password]).err().unwrap(),
            "`notify[0]` (email): the mail notifier needs at least one recipient"
        );
    }

    #[test]
    fn a_slack_table_needs_a_token_and_a_usable_channel() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "xoxb-1234-5678-abcdef\n").unwrap();
        let slack = |channel: &str, token_file: Option<PathBuf>| NotifyConfig::Slack {
            channel: channel.to_owned(),
            token_env: None,
            token_file,
            api: None,
        };
        assert_eq!(
            notifiers(&[slack("C0123456789", None)]).err().unwrap(),
            "`notify[0]` (slack): give the token as `token_env` (an environment variable) or `token_file`"
        );
        assert_eq!(
            notifiers(&[slack("two words", Some(file.path().to_path_buf()))])
                .err()
                .unwrap(),
            "`notify[0]` (slack): the slack channel `two words` must be a channel id or name without spaces"
        );
        assert_eq!(
            notifiers(&[slack("C0123456789", Some(file.path().to_path_buf()))])
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn a_bad_secret_or_url_is_refused_without_showing_the_secret() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "not-a-secret-at-all").unwrap();
        let config = |url: &str| NotifyConfig::Webhook {
            url: url.to_owned(),
            secret_env: None,
            secret_file: Some(file.path().to_path_buf()),
        };
        let error = notifiers(&[config("https://hooks.example.com/in")])
            .err()
            .unwrap();
        assert_eq!(
            error,
            "`notify[0]` (webhook): the webhook secret must be `whsec_` and base64 of at least 24 bytes"
        );
        assert!(!error.contains("not-a-secret-at-all"));
        std::fs::write(file.path(), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            notifiers(&[config("http://hooks.example.com/in")])
                .err()
                .unwrap(),
            "`notify[0]` (webhook): the webhook url `http://hooks.example.com/in` must be https (plain http only to a loopback address)"
        );
        assert_eq!(
            notifiers(&[config("https://hooks.example.com/in")])
                .unwrap()
                .len(),
            1
        );
    }
}
