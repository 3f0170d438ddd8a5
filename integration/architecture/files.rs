//! No circle between the files of the repository's crates: within `settings`, `config`,
//! `store/redis` … and between the test modules of `integration/` and `fuzz/`, file A may use
//! file B, or B use A, never both (directly or through other files). A circle means the
//! pieces cannot be read, tested or moved one at a time: the helper both sides need belongs in
//! a third file they both use (as `settings/env.rs`), or one side gets a trait the other
//! implements (as `config/trace.rs`'s `NodeNames`, `store/redis/conn.rs`'s `Dial`).
//!
//! Edges are the paths the code names, resolved to the file that defines the module they
//! reach: `crate::…`, `super::…`, `self::…`, and a child module named bare (`compat::resolve`
//! in `settings.rs`), with `use` groups (`use super::{a::X, b::{Y, Z}}`) expanded. A path
//! ends at the deepest module that is a file (`crate::settings::env::var` →
//! `src/settings/env.rs`); items re-exported through a parent are seen as the parent's.
//! A file naming one of its ancestors (`use super::*` in a child) is not an edge: the module
//! root is the module's face, which its children use and which declares them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{read_all, rel, root, rust_files};

/// The directories of the repository's crates with modules of their own: the library, the
/// integration tests and the fuzz targets (each `crate::` resolves within its own).
const CRATES: [&str; 3] = ["src", "integration", "fuzz"];

/// Every Rust file of those crates.
fn crate_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in CRATES {
        rust_files(&root().join(dir), &mut files);
    }
    files
}

/// The crate directory a file is in, and its module path there
/// (`src/settings/listen/mod.rs` → `settings::listen`); `None` for the crate roots and
/// files outside the crates.
fn module_path(file: &Path) -> Option<(&'static str, Vec<String>)> {
    let (dir, rel) = CRATES
        .iter()
        .find_map(|d| Some((*d, file.strip_prefix(root().join(d)).ok()?)))?;
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if stem != "mod" {
        parts.push(stem.to_owned());
    }
    let crate_root = parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main");
    (!parts.is_empty() && !crate_root).then_some((dir, parts))
}

/// Modules a file declares as files of their own (`mod x;`, not `mod x { … }`).
fn child_modules(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("pub ").or_else(|| {
                l.strip_prefix("pub(")
                    .and_then(|r| r.split_once(')'))
                    .map(|(_, r)| r.trim_start())
            });
            let name = rest.unwrap_or(l).strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Reads the paths of one file's code.
struct Paths<'a> {
    s: &'a [char],
    i: usize,
}

impl Paths<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_whitespace() {
            self.i += 1;
        }
    }

    fn ident(&mut self) -> Option<String> {
        let start = self.i;
        while self.i < self.s.len() && is_ident(self.s[self.i]) {
            self.i += 1;
        }
        (self.i > start).then(|| self.s[start..self.i].iter().collect())
    }

    fn colons(&mut self) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&':') && self.s.get(self.i + 1) == Some(&':') {
            self.i += 2;
            self.ws();
            true
        } else {
            false
        }
    }

    /// The rest of a path after its first segment and `::`: every full path it names
    /// (several for a `{…}` group).
    fn tail(&mut self) -> Vec<Vec<String>> {
        match self.s.get(self.i) {
            Some('{') => {
                self.i += 1;
                let mut out = Vec::new();
                loop {
                    self.ws();
                    match self.s.get(self.i) {
                        None => return out,
                        Some('}') => {
                            self.i += 1;
                            return out;
                        }
                        Some(',') => self.i += 1,
                        Some(_) => {
                            let Some(first) = self.ident() else {
                                self.i += 1; // `*`, or anything unexpected
                                continue;
                            };
                            if self.colons() {
                                for mut p in self.tail() {
                                    p.insert(0, first.clone());
                                    out.push(p);
                                }
                            } else {
                                out.push(vec![first]);
                            }
                        }
                    }
                }
            }
            Some('*') => {
                self.i += 1;
                vec![Vec::new()]
            }
            _ => match self.ident() {
                Some(seg) if self.colons() => {
                    let mut tails = self.tail();
                    for t in &mut tails {
                        t.insert(0, seg.clone());
                    }
                    tails
                }
                Some(seg) => vec![vec![seg]],
                None => vec![Vec::new()],
            },
        }
    }
}

