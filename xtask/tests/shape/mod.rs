//! The shape of a crate's modules, read from its sources: which file is
//! which module, which module each file imports, and the circles among
//! them. A plain reading of `use` trees and `crate::`/`super::`/`self::`
//! paths, inline paths into a module's own children (`child::Item`) and
//! glob imports, enough for this workspace's code (no macros that build
//! paths, no `#[path]` attributes), so the tidy checks need no parser
//! crate.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One crate root (`src/lib.rs`, `src/main.rs`, `src/bin/<name>/main.rs`)
/// and the module files below it.
pub struct ModuleTree {
    /// Module path (empty for the root) to its source, the test module cut off.
    pub modules: BTreeMap<Vec<String>, Source>,
}

/// One module file's code.
pub struct Source {
    pub file: PathBuf,
    /// The code without its `#[cfg(test)] mod …` blocks, comment lines
    /// dropped.
    pub code: String,
}

/// Where a path used in one module leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The module that defines (or finally re-exports) the item.
    pub module: Vec<String>,
    /// Whether the path went through a re-export of the crate root
    /// (`crate::Name` where the root's `pub use` names another module).
    pub through_root_reexport: bool,
}

/// `text` without its test modules (`#[cfg(test)]` followed by `mod`, to
/// the brace that closes it), its `macro_rules!` definitions and its
/// comment lines: what the shape checks and the line budget read. Code
/// after a test module is kept.
pub fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim();
        // A macro's body is code for the crate that expands it: its paths
        // (`$crate::…`, `super::*`) are no import of this module.
        if trimmed.starts_with("macro_rules!") {
            i = end_of_item(&lines, i) + 1;
            continue;
        }
        if trimmed == "#[cfg(test)]" {
            let next = (i + 1..lines.len())
                .find(|&n| {
                    let l = lines[n].trim();
                    !l.is_empty() && !l.starts_with("#[")
                })
                .filter(|&n| {
                    let l = lines[n].trim();
                    l.starts_with("mod ") || l.starts_with("pub(crate) mod ")
                });
            if let Some(start) = next {
                i = end_of_item(&lines, start) + 1;
                continue;
            }
        }
        if !trimmed.starts_with("//") {
            kept.push(lines[i]);
        }
        i += 1;
    }
    kept.join("\n")
}

/// The line where the item starting at `lines[start]` ends: its `;` when it
/// has no body, else the brace that closes its body. Braces in strings,
/// characters and comments do not count.
fn end_of_item(lines: &[&str], start: usize) -> usize {
    let mut depth = 0usize;
    let mut opened = false;
    let mut scan = Scan::Code;
    for (n, line) in lines.iter().enumerate().skip(start) {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match scan {
                Scan::Code => match c {
                    '/' if chars.get(i + 1) == Some(&'/') => break,
                    '"' => scan = Scan::Str,
                    'r' if (chars.get(i + 1) == Some(&'"') || chars.get(i + 1) == Some(&'#'))
                        && !chars[..i]
                            .last()
                            .is_some_and(|p| p.is_alphanumeric() || *p == '_') =>
                    {
                        let hashes = chars[i + 1..].iter().take_while(|h| **h == '#').count();
                        if chars.get(i + 1 + hashes) == Some(&'"') {
                            scan = Scan::Raw(hashes);
                            i += 1 + hashes;
                        }
                    }
                    '\'' => {
                        // A character literal ('{', '\''), not a lifetime.
                        if chars.get(i + 1) == Some(&'\\') {
                            i += 2;
                            while i < chars.len() && chars[i] != '\'' {
                                i += 1;
                            }
                        } else if chars.get(i + 2) == Some(&'\'') {
                            i += 2;
                        }
                    }
                    ';' if !opened => return n,
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => {
                        depth = depth.saturating_sub(1);
                        if opened && depth == 0 {
                            return n;
                        }
                    }
                    _ => {}
                },
                Scan::Str => match c {
                    '\\' => i += 1,
                    '"' => scan = Scan::Code,
                    _ => {}
                },
                Scan::Raw(hashes) => {
                    if c == '"'
                        && chars[i + 1..].iter().take_while(|h| **h == '#').count() >= hashes
                    {
                        i += hashes;
                        scan = Scan::Code;
                    }
                }
            }
            i += 1;
        }
    }
    lines.len().saturating_sub(1)
}

