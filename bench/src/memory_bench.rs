//! Benchmark 3: the in-memory store's consume against a bare mutex map.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use countersign_approval_core::{
    ActorId, Approval, ApprovalId, ApprovalStore, AttemptId, Binding, GrantState, RunId,
    StoredGrant, Timestamp,
};
use countersign_store_memory::InMemoryApprovalStore;

use crate::harness::{Budget, Row, Target, compare_sides, same_work_note};

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

/// The store contract's record, kept as the contract requires: the whole
/// grant (`get` returns it), the attempts given back on it and the fence
/// generations it was issued under, with run and actor fences beside.
struct FullRecord {
    grant: StoredGrant,
    abandoned: Vec<AttemptId>,
    run_generation: u64,
    actor_generation: u64,
}

#[derive(Default)]
struct FullMap {
    entries: HashMap<ApprovalId, FullRecord>,
    runs: HashMap<ActorId, HashMap<RunId, u64>>,
    actors: HashMap<ActorId, u64>,
}

/// The second baseline: the work the store contract requires of a consume,
/// written plainly and synchronously: one lookup of the whole grant, the
/// given-back attempts, the run and actor fences (no fence lookup while
/// nothing was ever stopped), state, expiry, the full binding, the
/// failed-attempt count and lock, and marking it consumed by this attempt.
fn full_consume(
    map: &Mutex<FullMap>,
    id: &ApprovalId,
    b: &Binding,
    now: Timestamp,
    attempt: &AttemptId,
) -> u8 {
    let Ok(mut guard) = map.lock() else { return 9 };
    let FullMap {
        entries,
        runs,
        actors,
    } = &mut *guard;
    let Some(r) = entries.get_mut(id) else {
        return 0;
    };
    if r.abandoned.contains(attempt) {
        return 1;
    }
    let a = &r.grant.approval;
    if !(runs.is_empty() && actors.is_empty()) {
        let run = runs
            .get(&a.actor_id)
            .and_then(|m| m.get(&a.run_id))
            .copied()
            .unwrap_or(0);
        let actor = actors.get(&a.actor_id).copied().unwrap_or(0);
        if run != r.run_generation || actor != r.actor_generation {
            return 2;
        }
    }
    let bound = a.action_digest == b.action_digest
        && a.url == b.url
        && a.actor_id == b.actor_id
        && a.run_id == b.run_id;
    match &r.grant.state {
        GrantState::Active => {}
        GrantState::Consumed { by, .. } => return if by == attempt && bound { 3 } else { 4 },
        _ => return 5,
    }
    if now >= a.expires_at {
        return 6;
    }
    if !bound {
        r.grant.failed_attempts = r.grant.failed_attempts.saturating_add(1);
        if r.grant.failed_attempts >= a.attempt_limit {
            r.grant.state = GrantState::Locked;
        }
        return 7;
    }
    r.grant.state = GrantState::Consumed {
        at: now,
        by: attempt.clone(),
    };
    8
}

/// Part of [`full_consume`] alone: the lock and reaching a fresh whole
/// grant, which on a store larger than the caches is mostly memory latency.
fn full_lookup(map: &Mutex<FullMap>, id: &ApprovalId, now: Timestamp) -> bool {
    let Ok(guard) = map.lock() else { return false };
    guard
        .entries
        .get(id)
        .is_some_and(|r| r.grant.approval.expires_at > now)
}

fn full_map(grants: &[Approval]) -> Mutex<FullMap> {
    Mutex::new(FullMap {
        entries: grants
            .iter()
            .map(|g| {
                (
                    g.id.clone(),
                    FullRecord {
                        grant: StoredGrant::issued(g.clone()),
                        abandoned: Vec::new(),
                        run_generation: 0,
                        actor_generation: 0,
                    },
                )
            })
            .collect(),
        ..FullMap::default()
    })
}

