//! Rule files: discovery, parsing, validation (envoyproxy/ratelimit's messages) and the
//! compiled, immutable per-domain rule trees that requests are matched against.
//!
//! `config` knows nothing of stores, gRPC or metrics. A [`RateLimitConfig`] is built whole
//! or not at all: any error rejects the entire set of files (every error of every file is
//! reported, up to [`MAX_ERRORS_PER_FILE`] per file).
//!
//! A file goes through their pipeline, in their order, so the same file gets the same
//! message as under envoyproxy/ratelimit:
//! 0. YAML syntax (first document only) — `yaml.rs`;
//! 1. the key walk (`keys.rs`): string keys, known keys, map list elements, leaf types;
//!    stricter than theirs, keys must also sit at their own level and not repeat;
//! 2. the typed decode with yaml.v2's leniency (`raw.rs`, `scalars.rs`, `metadata.rs`);
//! 3. whole-config validation and assembly (`validate.rs`, `limits.rs` for the limits and
//!    the extension fields, `response.rs` for a rule's `response`), compiled into
//!    per-domain trees (`tree.rs`).
//!
//! Positions: passes 0–2 raise errors at the offending node so serde_yaml stamps its line
//! and column, while the exact message travels beside the error (`yaml::Ctx`). Pass 3
//! works on typed data; its errors carry a document path that `yaml::locate` turns back
//! into a line by re-reading the file. Matching and stats keys live in `tree.rs` and
//! `stats.rs`; file discovery in `discover.rs`.
//!
//! Rules from xDS skip passes 0–2: `xds` builds the same raw trees (`RawRoot`) from its
//! resources and [`RateLimitConfig::from_documents`] runs pass 3 on them, so both sources
//! share one validator and one set of messages.

mod discover;
mod glob;
mod keys;
mod limits;
mod locate;
mod metadata;
mod raw;
mod response;
mod scalars;
mod stats;
pub use stats::{override_reference_cache_key, override_state_tag, override_stats_key};
mod trace;
mod tree;
mod validate;
mod yaml;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::limit::{LimitSpec, StateTag};

pub use discover::{DEFAULT_MAX_FILE_BYTES, Fingerprint, discover, fingerprint};
pub use metadata::MetadataError;
pub use raw::{RawDescriptor, RawLimit, RawResponse, RawRoot};
pub use response::RuleResponse;
pub use stats::{push_fragment, push_shown, shown};
pub use trace::{Children, How, Step, Trace};
pub use tree::Domain;

/// One rule file's content and the name its errors are reported under.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    /// Name used as the error prefix: the path relative to the config directory it was
    /// found in, or the file name when a file was given directly.
    pub name: String,
    /// Where it was read from (for locations in logs and `sluice check`).
    pub path: PathBuf,
    pub content: String,
}

#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// `--merge-domains` / `MERGE_DOMAIN_CONFIG`: the same domain may appear in several files.
    pub merge_domains: bool,
    /// `--max-config-file-bytes`: larger rule files are errors, never read whole.
    pub max_file_bytes: u64,
    /// `--sanitize-metric-dots` / `SANITIZE_DESCRIPTOR_METRIC_DOTS`: the dots of descriptor
    /// keys and values become `_` in stats keys (never in matching, state or messages).
    pub sanitize_metric_dots: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            merge_domains: false,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            sanitize_metric_dots: false,
        }
    }
}

/// A configuration error. `Display` is the exact envoyproxy/ratelimit message, prefixed
/// with the file name (e.g. `bad.yaml: invalid rate limit unit 'foo'`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    pub message: String,
    /// The file's path, when the error belongs to one file.
    pub path: Option<PathBuf>,
    /// 1-based line (and column) where the parser knows it.
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl ConfigError {
    /// An error about the load as a whole, not about one file (e.g. it did not finish).
    pub fn general(message: String) -> ConfigError {
        ConfigError {
            message,
            path: None,
            line: None,
            column: None,
        }
    }

    /// An error about a path itself (missing, unreadable), not about its content.
    fn for_path(path: &Path, message: String) -> ConfigError {
        ConfigError {
            message,
            path: Some(path.to_path_buf()),
            line: None,
            column: None,
        }
    }

    /// An error in `file`'s content: `<name>: <msg>`.
    fn in_file(
        file: &ConfigFile,
        msg: impl fmt::Display,
        at: (Option<usize>, Option<usize>),
    ) -> ConfigError {
        ConfigError {
            message: format!("{}: {msg}", file.name),
            path: Some(file.path.clone()),
            line: at.0,
            column: at.1,
        }
    }
}

