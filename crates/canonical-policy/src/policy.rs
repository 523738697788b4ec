//! The destination and action policy.

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use serde_json::Value;
use url::{Host, Url};

use crate::action::{DEFAULT_METHODS, canonicalise, quote_untrusted};
use crate::{action::Action, address::is_public, denial::Denial, resolver::Resolver};

/// A mistake in building a [`Policy`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyBuildError {
    /// No allowed host was given; a policy never allows every host.
    #[error("at least one allowed host is required")]
    NoAllowedHosts,
    /// An allow-list entry is not a host name, `*.` wildcard or IP literal.
    #[error("allowed host `{entry}` is invalid: {reason}")]
    InvalidHost {
        /// The entry as given.
        entry: String,
        /// Why it was refused.
        reason: String,
    },
    /// No resolver was given.
    #[error("a resolver is required")]
    NoResolver,
    /// A scheme other than `http` or `https` was allowed.
    #[error("scheme `{0}` is not supported; only `http` and `https` are")]
    UnsupportedScheme(String),
    /// The scheme set was emptied.
    #[error("at least one allowed scheme is required")]
    NoSchemes,
    /// The method set was emptied or holds a malformed method.
    #[error("allowed method `{0}` is invalid")]
    InvalidMethod(String),
    /// The method set was emptied.
    #[error("at least one allowed method is required")]
    NoMethods,
    /// The port allow-list was given but is empty.
    #[error("the port allow-list, when given, must not be empty")]
    NoPorts,
    /// A special-use range is malformed or holds a public address.
    #[error("special-use range `{range}` is invalid: {reason}")]
    InvalidSpecialUseRange {
        /// The range as given.
        range: String,
        /// Why it was refused.
        reason: String,
    },
}

/// A block of non-public addresses the host allows explicitly, e.g. `10.0.0.0/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SpecialUseRange {
    net: IpAddr,
    len: u8,
}

impl SpecialUseRange {
    fn parse(entry: &str) -> Result<SpecialUseRange, PolicyBuildError> {
        let invalid = |reason: String| PolicyBuildError::InvalidSpecialUseRange {
            range: entry.to_owned(),
            reason,
        };
        let (net, len) = entry
            .trim()
            .split_once('/')
            .ok_or_else(|| invalid("expected an IP address, `/` and a prefix length".to_owned()))?;
        let net: IpAddr = net
            .parse()
            .map_err(|_| invalid("expected an IP address before `/`".to_owned()))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let len = match len.parse::<u8>() {
            Ok(value) if value <= max && len.bytes().all(|b| b.is_ascii_digit()) => value,
            _ => return Err(invalid(format!("prefix length must be 0 to {max}"))),
        };
        let range = SpecialUseRange { net, len };
        if range.masked() != net {
            return Err(invalid("address has bits set after the prefix".to_owned()));
        }
        if let Some(public) = crate::address::public_address_in(net, len) {
            return Err(invalid(format!("it holds public address `{public}`")));
        }
        Ok(range)
    }

    fn masked(&self) -> IpAddr {
        match self.net {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        }
    }

    /// Same family and same prefix; an IPv4-mapped IPv6 address is not in an IPv4 range.
    fn contains(&self, addr: IpAddr) -> bool {
        addr.is_ipv4() == self.net.is_ipv4()
            && SpecialUseRange {
                net: addr,
                len: self.len,
            }
            .masked()
                == self.net
    }
}

impl fmt::Display for SpecialUseRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.len)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum HostPattern {
    Exact(String),
    /// Matches any strict subdomain of the stored suffix.
    Subdomains(String),
    Ip(IpAddr),
}

