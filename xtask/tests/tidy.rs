//! Tidy checks: project conventions that would otherwise rot, run as ordinary tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod shape;

use std::fs;
use std::path::{Path, PathBuf};

use shape::{ModuleTree, code_lines};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.sort();
    dirs
}

const CRATES: &[&str] = &[
    "act-tool",
    "approval-core",
    "approval-web",
    "backend-chromium",
    "backend-fake",
    "canonical-policy",
    "countersign",
    "egress-guard",
    "mcp",
    "notify",
    "rules",
    "store-conformance",
    "store-memory",
    "store-postgres",
    "store-redis",
];

/// The directory of the unpublished package that holds the examples
/// needing a browser or a web server (`countersign-examples`).
const EXAMPLES: &str = "examples";

#[test]
fn the_workspace_holds_exactly_the_designed_crates() {
    let names: Vec<String> = crate_dirs()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut expected: Vec<&str> = CRATES.to_vec();
    expected.push(EXAMPLES);
    expected.sort_unstable();
    assert_eq!(names, expected);
}

/// `cargo run --example simulate` builds every dev-dependency of the facade:
/// the examples that need a browser or a web server live in their own
/// package, which is never published and never packaged.
#[test]
fn the_facade_examples_need_no_browser_or_web_server() {
    let facade = read("crates/countersign/Cargo.toml");
    let dev = facade
        .split("[dev-dependencies]")
        .nth(1)
        .unwrap_or("")
        .split("\n[")
        .next()
        .unwrap();
    let dev_dependencies: Vec<&str> = dev
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split(['.', ' ', '=']).next().unwrap())
        .collect();
    assert_eq!(dev_dependencies, ["tokio"]);
    let listed = |dir: &str| {
        let mut names: Vec<String> = fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(listed("crates/countersign/examples"), ["simulate.rs"]);
    assert_eq!(
        listed("crates/examples/examples"),
        ["approve.rs", "browse.rs", "live.rs"]
    );

    let examples = read("crates/examples/Cargo.toml");
    assert!(examples.contains("name = \"countersign-examples\""));
    assert!(examples.contains("\npublish = false\n"));
    let xtask = read("xtask/src/main.rs");
    let lines: Vec<&str> = xtask.lines().map(str::trim).collect();
    assert!(
        lines
            .windows(2)
            .any(|pair| pair == ["\"--exclude\",", "\"countersign-examples\","]),
        "cargo package must exclude countersign-examples"
    );
}

#[test]
fn the_readme_crate_table_lists_every_crate() {
    let readme = read("README.md");
    for dir in crate_dirs() {
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap();
        let row = format!(
            "| [`{name}`](crates/{}) |",
            dir.file_name().unwrap().to_string_lossy()
        );
        assert!(
            readme.contains(&row),
            "the README's crate table lacks `{row}`"
        );
    }
}

#[test]
fn every_crate_is_publishable_on_its_own() {
    for dir in crate_dirs() {
        if dir.ends_with(EXAMPLES) {
            continue;
        }
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = dir.display();
        for key in [
            "description",
            "license.workspace = true",
            "repository.workspace = true",
            "keywords.workspace = true",
            "rust-version.workspace = true",
            "readme",
        ] {
            assert!(manifest.contains(key), "{name}/Cargo.toml lacks `{key}`");
        }
        assert!(
            manifest.contains("[lints]\nworkspace = true"),
            "{name}/Cargo.toml does not use the workspace lints"
        );
        assert!(
            !manifest.contains("publish = false"),
            "{name} must be publishable"
        );
        assert!(dir.join("README.md").exists(), "{name} has no README.md");
        let lib = fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(
            lib.trim_start().starts_with("//!") && lib.contains("```"),
            "{name}: crate docs must open with an example"
        );
    }
}

#[test]
fn internal_dependencies_carry_a_version() {
    let manifest = read("Cargo.toml");
    let internal: Vec<&str> = manifest
        .lines()
        .filter(|l| l.starts_with("countersign"))
        .collect();
    assert_eq!(
        internal.len(),
        CRATES.len(),
        "one workspace dependency per crate"
    );
    for line in internal {
        assert!(
            line.contains("path = \"crates/") && line.contains("version = \""),
            "`{line}` needs both a path and a version"
        );
    }
}