/// Most errors reported for one file: the key walk runs once per error it reports, so a
/// file of thousands of bad keys costs a bounded number of walks.
pub const MAX_ERRORS_PER_FILE: usize = 50;

/// Passes 0–2 on one file: YAML syntax, the key walk, the typed decode. The file's errors,
/// and its raw tree when the decode went through. The key walk reports every problem it can
/// walk past (`yaml::Ctx::problem`, one run per problem); after such problems the typed
/// decode still runs, so validation can report what is wrong besides (a unit, a duplicate
/// descriptor) in the same `check`.
fn parse_file(file: &ConfigFile) -> (Option<raw::RawRoot>, Vec<ConfigError>) {
    let content = file.content.as_str();
    let ctx = yaml::Ctx::budget_for(content);
    let from_serde = |e: serde_yaml::Error| {
        // A resource limit (alias bomb, nesting) is the real cause whatever a pass was
        // expecting at that node. Alias expansions have no position of their own, so the
        // node being read when the limit tripped gives it.
        let aliases = ctx.over_budget().then_some(yaml::ALIAS_BUDGET);
        if let Some(why) = aliases.or_else(|| yaml::limit_error(&e)) {
            let mut path = ctx.path();
            let at = match yaml::position(&e) {
                (Some(line), col) if aliases.is_none() => (Some(line), col),
                _ => {
                    // Deep inside an expansion the path runs through anchors defined
                    // elsewhere; its first steps are still the text that holds the aliases,
                    // and the field is what expanded (its list items may be aliases).
                    path.truncate(4);
                    while matches!(path.last(), Some(yaml::Seg::Index(_))) {
                        path.pop();
                    }
                    locate::locate_key(content, &path)
                }
            };
            // A path that long says nothing the position does not.
            let msg = if path.is_empty() || path.len() > 8 {
                yaml::load(why)
            } else {
                yaml::load(format_args!("{}: {why}", yaml::render_path(&path)))
            };
            return ConfigError::in_file(file, msg, at);
        }
        let msg = ctx
            .take()
            .unwrap_or_else(|| format!("error loading config file: {e}"));
        ConfigError::in_file(file, msg, yaml::position(&e))
    };
    // Syntax first, as their first `yaml.Unmarshal` does: the later passes would otherwise
    // report a key error found before the point where the YAML breaks.
    if let Some(doc) = yaml::first_document(content)
        && let Err(e) = serde::de::IgnoredAny::deserialize(doc)
    {
        return (None, vec![from_serde(e)]);
    }
    let mut errors = Vec::new();
    loop {
        ctx.rerun(content, errors.len());
        let Err(e) = keys::check(content, &ctx) else {
            break;
        };
        let recoverable = ctx.recoverable();
        let e = from_serde(e);
        // The same complaint at the same place again: an alias repeating a node already
        // walked (and every later run would repeat it too).
        if errors.contains(&e) {
            break;
        }
        errors.push(e);
        if !recoverable {
            return (None, errors);
        }
        if errors.len() >= MAX_ERRORS_PER_FILE {
            errors.push(ConfigError::in_file(
                file,
                format!("more errors not shown (the first {MAX_ERRORS_PER_FILE} are)"),
                (None, None),
            ));
            return (None, errors);
        }
    }
    ctx.rerun(content, 0);
    match raw::decode(content, &ctx) {
        Ok(root) => (Some(root), errors),
        Err(e) => {
            let e = from_serde(e);
            // A key error may also be the shape the decode stops at: said once (on a line
            // the key walk complained about, the walk's complaint stands alone).
            if !errors.iter().any(|k| k.line.is_some() && k.line == e.line) {
                errors.push(e);
            }
            (None, errors)
        }
    }
}

