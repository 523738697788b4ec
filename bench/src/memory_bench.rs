//! Benchmark 3: the in-memory store's consume against a bare mutex map.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use countersign_approval_core::{
    ActorId, Approval, ApprovalId, ApprovalStore, AttemptId, Binding, RunId, Timestamp,
};
use countersign_store_memory::InMemoryApprovalStore;

use crate::harness::{Budget, Row, Target, compare};

/// What one grant needs for a consume: its id and the binding of a matching request.
pub struct Fixture {
    pub template: Approval,
    pub binding: Binding,
    pub attempt: AttemptId,
    pub now: Timestamp,
}

impl Fixture {
    /// One authorised URL and action, used for every grant.
    pub fn new() -> Result<Fixture, String> {
        let policy = crate::policy_bench::policy()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| e.to_string())?;
        let url = rt
            .block_on(policy.authorize_destination("https://docs.example.com/"))
            .map_err(|e| e.to_string())?;
        let action = policy
            .authorize_action(&serde_json::json!({"method": "click", "selector": "a#docs"}))
            .map_err(|e| e.to_string())?;
        let actor = ActorId::new("bench-actor").map_err(|e| e.to_string())?;
        let run = RunId::new("bench-run").map_err(|e| e.to_string())?;
        let now = Timestamp::from_millis(1_700_000_000_000);
        let template = Approval::for_action(
            actor.clone(),
            run.clone(),
            &url,
            &action,
            Duration::from_secs(600),
            now,
        )
        .map_err(|e| e.to_string())?;
        Ok(Fixture {
            binding: Binding::new(&actor, &run, &url, &action),
            template,
            attempt: AttemptId::generate().map_err(|e| e.to_string())?,
            now,
        })
    }

    /// `n` grants that differ only in id.
    pub fn grants(&self, n: u64) -> Vec<Approval> {
        (0..n)
            .filter_map(|i| {
                let mut g = self.template.clone();
                g.id = ApprovalId::parse(&format!("apr_bench{i:024x}"))?;
                Some(g)
            })
            .collect()
    }
}

/// The baseline: the same comparisons as the store contract, on a bare map.
#[derive(Default)]
struct BareRecord {
    actor: String,
    run: String,
    url: String,
    digest: [u8; 32],
    expires_at: u64,
    revoked: bool,
    consumed_by: Option<String>,
}

fn bare_consume(
    map: &Mutex<HashMap<String, BareRecord>>,
    id: &str,
    b: &Binding,
    now: u64,
    attempt: &str,
) -> u8 {
    let Ok(mut map) = map.lock() else { return 9 };
    let Some(r) = map.get_mut(id) else { return 0 };
    if r.revoked {
        return 1;
    }
    if let Some(by) = &r.consumed_by {
        return if by == attempt { 2 } else { 3 };
    }
    if now >= r.expires_at {
        return 4;
    }
    if r.digest != *b.action_digest.as_bytes()
        || r.url != b.url
        || r.actor != b.actor_id.as_str()
        || r.run != b.run_id.as_str()
    {
        return 5;
    }
    r.consumed_by = Some(attempt.to_owned());
    6
}

fn bare_map(f: &Fixture, grants: &[Approval]) -> Mutex<HashMap<String, BareRecord>> {
    Mutex::new(
        grants
            .iter()
            .map(|g| {
                (
                    g.id.as_str().to_owned(),
                    BareRecord {
                        actor: g.actor_id.as_str().to_owned(),
                        run: g.run_id.as_str().to_owned(),
                        url: g.url.clone(),
                        digest: *f.template.action_digest.as_bytes(),
                        expires_at: g.expires_at.as_millis(),
                        ..BareRecord::default()
                    },
                )
            })
            .collect(),
    )
}

fn filled_store(grants: &[Approval]) -> Result<InMemoryApprovalStore, String> {
    let store = InMemoryApprovalStore::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        for g in grants {
            store.issue(g.clone()).await.map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    })?;
    Ok(store)
}

/// Runs `work` on `threads` threads over disjoint slices of `ids`, timing from
/// a common start to the last finish.
fn parallel<W>(threads: usize, ids: &[ApprovalId], work: W) -> Duration
where
    W: Fn(&[ApprovalId]) + Sync,
{
    let chunk = ids.len().div_ceil(threads).max(1);
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        for part in ids.chunks(chunk) {
            let (barrier, work) = (&barrier, &work);
            scope.spawn(move || {
                barrier.wait();
                work(part);
            });
        }
        // Fewer chunks than threads can only happen for tiny inputs; keep the barrier whole.
        for _ in ids.chunks(chunk).len()..threads {
            let barrier = &barrier;
            scope.spawn(move || {
                barrier.wait();
            });
        }
        barrier.wait();
        Instant::now()
    })
    .elapsed()
}

/// Fresh-grant consumes on `threads` threads.
pub fn consume(budget: Budget, threads: usize) -> Result<Row, String> {
    let f = Fixture::new()?;
    let attempt = f.attempt.as_str().to_owned();
    let (subject, baseline) = compare(
        budget,
        |n| {
            let grants = f.grants(n);
            let ids: Vec<ApprovalId> = grants.iter().map(|g| g.id.clone()).collect();
            let map = bare_map(&f, &grants);
            parallel(threads, &ids, |part| {
                for id in part {
                    black_box(bare_consume(
                        &map,
                        id.as_str(),
                        &f.binding,
                        f.now.as_millis(),
                        &attempt,
                    ));
                }
            })
        },
        |n| {
            let grants = f.grants(n);
            let ids: Vec<ApprovalId> = grants.iter().map(|g| g.id.clone()).collect();
            let Ok(store) = filled_store(&grants) else {
                return Duration::MAX;
            };
            let store = Arc::new(store);
            parallel(threads, &ids, |part| {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
                    return;
                };
                rt.block_on(async {
                    for id in part {
                        let _ =
                            black_box(store.consume_once(id, &f.binding, f.now, &f.attempt).await);
                    }
                });
            })
        },
    );
    Ok(Row {
        name: format!("memory store: consume_once, fresh grants, {threads} thread(s)"),
        baseline_name: "Mutex<HashMap> check-and-mark, same comparisons".into(),
        subject,
        baseline,
        target: Target::TimeRatioAtMost(1.5),
        note: format!(
            "{:.0} ops/s vs {:.0} ops/s",
            subject.ops_per_sec(),
            baseline.ops_per_sec()
        ),
    })
}
