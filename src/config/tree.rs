//! The compiled, immutable descriptor tree of one domain, and the request walk.
//!
//! Nodes live in one arena. Each level keeps every child under the FNV hash of its
//! `finalKey` (their map key: `key` or `key_value`), sorted, so a lookup hashes the request's
//! `key`, `_`, `value` as a stream and never builds the string; wildcard children are kept
//! apart in declaration order with their glob precompiled.
//!
//! The walk reports each level to an optional [`Trace`] (`sluice explain`); the matcher
//! itself passes `()`, which compiles to nothing. Wildcard keys match through `glob.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use super::glob::Glob;
use super::trace::{Children, How, NodeNames, Step, Trace};
use super::{EntryRef, Match, Rule};

/// Deepest descriptor nesting accepted. serde_yaml's recursion limit already stops YAML
/// at 63 levels; the cap keeps the per-level bit masks of [`Match`] sound regardless.
pub(super) const MAX_DEPTH: usize = 64;

/// Flags of a descriptor that matter after loading.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NodeFlags {
    pub share_threshold: bool,
    pub value_to_metric: bool,
    pub detailed_metric: bool,
}

#[derive(Debug)]
pub(super) struct Node {
    pub final_key: Box<str>,
    glob: Option<Glob>,
    children: Level,
    pub rule: Option<u32>,
    pub flags: NodeFlags,
    /// Rule nodes only: node ids from the first level down to this node.
    pub path: Box<[u32]>,
    /// Rule nodes only: the stats key can never contain a request value, so it is always
    /// the rule's `full_key`.
    pub static_stats: bool,
    /// Rule nodes only: some level of the path has `share_threshold`.
    pub any_share: bool,
}

impl Node {
    /// The value a `share_threshold` level stands for: their `TrimPrefix(finalKey, key+"_")`.
    pub fn shared_value<'a>(&'a self, request_key: &[u8]) -> &'a [u8] {
        let fk = self.final_key.as_bytes();
        match fk.strip_prefix(request_key) {
            Some(rest) => rest.strip_prefix(b"_").unwrap_or(fk),
            None => fk,
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Level {
    /// `(hash of finalKey, node)`, sorted by hash.
    pub exact: Box<[(u64, u32)]>,
    /// Children whose finalKey contains `*`, in declaration order.
    pub wildcards: Box<[u32]>,
}

/// One domain's compiled descriptor tree.
#[derive(Debug)]
pub struct Domain {
    name: Arc<str>,
    /// Stats keys built from request values replace the dots of keys and values.
    sanitize_dots: bool,
    root: Level,
    nodes: Box<[Node]>,
    rules: Arc<[Rule]>,
}

impl Domain {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `--sanitize-metric-dots`, for the stats keys built from request values.
    pub fn sanitize_dots(&self) -> bool {
        self.sanitize_dots
    }

    /// envoyproxy/ratelimit's `GetLimit` walk: per entry, exact `key_value` child, else
    /// wildcard children in declaration order, else the key-only child; no backtracking; a
    /// rule applies only when the last entry lands on a node with a limit.
    pub fn find<E: EntryRef>(&self, entries: &[E]) -> Option<Match<'_>> {
        self.find_traced(entries, &mut ())
    }

    /// [`Domain::find`], telling `trace` what happened at each level (`sluice explain`).
    /// The one walk: `find` is this with a trace that does nothing, which compiles away.
    pub fn find_traced<'a, E: EntryRef, T: Trace<'a>>(
        &'a self,
        entries: &[E],
        trace: &mut T,
    ) -> Option<Match<'a>> {
        let Some(last) = entries.len().checked_sub(1) else {
            trace.step(Step::NoEntries);
            return None;
        };
        let mut level = &self.root;
        // Built only if a level with wildcards is reached, then reused.
        let mut joined = Vec::new();
        let (mut exact, mut wild) = (0u64, 0u64);
        for (i, entry) in entries.iter().enumerate().take(MAX_DEPTH) {
            let (key, value) = (entry.key(), entry.value());
            let children = Children::new(self, &level.exact, &level.wildcards);
            // `key_value` hashes as a continuation of `key`: one pass over the key serves
            // both the exact and the key-only lookups.
            let key_hash = fnv(FNV_OFFSET, key);
            let kv_hash = fnv(fnv(key_hash, b"_"), value);
            let (id, how) = if let Some(id) = self.lookup(level, kv_hash, key, Some(value)) {
                exact |= 1 << i;
                (id, How::Exact)
            } else if let Some(id) = self.wildcard(level, key, value, &mut joined) {
                wild |= 1 << i;
                (id, How::Wildcard)
            } else if let Some(id) = self.lookup(level, key_hash, key, None) {
                (id, How::KeyOnly)
            } else {
                trace.step(Step::NoMatch { entry: i, children });
                return None;
            };
            let node = self.nodes.get(id as usize)?;
            trace.step(Step::Matched {
                entry: i,
                how,
                node: &node.final_key,
                children,
            });
            if i == last {
                let Some(rule) = node.rule.and_then(|r| self.rules.get(r as usize)) else {
                    trace.step(Step::NoRule { entry: i });
                    return None;
                };
                return Some(Match {
                    rule,
                    domain: self,
                    node: id,
                    exact,
                    wild,
                });
            }
            if node.children.exact.is_empty() {
                trace.step(Step::NoChildren { entry: i });
                return None;
            }
            level = &node.children;
        }
        trace.step(Step::TooDeep { max: MAX_DEPTH });
        None
    }

    /// The child whose finalKey is `key` (`value` None) or `key_value`; `h` is its hash.
    fn lookup(&self, level: &Level, h: u64, key: &[u8], value: Option<&[u8]>) -> Option<u32> {
        let start = level.exact.partition_point(|&(x, _)| x < h);
        level.exact[start..]
            .iter()
            .take_while(|&&(x, _)| x == h)
            .map(|&(_, id)| id)
            .find(|&id| {
                self.nodes
                    .get(id as usize)
                    .is_some_and(|n| is_final_key(&n.final_key, key, value))
            })
    }

    fn wildcard(
        &self,
        level: &Level,
        key: &[u8],
        value: &[u8],
        joined: &mut Vec<u8>,
    ) -> Option<u32> {
        if level.wildcards.is_empty() {
            return None;
        }
        joined.clear();
        joined.extend_from_slice(key);
        joined.push(b'_');
        joined.extend_from_slice(value);
        level.wildcards.iter().copied().find(|&id| {
            self.nodes
                .get(id as usize)
                .and_then(|n| n.glob.as_ref())
                .is_some_and(|g| g.matches(joined))
        })
    }

    pub(super) fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.get(id as usize)
    }
}

