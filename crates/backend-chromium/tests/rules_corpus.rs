//! The default rule pack on a labelled corpus, in real headless Chromium:
//! 20 offline pages (`tests/corpus/*.html`: checkout, bank transfer, mail,
//! account deletion, settings, search, filters, pagination, a cookie
//! banner, login and ten more), every target element labelled
//! `data-label="person"` (a person must approve it) or `"low-risk"`. Each
//! target's identity is read by the backend's own snapshot, as
//! `browser_propose` reads it, and decided by the pack.
//!
//! It fails if any person-required element is auto-approved, if fewer than
//! 70 % of the low-risk ones are, or if `docs/rules-corpus.md` does not
//! show this run's table (`COUNTERSIGN_CORPUS_TABLE=write` rewrites it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use axum::Router;
use axum::extract::Path;
use axum::response::Html;
use axum::routing::get;
use countersign_act_tool::rules::{ProposedTarget, RuleSet, Tier};
use serde_json::{Value, json};
use support::{Case, Fixture};

#[test]
fn the_default_pack_on_the_labelled_corpus() {
    let case: Case = |f| Box::pin(decide_the_corpus(f, &WRITTEN_BESIDE));
    let sites: Case = |f| Box::pin(decide_the_corpus(f, &AFTER_SITES));
    let roles: Case = |f| Box::pin(each_role_the_pack_names_is_chromiums(f));
    let landmarks: Case = |f| Box::pin(landmarks_as_chromium_reports_them(f));
    support::run_cases(
        support::options(),
        &[
            ("decide_the_corpus", case),
            ("decide_the_corpus_after_sites", sites),
            ("each_role_the_pack_names_is_chromiums", roles),
            ("landmarks_as_chromium_reports_them", landmarks),
        ],
    );
}

/// One labelled corpus: its directory under `tests/` and where the docs
/// show its table.
struct Corpus {
    dir: &'static str,
    table_start: &'static str,
}

/// The pages written beside the pack.
const WRITTEN_BESIDE: Corpus = Corpus {
    dir: "corpus",
    table_start: "<!-- corpus table: written by crates/backend-chromium/tests/rules_corpus.rs -->\n",
};

/// The pages written after real sites' public HTML and URLs, kept apart
/// from the pack: no rule was changed to fit one of them.
const AFTER_SITES: Corpus = Corpus {
    dir: "corpus-sites",
    table_start: "<!-- corpus-sites table: written by crates/backend-chromium/tests/rules_corpus.rs -->\n",
};

/// The least share of low-risk targets the pack must approve, in percent,
/// on every corpus.
const MIN_LOW_RISK_AUTO_PERCENT: usize = 75;

