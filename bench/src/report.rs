//! Printing rows and writing `docs/benchmarks.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::{Row, Target};

/// The command that produces the full report.
pub const COMMAND: &str = "cargo xtask bench";

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn target_text(t: Target) -> String {
    match t {
        Target::TimeRatioAtMost(x) => format!("time ratio ≤ {x}"),
        Target::ThroughputRatioAtLeast(x) => format!("throughput ratio ≥ {x}"),
    }
}

/// One line on standard error while the run goes on.
pub fn print_row(row: &Row) {
    let (ratio, met) = row.verdict();
    eprintln!(
        "{:<60} {:>10} vs {:>10}  ratio {:.2} ({}){}",
        row.name,
        fmt_ns(row.subject.median_ns),
        fmt_ns(row.baseline.median_ns),
        ratio,
        target_text(row.target),
        match met {
            Some(true) => " met",
            Some(false) => " MISSED",
            None => "",
        }
    );
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn machine_summary() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown cpu".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| format!("{:.0} GiB", kb as f64 / 1024.0 / 1024.0))
        .unwrap_or_else(|| "unknown memory".into());
    format!(
        "{cores} cores ({cpu}), {mem}, {}, {}",
        command_output("rustc", &["--version"]),
        command_output("redis-server", &["--version"])
            .split(" sha=")
            .next()
            .unwrap_or_default()
    )
}

fn row_line(row: &Row) -> String {
    let (ratio, met) = row.verdict();
    format!(
        "| {} | {} | {} | {} | {:.2} | {} | {} | {} |",
        row.name,
        row.baseline_name,
        fmt_ns(row.subject.median_ns),
        fmt_ns(row.baseline.median_ns),
        ratio,
        target_text(row.target),
        match met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        },
        row.note
    )
}

fn report_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docs")
        .join("benchmarks.md")
}

/// The load average (1, 5 and 15 minutes) as `/proc/loadavg` gives it.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The tree measured: the commit, and whether the work tree differed from it.
pub fn tree_summary() -> String {
    let commit = command_output("git", &["rev-parse", "HEAD"]);
    if commit.is_empty() {
        return "unknown (not a git checkout)".to_owned();
    }
    let dirty =
        !command_output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty();
    if dirty {
        format!("`{commit}` with uncommitted changes")
    } else {
        format!("`{commit}`")
    }
}

/// Where a run writes: a full run the committed report
/// (`docs/benchmarks.md`, charts in `docs/images/`); a partial run
/// (`BENCH_ONLY=<only>`) `target/bench/` only, so the committed report is
/// always one whole run.
pub struct Destination {
    /// The report.
    pub report: PathBuf,
    /// The ratio chart.
    pub ratios_svg: PathBuf,
    /// The scale chart.
    pub scale_svg: PathBuf,
    /// How the report links the charts.
    pub link_prefix: &'static str,
}

impl Destination {
    /// The destination of a run: `only` empty for a full run.
    pub fn of(only: &str) -> Result<Destination, String> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        if only.is_empty() {
            return Ok(Destination {
                report: report_path(),
                ratios_svg: root.join("docs/images/bench-ratios.svg"),
                scale_svg: root.join("docs/images/bench-scale.svg"),
                link_prefix: "images/",
            });
        }
        let name: String = only
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let dir = root.join("target/bench");
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("could not create `{}`: {e}", dir.display()))?;
        Ok(Destination {
            report: dir.join(format!("benchmarks-{name}.md")),
            ratios_svg: dir.join(format!("bench-ratios-{name}.svg")),
            scale_svg: dir.join(format!("bench-scale-{name}.svg")),
            link_prefix: "",
        })
    }
}

/// Writes the report of one run; returns its path. `tree` is
/// [`tree_summary`] taken when the run began, `load_before` the
/// load average then; `charts` the chart files written (by
/// file name) for the report to link.
pub fn write(
    destination: &Destination,
    only: &str,
    tree: &str,
    load_before: &str,
    rows: &[Row],
    sections: &[String],
    charts: &[(&str, &Path)],
) -> Result<String, String> {
    let mut out = String::new();
    let date = command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let _ = writeln!(out, "# Benchmarks\n");
    let run = if only.is_empty() {
        format!("one run of `{COMMAND}`")
    } else {
        format!("one partial run, `BENCH_ONLY={only} {COMMAND}`")
    };
    let _ = writeln!(
        out,
        "Every figure below comes from {run} (release build), which \
         wrote this file. Each subject is sampled alternately with its baseline in the \
         same run; the ratio of their medians is the figure we steer by, since absolute \
         times on this shared machine drift. No test asserts on timing; \
         `cargo xtask bench --quick` (part of `cargo xtask ci`) only checks that every \
         benchmark still runs.\n"
    );
    let _ = writeln!(out, "- tree: {tree} (when the run began)");
    let _ = writeln!(out, "- date: {date}");
    let _ = writeln!(out, "- machine: {}", machine_summary());
    let _ = writeln!(
        out,
        "- load average (1, 5, 15 min): {load_before} before the run, {} after",
        load_average()
    );
    let _ = writeln!(out, "- command: `{COMMAND}`\n");
    for (caption, file) in charts {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = writeln!(out, "![{caption}]({}{name})\n", destination.link_prefix);
    }
    let _ = writeln!(
        out,
        "| benchmark | baseline | subject median | baseline median | ratio | target | met | note |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for row in rows {
        let _ = writeln!(out, "{}", row_line(row));
    }
    for section in sections.iter().filter(|s| !s.is_empty()) {
        let _ = writeln!(out, "\n{section}");
    }
    let notes = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("notes.md");
    if let Ok(text) = std::fs::read_to_string(&notes) {
        let _ = writeln!(out, "\n{text}");
    }
    let path = &destination.report;
    std::fs::write(path, out).map_err(|e| format!("could not write `{}`: {e}", path.display()))?;
    Ok(path.display().to_string())
}
