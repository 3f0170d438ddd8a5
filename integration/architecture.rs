//! ARCHITECTURE.md stays true: the dependency rules it writes down are the ones the code
//! follows.
//!
//! - Every top-level module of `src/` has a row in the "Layers" table, and every
//!   `crate::<module>` path in a module's code is an edge that row allows.
//! - The allowed edges form no cycle.
//! - Crates that carry a boundary (protocol types, Redis, HTTP, YAML …) are named only in
//!   the modules the "Confined crates" table lists.
//! - One concept per file, as far as a machine can tell: every file of `src/` opens with
//!   the comment that names what it holds (`//!`; `--` for Lua), and no two files of the
//!   repository's crates (tests included) use each other, directly or in a longer circle
//!   (`files`). Whether the comment is true of the whole file is the reviewer's check.
//! - Every place that must know the algorithms knows each of `limit::Algorithm`'s table
//!   (`algorithms`).
//! - Every Lua file is in the code map and loaded by a script: named in ARCHITECTURE.md and
//!   compiled in with `include_str!` by exactly one file of `src/`.
//! - `ServiceError::to_status` is the one mapping to gRPC: no other code builds a `Status`.
//!
//! Only code is read: comment lines (`//`, `//!`, `///`) are skipped, so prose may name any
//! module.

mod algorithms;
mod files;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None` for the crate roots).
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root().join("src")).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The file's code lines: comment lines dropped.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
}

/// Top-level modules a line names through `crate::`, including grouped imports
/// (`use crate::{a::X, b};`).
fn crate_refs(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || "_:$".contains(c)) {
            continue; // `$crate::`, `other_crate::` …
        }
        if let Some(group) = rest.strip_prefix('{') {
            // One level of grouping is all rustfmt produces for `crate::{…}`.
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != "self" {
                    out.push(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// Whether a line names `krate::` as a path root (not `x::krate::` nor `my_krate::`).
fn names_crate(line: &str, krate: &str) -> bool {
    let pat = format!("{krate}::");
    line.match_indices(&pat).any(|(i, _)| {
        let before = line[..i].chars().last();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

/// Rows of the markdown table that follows `heading`: first column → the backticked names
/// of the second (or `*` for "any").
fn table(doc: &str, heading: &str) -> BTreeMap<String, BTreeSet<String>> {
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no '{heading}' section"));
    let mut rows = BTreeMap::new();
    let mut in_table = false;
    for line in doc[start..].lines().skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 2 || cells[0].starts_with("---") || !cells[0].starts_with('`') {
            continue;
        }
        let key = cells[0].trim_matches('`').to_string();
        let values: BTreeSet<String> = if cells[1].contains("any module") {
            BTreeSet::from(["*".to_string()])
        } else {
            // Names are the backticked words outside parentheses (which hold reasons).
            let mut names = String::new();
            let mut depth = 0usize;
            for c in cells[1].chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth = depth.saturating_sub(1),
                    _ if depth == 0 => names.push(c),
                    _ => {}
                }
            }
            names
                .split('`')
                .skip(1)
                .step_by(2)
                .map(String::from)
                .collect()
        };
        assert!(
            rows.insert(key.clone(), values).is_none(),
            "ARCHITECTURE.md '{heading}': `{key}` has two rows"
        );
    }
    assert!(
        !rows.is_empty(),
        "ARCHITECTURE.md '{heading}': no table rows"
    );
    rows
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md")
}

fn src_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    files
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// Every module edge in the code that its row does not allow, as readable lines.
fn violations(
    allowed: &BTreeMap<String, BTreeSet<String>>,
    files: &[(PathBuf, String)],
) -> Vec<String> {
    let mut bad = Vec::new();
    for (path, text) in files {
        let Some(module) = module_of(path) else {
            continue;
        };
        let Some(may) = allowed.get(&module) else {
            bad.push(format!(
                "{}: module `{module}` has no row in ARCHITECTURE.md's Layers table",
                rel(path)
            ));
            continue;
        };
        for (n, line) in code_lines(text) {
            for dep in crate_refs(line) {
                if dep != module && !may.contains(&dep) && !may.contains("*") {
                    bad.push(format!(
                        "{}:{n}: `{module}` uses `crate::{dep}`, which ARCHITECTURE.md does not allow \
                         (`{module}` may use: {})",
                        rel(path),
                        if may.is_empty() {
                            "nothing".to_string()
                        } else {
                            may.iter().cloned().collect::<Vec<_>>().join(", ")
                        }
                    ));
                }
            }
        }
    }
    bad
}

