//! A checked set of rules and the one decision it makes.

use std::collections::HashSet;
use std::time::Duration;

use countersign_approval_core::{
    AllowedWrite, AllowedWriteError, ApproverId, FormFieldKind, LANDMARK_ROLES,
    RULE_APPROVER_PREFIX,
};
use regex::{RegexSet, RegexSetBuilder};

use crate::facts::{ElementFacts, ProposedTarget};
use crate::index::{IndexedConditions, RuleIndex};
use crate::pack::DEFAULT_PACK;
use crate::pattern::HostPattern;
use crate::rule::{Conditions, Rule, Tier};

/// Longest rule id, in bytes.
pub const MAX_RULE_ID_BYTES: usize = 64;
/// Longest rule reason, in bytes.
pub const MAX_REASON_BYTES: usize = 200;
pub use crate::index::MAX_RULES;
/// How long a grant a rule approves is valid unless the host says
/// otherwise: as long as one a person approves on the approval page.
pub const DEFAULT_AUTO_GRANT_TTL: Duration = Duration::from_secs(5 * 60);
/// The largest compiled size of one name pattern, in bytes: a pattern
/// past it is refused rather than slowing every decision.
const NAME_PATTERN_SIZE_LIMIT: usize = 256 * 1024;

/// A rule set could not be built. Every message names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// An id that is empty, too long or has other characters.
    #[error(
        "rule id `{0}` must be 1 to 64 of a-z, 0-9, `-`, `_` and `.`, starting with a letter or digit"
    )]
    InvalidId(String),
    /// Two rules with one id.
    #[error("rule `{0}` is declared twice")]
    DuplicateId(String),
    /// A reason that is empty or too long.
    #[error("rule `{0}`: the reason must have 1 to 200 bytes")]
    InvalidReason(String),
    /// A condition given as an empty list, which would match nothing, or,
    /// read as "no condition", everything.
    #[error("rule `{rule}`: `{condition}` is an empty list")]
    EmptyList {
        /// The rule's id.
        rule: String,
        /// The condition.
        condition: &'static str,
    },
    /// A pattern that does not compile.
    #[error("rule `{rule}`: `{condition}` pattern `{pattern}` does not compile: {reason}")]
    InvalidPattern {
        /// The rule's id.
        rule: String,
        /// The condition.
        condition: &'static str,
        /// The pattern, as given.
        pattern: String,
        /// Why.
        reason: String,
    },
    /// A value a condition cannot take.
    #[error("rule `{rule}`: `{condition}` value `{value}` {expected}")]
    InvalidValue {
        /// The rule's id.
        rule: String,
        /// The condition.
        condition: &'static str,
        /// The value, as given.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// An `auto` rule without `hosts`.
    #[error("rule `{0}`: an auto rule must name the hosts it approves on (`hosts`)")]
    AutoWithoutHosts(String),
    /// An `auto` rule that says nothing of the element.
    #[error(
        "rule `{0}`: an auto rule must not match any element: say which elements it approves (a role, tag, type or name; on every host (`*`) not only a form, link or submit condition)"
    )]
    AutoMatchesAnyElement(String),
    /// Too many rules.
    #[error("a rule set holds at most 1000 rules, got {0}")]
    TooMany(usize),
    /// The grant lifetime is zero or longer than 24 hours.
    #[error("a rule-approved grant must live more than 0 and at most 24 hours")]
    InvalidGrantTtl,
    /// A write allowed in read-only mode that is malformed.
    #[error("allowed write: {0}")]
    InvalidAllowedWrite(#[from] AllowedWriteError),
}

/// Which rule decided, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision<'a> {
    /// Who decides the action.
    pub tier: Tier,
    /// The rule that decided, `None` when none matched (then
    /// [`Tier::Person`]).
    pub rule: Option<&'a Rule>,
}

