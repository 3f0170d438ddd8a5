//! `sluice explain` and `/explain`: for a domain and request descriptors, which rule each
//! descriptor matches and why at every level (exact, wildcard, key-only; where the walk
//! stopped and why), and what follows from the match: `replaces`, shadow and quota mode,
//! `unlimited`, the stats key, each limit's algorithm and parameters, and the Redis keys its
//! state lives under.
//!
//! Nothing here re-implements the matcher or the key layout: the walk is
//! `Domain::find_traced` (the matcher's own, with a recording trace) and the keys come from
//! `store::redis::{state_key, lock_key}`. That is why this is a module of its own, allowed to
//! use both `config` and `store`: `config` must know nothing of stores.
//!
//! One file per job: this one builds the [`Explanation`] (serialized as JSON as is), `walk`
//! records the steps of the walk, `text` renders the human-readable form.

mod text;
mod walk;

use serde::Serialize;

use crate::config::{Match, RateLimitConfig, Rule};
use crate::limit::{Descriptor, LimitSpec};
use crate::store::redis::{lock_key, state_key};

pub use text::render;
pub use walk::StepExplanation;

/// Where the Redis keys shown would live.
#[derive(Clone, Copy, Debug)]
pub struct KeyLayout<'a> {
    /// The Redis store's key prefix (`--cache-key-prefix`).
    pub prefix: &'a str,
    /// The serving store (`memory`, `redis`) when served; `None` offline.
    pub store: Option<&'static str>,
}

/// The whole answer (the JSON of `sluice explain --json` and `/explain`).
#[derive(Debug, Serialize)]
pub struct Explanation {
    pub domain: String,
    pub domain_found: bool,
    /// Every loaded domain, sorted (to spot a typo in `domain`).
    pub domains: Vec<String>,
    /// The store of the server that answered (`/explain`); absent offline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<&'static str>,
    pub redis_key_prefix: String,
    pub descriptors: Vec<DescriptorExplanation>,
}

/// What one descriptor of the request gets.
#[derive(Debug, Serialize)]
pub struct DescriptorExplanation {
    pub entries: Vec<EntryJson>,
    /// The walk, one step per level visited (empty for an unknown domain).
    pub steps: Vec<StepExplanation>,
    /// `limited`, `unlimited`, `replaced`, `no_limit` or `unknown_domain`.
    pub outcome: &'static str,
    /// The outcome in one sentence.
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleExplanation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats_key: Option<String>,
    /// The descriptor's state tag (base64url), the `{…}` of its Redis keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_tag: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitExplanation>,
}

/// A descriptor entry as the JSON answers show it (`/explain`, the admin listener).
#[derive(Debug, Serialize)]
pub struct EntryJson {
    pub key: String,
    pub value: String,
}

impl EntryJson {
    /// Every entry of a descriptor, in order.
    pub fn list(entries: &[(&str, &str)]) -> Vec<EntryJson> {
        entries
            .iter()
            .map(|&(key, value)| EntryJson {
                key: key.to_owned(),
                value: value.to_owned(),
            })
            .collect()
    }
}

#[derive(Debug, Serialize)]
pub struct RuleExplanation {
    /// The config path of the matched node, e.g. `edge.client_id_partner-*`.
    pub full_key: String,
    /// The names of its limits (targets of `replaces`).
    pub names: Vec<String>,
    pub unlimited: bool,
    pub shadow_mode: bool,
    pub quota_mode: bool,
    /// Names this rule's limits replace in the same request.
    pub replaces: Vec<String>,
    /// The rule (and descriptor, 1-based) that replaces this one in this request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<ReplacedBy>,
}

#[derive(Debug, Serialize)]
pub struct ReplacedBy {
    pub rule: String,
    pub descriptor: usize,
    pub name: String,
}

