//! Email over SMTP (`lettre`): one plain-text mail per notice, with
//! STARTTLS required unless the host says otherwise.

use std::time::Duration;

use async_trait::async_trait;
use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use crate::notice::ProposalNotice;
use crate::{NotifyError, ProposalNotifier};

/// How the connection to the relay is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SmtpSecurity {
    /// STARTTLS, required: a relay that does not offer it gets nothing
    /// (the notice is retried). The default.
    StartTlsRequired,
    /// No TLS at all: only for a relay the host trusts the path to (one on
    /// the same machine), and only when the host says so.
    Plain,
}

/// An SMTP relay or an address that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmailError {
    /// An address does not parse.
    #[error("the address `{0}` is not a mail address")]
    Address(String),
    /// No recipient.
    #[error("the mail notifier needs at least one recipient")]
    NoRecipient,
    /// The relay's name cannot be used for TLS.
    #[error("the smtp relay `{0}` cannot be used: {1}")]
    Relay(String, String),
}

/// Sends each notice as a mail to fixed recipients.
#[derive(Clone)]
pub struct EmailNotifier {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    to: Vec<Mailbox>,
}

impl std::fmt::Debug for EmailNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailNotifier")
            .field("from", &self.from.to_string())
            .field("to", &self.to.len())
            .finish_non_exhaustive()
    }
}

fn mailbox(text: &str) -> Result<Mailbox, EmailError> {
    text.parse()
        .map_err(|_| EmailError::Address(text.to_owned()))
}

impl EmailNotifier {
    /// A notifier sending through `relay:port` from `from` to every address
    /// of `to`, protected as `security` says, with `credentials` (user,
    /// password) when the relay asks for them.
    pub fn new(
        relay: &str,
        port: u16,
        security: SmtpSecurity,
        credentials: Option<(String, String)>,
        from: &str,
        to: &[&str],
    ) -> Result<EmailNotifier, EmailError> {
        let from = mailbox(from)?;
        let to = to
            .iter()
            .map(|address| mailbox(address))
            .collect::<Result<Vec<_>, _>>()?;
        if to.is_empty() {
            return Err(EmailError::NoRecipient);
        }
        let tls = match security {
            SmtpSecurity::StartTlsRequired => Tls::Required(
                TlsParameters::new(relay.to_owned())
                    .map_err(|e| EmailError::Relay(relay.to_owned(), e.to_string()))?,
            ),
            SmtpSecurity::Plain => Tls::None,
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(relay)
            .port(port)
            .tls(tls)
            .timeout(Some(Duration::from_secs(10)));
        if let Some((user, password)) = credentials {
            builder = builder.credentials(Credentials::new(user, password));
        }
        Ok(EmailNotifier {
            transport: builder.build(),
            from,
            to,
        })
    }

    /// The mail of `notice`.
    fn mail(&self, notice: &ProposalNotice) -> Result<Message, NotifyError> {
        let mut builder = Message::builder()
            .from(self.from.clone())
            .subject(notice.headline())
            // The event id: a mail client or a list deduplicates on it.
            .message_id(Some(format!("<{}@countersign>", notice.event.id)))
            .header(ContentType::TEXT_PLAIN);
        for to in &self.to {
            builder = builder.to(to.clone());
        }
        builder
            .body(body(notice))
            .map_err(|e| NotifyError::Refused(format!("the mail could not be built: {e}")))
    }
}

/// The plain text of a notice's mail: what happened, the facts, the
/// link; never an argument value.
pub(crate) fn body(notice: &ProposalNotice) -> String {
    let mut lines = vec![notice.headline(), String::new()];
    if let Some(summary) = &notice.summary {
        lines.push(format!("Host:    {}{}", summary.host, summary.path));
        lines.push(format!(
            "Element: {} {}",
            summary.what(),
            summary.name.as_ref().map_or_else(
                || format!("`{}`", summary.selector),
                |name| format!("“{name}”")
            )
        ));
        lines.push(format!("Action:  {}", summary.method));
    }
    lines.push(format!("Actor:   {}", notice.event.actor_id.as_str()));
    if let Some(run) = &notice.event.run_id {
        lines.push(format!("Run:     {}", run.as_str()));
    }
    if let Some(at) = notice.expires_at {
        lines.push(format!("Expires: {}", at.to_rfc3339()));
    }
    if let Some(link) = &notice.link {
        lines.push(String::new());
        lines.push("See the page and decide (this mail approves nothing):".to_owned());
        lines.push(link.clone());
    }
    lines.push(String::new());
    lines.push(format!("Event {}", notice.event.id));
    lines.join("\n")
}

#[async_trait]
impl ProposalNotifier for EmailNotifier {
    fn name(&self) -> &str {
        "email"
    }

    async fn notify(&self, notice: &ProposalNotice) -> Result<(), NotifyError> {
        let mail = self.mail(notice)?;
        match self.transport.send(mail).await {
            Ok(_) => Ok(()),
            // A 5xx answer (an unknown recipient, a refused sender) will
            // not pass; anything else (4xx, the network, TLS) may.
            Err(error) if error.is_permanent() => Err(NotifyError::Refused(format!(
                "the smtp relay refused: {error}"
            ))),
            Err(error) => Err(NotifyError::Failed(format!("smtp: {error}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_recipients_are_checked() {
        let make = |from: &str, to: &[&str]| {
            EmailNotifier::new("127.0.0.1", 25, SmtpSecurity::Plain, None, from, to).err()
        };
        assert_eq!(
            make("countersign@example.com", &["oncall@example.com"]),
            None
        );
        assert_eq!(
            make("not an address", &["oncall@example.com"]),
            Some(EmailError::Address("not an address".to_owned()))
        );
        assert_eq!(
            make("countersign@example.com", &[]),
            Some(EmailError::NoRecipient)
        );
    }
}
