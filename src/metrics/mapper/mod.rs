//! `PROMETHEUS_MAPPER_YAML`: envoyproxy/ratelimit's embedded statsd_exporter turns statsd
//! names into Prometheus names and labels with a mapping file; deployments pass their own
//! (Envoy Gateway mounts one at `/etc/statsd-exporter/conf.yaml`) to choose the labels of the
//! per-rule series, rename them or drop them.
//!
//! sluice counts natively, so the mapping is applied when rendering `/metrics`: each series
//! that has a statsd name (per-rule stats, `should_rate_limit` errors, `total_requests`,
//! `response_time`, config loads, global shadow mode) is renamed and relabelled as
//! statsd_exporter would: glob mappings first, in file order, then regex mappings in file
//! order (unanchored, Go's `$1`/`${1}` expansion), `action: drop`, `match_metric_type`;
//! series that no mapping matches are exported under their escaped statsd name. Series that
//! end up with the same name and labels are summed, as statsd_exporter sums their events.
//! sluice's own metrics (`sluice_*`) pass through unchanged.
//!
//! Not reproduced: summaries (`observer_type`/`timer_type: summary`), custom buckets,
//! `scale` and `ttl` — the response time stays sluice's histogram in seconds. Those fields
//! are accepted and reported once at startup; any other unknown field is an error.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use parking_lot::Mutex;
use regex::Regex;
use serde::Deserialize;

/// Fields of statsd_exporter's format that sluice accepts without applying them.
const IGNORED_FIELDS: &[&str] = &[
    "timer_type",
    "observer_type",
    "buckets",
    "quantiles",
    "histogram_options",
    "summary_options",
    "ttl",
    "scale",
    "honor_labels",
    "glob_disable_ordering",
    "cache_size",
    "cache_type",
];

/// The mapping file could not be used.
#[derive(Debug, thiserror::Error)]
#[error("PROMETHEUS_MAPPER_YAML {path}: {source}")]
pub struct MapperError {
    pub path: String,
    #[source]
    pub source: MappingError,
}

/// Why a mapping file could not be read, or what is wrong with its content.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    #[error("{0}")]
    Read(#[from] std::io::Error),
    #[error("{0}")]
    Yaml(#[from] serde_yaml::Error),
    /// A field statsd_exporter would refuse, named with where it is.
    #[error("{0}")]
    Field(String),
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    defaults: BTreeMap<String, serde_yaml::Value>,
    #[serde(default)]
    mappings: Vec<BTreeMap<String, serde_yaml::Value>>,
}

/// The statsd type a mapping may be restricted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatType {
    Counter,
    Observer,
}

#[derive(Debug)]
enum Matcher {
    /// Dot-separated components, `None` for `*`.
    Glob(Vec<Option<String>>),
    Regex(Regex),
}

#[derive(Debug)]
struct Mapping {
    matcher: Matcher,
    name: String,
    labels: Vec<(String, String)>,
    drop: bool,
    only: Option<StatType>,
}

/// Where a statsd name goes: dropped, or a Prometheus name and sorted labels.
type Target = Option<(String, Vec<(String, String)>)>;

/// A loaded mapping file.
#[derive(Debug)]
pub struct Mapper {
    mappings: Vec<Mapping>,
    /// Results by (statsd name, type); bounded by the series cap times the stats per key.
    cache: Mutex<HashMap<(String, bool), Target>>,
    /// Fields present but not applied, for the startup note.
    pub ignored: Vec<String>,
}