/// What names a limit, as `/explain` and the admin listener's `/state` both show it (flattened
/// into each, so their JSON keeps these fields at the limit's top level).
#[derive(Debug, Serialize)]
pub struct LimitHead {
    /// Position in `rate_limits` (0 for `rate_limit`).
    pub slot: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub algorithm: &'static str,
    /// Exact (up to 2^53; a response's `current_limit` clamps at 4294967295).
    pub requests_per_unit: u64,
    pub unit: &'static str,
    pub unit_multiplier: u32,
    /// A calendar window's zone (`Asia/Kolkata`): the unit is that calendar's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

impl LimitHead {
    pub fn of(spec: &LimitSpec) -> Self {
        Self {
            slot: spec.slot,
            name: spec.name.as_deref().map(str::to_owned),
            algorithm: spec.algorithm.name(),
            requests_per_unit: spec.requests_per_unit,
            unit: spec.unit.name(),
            unit_multiplier: spec.unit_multiplier,
            time_zone: spec.calendar.as_ref().map(|c| c.zone().to_owned()),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct LimitExplanation {
    #[serde(flatten)]
    pub head: LimitHead,
    pub window_seconds: u64,
    /// Capacity (`burst`) of the bucket algorithms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Sub-windows of a `sliding_window`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buckets: Option<u32>,
    pub overdraft: bool,
    pub penalty_seconds: u64,
    /// `current_limit` as a response reports it.
    pub current_limit: CurrentLimit,
    pub redis_key: String,
    /// The penalty lock's key (only with `penalty_seconds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_lock_key: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct CurrentLimit {
    pub requests_per_unit: u32,
    pub unit: &'static str,
}

/// Explain `descriptors` of a request to `domain` against `config`.
pub fn explain(
    config: &RateLimitConfig,
    domain: &str,
    descriptors: &[Descriptor],
    keys: KeyLayout<'_>,
) -> Explanation {
    let mut domains: Vec<String> = config.domain_names().map(str::to_owned).collect();
    domains.sort();
    let tree = config.domain(domain);
    let refs: Vec<Vec<(&str, &str)>> = descriptors
        .iter()
        .map(|d| d.0.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
        .collect();
    let walks: Vec<(Option<Match<'_>>, Vec<StepExplanation>)> = refs
        .iter()
        .map(|entries| match tree {
            Some(t) => walk::walk(t, entries),
            None => (None, Vec::new()),
        })
        .collect();
    let matched: Vec<Option<&Rule>> = walks.iter().map(|(m, _)| m.map(|m| m.rule)).collect();
    let out = refs
        .iter()
        .zip(walks)
        .map(|(entries, (m, steps))| {
            let mut d = DescriptorExplanation {
                entries: EntryJson::list(entries),
                steps,
                outcome: "no_limit",
                reason: String::new(),
                rule: None,
                stats_key: None,
                state_tag: None,
                limits: Vec::new(),
            };
            if tree.is_none() {
                d.outcome = "unknown_domain";
                d.reason =
                    format!("domain '{domain}' is not in the loaded rules: OK without a limit");
            } else if let Some(m) = m {
                describe_match(&mut d, &m, entries, &matched, keys.prefix);
            } else {
                d.reason = walk::stop_reason(&d.steps);
            }
            d
        })
        .collect();
    Explanation {
        domain: domain.to_owned(),
        domain_found: tree.is_some(),
        domains,
        store: keys.store,
        redis_key_prefix: keys.prefix.to_owned(),
        descriptors: out,
    }
}

/// Fill in what a matched rule means for the descriptor.
fn describe_match(
    d: &mut DescriptorExplanation,
    m: &Match<'_>,
    entries: &[(&str, &str)],
    matched: &[Option<&Rule>],
    prefix: &str,
) {
    let rule = m.rule;
    // `replaces` as the service applies it: a limited rule is dropped when any rule matched
    // in the same request replaces one of its names (unlimited rules are never dropped).
    let replaced_by = (!rule.unlimited)
        .then(|| {
            matched.iter().enumerate().find_map(|(i, other)| {
                let other = (*other)?;
                let name = other
                    .replaces
                    .iter()
                    .find(|r| rule.names().any(|n| n == &***r))?;
                Some(ReplacedBy {
                    rule: other.full_key.to_string(),
                    descriptor: i + 1,
                    name: name.to_string(),
                })
            })
        })
        .flatten();
    d.stats_key = Some(m.stats_key(entries).into_owned());
    if rule.unlimited {
        d.outcome = "unlimited";
        d.reason = format!(
            "rule {} is unlimited: OK with limit_remaining 4294967295, nothing counted",
            rule.full_key
        );
    } else if let Some(r) = &replaced_by {
        d.outcome = "replaced";
        d.reason = format!(
            "rule {} matches, but its limit '{}' is replaced by rule {} (descriptor {}): no limit for this descriptor",
            rule.full_key, r.name, r.rule, r.descriptor
        );
    } else {
        d.outcome = "limited";
        let tag = m.state_tag(entries);
        d.state_tag = Some(tag.to_base64url());
        d.limits = rule
            .limits
            .iter()
            .map(|spec| limit(spec, prefix, tag))
            .collect();
        let mut reason = format!("rule {} applies", rule.full_key);
        if rule.shadow_mode {
            reason.push_str(" in shadow mode (counted; OVER_LIMIT is answered as OK)");
        }
        if rule.quota_mode {
            reason.push_str(
                " in quota mode (the request is denied only if every quota descriptor is over)",
            );
        }
        d.reason = reason;
    }
    d.rule = Some(RuleExplanation {
        full_key: rule.full_key.to_string(),
        names: {
            // The rule's name is also its first named limit's: each name once.
            let mut names: Vec<String> = Vec::new();
            for n in rule.names() {
                if !names.iter().any(|m| m == n) {
                    names.push(n.to_owned());
                }
            }
            names
        },
        unlimited: rule.unlimited,
        shadow_mode: rule.shadow_mode,
        quota_mode: rule.quota_mode,
        replaces: rule.replaces.iter().map(|r| r.to_string()).collect(),
        replaced_by,
    });
}

fn limit(spec: &LimitSpec, prefix: &str, tag: crate::limit::StateTag) -> LimitExplanation {
    let (rpu, unit) = spec.reported();
    LimitExplanation {
        head: LimitHead::of(spec),
        window_seconds: spec.window_seconds(),
        burst: spec.algorithm.has_burst().then_some(spec.burst),
        buckets: (spec.buckets > 0).then_some(spec.buckets),
        overdraft: spec.overdraft,
        penalty_seconds: spec.penalty_ms / 1000,
        current_limit: CurrentLimit {
            requests_per_unit: crate::limit::wire_count(rpu),
            unit: unit.name(),
        },
        redis_key: state_key(prefix, tag, spec),
        redis_lock_key: (spec.penalty_ms > 0).then(|| lock_key(prefix, tag, spec)),
    }
}

#[cfg(test)]
mod tests;
