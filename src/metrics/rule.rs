//! The per-rule counters (their `ratelimit.service.rate_limit.<key>.*` statistics) and one
//! hit's outcome in their terms.

use std::sync::atomic::AtomicU64;

use prometheus::{IntCounter, IntCounterVec};

/// Counters of one stats key.
#[derive(Debug)]
pub struct RuleCounters {
    pub total_hits: IntCounter,
    pub over_limit: IntCounter,
    pub near_limit: IntCounter,
    pub within_limit: IntCounter,
    pub shadow_mode: IntCounter,
    /// Denials answered from the local over-limit cache without asking the store.
    pub over_limit_with_local_cache: IntCounter,
    /// The sanitized stats key, as it appears in statsd names (`statsd.rs`).
    pub(super) statsd_key: Box<str>,
    /// Values last sent to statsd, in [`RULE_STATS`] order (only the flusher touches them).
    pub(super) statsd_sent: [AtomicU64; 6],
}

/// The per-rule statistics, in the order of [`RuleCounters::values`]: their names in statsd
/// (`ratelimit.service.rate_limit.<key>.<stat>`) and the suffix of the Prometheus family.
pub const RULE_STATS: [&str; 6] = [
    "total_hits",
    "over_limit",
    "near_limit",
    "within_limit",
    "shadow_mode",
    "over_limit_with_local_cache",
];

/// One hit's outcome, in the terms of their statistics.
#[derive(Clone, Copy, Debug)]
pub struct HitStats {
    /// Capacity of the reported limit.
    pub limit: u64,
    /// Usage before the hit (whole requests).
    pub before: u64,
    /// Cost of the hit.
    pub hits: u64,
    /// The store denied the hit.
    pub over: bool,
    /// Denied by a penalty lock (usage did not change).
    pub penalized: bool,
    /// Per-rule shadow mode turned the denial into OK.
    pub shadowed: bool,
    /// Answered from the local over-limit cache.
    pub cached: bool,
}

impl RuleCounters {
    /// Current values, in [`RULE_STATS`] order.
    pub fn values(&self) -> [u64; 6] {
        [
            self.total_hits.get(),
            self.over_limit.get(),
            self.near_limit.get(),
            self.within_limit.get(),
            self.shadow_mode.get(),
            self.over_limit_with_local_cache.get(),
        ]
    }
}

pub(super) fn counters(
    rule: &[IntCounterVec; 6],
    labels: [&str; 4],
    statsd_key: &str,
) -> RuleCounters {
    let c = |i: usize| rule[i].with_label_values(&labels);
    RuleCounters {
        total_hits: c(0),
        over_limit: c(1),
        near_limit: c(2),
        within_limit: c(3),
        shadow_mode: c(4),
        over_limit_with_local_cache: c(5),
        statsd_key: statsd_key.into(),
        statsd_sent: Default::default(),
    }
}