impl<'a> Decision<'a> {
    /// The `deny` rule that decided, when one did.
    pub fn denied_by(&self) -> Option<&'a Rule> {
        self.rule.filter(|_| self.tier == Tier::Deny)
    }

    /// The approver a grant approved by this decision's rule records:
    /// `rule:<id>`. `None` when no rule decided.
    pub fn approver(&self) -> Option<ApproverId> {
        self.rule
            .and_then(|rule| ApproverId::new(format!("{RULE_APPROVER_PREFIX}{}", rule.id)).ok())
    }
}

/// A checked set of rules: every pattern compiled, every rule valid.
///
/// One [`decide`](RuleSet::decide) per proposed action; cheap to share
/// (`Send + Sync`), so one set serves every run.
#[derive(Debug, Clone)]
pub struct RuleSet {
    rules: Vec<CompiledRule>,
    /// Every rule's name patterns, in one set matched once per decision.
    names: RegexSet,
    /// The candidates of each host, method and matched name pattern.
    index: RuleIndex,
    grant_ttl: Duration,
    allowed_writes: Vec<AllowedWrite>,
}

#[derive(Debug, Clone)]
struct CompiledRule {
    rule: Rule,
    hosts: Option<Vec<HostPattern>>,
    methods: Option<Vec<String>>,
    roles: Option<Vec<String>>,
    /// Indices into the set's `names`.
    names: Option<Vec<usize>>,
    tags: Option<Vec<String>>,
    input_types: Option<Vec<String>>,
    form_action_hosts: Option<Vec<HostPattern>>,
    form_methods: Option<Vec<String>>,
    landmarks: Option<Vec<String>>,
    link_hosts: Option<Vec<HostPattern>>,
    same_host_link: Option<bool>,
    plain_same_host_link: Option<bool>,
    submits_form: Option<bool>,
    submitted_field_kinds: Option<Vec<FormFieldKind>>,
    destination_paths: Option<Vec<regex::Regex>>,
    destination_queries: Option<Vec<regex::Regex>>,
    destination_query_keys: Option<Vec<String>>,
    reads_element: bool,
}

/// Builds a [`RuleSet`]; see [`RuleSet::builder`].
#[derive(Debug, Clone, Default)]
pub struct RuleSetBuilder {
    rules: Vec<Rule>,
    pack_hosts: Option<Vec<String>>,
    grant_ttl: Option<Duration>,
    allowed_writes: Vec<AllowedWrite>,
}

impl RuleSet {
    /// A builder with no rules.
    pub fn builder() -> RuleSetBuilder {
        RuleSetBuilder::default()
    }

    /// The rules, in the order declared (the default pack's after the
    /// host's own).
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|compiled| &compiled.rule)
    }

    /// The writes a page may still send in read-only mode, the mode an
    /// act a rule approved leaves its tab in: none unless the host names
    /// them (see [`RuleSetBuilder::allow_write`]).
    pub fn allowed_writes(&self) -> &[AllowedWrite] {
        &self.allowed_writes
    }

    /// How long a grant a rule approves is valid.
    pub fn grant_ttl(&self) -> Duration {
        self.grant_ttl
    }

    /// Decides who approves `target`: the strongest tier among the rules
    /// that match (`deny` over `person` over `auto`; among rules of one
    /// tier, the first declared), or [`Tier::Person`] with no rule when
    /// none matches. Never [`Tier::Auto`] without an element.
    pub fn decide(&self, target: ProposedTarget<'_>) -> Decision<'_> {
        let host = target.url.host();
        let method = target.action.method();
        let element = target.element.map(ElementFacts::of);
        let names = element
            .as_ref()
            .map(|facts| self.names.matches(facts.identity.name()));
        // Only rules whose host, method and name conditions can hold; the
        // full match still runs on each, in the set's order.
        let candidates = self.index.candidates(host, method, names.as_ref());
        let among = candidates
            .ones(self.index.words())
            .filter_map(|i| self.rules.get(i));
        self.decide_among(among, host, method, element.as_ref(), names.as_ref())
    }

    /// The precedence over `rules` (in the set's order): the first `deny`
    /// that matches, else the first `person`, else the first `auto` (only
    /// with an element), else a person.
    fn decide_among<'a>(
        &'a self,
        rules: impl Iterator<Item = &'a CompiledRule>,
        host: &str,
        method: &str,
        element: Option<&ElementFacts<'_>>,
        names: Option<&regex::SetMatches>,
    ) -> Decision<'a> {
        let mut person: Option<&Rule> = None;
        let mut auto: Option<&Rule> = None;
        for compiled in rules {
            let tier = compiled.rule.tier;
            let wanted = match tier {
                Tier::Deny => true,
                Tier::Person => person.is_none(),
                Tier::Auto => person.is_none() && auto.is_none() && element.is_some(),
            };
            if !wanted || !compiled.matches(host, method, element, names) {
                continue;
            }
            match tier {
                Tier::Deny => {
                    return Decision {
                        tier,
                        rule: Some(&compiled.rule),
                    };
                }
                Tier::Person => person = Some(&compiled.rule),
                Tier::Auto => auto = Some(&compiled.rule),
            }
        }
        match (person, auto) {
            (Some(rule), _) => Decision {
                tier: Tier::Person,
                rule: Some(rule),
            },
            (None, Some(rule)) => Decision {
                tier: Tier::Auto,
                rule: Some(rule),
            },
            (None, None) => Decision {
                tier: Tier::Person,
                rule: None,
            },
        }
    }
}

