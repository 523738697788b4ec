//! `countersign-mcp --demo` starts on a fresh machine, says how to connect,
//! and what it says works.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

/// One HTTP/1.1 exchange; the status line and headers, lower-cased.
fn get(url: &str, headers: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut stream = TcpStream::connect(authority).unwrap();
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.to_lowercase()
}

#[test]
fn the_demo_prints_working_links() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign-mcp"))
        .arg("--demo")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines: Vec<String> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .take_while(|line| !line.starts_with("press Ctrl-C"))
        .collect();
    let value = |prefix: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {lines:?}"))
            .trim()
            .to_owned()
    };
    let endpoint = value("MCP endpoint (Streamable HTTP): ");
    let sign_in = value("approver sign-in: ");
    let site = value("demo site: ");
    assert!(value("MCP bearer token: ").len() >= 16);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("claude mcp add --transport http"))
    );

    assert!(get(&site, "").starts_with("http/1.1 200"));
    let signed_in = get(&sign_in, "");
    assert!(signed_in.starts_with("http/1.1 200"), "{signed_in}");
    assert!(signed_in.contains("set-cookie: countersign-approver="));
    let refused = get(&endpoint, "");
    assert!(refused.starts_with("http/1.1 401"), "{refused}");
    child.kill().unwrap();
    child.wait().unwrap();
}
