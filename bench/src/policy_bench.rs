//! Benchmarks 1 and 2: the policy against the library work it wraps.

use std::collections::BTreeMap;
use std::hint::black_box;

use countersign_canonical_policy::{Policy, StaticResolver};
use sha2::{Digest, Sha256};

use crate::harness::{Budget, Row, Target, compare, time};

const URL: &str = "https://docs.example.com/guide/getting-started?lang=en#install";

/// The policy every benchmark uses: two allow-list entries and an offline
/// resolver answering one public address.
pub(crate) fn policy() -> Result<Policy, String> {
    Policy::builder()
        .allow_host("docs.example.com")
        .allow_host("*.example.org")
        .resolver(StaticResolver::answering_all([std::net::IpAddr::from([
            93, 184, 216, 34,
        ])]))
        .build()
        .map_err(|e| e.to_string())
}

/// `authorize_destination` with the static resolver vs `url::Url::parse`.
pub fn destination(budget: Budget) -> Result<Row, String> {
    let policy = policy()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    let (subject, baseline) = compare(
        budget,
        |n| {
            time(|| {
                for _ in 0..n {
                    black_box(url::Url::parse(black_box(URL)).is_ok());
                }
            })
        },
        |n| {
            rt.block_on(async {
                time_async(n, || async {
                    black_box(policy.authorize_destination(black_box(URL)).await.is_ok());
                })
                .await
            })
        },
    );
    Ok(Row {
        name: "policy: authorize_destination (static resolver)".into(),
        baseline_name: "url::Url::parse, same input".into(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.5),
        note: String::new(),
    })
}

async fn time_async<F, Fut>(n: u64, mut f: F) -> std::time::Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = std::time::Instant::now();
    for _ in 0..n {
        f().await;
    }
    start.elapsed()
}

/// `authorize_action` plus digest vs serialising the canonical map and hashing it.
pub fn action(budget: Budget) -> Result<Row, String> {
    let policy = policy()?;
    let proposed = serde_json::json!({
        "method": "fill",
        "selector": "form#signup input[name=email]",
        "description": "type the e-mail address",
        "arguments": {"value": "someone@example.com", "delay_ms": 20, "clear": true},
    });
    // The baseline starts from the already-canonical map: it pays only for
    // serialising and hashing, not for validation or normalisation.
    let canonical: BTreeMap<&str, serde_json::Value> = BTreeMap::from([
        (
            "arguments",
            serde_json::json!({"clear": "true", "delay_ms": "20", "value": "someone@example.com"}),
        ),
        ("description", serde_json::json!("type the e-mail address")),
        ("method", serde_json::json!("fill")),
        (
            "selector",
            serde_json::json!("form#signup input[name=email]"),
        ),
    ]);
    let expected = policy
        .authorize_action(&proposed)
        .map_err(|e| e.to_string())?;
    let baseline_text = serde_json::to_string(&canonical).map_err(|e| e.to_string())?;
    if baseline_text != expected.canonical_json() {
        return Err("action baseline does not serialise the same canonical json".into());
    }
    let (subject, baseline) = compare(
        budget,
        |n| {
            time(|| {
                for _ in 0..n {
                    let text = serde_json::to_string(black_box(&canonical)).unwrap_or_default();
                    black_box(Sha256::digest(text.as_bytes()));
                }
            })
        },
        |n| {
            time(|| {
                for _ in 0..n {
                    if let Ok(action) = policy.authorize_action(black_box(&proposed)) {
                        black_box(action.digest());
                    }
                }
            })
        },
    );
    // The part of the subject that is serialising and hashing: the same two
    // steps on the finished action. The rest is validation and normalisation.
    let (rehash, _) = compare(
        budget,
        |n| {
            time(|| {
                for _ in 0..n {
                    black_box(());
                }
            })
        },
        |n| {
            time(|| {
                for _ in 0..n {
                    let text = black_box(&expected).canonical_json();
                    black_box(Sha256::digest(text.as_bytes()));
                }
            })
        },
    );
    Ok(Row {
        name: "policy: authorize_action + digest".into(),
        baseline_name: "serde_json::to_string of the canonical map + sha2".into(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.5),
        note: format!(
            "serialise + hash of the built action alone: {:.0} ns; validation and normalisation: {:.0} ns",
            rehash.median_ns,
            (subject.median_ns - rehash.median_ns).max(0.0)
        ),
    })
}