/// Where [`end_of_item`] is in a line.
#[derive(Clone, Copy)]
enum Scan {
    Code,
    Str,
    /// In a raw string closed by `"` and this many `#`.
    Raw(usize),
}

/// Lines of code in `text`: not blank, not a comment, before the test module.
pub fn code_lines(text: &str) -> usize {
    code_of(text)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

impl ModuleTree {
    /// Every crate root of the package in `package_dir` with its modules.
    pub fn of_package(package_dir: &Path) -> Vec<ModuleTree> {
        let src = package_dir.join("src");
        let mut trees = Vec::new();
        for root in ["lib.rs", "main.rs"] {
            if src.join(root).exists() {
                trees.push(ModuleTree::read(&src.join(root), &src, &[src.join("bin")]));
            }
        }
        if let Ok(bins) = fs::read_dir(src.join("bin")) {
            let mut bins: Vec<PathBuf> = bins.flatten().map(|e| e.path()).collect();
            bins.sort();
            for bin in bins {
                if bin.is_dir() && bin.join("main.rs").exists() {
                    trees.push(ModuleTree::read(&bin.join("main.rs"), &bin, &[]));
                } else if bin.extension().is_some_and(|e| e == "rs") {
                    let mut tree = ModuleTree::from_files(Vec::new());
                    tree.insert(Vec::new(), &bin);
                    trees.push(tree);
                }
            }
        }
        trees
    }

    fn read(root: &Path, dir: &Path, skip: &[PathBuf]) -> ModuleTree {
        let mut tree = ModuleTree::from_files(Vec::new());
        for file in rust_files(dir) {
            if skip.iter().any(|s| file.starts_with(s)) {
                continue;
            }
            let relative = file.strip_prefix(dir).unwrap_or(&file);
            let mut path: Vec<String> = relative
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            let last = path.pop().unwrap_or_default();
            if file == root {
                tree.insert(Vec::new(), &file);
                continue;
            }
            if last == "lib.rs" || last == "main.rs" {
                continue;
            }
            if last != "mod.rs" {
                path.push(last.trim_end_matches(".rs").to_owned());
            }
            tree.insert(path, &file);
        }
        tree
    }

    /// A tree from `(module path, code)` pairs: for checking the checks.
    pub fn from_files(files: Vec<(Vec<String>, String)>) -> ModuleTree {
        let mut modules = BTreeMap::new();
        for (path, text) in files {
            let file = PathBuf::from(format!("{}.rs", path.join("/")));
            modules.insert(
                path,
                Source {
                    file,
                    code: code_of(&text),
                },
            );
        }
        ModuleTree { modules }
    }

    fn insert(&mut self, path: Vec<String>, file: &Path) {
        let text = fs::read_to_string(file).unwrap_or_default();
        self.modules.insert(
            path,
            Source {
                file: file.to_path_buf(),
                code: code_of(&text),
            },
        );
    }

    /// The file of `module`, for messages.
    pub fn file(&self, module: &[String]) -> String {
        self.modules
            .get(module)
            .map(|s| s.file.display().to_string())
            .unwrap_or_else(|| module.join("::"))
    }

    /// Every path to another module of this crate that `module`'s code
    /// uses, resolved through re-exports to the module that holds the item.
    pub fn references(&self, module: &[String]) -> Vec<Reference> {
        let Some(source) = self.modules.get(module) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let mut paths = paths_in(&source.code);
        let without_uses = strip_uses(&source.code);
        paths.extend(
            self.children(module)
                .into_iter()
                .flat_map(|child| paths_from(&without_uses, &child))
                .map(|path| (path, false)),
        );
        for (path, is_pub_use) in paths {
            // The root's `pub use` lines are the crate's public surface, not
            // a dependency of the root on its modules.
            if module.is_empty() && is_pub_use {
                continue;
            }
            let glob = path.last().is_some_and(|s| s == "*");
            let path = if glob {
                path[..path.len() - 1].to_vec()
            } else {
                path
            };
            let Some(absolute) = self.absolute(module, &path) else {
                continue;
            };
            let Some(reference) = self.resolve(&absolute, 0) else {
                continue;
            };
            if glob {
                // Everything the module re-exports comes in with it.
                found.extend(self.reexported_by(&reference.module));
            }
            found.push(reference);
        }
        found
    }

    /// The names of `module`'s child modules.
    fn children(&self, module: &[String]) -> Vec<String> {
        self.modules
            .keys()
            .filter(|path| path.len() == module.len() + 1 && path.starts_with(module))
            .filter_map(|path| path.last().cloned())
            .collect()
    }

    /// Where each of `module`'s `pub use` items is held.
    fn reexported_by(&self, module: &[String]) -> Vec<Reference> {
        let Some(source) = self.modules.get(module) else {
            return Vec::new();
        };
        uses_in(&source.code)
            .into_iter()
            .filter(|(_, is_pub)| *is_pub)
            .filter_map(|(path, _)| self.absolute(module, &path))
            .filter_map(|absolute| self.resolve(&absolute, 0))
            .filter(|reference| reference.module != module)
            .collect()
    }

    /// `path` as used in `module`, from the crate root; `None` for a path
    /// into another crate.
    fn absolute(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => {
                let mut base = module.to_vec();
                base.pop()?;
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            child => {
                let mut candidate = module.to_vec();
                candidate.push(child.to_owned());
                if !self.modules.contains_key(&candidate) {
                    return None;
                }
                module.to_vec()
            }
        };
        if !matches!(first.as_str(), "crate" | "self") {
            base.push(first.clone());
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module that holds what `absolute` names: its longest prefix that
    /// is a module, followed through that module's `use` of the next name.
    fn resolve(&self, absolute: &[String], depth: usize) -> Option<Reference> {
        let cut = (0..=absolute.len())
            .rev()
            .find(|n| self.modules.contains_key(&absolute[..*n]))?;
        let module = absolute[..cut].to_vec();
        let Some(name) = absolute.get(cut) else {
            return Some(Reference {
                module,
                through_root_reexport: false,
            });
        };
        if depth < 8 {
            let code = &self.modules[&module].code;
            for (path, is_pub_use) in uses_in(code) {
                if path.last() != Some(name) || (module.is_empty() && !is_pub_use) {
                    continue;
                }
                let Some(target) = self.absolute(&module, &path) else {
                    // A re-export of another crate's item.
                    break;
                };
                let mut target = target;
                target.extend(absolute[cut + 1..].iter().cloned());
                if let Some(mut reference) = self.resolve(&target, depth + 1) {
                    reference.through_root_reexport |=
                        module.is_empty() && reference.module != module;
                    return Some(reference);
                }
            }
        }
        Some(Reference {
            module,
            through_root_reexport: false,
        })
    }

    /// The import graph between modules: who uses whom, self-references and
    /// references to the module's own descendants as written.
    pub fn graph(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut graph = BTreeMap::new();
        for module in self.modules.keys() {
            let targets: BTreeSet<Vec<String>> = self
                .references(module)
                .into_iter()
                .map(|r| r.module)
                .filter(|target| target != module)
                .collect();
            graph.insert(module.clone(), targets);
        }
        graph
    }

    /// Each circle of imports, as the files in it (one strongly connected
    /// component of two or more modules).
    pub fn circles(&self) -> Vec<Vec<String>> {
        let graph = self.graph();
        strongly_connected(&graph)
            .into_iter()
            .filter(|component| component.len() > 1)
            .map(|component| component.iter().map(|m| self.file(m)).collect())
            .collect()
    }

    /// `(file, the path)` for each path in a module other than the root that
    /// reaches a sibling module through a re-export of the crate root, or
    /// takes all of the root at once (`use crate::*`).
    pub fn imports_through_root(&self) -> Vec<(String, String)> {
        let mut found = Vec::new();
        for (module, source) in &self.modules {
            if module.is_empty() {
                continue;
            }
            for (path, _) in paths_in(&source.code) {
                if path.last().is_some_and(|s| s == "*") {
                    let target = self.absolute(module, &path[..path.len() - 1]);
                    if target.is_some_and(|t| t.is_empty()) {
                        found.push((self.file(module), path.join("::")));
                    }
                    continue;
                }
                let Some(absolute) = self.absolute(module, &path) else {
                    continue;
                };
                if self
                    .resolve(&absolute, 0)
                    .is_some_and(|r| r.through_root_reexport)
                {
                    found.push((self.file(module), path.join("::")));
                }
            }
        }
        found
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(dir) {
        let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                out.extend(rust_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// Every `use` path in `code`, expanded (`use a::{b, c::d}` gives `a::b`
/// and `a::c::d`; a trailing `self` is dropped), with whether it is a
/// `pub use`. A glob import ends in `*`.
pub fn uses_in(code: &str) -> Vec<(Vec<String>, bool)> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = next_use(rest) {
        let before = &rest[..at];
        let is_pub = before
            .rsplit(['\n', ';', '{', '}'])
            .next()
            .is_some_and(|prefix| prefix.trim_start().starts_with("pub"));
        let statement = &rest[at + 4..];
        let end = statement.find(';').unwrap_or(statement.len());
        // `b as c` is `b`: the tree without its renames and whitespace.
        let mut tokens = statement[..end].split_whitespace();
        let mut tree = String::new();
        while let Some(token) = tokens.next() {
            if token == "as" {
                let renamed = tokens.next().unwrap_or_default();
                tree.extend(
                    renamed
                        .chars()
                        .skip_while(|c| c.is_alphanumeric() || *c == '_'),
                );
            } else {
                tree.push_str(token);
            }
        }
        for path in expand(&tree) {
            found.push((path, is_pub));
        }
        rest = &statement[end..];
    }
    found
}

/// Where the next `use ` statement starts in `code` (at a word boundary,
/// at the start of a statement).
fn next_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = code[from..].find("use ") {
        let at = from + found;
        let previous = code[..at].chars().next_back();
        let statement_start = code[..at]
            .trim_end()
            .trim_end_matches("pub")
            .trim_end_matches(')')
            .trim_end_matches("crate")
            .trim_end_matches("super")
            .trim_end_matches('(')
            .trim_end_matches("pub")
            .trim_end()
            .chars()
            .next_back();
        if !previous.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && statement_start.is_none_or(|c| matches!(c, ';' | '{' | '}' | ']'))
        {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// `a::{b,c::{d,self}}` as `[a,b]`, `[a,c,d]`, `[a,c]`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let Some(open) = tree.find('{') else {
        let mut segments: Vec<String> = tree
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if segments.last().is_some_and(|s| s == "self") {
            segments.pop();
        }
        return vec![segments];
    };
    let prefix = &tree[..open];
    let inner = tree[open + 1..]
        .strip_suffix('}')
        .unwrap_or(&tree[open + 1..]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|part| expand(&format!("{prefix}{part}")))
        .collect()
}

/// Every path in `code` that starts with `crate`, `super` or `self`, or a
/// `use` path, with whether it comes from a `pub use`.
pub fn paths_in(code: &str) -> Vec<(Vec<String>, bool)> {
    let mut found = uses_in(code);
    let without_uses = strip_uses(code);
    for start in ["crate", "super", "self"] {
        found.extend(
            paths_from(&without_uses, start)
                .into_iter()
                .map(|p| (p, false)),
        );
    }
    found
}

/// Every path in `code` whose first segment is `first` (`first::…`), not
/// as the tail of a longer path, a longer name or a method call: with
/// `crate`, `super` or `self`, or with a child module's bare name, how a
/// module names its own child inline.
fn paths_from(code: &str, first: &str) -> Vec<Vec<String>> {
    let start = format!("{first}::");
    let mut found = Vec::new();
    for (at, _) in code.match_indices(&start) {
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '.'))
        {
            continue;
        }
        let path: Vec<String> = code[at..]
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .next()
            .unwrap_or_default()
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        found.push(path);
    }
    found
}

fn strip_uses(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = next_use(rest) {
        out.push_str(&rest[..at]);
        let statement = &rest[at..];
        let end = statement.find(';').map_or(statement.len(), |e| e + 1);
        rest = &statement[end..];
    }
    out.push_str(rest);
    out
}

/// Tarjan's strongly connected components of `graph`.
fn strongly_connected(
    graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        next: usize,
        components: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a Vec<String>) {
        state.index.insert(node, state.next);
        state.low.insert(node, state.next);
        state.next += 1;
        state.stack.push(node);
        state.on_stack.insert(node);
        if let Some(targets) = state.graph.get(node) {
            for target in targets {
                let Some((target, _)) = state.graph.get_key_value(target) else {
                    continue;
                };
                if !state.index.contains_key(target) {
                    visit(state, target);
                    let low = state.low[target].min(state.low[node]);
                    state.low.insert(node, low);
                } else if state.on_stack.contains(target) {
                    let low = state.index[target].min(state.low[node]);
                    state.low.insert(node, low);
                }
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.clone());
                if member == node {
                    break;
                }
            }
            component.sort();
            state.components.push(component);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        components: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.components
}