fn read_all(files: &[PathBuf]) -> Vec<(PathBuf, String)> {
    files
        .iter()
        .map(|p| {
            let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.clone(), t)
        })
        .collect()
}

#[test]
fn every_module_dependency_is_one_architecture_md_allows() {
    let allowed = table(&architecture(), "## Layers");
    let files = read_all(&src_files());
    let bad = violations(&allowed, &files);
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
}

#[test]
fn every_row_of_the_layers_table_is_a_module_and_names_modules() {
    let allowed = table(&architecture(), "## Layers");
    let modules: BTreeSet<String> = src_files().iter().filter_map(|p| module_of(p)).collect();
    for (m, deps) in &allowed {
        assert!(
            modules.contains(m),
            "Layers table names `{m}`, not a module of src/"
        );
        for d in deps {
            assert!(
                d == "*" || modules.contains(d),
                "Layers table: `{m}` may use `{d}`, not a module of src/"
            );
        }
    }
}

#[test]
fn the_allowed_dependencies_form_no_cycle() {
    let allowed = table(&architecture(), "## Layers");
    // Depth-first search for a back edge; `*` (the wiring module) is a sink by definition.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(m) {
            return;
        }
        if let Some(i) = path.iter().position(|p| p == m) {
            panic!(
                "ARCHITECTURE.md allows a cycle: {} → {m}",
                path[i..].join(" → ")
            );
        }
        path.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            if d != "*" {
                visit(d, g, path, done);
            }
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in allowed.keys() {
        visit(m, &allowed, &mut Vec::new(), &mut done);
    }
    // Nothing but the wiring may use "any module", and nothing may use the wiring.
    for (m, deps) in &allowed {
        if deps.contains("*") {
            for (other, their) in &allowed {
                assert!(
                    !their.contains(m),
                    "`{other}` may use `{m}`, which may use any module: a cycle"
                );
            }
        }
    }
}

