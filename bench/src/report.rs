//! Printing rows and writing `docs/benchmarks.md`.

use std::fmt::Write as _;
use std::path::PathBuf;
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

/// Merges the rows and sections of a partial run (`BENCH_ONLY=<only>`)
/// into the existing report: each row replaces the table row of the same
/// benchmark (or joins the table), each section (`## <heading>` to the next
/// `## `) replaces the one with its heading (or goes before the notes), and
/// a dated line in the header says what was merged. Everything else stays.
pub fn merge(only: &str, rows: &[Row], sections: &[String]) -> Result<String, String> {
    let path = report_path();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("could not read `{}`: {e}", path.display()))?;
    let date = command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();

    for row in rows {
        let start = format!("| {} |", row.name);
        if let Some(line) = lines.iter_mut().find(|l| l.starts_with(&start)) {
            *line = row_line(row);
        } else if let Some(last) = lines.iter().rposition(|l| {
            l.starts_with("| ")
                && (l.contains(" | time ratio") || l.contains(" | throughput ratio"))
        }) {
            lines.insert(last + 1, row_line(row));
        } else {
            return Err("the report has no benchmark table to merge a row into".to_owned());
        }
    }

    for section in sections.iter().filter(|s| !s.is_empty()) {
        let heading = section.lines().next().unwrap_or_default().to_owned();
        let new: Vec<String> = section.trim_end().lines().map(str::to_owned).collect();
        let found = lines.iter().position(|l| *l == heading);
        match found {
            Some(from) => {
                let to = lines[from + 1..]
                    .iter()
                    .position(|l| l.starts_with("## "))
                    .map_or(lines.len(), |n| from + 1 + n);
                let mut replacement = new;
                replacement.push(String::new());
                lines.splice(from..to, replacement);
            }
            None => {
                let at = lines
                    .iter()
                    .position(|l| l == "## Reading the figures")
                    .unwrap_or(lines.len());
                let mut insertion = new;
                insertion.push(String::new());
                lines.splice(at..at, insertion);
            }
        }
    }

    let marker = format!("- merged: `BENCH_ONLY={only}`");
    let note = format!(
        "{marker} run of {date} (`{COMMAND}`): its rows and sections replace the earlier ones"
    );
    if let Some(line) = lines.iter_mut().find(|l| l.starts_with(&marker)) {
        *line = note;
    } else if let Some(at) = lines.iter().position(|l| l.starts_with("- command: ")) {
        lines.insert(at, note);
    } else {
        return Err("the report has no header to note the merge in".to_owned());
    }

    let mut out = lines.join("\n");
    out.push('\n');
    std::fs::write(&path, out).map_err(|e| format!("could not write `{}`: {e}", path.display()))?;
    Ok(path.display().to_string())
}

/// Writes the report; returns its path.
pub fn write(rows: &[Row], sections: &[String]) -> Result<String, String> {
    let mut out = String::new();
    let date = command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Every figure below comes from one run of `{COMMAND}` (release build), which \
         rewrites this file. Each subject is sampled alternately with its baseline in the \
         same run; the ratio of their medians is the figure we steer by, since absolute \
         times on this shared machine drift. No test asserts on timing; \
         `cargo xtask bench --quick` (part of `cargo xtask ci`) only checks that every \
         benchmark still runs.\n"
    );
    let _ = writeln!(out, "- date: {date}");
    let _ = writeln!(out, "- machine: {}", machine_summary());
    let _ = writeln!(out, "- command: `{COMMAND}`\n");
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
    let path = report_path();
    std::fs::write(&path, out).map_err(|e| format!("could not write `{}`: {e}", path.display()))?;
    Ok(path.display().to_string())
}
