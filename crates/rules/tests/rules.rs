//! What a rule set decides, what it refuses to build, and the properties
//! that make it safe: deny wins, nothing is auto without an element, an
//! auto decision stays inside its rule's hosts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use countersign_approval_core::{ElementIdentity, FormField, FormSubmission, FrameIdentity};
use countersign_canonical_policy::{Action, AuthorizedUrl, Policy, StaticResolver};
use countersign_rules::{ProposedTarget, Rule, RuleError, RuleSet, Tier};
use proptest::prelude::*;
use serde_json::json;

fn policy() -> Policy {
    Policy::builder()
        .allow_host("shop.example")
        .allow_host("*.shop.example")
        .allow_host("docs.example")
        .resolver(StaticResolver::answering_all(["93.184.216.34"
            .parse()
            .unwrap()]))
        .build()
        .unwrap()
}

fn url(text: &str) -> AuthorizedUrl {
    let policy = policy();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(policy.authorize_destination(text))
        .unwrap()
}

fn action(method: &str) -> Action {
    let args = if method == "fill" {
        json!({"method": method, "selector": "#x", "arguments": {"value": "q"}})
    } else if method == "press" {
        json!({"method": method, "selector": "#x", "arguments": {"key": "Enter"}})
    } else {
        json!({"method": method, "selector": "#x"})
    };
    policy().authorize_action(&args).unwrap()
}

fn element(role: &str, name: &str, tag: &str, attributes: &[(&str, &str)]) -> ElementIdentity {
    ElementIdentity::new(
        role,
        name,
        tag,
        name,
        attributes
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        vec![FrameIdentity::new("https://shop.example", "D0C")],
    )
    .unwrap()
}

fn decide<'a>(
    rules: &'a RuleSet,
    url: &AuthorizedUrl,
    method: &str,
    element: Option<&ElementIdentity>,
) -> (Tier, Option<&'a str>) {
    let action = action(method);
    let decision = rules.decide(ProposedTarget {
        url,
        action: &action,
        element,
    });
    (decision.tier, decision.rule.map(Rule::id))
}

#[test]
fn deny_wins_over_person_and_person_over_auto_and_nothing_matching_is_person() {
    let rules = RuleSet::builder()
        .rule(
            Rule::auto("links", "links read")
                .hosts(["*.shop.example"])
                .roles(["link"]),
        )
        .rule(
            Rule::auto("links-again", "second")
                .hosts(["*.shop.example"])
                .roles(["link"]),
        )
        .rule(Rule::person("pay", "pays").names([r"\bpay\b"]))
        .rule(Rule::deny("admin", "never the admin").hosts(["admin.shop.example"]))
        .build()
        .unwrap();
    let link = element(
        "link",
        "Catalogue",
        "a",
        &[("href", "https://www.shop.example/c")],
    );
    let pay = element(
        "link",
        "Pay now",
        "a",
        &[("href", "https://www.shop.example/pay")],
    );
    let www = url("https://www.shop.example/");
    let admin = url("https://admin.shop.example/");
    assert_eq!(
        decide(&rules, &www, "click", Some(&link)),
        (Tier::Auto, Some("links"))
    );
    assert_eq!(
        decide(&rules, &www, "click", Some(&pay)),
        (Tier::Person, Some("pay"))
    );
    assert_eq!(
        decide(&rules, &admin, "click", Some(&link)),
        (Tier::Deny, Some("admin"))
    );
    assert_eq!(
        decide(&rules, &admin, "click", None),
        (Tier::Deny, Some("admin"))
    );
    let button = element("button", "Catalogue", "button", &[]);
    assert_eq!(
        decide(&rules, &www, "click", Some(&button)),
        (Tier::Person, None)
    );
    // The apex is not below itself.
    assert_eq!(
        decide(&rules, &url("https://shop.example/"), "click", Some(&link)),
        (Tier::Person, None)
    );
}

#[test]
fn no_element_is_never_auto_and_element_conditions_need_one() {
    let rules = RuleSet::builder()
        .rule(Rule::auto("clicks", "clicks").hosts(["*"]).roles(["link"]))
        .rule(Rule::person("buttons", "buttons").roles(["button"]))
        .build()
        .unwrap();
    let www = url("https://www.shop.example/");
    assert_eq!(decide(&rules, &www, "click", None), (Tier::Person, None));
}

