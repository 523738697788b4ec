//! The default pack: data, each rule with its reason.
//!
//! The `person` rules hold on every host and win over every `auto` rule,
//! so a link that reads "Delete account" or a button that reads "Next"
//! but posts a form stays with a person. The `auto` rules approve on the
//! hosts the host names when it adds the pack, and only moves that read.

use crate::rule::{Rule, Tier};

/// One rule of the pack, as data.
#[derive(Debug)]
pub struct PackRule {
    /// The rule's id (`default.…`).
    pub id: &'static str,
    /// Its tier.
    pub tier: Tier,
    /// Why, as the rule records it.
    pub reason: &'static str,
    /// The methods it holds for, `None` for all.
    pub methods: Option<&'static [&'static str]>,
    /// Roles, `None` for any.
    pub roles: Option<&'static [&'static str]>,
    /// Accessible-name patterns, `None` for any.
    pub names: Option<&'static [&'static str]>,
    /// Tags, `None` for any.
    pub tags: Option<&'static [&'static str]>,
    /// Input types, `None` for any.
    pub input_types: Option<&'static [&'static str]>,
    /// Form methods, `None` for any.
    pub form_methods: Option<&'static [&'static str]>,
    /// Whether the target links to the destination's own host.
    pub same_host_link: Option<bool>,
    /// Whether the action submits a form.
    pub submits_form: Option<bool>,
    /// Kinds of submitted field, `None` for any.
    pub submitted_field_kinds: Option<&'static [&'static str]>,
}

const NONE: PackRule = PackRule {
    id: "",
    tier: Tier::Person,
    reason: "",
    methods: None,
    roles: None,
    names: None,
    tags: None,
    input_types: None,
    form_methods: None,
    same_host_link: None,
    submits_form: None,
    submitted_field_kinds: None,
};

const ACTIVATE: &[&str] = &["click", "dblclick", "press"];