/// For every role a rule of the default pack names: an element Chromium
/// reports with that role, and the action that reads it.
const ROLE_FIXTURES: &[(&str, &str, &str)] = &[
    ("link", r#"<a id=r href="/roles/next">Next</a>"#, "click"),
    (
        "button",
        r#"<button id=r type=button>Copy</button>"#,
        "click",
    ),
    (
        "tab",
        r#"<div role=tablist><button id=r role=tab type=button>Reviews</button></div>"#,
        "click",
    ),
    (
        "DisclosureTriangle",
        r#"<details><summary id=r>Shipping details</summary><p>Two days.</p></details>"#,
        "click",
    ),
    (
        "checkbox",
        r#"<label><input id=r type=checkbox> In stock</label>"#,
        "click",
    ),
    (
        "radio",
        r#"<label><input id=r type=radio name=p> Under $50</label>"#,
        "click",
    ),
    (
        "combobox",
        r#"<select id=r aria-label="Sort"><option value=a>Price</option></select>"#,
        "select",
    ),
    (
        "listbox",
        r#"<select id=r size=3 aria-label="Colour"><option value=red>Red</option><option>Blue</option></select>"#,
        "select",
    ),
    (
        "option",
        r#"<div role=listbox aria-label="Size"><div id=r role=option tabindex=0>Large</div></div>"#,
        "click",
    ),
    (
        "searchbox",
        r#"<input id=r type=search aria-label="Search">"#,
        "fill",
    ),
    (
        "textbox",
        r#"<form method=get action="/find"><input id=r type=text aria-label="Where to?"></form>"#,
        "fill",
    ),
    (
        "Date",
        r#"<form method=get action="/find"><input id=r type=date aria-label="Check-in"></form>"#,
        "fill",
    ),
    (
        "columnheader",
        r#"<table><tr><th id=r>Price</th></tr><tr><td>5</td></tr></table>"#,
        "click",
    ),
    (
        "menuitem",
        r#"<div role=menu><button id=r role=menuitem type=button>Open</button></div>"#,
        "hover",
    ),
];

/// Each role a pack rule names is one Chromium's accessibility tree
/// really reports, read by the backend's snapshot as `browser_propose`
/// reads it: a rule written for a role Chromium never reports (as the
/// disclosure rule once was for `<summary>`) would never match.
async fn each_role_the_pack_names_is_chromiums(f: &Fixture) {
    let named: std::collections::BTreeSet<&str> = countersign_act_tool::rules::DEFAULT_PACK
        .iter()
        .flat_map(|rule| rule.roles.unwrap_or(&[]).iter().copied())
        .collect();
    let fixtures: std::collections::BTreeSet<&str> =
        ROLE_FIXTURES.iter().map(|(role, _, _)| *role).collect();
    assert_eq!(
        named, fixtures,
        "every role the pack names has a fixture here"
    );
    let site = serve_fixtures(
        "roles",
        ROLE_FIXTURES.iter().map(|(role, html, _)| (*role, *html)),
    )
    .await;
    for (role, _, method) in ROLE_FIXTURES {
        let url = f.open(&format!("http://{site}/roles/{role}")).await;
        let option = if *method == "select" { "red" } else { "" };
        let option = if *role == "combobox" { "a" } else { option };
        let (_, snapshot) = f.snapshot_of(&url, &action_for("r", method, option)).await;
        assert!(snapshot.target_found, "{role}: the target was not found");
        let element = snapshot.page.element.unwrap();
        assert_eq!(element.role(), *role, "{}", element.summary());
    }
}

/// Text boxes and a link in landmarks: what the snapshot binds as the
/// landmarks around each (the innermost first), and the pack's tier and
/// rule for typing into it (or following it).
const LANDMARK_FIXTURES: &[(&str, &str, &[&str], Tier, &str)] = &[
    (
        "aria-search",
        r#"<div role=search><input id=r type=text aria-label="Search the shop"></div>"#,
        &["search"],
        Tier::Auto,
        "default.search-landmark-field",
    ),
    (
        "html-search",
        r#"<main><search><input id=r aria-label="Find a flight"></search></main>"#,
        &["search", "main"],
        Tier::Auto,
        "default.search-landmark-field",
    ),
    (
        "payment-form",
        r#"<main><form method=post action="/pay" aria-label="Payment"><input id=r aria-label="Card number"></form></main>"#,
        &["form", "main"],
        Tier::Person,
        "default.post-form-control",
    ),
    (
        "plain",
        r#"<div><input id=r aria-label="Nickname"></div>"#,
        &[],
        Tier::Person,
        "",
    ),
];

/// The landmarks a rule can name are the ones Chromium's tree reports
/// around a target, bound by the snapshot `browser_propose` takes.
async fn landmarks_as_chromium_reports_them(f: &Fixture) {
    let site = serve_fixtures(
        "landmarks",
        LANDMARK_FIXTURES
            .iter()
            .map(|(name, html, ..)| (*name, *html)),
    )
    .await;
    let rules = RuleSet::builder()
        .default_pack([support::SITE_IP])
        .build()
        .unwrap();
    for (name, _, landmarks, tier, rule) in LANDMARK_FIXTURES {
        let url = f.open(&format!("http://{site}/landmarks/{name}")).await;
        let (action, snapshot) = f.snapshot_of(&url, &action_for("r", "fill", "")).await;
        let element = snapshot.page.element.as_ref().unwrap();
        assert_eq!(element.landmarks(), *landmarks, "{name}");
        let decided = rules.decide(ProposedTarget {
            url: &url,
            action: &action,
            element: Some(element),
        });
        assert_eq!(
            (
                decided.tier,
                decided.rule.map(|r| r.id()).unwrap_or_default()
            ),
            (*tier, *rule),
            "{name}"
        );
    }
}

/// Serves each `(name, body html)` as a page at `/{prefix}/{name}` on the
/// test site; answers its address.
async fn serve_fixtures(
    prefix: &str,
    fixtures: impl Iterator<Item = (&'static str, &'static str)>,
) -> std::net::SocketAddr {
    let pages: std::collections::HashMap<&str, String> = fixtures
        .map(|(name, html)| {
            (
                name,
                format!(
                    "<!doctype html><html lang=en><title>{name}</title><body>{html}</body></html>"
                ),
            )
        })
        .collect();
    let pages = std::sync::Arc::new(pages);
    let app = Router::new().route(
        &format!("/{prefix}/{{name}}"),
        get(move |Path(name): Path<String>| {
            let pages = pages.clone();
            async move { Html(pages.get(name.as_str()).cloned().unwrap_or_default()) }
        }),
    );
    serve_site(app).await
}

/// Serves `app` on the test site's address; answers where.
async fn serve_site(app: Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind((support::SITE_IP, 0))
        .await
        .unwrap();
    let site = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    site
}

fn corpus_dir(corpus: &Corpus) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(corpus.dir)
}