#[test]
fn a_landmark_condition_reads_the_landmarks_around_the_target() {
    let www = url("https://www.shop.example/");
    let rules = RuleSet::builder()
        .rule(
            Rule::auto("in-search", "r")
                .hosts(["www.shop.example"])
                .roles(["textbox"])
                .landmarks(["search"]),
        )
        .build()
        .unwrap();
    let field = element("textbox", "Search", "input", &[]);
    let in_search = field
        .clone()
        .with_landmarks(vec!["search".to_owned(), "main".to_owned()])
        .unwrap();
    let in_form = field
        .clone()
        .with_landmarks(vec!["form".to_owned(), "main".to_owned()])
        .unwrap();
    // At any depth: the search landmark around a named form counts too.
    let form_in_search = field
        .clone()
        .with_landmarks(vec!["form".to_owned(), "search".to_owned()])
        .unwrap();
    assert_eq!(
        decide(&rules, &www, "fill", Some(&in_search)),
        (Tier::Auto, Some("in-search"))
    );
    assert_eq!(
        decide(&rules, &www, "fill", Some(&form_in_search)),
        (Tier::Auto, Some("in-search"))
    );
    assert_eq!(
        decide(&rules, &www, "fill", Some(&in_form)),
        (Tier::Person, None)
    );
    assert_eq!(
        decide(&rules, &www, "fill", Some(&field)),
        (Tier::Person, None)
    );
    // The pack: typing into a text box of a search landmark reads; the
    // same box in a payment form does not.
    let pack = RuleSet::builder()
        .default_pack(["www.shop.example"])
        .build()
        .unwrap();
    assert_eq!(
        decide(&pack, &www, "fill", Some(&in_search)),
        (Tier::Auto, Some("default.search-landmark-field"))
    );
    assert_ne!(decide(&pack, &www, "fill", Some(&in_form)).0, Tier::Auto);
}

#[test]
fn each_condition_reads_its_own_fact() {
    let www = url("https://www.shop.example/");
    let one = |rule: Rule, method: &str, el: &ElementIdentity| {
        let rules = RuleSet::builder().rule(rule).build().unwrap();
        decide(&rules, &www, method, Some(el)).0
    };
    let submit = element(
        "button",
        "Go",
        "button",
        &[
            ("type", "submit"),
            ("action", "https://pay.shop.example/charge"),
            ("method", "post"),
            ("formaction", "https://api.shop.example/x"),
        ],
    )
    .with_submission(
        FormSubmission::new(vec![
            FormField::text("q", "shoes"),
            FormField::password("pw", "0".repeat(64)),
        ])
        .unwrap(),
    );
    let link = element("link", "Docs", "a", &[("href", "https://docs.example/a")]);
    let own = element(
        "link",
        "Home",
        "a",
        &[("href", "https://www.shop.example/")],
    );
    // One fact at a time: the rule matches, then with one value changed it does not.
    let cases: Vec<(Rule, Rule)> = vec![
        (
            Rule::deny("d", "r").methods(["click"]),
            Rule::deny("d", "r").methods(["hover"]),
        ),
        (
            Rule::deny("d", "r").roles(["button"]),
            Rule::deny("d", "r").roles(["link"]),
        ),
        (
            Rule::deny("d", "r").names(["^GO$"]),
            Rule::deny("d", "r").names(["^g$"]),
        ),
        (
            Rule::deny("d", "r").tags(["button"]),
            Rule::deny("d", "r").tags(["a"]),
        ),
        (
            Rule::deny("d", "r").input_types(["submit"]),
            Rule::deny("d", "r").input_types(["button"]),
        ),
        // formaction wins over the form's action.
        (
            Rule::deny("d", "r").form_action_hosts(["api.shop.example"]),
            Rule::deny("d", "r").form_action_hosts(["pay.shop.example"]),
        ),
        (
            Rule::deny("d", "r").form_methods(["post"]),
            Rule::deny("d", "r").form_methods(["get"]),
        ),
        (
            Rule::deny("d", "r").submits_form(true),
            Rule::deny("d", "r").submits_form(false),
        ),
        (
            Rule::deny("d", "r").submitted_field_kinds(["password"]),
            Rule::deny("d", "r").submitted_field_kinds(["file"]),
        ),
        (
            Rule::deny("d", "r").same_host_link(false),
            Rule::deny("d", "r").same_host_link(true),
        ),
    ];
    for (matching, not) in cases {
        assert_eq!(
            one(matching.clone(), "click", &submit),
            Tier::Deny,
            "{matching:?}"
        );
        assert_eq!(one(not.clone(), "click", &submit), Tier::Person, "{not:?}");
    }
    assert_eq!(
        one(
            Rule::deny("d", "r").link_hosts(["docs.example"]),
            "click",
            &link
        ),
        Tier::Deny
    );
    assert_eq!(
        one(
            Rule::deny("d", "r").link_hosts(["*.docs.example"]),
            "click",
            &link
        ),
        Tier::Person
    );
    assert_eq!(
        one(Rule::deny("d", "r").same_host_link(true), "click", &own),
        Tier::Deny
    );
    assert_eq!(
        one(Rule::deny("d", "r").same_host_link(true), "click", &link),
        Tier::Person
    );
    // A condition on a fact the element lacks does not hold.
    assert_eq!(
        one(Rule::deny("d", "r").form_methods(["get"]), "click", &link),
        Tier::Person
    );
    assert_eq!(
        one(Rule::deny("d", "r").input_types(["submit"]), "click", &link),
        Tier::Person
    );
}

