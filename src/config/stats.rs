//! What a match means beyond its rule: the state identity (with `share_threshold` patterns
//! in place of values), the stats key (their §2.13 rules, level by level), and `/rlconfig`.

use std::borrow::Cow;
use std::fmt::Write;

use super::tree::{Domain, MAX_DEPTH, Node};
use super::{EntryRef, Match, RateLimitConfig};
use crate::limit::{Algorithm, StateTag};

impl<'a> Match<'a> {
    fn leaf(&self) -> Option<&'a Node> {
        self.domain.node(self.node)
    }

    /// The node entry `i` of the request landed on.
    fn level(&self, i: usize) -> Option<&'a Node> {
        let id = *self.leaf()?.path.get(i)?;
        self.domain.node(id)
    }

    fn by_wildcard(&self, i: usize) -> bool {
        i < MAX_DEPTH && (self.wild >> i) & 1 == 1
    }

    fn by_exact(&self, i: usize) -> bool {
        i < MAX_DEPTH && (self.exact >> i) & 1 == 1
    }

    /// The node entry `i` stands for when it shares its counter (`share_threshold`
    /// applies only to levels reached through the glob).
    fn shared(&self, i: usize) -> Option<&'a Node> {
        if !self.by_wildcard(i) {
            return None;
        }
        self.level(i).filter(|n| n.flags.share_threshold)
    }

    pub(super) fn tag<E: EntryRef>(&self, entries: &[E]) -> StateTag {
        let name = self.domain.name();
        if !self.leaf().is_some_and(|l| l.any_share) {
            return StateTag::compute(name, entries.iter().map(|e| (e.key(), e.value())));
        }
        StateTag::compute(
            name,
            entries
                .iter()
                .enumerate()
                .map(|(i, e)| match self.shared(i) {
                    Some(node) => (e.key(), node.shared_value(e.key())),
                    None => (e.key(), e.value()),
                }),
        )
    }

    /// envoyproxy/ratelimit's cache key without its prefix and window start:
    /// `domain + "_" + Σ(key + "_" + value + "_")`, with the pattern in place of the value at
    /// `share_threshold` levels, as `Match::tag` (their `src/limiter/cache_key.go`).
    pub fn reference_cache_key<E: EntryRef>(&self, entries: &[E]) -> Vec<u8> {
        let values = entries.iter().enumerate().map(|(i, e)| {
            let v = match self.shared(i) {
                Some(node) => node.shared_value(e.key()),
                None => e.value(),
            };
            (e.key(), v)
        });
        reference_cache_key(self.domain.name(), values)
    }

    pub(super) fn stats<E: EntryRef>(&self, entries: &[E]) -> Cow<'a, str> {
        let Some(leaf) = self.leaf() else {
            return Cow::Borrowed(&self.rule.stats_key);
        };
        if leaf.static_stats {
            return Cow::Borrowed(&self.rule.stats_key);
        }
        let mut out = String::with_capacity(self.rule.stats_key.len() + 16);
        out.push_str(self.domain.name());
        let dots = self.domain.sanitize_dots();
        let push_shown = |out: &mut String, b: &[u8]| push_fragment(out, b, dots);
        let push_kv = |out: &mut String, k: &[u8], v: &[u8]| {
            push_shown(out, k);
            if !v.is_empty() {
                out.push('_');
                push_shown(out, v);
            }
        };
        if leaf.flags.detailed_metric {
            // Request values throughout; shared levels keep their pattern. Only when some
            // level shares do plain entries drop the `_` of an empty value (their code).
            let any_shared = (0..entries.len()).any(|i| self.shared(i).is_some());
            for (i, e) in entries.iter().enumerate() {
                out.push('.');
                match self.shared(i) {
                    Some(node) => push_kv(&mut out, e.key(), node.shared_value(e.key())),
                    None if any_shared => push_kv(&mut out, e.key(), e.value()),
                    None => {
                        push_shown(&mut out, e.key());
                        out.push('_');
                        push_shown(&mut out, e.value());
                    }
                }
            }
            return Cow::Owned(out);
        }
        for (i, e) in entries.iter().enumerate() {
            out.push('.');
            let (k, v) = (e.key(), e.value());
            let Some(node) = self.level(i) else {
                push_shown(&mut out, k);
                continue;
            };
            if self.by_wildcard(i) {
                if node.flags.value_to_metric && !node.flags.share_threshold {
                    push_kv(&mut out, k, v);
                } else {
                    push_shown(&mut out, k);
                    out.push('_');
                    push_shown(&mut out, node.shared_value(k));
                }
            } else if self.by_exact(i) || node.flags.value_to_metric {
                push_kv(&mut out, k, v);
            } else {
                push_shown(&mut out, k);
            }
        }
        Cow::Owned(out)
    }
}

/// Appends request bytes as text: UTF-8 as is, every byte of an invalid sequence as `\xNN`
/// (so 0xFF and 0xFE stay distinguishable, where U+FFFD would merge them). Stats keys,
/// metric labels and logs show values this way; state tags hash the raw bytes, so two
/// values that show alike (`\xFF` typed out, and the byte 0xFF) still never share a
/// counter, only, at worst, a metric series.
pub fn push_shown(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
}

