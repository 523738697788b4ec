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
    /// Landmarks the target sits in, `None` for any.
    pub landmarks: Option<&'static [&'static str]>,
    /// Whether the target links to the destination's own host.
    pub same_host_link: Option<bool>,
    /// Whether the target is a plain link to the destination's own host.
    pub plain_same_host_link: Option<bool>,
    /// Whether the action submits a form.
    pub submits_form: Option<bool>,
    /// Kinds of submitted field, `None` for any.
    pub submitted_field_kinds: Option<&'static [&'static str]>,
    /// Patterns of the destination's path, `None` for any.
    pub destination_paths: Option<&'static [&'static str]>,
    /// Patterns of the destination's query, `None` for any.
    pub destination_queries: Option<&'static [&'static str]>,
    /// Keys of the destination's query, `None` for any.
    pub destination_query_keys: Option<&'static [&'static str]>,
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
    landmarks: None,
    same_host_link: None,
    plain_same_host_link: None,
    submits_form: None,
    submitted_field_kinds: None,
    destination_paths: None,
    destination_queries: None,
    destination_query_keys: None,
};

const ACTIVATE: &[&str] = &["click", "dblclick", "press"];

/// The verbs of deeds that sites let a GET do, as they spell them in paths
/// and in query values: signing out, deleting, changing who may do what
/// or who one is, money and renewals, votes, follows, watches and
/// favourites, downloads and bulk exports, revealing a secret, and the
/// SQL statements that destroy data (`sql_query=DROP TABLE …`). From the URL conventions of widely deployed software (the
/// `wp-admin` `action=` values, MediaWiki's `action=`, `sesskey` and
/// `_wpnonce` links, Rails and Django route names, mailing lists'
/// unsubscribe and confirm links, shops' add-to-cart links, admin
/// panels' impersonate and `login-as`), not from any one page.
macro_rules! deed_verbs {
    () => {
        "log-?out|log-?off|sign-?out|delete|destroy|remove|purge|erase|wipe\
         |unsubscribe|opt-?out|deactivate|activate|disable|enable|suspend|ban|block|unblock\
         |revoke|approve|reject|decline|accept|confirm|verify|cancel|terminate|close|close-?account\
         |impersonate|masquerade|sudo|login-?as|switch-?user|become|promote|demote|grant\
         |reset|regenerate|rotate|pay|payout|withdraw|refund|charge|checkout|purchase|buy\
         |donate|subscribe|renew|add-?to-?(cart|basket|bag)|vote|upvote|downvote|like|unlike\
         |follow|unfollow|watch|unwatch|fave|favou?rite|unfavou?rite|hide|unhide|rsvp\
         |export|dump|backup|takeout|download|download-?all|reveal|truncate|drop"
    };
}

/// A deed's verb as a whole segment of the path, or a whole word of one
/// (`/account/delete`, `/user/logout`, `/item/42/add-to-cart`,
/// `/admin/users/7/impersonate`, `/reports/export.csv`).
const DEED_IN_PATH: &str = concat!("(^|[/_.-])(", deed_verbs!(), ")([/_.-]|$)");

/// A file of data in bulk named by the path (`/orders.csv`).
const BULK_FILE_IN_PATH: &str = r"\.(csv|tsv|xlsx?|sql|mbox|vcf|ics)$";

/// A query that asks for a deed by name (`action=delete`, `do=logout`,
/// `_method=delete`, `_action=export`, `subaction=trash`).
const DEED_IN_QUERY: &str = concat!(
    "(^|&)[a-z_]*(action|do|op|cmd|command|task|mode|act|method|event|func)=(",
    deed_verbs!(),
    "|trash|post|put|patch)(&|$)"
);

/// A query value that names a deed as one of its words, under any key
/// (`sql_query=DELETE FROM …`, `title=Special:UserLogout`,
/// `next=/account/delete`): values are matched decoded, so a `+` is a
/// space, and camelCase words are split.
const DEED_IN_QUERY_VALUE: &str = concat!(
    "(^|&)[^=&]*=([^&]*[ :/_.,-])?(",
    deed_verbs!(),
    ")([ :/_.,-][^&]*)?(&|$)"
);

/// A query that says the deed is confirmed (`confirm=1`, `confirmed=yes`).
const CONFIRMED_IN_QUERY: &str = "(^|&)(confirm|confirmed|confirmation)=(1|true|yes|on|y)(&|$)";

/// The query keys of one-time tokens that sites put on links that act
/// when followed (WordPress, Moodle, Rails, Django, Laravel, Drupal,
/// MediaWiki, mailing lists).
const ONE_CLICK_TOKEN_KEYS: &[&str] = &[
    "_wpnonce",
    "nonce",
    "_nonce",
    "sesskey",
    "csrf",
    "_csrf",
    "csrf_token",
    "csrftoken",
    "csrfmiddlewaretoken",
    "xsrf",
    "_xsrf",
    "_token",
    "authenticity_token",
    "token",
    "auth",
    "sig",
    "signature",
    "hmac",
];