fn refused(rule: Rule) -> String {
    RuleSet::builder()
        .rule(rule)
        .build()
        .unwrap_err()
        .to_string()
}

#[test]
fn a_bad_rule_is_refused_with_a_message_naming_it() {
    assert_eq!(
        refused(Rule::person("x", "r").names(Vec::<String>::new())),
        "rule `x`: `names` is an empty list"
    );
    assert_eq!(
        refused(Rule::person("x", "r").hosts(Vec::<String>::new())),
        "rule `x`: `hosts` is an empty list"
    );
    assert!(
        refused(Rule::person("x", "r").names(["(pay"]))
            .starts_with("rule `x`: `names` pattern `(pay` does not compile: "),
    );
    assert!(
        refused(Rule::person("x", "r").destination_paths(["/(delete"]))
            .starts_with("rule `x`: `destination_paths` pattern `/(delete` does not compile: "),
    );
    assert_eq!(
        refused(Rule::person("x", "r").destination_query_keys(Vec::<String>::new())),
        "rule `x`: `destination_query_keys` is an empty list"
    );
    assert_eq!(
        refused(Rule::person("x", "r").hosts(["*.*.example"])),
        "rule `x`: `hosts` pattern `*.*.example` does not compile: a `*` may only stand alone or open the pattern as `*.`"
    );
    assert_eq!(
        refused(Rule::auto("x", "r").roles(["link"])),
        "rule `x`: an auto rule must name the hosts it approves on (`hosts`)"
    );
    let any = "rule `x`: an auto rule must not match any element: say which elements it approves (a role, tag, type or name; on every host (`*`) not only a form, link or submit condition)";
    assert_eq!(refused(Rule::auto("x", "r").hosts(["docs.example"])), any);
    assert_eq!(
        refused(Rule::auto("x", "r").hosts(["*"]).submits_form(false)),
        any
    );
    assert_eq!(
        refused(Rule::auto("x", "r").hosts(["*"]).names([".*"])),
        any
    );
    assert_eq!(
        refused(Rule::auto("x", "r").hosts(["*"]).names(["", "^next$"])),
        any
    );
    // Narrowed by what the element is, on every host: accepted.
    assert!(
        RuleSet::builder()
            .rule(Rule::auto("x", "r").hosts(["*"]).names(["^next$"]))
            .build()
            .is_ok()
    );
    assert_eq!(
        refused(Rule::person("x", "r").roles(["push button"])),
        "rule `x`: `roles` value `push button` must be 1 to 64 ascii letters, digits or `-`, starting with a letter, as chromium reports roles"
    );
    assert_eq!(
        refused(Rule::person("x", "r").landmarks(["dialog"])),
        "rule `x`: `landmarks` value `dialog` must be `banner`, `complementary`, `contentinfo`, `form`, `main`, `navigation`, `region` or `search`"
    );
    assert_eq!(
        refused(Rule::person("x", "r").form_methods(["put"])),
        "rule `x`: `form_methods` value `put` must be `get`, `post` or `dialog`"
    );
    assert_eq!(
        refused(Rule::person("x", "r").submitted_field_kinds(["secret"])),
        "rule `x`: `submitted_field_kinds` value `secret` must be `text`, `password` or `file`"
    );
    assert_eq!(
        refused(Rule::person("x", "")),
        "rule `x`: the reason must have 1 to 200 bytes"
    );
    assert_eq!(
        refused(Rule::person("Pay!", "r")),
        "rule id `Pay!` must be 1 to 64 of a-z, 0-9, `-`, `_` and `.`, starting with a letter or digit"
    );
    assert_eq!(
        RuleSet::builder()
            .rule(Rule::person("x", "r"))
            .rule(Rule::deny("x", "r"))
            .build()
            .unwrap_err(),
        RuleError::DuplicateId("x".to_owned())
    );
    assert_eq!(
        RuleSet::builder()
            .default_pack(Vec::<String>::new())
            .build()
            .unwrap_err()
            .to_string(),
        "rule `default pack`: `hosts` is an empty list"
    );
    assert_eq!(
        RuleSet::builder()
            .default_pack(["Docs.example"])
            .build()
            .unwrap_err()
            .to_string(),
        "rule `default.same-host-link`: `hosts` pattern `Docs.example` does not compile: write the host in lower case, as the policy compares it"
    );
}

