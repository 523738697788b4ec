//! The facts a rule decides on, read once per decision.

use std::cell::OnceCell;

use countersign_approval_core::{ElementIdentity, FormFieldKind};
use countersign_canonical_policy::{Action, AuthorizedUrl};

/// What a rule can see of one proposed action: the destination the policy
/// accepted, the canonical action, and the target element as the backend's
/// snapshot read it (none when no element was found, or the backend has no
/// pages).
///
/// Built only from the policy's own outputs ([`AuthorizedUrl`], [`Action`]),
/// so a rule decides only on what the policy already allowed: it can
/// narrow, never widen.
#[derive(Debug, Clone, Copy)]
pub struct ProposedTarget<'a> {
    /// The destination, as the policy accepted it.
    pub url: &'a AuthorizedUrl,
    /// The action, as the policy canonicalised it.
    pub action: &'a Action,
    /// The target element the snapshot bound, if any.
    pub element: Option<&'a ElementIdentity>,
}

/// The facts of an element a rule matches on, derived from its identity.
pub(crate) struct ElementFacts<'a> {
    pub(crate) identity: &'a ElementIdentity,
    pub(crate) input_type: Option<&'a str>,
    /// The host of `href`, when it is an absolute URL with a host.
    pub(crate) link_host: Option<&'a str>,
    /// Where a submit from the target goes: `formaction` over the form's
    /// `action`.
    pub(crate) form_action_host: Option<&'a str>,
    /// `formmethod` over the form's `method`.
    pub(crate) form_method: Option<&'a str>,
    pub(crate) submits_form: bool,
    pub(crate) submitted_kinds: [bool; 3],
    /// Where the target leads: its `href`, else its form's submission.
    destination_url: Option<&'a str>,
    /// That URL read as a [`Destination`], the first time a rule with a
    /// destination condition asks: most decisions never parse it.
    destination: OnceCell<Option<Destination>>,
}

/// A destination's path and query as rules read them: percent-decoded and
/// lower-cased, the query as `key=value` pairs joined with `&`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Destination {
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) keys: Vec<String>,
    /// The path and the query again with their camelCase words split by
    /// `-` (`/WatchListAdd` reads `/watch-list-add`), when that differs:
    /// a pattern matching either form matches.
    pub(crate) path_words: Option<String>,
    pub(crate) query_words: Option<String>,
}

/// `text` lower-cased with a `-` between a lower-case letter or digit and
/// the capital after it; `None` when there is no such boundary.
fn camel_words(text: &str) -> Option<String> {
    let mut words = String::with_capacity(text.len() + 8);
    let mut split = false;
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_uppercase() && previous_lower {
            words.push('-');
            split = true;
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        words.extend(c.to_lowercase());
    }
    split.then_some(words)
}

impl Destination {
    /// The destination `url` names, when it is an absolute `http:` or
    /// `https:` URL (as a browser resolves `href` and form actions).
    pub(crate) fn parse(url: &str) -> Option<Destination> {
        let parsed = url::Url::parse(url).ok()?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return None;
        }
        let raw_path = percent_encoding::percent_decode_str(parsed.path()).decode_utf8_lossy();
        let raw_query = parsed
            .query_pairs()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        Some(Destination {
            path: raw_path.to_lowercase(),
            query: raw_query.to_lowercase(),
            keys: parsed
                .query_pairs()
                .map(|(k, _)| k.to_lowercase())
                .collect(),
            path_words: camel_words(&raw_path),
            query_words: camel_words(&raw_query),
        })
    }
}

