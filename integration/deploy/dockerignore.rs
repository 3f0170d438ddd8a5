//! `.dockerignore`: its patterns, read, and Docker's matching of them, so the tests know
//! exactly which files `docker build` sends (`docker_build`) and what COPY may name
//! (`docker`).
//!
//! Docker's rules: patterns are relative to the context root (a leading `/` is dropped),
//! `*` and `?` match within one path element, `**` matches any number of elements, a
//! pattern that matches a directory excludes everything below it, and a later `!pattern`
//! re-includes what it matches.

use super::files::read;

pub fn dockerignore() -> Vec<String> {
    read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// Whether `.dockerignore` (its patterns, in order) keeps `rel` (a path relative to the
/// context root) out of the build context.
pub fn dockerignore_excludes(patterns: &[String], rel: &str) -> bool {
    let rel = rel.trim_start_matches("./").trim_end_matches('/');
    let path: Vec<&str> = rel
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let mut excluded = false;
    for p in patterns {
        let (negated, p) = match p.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, p.as_str()),
        };
        let pattern: Vec<&str> = p
            .trim()
            .trim_start_matches('/')
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .collect();
        // Excluding a directory excludes everything below it.
        let hit = (1..=path.len()).any(|n| glob_path(&pattern, &path[..n]));
        if hit {
            excluded = !negated;
        }
    }
    excluded
}

/// `**` matches any number of path elements (none included).
fn glob_path(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => {
            glob_path(rest, path) || (!path.is_empty() && glob_path(pattern, &path[1..]))
        }
        Some((first, rest)) => {
            !path.is_empty() && glob_element(first, path[0]) && glob_path(rest, &path[1..])
        }
    }
}

/// `*` (any run of characters) and `?` (one character) within one path element.
fn glob_element(pattern: &str, s: &str) -> bool {
    assert!(
        !pattern.contains(['[', '\\']),
        ".dockerignore pattern `{pattern}` uses syntax this test does not implement; teach it"
    );
    fn go(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some(('?', rest)) => !s.is_empty() && go(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    go(&p, &s)
}

#[test]
fn dockerignore_matching_follows_docker() {
    let pats = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let ignore = pats(&["target/", "**/*.rs.bk", "*.md", "docs", "!docs/keep.md"]);
    assert!(dockerignore_excludes(&ignore, "target"));
    assert!(dockerignore_excludes(&ignore, "target/debug/sluice"));
    assert!(dockerignore_excludes(&ignore, "src/a/b.rs.bk"));
    assert!(dockerignore_excludes(&ignore, "README.md"));
    assert!(
        !dockerignore_excludes(&ignore, "src/README.md"),
        "* stays in one element"
    );
    assert!(dockerignore_excludes(&ignore, "docs/x.md"));
    assert!(
        !dockerignore_excludes(&ignore, "docs/keep.md"),
        "! re-includes"
    );
    assert!(!dockerignore_excludes(&ignore, "src/main.rs"));
    assert!(!dockerignore_excludes(&ignore, "Cargo.toml"));
}
