//! countersign-mcp's Playwright tools are pinned to the real Playwright MCP
//! server of the release they name (`@playwright/mcp`, installed by `npm ci`
//! in `tests/playwright`, no browser downloaded): its own `tools/list`,
//! asked over stdio, gives each offered tool exactly as pinned, and every
//! tool it lists by default is either offered or refused with a reason.
//! Without the package the test says SKIPPED (and fails where
//! `COUNTERSIGN_MCP_NODE` says it must run).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use countersign_mcp::playwright::{
    NEVER_OFFERED, NOT_OFFERED, PLAYWRIGHT_MCP_VERSION, offered_tools,
};
use serde_json::{Value, json};

/// The real server's `tools/list`, with its default capabilities.
fn real_tools(package: &std::path::Path) -> Vec<Value> {
    let cli = package.join("node_modules/@playwright/mcp/cli.js");
    let mut child = Command::new("node")
        .arg(cli)
        .args([
            "--headless",
            "--isolated",
            "--executable-path",
            "/usr/bin/chromium",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "countersign-pin", "version": "1"}}}),
    );
    let mut answer_to = |id: u64| -> Value {
        for line in lines.by_ref() {
            let message: Value = serde_json::from_str(&line.unwrap()).unwrap();
            if message["id"] == id {
                return message;
            }
        }
        panic!("the Playwright MCP server closed before answering {id}");
    };
    let initialized = answer_to(1);
    assert_eq!(
        initialized["result"]["serverInfo"]["name"], "Playwright",
        "{initialized}"
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = answer_to(2);
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    listed["result"]["tools"].as_array().unwrap().clone()
}

#[test]
fn the_playwright_tools_are_the_pinned_releases_own() {
    let Some(package) = support::npm_package(
        "tests/playwright",
        "node_modules/@playwright/mcp",
        "Playwright MCP package",
    ) else {
        return;
    };
    let installed: Value = serde_json::from_str(
        &std::fs::read_to_string(package.join("node_modules/@playwright/mcp/package.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(installed["version"], PLAYWRIGHT_MCP_VERSION);

    let real = real_tools(&package);
    for ours in offered_tools() {
        let name = ours["name"].as_str().unwrap();
        let theirs = real
            .iter()
            .find(|tool| tool["name"] == name)
            .unwrap_or_else(|| panic!("the release lists no `{name}`"));
        assert_eq!(ours, theirs, "`{name}` differs from the release's");
    }
    // Every default tool of the release is offered or refused with a
    // reason: a release that adds one fails here until it is decided.
    let real_names: BTreeSet<&str> = real.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let offered: BTreeSet<&str> = offered_tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let left_out: BTreeSet<&str> = NOT_OFFERED.iter().map(|(name, _)| *name).collect();
    let never: BTreeSet<&str> = NEVER_OFFERED.iter().map(|(name, _)| *name).collect();
    let undecided: Vec<&&str> = real_names
        .iter()
        .filter(|name| {
            !offered.contains(*name) && !left_out.contains(*name) && !never.contains(*name)
        })
        .collect();
    assert!(
        undecided.is_empty(),
        "default tools neither offered nor refused: {undecided:?}"
    );
    assert_eq!(real_names.len(), 25, "{real_names:?}");
    assert_eq!(offered.len() + left_out.len() + 2, 25);
    // The left-out ones are all default tools of the release; the never
    // offered ones (code and coordinates) are there by default only as code.
    assert!(left_out.iter().all(|name| real_names.contains(name)));
    assert_eq!(
        never.intersection(&real_names).copied().collect::<Vec<_>>(),
        ["browser_evaluate", "browser_run_code_unsafe"]
    );
}
