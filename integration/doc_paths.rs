//! Docs and comments name only files that exist: every repository path quoted in a
//! Markdown file (README, ARCHITECTURE, BENCHMARKS, `docs/`, `examples/` …) or in a comment
//! of the code (`src/`, `integration/`, `benches/`, `examples/`: `//`; Lua: `--`;
//! `scripts/` and `.ci/`: `#`) must resolve, or the test fails naming the file, the line
//! and the path.
//!
//! A word is taken as a repository path when it starts with a top-level directory of the
//! repository (`src/…`, `docs/`, `.ci/run`) or ends with the extension of a source file
//! (`.rs`, `.lua`, `.sh`, `.md`, `.proto`). It resolves when it names a file or directory
//! from the repository root, from the quoting file's directory, or as the tail of a
//! repository path (`store/redis/batch.rs`, `runs.lua`, `lua/`), leading `./`/`../`
//! ignored. Absolute paths, URLs and HTTP routes are not repository paths, nor are files of a
//! kind the repository has none of (envoyproxy/ratelimit's `src/settings/settings.go`), nor
//! names that are only an extension (`*.yaml`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Extensions of the files a reader would look for in this repository.
const SOURCE: &[&str] = &["rs", "lua", "sh", "md", "proto"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file and directory of the repository, relative, `/`-separated (build output and
/// version control left out).
fn repo_paths() -> BTreeSet<String> {
    fn walk(dir: &Path, rel: &str, out: &mut BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if rel.is_empty() && (name == ".git" || name.starts_with("target")) {
                continue;
            }
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            out.insert(path.clone());
            if is_dir {
                walk(&e.path(), &path, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root(), "", &mut out);
    out
}

/// The files whose text is read, each with how to pick its documentation lines.
#[derive(Clone, Copy)]
enum Kind {
    Markdown,
    Comments(&'static str),
}

fn kind(path: &str) -> Option<Kind> {
    let code_dir = ["src/", "integration/", "benches/", "examples/"]
        .iter()
        .any(|d| path.starts_with(d));
    if path.ends_with(".md") {
        Some(Kind::Markdown)
    } else if code_dir && path.ends_with(".rs") {
        Some(Kind::Comments("//"))
    } else if path.starts_with("src/") && path.ends_with(".lua") {
        Some(Kind::Comments("--"))
    } else if path.starts_with("scripts/") || path.starts_with(".ci/") {
        Some(Kind::Comments("#"))
    } else {
        None
    }
}

/// The path-like words of a line: runs of letters, digits and `_ . - /`, trailing
/// punctuation dropped, those after `://` (URLs) and absolute ones left out.
fn words(line: &str) -> Vec<&str> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_.-/".contains(c);
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        match (is_path_char(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let w = line[s..i].trim_end_matches(['.', '-']);
                if !w.starts_with('/') && !line[..s].ends_with(':') {
                    out.push(w);
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

struct Repo {
    paths: BTreeSet<String>,
    top: BTreeSet<String>,
    extensions: BTreeSet<String>,
}

impl Repo {
    fn new() -> Repo {
        let paths = repo_paths();
        let top = paths.iter().filter(|p| !p.contains('/')).cloned().collect();
        let extensions = paths
            .iter()
            .filter_map(|p| Some(extension(p)?.to_owned()))
            .collect();
        Repo {
            paths,
            top,
            extensions,
        }
    }

    /// Whether `word` is meant as a path of this repository.
    fn is_repo_path(&self, word: &str) -> bool {
        let word = strip_up(word);
        let last = word.rsplit('/').next().unwrap_or(word);
        if last.starts_with('.') && !last[1..].contains('.') && !word.contains('/') {
            return false; // `.lua`, `.yaml`: an extension, not a file
        }
        if let Some(ext) = extension(word)
            && !self.extensions.contains(ext)
        {
            return false; // another project's file (`settings.go`)
        }
        let first = word.split('/').next().unwrap_or_default();
        let rooted = word.contains('/') && self.top.contains(first);
        rooted || extension(word).is_some_and(|e| SOURCE.contains(&e))
    }

    fn resolves(&self, word: &str, quoted_in: &str) -> bool {
        let word = strip_up(word).trim_end_matches('/');
        if word.is_empty() || self.paths.contains(word) {
            return true;
        }
        let dir = quoted_in.rsplit_once('/').map_or("", |(d, _)| d);
        if self.paths.contains(&format!("{dir}/{word}")) {
            return true;
        }
        let tail = format!("/{word}");
        self.paths.iter().any(|p| p.ends_with(&tail))
    }
}

fn strip_up(mut word: &str) -> &str {
    while let Some(rest) = word.strip_prefix("./").or_else(|| word.strip_prefix("../")) {
        word = rest;
    }
    word
}

fn extension(path: &str) -> Option<&str> {
    let last = path.rsplit('/').next()?;
    let (stem, ext) = last.rsplit_once('.')?;
    (!stem.is_empty() && !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphanumeric()))
        .then_some(ext)
}

/// `file:line: path` for every path quoted in `text` (the file `rel`) that does not resolve.
fn dangling(repo: &Repo, rel: &str, text: &str, kind: Kind) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let doc = match kind {
            Kind::Markdown => line,
            Kind::Comments(mark) => match line.trim_start().strip_prefix(mark) {
                Some(rest) => rest,
                None => continue,
            },
        };
        for w in words(doc) {
            if repo.is_repo_path(w) && !repo.resolves(w, rel) {
                out.push(format!("{rel}:{}: {w}", n + 1));
            }
        }
    }
    out
}

#[test]
fn paths_quoted_in_docs_and_comments_exist() {
    let repo = Repo::new();
    let mut bad = Vec::new();
    for rel in &repo.paths {
        let Some(kind) = kind(rel) else { continue };
        let path: PathBuf = root().join(rel);
        if !path.is_file() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        bad.extend(dangling(&repo, rel, &text, kind));
    }
    assert!(
        bad.is_empty(),
        "paths named in docs or comments that do not exist:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_tells_repository_paths_from_other_words() {
    let repo = Repo::new();
    let flagged = |text: &str, kind| dangling(&repo, "src/store/redis/mod.rs", text, kind);
    let md = Kind::Markdown;
    let rs = Kind::Comments("//");
    // Dangling, in every form a path is quoted.
    assert_eq!(flagged("see `src/store/lua/sliding_log.lua`.", md).len(), 1);
    assert_eq!(flagged("[the model](docs/nothing.md#top)", md).len(), 1);
    assert_eq!(flagged("//! in `gone.rs`, line 3", rs).len(), 1);
    assert_eq!(flagged("// src/nowhere/, src/x.rs:12", rs).len(), 2);
    // Resolving: from the root, from the file's directory, as a tail, up-levels ignored.
    for ok in [
        "`src/store/redis/batch.rs:40`",
        "`batch.rs`",
        "`store/redis/conn.rs`",
        "`lua/` and `runs.lua`",
        "$schema=../config/schema.json",
        "`.ci/run` and `examples/grafana/`",
    ] {
        assert!(flagged(ok, md).is_empty(), "{ok}");
    }
    // Not repository paths.
    for other in [
        "`/healthcheck`, `/var/run/nutcracker/ratelimit.sock`",
        "https://github.com/envoyproxy/ratelimit/blob/main/README.md",
        "their `src/settings/settings.go`",
        "every `*.yaml` and `rules.yaml`, `k=v,k2=v2`, TCP/UDP",
        "`Service/ShouldRateLimit`, ROOT/SUBDIRECTORY/APPDIRECTORY",
    ] {
        let found = flagged(other, md);
        assert!(found.is_empty(), "{other}: {found:?}");
    }
    // Only comments of code are read.
    assert!(flagged("let p = \"gone.rs\"; // fine", rs).is_empty());
}

/// GitHub's anchor for a heading: the text lower-cased, code marks and punctuation other than
/// `-` and `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a Markdown text offers: one per heading outside code blocks, a repeated one
/// numbered as GitHub numbers it (`-1`, `-2` …).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        if fenced {
            continue;
        }
        let Some(title) = rest.trim_start_matches('#').strip_prefix(' ') else {
            continue;
        };
        let base = slug(title);
        let mut candidate = base.clone();
        let mut n = 0;
        while out.contains(&candidate) {
            n += 1;
            candidate = format!("{base}-{n}");
        }
        out.insert(candidate);
    }
    out
}

/// The targets of a Markdown text's inline links (`[text](target)`), with their line,
/// outside code blocks and code spans.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans hold examples, not links.
        let prose: String = line
            .split('`')
            .enumerate()
            .map(|(i, part)| if i % 2 == 0 { part } else { "" })
            .collect();
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n + 1, after[..end].to_owned()));
            rest = &after[end..];
        }
    }
    out
}

