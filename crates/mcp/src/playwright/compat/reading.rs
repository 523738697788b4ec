//! The calls of the compatible mode that read or move without acting on
//! an element: `browser_navigate_back`, `browser_wait_for`, `browser_find`,
//! `browser_tabs`, and the key press's target (the focused element).

use std::time::Duration;

use countersign_act_tool::Toolset;
use serde_json::{Map, Value, json};

use super::{Answer, Compat, Planned, error, invalid, shown};
use crate::identity::Identity;
use crate::playwright::sections::Sections;
use crate::playwright::snapshot::{Target, render};

/// The longest `browser_wait_for` waits, as Playwright bounds it.
const MAX_WAIT_SECS: f64 = 30.0;

/// How long a wait for text lasts without `time`: Playwright's default
/// action timeout.
const DEFAULT_TEXT_WAIT: Duration = Duration::from_secs(5);

/// How often a wait for text looks at the page again.
const TEXT_POLL: Duration = Duration::from_millis(250);

/// How many lines around a match `browser_find` shows, as Playwright does.
const FIND_CONTEXT_LINES: usize = 2;

/// Refuses any argument of `args` not in `allowed`.
fn only(tool: &str, args: &Map<String, Value>, allowed: &[&str]) -> Result<(), Answer> {
    match args.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(unknown) => Err(invalid(tool, format!("no argument `{unknown}`"))),
        None => Ok(()),
    }
}

impl Compat {
    /// Goes to the page shown before the current one, loaded again through
    /// the policy like any navigation (a page never shown to the model is
    /// not in the tab's history).
    pub(super) async fn navigate_back(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        args: &Map<String, Value>,
    ) -> Answer {
        if let Err(answer) = only("browser_navigate_back", args, &[]) {
            return answer;
        }
        let previous = self
            .with_tab(identity, |tab| {
                if tab.history.len() < 2 {
                    return None;
                }
                tab.history.pop();
                tab.history.last().cloned()
            })
            .flatten();
        let Some(url) = previous else {
            return self
                .page_answer(
                    toolset,
                    identity,
                    Sections::new().result("- There is no earlier page in this tab"),
                    json!({"status": "ok"}),
                )
                .await;
        };
        self.go_to(toolset, identity, &url).await
    }