#[test]
fn the_default_pack_keeps_risky_moves_with_a_person_and_approves_reading_ones() {
    let rules = RuleSet::builder()
        .default_pack(["*.shop.example"])
        .build()
        .unwrap();
    let www = url("https://www.shop.example/list");
    let link = |name: &str, href: &str| element("link", name, "a", &[("href", href)]);
    let post_form = |name: &str| {
        element(
            "button",
            name,
            "button",
            &[
                ("type", "submit"),
                ("method", "post"),
                ("action", "https://www.shop.example/f"),
            ],
        )
        .with_submission(FormSubmission::new(vec![FormField::text("a", "b")]).unwrap())
    };
    let person = [
        (
            link("Checkout", "https://www.shop.example/checkout"),
            "click",
            "default.deed-in-path",
        ),
        (
            element("button", "Pay $5.00", "button", &[("type", "button")]),
            "click",
            "default.pays",
        ),
        (
            link("Delete account", "https://www.shop.example/delete"),
            "click",
            "default.deed-in-path",
        ),
        // A link whose name says nothing, whose destination does the deed.
        (
            link(
                "Ada Lovelace",
                "https://www.shop.example/admin/users/7/impersonate",
            ),
            "click",
            "default.deed-in-path",
        ),
        (
            link("Done", "https://www.shop.example/user/log-out"),
            "click",
            "default.deed-in-path",
        ),
        (
            link("Orders", "https://www.shop.example/reports/orders.CSV"),
            "click",
            "default.deed-in-path",
        ),
        (
            link("Item 3", "https://www.shop.example/cart?Action=Remove&id=3"),
            "click",
            "default.deed-in-query",
        ),
        (
            link("Yes", "https://www.shop.example/newsletter?confirm=1"),
            "click",
            "default.deed-in-query",
        ),
        (
            link(
                "Move",
                "https://www.shop.example/post.php?post=5&action=trash",
            ),
            "click",
            "default.deed-in-query",
        ),
        (
            link("Continue", "https://www.shop.example/posts/9?_wpnonce=a1b2"),
            "click",
            "default.one-click-token",
        ),
        (
            link("Go", "https://www.shop.example/x?SessKey=a1b2"),
            "click",
            "default.one-click-token",
        ),
        // A button's name still counts.
        (
            element("button", "Settings", "button", &[("type", "button")]),
            "click",
            "default.account",
        ),
        // A link to another host keeps the name rules.
        (
            link("Delete account", "https://other.example/profile"),
            "click",
            "default.deletes",
        ),
        // A link that is a button in the tree keeps them too.
        (
            element(
                "button",
                "Edit",
                "a",
                &[("href", "https://www.shop.example/profile")],
            ),
            "click",
            "default.account",
        ),
        // Basket edits post a form: they stay with a person (see the
        // guide: a cart path does not tell an edit from a purchase).
        (post_form("Update"), "click", "default.account"),
        (post_form("Quantity 2"), "click", "default.post-form"),
        (
            element("button", "Send", "button", &[("type", "button")]),
            "click",
            "default.sends",
        ),
        (post_form("Next"), "click", "default.post-form"),
        (
            element("textbox", "Password", "input", &[("type", "password")]),
            "fill",
            "default.password-field",
        ),
        (
            element("button", "Choose file", "input", &[("type", "file")]),
            "click",
            "default.file-field",
        ),
    ];
    for (el, method, id) in &person {
        assert_eq!(
            decide(&rules, &www, method, Some(el)),
            (Tier::Person, Some(*id)),
            "{}",
            el.summary()
        );
    }
    let auto = [
        (
            link("Shoes", "https://www.shop.example/shoes"),
            "click",
            "default.same-host-link",
        ),
        // Words in a plain same-host link's name alone: it only opens a
        // page, which its destination says.
        (
            link("Settings", "https://www.shop.example/settings"),
            "click",
            "default.same-host-link",
        ),
        (
            link("Edit", "https://www.shop.example/profile/edit"),
            "click",
            "default.same-host-link",
        ),
        (
            link("Trash", "https://www.shop.example/mail/trash"),
            "click",
            "default.same-host-link",
        ),
        (
            link("Pay bills", "https://www.shop.example/billpay"),
            "click",
            "default.same-host-link",
        ),
        (
            link(
                "Transfer",
                "https://www.shop.example/transfers/new?from=checking",
            ),
            "click",
            "default.same-host-link",
        ),
        (
            link("Cancel", "https://www.shop.example/orders/12"),
            "click",
            "default.same-host-link",
        ),
        // Roles as Chromium names them.
        (
            element("DisclosureTriangle", "Shipping details", "summary", &[]),
            "click",
            "default.details-summary",
        ),
        (
            element("button", "Copy link", "button", &[("type", "button")]),
            "click",
            "default.copy-print",
        ),
        (
            element("button", "Print", "button", &[("type", "button")]),
            "click",
            "default.copy-print",
        ),
        (
            element("button", "×", "button", &[("type", "button")]),
            "click",
            "default.close-dialog",
        ),
        (
            element("button", "Sort by price", "button", &[("type", "button")]),
            "click",
            "default.sort-filter",
        ),
        (
            element(
                "textbox",
                "Where to?",
                "input",
                &[
                    ("type", "text"),
                    ("method", "get"),
                    ("action", "https://www.shop.example/find"),
                ],
            ),
            "fill",
            "default.get-form-field",
        ),
        (
            element("button", "Next page", "button", &[("type", "button")]),
            "click",
            "default.pagination",
        ),
        (
            element("tab", "Reviews", "button", &[("type", "button")]),
            "click",
            "default.tabs",
        ),
        (
            element(
                "button",
                "Accept all cookies",
                "button",
                &[("type", "button")],
            ),
            "click",
            "default.cookie-banner",
        ),
        (
            element("searchbox", "Search", "input", &[("type", "search")]),
            "fill",
            "default.search-box",
        ),
    ];
    for (el, method, id) in &auto {
        assert_eq!(
            decide(&rules, &www, method, Some(el)),
            (Tier::Auto, Some(*id)),
            "{}",
            el.summary()
        );
    }
    // A link to another host is no same-host link, and outside the pack's
    // hosts nothing is auto.
    let away = link("Shoes", "https://docs.example/shoes");
    assert_eq!(
        decide(&rules, &www, "click", Some(&away)),
        (Tier::Person, None)
    );
    let docs = url("https://docs.example/");
    let next = element("button", "Next page", "button", &[("type", "button")]);
    assert_eq!(
        decide(&rules, &docs, "click", Some(&next)),
        (Tier::Person, None)
    );
}