#[test]
fn no_redis_type_escapes_the_redis_store() {
    for dir in crate_dirs() {
        if dir.ends_with("store-redis") {
            continue;
        }
        for entry in walk(&dir.join("src")) {
            let text = fs::read_to_string(&entry).unwrap();
            assert!(
                !names_redis_crate(&text),
                "{} names a redis type; only store-redis may",
                entry.display()
            );
        }
    }
}

/// Whether `text` names a path in the `redis` crate (`redis::…`), as opposed to
/// one ending in `redis` such as `countersign_store_redis::…`.
fn names_redis_crate(text: &str) -> bool {
    text.match_indices("redis::").any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn no_tokio_postgres_type_escapes_the_postgres_store() {
    for dir in crate_dirs() {
        if dir.ends_with("store-postgres") {
            continue;
        }
        for entry in walk(&dir.join("src")) {
            let text = fs::read_to_string(&entry).unwrap();
            assert!(
                !text.contains("tokio_postgres") && !text.contains("deadpool_postgres"),
                "{} names a tokio-postgres type; only store-postgres may",
                entry.display()
            );
        }
    }
}

#[test]
fn the_redis_check_tells_the_crate_from_its_wrapper() {
    assert!(names_redis_crate("fn f(e: redis::RedisError) {}"));
    assert!(names_redis_crate("redis::cmd(\"GET\")"));
    assert!(!names_redis_crate("pub use countersign_store_redis::*;"));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn the_docs_exist() {
    for doc in [
        "README.md",
        "docs/guide.md",
        "docs/security-model.md",
        "docs/architecture.md",
        "docs/writing-a-store.md",
        "docs/redis.md",
        "docs/postgres.md",
        "docs/benchmarks.md",
    ] {
        assert!(!read(doc).trim().is_empty(), "{doc} is empty");
    }
}

#[test]
fn the_readme_gives_the_two_commands_and_ci_runs_the_test_one() {
    let readme = read("README.md");
    assert!(readme.contains("cargo run --example simulate"));
    assert!(readme.contains("cargo xtask ci"));
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == "cargo xtask ci"),
        ".ci/run must run the README's test command"
    );
}

#[test]
fn the_benchmark_report_names_its_command() {
    let report = read("docs/benchmarks.md");
    assert!(report.contains("`cargo xtask bench`"));
}

#[test]
fn every_doc_with_rust_code_is_compiled_as_a_doc_test() {
    let sources: String = crate_dirs()
        .iter()
        .map(|dir| fs::read_to_string(dir.join("src/lib.rs")).unwrap())
        .collect();
    let mut docs: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root().join("README.md"));
    for doc in docs {
        let text = fs::read_to_string(&doc).unwrap();
        if !text.contains("```rust") {
            continue;
        }
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        let included = if name == "README.md" {
            sources.contains("include_str!(\"../../../README.md\")")
        } else {
            sources.contains(&format!("include_str!(\"../../../docs/{name}\")"))
        };
        assert!(
            included,
            "{name} has rust code that no crate compiles as a doc test"
        );
    }
}

/// The README's test command is the whole of CI: `.ci/run` installs nothing
/// itself, so `cargo xtask ci` must bring (or clearly require) every tool
/// on a fresh machine, and it checks for them before the first build.
#[test]
fn ci_is_the_readme_command_and_it_installs_what_it_needs() {
    let ci_run = read(".ci/run");
    let commands: Vec<&str> = ci_run
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(commands.last(), Some(&"cargo xtask ci"));
    for forbidden in ["apt-get", "cargo install", "redis"] {
        assert!(
            !commands.iter().any(|c| c.contains(forbidden)),
            ".ci/run must leave `{forbidden}` to `cargo xtask ci`"
        );
    }
    assert!(read("README.md").contains("```sh\ncargo xtask ci\n```"));

    let xtask = read("xtask/src/main.rs");
    let body = xtask
        .split("fn ci() -> Result<(), String> {")
        .nth(1)
        .unwrap();
    let first = body.lines().map(str::trim).find(|l| !l.is_empty()).unwrap();
    assert_eq!(
        first, "require_tools()?;",
        "tools are checked before any build"
    );
    for needed in [
        r#"cargo(&["install", "--locked", "cargo-deny"])"#,
        r#"programs: &["redis-server", "redis-cli"]"#,
        r#"packages: &["redis-server", "redis-tools"]"#,
        r#"programs: &["/usr/bin/chromium"]"#,
        r#"packages: &["chromium"]"#,
        r#"programs: &["initdb", "pg_ctl", "pgbench"]"#,
        r#"versioned_in: Some("/usr/lib/postgresql")"#,
        r#"packages: &["postgresql"]"#,
        r#"vec!["install", "-y", "-qq"]"#,
        "test_arbitrary_precision",
        r#""serde_json/arbitrary_precision""#,
    ] {
        assert!(xtask.contains(needed), "xtask ci lacks {needed}");
    }
}