/// Every path of `code` whose first segment is `crate`, `super`, `self` or one of `bare`
/// (child modules), with its line: `(line, segments)`.
fn paths_in(code: &str, bare: &BTreeSet<String>) -> Vec<(usize, Vec<String>)> {
    let s: Vec<char> = code.chars().collect();
    // Line of each position.
    let mut line_at = Vec::with_capacity(s.len());
    let mut line = 1;
    for &c in &s {
        line_at.push(line);
        if c == '\n' {
            line += 1;
        }
    }
    let mut p = Paths { s: &s, i: 0 };
    let mut out = Vec::new();
    while p.i < s.len() {
        let prev = p.i.checked_sub(1).map(|j| s[j]);
        let starts = is_ident(s[p.i]) && !prev.is_some_and(|c| is_ident(c) || "$:".contains(c));
        if !starts {
            p.i += 1;
            continue;
        }
        let at = line_at[p.i];
        let first = p.ident().unwrap_or_default();
        let rooted = ["crate", "super", "self"].contains(&first.as_str()) || bare.contains(&first);
        if rooted && p.colons() {
            for mut tail in p.tail() {
                tail.insert(0, first.clone());
                out.push((at, tail));
            }
        }
    }
    out
}

/// The code of a file: comment lines blanked (kept as lines, so line numbers hold).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// file → (file it uses → first line naming it), for the files given.
fn edges(files: &[(PathBuf, String)]) -> BTreeMap<PathBuf, BTreeMap<PathBuf, usize>> {
    let by_module: BTreeMap<(&str, Vec<String>), PathBuf> = files
        .iter()
        .filter_map(|(p, _)| Some((module_path(p)?, p.clone())))
        .collect();
    let mut graph = BTreeMap::new();
    for (file, text) in files {
        let Some((krate, here)) = module_path(file) else {
            continue;
        };
        let code = code_of(text);
        let bare = child_modules(&code);
        let mut out: BTreeMap<PathBuf, usize> = BTreeMap::new();
        for (line, segs) in paths_in(&code, &bare) {
            let mut module: Vec<String> = match segs[0].as_str() {
                "crate" => Vec::new(),
                "self" => here.clone(),
                "super" => here[..here.len() - 1].to_vec(),
                child => [here.clone(), vec![child.to_owned()]].concat(),
            };
            let mut rest = segs[1..].iter();
            if segs[0] == "super" {
                // `super::super::…`
                let mut peek = rest.clone();
                while peek.next().map(String::as_str) == Some("super") {
                    module.pop();
                    rest.next();
                }
            }
            for seg in rest {
                if seg == "self" {
                    continue;
                }
                module.push(seg.clone());
            }
            // The deepest module on the path that is a file.
            let target = (1..=module.len())
                .rev()
                .find_map(|n| by_module.get(&(krate, module[..n].to_vec())));
            let Some(target) = target else { continue };
            let target_module = module_path(target).unwrap_or_default().1;
            let ancestor = here.starts_with(&target_module);
            if target != file && !ancestor {
                out.entry(target.clone()).or_insert(line);
            }
        }
        graph.insert(file.clone(), out);
    }
    graph
}

