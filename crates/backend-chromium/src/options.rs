//! How the backend launches Chromium.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::ChromiumError;

/// Flags every launch passes besides the egress, sandbox and feature flags.
pub(crate) const FLAGS: &[&str] = &[
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-extensions",
    "--disable-client-side-phishing-detection",
    "--disable-domain-reliability",
    "--no-pings",
    "--no-startup-window",
    "--no-service-autorun",
    "--disable-component-extensions-with-background-pages",
    "--disable-field-trial-config",
    "--disable-search-engine-choice-screen",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    // Without the back/forward cache every history step is a new document,
    // so it gets a new revision.
    "--disable-back-forward-cache",
];

/// Features every launch disables, in one `--disable-features` switch with
/// the host's (Chromium keeps only one of a repeated switch): the
/// back/forward cache, and the browser's own background traffic (autofill,
/// hints, translation, media routing, certificate-transparency updates,
/// lens).
pub(crate) const DISABLED_FEATURES: &[&str] = &[
    "BackForwardCache",
    "AutofillServerCommunication",
    "OptimizationHints",
    "Translate",
    "MediaRouter",
    "DialMediaRouteProvider",
    "CertificateTransparencyComponentUpdater",
    "LensOverlay",
    "GlobalMediaControls",
    "NetworkTimeServiceQuerying",
];

/// Flags the DevTools client adds to every launch besides the profile
/// directory, the debugging port and the sandbox flags.
pub(crate) const CLIENT_FLAGS: &[&str] = &[
    "--headless",
    "--hide-scrollbars",
    "--mute-audio",
    "--disable-extensions",
];

/// Where the backend looks for Chromium unless told otherwise: the binary of
/// Debian's `chromium` package.
pub const DEFAULT_EXECUTABLE: &str = "/usr/bin/chromium";

/// How long a launch may take before it fails, unless told otherwise.
pub const DEFAULT_LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`navigate`](countersign_approval_core::Backend::navigate)
/// waits for a page to load before it answers an error, unless told
/// otherwise.
pub const DEFAULT_NAVIGATION_TIMEOUT: Duration = Duration::from_secs(15);

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
/// launching is refused. Flags the host adds with [`arg`](Self::arg) are
/// checked at launch; one that would reopen a way around the egress proxy
/// refuses the launch.
#[derive(Debug, Clone)]
pub struct ChromiumOptions {
    executable: PathBuf,
    egress: Egress,
    sandbox: bool,
    launch_timeout: Duration,
    navigation_timeout: Duration,
    flags: Vec<String>,
}

impl Default for ChromiumOptions {
    fn default() -> Self {
        ChromiumOptions {
            executable: PathBuf::from(DEFAULT_EXECUTABLE),
            egress: Egress::Unset,
            sandbox: true,
            launch_timeout: DEFAULT_LAUNCH_TIMEOUT,
            navigation_timeout: DEFAULT_NAVIGATION_TIMEOUT,
            flags: Vec::new(),
        }
    }
}

impl ChromiumOptions {
    /// Defaults: [`DEFAULT_EXECUTABLE`], no egress chosen (launch refused),
    /// Chromium's sandbox on, [`DEFAULT_LAUNCH_TIMEOUT`],
    /// [`DEFAULT_NAVIGATION_TIMEOUT`].
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

    /// How long a [`navigate`](countersign_approval_core::Backend::navigate)
    /// waits for the page to load (the navigation to commit and the new
    /// document's `load` event) before it stops loading and answers an
    /// error. Every tab of the browser uses it.
    pub fn navigation_timeout(mut self, timeout: Duration) -> Self {
        self.navigation_timeout = timeout;
        self
    }