    /// Waits for a time, or for a text to appear or disappear on the page
    /// (matched as Playwright's `getByText` does: case-insensitive, in any
    /// element's name or value), looking again every 250 ms.
    pub(super) async fn wait_for(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        args: &Map<String, Value>,
    ) -> Answer {
        const TOOL: &str = "browser_wait_for";
        if let Err(answer) = only(TOOL, args, &["time", "text", "textGone"]) {
            return answer;
        }
        let time = match args.get("time") {
            None => None,
            Some(Value::Number(n)) => match n.as_f64() {
                Some(t) if t.is_finite() && t >= 0.0 => Some(t),
                _ => return invalid(TOOL, "`time` must be a number of seconds"),
            },
            Some(_) => return invalid(TOOL, "`time` must be a number"),
        };
        let text_of = |key: &str| match args.get(key) {
            None => Ok(None),
            Some(Value::String(text)) if !text.is_empty() => Ok(Some(text.clone())),
            Some(_) => Err(invalid(TOOL, format!("`{key}` must be a non-empty string"))),
        };
        let (appear, gone) = match (text_of("text"), text_of("textGone")) {
            (Ok(appear), Ok(gone)) => (appear, gone),
            (Err(answer), _) | (_, Err(answer)) => return answer,
        };
        let capped = time.map(|t| t.min(MAX_WAIT_SECS));
        if appear.is_none() && gone.is_none() {
            let Some(seconds) = capped.filter(|t| *t > 0.0) else {
                return error(
                    "Error: Either time, text or textGone must be provided",
                    json!({"status": "error", "error": {"code": "INVALID_ARGUMENTS"}}),
                );
            };
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            let line = match time {
                Some(requested) if requested > MAX_WAIT_SECS => format!(
                    "Waited for {seconds} seconds (requested {requested}, maximum is {MAX_WAIT_SECS})"
                ),
                _ => format!("Waited for {seconds} seconds"),
            };
            return self
                .page_answer(
                    toolset,
                    identity,
                    Sections::new().result(line),
                    json!({"status": "ok"}),
                )
                .await;
        }
        let limit = capped.map_or(DEFAULT_TEXT_WAIT, Duration::from_secs_f64);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let observed = match self.look(toolset, identity).await {
                Ok(observed) => observed,
                Err(message) => return error(message, json!({"status": "error"})),
            };
            let shows = |text: &str| {
                let needle = text.to_lowercase();
                observed.nodes.iter().any(|node| {
                    node.name.to_lowercase().contains(&needle)
                        || node
                            .value
                            .as_ref()
                            .is_some_and(|value| value.to_lowercase().contains(&needle))
                })
            };
            let done = appear
                .as_deref()
                .filter(|text| shows(text))
                .or(gone.as_deref().filter(|text| !shows(text)));
            if let Some(text) = done {
                let waited = Sections::new().result(format!("Waited for {text}"));
                return shown(toolset, &observed, waited, json!({"status": "ok"}));
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                let waited = appear.as_deref().or(gone.as_deref()).unwrap_or_default();
                return error(
                    format!(
                        "Error: Timeout {}ms exceeded waiting for \"{waited}\"",
                        limit.as_millis()
                    ),
                    json!({"status": "error", "error": {"code": "TIMEOUT"}}),
                );
            }
            tokio::time::sleep(TEXT_POLL.min(deadline - now)).await;
        }
    }

    /// The lines of the page's snapshot that match a text (case-insensitive)
    /// or a regular expression, each with its ancestors and two lines
    /// around it, as Playwright shows them.
    pub(super) async fn find(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        args: &Map<String, Value>,
    ) -> Answer {
        const TOOL: &str = "browser_find";
        if let Err(answer) = only(TOOL, args, &["text", "regex", "maxResults"]) {
            return answer;
        }
        let text = args.get("text").and_then(Value::as_str);
        let pattern = args.get("regex").and_then(Value::as_str);
        let max_results = match args.get("maxResults") {
            None => None,
            Some(value) => match value.as_f64() {
                Some(n) if n >= 1.0 && n.fract() == 0.0 => Some(n as usize),
                _ => return invalid(TOOL, "`maxResults` must be a positive whole number"),
            },
        };
        let (query, matcher): (String, Box<LineMatcher>) = match (text, pattern) {
            (Some(text), None) => {
                let needle = text.to_lowercase();
                (
                    format!("\"{text}\""),
                    Box::new(move |line: &str| line.to_lowercase().contains(&needle)),
                )
            }
            (None, Some(pattern)) => match regex_of(pattern) {
                Ok(re) => (
                    pattern.to_owned(),
                    Box::new(move |line: &str| re.is_match(line)),
                ),
                Err(message) => return invalid(TOOL, message),
            },
            _ => return invalid(TOOL, "provide either `text` or `regex`, not both"),
        };
        let observed = match self.look(toolset, identity).await {
            Ok(observed) => observed,
            Err(message) => return error(message, json!({"status": "error"})),
        };
        let snapshot = render(&observed.nodes, toolset.context().snapshot_limits());
        let found = find_in(&snapshot, &query, matcher.as_ref(), max_results);
        Sections::new()
            .result(crate::playwright::sections::UNTRUSTED_LINE)
            .result(found)
            .into_result(json!({"status": "ok", "url": observed.url.as_str()}))
    }

    /// The one tab of this identity; opening, closing or selecting another
    /// is refused.
    pub(super) async fn tabs(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        args: &Map<String, Value>,
    ) -> Answer {
        const TOOL: &str = "browser_tabs";
        if let Err(answer) = only(TOOL, args, &["action", "index", "url", "isolatedContext"]) {
            return answer;
        }
        match args.get("action").and_then(Value::as_str) {
            Some("list") => {}
            Some("new" | "close" | "select") => {
                return error(
                    "Error: countersign gives each agent one tab: it cannot open, close or select another",
                    json!({"status": "error", "error": {"code": "NOT_OFFERED"}}),
                );
            }
            _ => return invalid(TOOL, "`action` must be one of list, new, close, select"),
        }
        match self.look(toolset, identity).await {
            Ok(observed) => Sections::new()
                .result(crate::playwright::sections::UNTRUSTED_LINE)
                .result(format!(
                    "- 0: (current) [{}]({})",
                    observed.title,
                    observed.url.as_str()
                ))
                .into_result(json!({"status": "ok", "url": observed.url.as_str()})),
            Err(message) => error(message, json!({"status": "error"})),
        }
    }

    /// `browser_press_key` as an action on the element that has the focus
    /// now, which the person sees; refused when no element has it.
    pub(super) async fn plan_key_press(
        &self,
        toolset: &Toolset,
        identity: &Identity,
        args: &Map<String, Value>,
    ) -> Result<Planned, Answer> {
        const TOOL: &str = "browser_press_key";
        only(TOOL, args, &["key"])?;
        let Some(key) = args
            .get("key")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
        else {
            return Err(invalid(TOOL, "`key` is required, a string"));
        };
        let observed = self
            .look(toolset, identity)
            .await
            .map_err(|message| error(message, json!({"status": "error"})))?;
        let focused = observed.nodes.iter().find_map(|node| {
            node.states
                .iter()
                .any(|state| state == "focused")
                .then_some(node.element_ref)
                .flatten()
        });
        let Some(element_ref) = focused else {
            return Err(error(
                "Nothing was performed: no element has the focus; click or type into one first",
                json!({"status": "error", "error": {"code": "NO_FOCUS"}}),
            ));
        };
        let mut arguments = Map::new();
        arguments.insert("key".to_owned(), Value::String(key.to_owned()));
        Ok(Planned {
            method: "press",
            target: Target::Ref(element_ref),
            arguments,
            element: Some(format!("the focused element (press {key})")),
        })
    }
}