/// The default pack, in order: `person` rules first, then `auto`.
pub const DEFAULT_PACK: &[PackRule] = &[
    PackRule {
        id: "default.pays",
        tier: Tier::Person,
        reason: "it may pay, buy, order or subscribe",
        methods: Some(ACTIVATE),
        names: Some(&[
            r"\b(pay|paying|payment|buy|purchase|checkout|check out|order|subscribe|upgrade|donate|tip|book|reserve|rent|bid|add to (cart|basket|bag))\b",
            r"[$€£¥₹]\s*\d|\d\s*(usd|eur|gbp|chf|[$€£¥₹])",
        ]),
        ..NONE
    },
    PackRule {
        id: "default.sends",
        tier: Tier::Person,
        reason: "it may send, post, share or transfer something",
        methods: Some(ACTIVATE),
        names: Some(&[
            r"\b(send|post|publish|share|reply|respond|submit|transfer|wire|invite|forward|tweet|comment|message|email|mail|notify|broadcast|upload|attach|report)\b",
        ]),
        ..NONE
    },
    PackRule {
        id: "default.deletes",
        tier: Tier::Person,
        reason: "it may delete, cancel or revoke something",
        methods: Some(ACTIVATE),
        names: Some(&[
            r"\b(delete|remove|erase|destroy|discard|trash|deactivate|terminate|cancel|unsubscribe|revoke|archive|wipe|reset|clear|empty|close (my |your |the )?account)\b",
        ]),
        ..NONE
    },
    PackRule {
        id: "default.account",
        tier: Tier::Person,
        reason: "it may sign in or change an account or its settings",
        methods: Some(ACTIVATE),
        names: Some(&[
            r"\b(account|profile|settings|preferences|security|password|passcode|two-factor|2fa|mfa|sign ?(in|up|out)|log ?(in|out)|register|billing|address|save|update|change|edit|apply|confirm|verify|enable|disable|authori[sz]e|allow access|connect)\b",
        ]),
        ..NONE
    },
    PackRule {
        id: "default.password",
        tier: Tier::Person,
        reason: "it submits a password",
        submitted_field_kinds: Some(&["password"]),
        ..NONE
    },
    PackRule {
        id: "default.password-field",
        tier: Tier::Person,
        reason: "it acts on a password field",
        input_types: Some(&["password"]),
        ..NONE
    },
    PackRule {
        id: "default.upload",
        tier: Tier::Person,
        reason: "it uploads a file",
        submitted_field_kinds: Some(&["file"]),
        ..NONE
    },
    PackRule {
        id: "default.file-field",
        tier: Tier::Person,
        reason: "it acts on a file field",
        input_types: Some(&["file"]),
        ..NONE
    },
    PackRule {
        id: "default.post-form",
        tier: Tier::Person,
        reason: "it submits a form that posts, which changes something on the site",
        submits_form: Some(true),
        form_methods: Some(&["post"]),
        ..NONE
    },
    PackRule {
        id: "default.post-form-control",
        tier: Tier::Person,
        reason: "it acts on a control of a form that posts, which may save as it changes",
        form_methods: Some(&["post"]),
        ..NONE
    },
    PackRule {
        id: "default.same-host-link",
        tier: Tier::Auto,
        reason: "a link to a page of the same host only reads",
        methods: Some(&["click"]),
        roles: Some(&["link"]),
        tags: Some(&["a"]),
        same_host_link: Some(true),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.pagination",
        tier: Tier::Auto,
        reason: "moving between pages of a list only reads",
        methods: Some(&["click"]),
        roles: Some(&["link", "button"]),
        names: Some(&[
            r"^((go to )?(next|previous|prev|first|last)( page)?|older|newer|(load|show|see|view) more|more|(go to )?page \d{1,4}|\d{1,4}|[«»‹›<>]|« ?previous|next ?»)$",
        ]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.tabs",
        tier: Tier::Auto,
        reason: "switching tabs only shows another panel",
        methods: Some(&["click"]),
        roles: Some(&["tab"]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.disclosure",
        tier: Tier::Auto,
        reason: "showing or hiding details only reads",
        methods: Some(&["click"]),
        roles: Some(&["button"]),
        names: Some(&[
            r"^((show|hide) (details|more|less|all)|(expand|collapse)( all)?|details|read more)$",
        ]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.filters",
        tier: Tier::Auto,
        reason: "choosing a filter or a sort order only changes what a list shows",
        methods: Some(&["click", "check", "uncheck", "select"]),
        roles: Some(&["checkbox", "radio", "combobox", "listbox", "option"]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.search-box",
        tier: Tier::Auto,
        reason: "typing a query into a search box and running it only reads",
        methods: Some(&["fill", "type", "press"]),
        roles: Some(&["searchbox"]),
        ..NONE
    },
    PackRule {
        id: "default.search-submit",
        tier: Tier::Auto,
        reason: "running a search only reads",
        methods: Some(&["click", "press"]),
        roles: Some(&["button"]),
        names: Some(&[r"^(search|go|find)$"]),
        submits_form: Some(true),
        form_methods: Some(&["get"]),
        ..NONE
    },
    PackRule {
        id: "default.cookie-banner",
        tier: Tier::Auto,
        reason: "answering a cookie banner changes only the site's cookie choice",
        methods: Some(&["click"]),
        roles: Some(&["button", "link"]),
        names: Some(&[
            r"^((accept|allow)( all)?( cookies)?|accept all cookies|allow all cookies|(i )?agree|ok|okay|got it|(reject|decline)( all)?( cookies)?|(only|use) (necessary|essential)( cookies)?( only)?|(necessary|essential) (cookies )?only|dismiss|close)$",
        ]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.hover-focus",
        tier: Tier::Auto,
        reason: "pointing at or focusing a link, button or tab dispatches no activation",
        methods: Some(&["hover", "focus"]),
        roles: Some(&["link", "button", "tab", "menuitem"]),
        ..NONE
    },
];

impl PackRule {
    /// This entry as a rule: `auto` ones approving on `auto_hosts`, the
    /// others on every host.
    pub(crate) fn rule(&self, auto_hosts: &[String]) -> Rule {
        let mut rule = Rule::new(self.tier, self.id, self.reason);
        if self.tier == Tier::Auto {
            rule = rule.hosts(auto_hosts.iter().cloned());
        }
        let list = |values: &[&str]| values.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>();
        if let Some(v) = self.methods {
            rule = rule.methods(list(v));
        }
        if let Some(v) = self.roles {
            rule = rule.roles(list(v));
        }
        if let Some(v) = self.names {
            rule = rule.names(list(v));
        }
        if let Some(v) = self.tags {
            rule = rule.tags(list(v));
        }
        if let Some(v) = self.input_types {
            rule = rule.input_types(list(v));
        }
        if let Some(v) = self.form_methods {
            rule = rule.form_methods(list(v));
        }
        if let Some(v) = self.submitted_field_kinds {
            rule = rule.submitted_field_kinds(list(v));
        }
        if let Some(same) = self.same_host_link {
            rule = rule.same_host_link(same);
        }
        if let Some(submits) = self.submits_form {
            rule = rule.submits_form(submits);
        }
        rule
    }
}