    /// Adds a command-line flag for Chromium, e.g. `--lang=fr` or
    /// `--window-size=1280,800`.
    ///
    /// Checked at launch, which is refused
    /// ([`ChromiumError::RefusedFlag`]) for a flag that would reopen a way
    /// around the egress proxy or undo a setting the backend relies on:
    ///
    /// - anything that does not start with `--` (Chromium takes a value only
    ///   as `--flag=value`; a separate word would be a URL to open, and a
    ///   single `-` also starts a switch);
    /// - proxy and name resolution: `--proxy-server`, `--proxy-bypass-list`,
    ///   `--no-proxy-server`, `--proxy-pac-url`, `--proxy-auto-detect`,
    ///   `--host-resolver-rules`, `--host-rules`, `--webrtc-ip-handling-policy`,
    ///   `--force-webrtc-ip-handling-policy`;
    /// - extensions, which can change the proxy settings:
    ///   `--load-extension`, `--disable-extensions-except`;
    /// - web security: `--disable-web-security`,
    ///   `--allow-running-insecure-content`, `--disable-site-isolation-trials`,
    ///   `--ignore-certificate-errors`, `--ignore-certificate-errors-spki-list`;
    /// - what the backend owns: `--user-data-dir` and `--temp-profile` (a
    ///   fresh profile per launch; the second is read by Debian's
    ///   `/usr/bin/chromium` script), every `--remote-debugging-…` flag and
    ///   `--remote-allow-origins` (the DevTools connection), `--no-sandbox`
    ///   (use [`no_sandbox`](Self::no_sandbox)), and any other flag the
    ///   backend passes itself with another value (the same flag with the
    ///   same value is accepted and passed once);
    /// - `--disable-features` naming `WebRtcHideLocalIpsWithMdns`,
    ///   `IsolateOrigins` or `site-per-process`, and `--enable-features`
    ///   naming a feature the backend disables (such as `BackForwardCache`);
    /// - a flag given twice (Chromium would keep only one of its values).
    ///
    /// Names are matched case-sensitively, as Chromium on Linux matches
    /// them. `--disable-features` and `--enable-features` may be given
    /// several times: their lists are merged into one switch each, the
    /// backend's own disabled features included. This list refuses the
    /// known ways around the proxy; it cannot make an arbitrary flag safe.
    pub fn arg(mut self, flag: impl Into<String>) -> Self {
        self.flags.push(flag.into());
        self
    }

