//! One rule as a host declares it: a tier, a reason, and what it matches.

use std::fmt;

/// Who decides an action a rule matches.
///
/// When several rules match, the strongest decides: [`Deny`](Tier::Deny),
/// then [`Person`](Tier::Person), then [`Auto`](Tier::Auto); when none
/// matches, a person decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Tier {
    /// Approved by the rule, no person asked: the grant is the ordinary
    /// single-use, element-bound one, recorded as approved by
    /// `rule:<id>`.
    Auto,
    /// A person decides, on the approval page.
    Person,
    /// Refused: `NOT_AUTHORIZED`, with the rule's reason.
    Deny,
}

impl Tier {
    /// `auto`, `person` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Auto => "auto",
            Tier::Person => "person",
            Tier::Deny => "deny",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rule as declared: nothing is checked until
/// [`RuleSetBuilder::build`](crate::RuleSetBuilder::build), which refuses
/// a bad rule with a message that names it.
///
/// Every condition given must hold for the rule to match (within one
/// condition, any of its values will do); a condition not given holds for
/// every action. Conditions on the element hold only when the snapshot
/// found the target, so a rule with one never matches an action whose
/// target was not found.
///
/// ```
/// use countersign_rules::Rule;
///
/// let next = Rule::auto("docs-pagination", "moving between pages of the docs reads only")
///     .hosts(["docs.example.com"])
///     .methods(["click"])
///     .roles(["link", "button"])
///     .names([r"^(next|previous)( page)?$"])
///     .submits_form(false);
/// assert_eq!(next.id(), "docs-pagination");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub(crate) id: String,
    pub(crate) tier: Tier,
    pub(crate) reason: String,
    pub(crate) when: Conditions,
}

/// What a rule matches, each `None` when not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Conditions {
    pub(crate) hosts: Option<Vec<String>>,
    pub(crate) methods: Option<Vec<String>>,
    pub(crate) roles: Option<Vec<String>>,
    pub(crate) names: Option<Vec<String>>,
    pub(crate) tags: Option<Vec<String>>,
    pub(crate) input_types: Option<Vec<String>>,
    pub(crate) form_action_hosts: Option<Vec<String>>,
    pub(crate) form_methods: Option<Vec<String>>,
    pub(crate) landmarks: Option<Vec<String>>,
    pub(crate) link_hosts: Option<Vec<String>>,
    pub(crate) same_host_link: Option<bool>,
    pub(crate) plain_same_host_link: Option<bool>,
    pub(crate) submits_form: Option<bool>,
    pub(crate) submitted_field_kinds: Option<Vec<String>>,
    pub(crate) destination_paths: Option<Vec<String>>,
    pub(crate) destination_queries: Option<Vec<String>>,
    pub(crate) destination_query_keys: Option<Vec<String>>,
}

impl Conditions {
    /// Whether any condition reads the target element.
    pub(crate) fn names_an_element_fact(&self) -> bool {
        self.roles.is_some()
            || self.names.is_some()
            || self.tags.is_some()
            || self.input_types.is_some()
            || self.form_action_hosts.is_some()
            || self.form_methods.is_some()
            || self.landmarks.is_some()
            || self.link_hosts.is_some()
            || self.same_host_link.is_some()
            || self.plain_same_host_link.is_some()
            || self.submits_form.is_some()
            || self.submitted_field_kinds.is_some()
            || self.destination_paths.is_some()
            || self.destination_queries.is_some()
            || self.destination_query_keys.is_some()
    }
}

fn owned<I, S>(values: I) -> Option<Vec<String>>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    Some(values.into_iter().map(Into::into).collect())
}

impl Rule {
    /// A rule of `tier` with its `id` (1 to 64 of `a-z`, `0-9`, `-`, `_`,
    /// `.`, starting with a letter or digit; unique in its set) and its
    /// `reason` (1 to 200 bytes; the model is told it when the rule
    /// denies).
    pub fn new(tier: Tier, id: impl Into<String>, reason: impl Into<String>) -> Rule {
        Rule {
            id: id.into(),
            tier,
            reason: reason.into(),
            when: Conditions::default(),
        }
    }

    /// An [`Auto`](Tier::Auto) rule.
    pub fn auto(id: impl Into<String>, reason: impl Into<String>) -> Rule {
        Rule::new(Tier::Auto, id, reason)
    }

    /// A [`Person`](Tier::Person) rule.
    pub fn person(id: impl Into<String>, reason: impl Into<String>) -> Rule {
        Rule::new(Tier::Person, id, reason)
    }

    /// A [`Deny`](Tier::Deny) rule.
    pub fn deny(id: impl Into<String>, reason: impl Into<String>) -> Rule {
        Rule::new(Tier::Deny, id, reason)
    }

    /// The rule's id, as given.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The rule's tier.
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// The rule's reason, as given.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The destination's host matches one of these
    /// [host patterns](crate::HostPattern). An `auto` rule must have them.
    pub fn hosts<I: IntoIterator<Item = S>, S: Into<String>>(mut self, patterns: I) -> Rule {
        self.when.hosts = owned(patterns);
        self
    }