impl HostPattern {
    fn parse(entry: &str) -> Result<HostPattern, PolicyBuildError> {
        let invalid = |reason: &str| PolicyBuildError::InvalidHost {
            entry: entry.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = entry.trim();
        let (wildcard, name) = match trimmed.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        if name.is_empty() || name.contains('*') {
            return Err(invalid(
                "expected a host name, `*.` and a host name, or an IP literal",
            ));
        }
        let host = Host::parse(name).map_err(|e| invalid(&e.to_string()))?;
        match host {
            Host::Domain(domain) => {
                let domain = domain.strip_suffix('.').unwrap_or(&domain).to_owned();
                if domain.is_empty() || domain.ends_with('.') {
                    return Err(invalid("host name is empty"));
                }
                if domain.split('.').any(str::is_empty) {
                    return Err(invalid("host name has an empty label"));
                }
                Ok(if wildcard {
                    HostPattern::Subdomains(domain)
                } else {
                    HostPattern::Exact(domain)
                })
            }
            Host::Ipv4(_) | Host::Ipv6(_) if wildcard => {
                Err(invalid("a wildcard cannot apply to an IP literal"))
            }
            Host::Ipv4(ip) => Ok(HostPattern::Ip(IpAddr::V4(ip))),
            Host::Ipv6(ip) => Ok(HostPattern::Ip(IpAddr::V6(ip))),
        }
    }

    fn matches_domain(&self, domain: &str) -> bool {
        match self {
            HostPattern::Exact(name) => name == domain,
            HostPattern::Subdomains(suffix) => domain
                .strip_suffix(suffix.as_str())
                .and_then(|labels| labels.strip_suffix('.'))
                // One or more labels, none empty: `..example.com` is no subdomain.
                .is_some_and(|labels| !labels.split('.').any(str::is_empty)),
            HostPattern::Ip(_) => false,
        }
    }
}

/// Builds a [`Policy`]; see [`Policy::builder`].
#[derive(Clone, Default)]
pub struct PolicyBuilder {
    hosts: Vec<String>,
    resolver: Option<Arc<dyn Resolver>>,
    schemes: Option<Vec<String>>,
    methods: Option<Vec<String>>,
    ports: Option<Vec<u16>>,
    special_use: Vec<String>,
}

impl fmt::Debug for PolicyBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyBuilder")
            .field("hosts", &self.hosts)
            .field("schemes", &self.schemes)
            .field("methods", &self.methods)
            .field("ports", &self.ports)
            .field("special_use", &self.special_use)
            .finish_non_exhaustive()
    }
}

impl PolicyBuilder {
    /// Allows one host: an exact name (`docs.example.com`), every strict
    /// subdomain (`*.example.com`, not the apex), or an IP literal
    /// (`93.184.216.34`, `[2606:2800:220:1::]`).
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.hosts.push(host.into());
        self
    }

    /// Allows each of `hosts`, as [`allow_host`](Self::allow_host).
    pub fn allow_hosts<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.hosts.extend(hosts.into_iter().map(Into::into));
        self
    }

    /// The resolver used to check that domain hosts have only public addresses.
    pub fn resolver(mut self, resolver: impl Resolver + 'static) -> Self {
        self.resolver = Some(Arc::new(resolver));
        self
    }

    /// A resolver shared with other policies.
    pub fn shared_resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// Replaces the allowed schemes (default: `https` only). Only `http` and `https` are accepted.
    pub fn allow_schemes<I, S>(mut self, schemes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.schemes = Some(schemes.into_iter().map(Into::into).collect());
        self
    }

    /// Replaces the allowed methods (default: [`DEFAULT_METHODS`]).
    pub fn allow_methods<I, S>(mut self, methods: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.methods = Some(methods.into_iter().map(Into::into).collect());
        self
    }

    /// Allows only these ports (explicit or the scheme's default). Default: any port.
    pub fn allow_ports(mut self, ports: impl IntoIterator<Item = u16>) -> Self {
        self.ports = Some(ports.into_iter().collect());
        self
    }

    /// Lets addresses in one special-use block pass the public-address check:
    /// `range` is CIDR text, e.g. `127.0.0.2/32` (a test site on loopback) or
    /// `10.0.0.0/8` (an intranet). Never on by default.
    ///
    /// Hosts must still be on the allow-list (an IP literal too), and every
    /// address a name resolves to must be public or inside an allowed range.
    /// [`build`](Self::build) refuses a malformed range, one with bits set
    /// after the prefix, and one that holds any public address. An IPv4
    /// range does not admit the IPv4-mapped IPv6 form of its addresses.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use countersign_canonical_policy::{Policy, StaticResolver};
    ///
    /// let policy = Policy::builder()
    ///     .allow_host("intranet.test")
    ///     .allow_special_use("10.0.0.0/8")
    ///     .resolver(StaticResolver::answering_all(["10.1.2.3".parse().unwrap()]))
    ///     .build()
    ///     .unwrap();
    /// let url = policy.authorize_destination("https://intranet.test/").await.unwrap();
    /// assert_eq!(url.addresses(), ["10.1.2.3".parse::<std::net::IpAddr>().unwrap()]);
    /// # });
    /// ```
    pub fn allow_special_use(mut self, range: impl Into<String>) -> Self {
        self.special_use.push(range.into());
        self
    }

    /// Checks the settings and builds the policy.
    pub fn build(self) -> Result<Policy, PolicyBuildError> {
        if self.hosts.is_empty() {
            return Err(PolicyBuildError::NoAllowedHosts);
        }
        let hosts = self
            .hosts
            .iter()
            .map(|h| HostPattern::parse(h))
            .collect::<Result<BTreeSet<_>, _>>()?;
        let resolver = self.resolver.ok_or(PolicyBuildError::NoResolver)?;

        let schemes: BTreeSet<String> = match self.schemes {
            None => BTreeSet::from(["https".to_owned()]),
            Some(list) => {
                let mut set = BTreeSet::new();
                for scheme in list {
                    let lower = scheme.trim().to_ascii_lowercase();
                    if lower != "http" && lower != "https" {
                        return Err(PolicyBuildError::UnsupportedScheme(scheme));
                    }
                    set.insert(lower);
                }
                if set.is_empty() {
                    return Err(PolicyBuildError::NoSchemes);
                }
                set
            }
        };

        let methods: BTreeSet<String> = match self.methods {
            None => DEFAULT_METHODS.iter().map(|m| (*m).to_owned()).collect(),
            Some(list) => {
                let mut set = BTreeSet::new();
                for method in list {
                    let lower = method.trim().to_ascii_lowercase();
                    if lower.is_empty()
                        || !lower
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                    {
                        return Err(PolicyBuildError::InvalidMethod(method));
                    }
                    set.insert(lower);
                }
                if set.is_empty() {
                    return Err(PolicyBuildError::NoMethods);
                }
                set
            }
        };

        let ports = match self.ports {
            Some(list) if list.is_empty() => return Err(PolicyBuildError::NoPorts),
            Some(list) => Some(list.into_iter().collect()),
            None => None,
        };

        let special_use = self
            .special_use
            .iter()
            .map(|r| SpecialUseRange::parse(r))
            .collect::<Result<BTreeSet<_>, _>>()?;

        Ok(Policy {
            inner: Arc::new(PolicyInner {
                hosts,
                resolver,
                schemes,
                methods,
                ports,
                special_use,
            }),
        })
    }
}