/// Names a pattern that matches all of these is taken to match any name.
const ANY_NAME_PROBES: &[&str] = &["", "a", "Pay 5.00 EUR", "\u{2603}\n"];

impl CompiledRule {
    fn matches(
        &self,
        host: &str,
        method: &str,
        element: Option<&ElementFacts<'_>>,
        names: Option<&regex::SetMatches>,
    ) -> bool {
        // The name patterns were matched once for the whole set: testing
        // their bits first turns most rules away without a string compare.
        if let Some(indices) = &self.names
            && !names.is_some_and(|names| indices.iter().any(|&i| names.matched(i)))
        {
            return false;
        }
        if !any_host(&self.hosts, Some(host)) || !any_equal(&self.methods, Some(method)) {
            return false;
        }
        if !self.reads_element {
            return true;
        }
        let Some(facts) = element else {
            return false;
        };
        let identity = facts.identity;
        any_equal(&self.roles, Some(identity.role()))
            && any_equal(&self.tags, Some(identity.tag()))
            && any_equal(&self.input_types, facts.input_type)
            && any_host(&self.form_action_hosts, facts.form_action_host)
            && any_equal(&self.form_methods, facts.form_method)
            && self.landmarks.as_ref().is_none_or(|wanted| {
                identity
                    .landmarks()
                    .iter()
                    .any(|landmark| wanted.contains(landmark))
            })
            && any_host(&self.link_hosts, facts.link_host)
            && self
                .same_host_link
                .is_none_or(|same| same == (facts.link_host == Some(host)))
            && self.plain_same_host_link.is_none_or(|plain| {
                plain
                    == (identity.role() == "link"
                        && identity.tag() == "a"
                        && facts.link_host == Some(host)
                        && !facts.submits_form)
            })
            && self
                .submits_form
                .is_none_or(|submits| submits == facts.submits_form)
            && self
                .submitted_field_kinds
                .as_ref()
                .is_none_or(|kinds| kinds.iter().any(|&kind| facts.submits_kind(kind)))
            && self.matches_destination(facts)
    }

