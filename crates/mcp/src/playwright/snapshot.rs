//! A page as Playwright MCP shows it: its accessibility snapshot in
//! Playwright's grammar (`- role "name" [attribute]… [ref=f3e12]`, a text
//! box's value after `: `, `- text:` lines), and the refs in the shape of
//! the pinned release, `f{page}e{element}`.
//!
//! The refs are countersign's own ([`ElementRef`], `p3e12`) with another
//! letter: the page number is process-wide and never reused, so a ref of
//! an earlier document names nothing on the current one, and is refused
//! in Playwright's words instead of naming another element.

use countersign_approval_core::{ElementRef, ObservedNode, SnapshotLimits};

/// The longest name Playwright writes into a line; a longer one is left
/// out of the line, as Playwright leaves it out.
const MAX_NAME_CHARS: usize = 900;

/// `element_ref` as the pinned release writes a ref: `f3e12`.
pub fn playwright_ref(element_ref: ElementRef) -> String {
    format!("f{}e{}", element_ref.page().number(), element_ref.element())
}

/// What a tool's `target` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A ref of a snapshot this server gave.
    Ref(ElementRef),
    /// A selector, which the policy and the backend judge as any other.
    Selector(String),
}

impl Target {
    /// The selector of the action a proposal names.
    pub fn to_selector(&self) -> String {
        match self {
            Target::Ref(element_ref) => element_ref.to_selector(),
            Target::Selector(selector) => selector.clone(),
        }
    }
}

/// Playwright's words for a ref that names nothing on the current page.
pub fn stale_ref_message(target: &str) -> String {
    format!(
        "Error: Ref {target} not found in the current page snapshot. Try capturing new snapshot."
    )
}

/// What `target` names: a ref written `f{page}e{element}` (or a ref
/// without its page, `e7`, which no snapshot here gives and is refused as
/// stale), else a selector. As Playwright decides: only text of a ref's
/// shape is a ref.
pub fn target_of(target: &str) -> Result<Target, String> {
    let is_ref_shaped = |rest: &str| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit());
    if let Some(element) = target.strip_prefix('e')
        && is_ref_shaped(element)
    {
        return Err(stale_ref_message(target));
    }
    if let Some(rest) = target.strip_prefix('f')
        && let Some((page, element)) = rest.split_once('e')
        && is_ref_shaped(page)
        && is_ref_shaped(element)
    {
        return ElementRef::parse(&format!("p{rest}"))
            .map(Target::Ref)
            .map_err(|_| stale_ref_message(target));
    }
    if target.trim().is_empty() {
        return Err(format!("\"{target}\" is not a valid target."));
    }
    Ok(Target::Selector(target.to_owned()))
}

/// The snapshot of `nodes` in Playwright's grammar, within `limits` (the
/// same bounds as countersign's own snapshot; a cut snapshot ends with a
/// `- text:` line that says how many nodes were left out).
pub fn render(nodes: &[ObservedNode], limits: SnapshotLimits) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut bytes = 0usize;
    for (shown, node) in nodes.iter().enumerate() {
        let has_children = nodes
            .get(shown + 1)
            .is_some_and(|next| next.depth > node.depth);
        let line = line_of(node, has_children);
        if shown >= limits.max_nodes || bytes + line.len() + 1 + 128 > limits.max_bytes {
            lines.push(format!(
                "- text: \"[snapshot cut: {} more nodes not shown]\"",
                nodes.len() - shown
            ));
            break;
        }
        bytes += line.len() + 1;
        lines.push(line);
    }
    lines.join("\n")
}

/// One node's line, and its `/url:` line when it is a link.
fn line_of(node: &ObservedNode, has_children: bool) -> String {
    let indent = "  ".repeat(node.depth.min(64));
    if is_text(&node.role) {
        return format!("{indent}- text: {}", escape_value(&node.name));
    }
    let key = escape_key(&key_of(node));
    if let Some(url) = &node.url {
        let mut lines = format!("{indent}- {key}:\n{indent}  - /url: {}", escape_value(url));
        if let (Some(value), false) = (&node.value, has_children) {
            lines.push_str(&format!("\n{indent}  - text: {}", escape_value(value)));
        }
        return lines;
    }
    match (&node.value, has_children) {
        (Some(value), false) if !value.is_empty() => {
            format!("{indent}- {key}: {}", escape_value(value))
        }
        (_, true) => format!("{indent}- {key}:"),
        _ => format!("{indent}- {key}"),
    }
}