struct PolicyInner {
    hosts: BTreeSet<HostPattern>,
    resolver: Arc<dyn Resolver>,
    schemes: BTreeSet<String>,
    methods: BTreeSet<String>,
    ports: Option<BTreeSet<u16>>,
    special_use: BTreeSet<SpecialUseRange>,
}

/// Decides which destinations and actions a model may propose.
///
/// Cheap to clone (the settings are shared).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use countersign_canonical_policy::{Policy, StaticResolver};
///
/// let policy = Policy::builder()
///     .allow_host("docs.example.com")
///     .resolver(StaticResolver::answering_all(["93.184.216.34".parse().unwrap()]))
///     .build()
///     .unwrap();
/// let url = policy.authorize_destination("https://docs.example.com").await.unwrap();
/// assert_eq!(url.as_str(), "https://docs.example.com/");
/// # });
/// ```
#[derive(Clone)]
pub struct Policy {
    inner: Arc<PolicyInner>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("hosts", &self.inner.hosts)
            .field("schemes", &self.inner.schemes)
            .field("methods", &self.inner.methods)
            .field("ports", &self.inner.ports)
            .field(
                "special_use",
                &self
                    .inner
                    .special_use
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// Starts a builder. `allow_host` (at least once) and `resolver` are required.
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder::default()
    }

    /// Whether `scheme` (`http` or `https`, compared case-insensitively) is
    /// allowed. An egress guard uses it to judge what a tunnel may carry.
    pub fn allows_scheme(&self, scheme: &str) -> bool {
        self.inner.schemes.contains(&scheme.to_ascii_lowercase())
    }

    /// The allowed methods.
    pub fn allowed_methods(&self) -> impl Iterator<Item = &str> {
        self.inner.methods.iter().map(String::as_str)
    }

    /// Checks a destination URL and returns it in canonical form, with the
    /// addresses that were checked.
    ///
    /// Order: parse (WHATWG), scheme, userinfo, host allow-list, port,
    /// then every resolved address must be public (or inside a range given to
    /// [`PolicyBuilder::allow_special_use`]).
    pub async fn authorize_destination(&self, input: &str) -> Result<AuthorizedUrl, Denial> {
        let mut url = Url::parse(input).map_err(|e| Denial::UnparsableUrl {
            reason: e.to_string(),
        })?;
        if !self.inner.schemes.contains(url.scheme()) {
            return Err(Denial::SchemeNotAllowed {
                scheme: quote_untrusted(url.scheme()),
            });
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Denial::UserinfoPresent);
        }