/// Runs `work` on `threads` threads over disjoint slices of `ids`, after
/// `setup` on each thread (untimed); the time is from the first thread's
/// start to the last one's finish.
///
/// Each thread reads the clock itself once the barrier releases it: timed
/// from the spawning thread, a run as short as a quick benchmark's could
/// finish before that thread had even woken from the barrier.
fn parallel<S, W>(
    threads: usize,
    ids: &[ApprovalId],
    setup: impl Fn() -> S + Sync,
    work: W,
) -> Duration
where
    W: Fn(&mut S, &[ApprovalId]) + Sync,
{
    let chunk = ids.len().div_ceil(threads).max(1);
    let barrier = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let part = ids.chunks(chunk).nth(i).unwrap_or_default();
            let (barrier, setup, work) = (&barrier, &setup, &work);
            handles.push(scope.spawn(move || {
                let mut state = setup();
                barrier.wait();
                let start = Instant::now();
                work(&mut state, part);
                (start, Instant::now())
            }));
        }
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let first = spans.iter().map(|s| s.0).min();
    let last = spans.iter().map(|s| s.1).max();
    match (first, last) {
        (Some(first), Some(last)) if spans.len() == threads => last.duration_since(first),
        // A worker panicked: no figure from this sample.
        _ => Duration::MAX,
    }
}

/// Fresh-grant consumes on `threads` threads, against two baselines sampled
/// in the same rounds: the bare check-and-mark the row's target is set
/// against, and (in the note) the work the store contract requires,
/// written plainly.
pub fn consume(budget: Budget, threads: usize) -> Result<Row, String> {
    let f = Fixture::new()?;
    let attempt = f.attempt.as_str().to_owned();
    let runtime = || tokio::runtime::Builder::new_current_thread().build().ok();
    let sides = compare_sides(
        budget,
        &mut [
            &mut |n| {
                let grants = f.grants(n);
                let ids: Vec<ApprovalId> = grants.iter().map(|g| g.id.clone()).collect();
                let map = bare_map(&f, &grants);
                parallel(
                    threads,
                    &ids,
                    || (),
                    |(), part| {
                        for id in part {
                            black_box(bare_consume(
                                &map,
                                id.as_str(),
                                &f.binding,
                                f.now.as_millis(),
                                &attempt,
                            ));
                        }
                    },
                )
            },
            &mut |n| {
                let grants = f.grants(n);
                let ids: Vec<ApprovalId> = grants.iter().map(|g| g.id.clone()).collect();
                let map = full_map(&grants);
                parallel(
                    threads,
                    &ids,
                    || (),
                    |(), part| {
                        for id in part {
                            black_box(full_consume(&map, id, &f.binding, f.now, &f.attempt));
                        }
                    },
                )
            },
            &mut |n| {
                let grants = f.grants(n);
                let ids: Vec<ApprovalId> = grants.iter().map(|g| g.id.clone()).collect();
                let map = full_map(&grants);
                parallel(
                    threads,
                    &ids,
                    || (),
                    |(), part| {
                        for id in part {
                            black_box(full_lookup(&map, id, f.now));
                        }
                    },
                )
            },
            &mut |n| {
                let grants = f.grants(n);
                let ids: Vec<ApprovalId> = grants.iter().map(|g| g.id.clone()).collect();
                let Ok(store) = filled_store(&grants) else {
                    return Duration::MAX;
                };
                parallel(threads, &ids, runtime, |rt, part| {
                    let Some(rt) = rt else { return };
                    rt.block_on(async {
                        for id in part {
                            let _ = black_box(
                                store.consume_once(id, &f.binding, f.now, &f.attempt).await,
                            );
                        }
                    });
                })
            },
        ],
    );
    let [bare, full, reach, subject] = sides[..] else {
        return Err("the memory benchmark lost a side".into());
    };
    Ok(Row {
        name: format!("memory store: consume_once, fresh grants, {threads} thread(s)"),
        baseline_name: "Mutex<HashMap> check-and-mark, same comparisons".into(),
        subject,
        baseline: bare,
        target: Target::TimeRatioAtMost(1.5),
        note: format!(
            "{:.0} ops/s vs {:.0} ops/s; lock and look up a whole grant, nothing else: {:.0} ns; {}",
            subject.ops_per_sec(),
            bare.ops_per_sec(),
            reach.median_ns,
            same_work_note(
                "Mutex<HashMap> of whole grants, given-back attempts, fences, full binding, failed-attempt count, synchronous",
                subject,
                full,
            )
        ),
    })
}
