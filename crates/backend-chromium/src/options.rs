//! How the backend launches Chromium.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::ChromiumError;

/// Where the backend looks for Chromium unless told otherwise: the binary of
/// Debian's `chromium` package.
pub const DEFAULT_EXECUTABLE: &str = "/usr/bin/chromium";

/// How long a launch may take before it fails, unless told otherwise.
pub const DEFAULT_LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Which way the browser reaches the network.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Egress {
    /// Nothing chosen: launching is refused.
    Unset,
    /// Every request goes through this proxy, loopback included.
    Proxy(String),
    /// The host accepted direct connections.
    Unproxied,
}

/// Launch settings for [`Chromium::launch`](crate::Chromium::launch).
///
/// The defaults fail closed: without [`egress_proxy`](Self::egress_proxy)
/// or the explicit [`allow_unproxied_egress`](Self::allow_unproxied_egress),
/// launching is refused.
#[derive(Debug, Clone)]
pub struct ChromiumOptions {
    executable: PathBuf,
    egress: Egress,
    sandbox: bool,
    launch_timeout: Duration,
}

impl Default for ChromiumOptions {
    fn default() -> Self {
        ChromiumOptions {
            executable: PathBuf::from(DEFAULT_EXECUTABLE),
            egress: Egress::Unset,
            sandbox: true,
            launch_timeout: DEFAULT_LAUNCH_TIMEOUT,
        }
    }
}

impl ChromiumOptions {
    /// Defaults: [`DEFAULT_EXECUTABLE`], no egress chosen (launch refused),
    /// Chromium's sandbox on, [`DEFAULT_LAUNCH_TIMEOUT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The Chromium or Chrome binary to run instead of [`DEFAULT_EXECUTABLE`].
    /// Nothing is ever downloaded.
    pub fn executable(mut self, path: impl AsRef<Path>) -> Self {
        self.executable = path.as_ref().to_path_buf();
        self
    }

    /// Sends every request through this proxy, e.g. `http://127.0.0.1:3128`
    /// (schemes `http`, `https`, `socks4`, `socks5`). Chromium's implicit
    /// loopback bypass is removed (`--proxy-bypass-list=<-loopback>`), so
    /// loopback destinations go through the proxy too. WebRTC may then send
    /// no UDP outside the proxy (`--webrtc-ip-handling-policy=disable_non_proxied_udp`,
    /// and the older spelling `--force-webrtc-ip-handling-policy`), and the
    /// browser resolves no name but the proxy's own
    /// (`--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE <proxy host>`): the
    /// proxy resolves every destination.
    pub fn egress_proxy(mut self, proxy: impl Into<String>) -> Self {
        self.egress = Egress::Proxy(proxy.into());
        self
    }

    /// Launches without an egress proxy.
    ///
    /// **Risk:** the policy checks the URL a grant names, and the backend
    /// checks the page's URL before each action, but without a proxy
    /// nothing checks where the browser *connects*: a page may load
    /// subresources, follow redirects or post forms to any address the
    /// machine can reach (intranet services, cloud metadata endpoints,
    /// loopback), and a name may resolve differently for the browser than
    /// it did for the policy (DNS rebinding). Use only where the browser's
    /// network is confined some other way.
    pub fn allow_unproxied_egress(mut self) -> Self {
        self.egress = Egress::Unproxied;
        self
    }

    /// Runs Chromium without its sandbox (`--no-sandbox`). Chromium refuses
    /// to start as root with its sandbox on; prefer running as another user.
    pub fn no_sandbox(mut self) -> Self {
        self.sandbox = false;
        self
    }

    /// How long a launch may take before it fails.
    pub fn launch_timeout(mut self, timeout: Duration) -> Self {
        self.launch_timeout = timeout;
        self
    }

    pub(crate) fn executable_path(&self) -> &Path {
        &self.executable
    }

    pub(crate) fn sandbox(&self) -> bool {
        self.sandbox
    }

    pub(crate) fn proxy(&self) -> Option<&str> {
        match &self.egress {
            Egress::Proxy(proxy) => Some(proxy),
            Egress::Unset | Egress::Unproxied => None,
        }
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.launch_timeout
    }