fn pages(corpus: &Corpus) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(corpus_dir(corpus))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".html").map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// Counts per page: (person-required, of them auto; low-risk, of them
/// auto).
#[derive(Default, Clone, Copy)]
struct Tally {
    person: usize,
    person_auto: usize,
    low: usize,
    low_auto: usize,
}

async fn decide_the_corpus(f: &Fixture, corpus: &'static Corpus) {
    let app = Router::new().route(
        "/corpus/{name}",
        get(move |Path(name): Path<String>| async move {
            let safe = name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-');
            let text = if safe {
                std::fs::read_to_string(corpus_dir(corpus).join(format!("{name}.html")))
                    .unwrap_or_default()
            } else {
                String::new()
            };
            Html(text)
        }),
    );
    let site = serve_site(app).await;

    let rules = RuleSet::builder()
        .default_pack([support::SITE_IP])
        .build()
        .unwrap();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut wrong: Vec<String> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let names = pages(corpus);
    assert!(names.len() >= 20, "the corpus has {} pages", names.len());
    for page in &names {
        let url = f.open(&format!("http://{site}/corpus/{page}")).await;
        let targets = support::host::read_on(
            &f.tab,
            "[...document.querySelectorAll('[data-label]')].map(e => [e.id, e.dataset.label, e.dataset.method || 'click', e.options ? e.options[0].value : ''])",
        )
        .await;
        let tally = tallies.entry(page.clone()).or_default();
        for target in targets.as_array().unwrap() {
            let (id, label, method, option) = (
                target[0].as_str().unwrap(),
                target[1].as_str().unwrap(),
                target[2].as_str().unwrap(),
                target[3].as_str().unwrap(),
            );
            // No scroll here: the snapshot brings a target below the fold
            // into view itself, as `browser_propose` relies on.
            let (action, snapshot) = f.snapshot_of(&url, &action_for(id, method, option)).await;
            let element = snapshot.page.element.as_ref();
            if !snapshot.target_found || element.is_none() {
                missing.push(format!("{page} #{id}"));
                continue;
            }
            let decided = rules.decide(ProposedTarget {
                url: &url,
                action: &action,
                element,
            });
            let auto = decided.tier == Tier::Auto;
            let what = element.map(|e| e.summary()).unwrap_or_default();
            match label {
                "person" => {
                    tally.person += 1;
                    if auto {
                        tally.person_auto += 1;
                        wrong.push(format!(
                            "{page} #{id} {method} {what}: auto by `{}`",
                            decided.rule.map(|r| r.id()).unwrap_or_default()
                        ));
                    }
                }
                "low-risk" => {
                    tally.low += 1;
                    if auto {
                        tally.low_auto += 1;
                    } else {
                        eprintln!("low-risk, left to a person: {page} #{id} {method} {what}");
                    }
                }
                other => panic!("{page} #{id} has the label `{other}`"),
            }
        }
    }
    assert!(missing.is_empty(), "targets not found: {missing:?}");
    assert!(
        wrong.is_empty(),
        "person-required elements auto-approved:\n{}",
        wrong.join("\n")
    );
    let total = tallies.values().fold(Tally::default(), |sum, t| Tally {
        person: sum.person + t.person,
        person_auto: sum.person_auto + t.person_auto,
        low: sum.low + t.low,
        low_auto: sum.low_auto + t.low_auto,
    });
    assert!(
        total.person + total.low >= 300,
        "{} elements",
        total.person + total.low
    );
    assert!(
        total.low_auto * 100 >= total.low * MIN_LOW_RISK_AUTO_PERCENT,
        "{} of {} low-risk elements auto-approved",
        total.low_auto,
        total.low
    );
    check_table(corpus, &table(&tallies, total));
}