    /// Adds several command-line flags, each as [`arg`](Self::arg) does.
    pub fn args<I, S>(mut self, flags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.flags.extend(flags.into_iter().map(Into::into));
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

    pub(crate) fn navigation_wait(&self) -> Duration {
        self.navigation_timeout
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

    /// Every flag to launch with, or why launching is refused: the
    /// backend's own, the egress flags, the host's, one `--disable-features`
    /// with the backend's disabled features and the host's, and at most one
    /// `--enable-features`. The DevTools client adds the flags in
    /// [`CLIENT_FLAGS`] and the profile and debugging-port flags itself.
    pub(crate) fn launch_flags(&self) -> Result<Vec<String>, ChromiumError> {
        let mut own: Vec<String> = FLAGS.iter().map(|f| (*f).to_owned()).collect();
        own.extend(self.egress_args()?);
        let mut disabled: Vec<String> = DISABLED_FEATURES.iter().map(|f| (*f).to_owned()).collect();
        let mut enabled: Vec<String> = Vec::new();
        let mut added: Vec<String> = Vec::new();
        for flag in &self.flags {
            match check_flag(flag, &own, &added)? {
                Checked::Add => added.push(flag.clone()),
                Checked::AlreadyPassed => {}
                Checked::Disable(entries) => disabled.extend(entries),
                Checked::Enable(entries) => enabled.extend(entries),
            }
        }
        own.extend(added);
        own.push(format!("--disable-features={}", disabled.join(",")));
        if !enabled.is_empty() {
            own.push(format!("--enable-features={}", enabled.join(",")));
        }
        Ok(own)
    }
}

/// What to do with a flag the host added.
#[derive(Debug)]
enum Checked {
    /// Pass it.
    Add,
    /// The same flag with the same value is passed already.
    AlreadyPassed,
    /// Add these entries to the one `--disable-features` switch.
    Disable(Vec<String>),
    /// Add these entries to the one `--enable-features` switch.
    Enable(Vec<String>),
}

/// Flags a host may not add (names without `--`), and why.
const REFUSED_FLAGS: &[(&str, &str)] = &[
    ("proxy-server", EGRESS),
    ("proxy-bypass-list", EGRESS),
    ("no-proxy-server", EGRESS),
    ("proxy-pac-url", EGRESS),
    ("proxy-auto-detect", EGRESS),
    ("host-resolver-rules", RESOLVER),
    ("host-rules", RESOLVER),
    ("webrtc-ip-handling-policy", WEBRTC),
    ("force-webrtc-ip-handling-policy", WEBRTC),
    ("load-extension", EXTENSIONS),
    ("disable-extensions-except", EXTENSIONS),
    ("disable-web-security", SECURITY),
    ("allow-running-insecure-content", SECURITY),
    ("disable-site-isolation-trials", SECURITY),
    ("ignore-certificate-errors", SECURITY),
    ("ignore-certificate-errors-spki-list", SECURITY),
    ("user-data-dir", PROFILE),
    ("temp-profile", PROFILE),
    ("remote-allow-origins", DEVTOOLS),
    ("no-sandbox", SANDBOX),
    ("disable-setuid-sandbox", SANDBOX),
];

/// Prefixes of flag names (without `--`) a host may not add, and why.
const REFUSED_PREFIXES: &[(&str, &str)] = &[("remote-debugging-", DEVTOOLS)];

const EGRESS: &str = "it would change how the browser reaches the network; use `egress_proxy` or `allow_unproxied_egress`";
const RESOLVER: &str =
    "it would change how the browser resolves names, which the backend sets itself";
const WEBRTC: &str = "it would change the webrtc ip-handling policy, which the backend sets itself";
const EXTENSIONS: &str = "extensions can change the browser's proxy settings";
const SECURITY: &str = "it would turn off a browser security boundary";
const PROFILE: &str = "the backend gives every launch a fresh profile directory";
const DEVTOOLS: &str = "the backend owns the devtools connection";
const SANDBOX: &str = "use `no_sandbox` to run without chromium's sandbox";

/// Features a host may not disable, and why.
const KEPT_FEATURES: &[(&str, &str)] = &[
    (
        "WebRtcHideLocalIpsWithMdns",
        "would show the machine's local addresses to pages",
    ),
    ("IsolateOrigins", "would turn off site isolation"),
    ("site-per-process", "would turn off site isolation"),
];

/// Checks one flag the host added, given the backend's own flags and the
/// host's flags accepted so far.
fn check_flag(flag: &str, own: &[String], added: &[String]) -> Result<Checked, ChromiumError> {
    let refuse = |reason: String| {
        Err(ChromiumError::RefusedFlag {
            flag: flag.to_owned(),
            reason,
        })
    };
    let Some(name) = switch_name(flag) else {
        return refuse(
            "a flag must start with `--` (chromium takes a value only as `--flag=value`)"
                .to_owned(),
        );
    };
    if name.is_empty() {
        return refuse("a flag needs a name after `--`".to_owned());
    }
    if flag.contains('\0') {
        return refuse("a flag may not contain a nul byte".to_owned());
    }
    let refused = REFUSED_FLAGS
        .iter()
        .find(|(refused, _)| name == *refused)
        .or_else(|| {
            REFUSED_PREFIXES
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
        });
    if let Some((_, reason)) = refused {
        return refuse((*reason).to_owned());
    }
    let value = flag.get(name.len() + 3..).unwrap_or_default();
    if name == "disable-features" {
        let entries = features(value);
        for entry in &entries {
            let feature = feature_name(entry);
            if let Some((_, reason)) = KEPT_FEATURES.iter().find(|(kept, _)| feature == *kept) {
                return refuse(format!("disabling `{feature}` {reason}"));
            }
        }
        return Ok(Checked::Disable(entries));
    }
    if name == "enable-features" {
        let entries = features(value);
        for entry in &entries {
            let feature = feature_name(entry);
            if DISABLED_FEATURES.contains(&feature) {
                return refuse(format!("the backend disables `{feature}`"));
            }
        }
        return Ok(Checked::Enable(entries));
    }
    let mut passed = own
        .iter()
        .map(String::as_str)
        .chain(CLIENT_FLAGS.iter().copied());
    if let Some(own) = passed.find(|own| switch_name(own) == Some(name)) {
        if own == flag {
            return Ok(Checked::AlreadyPassed);
        }
        return refuse(format!("the backend passes `{own}` itself"));
    }
    if let Some(earlier) = added.iter().find(|a| switch_name(a) == Some(name)) {
        if earlier == flag {
            return Ok(Checked::AlreadyPassed);
        }
        return refuse(format!(
            "`{earlier}` was given already and chromium keeps only one value of a flag"
        ));
    }
    Ok(Checked::Add)
}

/// The switch name of `flag` (what follows `--`, up to the first `=`), as
/// Chromium reads it; `None` when it does not start with `--`.
fn switch_name(flag: &str) -> Option<&str> {
    let rest = flag.strip_prefix("--")?;
    Some(rest.split('=').next().unwrap_or_default())
}

/// The entries of a feature list, as Chromium splits it.
fn features(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The feature an entry such as `*Name<Trial:param/value` names.
fn feature_name(entry: &str) -> &str {
    let entry = entry.trim_start_matches('*');
    entry.split(['<', ':']).next().unwrap_or_default().trim()
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

/// Whether this process runs as root (Linux: effective uid 0 by
/// `/proc/self/status`), where Chromium refuses to start with its sandbox
/// on: a host that must run as root (a container) then chooses
/// [`ChromiumOptions::no_sandbox`] knowingly.
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"))
    })
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

    fn proxied() -> ChromiumOptions {
        ChromiumOptions::new().egress_proxy("http://127.0.0.1:3128")
    }

    fn disabled_features() -> String {
        format!("--disable-features={}", DISABLED_FEATURES.join(","))
    }

    #[test]
    fn without_host_flags_the_backend_passes_its_own_and_the_egress_flags() {
        let mut expected: Vec<String> = FLAGS.iter().map(|f| (*f).to_owned()).collect();
        expected.extend(proxied().egress_args().unwrap());
        expected.push(disabled_features());
        assert_eq!(proxied().launch_flags().unwrap(), expected);
    }

    #[test]
    fn host_flags_come_after_the_backends_and_feature_lists_are_merged() {
        let flags = proxied()
            .arg("--lang=fr")
            .args(["--window-size=1280,800", "--disable-gpu"])
            .arg("--disable-features=Foo, *Bar<Trial")
            .arg("--enable-features=Baz:p/1")
            .arg("--enable-features=Qux")
            .arg("--lang=fr")
            .launch_flags()
            .unwrap();
        let own = FLAGS.len() + proxied().egress_args().unwrap().len();
        assert_eq!(
            flags[own..],
            [
                "--lang=fr".to_owned(),
                "--window-size=1280,800".to_owned(),
                format!("{},Foo,*Bar<Trial", disabled_features()),
                "--enable-features=Baz:p/1,Qux".to_owned(),
            ]
        );
    }

    #[test]
    fn flag_names_are_case_sensitive_as_in_chromium() {
        let flags = proxied()
            .arg("--Proxy-Server=http://10.0.0.1:80")
            .launch_flags()
            .unwrap();
        assert!(flags.contains(&"--Proxy-Server=http://10.0.0.1:80".to_owned()));
    }

    #[test]
    fn flags_that_reopen_a_hole_are_refused_with_the_reason() {
        const EGRESS: &str = "it would change how the browser reaches the network; use `egress_proxy` or `allow_unproxied_egress`";
        const SECURITY: &str = "it would turn off a browser security boundary";
        const DEVTOOLS: &str = "the backend owns the devtools connection";
        const PROFILE: &str = "the backend gives every launch a fresh profile directory";
        const EXTENSIONS: &str = "extensions can change the browser's proxy settings";
        const SANDBOX: &str = "use `no_sandbox` to run without chromium's sandbox";
        const WEBRTC: &str =
            "it would change the webrtc ip-handling policy, which the backend sets itself";
        const NOT_A_FLAG: &str =
            "a flag must start with `--` (chromium takes a value only as `--flag=value`)";
        let cases = [
            ("--proxy-server=http://10.0.0.1:80", EGRESS),
            ("--proxy-server", EGRESS),
            ("--proxy-bypass-list=*", EGRESS),
            ("--no-proxy-server", EGRESS),
            ("--proxy-pac-url=http://10.0.0.1/p.pac", EGRESS),
            ("--proxy-auto-detect", EGRESS),
            (
                "--host-resolver-rules=MAP * 10.0.0.1",
                "it would change how the browser resolves names, which the backend sets itself",
            ),
            (
                "--host-rules=MAP * 10.0.0.1",
                "it would change how the browser resolves names, which the backend sets itself",
            ),
            ("--webrtc-ip-handling-policy=default", WEBRTC),
            ("--force-webrtc-ip-handling-policy=default", WEBRTC),
            ("--load-extension=/tmp/ext", EXTENSIONS),
            ("--disable-extensions-except=/tmp/ext", EXTENSIONS),
            ("--disable-web-security", SECURITY),
            ("--allow-running-insecure-content", SECURITY),
            ("--disable-site-isolation-trials", SECURITY),
            ("--ignore-certificate-errors", SECURITY),
            ("--ignore-certificate-errors-spki-list=abc", SECURITY),
            ("--user-data-dir=/tmp/profile", PROFILE),
            ("--temp-profile", PROFILE),
            ("--remote-debugging-port=9222", DEVTOOLS),
            ("--remote-debugging-address=0.0.0.0", DEVTOOLS),
            ("--remote-debugging-pipe", DEVTOOLS),
            ("--remote-allow-origins=*", DEVTOOLS),
            ("--no-sandbox", SANDBOX),
            ("--disable-setuid-sandbox", SANDBOX),
            (
                "--disable-features=Foo,WebRtcHideLocalIpsWithMdns",
                "disabling `WebRtcHideLocalIpsWithMdns` would show the machine's local addresses to pages",
            ),
            (
                "--disable-features=IsolateOrigins",
                "disabling `IsolateOrigins` would turn off site isolation",
            ),
            (
                "--disable-features=site-per-process",
                "disabling `site-per-process` would turn off site isolation",
            ),
            (
                "--enable-features=*BackForwardCache<Trial",
                "the backend disables `BackForwardCache`",
            ),
            (
                "--password-store=gnome",
                "the backend passes `--password-store=basic` itself",
            ),
            ("--headless=new", "the backend passes `--headless` itself"),
            ("-proxy-server=http://10.0.0.1:80", NOT_A_FLAG),
            ("http://10.0.0.1:80", NOT_A_FLAG),
            (" --lang=fr", NOT_A_FLAG),
            ("--", "a flag needs a name after `--`"),
            ("--=x", "a flag needs a name after `--`"),
            ("--lang=fr\0--x", "a flag may not contain a nul byte"),
        ];
        for (flag, reason) in cases {
            let refused = proxied().arg("--lang=fr").arg(flag).launch_flags();
            assert_eq!(
                refused,
                Err(ChromiumError::RefusedFlag {
                    flag: flag.to_owned(),
                    reason: reason.to_owned(),
                }),
                "{flag}"
            );
            let message = refused.unwrap_err().to_string();
            assert_eq!(
                message,
                format!("refusing chromium flag `{flag}`: {reason}")
            );
        }
    }

    #[test]
    fn the_flag_value_form_with_a_separate_word_is_refused() {
        let refused = proxied()
            .args(["--proxy-server", "http://10.0.0.1:80"])
            .launch_flags();
        assert_eq!(
            refused.unwrap_err().to_string(),
            "refusing chromium flag `--proxy-server`: it would change how the browser reaches the network; use `egress_proxy` or `allow_unproxied_egress`"
        );
        let refused = proxied().args(["--lang", "fr"]).launch_flags();
        assert_eq!(
            refused.unwrap_err().to_string(),
            "refusing chromium flag `fr`: a flag must start with `--` (chromium takes a value only as `--flag=value`)"
        );
    }

    #[test]
    fn a_flag_given_twice_with_two_values_is_refused() {
        let refused = proxied().arg("--lang=fr").arg("--lang=de").launch_flags();
        assert_eq!(
            refused.unwrap_err().to_string(),
            "refusing chromium flag `--lang=de`: `--lang=fr` was given already and chromium keeps only one value of a flag"
        );
    }

    #[test]
    fn host_flags_are_checked_without_a_proxy_too() {
        let refused = ChromiumOptions::new()
            .allow_unproxied_egress()
            .arg("--host-resolver-rules=MAP * 127.0.0.1")
            .launch_flags();
        assert!(matches!(refused, Err(ChromiumError::RefusedFlag { .. })));
        let flags = ChromiumOptions::new()
            .allow_unproxied_egress()
            .launch_flags()
            .unwrap();
        assert!(
            !flags
                .iter()
                .any(|f| f.contains("webrtc") || f.contains("resolver"))
        );
    }
}
