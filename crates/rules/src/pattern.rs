//! Host patterns: the one way a rule names hosts.

use std::fmt;

/// A host pattern as a rule names a destination, a link's target or a
/// form's action: `docs.example.com` (that host only), `*.example.com`
/// (every host below `example.com`, at any depth, but not `example.com`
/// itself) or `*` (any host the policy allows).
///
/// Hosts are compared as the policy serialises them: lower-case ASCII, an
/// international name in its punycode (`xn--`) form, an IPv6 address in
/// brackets.
///
/// ```
/// use countersign_rules::HostPattern;
///
/// let shop = HostPattern::parse("*.shop.example")?;
/// assert!(shop.matches("pay.eu.shop.example"));
/// assert!(!shop.matches("shop.example"));
/// assert!(!shop.matches("evilshop.example"));
/// assert!(HostPattern::parse("*").map(|p| p.is_any())?);
/// assert_eq!(
///     HostPattern::parse("*.*.example").unwrap_err(),
///     "a `*` may only stand alone or open the pattern as `*.`",
/// );
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPattern(Shape);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Shape {
    Any,
    /// The suffix, leading dot included.
    Below(String),
    Exactly(String),
}

/// Longest host pattern, in bytes (a DNS name is at most 253).
const MAX_HOST_PATTERN_BYTES: usize = 255;

impl HostPattern {
    /// Reads a pattern; the error says what is wrong with it, in words for
    /// a configuration's author.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        if text == "*" {
            return Ok(HostPattern(Shape::Any));
        }
        let (below, host) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if host.contains('*') {
            return Err("a `*` may only stand alone or open the pattern as `*.`".to_owned());
        }
        if host.is_empty() || text.len() > MAX_HOST_PATTERN_BYTES {
            return Err(format!(
                "a host must have 1 to {MAX_HOST_PATTERN_BYTES} bytes"
            ));
        }
        if !host.is_ascii() {
            return Err(
                "write an international host in its ascii (`xn--`) form, as the policy compares it"
                    .to_owned(),
            );
        }
        if host.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err("write the host in lower case, as the policy compares it".to_owned());
        }
        let bracketed = host.starts_with('[') && host.ends_with(']');
        let allowed = |b: u8| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || b == b'-'
                || b == b'.'
                || (bracketed && (b == b':' || b == b'[' || b == b']'))
        };
        if !host.bytes().all(allowed) || (!bracketed && host.split('.').any(str::is_empty)) {
            return Err(
                "a host has labels of letters, digits and `-` between single dots, or is an ipv6 address in brackets"
                    .to_owned(),
            );
        }
        if below && bracketed {
            return Err("an ipv6 address has no hosts below it".to_owned());
        }
        Ok(HostPattern(if below {
            Shape::Below(format!(".{host}"))
        } else {
            Shape::Exactly(host.to_owned())
        }))
    }

    /// Whether `host` (as the policy serialises hosts) is one this pattern
    /// names.
    pub fn matches(&self, host: &str) -> bool {
        match &self.0 {
            Shape::Any => true,
            Shape::Below(suffix) => host.len() > suffix.len() && host.ends_with(suffix.as_str()),
            Shape::Exactly(exact) => host == exact,
        }
    }

    /// Whether this is `*`, every host.
    pub fn is_any(&self) -> bool {
        self.0 == Shape::Any
    }

    /// The one host this pattern names, when it names exactly one.
    pub(crate) fn exact_host(&self) -> Option<&str> {
        match &self.0 {
            Shape::Exactly(host) => Some(host),
            Shape::Any | Shape::Below(_) => None,
        }
    }
}

impl fmt::Display for HostPattern {
    /// The pattern as written.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Shape::Any => f.write_str("*"),
            Shape::Below(suffix) => write!(f, "*{suffix}"),
            Shape::Exactly(exact) => f.write_str(exact),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HostPattern;

    #[test]
    fn patterns_name_exactly_the_hosts_they_say() {
        let exact = HostPattern::parse("docs.example.com").unwrap();
        assert!(exact.matches("docs.example.com"));
        assert!(!exact.matches("a.docs.example.com"));
        assert!(!exact.matches("docs.example.com.evil"));
        let below = HostPattern::parse("*.example.com").unwrap();
        assert!(below.matches("a.b.example.com"));
        assert!(!below.matches("example.com"));
        assert!(!below.matches(".example.com"));
        assert!(!below.matches("badexample.com"));
        let v6 = HostPattern::parse("[::1]").unwrap();
        assert!(v6.matches("[::1]"));
        assert_eq!(below.to_string(), "*.example.com");
    }

    #[test]
    fn a_pattern_that_could_mislead_is_refused() {
        for bad in [
            "",
            "*.",
            "**",
            "a.*.com",
            "Docs.example.com",
            "bücher.example",
            "a..b",
            ".a",
            "a.",
            "a b",
            "*.[::1]",
            "a:80",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