/// Whether a node is a run of text rather than an element.
fn is_text(role: &str) -> bool {
    matches!(role, "text" | "StaticText" | "InlineTextBox")
}

/// The key: the role, the name as a JSON string, then the attributes in
/// Playwright's order, then the ref.
fn key_of(node: &ObservedNode) -> String {
    let mut key = role_word(&node.role);
    if !node.name.is_empty() && node.name.chars().count() <= MAX_NAME_CHARS {
        key.push(' ');
        key.push_str(&serde_json::to_string(&node.name).unwrap_or_else(|_| "\"\"".to_owned()));
    }
    let has = |state: &str| node.states.iter().any(|s| s == state);
    let value_of = |name: &str| {
        node.states
            .iter()
            .find_map(|s| s.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')))
    };
    if value_of("checked") == Some("mixed") {
        key.push_str(" [checked=mixed]");
    } else if has("checked") {
        key.push_str(" [checked]");
    }
    if has("disabled") {
        key.push_str(" [disabled]");
    }
    if has("expanded") {
        key.push_str(" [expanded]");
    }
    if has("focused") {
        key.push_str(" [active]");
    }
    if has("invalid") {
        key.push_str(" [invalid]");
    }
    if let Some(level) = value_of("level").filter(|l| l.bytes().all(|b| b.is_ascii_digit())) {
        key.push_str(&format!(" [level={level}]"));
    }
    if value_of("pressed") == Some("mixed") {
        key.push_str(" [pressed=mixed]");
    } else if has("pressed") {
        key.push_str(" [pressed]");
    }
    if has("selected") {
        key.push_str(" [selected]");
    }
    if let Some(element_ref) = node.element_ref {
        key.push_str(&format!(" [ref={}]", playwright_ref(element_ref)));
    }
    key
}

/// A role as one word of ASCII letters (Playwright's grammar reads a role
/// as letters only); anything else becomes `generic`.
fn role_word(role: &str) -> String {
    if !role.is_empty() && role.bytes().all(|b| b.is_ascii_alphabetic()) {
        role.to_owned()
    } else {
        "generic".to_owned()
    }
}

/// Whether YAML would read `text` as something other than this plain
/// string (Playwright's own test, so the same text is quoted the same way).
fn needs_quotes(text: &str) -> bool {
    let first = text.chars().next();
    let last = text.chars().last();
    text.is_empty()
        || first.is_some_and(char::is_whitespace)
        || last.is_some_and(char::is_whitespace)
        || text.chars().any(|c| {
            let code = c as u32;
            (code <= 0x08)
                || code == 0x0b
                || code == 0x0c
                || (0x0e..=0x1f).contains(&code)
                || (0x7f..=0x9f).contains(&code)
        })
        || text.starts_with('-')
        || has_mapping_colon(text)
        || has_space_hash(text)
        || text.contains(['\n', '\r'])
        || first.is_some_and(|c| "&*],?!>|@\"'#%".contains(c))
        || text.contains(['{', '}', '`'])
        || text.starts_with('[')
        || text.parse::<f64>().is_ok()
        || [
            "y", "n", "yes", "no", "true", "false", "on", "off", "null", "~",
        ]
        .contains(&text.to_lowercase().as_str())
        || {
            let lower = text.to_lowercase();
            let unsigned = lower.trim_start_matches(['-', '+']);
            unsigned == ".inf" || unsigned == ".nan"
        }
}

/// Whether a `:` or a line break is followed by whitespace or the end.
fn has_mapping_colon(text: &str) -> bool {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if matches!(c, ':' | '\n') && chars.peek().is_none_or(|next| next.is_whitespace()) {
            return true;
        }
    }
    false
}

/// Whether `text` has a `#` right after whitespace (a YAML comment).
fn has_space_hash(text: &str) -> bool {
    let mut previous_space = false;
    for c in text.chars() {
        if c == '#' && previous_space {
            return true;
        }
        previous_space = c.is_whitespace();
    }
    false
}

/// A key, single-quoted when YAML needs it.
fn escape_key(text: &str) -> String {
    if needs_quotes(text) {
        format!("'{}'", text.replace('\'', "''"))
    } else {
        text.to_owned()
    }
}