/// A request descriptor entry as the matcher sees it (implemented by the service for the
/// protocol's entry type, so `config` never sees protocol types). Keys and values are
/// bytes: Envoy copies request header bytes into them, UTF-8 or not, and every byte
/// string is matched, counted and limited like any other (rule values are UTF-8, so a
/// value that is not can match only a glob or a key-only rule).
pub trait EntryRef {
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
}

impl EntryRef for (&str, &str) {
    fn key(&self) -> &[u8] {
        self.0.as_bytes()
    }
    fn value(&self) -> &[u8] {
        self.1.as_bytes()
    }
}

impl EntryRef for (&[u8], &[u8]) {
    fn key(&self) -> &[u8] {
        self.0
    }
    fn value(&self) -> &[u8] {
        self.1
    }
}

/// All loaded domains.
#[derive(Debug, Default)]
pub struct RateLimitConfig {
    domains: HashMap<Box<str>, Domain>,
    rules: Arc<[Rule]>,
    /// What loaded but has no effect, each with its file and line (the same shape as an
    /// error; a config with warnings serves).
    warnings: Vec<ConfigError>,
}

impl RateLimitConfig {
    /// A config with no domains (every request is OK without a limit).
    pub fn empty() -> RateLimitConfig {
        RateLimitConfig::default()
    }

    /// Parse, validate and compile. Returns every error found (at least one per bad file, at
    /// most [`MAX_ERRORS_PER_FILE`] and a line saying there were more).
    pub fn build(
        files: &[ConfigFile],
        opts: &LoadOptions,
    ) -> Result<RateLimitConfig, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        let mut loader = validate::Loader::new(opts);
        for file in files {
            let (root, parse_errors) = parse_file(file);
            let mut found = parse_errors;
            let loaded = root.map(|root| loader.load(root));
            if let Some(Ok(notes)) = loaded {
                warnings.extend(notes.into_iter().map(|w| {
                    let at = locate::locate(&file.content, &w.at);
                    ConfigError::in_file(file, w.msg, at)
                }));
            } else if let Some(Err(problems)) = loaded {
                let parsed = found.len();
                for p in problems {
                    let at = locate::locate(&file.content, &p.at);
                    // On a line the key walk complained about, a validation error is most
                    // likely its consequence (a list element that is not a map becomes a
                    // descriptor without a key): the first complaint stands alone.
                    if found[..parsed]
                        .iter()
                        .any(|e| e.line.is_some() && e.line == at.0)
                    {
                        continue;
                    }
                    found.push(ConfigError::in_file(file, p.msg, at));
                }
            }
            found.truncate(MAX_ERRORS_PER_FILE + 1);
            errors.extend(found);
        }
        if errors.is_empty() {
            Ok(loader.finish().with_warnings(warnings))
        } else {
            Err(errors)
        }
    }

    fn with_warnings(mut self, warnings: Vec<ConfigError>) -> RateLimitConfig {
        self.warnings = warnings;
        self
    }

    /// What loaded but has no effect (`detailed_metric` where no rule counts), each with its
    /// file and line: `sluice check` prints them, the server logs them at each load.
    pub fn warnings(&self) -> &[ConfigError] {
        &self.warnings
    }

    /// Validate and compile rule trees that did not come from a YAML file (xDS
    /// `RateLimitConfig` resources), each under its name: the same checks, in the same
    /// order, with the same messages (`<name>: <message>`) and the same compilation as
    /// files, without positions. One validator for every source.
    pub fn from_documents(
        documents: Vec<(String, RawRoot)>,
        opts: &LoadOptions,
    ) -> Result<RateLimitConfig, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        let mut loader = validate::Loader::new(opts);
        let named = |name: &str, p: limits::Problem| ConfigError {
            message: format!("{name}: {}", p.msg),
            path: None,
            line: None,
            column: None,
        };
        for (name, root) in documents {
            match loader.load(root) {
                Ok(notes) => warnings.extend(notes.into_iter().map(|p| named(&name, p))),
                Err(problems) => errors.extend(problems.into_iter().map(|p| named(&name, p))),
            }
        }
        if errors.is_empty() {
            Ok(loader.finish().with_warnings(warnings))
        } else {
            Err(errors)
        }
    }

    /// [`discover()`] then [`RateLimitConfig::build`].
    pub fn load(
        paths: &[PathBuf],
        opts: &LoadOptions,
    ) -> Result<RateLimitConfig, Vec<ConfigError>> {
        let files = discover(paths, opts.max_file_bytes)?;
        RateLimitConfig::build(&files, opts)
    }

    pub fn domain(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// Every rule (a descriptor node with `rate_limit`/`rate_limits`), indexed by `Rule::id`.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    /// The loaded domains' names, in no particular order.
    pub fn domain_names(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(|d| &**d)
    }

    /// `/rlconfig`: one line per limit, sorted.
    pub fn dump(&self) -> String {
        stats::dump(self)
    }
}

