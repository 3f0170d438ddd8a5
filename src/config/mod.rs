//! Rule files: discovery, parsing, validation (envoyproxy/ratelimit's messages) and the
//! compiled, immutable per-domain rule trees that requests are matched against.
//!
//! `config` knows nothing of stores, gRPC or metrics. A [`RateLimitConfig`] is built whole
//! or not at all: any error rejects the entire set of files.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::limiter::{LimitSpec, StateTag};

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

#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// `--merge-domains` / `MERGE_DOMAIN_CONFIG`: the same domain may appear in several files.
    pub merge_domains: bool,
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

/// Read every rule file under `paths` (files, or directories searched recursively for
/// `*.yaml`/`*.yml`, skipping dot-files and dot-directories), in a stable order.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<ConfigFile>, Vec<ConfigError>> {
    let _ = paths;
    todo!("config::discover")
}

/// A request descriptor entry as the matcher sees it (implemented by the service for the
/// protocol's entry type, so `config` never sees protocol types).
pub trait EntryRef {
    fn key(&self) -> &str;
    fn value(&self) -> &str;
}

impl EntryRef for (&str, &str) {
    fn key(&self) -> &str {
        self.0
    }
    fn value(&self) -> &str {
        self.1
    }
}

/// All loaded domains.
#[derive(Debug, Default)]
pub struct RateLimitConfig {}

impl RateLimitConfig {
    /// A config with no domains (every request is OK without a limit).
    pub fn empty() -> RateLimitConfig {
        RateLimitConfig::default()
    }

    /// Parse, validate and compile. Returns every error found (at least one per bad file).
    pub fn build(
        files: &[ConfigFile],
        opts: &LoadOptions,
    ) -> Result<RateLimitConfig, Vec<ConfigError>> {
        let _ = (files, opts);
        todo!("RateLimitConfig::build")
    }

    /// [`discover`] then [`RateLimitConfig::build`].
    pub fn load(
        paths: &[PathBuf],
        opts: &LoadOptions,
    ) -> Result<RateLimitConfig, Vec<ConfigError>> {
        let files = discover(paths)?;
        RateLimitConfig::build(&files, opts)
    }

    pub fn domain(&self, name: &str) -> Option<&Domain> {
        let _ = name;
        todo!()
    }

    /// Every rule (a descriptor node with `rate_limit`/`rate_limits`), indexed by `Rule::id`.
    pub fn rules(&self) -> &[Rule] {
        todo!()
    }

    pub fn domain_count(&self) -> usize {
        todo!()
    }

    /// `/rlconfig`: one line per limit, sorted.
    pub fn dump(&self) -> String {
        todo!()
    }
}

/// One domain's compiled descriptor tree.
#[derive(Debug)]
pub struct Domain {}

impl Domain {
    pub fn name(&self) -> &str {
        todo!()
    }

    /// envoyproxy/ratelimit's `GetLimit` walk: per entry, exact `key_value` child, else
    /// wildcard children in declaration order, else the key-only child; no backtracking; a
    /// rule applies only when the last entry lands on a node with a limit.
    pub fn find<E: EntryRef>(&self, entries: &[E]) -> Option<Match<'_>> {
        let _ = entries;
        todo!()
    }
}

/// A rule matched by a request descriptor.
#[derive(Clone, Copy, Debug)]
pub struct Match<'a> {
    pub rule: &'a Rule,
}

impl<'a> Match<'a> {
    /// The descriptor's state identity: domain + entries, with the matched pattern in place
    /// of the value at levels matched by a `share_threshold` wildcard.
    pub fn state_tag<E: EntryRef>(&self, entries: &[E]) -> StateTag {
        let _ = entries;
        todo!()
    }

    /// The stats key (envoyproxy/ratelimit §2.13): the config path, or built from request
    /// values under `detailed_metric` / `value_to_metric`.
    pub fn stats_key<E: EntryRef>(&self, entries: &[E]) -> Cow<'a, str> {
        let _ = entries;
        todo!()
    }
}

/// State tag of a request-supplied `limit` override: domain + entries as sent.
pub fn override_state_tag<E: EntryRef>(domain: &str, entries: &[E]) -> StateTag {
    StateTag::compute(domain, entries.iter().map(|e| (e.key(), e.value())))
}

/// Stats key of a request override: `domain.k1_v1.k2` (value omitted when empty).
pub fn override_stats_key<E: EntryRef>(domain: &str, entries: &[E]) -> String {
    let mut s = String::from(domain);
    for e in entries {
        s.push('.');
        s.push_str(e.key());
        if !e.value().is_empty() {
            s.push('_');
            s.push_str(e.value());
        }
    }
    s
}

/// A descriptor node that carries `rate_limit` or `rate_limits`.
#[derive(Debug)]
pub struct Rule {
    /// Index in [`RateLimitConfig::rules`] (stable within one config generation).
    pub id: usize,
    /// The config-path key, e.g. `test-domain.key1_value1.subkey1` (their `FullKey`).
    pub full_key: Arc<str>,
    /// The limits (one for `rate_limit`, several for `rate_limits`); empty iff `unlimited`.
    pub limits: Box<[LimitSpec]>,
    pub unlimited: bool,
    /// Names of limits this rule replaces.
    pub replaces: Box<[Arc<str>]>,
    pub shadow_mode: bool,
    pub quota_mode: bool,
    /// `metadata` as a JSON object, returned in dynamic metadata for passed descriptors.
    pub metadata: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
    /// `name` of the rule's `rate_limit` (with `rate_limits`: the first named limit).
    pub name: Option<Arc<str>>,
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

#[allow(dead_code)]
fn _assert_path(_: &Path) {}
