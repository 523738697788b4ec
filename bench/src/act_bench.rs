//! Benchmark 5: Act end to end (memory stores, fake backend, static
//! resolver), and the share of its time each stage takes.

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign_act_tool::{Act, Context};
use countersign_approval_core::{
    ActionRequest, ActorId, ApprovalStore, AttemptId, Backend, GivenApprovalId, ManualClock,
    OperationId, OperationLog, OperationRecord, OutcomeCode, RunId,
};
use countersign_backend_fake::FakeBackend;
use countersign_store_memory::{InMemoryApprovalStore, InMemoryOperationStore};

use crate::harness::{Budget, median};
use crate::memory_bench::Fixture;
use crate::policy_bench::policy;

const URL: &str = "https://docs.example.com/";

struct Setup {
    act: Act,
    calls: Vec<serde_json::Value>,
}

/// A context whose store holds `n` fresh grants, and one call per grant.
fn setup(f: &Fixture, rt: &tokio::runtime::Runtime, n: u64) -> Result<Setup, String> {
    let store = InMemoryApprovalStore::new();
    let grants = f.grants(n);
    rt.block_on(async {
        for g in &grants {
            store.issue(g.clone()).await.map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    })?;
    let context = Context::builder()
        .actor_id(ActorId::new("bench-actor").map_err(|e| e.to_string())?)
        .run_id(RunId::new("bench-run").map_err(|e| e.to_string())?)
        .backend(FakeBackend::new())
        .source_policy(policy()?)
        .operation_store(InMemoryOperationStore::new())
        .approval_store(store)
        .clock(ManualClock::new(f.now))
        .build()
        .map_err(|e| e.to_string())?;
    let calls = grants
        .iter()
        .map(|g| {
            serde_json::json!({
                "url": URL, "approval_id": g.id.as_str(),
                "method": "click", "selector": "a#docs",
            })
        })
        .collect();
    Ok(Setup {
        act: Act::new(context),
        calls,
    })
}

fn per_op(d: Duration, n: u64) -> f64 {
    d.as_nanos() as f64 / n as f64
}

/// Runs the end-to-end measurement and returns a markdown section.
pub fn end_to_end(budget: Budget) -> Result<String, String> {
    let f = Fixture::new()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    let policy = policy()?;
    let proposed = serde_json::json!({"method": "click", "selector": "a#docs"});
    let url = rt
        .block_on(policy.authorize_destination(URL))
        .map_err(|e| e.to_string())?;
    let action = policy
        .authorize_action(&proposed)
        .map_err(|e| e.to_string())?;
    let n = budget.iters;

    let names = [
        "whole call (`execute_json`)",
        "policy: destination",
        "policy: action + digest",
        "ids: operation + attempt (OS CSPRNG)",
        "store: consume_once",
        "backend: FakeBackend::perform",
        "log: operation record",
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut oks = 0usize;
    for _ in 0..budget.samples {
        // Whole call.
        let s = setup(&f, &rt, n)?;
        let start = Instant::now();
        rt.block_on(async {
            for call in &s.calls {
                let out = s.act.execute_json(call).await;
                if out["status"] == "ok" {
                    oks += 1;
                }
            }
        });
        samples[0].push(per_op(start.elapsed(), n));

        // Stages, each alone over the same count.
        let d = rt.block_on(async {
            let start = Instant::now();
            for _ in 0..n {
                let _ = black_box(policy.authorize_destination(black_box(URL)).await);
            }
            start.elapsed()
        });
        samples[1].push(per_op(d, n));

        let start = Instant::now();
        for _ in 0..n {
            let _ = black_box(policy.authorize_action(black_box(&proposed)));
        }
        samples[2].push(per_op(start.elapsed(), n));

        let start = Instant::now();
        for _ in 0..n {
            let _ = black_box(OperationId::generate());
            let _ = black_box(AttemptId::generate());
        }
        samples[3].push(per_op(start.elapsed(), n));

        let store = InMemoryApprovalStore::new();
        let grants = f.grants(n);
        let ids: Vec<_> = grants.iter().map(|g| g.id.clone()).collect();
        let d = rt.block_on(async {
            for g in grants {
                let _ = store.issue(g).await;
            }
            let start = Instant::now();
            for id in &ids {
                let _ = black_box(store.consume_once(id, &f.binding, f.now, &f.attempt).await);
            }
            start.elapsed()
        });
        samples[4].push(per_op(d, n));

        let backend = FakeBackend::new();
        let request = ActionRequest {
            operation_id: OperationId::generate().map_err(|e| e.to_string())?,
            approval_id: f.template.id.clone(),
            actor_id: f.template.actor_id.clone(),
            run_id: f.template.run_id.clone(),
            url: url.clone(),
            action: action.clone(),
            writes: countersign_approval_core::WriteAccess::Open,
        };
        let d = rt.block_on(async {
            let start = Instant::now();
            for _ in 0..n {
                let _ = black_box(backend.perform(&request).await);
            }
            start.elapsed()
        });
        samples[5].push(per_op(d, n));

        let log = Arc::new(InMemoryOperationStore::new());
        let record = OperationRecord {
            operation_id: request.operation_id.clone(),
            actor_id: request.actor_id.clone(),
            run_id: request.run_id.clone(),
            approval_id: GivenApprovalId::WellFormed(request.approval_id.clone()),
            url: Some(url.as_str().to_owned()),
            action_digest: Some(action.digest()),
            approver_id: None,
            outcome: OutcomeCode::Ok,
            reason: String::new(),
            started_at: f.now,
            finished_at: f.now,
        };
        let d = rt.block_on(async {
            let start = Instant::now();
            for _ in 0..n {
                let _ = black_box(log.record(record.clone()).await);
            }
            start.elapsed()
        });
        samples[6].push(per_op(d, n));
    }
    let expected = budget.samples * n as usize;
    if oks != expected {
        return Err(format!("act end to end: {oks} of {expected} calls were ok"));
    }

    let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
    let whole = medians[0];
    let staged: f64 = medians[1..].iter().sum();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Act end to end\n\nIn-memory stores, fake backend, static resolver; every call \
         consumes a fresh grant and returns `ok`. Median of {} samples × {} calls; each \
         stage is timed alone, over the same count, in the same run.\n\n\
         Whole call: **{:.2} µs**, **{:.0} calls/s** on one thread.\n\n\
         | stage | median per call | share of the whole call |\n|---|---|---|",
        budget.samples,
        n,
        whole / 1e3,
        1e9 / whole
    );
    for (name, m) in names.iter().zip(&medians).skip(1) {
        let _ = writeln!(out, "| {name} | {:.0} ns | {:.0} % |", m, 100.0 * m / whole);
    }
    let _ = writeln!(
        out,
        "| the rest: call parsing, binding, JSON result, clock, log event | {:.0} ns | {:.0} % |",
        (whole - staged).max(0.0),
        100.0 * (whole - staged).max(0.0) / whole
    );
    eprintln!(
        "act end to end: {:.2} µs per call, {:.0} calls/s",
        whole / 1e3,
        1e9 / whole
    );
    Ok(out)
}