// ---- properties ----------------------------------------------------------

const HOSTS: &[&str] = &[
    "shop.example",
    "www.shop.example",
    "a.b.shop.example",
    "docs.example",
];
const ROLES: &[&str] = &[
    "button",
    "link",
    "tab",
    "searchbox",
    "textbox",
    "checkbox",
    "",
];
const NAMES: &[&str] = &[
    "Next",
    "Pay now",
    "Delete",
    "Search",
    "Accept all",
    "Home",
    "",
    "Page 2",
];
const METHODS: &[&str] = &["click", "hover", "fill", "press"];
const HOST_PATTERNS: &[&str] = &[
    "*",
    "shop.example",
    "*.shop.example",
    "docs.example",
    "b.shop.example",
];

fn arb_rule(index: usize) -> impl Strategy<Value = Rule> {
    (
        0..3u8,
        proptest::option::of(proptest::sample::subsequence(HOST_PATTERNS, 1..3)),
        proptest::option::of(proptest::sample::subsequence(
            &ROLES[..ROLES.len() - 1],
            1..3,
        )),
        proptest::option::of(proptest::sample::subsequence(
            &["^next$", "pay", "^(search|home)$", "delete"][..],
            1..3,
        )),
        proptest::option::of(proptest::sample::subsequence(METHODS, 1..3)),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(move |(tier, hosts, roles, names, methods, same)| {
            let id = format!("r{index}");
            let mut rule = match tier {
                0 => Rule::auto(id, "r"),
                1 => Rule::person(id, "r"),
                _ => Rule::deny(id, "r"),
            };
            // Every auto rule is valid: hosts and a role.
            if tier == 0 {
                rule = rule
                    .hosts(hosts.unwrap_or_else(|| vec!["shop.example"]))
                    .roles(roles.unwrap_or_else(|| vec!["link"]));
            } else {
                if let Some(h) = hosts {
                    rule = rule.hosts(h);
                }
                if let Some(r) = roles {
                    rule = rule.roles(r);
                }
            }
            if let Some(n) = names {
                rule = rule.names(n);
            }
            if let Some(m) = methods {
                rule = rule.methods(m);
            }
            if let Some(s) = same {
                rule = rule.same_host_link(s);
            }
            rule
        })
}

fn arb_rules() -> impl Strategy<Value = Vec<Rule>> {
    (0..8usize).prop_flat_map(|n| (0..n).map(arb_rule).collect::<Vec<_>>())
}

#[derive(Debug, Clone)]
struct Target {
    host: usize,
    method: &'static str,
    element: Option<(&'static str, &'static str, usize)>,
}

fn arb_target() -> impl Strategy<Value = Target> {
    (
        0..HOSTS.len(),
        proptest::sample::select(METHODS),
        proptest::option::of((
            proptest::sample::select(ROLES),
            proptest::sample::select(NAMES),
            0..HOSTS.len(),
        )),
    )
        .prop_map(|(host, method, element)| Target {
            host,
            method,
            element,
        })
}

struct Fixtures {
    urls: Vec<AuthorizedUrl>,
    actions: BTreeMap<&'static str, Action>,
}

static FIXTURES: std::sync::LazyLock<Fixtures> = std::sync::LazyLock::new(|| Fixtures {
    urls: HOSTS
        .iter()
        .map(|h| url(&format!("https://{h}/p")))
        .collect(),
    actions: METHODS.iter().map(|m| (*m, action(m))).collect(),
});

fn identity(role: &str, name: &str, link_host: usize) -> ElementIdentity {
    element(
        role,
        name,
        "a",
        &[("href", &format!("https://{}/x", HOSTS[link_host]))],
    )
}

proptest! {
    // 300 cases in CI's debug build; `COUNTERSIGN_RULE_CASES=100000` with
    // `--release` for the full run (figures in docs/rules.md).
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("COUNTERSIGN_RULE_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(300)
    ))]

    /// A deny rule that matches, added anywhere, decides; an auto decision
    /// has an element and a deciding auto rule whose hosts name the
    /// destination; adding a person rule never makes an action auto.
    #[test]
    fn rules_narrow_and_never_widen(rules in arb_rules(), target in arb_target(), at in 0..8usize) {
        let fixtures = &*FIXTURES;
        let url = &fixtures.urls[target.host];
        let action = &fixtures.actions[target.method];
        let element = target.element.map(|(role, name, link)| identity(role, name, link));
        let proposed = ProposedTarget { url, action, element: element.as_ref() };
        let set = RuleSet::builder().rules(rules.clone()).build().unwrap();
        let decided = set.decide(proposed);
        if decided.tier == Tier::Auto {
            prop_assert!(element.is_some());
            let rule = decided.rule.unwrap();
            prop_assert_eq!(rule.tier(), Tier::Auto);
            let expected = format!("rule:{}", rule.id());
            prop_assert_eq!(decided.approver().unwrap().to_string(), expected);
        }
        if decided.rule.is_none() {
            prop_assert_eq!(decided.tier, Tier::Person);
        }

        let mut with_deny = rules.clone();
        let deny = Rule::deny("added-deny", "added mid-run").hosts([HOSTS[target.host]]);
        with_deny.insert(at.min(with_deny.len()), deny);
        let denied = RuleSet::builder().rules(with_deny).build().unwrap();
        prop_assert_eq!(denied.decide(proposed).tier, Tier::Deny);

        let mut with_person = rules.clone();
        with_person.insert(at.min(with_person.len()), Rule::person("added-person", "asks").methods([target.method]));
        let asked = RuleSet::builder().rules(with_person).build().unwrap();
        prop_assert!(asked.decide(proposed).tier != Tier::Auto);

        // Only rules whose hosts name the destination can approve it.
        let outside: Vec<Rule> = rules.iter().filter(|r| r.tier() != Tier::Auto).cloned().collect();
        let no_auto = RuleSet::builder().rules(outside).build().unwrap();
        prop_assert!(no_auto.decide(proposed).tier != Tier::Auto);
    }
}