    /// The action's method is one of these (`click`, `fill`, `press`, …).
    pub fn methods<I: IntoIterator<Item = S>, S: Into<String>>(mut self, methods: I) -> Rule {
        self.when.methods = owned(methods);
        self
    }

    /// The target's role in the accessibility tree is one of these, as
    /// Chromium reports it (`button`, `link`, `tab`, `searchbox`,
    /// `textbox`, `switch`, `menuitem`, `option`, and `DisclosureTriangle`
    /// for a `<summary>`), compared exactly.
    pub fn roles<I: IntoIterator<Item = S>, S: Into<String>>(mut self, roles: I) -> Rule {
        self.when.roles = owned(roles);
        self
    }

    /// The target's accessible name matches one of these regular
    /// expressions ([`regex`](https://docs.rs/regex) syntax), case
    /// insensitively, anywhere in the name unless anchored with `^`/`$`.
    pub fn names<I: IntoIterator<Item = S>, S: Into<String>>(mut self, patterns: I) -> Rule {
        self.when.names = owned(patterns);
        self
    }

    /// The target's tag is one of these (lower case: `a`, `button`, …).
    pub fn tags<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tags: I) -> Rule {
        self.when.tags = owned(tags);
        self
    }

    /// The target's `type` (as the element applies it: a `button`
    /// without one is `submit`) is one of these.
    pub fn input_types<I: IntoIterator<Item = S>, S: Into<String>>(mut self, types: I) -> Rule {
        self.when.input_types = owned(types);
        self
    }

    /// The target belongs to a form whose submission goes to a host one of
    /// these patterns names (the target's `formaction` over the form's
    /// `action`).
    pub fn form_action_hosts<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        patterns: I,
    ) -> Rule {
        self.when.form_action_hosts = owned(patterns);
        self
    }

    /// The target belongs to a form submitted with one of these methods
    /// (`get`, `post`, `dialog`; the target's `formmethod` over the
    /// form's).
    pub fn form_methods<I: IntoIterator<Item = S>, S: Into<String>>(mut self, methods: I) -> Rule {
        self.when.form_methods = owned(methods);
        self
    }

    /// The target sits in a landmark with one of these roles, at any depth
    /// (`search`, `navigation`, `main`, … as Chromium's accessibility tree
    /// reports them): a text box in a `search` landmark is a search field
    /// even where no form or `type=search` says so.
    pub fn landmarks<I: IntoIterator<Item = S>, S: Into<String>>(mut self, roles: I) -> Rule {
        self.when.landmarks = owned(roles);
        self
    }

    /// The target has an `href` to a host one of these patterns names.
    pub fn link_hosts<I: IntoIterator<Item = S>, S: Into<String>>(mut self, patterns: I) -> Rule {
        self.when.link_hosts = owned(patterns);
        self
    }

    /// With `true`: the target has an `href` to the destination's own
    /// host; with `false`: it has none, or one to another host.
    pub fn same_host_link(mut self, same: bool) -> Rule {
        self.when.same_host_link = Some(same);
        self
    }

    /// With `true`: the target is a plain link (an `a` whose role is
    /// `link`) to the destination's own host that submits no form, which a
    /// browser follows with a GET; with `false`: it is anything else. The
    /// default pack's name rules hold only with `false`: a plain link is
    /// judged by where it leads, not by its words.
    pub fn plain_same_host_link(mut self, plain: bool) -> Rule {
        self.when.plain_same_host_link = Some(plain);
        self
    }

    /// With `true`: the action on the target submits a form (the snapshot
    /// bound the form data it would send); with `false`: it does not.
    pub fn submits_form(mut self, submits: bool) -> Rule {
        self.when.submits_form = Some(submits);
        self
    }

    /// The target's destination (where its `href` leads, else where its
    /// form is submitted: `formaction` over the form's `action`, as the
    /// browser resolved them) has a path one of these regular expressions
    /// matches, case insensitively, anywhere unless anchored. The path is
    /// matched percent-decoded (`/de%6Cete` reads `/delete`), and also with
    /// its camelCase words split by `-` (`/WatchListAdd` reads
    /// `/watch-list-add` as well).
    pub fn destination_paths<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        patterns: I,
    ) -> Rule {
        self.when.destination_paths = owned(patterns);
        self
    }

    /// The target's destination (see
    /// [`destination_paths`](Rule::destination_paths)) has a query one of
    /// these regular expressions matches, case insensitively: the query's
    /// pairs percent-decoded (a `+` is a space), as `key=value` joined with
    /// `&`, also with camelCase words split by `-` as for paths. A
    /// destination without a query has the empty query.
    pub fn destination_queries<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        patterns: I,
    ) -> Rule {
        self.when.destination_queries = owned(patterns);
        self
    }

    /// The target's destination (see
    /// [`destination_paths`](Rule::destination_paths)) has one of these
    /// keys in its query, compared percent-decoded and case
    /// insensitively.
    pub fn destination_query_keys<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        keys: I,
    ) -> Rule {
        self.when.destination_query_keys = owned(keys);
        self
    }

    /// The form data the action would submit holds a field of one of these
    /// kinds (`text`, `password`, `file`).
    pub fn submitted_field_kinds<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        kinds: I,
    ) -> Rule {
        self.when.submitted_field_kinds = owned(kinds);
        self
    }
}