/// Every package of the workspace: the crates, the benchmark harness and
/// xtask itself.
fn packages() -> Vec<PathBuf> {
    let mut packages = crate_dirs();
    packages.push(root().join("bench"));
    packages.push(root().join("xtask"));
    packages
}

/// The circles of imports among `trees`' modules, one line each.
fn circles_in(trees: &[ModuleTree]) -> Vec<String> {
    trees
        .iter()
        .flat_map(|tree| tree.circles())
        .map(|files| files.join(" <-> "))
        .collect()
}

#[test]
fn no_module_imports_a_module_that_imports_it() {
    let trees: Vec<ModuleTree> = packages()
        .iter()
        .flat_map(|package| ModuleTree::of_package(package))
        .collect();
    assert!(
        trees.len() >= CRATES.len(),
        "the crates' roots were not found"
    );
    let circles = circles_in(&trees);
    assert!(
        circles.is_empty(),
        "modules of one crate import each other (directly or around a circle): {circles:#?}"
    );
}

/// `(module path, code)` for a crate made up in a test.
fn made_up(files: &[(&str, &str)]) -> ModuleTree {
    ModuleTree::from_files(
        files
            .iter()
            .map(|(path, code)| {
                let path: Vec<String> = path
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                (path, (*code).to_owned())
            })
            .collect(),
    )
}

