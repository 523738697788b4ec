//! Benchmarks 1 and 2: the policy against the library work it wraps.

use std::collections::BTreeMap;
use std::hint::black_box;

use countersign_canonical_policy::{DEFAULT_METHODS, Policy, StaticResolver};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::harness::{Budget, Row, Target, compare, compare_sides, same_work_note, time};

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

/// The second baseline of the action row: the work the action contract
/// requires, written plainly on top of the first baseline's
/// serialise-and-hash: refuse unknown keys; trim, lower-case and look up
/// the method; trim and check the selector and description (emptiness,
/// length, control characters); check every argument key and value and
/// turn the number and the boolean into text; own every string of the
/// result (the contract hands back an owned action); serialise the
/// canonical map with serde_json; SHA-256. Numbers are handled as integers
/// only (the input's `20`): the shortest-double path for fractions is not
/// exercised by this input on either side.
fn plain_authorize(proposed: &Value, methods: &[&str]) -> Option<[u8; 32]> {
    const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;
    let control = |s: &str| s.bytes().any(|b| b < 0x20 || b == 0x7f);
    let object = proposed.as_object()?;
    if object.keys().any(|k| {
        !matches!(
            k.as_str(),
            "arguments" | "description" | "method" | "selector"
        )
    }) {
        return None;
    }
    let method = object.get("method")?.as_str()?.trim().to_ascii_lowercase();
    if !methods.contains(&method.as_str()) {
        return None;
    }
    let selector = object.get("selector")?.as_str()?.trim();
    if selector.is_empty() || selector.len() > 2048 || control(selector) {
        return None;
    }
    let description = match object.get("description") {
        None | Some(Value::Null) => format!("{method} {selector}"),
        Some(Value::String(text)) => {
            let text = text.trim();
            if text.is_empty() {
                format!("{method} {selector}")
            } else if text.len() > 1024 || control(text) {
                return None;
            } else {
                text.to_owned()
            }
        }
        Some(_) => return None,
    };
    let mut arguments = serde_json::Map::new();
    match object.get("arguments") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) if map.len() <= 32 => {
            for (key, value) in map {
                let key_ok = (1..=64).contains(&key.len())
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
                if !key_ok {
                    return None;
                }
                let text = match value {
                    Value::String(s) if s.len() <= 8192 => s.clone(),
                    Value::Number(n) => {
                        let i = n
                            .as_i64()
                            .filter(|i| i.unsigned_abs() <= MAX_SAFE_INTEGER)?;
                        i.to_string()
                    }
                    Value::Bool(b) => b.to_string(),
                    _ => return None,
                };
                arguments.insert(key.clone(), Value::String(text));
            }
        }
        Some(_) => return None,
    }
    let canonical: BTreeMap<&str, Value> = BTreeMap::from([
        ("arguments", Value::Object(arguments)),
        ("description", Value::String(description)),
        ("method", Value::String(method)),
        ("selector", Value::String(selector.to_owned())),
    ]);
    let text = serde_json::to_string(&canonical).ok()?;
    Some(Sha256::digest(text.as_bytes()).into())
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
    if plain_authorize(&proposed, DEFAULT_METHODS) != Some(*expected.digest().as_bytes()) {
        return Err("the same-work action baseline does not reach the same digest".into());
    }
    let sides = compare_sides(
        budget,
        &mut [
            &mut |n| {
                time(|| {
                    for _ in 0..n {
                        let text = serde_json::to_string(black_box(&canonical)).unwrap_or_default();
                        black_box(Sha256::digest(text.as_bytes()));
                    }
                })
            },
            &mut |n| {
                time(|| {
                    for _ in 0..n {
                        black_box(plain_authorize(black_box(&proposed), DEFAULT_METHODS));
                    }
                })
            },
            &mut |n| {
                time(|| {
                    for _ in 0..n {
                        if let Ok(action) = policy.authorize_action(black_box(&proposed)) {
                            black_box(action.digest());
                        }
                    }
                })
            },
        ],
    );
    let [baseline, same_work, subject] = sides[..] else {
        return Err("the action benchmark lost a side".into());
    };
    // A breakdown of the subject, each step timed alone on the finished
    // action: SHA-256 of its canonical JSON, writing that JSON, and owning
    // the result (a clone and drop allocates and frees what building it
    // does). What is left is validation and normalisation.
    let text = expected.canonical_json();
    let steps = compare_sides(
        budget,
        &mut [
            &mut |n| {
                time(|| {
                    for _ in 0..n {
                        black_box(Sha256::digest(black_box(&text).as_bytes()));
                    }
                })
            },
            &mut |n| {
                time(|| {
                    for _ in 0..n {
                        black_box(black_box(&expected).canonical_json());
                    }
                })
            },
            &mut |n| {
                time(|| {
                    for _ in 0..n {
                        black_box(black_box(&expected).clone());
                    }
                })
            },
        ],
    );
    let [sha, json, owned] = steps[..] else {
        return Err("the action breakdown lost a step".into());
    };
    let rest = subject.median_ns - sha.median_ns - json.median_ns - owned.median_ns;
    Ok(Row {
        name: "policy: authorize_action + digest".into(),
        baseline_name: "serde_json::to_string of the canonical map + sha2".into(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.5),
        note: format!(
            "subject's steps timed alone: SHA-256 {:.0} ns, canonical JSON {:.0} ns, owning the result (alloc + free) {:.0} ns, validation and the rest {:.0} ns; {}",
            sha.median_ns,
            json.median_ns,
            owned.median_ns,
            rest.max(0.0),
            same_work_note(
                "the same validation, normalisation and owned result written plainly, then this baseline's serialise + hash",
                subject,
                same_work,
            )
        ),
    })
}