/// A value, double-quoted with escapes when YAML needs it.
fn escape_value(text: &str) -> String {
    if !needs_quotes(text) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use countersign_approval_core::RefPage;
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_page_renders_in_playwrights_grammar_with_f_refs() {
        let page = RefPage::allocate();
        let n = page.number();
        let nodes = vec![
            ObservedNode::new(0, "main", ""),
            ObservedNode::new(1, "heading", "Cart").with_state("level=1"),
            ObservedNode::new(1, "textbox", "Name")
                .with_ref(page.element(1))
                .with_value("Ada")
                .with_state("focused"),
            ObservedNode::new(1, "checkbox", "Gift")
                .with_ref(page.element(2))
                .with_state("checked")
                .with_state("required"),
            ObservedNode::new(1, "button", "Pay: now")
                .with_ref(page.element(3))
                .with_state("disabled"),
            ObservedNode::new(1, "StaticText", "- 3 items"),
            ObservedNode::new(1, "link", "Help")
                .with_ref(page.element(4))
                .with_url("/help?a=1#top"),
        ];
        assert_eq!(
            render(&nodes, SnapshotLimits::default()),
            format!(
                "- main:\n  - heading \"Cart\" [level=1]\n  - textbox \"Name\" [active] [ref=f{n}e1]: Ada\n  - checkbox \"Gift\" [checked] [ref=f{n}e2]\n  - 'button \"Pay: now\" [disabled] [ref=f{n}e3]'\n  - text: \"- 3 items\"\n  - link \"Help\" [ref=f{n}e4]:\n    - /url: /help?a=1#top"
            )
        );
    }

    #[test]
    fn a_cut_snapshot_says_how_many_nodes_are_left_out() {
        let nodes: Vec<ObservedNode> = (0..10)
            .map(|i| ObservedNode::new(0, "button", format!("b{i}")))
            .collect();
        let limits = SnapshotLimits {
            max_nodes: 3,
            max_bytes: 1 << 20,
        };
        assert_eq!(
            render(&nodes, limits),
            "- button \"b0\"\n- button \"b1\"\n- button \"b2\"\n- text: \"[snapshot cut: 7 more nodes not shown]\""
        );
    }

    #[test]
    fn targets_are_refs_only_in_a_refs_shape() {
        let page = RefPage::allocate();
        let r = page.element(4);
        assert_eq!(target_of(&playwright_ref(r)), Ok(Target::Ref(r)));
        assert_eq!(
            target_of("e7"),
            Err(
                "Error: Ref e7 not found in the current page snapshot. Try capturing new snapshot."
                    .to_owned()
            )
        );
        assert_eq!(
            target_of("f01e2"),
            Err(
                "Error: Ref f01e2 not found in the current page snapshot. Try capturing new snapshot."
                    .to_owned()
            )
        );
        assert_eq!(
            target_of("button#pay"),
            Ok(Target::Selector("button#pay".to_owned()))
        );
        assert_eq!(target_of("free"), Ok(Target::Selector("free".to_owned())));
        assert_eq!(
            target_of(" "),
            Err("\" \" is not a valid target.".to_owned())
        );
        assert_eq!(Target::Ref(r).to_selector(), r.to_selector());
    }

    proptest! {
        #[test]
        fn every_ref_reads_back_as_itself(page in 1u64..1_000_000_000_000, element in 0u64..1_000_000_000) {
            let text = format!("f{page}e{element}");
            let parsed = target_of(&text).unwrap();
            let Target::Ref(r) = parsed else { panic!("{text} is not a ref") };
            prop_assert_eq!(playwright_ref(r), text);
        }

        #[test]
        fn a_quoted_value_is_one_line_that_reads_back_as_the_text(text in "\\PC{0,40}") {
            let escaped = escape_value(&text);
            prop_assert!(!escaped.contains('\n'));
            match escaped.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')) {
                Some(inner) => prop_assert_eq!(unescape(inner), text),
                None => prop_assert_eq!(escaped, text),
            }
        }
    }

    /// YAML's double-quoted escapes, the ones [`escape_value`] writes.
    fn unescape(inner: &str) -> String {
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next().unwrap() {
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'x' => {
                    let hex: String = chars.by_ref().take(2).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                }
                other => out.push(other),
            }
        }
        out
    }
}