/// `file:line: target (why)` for every relative link of a Markdown file whose file or
/// heading does not exist.
fn broken_links(rel: &str, text: &str) -> Vec<String> {
    let dir = Path::new(rel).parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for (line, target) in link_targets(text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
        let file = if path.is_empty() {
            root().join(rel)
        } else {
            root().join(dir).join(path)
        };
        if !file.exists() {
            out.push(format!("{rel}:{line}: {target} (no such file)"));
            continue;
        }
        if anchor.is_empty() || !file.is_file() || file.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let Ok(target_text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if !anchors(&target_text).contains(anchor) {
            out.push(format!("{rel}:{line}: {target} (no such heading)"));
        }
    }
    out
}

#[test]
fn links_in_markdown_resolve_to_files_and_headings() {
    let repo = Repo::new();
    let mut bad = Vec::new();
    for rel in repo.paths.iter().filter(|p| p.ends_with(".md")) {
        let Ok(text) = std::fs::read_to_string(root().join(rel)) else {
            continue;
        };
        bad.extend(broken_links(rel, &text));
    }
    assert!(
        bad.is_empty(),
        "links in Markdown that lead nowhere:\n{}",
        bad.join("\n")
    );
}

#[test]
fn anchors_are_github_s() {
    let text = "# Quota over RLQS (Envoy's `rate_limit_quota` filter)\n\
                ## Rolling migration on one Redis: `--redis-reference-keys`\n\
                ```\n# not a heading\n```\n## Notes\n## Notes\n";
    let found = anchors(text);
    for a in [
        "quota-over-rlqs-envoys-rate_limit_quota-filter",
        "rolling-migration-on-one-redis---redis-reference-keys",
        "notes",
        "notes-1",
    ] {
        assert!(found.contains(a), "{a} in {found:?}");
    }
    assert!(!found.contains("not-a-heading"));
    let links = link_targets("see [a](b.md#c) and `[x](y)`\n```\n[d](e)\n```\n");
    assert_eq!(links, vec![(1, "b.md#c".to_owned())]);
}
