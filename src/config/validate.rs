//! Whole-config validation (their `loadConfig` / `loadDescriptors`, in their order) and
//! assembly of the rules and domain trees.

use std::collections::HashMap;
use std::sync::Arc;

use super::limits::{self, Compiled, MAX_RATE_LIMITS, Place, Problem};
use super::raw::{RawDescriptor, RawRoot};
use super::response;
use super::tree::{DomainBuilder, MAX_DEPTH, NodeFlags};
use super::yaml::Seg;
use super::{LoadOptions, RateLimitConfig, Rule};
use crate::limit::{Consistency, LimitSpec};

pub(super) struct Loader<'o> {
    opts: &'o LoadOptions,
    domains: Vec<DomainBuilder>,
    by_name: HashMap<String, usize>,
    rules: Vec<Rule>,
}

impl<'o> Loader<'o> {
    pub fn new(opts: &'o LoadOptions) -> Loader<'o> {
        Loader {
            opts,
            domains: Vec::new(),
            by_name: HashMap::new(),
            rules: Vec::new(),
        }
    }

    /// Add one file, and say what in it has no effect (warnings, which load). On error the
    /// file may be partly added; the caller rejects the config. Every problem of the file,
    /// in file order: after a problem the walk goes on with the next field or descriptor (a
    /// descriptor that cannot be placed in the tree, its children with it, is skipped).
    pub fn load(&mut self, root: RawRoot) -> Result<Vec<Problem>, Vec<Problem>> {
        let domain_at = [Seg::Key("domain")];
        if root.domain.is_empty() {
            return Err(vec![Problem::new(
                "config file cannot have empty domain",
                &domain_at,
            )]);
        }
        let index = match self.by_name.get(&root.domain) {
            Some(_) if !self.opts.merge_domains => {
                return Err(vec![Problem::new(
                    format!("duplicate domain '{}' in config file", root.domain),
                    &domain_at,
                )]);
            }
            Some(&i) => i,
            None => {
                self.domains.push(DomainBuilder::new(
                    &root.domain,
                    self.opts.sanitize_metric_dots,
                ));
                self.by_name
                    .insert(root.domain.clone(), self.domains.len() - 1);
                self.domains.len() - 1
            }
        };
        let Some(domain) = self.domains.get_mut(index) else {
            return Ok(Vec::new());
        };
        let mut walk = Walk {
            domain,
            rules: &mut self.rules,
            path: vec![Seg::Key("descriptors")],
            sanitize_dots: self.opts.sanitize_metric_dots,
            problems: Vec::new(),
            warnings: Vec::new(),
        };
        let prefix = format!("{}.", root.domain);
        let keys = Keys {
            path: &prefix,
            stats: &prefix,
        };
        walk.descriptors(None, keys, root.descriptors, 0);
        if walk.problems.is_empty() {
            Ok(walk.warnings)
        } else {
            Err(walk.problems)
        }
    }

    pub fn finish(self) -> RateLimitConfig {
        let rules: Arc<[Rule]> = self.rules.into();
        let domains = self
            .domains
            .into_iter()
            .map(|b| (Box::<str>::from(&*b.name), b.freeze(&rules)))
            .collect();
        RateLimitConfig {
            domains,
            rules,
            warnings: Vec::new(),
        }
    }
}

/// What a descriptor's `rate_limit` / `rate_limits` compile to.
struct Limits {
    specs: Vec<LimitSpec>,
    unlimited: bool,
    replaces: Vec<String>,
    /// The rule's name: its `rate_limit`'s, or the first named `rate_limits` entry's.
    name: Option<String>,
}

struct Walk<'a> {
    domain: &'a mut DomainBuilder,
    rules: &'a mut Vec<Rule>,
    /// Where the current descriptor is in the file, for error positions.
    path: Vec<Seg>,
    /// `--sanitize-metric-dots`.
    sanitize_dots: bool,
    /// Every problem found so far, in file order.
    problems: Vec<Problem>,
    /// What loads but has no effect (`detailed_metric` where no rule counts).
    warnings: Vec<Problem>,
}

/// A parent's key prefixes: its config path (`domain.k_v.`, for messages and `full_key`)
/// and its stats key (the same, dots of keys and values sanitized when asked).
#[derive(Clone, Copy)]
struct Keys<'k> {
    path: &'k str,
    stats: &'k str,
}

