//! The Playwright-compatible mode against the real Playwright MCP: a
//! rule-decided `browser_click` through `countersign-mcp
//! --playwright-compat` beside the same call through `@playwright/mcp`,
//! from one MCP client (the official TypeScript SDK, over stdio), on one
//! page served here, both browsers from the same Chromium binary. The
//! client (`crates/mcp/tests/node/playwright_click_timing.mjs`) alternates
//! samples between the two servers and reports its per-round medians.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use axum::Router;
use axum::response::Html;
use axum::routing::get;

use crate::harness::{Row, Side, Target, median};
use crate::live_bench::{chromium_executable, node_available};

/// The page: one button whose clicks the page counts in its title. No
/// request: on a page whose click sends one, `@playwright/mcp` 0.0.86 took
/// about 6 s per click here (it waits for the request), which would
/// flatter the ratio.
const PAGE: &str = "<!doctype html><title>count 0</title>\
<button onclick=\"document.title = 'count ' + (++window.clicks || (window.clicks = 1))\">Count</button>";

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The MCP crate's test packages: the SDK and the pinned Playwright MCP.
fn package(dir: &str, module: &str) -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/mcp/tests")
        .join(dir);
    if !dir.join("node_modules").join(module).exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .current_dir(&dir)
            .status()
            .map_err(|e| format!("cannot run `npm ci` in `{}`: {e}", dir.display()))?;
        if !status.success() {
            return Err(format!(
                "`npm ci` in `{}` failed with {status}",
                dir.display()
            ));
        }
    }
    Ok(dir)
}

/// `countersign-mcp` beside this harness, in its profile. A quick run
/// takes the one `cargo xtask bench --quick` built with every binary of
/// the workspace; a full run builds the release binary first (a no-op
/// when it is fresh).
fn countersign_mcp(quick: bool) -> Result<PathBuf, String> {
    let binary = std::env::current_exe()
        .map_err(|e| format!("where is this harness? {e}"))?
        .with_file_name("countersign-mcp");
    if !quick {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "--release",
                "-p",
                "countersign-mcp",
                "--bin",
                "countersign-mcp",
            ])
            .status()
            .map_err(|e| format!("cannot build countersign-mcp: {e}"))?;
        if !status.success() {
            return Err(format!("building countersign-mcp failed with {status}"));
        }
    }
    if !binary.exists() {
        return Err(format!(
            "no `{}`: `cargo xtask bench --quick` builds it with the workspace's binaries",
            binary.display()
        ));
    }
    Ok(binary)
}

/// The comparison row, or `None` (saying why) without node or Chromium.
pub fn click(quick: bool) -> Result<Option<Row>, String> {
    if !node_available("the Playwright MCP row is") {
        return Ok(None);
    }
    let Some(chromium) = chromium_executable("the Playwright MCP row") else {
        return Ok(None);
    };
    let client = package("node", "@modelcontextprotocol/sdk")?;
    let peer = package("playwright", "@playwright/mcp")?;
    let binary = countersign_mcp(quick)?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(err)?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(("127.0.0.2", 0)))
        .map_err(err)?;
    let port = listener.local_addr().map_err(err)?.port();
    let app = Router::new().route("/", get(|| async { Html(PAGE) }));
    rt.spawn(async move { axum::serve(listener, app).await });
    let site = format!("http://127.0.0.2:{port}/");

    let root = countersign_backend_chromium::running_as_root();
    let config = std::env::temp_dir().join(format!("countersign-compat-bench-{port}.toml"));
    std::fs::write(
        &config,
        format!(
            r#"[policy]
allow_hosts = ["127.0.0.2"]
schemes = ["http"]
special_use = ["127.0.0.2/32"]
ports = [{port}]

[backend]
kind = "chromium"
chromium_path = "{chromium}"
sandbox = {sandbox}

[http]
listen = "127.0.0.1:0"

[stdio]
actor = "bench"
run = "playwright-compat"

[compat]
playwright = true

[[rules]]
id = "count-button"
tier = "auto"
reason = "the benchmark's button"
hosts = ["127.0.0.2"]
roles = ["button"]
"#,
            sandbox = !root,
        ),
    )
    .map_err(err)?;
    let output_dir = std::env::temp_dir().join(format!("countersign-compat-bench-{port}"));
    let mut theirs = vec![
        peer.join("node_modules/@playwright/mcp/cli.js")
            .display()
            .to_string(),
        "--headless".to_owned(),
        "--isolated".to_owned(),
        "--output-dir".to_owned(),
        output_dir.display().to_string(),
        "--executable-path".to_owned(),
        chromium.clone(),
    ];
    if root {
        theirs.push("--no-sandbox".to_owned());
    }
    let ours = serde_json::json!({
        "command": binary,
        "args": ["--stdio", "--config", config],
    });
    let theirs = serde_json::json!({ "command": "node", "args": theirs });
    let (rounds, per_round) = if quick { (2, 2) } else { (15, 10) };
    let run = Command::new("node")
        .current_dir(&client)
        .arg("playwright_click_timing.mjs")
        .arg(ours.to_string())
        .arg(theirs.to_string())
        .arg(&site)
        .arg(rounds.to_string())
        .arg(per_round.to_string())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run the MCP client: {e}"))?;
    let _ = std::fs::remove_file(&config);
    let _ = std::fs::remove_dir_all(&output_dir);
    let stdout = String::from_utf8_lossy(&run.stdout);
    if !run.status.success() {
        return Err(format!("the MCP client failed ({}): {stdout}", run.status));
    }
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .map_err(|e| format!("the MCP client's report is not JSON ({e}): {stdout}"))?;
    let medians = |side: &str| -> Result<f64, String> {
        let mut values: Vec<f64> = report[side]
            .as_array()
            .ok_or_else(|| format!("no `{side}` in {report}"))?
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .collect();
        Ok(median(&mut values))
    };
    let (subject, baseline) = (medians("ours")?, medians("theirs")?);
    // The warm-up round, then the measured ones, on each side.
    let per_side = (rounds + 1) * per_round;
    let wanted = format!("count {per_side}");
    for side in ["ours_title", "theirs_title"] {
        if report[side].as_str() != Some(wanted.as_str()) {
            return Err(format!(
                "the page of `{side}` says {}, not `{wanted}`",
                report[side]
            ));
        }
    }
    Ok(Some(Row {
        name: "browser_click through --playwright-compat (rule-decided, live Chromium) vs the peer"
            .to_owned(),
        baseline_name: "@playwright/mcp 0.0.86 `browser_click`, same MCP client (TypeScript SDK, stdio), same page, same Chromium binary".to_owned(),
        subject: Side { median_ns: subject },
        baseline: Side { median_ns: baseline },
        target: Target::TimeRatioAtMost(1.0),
        note: format!(
            "call to result, each answer with the page's snapshot; rounds alternate between the two servers, {rounds} rounds of {per_round} clicks each (medians of round medians); each page counted its {per_side} clicks; the rule's decision takes no screenshot"
        ),
    }))
}