    /// The egress flags, or why launching is refused.
    pub(crate) fn egress_args(&self) -> Result<Vec<String>, ChromiumError> {
        match &self.egress {
            Egress::Unset => Err(ChromiumError::NoEgressProxy),
            Egress::Unproxied => Ok(Vec::new()),
            Egress::Proxy(proxy) => {
                let url = check_proxy(proxy)?;
                Ok(vec![
                    format!("--proxy-server={proxy}"),
                    "--proxy-bypass-list=<-loopback>".to_owned(),
                    format!("--{WEBRTC_POLICY}={NO_UDP_OUTSIDE_PROXY}"),
                    format!("--{OLD_WEBRTC_POLICY}={NO_UDP_OUTSIDE_PROXY}"),
                    format!("--host-resolver-rules={}", resolver_rules(&url)),
                ])
            }
        }
    }
}

/// The WebRTC IP-handling switch Chromium knows today.
const WEBRTC_POLICY: &str = "webrtc-ip-handling-policy";
/// Its older name, which some Chromium and Chrome builds still read.
const OLD_WEBRTC_POLICY: &str = "force-webrtc-ip-handling-policy";
/// The WebRTC IP-handling policy that sends no UDP outside the proxy.
const NO_UDP_OUTSIDE_PROXY: &str = "disable_non_proxied_udp";

/// `--host-resolver-rules` for a browser behind `proxy`: no name resolves
/// but the proxy's own host. The rules apply to address literals too, so
/// the proxy's host is excluded even when it is an address; Chromium
/// matches an IPv6 address without brackets and names in lower case.
fn resolver_rules(proxy: &url::Url) -> String {
    match proxy.host() {
        Some(url::Host::Domain(name)) => {
            format!("MAP * ~NOTFOUND, EXCLUDE {}", name.to_ascii_lowercase())
        }
        Some(url::Host::Ipv4(address)) => format!("MAP * ~NOTFOUND, EXCLUDE {address}"),
        Some(url::Host::Ipv6(address)) => format!("MAP * ~NOTFOUND, EXCLUDE {address}"),
        None => "MAP * ~NOTFOUND".to_owned(),
    }
}

fn check_proxy(proxy: &str) -> Result<url::Url, ChromiumError> {
    let invalid = |reason: &str| ChromiumError::InvalidEgressProxy {
        proxy: proxy.to_owned(),
        reason: reason.to_owned(),
    };
    let url = url::Url::parse(proxy).map_err(|e| invalid(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https" | "socks4" | "socks5") {
        return Err(invalid(
            "the scheme must be `http`, `https`, `socks4` or `socks5`",
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("a host is required"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("credentials in the address are not supported"));
    }
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("only a scheme, host and port are allowed"));
    }
    if proxy.contains([',', ';', ' ']) {
        return Err(invalid("only one proxy is allowed"));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn without_egress_choice_launching_is_refused() {
        assert_eq!(
            ChromiumOptions::new().egress_args(),
            Err(ChromiumError::NoEgressProxy)
        );
    }

    #[test]
    fn a_proxy_removes_the_implicit_loopback_bypass_udp_and_name_resolution() {
        let args = ChromiumOptions::new()
            .egress_proxy("http://127.0.0.1:3128")
            .egress_args()
            .unwrap();
        assert_eq!(
            args,
            [
                "--proxy-server=http://127.0.0.1:3128",
                "--proxy-bypass-list=<-loopback>",
                "--webrtc-ip-handling-policy=disable_non_proxied_udp",
                "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            ]
        );
    }

    #[test]
    fn the_proxy_host_is_the_one_name_left_to_resolve() {
        let rules = |proxy: &str| {
            ChromiumOptions::new()
                .egress_proxy(proxy)
                .egress_args()
                .unwrap()
                .pop()
                .unwrap()
        };
        assert_eq!(
            rules("socks5://Guard.Internal:1080"),
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE guard.internal"
        );
        assert_eq!(
            rules("http://[::1]:3128"),
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE ::1"
        );
    }

    #[test]
    fn the_opt_out_adds_no_proxy_flags() {
        let args = ChromiumOptions::new()
            .allow_unproxied_egress()
            .egress_args()
            .unwrap();
        assert!(args.is_empty());
    }

    #[test]
    fn malformed_proxies_are_refused() {
        for proxy in [
            "127.0.0.1:3128",
            "ftp://127.0.0.1:21",
            "http://user:pw@127.0.0.1:3128",
            "http://127.0.0.1:3128/path",
            "http://a:1,http://b:2",
            "http://127.0.0.1:3128;direct://",
        ] {
            let refused = ChromiumOptions::new().egress_proxy(proxy).egress_args();
            assert!(
                matches!(refused, Err(ChromiumError::InvalidEgressProxy { .. })),
                "{proxy} was accepted"
            );
        }
    }
}