impl<'a> ElementFacts<'a> {
    pub(crate) fn of(identity: &'a ElementIdentity) -> ElementFacts<'a> {
        let attributes = identity.attributes();
        let attribute = |name: &str| attributes.get(name).map(String::as_str);
        let mut submitted_kinds = [false; 3];
        if let Some(submission) = identity.submission() {
            for field in submission.fields() {
                submitted_kinds[kind_index(field.kind())] = true;
            }
        }
        ElementFacts {
            identity,
            input_type: attribute("type"),
            link_host: attribute("href").and_then(host_of),
            form_action_host: attribute("formaction")
                .or(attribute("action"))
                .and_then(host_of),
            form_method: attribute("formmethod")
                .filter(|m| !m.is_empty())
                .or(attribute("method")),
            submits_form: identity.submission().is_some(),
            submitted_kinds,
            destination_url: attribute("href")
                .or(attribute("formaction"))
                .or(attribute("action")),
            destination: OnceCell::new(),
        }
    }

    /// Where the target leads, parsed once per decision on first use.
    pub(crate) fn destination(&self) -> Option<&Destination> {
        self.destination
            .get_or_init(|| self.destination_url.and_then(Destination::parse))
            .as_ref()
    }

    pub(crate) fn submits_kind(&self, kind: FormFieldKind) -> bool {
        self.submitted_kinds[kind_index(kind)]
    }
}

/// The host of an absolute `http:` or `https:` URL as a browser serialises
/// it (`href` and form actions are read resolved: lower-case scheme and
/// host, punycode, brackets around IPv6), without its port or userinfo.
/// Anything else (a relative or `javascript:` value the page left
/// unresolvable, another scheme) has no host, so no host condition holds
/// for it.
pub(crate) fn host_of(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = &rest[..rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len())];
    let host_and_port = match authority.rfind('@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let host = if host_and_port.starts_with('[') {
        &host_and_port[..host_and_port
            .find(']')
            .map_or(host_and_port.len(), |end| end + 1)]
    } else {
        &host_and_port[..host_and_port.find(':').unwrap_or(host_and_port.len())]
    };
    // A browser's serialisation is lower case; anything else was not
    // resolved by one and is not trusted to name a host.
    let canonical = !host.is_empty()
        && host.bytes().all(|b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b'.' | b'-' | b'[' | b']' | b':')
        });
    canonical.then_some(host)
}

fn kind_index(kind: FormFieldKind) -> usize {
    match kind {
        FormFieldKind::Text => 0,
        FormFieldKind::Password => 1,
        FormFieldKind::File => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::{Destination, host_of};

    #[test]
    fn a_destination_reads_decoded_and_lower_cased() {
        let d = Destination::parse(
            "https://Shop.example/Account/De%6Cete?Confirm=1&next=%2Fhome&flag#top",
        )
        .unwrap();
        assert_eq!(d.path, "/account/delete");
        assert_eq!(d.query, "confirm=1&next=/home&flag=");
        assert_eq!(d.keys, ["confirm", "next", "flag"]);
        let bare = Destination::parse("http://a.example").unwrap();
        assert_eq!((bare.path.as_str(), bare.query.as_str()), ("/", ""));
        for none in [
            "/relative",
            "javascript:void(0)",
            "mailto:a@b.example",
            "ftp://a.example/x",
        ] {
            assert_eq!(Destination::parse(none), None, "{none}");
        }
    }

    #[test]
    fn the_host_of_a_url_agrees_with_the_url_parser() {
        for url in [
            "https://docs.example.com/a?b#c",
            "http://docs.example.com",
            "https://user:pw@docs.example.com:8443/x",
            "https://[::1]:8080/",
            "https://a.b.example/#frag",
            "https://xn--bcher-kva.example/",
            "https://127.0.0.2/",
            "https://a@b@evil.example/",
        ] {
            let parsed = url::Url::parse(url).unwrap();
            assert_eq!(host_of(url), parsed.host_str(), "{url}");
        }
        for none in [
            "/relative",
            "javascript:alert(1)",
            "mailto:a@b.example",
            "https://",
            "HTTPS://A.EXAMPLE/",
            "ftp://a.example/",
        ] {
            assert_eq!(host_of(none), None, "{none}");
        }
    }
}
