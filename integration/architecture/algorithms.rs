//! Every place that must know the algorithms knows each one of `limit::Algorithm`'s table
//! (ARCHITECTURE.md, "Add an algorithm"): the Lua code table and its dispatch, the
//! documents, the rule-file schema, a Lua file, the SLOWLOG test. Rust's own matches are
//! exhaustive, so the compiler holds those; these are what it cannot see.

use std::collections::BTreeSet;

use sluice::limit::{Algorithm, Family};

use super::root;

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The Lua name of an algorithm's code: its rule-file name in upper case.
fn lua_name(a: Algorithm) -> String {
    a.name().to_ascii_uppercase()
}

fn names(family: Option<Family>) -> BTreeSet<String> {
    Algorithm::ALL
        .into_iter()
        .filter(|a| family.is_none_or(|f| a.family() == f))
        .map(lua_name)
        .collect()
}

#[test]
fn the_lua_code_table_is_the_rust_table() {
    let header = read("src/store/lua/header.lua");
    let codes: Vec<u8> = Algorithm::ALL.iter().map(|a| a.code()).collect();
    let dense: Vec<u8> = (1..=Algorithm::ALL.len() as u8).collect();
    assert_eq!(
        codes, dense,
        "codes are 1, 2, …: USES has one slot per code"
    );
    let line = format!(
        "local {} = {}",
        Algorithm::ALL.map(lua_name).join(", "),
        codes
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(
        header.lines().any(|l| l == line),
        "header.lua's code table must read:\n{line}"
    );
    let uses = format!("{{ {} }}", vec!["false"; codes.len()].join(", "));
    assert!(
        header
            .lines()
            .any(|l| l.starts_with("local GR, USES") && l.contains(&uses)),
        "header.lua's USES must hold one slot per code: {uses}"
    );
    // LEVEL splits the families: the buckets from it, the counting algorithms below.
    let first_level = Algorithm::ALL
        .into_iter()
        .find(|a| a.family() == Family::Level)
        .expect("a bucket algorithm");
    assert!(header.contains(&format!("local LEVEL = {}\n", lua_name(first_level))));
    for a in Algorithm::ALL {
        assert_eq!(
            a.code() >= first_level.code(),
            a.family() == Family::Level,
            "{a}: main.lua tells the families apart by `code >= LEVEL`; a code out of \
             order needs another test there"
        );
    }
}

/// One `if` … `end` of Lua code: the algorithms its conditions name (`code == NAME`, or a
/// whole family: `code < LEVEL`, `code >= LEVEL`) and whether it has a bare `else`.
#[derive(Default)]
struct Chain {
    line: usize,
    names: BTreeSet<String>,
    /// Some condition names one algorithm (`code == NAME`): then an `else` would be another's.
    by_name: bool,
    has_else: bool,
}

/// The names a condition `code <op> <word>` covers.
fn covered(op: &str, word: &str) -> BTreeSet<String> {
    match (op, word) {
        ("==", name) => BTreeSet::from([name.to_owned()]),
        ("<", "LEVEL") => names(Some(Family::Counts)),
        (">=", "LEVEL") => names(Some(Family::Level)),
        _ => BTreeSet::new(),
    }
}

/// Lua's words (identifiers with their dots, operators) with their lines; comments and
/// strings left out.
fn words(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("--").next().unwrap_or_default();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\'' || c == '"' {
                for d in chars.by_ref() {
                    if d == c {
                        break;
                    }
                }
            } else if c.is_alphanumeric() || c == '_' {
                let mut w = c.to_string();
                while let Some(&d) = chars
                    .peek()
                    .filter(|d| d.is_alphanumeric() || "_.".contains(**d))
                {
                    w.push(d);
                    chars.next();
                }
                out.push((n + 1, w));
            } else if "=~<>".contains(c) && chars.peek() == Some(&'=') {
                chars.next();
                out.push((n + 1, format!("{c}=")));
            } else if !c.is_whitespace() {
                out.push((n + 1, c.to_string()));
            }
        }
    }
    out
}