#[test]
fn the_circle_check_finds_circles_however_they_are_written() {
    let lib = "mod a;\nmod b;\nmod c;\npub use a::Alpha;\npub use b::{Beta, c::Gamma as G};\n";
    // A plain circle between siblings, one side an inline path.
    let plain = made_up(&[
        ("", lib),
        ("a", "use crate::b::Beta;\npub struct Alpha;"),
        ("b", "pub struct Beta;\nfn f() { super::a::Alpha; }"),
        ("c", ""),
    ]);
    assert_eq!(circles_in(&[plain]), ["a.rs <-> b.rs"]);
    // Hidden behind the root's re-export, in a use tree.
    let hidden = made_up(&[
        ("", lib),
        ("a", "use crate::{Beta, c};\npub struct Alpha;"),
        ("b", "pub(crate) use crate::Alpha;\npub struct Beta;"),
        ("c", ""),
    ]);
    assert_eq!(circles_in(&[hidden]), ["a.rs <-> b.rs"]);
    // Around three modules, one of them nested, and a child importing the
    // module that declares it.
    let around = made_up(&[
        ("", lib),
        ("a", "use crate::b::c::Gamma;\npub struct Alpha;"),
        ("b", "mod c;\nfn f() { crate::a::Alpha; }\npub struct Beta;"),
        ("b::c", "use super::Beta;\nuse super::super::c;"),
        ("c", ""),
    ]);
    assert_eq!(circles_in(&[around]), ["a.rs <-> b.rs <-> b/c.rs"]);
    // Test modules, comments, the root's public surface and one-way imports
    // are no circle.
    let fine = made_up(&[
        ("", lib),
        (
            "a",
            "use crate::b::Beta;\n// crate::a\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}",
        ),
        (
            "b",
            "/// [`crate::a::Alpha`]\npub struct Beta;\n#[cfg(test)]\nmod tests { use super::super::a::Alpha; }",
        ),
        ("c", ""),
    ]);
    assert!(circles_in(&[fine]).is_empty());
    // Through code after a test module, whose braces hide in strings,
    // characters and raw strings.
    let after_tests = made_up(&[
        ("", lib),
        (
            "a",
            "pub struct Alpha;\n#[cfg(test)]\nmod tests {\n    fn t() { let _ = (\"{\", '{', r#\"}\"#); }\n}\n\nfn after() { crate::b::Beta; }",
        ),
        ("b", "use crate::a::Alpha;\npub struct Beta;"),
        ("c", ""),
    ]);
    assert_eq!(circles_in(&[after_tests]), ["a.rs <-> b.rs"]);
    // A parent naming its child inline, the child going back by `super::`.
    let inline_child = made_up(&[
        ("", "mod run;\npub struct Root;\nfn f() { run::stop(); }\n"),
        ("run", "pub fn stop() { let _ = super::Root; }"),
    ]);
    assert_eq!(circles_in(&[inline_child]), [".rs <-> run.rs"]);
    // A glob of the crate root takes in every module the root re-exports.
    let glob = made_up(&[
        ("", lib),
        ("a", "use crate::*;\npub struct Alpha;"),
        ("b", "use crate::a::Alpha;\npub struct Beta;"),
        ("c", ""),
    ]);
    assert_eq!(circles_in(&[glob]), ["a.rs <-> b.rs"]);
    // A child of the same name as a local is no path into it unless it is
    // one: `x.run::<T>()` and `my_run::f()` name no module.
    let not_paths = made_up(&[
        ("", "mod run;\nfn f() { x.run::<u8>(); my_run::g(); }\n"),
        ("run", "pub fn stop() { let _ = super::f; }"),
    ]);
    assert!(circles_in(&[not_paths]).is_empty());
    // A macro's body is code for the crate that expands it.
    let in_a_macro = made_up(&[
        ("", lib),
        (
            "a",
            "macro_rules! m {\n    () => { use super::*; $crate::b::Beta; };\n}\npub struct Alpha;",
        ),
        ("b", "use crate::a::Alpha;\npub struct Beta;"),
        ("c", ""),
    ]);
    assert!(circles_in(&[in_a_macro]).is_empty());
}