/// A `regex` argument: `/pattern/flags` (only `i` is known) or a bare
/// pattern, compiled with a size bound.
fn regex_of(pattern: &str) -> Result<regex::Regex, String> {
    let (body, insensitive) = match pattern
        .strip_prefix('/')
        .and_then(|rest| rest.rsplit_once('/'))
    {
        Some((body, "i")) => (body, true),
        Some((body, "")) => (body, false),
        Some((_, flags)) => {
            return Err(format!(
                "the regex flags `{flags}` are not supported; use `i`"
            ));
        }
        None => (pattern, false),
    };
    regex::RegexBuilder::new(body)
        .case_insensitive(insensitive)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("`regex` does not compile: {e}"))
}

/// Whether a snapshot line matches what `browser_find` looks for.
type LineMatcher = dyn Fn(&str) -> bool + Send;

/// Playwright's rendering of the matches of `matcher` in `snapshot`.
fn find_in(
    snapshot: &str,
    query: &str,
    matcher: &LineMatcher,
    max_results: Option<usize>,
) -> String {
    let lines: Vec<&str> = snapshot.lines().collect();
    let indents: Vec<usize> = lines
        .iter()
        .map(|line| line.len() - line.trim_start().len())
        .collect();
    let matched: Vec<usize> = (0..lines.len()).filter(|&i| matcher(lines[i])).collect();
    if matched.is_empty() {
        return format!("No matches found for {query}.");
    }
    let total = matched.len();
    let shown: Vec<usize> = match max_results {
        Some(max) if max < total => matched[..max].to_vec(),
        _ => matched.clone(),
    };
    let ancestors = |at: usize| -> Vec<usize> {
        let mut out = Vec::new();
        let mut indent = indents[at];
        for i in (0..at).rev() {
            if indents[i] < indent {
                out.push(i);
                indent = indents[i];
            }
        }
        out.reverse();
        out
    };
    let mut windows: Vec<(usize, usize)> = Vec::new();
    for &line in &shown {
        let start = line.saturating_sub(FIND_CONTEXT_LINES);
        let end = (line + FIND_CONTEXT_LINES).min(lines.len() - 1);
        match windows.last_mut() {
            Some(last) if start <= last.1 + 1 => last.1 = last.1.max(end),
            _ => windows.push((start, end)),
        }
    }
    let mut on_path = std::collections::BTreeSet::new();
    for &line in &shown {
        on_path.insert(line);
        on_path.extend(ancestors(line));
    }
    let snippets: Vec<String> = windows
        .iter()
        .map(|&(start, end)| {
            let mut indices = ancestors(start);
            indices.extend(start..=end);
            let mut out: Vec<String> = Vec::new();
            for (i, &index) in indices.iter().enumerate() {
                if i > 0
                    && index > indices[i - 1] + 1
                    && !on_path.contains(&index)
                    && !on_path.contains(&indices[i - 1])
                {
                    out.push(format!("{}...", " ".repeat(indents[index])));
                }
                out.push(lines[index].to_owned());
            }
            out.join("\n")
        })
        .collect();
    let word = if total == 1 { "match" } else { "matches" };
    let header = if shown.len() < total {
        format!(
            "Found {total} {word} for {query} (showing first {}):",
            shown.len()
        )
    } else {
        format!("Found {total} {word} for {query}:")
    };
    format!("{header}\n\n{}", snippets.join("\n\n----\n\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    const PAGE: &str = "- main:\n  - heading \"Shop\" [level=1]\n  - button \"Count\" [ref=f1e1]\n  - button \"Double\" [ref=f1e2]\n  - form:\n    - textbox \"Query\" [ref=f1e3]\n    - button \"Search\" [ref=f1e4]\n    - link \"Count again\" [ref=f1e5]";

    #[test]
    fn find_shows_each_match_with_its_ancestors_and_the_lines_around_it() {
        let needle = "count".to_owned();
        let matcher = move |line: &str| line.to_lowercase().contains(&needle);
        assert_eq!(
            find_in(PAGE, "\"count\"", &matcher, None),
            "Found 2 matches for \"count\":\n\n- main:\n  - heading \"Shop\" [level=1]\n  - button \"Count\" [ref=f1e1]\n  - button \"Double\" [ref=f1e2]\n  - form:\n    - textbox \"Query\" [ref=f1e3]\n    - button \"Search\" [ref=f1e4]\n    - link \"Count again\" [ref=f1e5]"
        );
        assert_eq!(
            find_in(PAGE, "\"count\"", &matcher, Some(1))
                .lines()
                .next()
                .unwrap(),
            "Found 2 matches for \"count\" (showing first 1):"
        );
        // Matches far apart are separate snippets, each under its ancestors.
        let long: String = (0..12)
            .map(|i| {
                format!(
                    "- item \"{}\"\n",
                    if i == 0 || i == 11 { "hit" } else { "x" }
                )
            })
            .collect();
        let hit = |line: &str| line.contains("hit");
        assert_eq!(
            find_in(&long, "\"hit\"", &hit, None),
            "Found 2 matches for \"hit\":\n\n- item \"hit\"\n- item \"x\"\n- item \"x\"\n\n----\n\n- item \"x\"\n- item \"x\"\n- item \"hit\""
        );
        let nothing = |_: &str| false;
        assert_eq!(
            find_in(PAGE, "\"x\"", &nothing, None),
            "No matches found for \"x\"."
        );
    }

    #[test]
    fn a_regex_takes_playwrights_slashes_and_the_i_flag_only() {
        assert!(regex_of("/count/i").unwrap().is_match("- button \"Count\""));
        assert!(!regex_of("/count/").unwrap().is_match("- button \"Count\""));
        assert!(regex_of("Co+unt").unwrap().is_match("Count"));
        assert_eq!(
            regex_of("/x/g").unwrap_err(),
            "the regex flags `g` are not supported; use `i`"
        );
        assert!(
            regex_of("(")
                .unwrap_err()
                .starts_with("`regex` does not compile")
        );
    }
}