fn s(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn valid_name(name: &str) -> bool {
    // A Prometheus name, where `$n`/`${n}` may stand for captures.
    let stripped: String = {
        let re = Regex::new(r"\$\{?\d+\}?").ok();
        match re {
            Some(re) => re.replace_all(name, "x").into_owned(),
            None => name.to_string(),
        }
    };
    let mut chars = stripped.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn valid_label(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The parts of a glob pattern (`None`: `*`); `None` when a part is not a name.
fn glob(pattern: &str) -> Option<Vec<Option<String>>> {
    pattern
        .split('.')
        .map(|part| {
            if part == "*" {
                return Some(None);
            }
            let mut chars = part.chars();
            let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            ok.then(|| Some(part.to_string()))
        })
        .collect()
}

impl Mapper {
    pub fn load(path: &Path) -> Result<Mapper, MapperError> {
        let text = std::fs::read_to_string(path).map_err(MappingError::from);
        text.and_then(|t| Mapper::parse(&t))
            .map_err(|source| MapperError {
                path: path.display().to_string(),
                source,
            })
    }

    pub fn parse(text: &str) -> Result<Mapper, MappingError> {
        let file: File = serde_yaml::from_str(text)?;
        let mut ignored = Vec::new();
        let mut default_regex = false;
        for (k, v) in &file.defaults {
            match k.as_str() {
                "match_type" => default_regex = s(v).as_deref() == Some("regex"),
                k if IGNORED_FIELDS.contains(&k) => ignored.push(format!("defaults.{k}")),
                k => {
                    return Err(MappingError::Field(format!(
                        "defaults: unknown field '{k}'"
                    )));
                }
            }
        }
        let mut mappings = Vec::new();
        for (i, m) in file.mappings.iter().enumerate() {
            let at = |reason: String| MappingError::Field(format!("mapping {i}: {reason}"));
            let get = |k: &str| m.get(k).and_then(s);
            let pattern = get("match").ok_or_else(|| at("no match".into()))?;
            let regex = match get("match_type").as_deref() {
                None | Some("") => default_regex,
                Some("glob") => false,
                Some("regex") => true,
                Some(t) => return Err(at(format!("unknown match_type '{t}'"))),
            };
            let drop = match get("action").as_deref() {
                None | Some("") | Some("map") => false,
                Some("drop") => true,
                Some(a) => return Err(at(format!("unknown action '{a}'"))),
            };
            let name = get("name").unwrap_or_default();
            if !drop && name.is_empty() {
                return Err(at("metric mapping didn't set a metric name".into()));
            }
            if !name.is_empty() && !valid_name(&name) {
                return Err(at(format!("metric name '{name}' is not valid")));
            }
            let only = match get("match_metric_type").as_deref() {
                None | Some("") => None,
                Some("counter") => Some(StatType::Counter),
                Some("observer" | "timer" | "histogram" | "distribution") => {
                    Some(StatType::Observer)
                }
                // sluice sends no gauges under statsd names: such a mapping matches nothing.
                Some("gauge") => continue,
                Some(t) => return Err(at(format!("unknown match_metric_type '{t}'"))),
            };
            let mut labels = Vec::new();
            if let Some(l) = m.get("labels") {
                let map: BTreeMap<String, serde_yaml::Value> =
                    serde_yaml::from_value(l.clone()).map_err(|e| at(format!("labels: {e}")))?;
                for (k, v) in map {
                    if !valid_label(&k) {
                        return Err(at(format!("invalid label key: {k}")));
                    }
                    labels.push((k, s(&v).unwrap_or_default()));
                }
            }
            for k in m.keys() {
                match k.as_str() {
                    "match" | "match_type" | "action" | "name" | "match_metric_type" | "labels"
                    | "help" => {}
                    k if IGNORED_FIELDS.contains(&k) => ignored.push(format!("mappings[{i}].{k}")),
                    k => return Err(at(format!("unknown field '{k}'"))),
                }
            }
            let matcher = if regex {
                Matcher::Regex(
                    Regex::new(&pattern)
                        .map_err(|e| at(format!("invalid regex {pattern}: {e}")))?,
                )
            } else {
                Matcher::Glob(
                    glob(&pattern).ok_or_else(|| at(format!("invalid match: {pattern}")))?,
                )
            };
            mappings.push(Mapping {
                matcher,
                name,
                labels,
                drop,
                only,
            });
        }
        Ok(Mapper {
            mappings,
            cache: Mutex::new(HashMap::new()),
            ignored,
        })
    }

    /// Where `statsd_name` goes; `None` inside means dropped; no match ⇒ its escaped name.
    pub fn map(&self, statsd_name: &str, kind: StatType) -> Target {
        let key = (statsd_name.to_string(), kind == StatType::Counter);
        if let Some(hit) = self.cache.lock().get(&key) {
            return hit.clone();
        }
        let target = self.lookup(statsd_name, kind);
        self.cache.lock().insert(key, target.clone());
        target
    }

    fn lookup(&self, name: &str, kind: StatType) -> Target {
        let applies = |m: &&Mapping| m.only.is_none_or(|t| t == kind);
        // Globs first (statsd_exporter's FSM, file order), then regexes.
        let parts: Vec<&str> = name.split('.').collect();
        for m in self.mappings.iter().filter(applies) {
            let Matcher::Glob(g) = &m.matcher else {
                continue;
            };
            if g.len() != parts.len() {
                continue;
            }
            let mut caps = Vec::new();
            let matched = g.iter().zip(&parts).all(|(p, part)| match p {
                None => {
                    caps.push(*part);
                    true
                }
                Some(lit) => lit == part,
            });
            if matched {
                return finish(m, |t| expand_glob(t, &caps));
            }
        }
        for m in self.mappings.iter().filter(applies) {
            let Matcher::Regex(re) = &m.matcher else {
                continue;
            };
            if let Some(c) = re.captures(name) {
                // Go's `Regexp.ExpandString` and `Captures::expand` read `$n`, `${n}`,
                // `$name` and `$$` alike.
                return finish(m, |t| {
                    let mut out = String::new();
                    c.expand(t, &mut out);
                    out
                });
            }
        }
        Some((escape(name), Vec::new()))
    }
}

fn finish(m: &Mapping, expand: impl Fn(&str) -> String) -> Target {
    if m.drop {
        return None;
    }
    let mut labels: Vec<(String, String)> = m
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), expand(v)))
        .collect();
    labels.sort();
    Some((expand(&m.name), labels))
}

/// statsd_exporter's glob templates: `$n` or `${n}`, 1-based; out of range ⇒ empty.
fn expand_glob(template: &str, caps: &[&str]) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let braced = after.starts_with('{');
        let digits_at = usize::from(braced);
        let n = after[digits_at..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let close = braced && after[digits_at + n..].starts_with('}');
        if n == 0 || (braced && !close) {
            out.push('$');
            rest = after;
            continue;
        }
        let idx: usize = after[digits_at..digits_at + n].parse().unwrap_or(0);
        if let Some(c) = idx.checked_sub(1).and_then(|i| caps.get(i)) {
            out.push_str(c);
        }
        rest = &after[digits_at + n + usize::from(close)..];
    }
    out.push_str(rest);
    out
}

/// statsd_exporter's `EscapeMetricName`: a leading digit gets `_`, anything outside
/// `[A-Za-z0-9_]` becomes `_`.
pub fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        out.push('_');
    }
    out.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    out
}

mod render;

impl super::Metrics {
    /// Render through a `PROMETHEUS_MAPPER_YAML` mapping.
    pub fn set_mapper(&mut self, mapper: Mapper) {
        self.mapper = Some(mapper);
    }
}

#[cfg(test)]
mod tests;