impl Walk<'_> {
    fn problem(&self, msg: impl Into<String>, rest: &[Seg]) -> Problem {
        let mut at = self.path.clone();
        at.extend_from_slice(rest);
        Problem {
            msg: msg.into(),
            at,
        }
    }

    fn descriptors(
        &mut self,
        parent: Option<u32>,
        parent_key: Keys<'_>,
        list: Vec<RawDescriptor>,
        depth: usize,
    ) {
        for (i, d) in list.into_iter().enumerate() {
            self.path.push(Seg::Index(i));
            self.descriptor(parent, parent_key, d, depth);
            self.path.pop();
        }
    }

    /// Record `p`; the walk goes on.
    fn report(&mut self, p: Problem) {
        self.problems.push(p);
    }

    fn descriptor(
        &mut self,
        parent: Option<u32>,
        parent_key: Keys<'_>,
        d: RawDescriptor,
        depth: usize,
    ) {
        if depth >= MAX_DEPTH {
            let p = self.problem(
                format!("descriptors are nested more than {MAX_DEPTH} levels deep"),
                &[],
            );
            return self.report(p);
        }
        if d.key.is_empty() {
            let p = self.problem("descriptor has empty key", &[]);
            return self.report(p);
        }
        let final_key = if d.value.is_empty() {
            d.key.clone()
        } else {
            format!("{}_{}", d.key, d.value)
        };
        let full_key = format!("{}{final_key}", parent_key.path);
        // Every dot of `final_key` is a key's or a value's (levels are joined outside it).
        let stats_key = if self.sanitize_dots {
            format!("{}{}", parent_key.stats, final_key.replace('.', "_"))
        } else {
            full_key.clone()
        };
        let flags = NodeFlags {
            share_threshold: d.share_threshold,
            value_to_metric: d.value_to_metric,
            detailed_metric: d.detailed_metric,
        };
        let Some(node) = self.domain.add(parent, &final_key, flags) else {
            let p = self.problem(
                format!("duplicate descriptor composite key '{full_key}'"),
                &[],
            );
            return self.report(p);
        };
        let limits = self.limits(&d).unwrap_or_else(|problems| {
            self.problems.extend(problems);
            None
        });
        if d.share_threshold && !final_key.contains('*') {
            let p = self.problem(
                format!(
                    "share_threshold can only be used with wildcard values (containing '*'), but found key '{final_key}'"
                ),
                &[Seg::Key("share_threshold")],
            );
            self.report(p);
        }
        let consistency = self.consistency(&d, limits.as_ref()).unwrap_or_else(|p| {
            self.report(p);
            None
        });
        let metadata = match d.metadata {
            Some(Err(e)) => {
                let p = self.problem(
                    format!("error parsing metadata: {e}"),
                    &[Seg::Key("metadata")],
                );
                self.report(p);
                None
            }
            Some(Ok(m)) => Some(Arc::new(m)),
            None => None,
        };
        let response = match d.response {
            Some(raw) => {
                let unlimited = limits.as_ref().is_some_and(|l| l.unlimited);
                match response::compile(raw, limits.is_some(), unlimited) {
                    Ok(r) => Some(Arc::new(r)),
                    Err(p) => {
                        let p = self.problem(p.msg, &p.at);
                        self.report(p);
                        None
                    }
                }
            }
            None => None,
        };
        // Their `detailed_metric` belongs to the rate limit of its descriptor: it names the
        // series of the rule a request lands on. Elsewhere it is accepted (their files load)
        // and said to do nothing.
        if d.detailed_metric {
            let why = match &limits {
                None => Some(
                    "has no rate_limit: it names the series of the rule a request lands on, so put it on that descriptor",
                ),
                Some(l) if l.unlimited => Some("is unlimited, and unlimited rules count nothing"),
                Some(_) => None,
            };
            if let Some(why) = why {
                let w = self.problem(
                    format!("detailed_metric has no effect: '{full_key}' {why}"),
                    &[Seg::Key("detailed_metric")],
                );
                self.warnings.push(w);
            }
        }
        if let Some(l) = limits {
            let id = self.rules.len();
            self.rules.push(Rule {
                id,
                full_key: full_key.as_str().into(),
                stats_key: stats_key.as_str().into(),
                limits: l.specs.into(),
                unlimited: l.unlimited,
                replaces: l.replaces.into_iter().map(Arc::from).collect(),
                shadow_mode: d.shadow_mode,
                quota_mode: d.quota_mode,
                consistency,
                metadata,
                name: l.name.map(Arc::from),
                response,
            });
            if let Ok(id) = u32::try_from(id) {
                self.domain.set_rule(node, id);
            }
        }
        self.path.push(Seg::Key("descriptors"));
        let (path, stats) = (format!("{full_key}."), format!("{stats_key}."));
        let keys = Keys {
            path: &path,
            stats: &stats,
        };
        self.descriptors(Some(node), keys, d.descriptors, depth + 1);
        self.path.pop();
    }

    /// The descriptor's `consistency`: a known name, and `batched` only where every limit's
    /// algorithm can be batched (`Consistency::sound_for`).
    fn consistency(
        &self,
        d: &RawDescriptor,
        limits: Option<&Limits>,
    ) -> Result<Option<Consistency>, Problem> {
        let Some(raw) = &d.consistency else {
            return Ok(None);
        };
        let here = [Seg::Key("consistency")];
        let Some(c) = Consistency::parse(raw) else {
            return Err(self.problem(
                format!("consistency must be strict or batched, found '{raw}'"),
                &here,
            ));
        };
        if c == Consistency::Batched
            && let Some(l) = limits.and_then(|l| {
                l.specs
                    .iter()
                    .find(|l| !Consistency::sound_for(l.algorithm))
            })
        {
            return Err(self.problem(
                format!(
                    "consistency batched is not supported with algorithm {} (a batch would charge its hits at flush time; the log records each hit's own time)",
                    l.algorithm
                ),
                &here,
            ));
        }
        Ok(Some(c))
    }

    /// The descriptor's limits, or `None` without `rate_limit`/`rate_limits`; every problem
    /// of them (each entry of `rate_limits` is checked).
    fn limits(&self, d: &RawDescriptor) -> Result<Option<Limits>, Vec<Problem>> {
        match (&d.rate_limit, &d.rate_limits) {
            (None, None) => Ok(None),
            (Some(_), Some(_)) => Err(vec![self.problem(
                "rate_limit and rate_limits cannot both be set (use one rate_limits list)",
                &[Seg::Key("rate_limits")],
            )]),
            (Some(raw), None) => {
                let at = |p: Problem| {
                    self.problem(p.msg, &[&[Seg::Key("rate_limit")], &p.at[..]].concat())
                };
                let own: Vec<&str> = vec![raw.name.as_str()];
                let (specs, unlimited) =
                    match limits::compile(raw, 0, Place::Single, &own).map_err(|p| vec![at(p)])? {
                        Compiled::Unlimited => (Vec::new(), true),
                        Compiled::Limit(spec) => (vec![spec], false),
                    };
                Ok(Some(Limits {
                    specs,
                    unlimited,
                    replaces: raw.replaces.clone(),
                    name: Some(raw.name.as_str())
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned),
                }))
            }
            (None, Some(list)) => {
                let here = [Seg::Key("rate_limits")];
                if list.is_empty() {
                    return Err(vec![self.problem("rate_limits must not be empty", &here)]);
                }
                if list.len() > MAX_RATE_LIMITS {
                    return Err(vec![self.problem(
                        format!(
                            "rate_limits cannot have more than {MAX_RATE_LIMITS} entries, found {}",
                            list.len()
                        ),
                        &here,
                    )]);
                }
                let own: Vec<&str> = list
                    .iter()
                    .map(|l| l.name.as_str())
                    .filter(|n| !n.is_empty())
                    .collect();
                let mut specs = Vec::with_capacity(list.len());
                let mut replaces = Vec::new();
                let mut problems = Vec::new();
                for (i, raw) in list.iter().enumerate() {
                    let item = [Seg::Key("rate_limits"), Seg::Index(i)];
                    let prefix = format!("rate_limits[{i}]: ");
                    if raw.unlimited {
                        problems.push(self.problem(
                            format!(
                                "{prefix}unlimited is not allowed in rate_limits (use rate_limit)"
                            ),
                            &[&item[..], &[Seg::Key("unlimited")]].concat(),
                        ));
                        continue;
                    }
                    let slot = u8::try_from(i).unwrap_or(u8::MAX);
                    match limits::compile(raw, slot, Place::List, &own) {
                        Ok(Compiled::Limit(spec)) => specs.push(spec),
                        Ok(Compiled::Unlimited) => {}
                        Err(p) => problems.push(self.problem(
                            format!("{prefix}{}", p.msg),
                            &[&item[..], &p.at[..]].concat(),
                        )),
                    }
                    replaces.extend(raw.replaces.iter().cloned());
                }
                if !problems.is_empty() {
                    return Err(problems);
                }
                Ok(Some(Limits {
                    specs,
                    unlimited: false,
                    replaces,
                    name: own.first().map(|n| (*n).to_owned()),
                }))
            }
        }
    }
}