    /// The destination conditions: each given one needs a destination,
    /// which is parsed only when one is given.
    fn matches_destination(&self, facts: &ElementFacts<'_>) -> bool {
        let given = self.destination_paths.is_some()
            || self.destination_queries.is_some()
            || self.destination_query_keys.is_some();
        if !given {
            return true;
        }
        let Some(destination) = facts.destination() else {
            return false;
        };
        let any_match =
            |patterns: &Option<Vec<regex::Regex>>, text: &str, words: &Option<String>| {
                patterns.as_ref().is_none_or(|patterns| {
                    patterns.iter().any(|p| {
                        p.is_match(text) || words.as_deref().is_some_and(|w| p.is_match(w))
                    })
                })
            };
        any_match(
            &self.destination_paths,
            &destination.path,
            &destination.path_words,
        ) && any_match(
            &self.destination_queries,
            &destination.query,
            &destination.query_words,
        ) && self.destination_query_keys.as_ref().is_none_or(|keys| {
            keys.iter()
                .any(|key| destination.keys.iter().any(|k| k == key))
        })
    }
}

/// A condition on a fact the target may lack: not given, it holds; given,
/// the fact must be there and equal one of its values.
fn any_equal(condition: &Option<Vec<String>>, fact: Option<&str>) -> bool {
    match condition {
        None => true,
        Some(values) => fact.is_some_and(|fact| values.iter().any(|v| v == fact)),
    }
}

fn any_host(condition: &Option<Vec<HostPattern>>, host: Option<&str>) -> bool {
    match condition {
        None => true,
        Some(patterns) => host.is_some_and(|host| patterns.iter().any(|p| p.matches(host))),
    }
}

impl RuleSetBuilder {
    /// Adds one rule, after those added before.
    pub fn rule(mut self, rule: Rule) -> RuleSetBuilder {
        self.rules.push(rule);
        self
    }

    /// Adds rules, in order.
    pub fn rules(mut self, rules: impl IntoIterator<Item = Rule>) -> RuleSetBuilder {
        self.rules.extend(rules);
        self
    }

    /// Adds the [default pack](crate::DEFAULT_PACK) after the host's own
    /// rules, its `auto` rules approving on the hosts `auto_hosts` names
    /// (host patterns; its `person` rules hold on every host).
    pub fn default_pack<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        auto_hosts: I,
    ) -> RuleSetBuilder {
        self.pack_hosts = Some(auto_hosts.into_iter().map(Into::into).collect());
        self
    }

    /// How long a grant a rule approves is valid (more than 0, at most 24
    /// hours; [`DEFAULT_AUTO_GRANT_TTL`] unless set).
    pub fn grant_ttl(mut self, ttl: Duration) -> RuleSetBuilder {
        self.grant_ttl = Some(ttl);
        self
    }

    /// Lets the page send `write` in read-only mode: after an act a rule
    /// approved, when every other request that could write is refused
    /// (for example `POST` to the site's own `/graphql`). Never by
    /// default: each one is a way a rule-approved act may write.
    pub fn allow_write(mut self, write: AllowedWrite) -> RuleSetBuilder {
        self.allowed_writes.push(write);
        self
    }

    /// Checks every rule and compiles the set; refuses the first bad rule
    /// with a message naming it.
    pub fn build(self) -> Result<RuleSet, RuleError> {
        let grant_ttl = self.grant_ttl.unwrap_or(DEFAULT_AUTO_GRANT_TTL);
        if grant_ttl.is_zero() || grant_ttl > Duration::from_secs(24 * 60 * 60) {
            return Err(RuleError::InvalidGrantTtl);
        }
        let mut rules = self.rules;
        if let Some(hosts) = self.pack_hosts {
            if hosts.is_empty() {
                return Err(RuleError::EmptyList {
                    rule: "default pack".to_owned(),
                    condition: "hosts",
                });
            }
            rules.extend(DEFAULT_PACK.iter().map(|entry| entry.rule(&hosts)));
        }
        if rules.len() > MAX_RULES {
            return Err(RuleError::TooMany(rules.len()));
        }
        let mut seen = HashSet::new();
        let mut patterns: Vec<String> = Vec::new();
        let mut compiled = Vec::with_capacity(rules.len());
        for rule in rules {
            check_id(&rule.id)?;
            if !seen.insert(rule.id.clone()) {
                return Err(RuleError::DuplicateId(rule.id));
            }
            compiled.push(compile(rule, &mut patterns)?);
        }
        let names = RegexSetBuilder::new(&patterns)
            .case_insensitive(true)
            .size_limit(NAME_PATTERN_SIZE_LIMIT * patterns.len().max(1))
            .build()
            .map_err(|error| RuleError::InvalidPattern {
                rule: "the whole set".to_owned(),
                condition: "names",
                pattern: String::new(),
                reason: error.to_string(),
            })?;
        let index = RuleIndex::new(
            compiled.iter().map(|rule| IndexedConditions {
                hosts: rule.hosts.as_deref(),
                methods: rule.methods.as_deref(),
                names: rule.names.as_deref(),
            }),
            patterns.len(),
        );
        Ok(RuleSet {
            rules: compiled,
            names,
            index,
            grant_ttl,
            allowed_writes: self.allowed_writes,
        })
    }
}

