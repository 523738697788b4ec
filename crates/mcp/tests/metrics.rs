//! `/metrics` on the binary: a proposal a person approves on the page, its
//! act, a replay of it and an act with an unknown grant are counted, as the
//! Prometheus Python client's own parser reads the scrape; the scrape is
//! refused without the scraper's token, and with the wrong one. On a listen
//! address of its own, `/metrics` needs no token and the MCP listener has
//! none.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{Process, Session, approve_form, post_form};

const SCRAPER_TOKEN: &str = "scraper-token-0123456789";
const URL: &str = "http://127.0.0.2:9/";

fn click(selector: &str) -> Value {
    json!({"url": URL, "method": "click", "selector": selector, "description": "count once"})
}

/// Each sample of `scrape` as `python`'s Prometheus client parses it:
/// `(name, labels as name=value joined by commas in order, value)`.
fn parsed(python: &std::path::Path, scrape: &str) -> Vec<(String, String, f64)> {
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/parse_metrics.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(scrape.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the parser refused the scrape:\n{scrape}"
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let sample: Value = serde_json::from_str(line).unwrap();
            let mut labels: Vec<String> = sample["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
                .collect();
            labels.sort();
            (
                sample["name"].as_str().unwrap().to_owned(),
                labels.join(","),
                sample["value"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn value_of(samples: &[(String, String, f64)], name: &str, labels: &str) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| n == name && l == labels)
        .map(|(_, _, v)| *v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scrape_counts_what_happened_for_the_scraper_only() {
    let Some(python) = support::python() else {
        return;
    };
    let token_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token_file.path(), format!("{SCRAPER_TOKEN}\n")).unwrap();
    let metrics = format!(
        "\n[metrics]\ntoken_file = \"{}\"\n",
        token_file.path().display()
    );
    let process = Process::start_with("memory", &metrics);
    let mut session = Session::open(&process.mcp).await;

    let proposed = session
        .call("browser_propose", click("button#counted"))
        .await;
    assert_eq!(proposed["status"], "pending", "{proposed}");
    let proposal = proposed["proposal_id"].as_str().unwrap().to_owned();
    let form = approve_form(&process.origin, &proposal).await;
    assert_eq!(
        post_form(&process.origin, &form).await.0,
        StatusCode::SEE_OTHER
    );
    let status = session
        .call("browser_proposal_status", json!({"proposal_id": proposal}))
        .await;
    let grant = status["approval_id"].as_str().unwrap().to_owned();
    let mut act = click("button#counted");
    act["approval_id"] = json!(grant);
    assert_eq!(session.outcome("browser_act", act.clone()).await, "ok");
    assert_eq!(session.outcome("browser_act", act).await, "APPROVAL_STALE");
    let mut unknown = click("button#counted");
    unknown["approval_id"] = json!("apr_00000000000000000000000000000000");
    assert_eq!(
        session.outcome("browser_act", unknown).await,
        "APPROVAL_REQUIRED"
    );

    let scrape_with = |token: Option<&'static str>| {
        let url = format!("{}/metrics", process.origin);
        async move {
            let mut request = support::http().get(url);
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let answer = request.send().await.unwrap();
            (answer.status(), answer.text().await.unwrap())
        }
    };
    assert_eq!(scrape_with(None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(
        scrape_with(Some("scraper-token-0123456780")).await.0,
        StatusCode::UNAUTHORIZED
    );
    let (status, scrape) = scrape_with(Some(SCRAPER_TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    let samples = parsed(&python, &scrape);
    let expect = [
        ("countersign_acts_total", "outcome=ok", 1.0),
        ("countersign_acts_total", "outcome=APPROVAL_STALE", 1.0),
        ("countersign_acts_total", "outcome=APPROVAL_REQUIRED", 1.0),
        ("countersign_stale_total", "reason=consumed", 1.0),
        ("countersign_proposals_total", "tier=person", 1.0),
        (
            "countersign_decisions_total",
            "decided_by=person,outcome=approved",
            1.0,
        ),
        (
            "countersign_approval_wait_seconds_count",
            "decided_by=person",
            1.0,
        ),
    ];
    for (name, labels, value) in expect {
        assert_eq!(
            value_of(&samples, name, labels),
            Some(value),
            "{name}{{{labels}}} in:\n{scrape}"
        );
    }
    // Every call of the store is timed: the three consumes (one each for
    // the act, its replay and the unknown grant) and the one proposal.
    for (operation, calls) in [("consume_once", 3.0), ("propose", 1.0)] {
        assert_eq!(
            value_of(
                &samples,
                "countersign_store_call_seconds_count",
                &format!("operation={operation},store=memory")
            ),
            Some(calls),
            "{operation} in:\n{scrape}"
        );
    }
    // The wait is a histogram with the documented buckets, the last `+Inf`.
    assert_eq!(
        value_of(
            &samples,
            "countersign_approval_wait_seconds_bucket",
            "decided_by=person,le=+Inf"
        ),
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_its_own_address_the_scrape_needs_no_token_and_mcp_has_none() {
    let Some(python) = support::python() else {
        return;
    };
    let process = Process::start_with("memory", "\n[metrics]\nlisten = \"127.0.0.1:0\"\n");
    let log = process.stderr.lock().unwrap().clone();
    let scrape_url = log
        .lines()
        .find_map(|line| line.strip_prefix("metrics: "))
        .unwrap_or_else(|| panic!("no metrics address in:\n{log}"))
        .to_owned();
    let mut session = Session::open(&process.mcp).await;
    let mut unknown = click("button#counted");
    unknown["approval_id"] = json!("apr_00000000000000000000000000000000");
    assert_eq!(
        session.outcome("browser_act", unknown).await,
        "APPROVAL_REQUIRED"
    );
    let beside_mcp = support::http()
        .get(format!("{}/metrics", process.origin))
        .send()
        .await
        .unwrap();
    assert_eq!(beside_mcp.status(), StatusCode::NOT_FOUND);
    let answer = support::http().get(&scrape_url).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let samples = parsed(&python, &answer.text().await.unwrap());
    assert_eq!(
        value_of(
            &samples,
            "countersign_acts_total",
            "outcome=APPROVAL_REQUIRED"
        ),
        Some(1.0)
    );
}