/// Every `if` chain of `code`, nested ones included.
fn chains(code: &str) -> Vec<Chain> {
    let words = words(code);
    // The open blocks: an `if` (its chain's index) or another block (`function`, `do`).
    let mut open: Vec<Option<usize>> = Vec::new();
    let mut out: Vec<Chain> = Vec::new();
    for (i, (line, w)) in words.iter().enumerate() {
        match w.as_str() {
            "if" => {
                open.push(Some(out.len()));
                out.push(Chain {
                    line: *line,
                    ..Chain::default()
                });
            }
            "function" | "do" | "repeat" => open.push(None),
            "end" | "until" => {
                open.pop();
            }
            "else" => {
                if let Some(Some(c)) = open.last() {
                    out[*c].has_else = true;
                }
            }
            "==" | "<" | ">=" if matches!(words[i - 1].1.as_str(), "code" | "l.code") => {
                if let (Some(Some(c)), Some((_, word))) = (open.last(), words.get(i + 1)) {
                    out[*c].names.extend(covered(w, word));
                    out[*c].by_name |= w == "==";
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn main_lua_dispatches_every_algorithm_by_name() {
    let main = read("src/store/lua/main.lua");
    let (all, counts, level) = (
        names(None),
        names(Some(Family::Counts)),
        names(Some(Family::Level)),
    );
    let dispatching: Vec<Chain> = chains(&main)
        .into_iter()
        .filter(|c| !c.names.is_empty())
        .collect();
    assert!(
        dispatching.len() >= 6,
        "main.lua's dispatch chains were not found"
    );
    for c in dispatching {
        assert!(
            c.names == all || c.names == counts || c.names == level,
            "main.lua:{}: a dispatch on the code names {:?}; it must name every algorithm \
             ({all:?}) or every one of a family ({counts:?}, {level:?}), by name or by \
             `code < LEVEL` / `code >= LEVEL`",
            c.line,
            c.names
        );
        assert!(
            !(c.by_name && c.has_else),
            "main.lua:{}: a dispatch on the code ends in a bare `else`, which would hand a \
             new algorithm another one's code",
            c.line
        );
    }
}

#[test]
fn the_checker_reads_nested_chains_and_skips_comments_and_strings() {
    let code = "if code == A then\n  x('end')\n  if code == B then -- else\nelse\nend\nend\n";
    let c = chains(code);
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].names, BTreeSet::from(["A".to_string()]));
    assert!(!c[0].has_else);
    assert!(c[1].has_else && c[1].names.contains("B"));
}

#[test]
fn every_algorithm_is_documented_scripted_and_tested() {
    let places = [
        "docs/explanation/algorithms.md",
        "docs/explanation/choosing-an-algorithm.md",
        "config/schema.json",
    ];
    let lua_heads: Vec<String> = std::fs::read_dir(root().join("src/store/lua"))
        .expect("src/store/lua")
        .map(|e| {
            let text = std::fs::read_to_string(e.expect("entry").path()).expect("lua file");
            text.lines().next().unwrap_or_default().to_owned()
        })
        .collect();
    let slowlog = read("integration/redis_store/slowlog.rs");
    let mut missing = Vec::new();
    for a in Algorithm::ALL {
        for p in places {
            if !read(p).contains(&format!("`{a}`")) && !read(p).contains(&format!("\"{a}\"")) {
                missing.push(format!("{p}: no `{a}`"));
            }
        }
        let head = format!("-- {a} ({})", lua_name(a));
        if !lua_heads.iter().any(|h| h.starts_with(&head)) {
            missing.push(format!("src/store/lua: no file opening with `{head}`"));
        }
        if !slowlog.contains(&format!("Algorithm::{a:?}")) {
            missing.push(format!(
                "integration/redis_store/slowlog.rs: {a} is not run at its largest parameters"
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
