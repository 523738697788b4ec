//! The tool surface of Playwright MCP (`@playwright/mcp`), pinned to one
//! release, that countersign-mcp's Playwright-compatible mode is built to:
//! every tool it performs with Playwright's own name, description, argument
//! schema and annotations, read from the package's `tools/list`; every
//! tool it never offers, and every default tool it leaves out, with the
//! reason a model is told when it calls one.
//!
//! ```
//! use countersign_mcp::playwright::{
//!     PLAYWRIGHT_MCP_VERSION, offered_tools, refusal_of,
//! };
//!
//! assert_eq!(PLAYWRIGHT_MCP_VERSION, "0.0.86");
//! let click = offered_tools()
//!     .iter()
//!     .find(|tool| tool["name"] == "browser_click")
//!     .unwrap();
//! assert_eq!(click["inputSchema"]["required"], serde_json::json!(["target"]));
//! assert!(refusal_of("browser_evaluate").unwrap().contains("no element"));
//! assert_eq!(refusal_of("browser_click"), None);
//! ```
//!
//! `crates/mcp/tests/playwright_tools.rs` checks the pin against the real
//! package's `tools/list`: the same definitions, and every default tool of
//! the release either offered here or refused with a reason.

pub mod compat;
mod seal;
pub mod sections;
pub mod snapshot;

use std::sync::OnceLock;

use serde_json::Value;

/// The `@playwright/mcp` release the tools are pinned to.
pub const PLAYWRIGHT_MCP_VERSION: &str = "0.0.86";

/// The pinned `tools/list` entries, as the release gives them.
const PINNED: &str = include_str!("playwright/tools-0.0.86.json");

/// The tools performed in Playwright-compatible mode, each exactly as the
/// pinned release lists it (`name`, `description`, `inputSchema`,
/// `annotations`), in its order; empty if the pinned file were unreadable,
/// which the crate's tests rule out.
pub fn offered_tools() -> &'static [Value] {
    static TOOLS: OnceLock<Vec<Value>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        serde_json::from_str::<Value>(PINNED)
            .ok()
            .and_then(|pinned| pinned.get("tools").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    })
}

/// Tools that run code or act at coordinates: none of them can be bound to
/// an element a person saw, so none is ever offered, whatever the
/// configuration.
pub const NEVER_OFFERED: &[(&str, &str)] = &[
    (
        "browser_evaluate",
        "runs the model's JavaScript in the page: no person can see what it would do, and it binds no element",
    ),
    (
        "browser_run_code_unsafe",
        "runs the model's code against the browser: no person can see what it would do, and it binds no element",
    ),
    (
        "browser_mouse_click_xy",
        "clicks at coordinates: it binds no element a person saw",
    ),
    (
        "browser_mouse_move_xy",
        "moves the mouse to coordinates: it binds no element a person saw",
    ),
    (
        "browser_mouse_drag_xy",
        "drags between coordinates: it binds no element a person saw",
    ),
    (
        "browser_mouse_down",
        "presses a mouse button wherever the mouse is: it binds no element a person saw",
    ),
    (
        "browser_mouse_up",
        "releases a mouse button wherever the mouse is: it binds no element a person saw",
    ),
    (
        "browser_mouse_wheel",
        "scrolls wherever the mouse is: it binds no element a person saw",
    ),
];

/// Default tools of the pinned release that this release leaves out, and
/// why: each needs more than one element, reads the person's files, or
/// changes the browser outside a page's elements.
pub const NOT_OFFERED: &[(&str, &str)] = &[
    (
        "browser_drag",
        "drags one element onto another: an approval binds one element, so it is not offered yet",
    ),
    (
        "browser_drop",
        "drops files or data onto an element: it is not offered",
    ),
    (
        "browser_file_upload",
        "uploads files from the machine the server runs on: a model never chooses local files",
    ),
    (
        "browser_handle_dialog",
        "answers a dialog: countersign never accepts a dialog silently, and a page's dialog is dismissed",
    ),
    (
        "browser_console_messages",
        "reads the page's console, which can hold what the page logged of the person's data: it is not offered",
    ),
    (
        "browser_network_requests",
        "reads the page's network traffic: it is not offered",
    ),
    (
        "browser_network_request",
        "reads one request of the page's network traffic: it is not offered",
    ),
    (
        "browser_emulate_media",
        "changes how every page renders, outside any element: it is not offered",
    ),
];

/// Why `tool` is not offered, when it is one of Playwright MCP's tools
/// that this mode refuses; `None` for an offered tool or an unknown name.
pub fn refusal_of(tool: &str) -> Option<&'static str> {
    NEVER_OFFERED
        .iter()
        .chain(NOT_OFFERED)
        .find(|(name, _)| *name == tool)
        .map(|(_, why)| *why)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_pinned_file_names_its_release_and_the_offered_tools_in_order() {
        let pinned: Value = serde_json::from_str(PINNED).unwrap();
        assert_eq!(pinned["package"], "@playwright/mcp");
        assert_eq!(pinned["version"], PLAYWRIGHT_MCP_VERSION);
        let names: Vec<&str> = offered_tools()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "browser_navigate",
                "browser_navigate_back",
                "browser_snapshot",
                "browser_click",
                "browser_hover",
                "browser_type",
                "browser_press_key",
                "browser_select_option",
                "browser_fill_form",
                "browser_wait_for",
                "browser_take_screenshot",
                "browser_find",
                "browser_tabs",
                "browser_resize",
                "browser_close",
            ]
        );
        for tool in offered_tools() {
            let keys: BTreeSet<&str> = tool
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(
                keys,
                BTreeSet::from(["annotations", "description", "inputSchema", "name"]),
                "{tool}"
            );
        }
    }

    #[test]
    fn no_tool_is_both_offered_and_refused_and_every_refusal_says_why() {
        let offered: BTreeSet<&str> = offered_tools()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap())
            .collect();
        let mut refused = BTreeSet::new();
        for (name, why) in NEVER_OFFERED.iter().chain(NOT_OFFERED) {
            assert!(refused.insert(*name), "{name} is refused twice");
            assert!(!offered.contains(name), "{name} is offered and refused");
            // Error messages: lower case, no final period.
            assert!(why.chars().next().is_some_and(char::is_lowercase), "{why}");
            assert!(!why.ends_with('.'), "{why}");
        }
        assert_eq!(refusal_of("browser_no_such_tool"), None);
    }
}
