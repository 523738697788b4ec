//! `countersign-mcp`: the countersign toolset as an MCP server, the
//! approval pages beside it, configured by one TOML file.
//!
//! This file is the command line; `app.rs` wires the application from the
//! configuration, `approvers.rs` signs approvers in, `demo.rs` serves
//! `--demo`.

mod app;
mod approvers;
mod backend;
mod config;
mod demo;
mod metrics;
mod notify;
mod playwright_flags;
mod secrets;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use countersign_mcp::http::MCP_PATH;

use crate::app::{build, identity_of};
use crate::backend::Backends;
use crate::demo::{DemoBackend, demo_config};
use crate::playwright_flags::{PlaywrightFlags, refused_flag};

/// How long `--stdio` waits, once its client has gone, for the tool calls
/// still running (an act in the backend) before the process exits.
const CALLS_FINISH_WITHIN: Duration = Duration::from_secs(60);

/// Serves countersign's browser tools to MCP clients (stdio and Streamable
/// HTTP) and the approval pages where a person approves what a model
/// proposed, in one process.
#[derive(Debug, Parser)]
#[command(name = "countersign-mcp", version)]
struct Args {
    /// The TOML configuration file (see docs/mcp.md).
    #[arg(long, short, value_name = "FILE", required_unless_present = "demo")]
    config: Option<PathBuf>,
    /// Also serve MCP on stdin/stdout, as the `[stdio]` identity.
    #[arg(long)]
    stdio: bool,
    /// Serve a local demo: a site on loopback, the approval page and the
    /// MCP endpoint, fresh tokens; prints how to connect.
    #[arg(long, conflicts_with = "config")]
    demo: bool,
    /// The demo's backend (with `--demo`; default `fake`): `fake` (a model
    /// of the demo page, clicks nothing) or `chromium` (headless Chromium
    /// behind the egress guard, clicks the demo page). With `--config` the
    /// file's `[backend]` decides.
    #[arg(long, value_enum, conflicts_with = "config")]
    backend: Option<DemoBackend>,
    /// Offer Playwright MCP's tools (`browser_click`, `browser_type`, …)
    /// instead of countersign's, every state-changing call decided in
    /// place (as `[compat] playwright = true`).
    #[arg(long)]
    playwright_compat: bool,
    /// Playwright MCP's flags, for a command line written for it.
    #[command(flatten)]
    playwright: PlaywrightFlags,
}

#[tokio::main]
async fn main() -> ExitCode {
    let given: Vec<String> = std::env::args().skip(1).collect();
    if let Err(error) = refused_flag(&given) {
        eprintln!("countersign-mcp: {error}");
        return ExitCode::FAILURE;
    }
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("countersign-mcp: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let (mut config, demo) = match (&args.config, args.demo) {
        (_, true) => {
            let (config, demo) = demo_config(args.backend.unwrap_or(DemoBackend::Fake)).await?;
            (config, Some(demo))
        }
        (Some(path), false) => (config::load(path)?, None),
        (None, false) => return Err("give `--config FILE` or `--demo`".into()),
    };
    if args.playwright_compat {
        config.compat.playwright = true;
    }
    let flag_lines = args.playwright.apply(&mut config)?;
    let stdio = if args.stdio {
        let identity = config
            .stdio
            .as_ref()
            .ok_or("`--stdio` needs a `[stdio]` table with `actor` and `run`")?;
        Some(identity_of(identity)?)
    } else {
        None
    };
    let listener = tokio::net::TcpListener::bind(config.http.listen)
        .await
        .map_err(|e| format!("cannot listen on `{}`: {e}", config.http.listen))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;
    let public = config
        .http
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{address}"));
    let public = public.trim_end_matches('/').to_owned();
    // The notification worker, when configured, runs until this returns.
    let (mut app, server, backends, _notifications) = build(&config, &public).await?;
    if let Some(metrics) = &config.metrics {
        let route = metrics::route(metrics)?;
        match metrics.listen {
            // Only `/metrics` answers there.
            Some(listen) => {
                let scrape = tokio::net::TcpListener::bind(listen)
                    .await
                    .map_err(|e| format!("cannot listen on `{listen}` for metrics: {e}"))?;
                let scrape_address = scrape
                    .local_addr()
                    .map_err(|e| format!("no local address: {e}"))?;
                eprintln!("metrics: http://{scrape_address}/metrics");
                tokio::spawn(axum::serve(scrape, route).into_future());
            }
            None => app = app.merge(route),
        }
    }

    // In stdio mode stdout is the protocol: everything else goes to stderr.
    let say = |line: String| {
        if demo.is_some() && stdio.is_none() {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    };
    say(format!("approval pages: {public}/approvals"));
    for line in flag_lines {
        say(line);
    }
    say(match backends.as_ref() {
        Backends::Fake { site: Some(_), .. } => {
            "backend: fake, with the configured pages".to_owned()
        }
        Backends::Fake { site: None, .. } => "backend: fake, without pages".to_owned(),
        Backends::Chromium { guard: Some(_), .. } => {
            "backend: chromium, behind the egress guard".to_owned()
        }
        Backends::Chromium { guard: None, .. } => {
            "backend: chromium, WITHOUT the egress guard (`backend.guard = false`)".to_owned()
        }
    });
    if !config.tokens.is_empty() {
        say(format!(
            "MCP endpoint (Streamable HTTP): {public}{MCP_PATH}"
        ));
    }
    if let Some(demo) = &demo {
        for line in demo.instructions(&public) {
            say(line);
        }
    }
    let http = axum::serve(listener, app).into_future();
    match stdio {
        Some(identity) => {
            let http = tokio::spawn(http);
            let served =
                countersign_mcp::stdio::serve_stdio(server.clone().launched_as(identity)).await;
            // The client is gone; a call it started may still be inside the
            // backend, past its consume: let it reach its record.
            if tokio::time::timeout(CALLS_FINISH_WITHIN, server.calls_finished())
                .await
                .is_err()
            {
                eprintln!(
                    "countersign-mcp: a tool call was still running {} s after the stdio client left; exiting anyway",
                    CALLS_FINISH_WITHIN.as_secs()
                );
            }
            http.abort();
            served.map_err(|e| e.to_string())
        }
        None => {
            tokio::select! {
                served = http => served.map_err(|e| format!("the HTTP server stopped: {e}")),
                () = shutdown_signal() => Ok(()),
            }
        }
    }
}

/// Ctrl-C, or (on Unix) the `SIGTERM` a service manager or a test sends:
/// either way the process returns from `main`, so the browser it launched
/// is closed with it (a killed process would leave it running).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
