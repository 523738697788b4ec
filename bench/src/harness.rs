//! A small timing harness: a subject and its baseline are sampled in
//! alternation in the same run, so drift on a shared machine hits both.

use std::time::{Duration, Instant};

/// How long and how often to measure.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Samples per side.
    pub samples: usize,
    /// Operations per sample.
    pub iters: u64,
}

impl Budget {
    /// Scales the operation count (for slow subjects such as network round trips).
    pub fn scaled(self, divisor: u64) -> Budget {
        Budget {
            samples: self.samples,
            iters: (self.iters / divisor).max(1),
        }
    }
}

/// One side's result: per-operation nanoseconds at the median sample.
#[derive(Debug, Clone, Copy)]
pub struct Side {
    /// Median nanoseconds per operation across samples.
    pub median_ns: f64,
}

impl Side {
    /// Operations per second at the median.
    pub fn ops_per_sec(&self) -> f64 {
        if self.median_ns > 0.0 {
            1e9 / self.median_ns
        } else {
            f64::INFINITY
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Row {
    /// What is measured.
    pub name: String,
    /// What it is compared with.
    pub baseline_name: String,
    /// The subject.
    pub subject: Side,
    /// The baseline.
    pub baseline: Side,
    /// How the ratio is read and the target, e.g. `time ≤ 1.5`.
    pub target: Target,
    /// Anything the reader must know.
    pub note: String,
}

/// The target a row is judged by.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// subject time / baseline time must be at most this.
    TimeRatioAtMost(f64),
    /// subject throughput / baseline throughput must be at least this.
    ThroughputRatioAtLeast(f64),
}

impl Row {
    /// subject time / baseline time.
    pub fn time_ratio(&self) -> f64 {
        self.subject.median_ns / self.baseline.median_ns
    }

    /// The ratio the target speaks of, and whether it is met.
    pub fn verdict(&self) -> (f64, Option<bool>) {
        match self.target {
            Target::TimeRatioAtMost(limit) => {
                let r = self.time_ratio();
                (r, Some(r <= limit))
            }
            Target::ThroughputRatioAtLeast(limit) => {
                let r = self.baseline.median_ns / self.subject.median_ns;
                (r, Some(r >= limit))
            }
        }
    }
}

/// The median of `values` (which must be non-empty).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Samples `subject` and `baseline` alternately; each closure runs `iters`
/// operations and returns the elapsed time of the timed part.
pub fn compare(
    budget: Budget,
    mut baseline: impl FnMut(u64) -> Duration,
    mut subject: impl FnMut(u64) -> Duration,
) -> (Side, Side) {
    // One untimed round each warms caches and allocators.
    baseline(budget.iters.min(1000));
    subject(budget.iters.min(1000));
    let mut base = Vec::with_capacity(budget.samples);
    let mut subj = Vec::with_capacity(budget.samples);
    for i in 0..budget.samples {
        // Alternate who goes first so neither side always runs on a warmer machine.
        let per_op = |d: Duration| d.as_nanos() as f64 / budget.iters as f64;
        if i % 2 == 0 {
            base.push(per_op(baseline(budget.iters)));
            subj.push(per_op(subject(budget.iters)));
        } else {
            subj.push(per_op(subject(budget.iters)));
            base.push(per_op(baseline(budget.iters)));
        }
    }
    (
        Side {
            median_ns: median(&mut subj),
        },
        Side {
            median_ns: median(&mut base),
        },
    )
}

/// Samples any number of sides in rotation (sample `i` starts with side
/// `i mod k`), so none always runs first on a warmer or cooler machine;
/// each closure runs `iters` operations and returns the elapsed time of
/// the timed part. Returns one median per side, in the order given.
pub fn compare_sides(budget: Budget, sides: &mut [&mut dyn FnMut(u64) -> Duration]) -> Vec<Side> {
    // One untimed round each warms caches and allocators.
    for side in sides.iter_mut() {
        side(budget.iters.min(1000));
    }
    let k = sides.len();
    let mut per_side: Vec<Vec<f64>> = vec![Vec::with_capacity(budget.samples); k];
    for i in 0..budget.samples {
        for step in 0..k {
            let j = (i + step) % k;
            let elapsed = sides[j](budget.iters);
            per_side[j].push(elapsed.as_nanos() as f64 / budget.iters as f64);
        }
    }
    per_side
        .iter_mut()
        .map(|samples| Side {
            median_ns: median(samples),
        })
        .collect()
}

/// The limit for a subject against a baseline that does the same work the
/// contract requires: the same 1.5 as the rows' own target.
pub const SAME_WORK_TARGET: f64 = 1.5;

/// The note text for a second, same-work baseline sampled beside a row's
/// own: `"same-work baseline (what): 123 ns, ratio 1.10 (target ≤ 1.5: met)"`.
pub fn same_work_note(what: &str, subject: Side, same_work: Side) -> String {
    let ratio = subject.median_ns / same_work.median_ns;
    format!(
        "same-work baseline ({what}): {:.0} ns, ratio {ratio:.2} (target ≤ {SAME_WORK_TARGET}: {})",
        same_work.median_ns,
        if ratio <= SAME_WORK_TARGET {
            "met"
        } else {
            "**missed**"
        }
    )
}

/// Times `f` once.
pub fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// A store's consume against its server's own load tool (redis-benchmark,
/// pgbench) at `clients` concurrent callers, built from each side's
/// `(ops/s, p50 ms)` samples: judged by p50 latency at one client and by
/// throughput above; `note` carries both sides' medians.
pub struct ServerToolComparison {
    /// The store's side.
    pub subject: Side,
    /// The load tool's side.
    pub baseline: Side,
    /// p50 ≤ 1.3× at one client, throughput ≥ 0.9× above.
    pub target: Target,
    /// `p50 latency` or `throughput`, for the row's name.
    pub what: &'static str,
    /// `"… vs … ops/s; p50 … vs … ms"`.
    pub note: String,
}

/// Compares the medians of `ours` and `theirs`, each `(ops/s, p50 ms)` per sample.
pub fn compare_with_server_tool(
    ours: &[(f64, f64)],
    theirs: &[(f64, f64)],
    clients: usize,
) -> ServerToolComparison {
    let medians = |samples: &[(f64, f64)]| {
        let mut rps: Vec<f64> = samples.iter().map(|s| s.0).collect();
        let mut p50: Vec<f64> = samples.iter().map(|s| s.1).collect();
        (median(&mut rps), median(&mut p50))
    };
    let (our_rps, our_p50) = medians(ours);
    let (their_rps, their_p50) = medians(theirs);
    let note =
        format!("{our_rps:.0} vs {their_rps:.0} ops/s; p50 {our_p50:.3} vs {their_p50:.3} ms");
    if clients == 1 {
        ServerToolComparison {
            subject: Side {
                median_ns: our_p50 * 1e6,
            },
            baseline: Side {
                median_ns: their_p50 * 1e6,
            },
            target: Target::TimeRatioAtMost(1.3),
            what: "p50 latency",
            note,
        }
    } else {
        ServerToolComparison {
            subject: Side {
                median_ns: 1e9 / our_rps,
            },
            baseline: Side {
                median_ns: 1e9 / their_rps,
            },
            target: Target::ThroughputRatioAtLeast(0.9),
            what: "throughput",
            note,
        }
    }
}