/// The circles of `graph`: each strongly connected group of more than one file, described
/// by its edges (`<file>:<line> uses <file>`).
fn circles(graph: &BTreeMap<PathBuf, BTreeMap<PathBuf, usize>>) -> Vec<Vec<String>> {
    // Two files are in one circle when each reaches the other; the graphs are small.
    let reach = |from: &PathBuf| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(f) = todo.pop() {
            for next in graph.get(f).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next) {
                    todo.push(next);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&PathBuf, BTreeSet<&PathBuf>> =
        graph.keys().map(|f| (f, reach(f))).collect();
    let mut grouped = BTreeSet::new();
    let mut out = Vec::new();
    for (a, from_a) in &reached {
        if grouped.contains(a) || !from_a.contains(a) {
            continue;
        }
        let members: BTreeSet<&PathBuf> = from_a
            .iter()
            .filter(|b| reached.get(*b).is_some_and(|r| r.contains(a)))
            .copied()
            .collect();
        grouped.extend(members.iter().copied());
        let mut lines = Vec::new();
        for m in &members {
            for (b, line) in &graph[*m] {
                if members.contains(b) {
                    lines.push(format!("{}:{line} uses {}", rel(m), rel(b)));
                }
            }
        }
        out.push(lines);
    }
    out
}

#[test]
fn no_circle_between_files() {
    let files = read_all(&crate_files());
    let found = circles(&edges(&files));
    assert!(
        found.is_empty(),
        "files that use each other in a circle (move what both need to a file both use, or \
         let one side define a trait the other implements):\n{}",
        found
            .iter()
            .map(|c| format!("- {}", c.join("; ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

// The checker itself.

fn fake(files: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
    files
        .iter()
        .map(|(p, t)| (root().join(p), t.to_string()))
        .collect()
}

#[test]
fn the_checker_resolves_paths_to_files() {
    let files = fake(&[
        (
            "src/m.rs",
            "mod a;\nmod b;\npub use a::X;\nfn f() { b::g() }\n",
        ),
        (
            "src/m/a.rs",
            "use super::*;\nuse super::{b::{self, Y}, c::Z};\n",
        ),
        (
            "src/m/b.rs",
            "use crate::m::c::W;\nfn g() -> super::Item { todo!() }\n",
        ),
        ("src/m/c.rs", "// use super::a;\nuse self::inner::Q;\n"),
        ("src/m/c/inner.rs", "use super::super::a::X;\n"),
    ]);
    let g = edges(&files);
    let names = |f: &str| -> Vec<String> { g[&root().join(f)].keys().map(|p| rel(p)).collect() };
    assert_eq!(names("src/m.rs"), ["src/m/a.rs", "src/m/b.rs"]);
    assert_eq!(
        names("src/m/a.rs"),
        ["src/m/b.rs", "src/m/c.rs"],
        "ancestors are not edges"
    );
    assert_eq!(names("src/m/b.rs"), ["src/m/c.rs"]);
    assert_eq!(
        names("src/m/c.rs"),
        ["src/m/c/inner.rs"],
        "comments are not code"
    );
    assert_eq!(names("src/m/c/inner.rs"), ["src/m/a.rs"]);
    // a → c → inner → a
    let found = circles(&g);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .iter()
            .any(|e| e.starts_with("src/m/a.rs:2 uses src/m/c.rs")),
        "{found:?}"
    );
}

#[test]
fn the_checker_reads_multi_line_groups_and_their_lines() {
    let files = fake(&[
        ("src/m.rs", "mod a;\nmod b;\n"),
        (
            "src/m/a.rs",
            "use super::{\n    b::{\n        X,\n        Y,\n    },\n};\n",
        ),
        (
            "src/m/b.rs",
            "\n\nfn f() {\n    let _ = crate::m::a::g();\n}\n",
        ),
    ]);
    let g = edges(&files);
    assert_eq!(g[&root().join("src/m/a.rs")][&root().join("src/m/b.rs")], 1);
    assert_eq!(g[&root().join("src/m/b.rs")][&root().join("src/m/a.rs")], 4);
    assert_eq!(circles(&g).len(), 1);
}