impl NodeNames for Domain {
    fn final_key(&self, id: u32) -> Option<&str> {
        self.node(id).map(|n| &*n.final_key)
    }
}

fn is_final_key(fk: &str, key: &[u8], value: Option<&[u8]>) -> bool {
    let fk = fk.as_bytes();
    match value {
        None => fk == key,
        Some(v) => {
            fk.len() == key.len() + 1 + v.len()
                && fk.starts_with(key)
                && fk.ends_with(v)
                && fk.get(key.len()) == Some(&b'_')
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, streamable over the pieces of `key_value`. Collisions only cost a comparison,
/// and the buckets hold config keys only, so request values cannot lengthen them.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A domain's tree while files are being loaded (merge appends to it).
#[derive(Debug)]
pub(super) struct DomainBuilder {
    pub name: Arc<str>,
    pub sanitize_dots: bool,
    nodes: Vec<BuildNode>,
    root: BuildLevel,
}

#[derive(Debug)]
struct BuildNode {
    final_key: String,
    parent: Option<u32>,
    children: BuildLevel,
    rule: Option<u32>,
    flags: NodeFlags,
}

#[derive(Debug, Default)]
struct BuildLevel {
    order: Vec<u32>,
    by_key: HashMap<String, u32>,
}

impl DomainBuilder {
    pub fn new(name: &str, sanitize_dots: bool) -> DomainBuilder {
        DomainBuilder {
            name: Arc::from(name),
            sanitize_dots,
            nodes: Vec::new(),
            root: BuildLevel::default(),
        }
    }

    /// Add a child of `parent` (`None`: the root). `None` if the level already has a child
    /// with this finalKey (their duplicate composite key).
    pub fn add(&mut self, parent: Option<u32>, final_key: &str, flags: NodeFlags) -> Option<u32> {
        let id = u32::try_from(self.nodes.len()).ok()?;
        let level = match parent {
            None => &mut self.root,
            Some(p) => &mut self.nodes.get_mut(p as usize)?.children,
        };
        if level.by_key.contains_key(final_key) {
            return None;
        }
        level.by_key.insert(final_key.to_owned(), id);
        level.order.push(id);
        self.nodes.push(BuildNode {
            final_key: final_key.to_owned(),
            parent,
            children: BuildLevel::default(),
            rule: None,
            flags,
        });
        Some(id)
    }

    pub fn set_rule(&mut self, node: u32, rule: u32) {
        if let Some(n) = self.nodes.get_mut(node as usize) {
            n.rule = Some(rule);
        }
    }

    pub fn freeze(self, rules: &Arc<[Rule]>) -> Domain {
        let level = |b: &BuildLevel, nodes: &[BuildNode]| {
            let mut exact: Vec<(u64, u32)> = b
                .order
                .iter()
                .map(|&id| (fnv(FNV_OFFSET, nodes[id as usize].final_key.as_bytes()), id))
                .collect();
            exact.sort_unstable();
            let wildcards = b
                .order
                .iter()
                .copied()
                .filter(|&id| nodes[id as usize].final_key.contains('*'))
                .collect();
            Level {
                exact: exact.into(),
                wildcards,
            }
        };
        let root = level(&self.root, &self.nodes);
        let nodes = self
            .nodes
            .iter()
            .zip(0u32..)
            .map(|(b, id)| {
                let path = match b.rule {
                    Some(_) => self.path_to(id),
                    None => Vec::new(),
                };
                let on_path = || path.iter().map(|&id| &self.nodes[id as usize]);
                let static_stats = !b.flags.detailed_metric
                    && on_path().all(|n| {
                        !n.flags.value_to_metric
                            && !n.final_key.contains('*')
                            && !n.final_key.ends_with('_')
                    });
                let any_share = on_path().any(|n| n.flags.share_threshold);
                Node {
                    final_key: b.final_key.as_str().into(),
                    glob: Glob::new(&b.final_key),
                    children: level(&b.children, &self.nodes),
                    rule: b.rule,
                    flags: b.flags,
                    path: path.into(),
                    static_stats,
                    any_share,
                }
            })
            .collect();
        Domain {
            name: self.name,
            sanitize_dots: self.sanitize_dots,
            root,
            nodes,
            rules: Arc::clone(rules),
        }
    }

    /// Node ids from the first level down to `id` (parents always have smaller ids).
    fn path_to(&self, id: u32) -> Vec<u32> {
        let mut path = vec![id];
        let mut parent = self.nodes.get(id as usize).and_then(|n| n.parent);
        while let Some(p) = parent {
            path.push(p);
            parent = self.nodes.get(p as usize).and_then(|n| n.parent);
        }
        path.reverse();
        path
    }
}
