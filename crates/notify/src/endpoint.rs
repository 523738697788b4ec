//! Where notifiers may send, and the one HTTP client they send with.

use std::time::Duration;

/// `url` when notices may go there: `https` to any host, or plain `http`
/// to a loopback address (a receiver on the same machine); `None`
/// otherwise, so that nothing is sent in the clear across a network.
pub(crate) fn endpoint(url: &str) -> Option<url::Url> {
    let parsed = url::Url::parse(url).ok()?;
    let loopback = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    };
    let allowed = match parsed.scheme() {
        "https" => parsed.host().is_some(),
        "http" => loopback,
        _ => false,
    };
    allowed.then_some(parsed)
}

/// An HTTP client with rustls and the platform's trust roots, no
/// redirects (a notice goes where the host said, or nowhere), and a 10 s
/// bound on each request.
pub(crate) fn https_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())
}