/// Path segments of pages that only read, from no particular site.
const READING_SEGMENTS: &[&str] = &[
    "products",
    "shoes",
    "list",
    "page",
    "2",
    "about",
    "help",
    "blog",
    "item-42",
    "settings",
    "billing",
    "trash",
    "reports",
    "transfers",
    "edit",
    "profile",
    "inbox",
    "new",
];
/// Deeds a GET may do, as sites spell them in a path segment.
const DEED_SEGMENTS: &[&str] = &[
    "logout",
    "sign-out",
    "delete",
    "close",
    "unsubscribe",
    "impersonate",
    "add-to-cart",
    "export",
    "confirm",
    "revoke",
];
/// Names of plain links, alarming words among them.
const LINK_NAMES: &[&str] = &[
    "Settings",
    "Delete account",
    "Pay bills",
    "Next",
    "Edit",
    "Ada",
];

proptest! {
    /// A plain same-host link is decided by its destination alone: with a
    /// deed's verb as a segment of its path, however written (upper case,
    /// a letter percent-encoded, a file extension after it), a person
    /// decides; with only reading segments and a reading query, the
    /// same-host rule approves it, whatever its name says.
    #[test]
    fn a_plain_link_is_decided_by_its_destination(
        segments in proptest::collection::vec(proptest::sample::select(READING_SEGMENTS), 0..4),
        deed in proptest::option::of((proptest::sample::select(DEED_SEGMENTS), 0usize..4, any::<bool>(), any::<bool>(), any::<bool>())),
        name in proptest::sample::select(LINK_NAMES),
        page in 0u32..5,
    ) {
        let mut path: Vec<String> = segments.iter().map(|s| (*s).to_owned()).collect();
        if let Some((verb, at, upper, encoded, extension)) = deed {
            let mut verb = if upper { verb.to_uppercase() } else { verb.to_owned() };
            if encoded {
                let first = verb.remove(0);
                verb = format!("%{:02X}{verb}", first as u32);
            }
            if extension {
                verb.push_str(".json");
            }
            path.insert(at.min(path.len()), verb);
        }
        let href = format!("https://www.shop.example/{}?page={page}", path.join("/"));
        let rules = RuleSet::builder().default_pack(["*.shop.example"]).build().unwrap();
        let link = element("link", name, "a", &[("href", &href)]);
        let decided = decide(&rules, &url("https://www.shop.example/list"), "click", Some(&link));
        if deed.is_some() {
            prop_assert_eq!(decided.0, Tier::Person, "{}", href);
            prop_assert_eq!(decided.1, Some("default.deed-in-path"), "{}", href);
        } else {
            prop_assert_eq!(decided, (Tier::Auto, Some("default.same-host-link")), "{}", href);
        }
    }
}