/// A rule matched by a request descriptor.
#[derive(Clone, Copy)]
pub struct Match<'a> {
    pub rule: &'a Rule,
    domain: &'a Domain,
    /// The node the request's last entry landed on.
    node: u32,
    /// Bit `i`: entry `i` matched its node by exact `key_value`.
    exact: u64,
    /// Bit `i`: entry `i` matched its node through a wildcard.
    wild: u64,
}

impl fmt::Debug for Match<'_> {
    // The domain tree is large and says nothing about this match.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Match")
            .field("rule", &self.rule.full_key)
            .field("domain", &self.domain.name())
            .field("exact", &format_args!("{:#b}", self.exact))
            .field("wild", &format_args!("{:#b}", self.wild))
            .finish()
    }
}

impl<'a> Match<'a> {
    /// The descriptor's state identity: domain + entries, with the matched pattern in place
    /// of the value at levels matched by a `share_threshold` wildcard.
    pub fn state_tag<E: EntryRef>(&self, entries: &[E]) -> StateTag {
        self.tag(entries)
    }

    /// The stats key (envoyproxy/ratelimit §2.13): the config path, or built from request
    /// values under `detailed_metric` / `value_to_metric`.
    pub fn stats_key<E: EntryRef>(&self, entries: &[E]) -> Cow<'a, str> {
        self.stats(entries)
    }
}

/// A descriptor node that carries `rate_limit` or `rate_limits`.
#[derive(Debug)]
pub struct Rule {
    /// Index in [`RateLimitConfig::rules`] (stable within one config generation).
    pub id: usize,
    /// The config-path key, e.g. `test-domain.key1_value1.subkey1` (their `FullKey`).
    pub full_key: Arc<str>,
    /// The stats key of a request that lands here without request values in it: the
    /// config path, with the dots of keys and values as `_` under
    /// [`LoadOptions::sanitize_metric_dots`] (else the same string as `full_key`).
    pub stats_key: Arc<str>,
    /// The limits (one for `rate_limit`, several for `rate_limits`); empty iff `unlimited`.
    pub limits: Box<[LimitSpec]>,
    pub unlimited: bool,
    /// Names of limits this rule replaces.
    pub replaces: Box<[Arc<str>]>,
    pub shadow_mode: bool,
    pub quota_mode: bool,
    /// `consistency`: `None` when not written (the `--consistency` default applies where it
    /// is sound, see `Consistency::sound_for`).
    pub consistency: Option<crate::limit::Consistency>,
    /// `metadata` as a JSON object, returned in dynamic metadata for passed descriptors.
    pub metadata: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
    /// `name` of the rule's `rate_limit` (with `rate_limits`: the first named limit).
    pub name: Option<Arc<str>>,
    /// `response`: the 429's body and headers when this rule denies, and whether it shows
    /// in the rate limit headers.
    pub response: Option<Arc<RuleResponse>>,
}

impl Rule {
    /// Every name this rule answers to for `replaces` (its limits' names).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.name
            .iter()
            .map(|n| &**n)
            .chain(self.limits.iter().filter_map(|l| l.name.as_deref()))
    }
}