fn check_id(id: &str) -> Result<(), RuleError> {
    let valid = !id.is_empty()
        && id.len() <= MAX_RULE_ID_BYTES
        && id
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && id.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        });
    if valid {
        Ok(())
    } else {
        Err(RuleError::InvalidId(id.to_owned()))
    }
}

const ROLE_OR_TAG: &str = "must be 1 to 64 lower-case ascii letters, digits or `-`";
const ROLE: &str = "must be 1 to 64 ascii letters, digits or `-`, starting with a letter, as chromium reports roles";
const METHOD: &str =
    "must be 1 to 64 lower-case ascii letters, digits or `-`, as the policy spells methods";
const FORM_METHOD: &str = "must be `get`, `post` or `dialog`";
const FIELD_KIND: &str = "must be `text`, `password` or `file`";
const LANDMARK: &str = "must be `banner`, `complementary`, `contentinfo`, `form`, `main`, `navigation`, `region` or `search`";

fn compile(rule: Rule, patterns: &mut Vec<String>) -> Result<CompiledRule, RuleError> {
    let id = rule.id.clone();
    if rule.reason.trim().is_empty() || rule.reason.len() > MAX_REASON_BYTES {
        return Err(RuleError::InvalidReason(id));
    }
    let when: &Conditions = &rule.when;
    let list = |values: &Option<Vec<String>>, condition: &'static str| match values {
        Some(values) if values.is_empty() => Err(RuleError::EmptyList {
            rule: id.clone(),
            condition,
        }),
        _ => Ok(values.clone()),
    };
    let words = |values: &Option<Vec<String>>,
                 condition: &'static str,
                 allowed: fn(&str) -> bool,
                 expected: &'static str| {
        let values = list(values, condition)?;
        if let Some(bad) = values.iter().flatten().find(|v| !allowed(v)) {
            return Err(RuleError::InvalidValue {
                rule: id.clone(),
                condition,
                value: bad.clone(),
                expected,
            });
        }
        Ok(values)
    };
    let hosts = |values: &Option<Vec<String>>, condition: &'static str| {
        list(values, condition)?
            .map(|values| {
                values
                    .iter()
                    .map(|text| {
                        HostPattern::parse(text).map_err(|reason| RuleError::InvalidPattern {
                            rule: id.clone(),
                            condition,
                            pattern: text.clone(),
                            reason,
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()
    };
    // Whether every name pattern tells names apart (matches not every
    // name), read from the same compile that checks it.
    let mut every_name_narrows = true;
    // One pattern compiled alone, case insensitively, so that a bad one is
    // named with its rule and condition.
    let compile_pattern = |condition: &'static str, pattern: &str| {
        regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .size_limit(NAME_PATTERN_SIZE_LIMIT)
            .build()
            .map_err(|error| RuleError::InvalidPattern {
                rule: id.clone(),
                condition,
                pattern: pattern.to_owned(),
                reason: error.to_string(),
            })
    };
    let name_indices = match list(&when.names, "names")? {
        None => None,
        Some(names) => {
            let mut indices = Vec::with_capacity(names.len());
            for pattern in names {
                let alone = compile_pattern("names", &pattern)?;
                every_name_narrows &= !ANY_NAME_PROBES.iter().all(|probe| alone.is_match(probe));
                indices.push(patterns.len());
                patterns.push(pattern);
            }
            Some(indices)
        }
    };
    let kinds = words(
        &when.submitted_field_kinds,
        "submitted_field_kinds",
        |v| matches!(v, "text" | "password" | "file"),
        FIELD_KIND,
    )?
    .map(|kinds| {
        kinds
            .iter()
            .map(|kind| match kind.as_str() {
                "password" => FormFieldKind::Password,
                "file" => FormFieldKind::File,
                _ => FormFieldKind::Text,
            })
            .collect()
    });
    let destination_patterns = |values: &Option<Vec<String>>, condition: &'static str| {
        list(values, condition)?
            .map(|values| {
                values
                    .iter()
                    .map(|pattern| compile_pattern(condition, pattern))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()
    };
    let compiled = CompiledRule {
        hosts: hosts(&when.hosts, "hosts")?,
        methods: words(&when.methods, "methods", is_word, METHOD)?,
        roles: words(&when.roles, "roles", is_role, ROLE)?,
        names: name_indices,
        tags: words(&when.tags, "tags", is_word, ROLE_OR_TAG)?,
        input_types: words(&when.input_types, "input_types", is_word, ROLE_OR_TAG)?,
        form_action_hosts: hosts(&when.form_action_hosts, "form_action_hosts")?,
        form_methods: words(
            &when.form_methods,
            "form_methods",
            |v| matches!(v, "get" | "post" | "dialog"),
            FORM_METHOD,
        )?,
        landmarks: words(
            &when.landmarks,
            "landmarks",
            |v| LANDMARK_ROLES.contains(&v),
            LANDMARK,
        )?,
        link_hosts: hosts(&when.link_hosts, "link_hosts")?,
        same_host_link: when.same_host_link,
        plain_same_host_link: when.plain_same_host_link,
        submits_form: when.submits_form,
        submitted_field_kinds: kinds,
        destination_paths: destination_patterns(&when.destination_paths, "destination_paths")?,
        destination_queries: destination_patterns(
            &when.destination_queries,
            "destination_queries",
        )?,
        // Compared lower-cased, as the destination's keys are read.
        destination_query_keys: list(&when.destination_query_keys, "destination_query_keys")?
            .map(|keys| keys.iter().map(|k| k.to_lowercase()).collect()),
        reads_element: when.names_an_element_fact(),
        rule: rule.clone(),
    };
    if rule.tier == Tier::Auto {
        if compiled.hosts.is_none() {
            return Err(RuleError::AutoWithoutHosts(id));
        }
        let any_host = compiled.hosts.iter().flatten().any(HostPattern::is_any);
        // Told apart by what the element is (role, tag, type, a name
        // pattern that does not match every name), not only by where it
        // leads.
        let narrows_element = compiled.roles.is_some()
            || compiled.tags.is_some()
            || compiled.input_types.is_some()
            || (compiled.names.is_some() && every_name_narrows);
        if !compiled.reads_element || (any_host && !narrows_element) {
            return Err(RuleError::AutoMatchesAnyElement(id));
        }
    }
    Ok(compiled)
}

/// A role as Chromium's accessibility tree reports it: ARIA's lower-case
/// names, and its own for roles ARIA lacks (`DisclosureTriangle`).
fn is_role(value: &str) -> bool {
    value.len() <= 64
        && value
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn is_word(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod index_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::collections::BTreeMap;

    use countersign_approval_core::{ElementIdentity, FrameIdentity};
    use countersign_canonical_policy::{Policy, StaticResolver};
    use proptest::prelude::*;

    use super::*;

    const HOSTS: [&str; 4] = [
        "docs.example.com",
        "*.example.com",
        "*",
        "admin.example.com",
    ];
    const TARGET_HOSTS: [&str; 3] = ["docs.example.com", "admin.example.com", "shop.example.org"];
    const METHODS: [&str; 2] = ["click", "type"];
    const NAMES: [&str; 3] = ["^next", "pay", "delete"];
    const ELEMENT_NAMES: [&str; 4] = ["Next page", "Pay now", "Delete it", "Help"];

    fn arb_rule() -> impl Strategy<Value = Rule> {
        (
            0..3u8,
            proptest::option::of(proptest::sample::subsequence(HOSTS.to_vec(), 1..=2)),
            proptest::option::of(proptest::sample::subsequence(METHODS.to_vec(), 1..=2)),
            proptest::option::of(proptest::sample::subsequence(NAMES.to_vec(), 1..=2)),
            proptest::option::of(proptest::sample::subsequence(vec!["button", "link"], 1..=1)),
        )
            .prop_map(|(tier, hosts, methods, names, roles)| {
                let mut rule = match tier {
                    0 => Rule::deny("r", "deny"),
                    1 => Rule::person("r", "person"),
                    _ => Rule::auto("r", "auto").hosts(["docs.example.com"]),
                };
                if let Some(hosts) = hosts {
                    rule = rule.hosts(hosts);
                }
                if let Some(methods) = methods {
                    rule = rule.methods(methods);
                }
                if let Some(names) = names {
                    rule = rule.names(names);
                }
                if let Some(roles) = roles {
                    rule = rule.roles(roles);
                }
                rule
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("COUNTERSIGN_RULE_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(300)
        ))]

        /// The index only leaves out rules that cannot match: every
        /// decision equals the one a scan of every rule makes.
        #[test]
        fn the_index_decides_as_a_scan_of_every_rule(
            rules in proptest::collection::vec(arb_rule(), 1..70),
            host in 0..3usize,
            method in 0..2usize,
            element in proptest::option::of((0..4usize, any::<bool>())),
        ) {
            let rules: Vec<Rule> = rules
                .into_iter()
                .enumerate()
                .map(|(i, mut rule)| {
                    rule.id = format!("r{i}");
                    rule
                })
                .collect();
            let Ok(set) = RuleSet::builder().rules(rules).build() else {
                // An auto rule that names no element fact is refused.
                return Ok(());
            };
            let policy = Policy::builder()
                .allow_host(TARGET_HOSTS[host])
                .resolver(StaticResolver::answering_all(["93.184.216.34".parse().unwrap()]))
                .build()
                .unwrap();
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let url = runtime
                .block_on(policy.authorize_destination(&format!("https://{}/", TARGET_HOSTS[host])))
                .unwrap();
            let mut action = serde_json::json!({"method": METHODS[method], "selector": "#x"});
            if METHODS[method] == "type" {
                action["arguments"] = serde_json::json!({"text": "x"});
            }
            let Ok(action) = policy.authorize_action(&action) else {
                return Ok(());
            };
            let identity = element.map(|(name, link)| {
                ElementIdentity::new(
                    if link { "link" } else { "button" },
                    ELEMENT_NAMES[name],
                    if link { "a" } else { "button" },
                    ELEMENT_NAMES[name],
                    BTreeMap::new(),
                    vec![FrameIdentity::new("https://docs.example.com", "d")],
                )
                .unwrap()
            });
            let target = ProposedTarget { url: &url, action: &action, element: identity.as_ref() };
            let indexed = set.decide(target);
            let facts = identity.as_ref().map(ElementFacts::of);
            let names = facts.as_ref().map(|f| set.names.matches(f.identity.name()));
            let scanned = set.decide_among(
                set.rules.iter(),
                url.host(),
                action.method(),
                facts.as_ref(),
                names.as_ref(),
            );
            prop_assert_eq!(indexed.tier, scanned.tier);
            prop_assert_eq!(indexed.rule.map(Rule::id), scanned.rule.map(Rule::id));
        }
    }
}