/// The action a model would propose on the target: `option` is a
/// select's first option.
fn action_for(id: &str, method: &str, option: &str) -> Value {
    let selector = format!("#{id}");
    match method {
        "fill" => {
            json!({"method": "fill", "selector": selector, "arguments": {"text": "running shoes"}})
        }
        "press" => json!({"method": "press", "selector": selector, "arguments": {"key": "Enter"}}),
        "select" => {
            json!({"method": "select", "selector": selector, "arguments": {"value": option}})
        }
        other => json!({"method": other, "selector": selector}),
    }
}

fn table(tallies: &BTreeMap<String, Tally>, total: Tally) -> String {
    let mut text = String::from(
        "| page | person-required | of them auto | low-risk | of them auto |\n| --- | ---: | ---: | ---: | ---: |\n",
    );
    for (page, t) in tallies {
        text.push_str(&format!(
            "| `{page}` | {} | {} | {} | {} |\n",
            t.person, t.person_auto, t.low, t.low_auto
        ));
    }
    text.push_str(&format!(
        "| **all {} pages** | **{}** | **{}** | **{}** | **{} ({:.1} %)** |\n",
        tallies.len(),
        total.person,
        total.person_auto,
        total.low,
        total.low_auto,
        total.low_auto as f64 * 100.0 / total.low.max(1) as f64
    ));
    text
}

const TABLE_END: &str = "<!-- end of the corpus table -->";

/// The docs show this run's table, or the test fails (or rewrites it with
/// `COUNTERSIGN_CORPUS_TABLE=write`).
fn check_table(corpus: &Corpus, table: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/rules-corpus.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc
        .find(corpus.table_start)
        .expect("the table's start marker")
        + corpus.table_start.len();
    let end = start
        + doc[start..]
            .find(TABLE_END)
            .expect("the table's end marker");
    if std::env::var("COUNTERSIGN_CORPUS_TABLE").as_deref() == Ok("write") {
        let written = format!("{}{table}{}", &doc[..start], &doc[end..]);
        std::fs::write(&path, written).unwrap();
        return;
    }
    assert_eq!(
        &doc[start..end],
        table,
        "docs/rules-corpus.md shows another table; rerun with COUNTERSIGN_CORPUS_TABLE=write"
    );
}