/// [`push_shown`], and with `sanitize_dots` every `.` of the fragment as `_`
/// (`SANITIZE_DESCRIPTOR_METRIC_DOTS`: a stats key's levels are joined with dots, so a dot
/// inside a key or value would add a level to its metric names).
pub fn push_fragment(out: &mut String, bytes: &[u8], sanitize_dots: bool) {
    if !sanitize_dots || !bytes.contains(&b'.') {
        return push_shown(out, bytes);
    }
    let start = out.len();
    push_shown(out, bytes);
    let fragment = out.split_off(start).replace('.', "_");
    out.push_str(&fragment);
}

/// [`push_shown`] into a new string, borrowing when the bytes are UTF-8.
pub fn shown(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => {
            let mut out = String::with_capacity(bytes.len() + 8);
            push_shown(&mut out, bytes);
            Cow::Owned(out)
        }
    }
}

/// `/rlconfig`: their line format, extended with the algorithm and its parameters.
pub(super) fn dump(config: &RateLimitConfig) -> String {
    let mut lines = Vec::new();
    for rule in config.rules.iter() {
        let flags = format!(
            "shadow_mode: {}, quota_mode: {}",
            rule.shadow_mode, rule.quota_mode
        );
        if rule.unlimited {
            lines.push(format!(
                "{}: unit=UNKNOWN requests_per_unit=0, {flags}",
                rule.full_key
            ));
            continue;
        }
        for l in rule.limits.iter() {
            // A window of several units says so next to its unit, where a reader of
            // their format looks (`unit=MINUTE unit_multiplier=5 requests_per_unit=100`).
            let mut multiplier = match l.unit_multiplier {
                0 | 1 => String::new(),
                m => format!(" unit_multiplier={m}"),
            };
            // So does a calendar window (`unit=MONTH calendar=Asia/Kolkata`).
            if let Some(c) = &l.calendar {
                multiplier.push_str(&format!(" calendar={}", c.zone()));
            }
            let mut line = format!(
                "{}: unit={}{multiplier} requests_per_unit={}, {flags}, algorithm={}",
                rule.full_key, l.unit, l.requests_per_unit, l.algorithm
            );
            if l.algorithm.has_burst() {
                line.push_str(&format!(" burst={}", l.burst));
            }
            if l.algorithm == Algorithm::SlidingWindow {
                line.push_str(&format!(" buckets={}", l.buckets));
            }
            // Printed when it differs from the default (inside `rate_limits`: false).
            let default_overdraft = rule.limits.len() == 1 && l.algorithm.default_overdraft();
            if l.overdraft != default_overdraft {
                line.push_str(&format!(" overdraft={}", l.overdraft));
            }
            if l.penalty_ms > 0 {
                line.push_str(&format!(" penalty_seconds={}", l.penalty_ms / 1000));
            }
            if rule.limits.len() > 1 {
                line.push_str(&format!(" slot={}", l.slot));
            }
            lines.push(line);
        }
    }
    lines.sort();
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// `domain + "_" + Σ(key + "_" + value + "_")`: envoyproxy/ratelimit's cache key without its
/// prefix and window start (`--redis-reference-keys`).
pub fn reference_cache_key<'e>(
    domain: &str,
    entries: impl Iterator<Item = (&'e [u8], &'e [u8])>,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(domain.len() + 32);
    key.extend_from_slice(domain.as_bytes());
    key.push(b'_');
    for (k, v) in entries {
        key.extend_from_slice(k);
        key.push(b'_');
        key.extend_from_slice(v);
        key.push(b'_');
    }
    key
}

/// envoyproxy/ratelimit's cache key of a request-supplied `limit` override, without prefix
/// and window start: domain + entries as sent.
pub fn override_reference_cache_key<E: EntryRef>(domain: &str, entries: &[E]) -> Vec<u8> {
    reference_cache_key(domain, entries.iter().map(|e| (e.key(), e.value())))
}

/// State tag of a request-supplied `limit` override: domain + entries as sent.
pub fn override_state_tag<E: EntryRef>(domain: &str, entries: &[E]) -> StateTag {
    StateTag::compute(domain, entries.iter().map(|e| (e.key(), e.value())))
}

impl Domain {
    /// The stats key of a request override of this domain.
    pub fn override_stats_key<E: EntryRef>(&self, entries: &[E]) -> String {
        override_stats_key(self.name(), entries, self.sanitize_dots())
    }
}

/// Stats key of a request override: `domain.k1_v1.k2` (value omitted when empty; bytes
/// shown as [`push_shown`] does, dots as `_` when `sanitize_dots`).
pub fn override_stats_key<E: EntryRef>(domain: &str, entries: &[E], sanitize_dots: bool) -> String {
    let mut s = String::from(domain);
    for e in entries {
        s.push('.');
        push_fragment(&mut s, e.key(), sanitize_dots);
        if !e.value().is_empty() {
            s.push('_');
            push_fragment(&mut s, e.value(), sanitize_dots);
        }
    }
    s
}