#[test]
fn boundary_crates_are_named_only_where_architecture_md_confines_them() {
    let confined = table(&architecture(), "## Confined crates");
    let files = read_all(&src_files());
    let mut bad = Vec::new();
    for (path, text) in &files {
        let Some(module) = module_of(path) else {
            continue;
        };
        for (n, line) in code_lines(text) {
            for (krate, only) in &confined {
                if names_crate(line, krate) && !only.contains(&module) {
                    bad.push(format!(
                        "{}:{n}: `{krate}` is confined to {} but `{module}` names it",
                        rel(path),
                        only.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "confinement violations:\n{}",
        bad.join("\n")
    );
}

/// A module's test table (`tests.rs`, or a file whose name ends in `_tests`) holds its
/// parent's concept: the parent's comment covers it.
fn is_test_table(p: &Path) -> bool {
    p.file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(|s| s == "tests" || s.ends_with("_tests"))
}

fn lua_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.expect("directory entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "lua") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("src"), &mut out);
    out.sort();
    out
}

#[test]
fn every_file_opens_with_what_it_holds() {
    let mut bad = Vec::new();
    for (path, text) in read_all(&src_files()) {
        if !is_test_table(&path) && !text.starts_with("//!") {
            bad.push(format!(
                "{}: no opening `//!` comment naming what the file holds",
                rel(&path)
            ));
        }
    }
    for (path, text) in read_all(&lua_files()) {
        if !text.starts_with("-- ") {
            bad.push(format!(
                "{}: no opening `--` comment naming what the file holds",
                rel(&path)
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_lua_file_is_in_the_map_and_loaded_by_one_script() {
    let doc = architecture();
    let rust = read_all(&src_files());
    let lua = lua_files();
    assert!(!lua.is_empty(), "no Lua file found under src/");
    let mut bad = Vec::new();
    for path in &lua {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("file name");
        if !doc.contains(&format!("`{name}`")) && !doc.contains(&format!("/{name}`")) {
            bad.push(format!("{}: not named in ARCHITECTURE.md", rel(path)));
        }
        let loaders: Vec<String> = rust
            .iter()
            .filter(|(_, text)| {
                code_lines(text)
                    .any(|(_, l)| l.contains("include_str!(") && l.contains(&format!("/{name}\")")))
            })
            .map(|(p, _)| rel(p))
            .collect();
        if loaders.len() != 1 {
            bad.push(format!(
                "{}: included by {} files of src/ ({loaders:?}), not one",
                rel(path),
                loaders.len()
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// tonic's `Status` constructors (every gRPC code's), by name.
const STATUS_CONSTRUCTORS: [&str; 17] = [
    "new",
    "ok",
    "cancelled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
];

/// Lines of code that build a gRPC status: `Status::<constructor>(` or
/// `Status::from_error(`.
fn builds_status(line: &str) -> bool {
    STATUS_CONSTRUCTORS
        .iter()
        .chain(&["from_error", "unauthenticated"])
        .any(|c| line.contains(&format!("Status::{c}(")))
}

#[test]
fn grpc_statuses_come_only_from_service_error_to_status() {
    let mapping = root().join("src/service/mod.rs");
    let mut bad = Vec::new();
    for (path, text) in read_all(&src_files()) {
        // Test tables build statuses to feed the code under test.
        if is_test_table(&path) || path.components().any(|c| c.as_os_str() == "tests") {
            continue;
        }
        for (n, line) in code_lines(&text) {
            if builds_status(line) && path != mapping {
                bad.push(format!("{}:{n}: {}", rel(&path), line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "gRPC statuses built outside ServiceError::to_status (add a ServiceError variant):\n{}",
        bad.join("\n")
    );
    // The mapping itself is found.
    let text = std::fs::read_to_string(&mapping).expect("src/service/mod.rs");
    assert!(text.contains("pub fn to_status(&self) -> tonic::Status"));
    assert!(code_lines(&text).any(|(_, l)| builds_status(l)));
}

/// A `Result<_, String>` is an argument's value parser (clap's, in `src/settings/`) or the
/// operator tools' descriptor syntax (`src/limit/descriptor.rs`); every other error is a type.
#[test]
fn errors_are_typed_outside_argument_parsers() {
    let string_error = regex::Regex::new(r"Result<[^;{]*, *String>").expect("pattern");
    let parsers =
        ["src/settings", "src/settings.rs", "src/limit/descriptor.rs"].map(|p| root().join(p));
    let mut bad = Vec::new();
    for (path, text) in read_all(&src_files()) {
        if parsers.iter().any(|p| path.starts_with(p)) {
            continue;
        }
        for (n, line) in code_lines(&text) {
            if string_error.is_match(line) {
                bad.push(format!("{}:{n}: {}", rel(&path), line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "Result<_, String> outside argument parsing (give the error a thiserror type):\n{}",
        bad.join("\n")
    );
}

// The checker itself: it must catch an edge added against the rules, in every form a
// `crate::` path takes.

#[test]
fn the_checker_catches_a_forbidden_edge() {
    let allowed = table(&architecture(), "## Layers");
    let store_file = root().join("src/store/mod.rs");
    for line in [
        "use crate::limiter::Decision;",
        "use crate::{limit::Check, limiter};",
        "fn f() -> crate::service::ServiceError { todo!() }",
    ] {
        let files = vec![(store_file.clone(), format!("//! doc\n{line}\n"))];
        let bad = violations(&allowed, &files);
        assert_eq!(bad.len(), 1, "{line}: {bad:?}");
        assert!(bad[0].contains("src/store/mod.rs:2"), "{}", bad[0]);
    }
    // Allowed edges, comments and other crates' paths are not violations.
    let files = vec![(
        store_file,
        "use crate::limit::Check;\n// crate::service in prose\nuse other_crate::service;\n"
            .to_string(),
    )];
    assert!(violations(&allowed, &files).is_empty());
}

#[test]
fn the_checker_reads_crate_paths_exactly() {
    assert_eq!(crate_refs("use crate::limit::{A, B};"), ["limit"]);
    assert_eq!(
        crate_refs("use crate::{config::X, store, self};"),
        ["config", "store"]
    );
    assert_eq!(crate_refs("$crate::x"), Vec::<String>::new());
    assert!(names_crate("use envoy_types::pb;", "envoy_types"));
    assert!(!names_crate("use my_envoy_types::pb;", "envoy_types"));
    assert!(!names_crate("crate::store::redis::X", "redis"));
}

#[test]
fn the_checker_finds_status_constructors_only() {
    assert!(builds_status("return Err(Status::invalid_argument(m));"));
    assert!(builds_status("tonic::Status::new(Code::Unavailable, m)"));
    assert!(!builds_status("headers.get(Status::GRPC_STATUS)"));
    // OpenTelemetry's span status is another type.
    assert!(!builds_status(
        "span.set_status(Status::error(e.to_string()))"
    ));
}