/// In every package a module imports a sibling by its module path, never
/// through the crate root's re-export (nor all of the root at once with
/// `use crate::*`), which hides the dependency (and the circles it makes)
/// behind `lib.rs`.
#[test]
fn siblings_are_imported_by_module_path_not_through_lib_rs() {
    let mut found = Vec::new();
    for package in packages() {
        for tree in ModuleTree::of_package(&package) {
            for (file, path) in tree.imports_through_root() {
                found.push(format!("{file}: `{path}`"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "imports of a sibling through the crate root's re-export (name the module instead): {found:#?}"
    );
}

#[test]
fn the_root_reexport_check_tells_a_reexport_from_the_roots_own_items() {
    let tree = made_up(&[
        (
            "",
            "mod a;\nmod b;\npub use a::Alpha;\npub use other_crate::Outside;\npub const ROOT: u8 = 1;",
        ),
        ("a", "pub struct Alpha;"),
        (
            "b",
            "use crate::Alpha;\nuse crate::{ROOT, Outside};\nuse crate::a::Alpha as Direct;\nfn f() { crate::Alpha; }\nuse crate::*;\nuse crate::a::*;",
        ),
    ]);
    assert_eq!(
        tree.imports_through_root(),
        [
            ("b.rs".to_owned(), "crate::Alpha".to_owned()),
            ("b.rs".to_owned(), "crate::*".to_owned()),
            ("b.rs".to_owned(), "crate::Alpha".to_owned())
        ]
    );
}

/// Each file the architecture page's tables name, with the directory of the
/// package its row (or its `` `crate`: `` part) speaks of.
fn files_named_by(architecture: &str) -> Vec<(String, String)> {
    let mut named = Vec::new();
    for row in architecture.lines().filter(|l| l.starts_with('|')) {
        let mut package: Option<String> = None;
        for (i, token) in row.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            // A package is named by its directory (`store-redis`,
            // `crates/store-redis`); a package name such as
            // `countersign-mcp` inside a sentence does not change the part.
            let dir = token.strip_prefix("crates/").unwrap_or(token);
            let is_package =
                CRATES.contains(&dir) || dir == EXAMPLES || matches!(dir, "bench" | "xtask");
            if is_package {
                package = Some(dir.to_owned());
                continue;
            }
            let is_file = [".rs", ".js", ".css", ".html", "/"]
                .iter()
                .any(|end| token.ends_with(end))
                && !token.starts_with('/')
                && !token.contains(' ');
            if is_file {
                named.push((package.clone().unwrap_or_default(), token.to_owned()));
            }
        }
    }
    named
}

/// Whether `named` (a file, `dir/`, or `dir/*.ext`) exists in `package`.
fn exists_in(package: &Path, named: &str) -> bool {
    if let Some((dir, ext)) = named.split_once("/*.") {
        return fs::read_dir(package.join(dir)).is_ok_and(|mut files| {
            files.any(|f| f.unwrap().path().extension().is_some_and(|e| e == ext))
        });
    }
    let wanted = Path::new(named.trim_end_matches('/'));
    let is_dir = named.ends_with('/');
    fn any_below(dir: &Path, wanted: &Path, is_dir: bool) -> bool {
        let Ok(entries) = fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|entry| {
            let path = entry.path();
            if path
                .file_name()
                .is_some_and(|n| n == "target" || n == "node_modules")
            {
                return false;
            }
            (path.ends_with(wanted) && path.is_dir() == is_dir)
                || (path.is_dir() && any_below(&path, wanted, is_dir))
        })
    }
    any_below(package, wanted, is_dir)
}

#[test]
fn every_file_the_architecture_page_names_exists() {
    let named = files_named_by(&read("docs/architecture.md"));
    assert!(
        named.len() > 50,
        "the tables' files were not found: {named:?}"
    );
    let missing: Vec<String> = named
        .iter()
        .filter(|(package, file)| {
            let dir = match package.as_str() {
                "" => return true,
                "bench" | "xtask" => root().join(package),
                _ => root().join("crates").join(package),
            };
            !exists_in(&dir, file) && !root().join(file).exists()
        })
        .map(|(package, file)| format!("`{file}` (in `{package}`)"))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names files that do not exist (or no crate for them): {missing:#?}"
    );
}

#[test]
fn the_architecture_check_reads_crates_and_files_as_the_tables_write_them() {
    let page = "| rule | where |\n| --- | --- |\n| a rule | `act-tool`: `Act::run` (`act.rs`), `gone.rs`; `approval-web`: `templates/`, as `countersign-mcp` uses `view.rs` |\n| `crates/store-redis` | `x` | `keys.rs` |\n";
    let named = files_named_by(page);
    assert_eq!(
        named,
        [
            ("act-tool".to_owned(), "act.rs".to_owned()),
            ("act-tool".to_owned(), "gone.rs".to_owned()),
            ("approval-web".to_owned(), "templates/".to_owned()),
            ("approval-web".to_owned(), "view.rs".to_owned()),
            ("store-redis".to_owned(), "keys.rs".to_owned()),
        ]
    );
    let act_tool = root().join("crates/act-tool");
    assert!(exists_in(&act_tool, "act.rs"));
    assert!(!exists_in(&act_tool, "gone.rs"));
    assert!(exists_in(&root().join("crates/approval-web"), "templates/"));
    assert!(!exists_in(&root().join("crates/approval-web"), "view.rs/"));
    assert!(exists_in(
        &root().join("crates/backend-chromium"),
        "src/js/*.js"
    ));
}

/// What opens a connection or resolves a name, in Rust's and tokio's words.
const OPENS_A_CONNECTION: &[&str] = &[
    "TcpStream::connect",
    "TcpStream::connect_timeout",
    "TcpSocket::",
    "UdpSocket::",
    "UnixStream::connect",
    "lookup_host",
    "to_socket_addrs",
    ".connect(",
];

/// `(file, function, what)` for each place in `sources` that opens a
/// connection or resolves a name.
fn connections_opened(sources: &[(String, String)]) -> Vec<(String, String, &'static str)> {
    let mut found = Vec::new();
    for (file, text) in sources {
        let code = shape::code_of(text);
        let mut function = String::new();
        for line in code.lines() {
            if let Some(at) = line.find("fn ") {
                let name = line[at + 3..]
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default();
                if !name.is_empty() {
                    function = name.to_owned();
                }
            }
            for opens in OPENS_A_CONNECTION {
                if line.contains(opens) {
                    found.push((file.clone(), function.clone(), *opens));
                }
            }
        }
    }
    found
}

#[test]
fn only_the_checked_connect_opens_a_connection_in_the_egress_guard() {
    let sources: Vec<(String, String)> = walk(&root().join("crates/egress-guard/src"))
        .into_iter()
        .map(|path| {
            let text = fs::read_to_string(&path).unwrap();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                text,
            )
        })
        .collect();
    assert_eq!(
        connections_opened(&sources),
        [(
            "proxy.rs".to_owned(),
            "connect_checked".to_owned(),
            "TcpStream::connect"
        )],
        "the egress guard connects only to the addresses the policy just checked, in one place"
    );
}

#[test]
fn the_connection_check_finds_a_second_way_out() {
    let sources = vec![(
        "proxy.rs".to_owned(),
        "async fn connect_checked() {\n    TcpStream::connect(address).await\n}\nasync fn shortcut(host: &str) {\n    let addrs = tokio::net::lookup_host(host).await;\n    let s = std::net::TcpStream::connect_timeout(&a, t);\n}\n#[cfg(test)]\nmod tests {\n    fn f() { TcpStream::connect(x); }\n}\n"
            .to_owned(),
    )];
    let found: Vec<(String, &str)> = connections_opened(&sources)
        .into_iter()
        .map(|(_, function, what)| (function, what))
        .collect();
    assert_eq!(
        found,
        [
            ("connect_checked".to_owned(), "TcpStream::connect"),
            ("shortcut".to_owned(), "lookup_host"),
            ("shortcut".to_owned(), "TcpStream::connect"),
            ("shortcut".to_owned(), "TcpStream::connect_timeout"),
        ]
    );
}

/// About this many lines of code (not blank, not comments, tests excluded)
/// fit in one `src` file a newcomer can find their way in.
const CODE_LINE_BUDGET: usize = 800;

/// The `src` files allowed past [`CODE_LINE_BUDGET`], each with why.
const OVER_BUDGET: &[(&str, &str)] = &[
    (
        "crates/store-conformance/src/scenarios.rs",
        "the grant contract's scenarios in the contract's order, one function per rule; a store author reads them beside docs/writing-a-store.md as one list",
    ),
    (
        "crates/store-conformance/src/model.rs",
        "the reference model and the state machine that drives a store against it: a transition and the model's answer to it must be read together",
    ),
    (
        "crates/store-conformance/src/proposals.rs",
        "the proposal contract's scenarios and its model-based test, which share the reference of what a decision does",
    ),
];

#[test]
fn every_src_file_keeps_within_the_line_budget_or_says_why() {
    let mut over = Vec::new();
    let mut allowed_and_over = Vec::new();
    for package in packages() {
        for path in walk(&package.join("src")) {
            let lines = code_lines(&fs::read_to_string(&path).unwrap());
            let relative = path
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let allowed = OVER_BUDGET.iter().any(|(file, _)| *file == relative);
            if lines > CODE_LINE_BUDGET && !allowed {
                over.push(format!("{relative}: {lines} lines"));
            }
            if lines > CODE_LINE_BUDGET && allowed {
                allowed_and_over.push(relative);
            }
        }
    }
    assert!(
        over.is_empty(),
        "past {CODE_LINE_BUDGET} lines of code, with no line in OVER_BUDGET saying why: {over:#?}"
    );
    for (file, why) in OVER_BUDGET {
        assert!(!why.trim().is_empty(), "{file} needs a reason");
        assert!(
            allowed_and_over.iter().any(|f| f == file),
            "{file} is no longer past the budget (or gone): remove its OVER_BUDGET line"
        );
    }
}

#[test]
fn the_line_budget_counts_code_only() {
    let text = "//! Docs.\n\nuse a::b;\n// why\nfn f() {\n    g();\n}\n\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
    assert_eq!(code_lines(text), 4);
    let over = "fn f() {}\n".repeat(CODE_LINE_BUDGET + 1);
    assert!(code_lines(&over) > CODE_LINE_BUDGET);
}
