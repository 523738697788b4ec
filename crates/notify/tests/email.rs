//! The mail notifier against an in-process SMTP sink: STARTTLS required
//! sends nothing to a relay that does not offer it, a plain relay the host
//! allows gets one mail per notice, which Python's own `email` parser
//! reads back as plain text with the link; a 5xx recipient is given up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign_approval_core::Clock;
use countersign_notify::{
    DeliveryRound, EmailNotifier, NotificationWorker, SmtpSecurity, WorkerOptions,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const SECRET_VALUE: &str = "correct horse battery staple";

/// What the sink heard: the commands of each session and each mail's data.
#[derive(Default)]
struct Sink {
    commands: Mutex<Vec<String>>,
    mails: Mutex<Vec<String>>,
}

/// An SMTP server that speaks just enough of RFC 5321: it offers STARTTLS
/// only when `offer_tls` (and never completes it), refuses the recipient
/// `nobody@example.com` with 550, and keeps every mail.
async fn sink(offer_tls: bool) -> (Arc<Sink>, u16) {
    let heard = Arc::new(Sink::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shared = Arc::clone(&heard);
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let heard = Arc::clone(&shared);
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut lines = BufReader::new(read).lines();
                write.write_all(b"220 sink ESMTP\r\n").await.unwrap();
                while let Ok(Some(line)) = lines.next_line().await {
                    heard.commands.lock().unwrap().push(line.clone());
                    let verb = line.split(' ').next().unwrap_or("").to_ascii_uppercase();
                    let reply: &[u8] = match verb.as_str() {
                        "EHLO" if offer_tls => b"250-sink\r\n250-STARTTLS\r\n250 8BITMIME\r\n",
                        "EHLO" => b"250-sink\r\n250 8BITMIME\r\n",
                        "STARTTLS" => b"454 TLS not available\r\n",
                        "MAIL" => b"250 ok\r\n",
                        "RCPT" if line.contains("nobody@example.com") => b"550 no such user\r\n",
                        "RCPT" => b"250 ok\r\n",
                        "DATA" => {
                            write.write_all(b"354 go on\r\n").await.unwrap();
                            let mut data = Vec::new();
                            while let Ok(Some(line)) = lines.next_line().await {
                                if line == "." {
                                    break;
                                }
                                data.push(line);
                            }
                            heard.mails.lock().unwrap().push(data.join("\r\n"));
                            b"250 queued\r\n"
                        }
                        "RSET" | "NOOP" => b"250 ok\r\n",
                        "QUIT" => {
                            let _ = write.write_all(b"221 bye\r\n").await;
                            return;
                        }
                        _ => b"502 unknown\r\n",
                    };
                    write.write_all(reply).await.unwrap();
                }
            });
        }
    });
    (heard, port)
}

use support::Host;

impl Host {
    fn mail_worker(&self, notifier: EmailNotifier) -> NotificationWorker {
        self.worker(
            vec![Arc::new(notifier)],
            WorkerOptions::default(),
            "?from=mail&long=0123456789abcdef0123456789abcdef",
        )
    }

    async fn propose(&self) -> countersign_approval_core::Proposal {
        support::propose_fill(
            &*self.store,
            "https://shop.example.com/account/password",
            "input#new-password",
            SECRET_VALUE,
            Duration::from_secs(600),
            self.clock.now(),
        )
        .await
    }
}

fn notifier(port: u16, security: SmtpSecurity, to: &str) -> EmailNotifier {
    EmailNotifier::new(
        "127.0.0.1",
        port,
        security,
        None,
        "countersign <countersign@example.com>",
        &[to],
    )
    .unwrap()
}

/// The mail as Python's `email` package reads it: subject, content type,
/// and the decoded plain-text body.
fn parsed_by_python(raw: &str) -> serde_json::Value {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), raw).unwrap();
    let script = r#"
import email, email.policy, json, sys
message = email.message_from_bytes(open(sys.argv[1], "rb").read(), policy=email.policy.default)
body = message.get_body(preferencelist=("plain",))
print(json.dumps({
    "subject": str(message["subject"]),
    "message_id": str(message["message-id"]),
    "content_type": body.get_content_type(),
    "charset": body.get_content_charset(),
    "text": body.get_content(),
}))
"#;
    let output = std::process::Command::new("python3")
        .args(["-c", script, file.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starttls_required_sends_nothing_to_a_relay_without_it() {
    let (heard, port) = sink(false).await;
    let host = Host::new();
    let worker = host.mail_worker(notifier(
        port,
        SmtpSecurity::StartTlsRequired,
        "oncall@example.com",
    ));
    host.propose().await;
    assert_eq!(
        worker.deliver_due().await.unwrap(),
        DeliveryRound {
            retried: 1,
            ..DeliveryRound::default()
        }
    );
    let commands = heard.commands.lock().unwrap().clone();
    assert!(
        commands.iter().all(|c| !c.starts_with("MAIL")),
        "{commands:?}"
    );
    assert!(heard.mails.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_relay_the_host_allows_gets_one_plain_text_mail_with_the_link() {
    let (heard, port) = sink(false).await;
    let host = Host::new();
    let worker = host.mail_worker(notifier(port, SmtpSecurity::Plain, "oncall@example.com"));
    let proposal = host.propose().await;
    assert_eq!(
        worker.deliver_due().await.unwrap(),
        DeliveryRound {
            delivered: 1,
            ..DeliveryRound::default()
        }
    );
    let mails = heard.mails.lock().unwrap().clone();
    assert_eq!(mails.len(), 1);
    assert!(!mails[0].contains(SECRET_VALUE));
    let mail = parsed_by_python(&mails[0]);
    assert_eq!(
        mail["subject"],
        "Approval needed: demo-agent wants to fill the element `input#new-password` on shop.example.com"
    );
    assert_eq!(mail["content_type"], "text/plain");
    assert_eq!(mail["charset"], "utf-8");
    let text = mail["text"].as_str().unwrap();
    let link = format!(
        "https://approve.example.com/proposals/{}?from=mail&long=0123456789abcdef0123456789abcdef",
        proposal.id
    );
    assert!(
        text.lines().any(|line| line == link),
        "the link is not a line of its own in:\n{text}"
    );
    assert!(text.contains("Expires: "));
    assert!(
        mail["message_id"]
            .as_str()
            .unwrap()
            .ends_with("@countersign>")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_recipient_is_given_up() {
    let (heard, port) = sink(false).await;
    let host = Host::new();
    let worker = host.mail_worker(notifier(port, SmtpSecurity::Plain, "nobody@example.com"));
    host.propose().await;
    assert_eq!(
        worker.deliver_due().await.unwrap(),
        DeliveryRound {
            given_up: 1,
            ..DeliveryRound::default()
        }
    );
    assert!(heard.mails.lock().unwrap().is_empty());
}