/// The query keys that set a quantity or an amount: a link carrying one
/// changes a basket or moves money when followed (`/cart/change?line=1&quantity=0`).
const AMOUNT_KEYS: &[&str] = &["quantity", "qty", "amount", "amt"];

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
        plain_same_host_link: Some(false),
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
        plain_same_host_link: Some(false),
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
        plain_same_host_link: Some(false),
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
        plain_same_host_link: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.deed-in-path",
        tier: Tier::Person,
        reason: "where it leads does something: its address names a deed that changes an account, an identity or money, or discloses data in bulk",
        methods: Some(ACTIVATE),
        destination_paths: Some(&[DEED_IN_PATH, BULK_FILE_IN_PATH]),
        ..NONE
    },
    PackRule {
        id: "default.deed-in-query",
        tier: Tier::Person,
        reason: "where it leads does something: its query asks for a deed or confirms one",
        methods: Some(ACTIVATE),
        destination_queries: Some(&[DEED_IN_QUERY, DEED_IN_QUERY_VALUE, CONFIRMED_IN_QUERY]),
        ..NONE
    },
    PackRule {
        id: "default.amount-in-query",
        tier: Tier::Person,
        reason: "where it leads sets a quantity or an amount, which changes a basket or moves money",
        methods: Some(ACTIVATE),
        destination_query_keys: Some(AMOUNT_KEYS),
        ..NONE
    },
    PackRule {
        id: "default.one-click-token",
        tier: Tier::Person,
        reason: "where it leads carries a one-time token, which sites put on links that act when followed",
        methods: Some(ACTIVATE),
        destination_query_keys: Some(ONE_CLICK_TOKEN_KEYS),
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
        id: "default.details-summary",
        tier: Tier::Auto,
        reason: "opening or closing a details section only shows or hides what the page holds",
        methods: Some(&["click"]),
        roles: Some(&["DisclosureTriangle"]),
        tags: Some(&["summary"]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.copy-print",
        tier: Tier::Auto,
        reason: "copying to the clipboard or opening the print dialog changes nothing on the site",
        methods: Some(&["click"]),
        roles: Some(&["button"]),
        names: Some(&[
            r"^(copy|copy (the )?(link|url|code|address|text|number|id|to clipboard)|copy to clipboard|copied|print|print (this )?(page|receipt|invoice|order|statement|ticket|label)?)$",
        ]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.close-dialog",
        tier: Tier::Auto,
        reason: "closing a dialog or a notice only hides it",
        methods: Some(&["click"]),
        roles: Some(&["button"]),
        names: Some(&[
            r"^(close|[×✕✖x]|close (this )?(dialog|window|panel|popup|pop-up|modal|menu|message|notice|notification|banner|alert|overlay)|dismiss( (this|notice|message|alert))?|not now|no,? thanks|maybe later)$",
        ]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.sort-filter",
        tier: Tier::Auto,
        reason: "sorting or filtering a list only changes what it shows",
        methods: Some(&["click"]),
        roles: Some(&["button", "columnheader"]),
        names: Some(&[
            r"^(sort( by [a-z ]{1,40})?|sort (ascending|descending)|(ascending|descending)|filters?|(show|hide) filters|more filters)$",
        ]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.get-form-field",
        tier: Tier::Auto,
        reason: "typing into a field of a form that only reads (submitted with GET, as a search is) sends nothing",
        methods: Some(&["fill", "type"]),
        roles: Some(&["textbox", "searchbox", "combobox", "Date"]),
        form_methods: Some(&["get"]),
        ..NONE
    },
    PackRule {
        id: "default.filters",
        tier: Tier::Auto,
        reason: "choosing a filter of a form that only reads (submitted with GET) changes what a list shows",
        methods: Some(&["click", "check", "uncheck", "select"]),
        roles: Some(&["checkbox", "radio", "combobox", "listbox", "option"]),
        form_methods: Some(&["get"]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.sort-choice",
        tier: Tier::Auto,
        reason: "choosing a sort order, a filter or how many rows a list shows only changes what it shows",
        methods: Some(&["click", "select"]),
        roles: Some(&["combobox", "listbox"]),
        names: Some(&[
            r"^((sort|order|filter|group|show|view|display)( by)?\b.{0,40}|(number of )?(rows|results|items)( per page)?|.{0,30}\bper page)$",
        ]),
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
        id: "default.search-landmark-field",
        tier: Tier::Auto,
        reason: "typing a query into a text box of the page's search landmark only reads",
        methods: Some(&["fill", "type", "press"]),
        roles: Some(&["textbox", "combobox"]),
        landmarks: Some(&["search"]),
        submits_form: Some(false),
        ..NONE
    },
    PackRule {
        id: "default.search-submit",
        tier: Tier::Auto,
        reason: "running a search only reads",
        methods: Some(&["click", "press"]),
        roles: Some(&["button"]),
        names: Some(&[r"^(search|go|find|show|view|filter|refine)\b.{0,40}$"]),
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
        if let Some(v) = self.landmarks {
            rule = rule.landmarks(list(v));
        }
        if let Some(v) = self.submitted_field_kinds {
            rule = rule.submitted_field_kinds(list(v));
        }
        if let Some(same) = self.same_host_link {
            rule = rule.same_host_link(same);
        }
        if let Some(plain) = self.plain_same_host_link {
            rule = rule.plain_same_host_link(plain);
        }
        if let Some(v) = self.destination_paths {
            rule = rule.destination_paths(list(v));
        }
        if let Some(v) = self.destination_queries {
            rule = rule.destination_queries(list(v));
        }
        if let Some(v) = self.destination_query_keys {
            rule = rule.destination_query_keys(list(v));
        }
        if let Some(submits) = self.submits_form {
            rule = rule.submits_form(submits);
        }
        rule
    }
}
