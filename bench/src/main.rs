//! `cargo xtask bench [--quick]`: countersign's hot paths, each beside a
//! baseline measured in the same run. A full run rewrites `docs/benchmarks.md`
//! and its charts in `docs/images/`; a partial run (`BENCH_ONLY=<name>`)
//! writes to `target/bench/` only; `--quick` only checks that every
//! benchmark still runs.

mod act_bench;
mod charts;
mod compat_bench;
mod egress_bench;
mod harness;
mod live_bench;
mod mcp_bench;
mod memory_bench;
mod notify_bench;
mod policy_bench;
mod postgres_bench;
mod read_only_bench;
mod redis_bench;
mod report;
mod rules_bench;
mod scale_bench;

use std::process::ExitCode;

use harness::{Budget, Row};

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    match run(quick) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(quick: bool) -> Result<(), String> {
    let load_before = report::load_average();
    let tree = report::tree_summary();
    let budget = if quick {
        Budget {
            samples: 3,
            iters: 200,
        }
    } else {
        Budget {
            samples: 31,
            iters: 20_000,
        }
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut extra: Vec<String> = Vec::new();
    // BENCH_ONLY=<substring>[,<substring>…] runs only the benchmarks whose
    // names contain one of them, for profiling a few at a time.
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| {
        only.is_empty()
            || only
                .split(',')
                .any(|part| !part.is_empty() && name.contains(part))
    };
    let mut push = |row: Row| {
        report::print_row(&row);
        rows.push(row);
    };
    if wanted("destination") {
        push(policy_bench::destination(budget)?);
    }
    if wanted("action") {
        push(policy_bench::action(budget)?);
    }
    if wanted("rules") {
        push(rules_bench::decide(budget)?);
        push(rules_bench::propose(budget.scaled(4))?);
    }
    if wanted("memory") {
        push(memory_bench::consume(budget, 1)?);
        push(memory_bench::consume(budget, 2)?);
    }
    if wanted("redis") {
        let (redis_rows, section) = redis_bench::consume(quick)?;
        for row in redis_rows {
            push(row);
        }
        extra.push(section);
    }
    if wanted("postgres") {
        let (postgres_rows, section) = postgres_bench::consume(quick)?;
        for row in postgres_rows {
            push(row);
        }
        extra.push(section);
    }
    let mut curves = Vec::new();
    if wanted("scale") {
        let (memory, memory_curve) = scale_bench::memory(quick)?;
        let (redis, redis_curves) = scale_bench::redis(quick)?;
        let (postgres, postgres_curve) = scale_bench::postgres(quick)?;
        curves.push(memory_curve);
        curves.extend(redis_curves);
        curves.push(postgres_curve);
        extra.push(format!(
            "## Cost per grant at scale\n\n{memory}\n{redis}\n{postgres}"
        ));
    }
    if wanted("act") {
        extra.push(act_bench::end_to_end(budget.scaled(4))?);
    }
    if wanted("live") {
        // A click is a few DevTools round trips: fewer, smaller samples.
        let live = Budget {
            samples: if quick { 3 } else { 21 },
            iters: if quick { 2 } else { 20 },
        };
        for row in live_bench::click(live)? {
            push(row);
        }
    }
    if wanted("observe") {
        // One observation of a 1,000-element page takes a few hundred
        // milliseconds on a loaded two-core machine: few, small samples.
        let observe = Budget {
            samples: if quick { 3 } else { 21 },
            iters: if quick { 2 } else { 10 },
        };
        for row in live_bench::observe(observe)? {
            push(row);
        }
    }
    if wanted("notify") {
        push(notify_bench::propose_with_a_hanging_notifier(
            budget.scaled(4),
        )?);
    }
    if wanted("playwright-mcp")
        && let Some(row) = compat_bench::click(quick)?
    {
        push(row);
    }
    if wanted("mcp") {
        // An HTTP round trip through two services per operation: fewer operations.
        push(mcp_bench::act(budget.scaled(20))?);
    }
    if wanted("read-only")
        && let Some(row) = read_only_bench::page_load(quick)?
    {
        push(row);
    }
    if wanted("egress") {
        let (row, section) = egress_bench::page_load(quick)?;
        push(row);
        extra.push(section);
    }

    if quick {
        // The charts are drawn in quick runs too (into target/bench), so
        // CI catches a chart that no longer draws.
        let destination = report::Destination::of("quick")?;
        charts::ratios(&rows, &destination.ratios_svg)?;
        if !curves.is_empty() {
            charts::scale(&curves, &destination.scale_svg)?;
        }
        eprintln!("bench --quick: {} benchmarks ran", rows.len());
        return Ok(());
    }
    let destination = report::Destination::of(&only)?;
    let mut drawn: Vec<(&str, &std::path::Path)> = Vec::new();
    if !rows.is_empty() {
        charts::ratios(&rows, &destination.ratios_svg)?;
        drawn.push((
            "every row's ratio against its same-run baseline; the tick is its target",
            &destination.ratios_svg,
        ));
    }
    if !curves.is_empty() {
        charts::scale(&curves, &destination.scale_svg)?;
        drawn.push((
            "consume p50 against live grants, per store",
            &destination.scale_svg,
        ));
    }
    let path = report::write(
        &destination,
        &only,
        &tree,
        &load_before,
        &rows,
        &extra,
        &drawn,
    )?;
    eprintln!("wrote {path}");
    Ok(())
}