        let literal = match url.host().ok_or(Denial::HostMissing)? {
            Host::Domain(_) => None,
            Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
            Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        };
        let addresses = match literal {
            Some(ip) => self.literal(ip, &url)?,
            None => {
                let raw = url.host_str().unwrap_or_default();
                if let Some(stripped) = raw.strip_suffix('.') {
                    let stripped = stripped.to_owned();
                    self.check_domain(&stripped)?;
                    url.set_host(Some(&stripped))
                        .map_err(|e| Denial::UnparsableUrl {
                            reason: e.to_string(),
                        })?;
                } else {
                    self.check_domain(raw)?;
                }
                self.check_port(&url)?;
                self.resolve_public(url.host_str().unwrap_or_default())
                    .await?
            }
        };
        Ok(AuthorizedUrl { url, addresses })
    }

    fn check_domain(&self, domain: &str) -> Result<(), Denial> {
        if self.inner.hosts.iter().any(|p| p.matches_domain(domain)) {
            Ok(())
        } else {
            Err(Denial::HostNotAllowed {
                host: quote_untrusted(domain),
            })
        }
    }

    fn literal(&self, ip: IpAddr, url: &Url) -> Result<Vec<IpAddr>, Denial> {
        let shown = quote_untrusted(url.host_str().unwrap_or_default());
        if !self.inner.hosts.contains(&HostPattern::Ip(ip)) {
            return Err(Denial::HostNotAllowed { host: shown });
        }
        self.check_port(url)?;
        if !self.may_connect(ip) {
            return Err(Denial::NonPublicAddress {
                host: shown,
                address: ip,
            });
        }
        Ok(vec![ip])
    }

    /// Public, or inside a special-use range the host allowed.
    fn may_connect(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.inner.special_use.iter().any(|r| r.contains(ip))
    }

    fn check_port(&self, url: &Url) -> Result<(), Denial> {
        if let Some(ports) = &self.inner.ports {
            let port = url.port_or_known_default().unwrap_or(0);
            if !ports.contains(&port) {
                return Err(Denial::PortNotAllowed { port });
            }
        }
        Ok(())
    }

    async fn resolve_public(&self, host: &str) -> Result<Vec<IpAddr>, Denial> {
        let answer =
            self.inner
                .resolver
                .resolve(host)
                .await
                .map_err(|e| Denial::ResolutionFailed {
                    host: quote_untrusted(host),
                    reason: quote_untrusted(&e.to_string()),
                })?;
        if answer.is_empty() {
            return Err(Denial::NoAddresses {
                host: quote_untrusted(host),
            });
        }
        if let Some(bad) = answer.iter().find(|ip| !self.may_connect(**ip)) {
            return Err(Denial::NonPublicAddress {
                host: quote_untrusted(host),
                address: *bad,
            });
        }
        let mut addresses = answer;
        addresses.sort();
        addresses.dedup();
        Ok(addresses)
    }

    /// Turns a proposed action (`method`, `selector`, optional `description`
    /// and `arguments`) into its canonical form, or denies it.
    ///
    /// ```
    /// # use countersign_canonical_policy::{Policy, StaticResolver};
    /// # let policy = Policy::builder().allow_host("docs.example.com")
    /// #     .resolver(StaticResolver::new()).build().unwrap();
    /// let action = policy
    ///     .authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))
    ///     .unwrap();
    /// assert_eq!(
    ///     action.canonical_json(),
    ///     r#"{"arguments":{},"description":"click a#docs","method":"click","selector":"a#docs"}"#
    /// );
    /// assert_eq!(
    ///     action.digest().to_hex(),
    ///     "cecff7f76758bc956b845d97c1ea48bd3a553050b866370981447cdfad0f998d"
    /// );
    /// ```
    pub fn authorize_action(&self, proposed: &Value) -> Result<Action, Denial> {
        canonicalise(proposed, Some(&self.inner.methods))
    }
}

/// A destination the policy accepted: the canonical URL and the addresses
/// its host had when checked (public, or in an allowed special-use range).
///
/// A live backend should connect only to [`addresses`](Self::addresses) (DNS
/// rebinding defence) and re-authorise every redirect or navigation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizedUrl {
    url: Url,
    addresses: Vec<IpAddr>,
}

impl AuthorizedUrl {
    /// The canonical URL text: what the WHATWG parser serialises, with one
    /// trailing dot removed from the host.
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }
    /// The parsed URL.
    pub fn url(&self) -> &Url {
        &self.url
    }
    /// The host as matched against the allow-list.
    pub fn host(&self) -> &str {
        self.url.host_str().unwrap_or_default()
    }
    /// The checked addresses, sorted and without duplicates.
    pub fn addresses(&self) -> &[IpAddr] {
        &self.addresses
    }
}

impl fmt::Display for AuthorizedUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
