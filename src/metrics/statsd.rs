//! The statsd view of the same counters: envoyproxy/ratelimit's flat names (their gostats
//! scopes `ratelimit.service…` and `ratelimit_server…`), counter deltas since the previous
//! flush, and response times in whole milliseconds for their `response_time` timer.
//!
//! Only the statsd flusher (`telemetry::statsd`) calls in here. The request path is
//! unchanged: counters stay the Prometheus atomics, and the only addition is one atomic add
//! per request into `Timings`, made only when statsd is on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::{Metrics, RULE_STATS, RuleCounters};

/// Prefix of every per-rule stat: `ratelimit.service.rate_limit.<stats key>.<stat>`.
pub const RATE_LIMIT_PREFIX: &str = "ratelimit.service.rate_limit.";
/// Their gRPC interceptor's timer (milliseconds, one sample per call).
pub const RESPONSE_TIME: &str = "ratelimit_server.ShouldRateLimit.response_time";

/// Service counters by statsd name, in the order of `Metrics::service_values`.
pub const SERVICE_STATS: [&str; 6] = [
    "ratelimit.service.config_load_success",
    "ratelimit.service.config_load_error",
    "ratelimit.service.global_shadow_mode",
    "ratelimit.service.call.should_rate_limit.redis_error",
    "ratelimit.service.call.should_rate_limit.service_error",
    "ratelimit_server.ShouldRateLimit.total_requests",
];

/// Whole milliseconds below this are counted in a fixed array; slower calls (rare) go to a
/// bounded list.
const FAST_MS: usize = 1024;
/// Most slow samples kept between two flushes; beyond it they are dropped, not queued.
const MAX_SLOW: usize = 4096;

/// Values of the service counters last sent.
#[derive(Debug, Default)]
pub(super) struct Sent([AtomicU64; 6]);

/// Response-time samples since the last flush, by whole millisecond (their timer sends
/// `time.Since(start).Milliseconds()`, truncated).
#[derive(Debug)]
pub(super) struct Timings {
    fast: Box<[AtomicU64]>,
    slow: Mutex<Vec<u64>>,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            fast: (0..FAST_MS).map(|_| AtomicU64::new(0)).collect(),
            slow: Mutex::new(Vec::new()),
        }
    }
}

impl Timings {
    pub(super) fn record(&self, elapsed: Duration) {
        let ms = elapsed.as_millis();
        match self.fast.get(ms as usize) {
            Some(slot) if ms < FAST_MS as u128 => {
                slot.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                let mut slow = self.slow.lock();
                if slow.len() < MAX_SLOW {
                    slow.push(u64::try_from(ms).unwrap_or(u64::MAX));
                }
            }
        }
    }
}

impl Metrics {
    /// Keep response times for statsd's timer as well (one more atomic add per request).
    pub fn enable_statsd_timings(&mut self) {
        self.statsd_timings = Some(Timings::default());
    }

    /// One `ShouldRateLimit` call's latency: the Prometheus histogram and, when statsd is
    /// on, the whole-millisecond timer their statsd sink reports.
    pub fn observe_response_time(&self, elapsed: Duration) {
        if self.response_time_ms {
            self.response_time.observe(elapsed.as_millis() as f64);
        } else {
            self.response_time.observe(elapsed.as_secs_f64());
        }
        if let Some(t) = &self.statsd_timings {
            t.record(elapsed);
        }
    }

    /// Values of the service counters, in [`SERVICE_STATS`] order.
    fn service_values(&self) -> [u64; 6] {
        [
            self.config_load_success.get(),
            self.config_load_error.get(),
            self.global_shadow_mode.get(),
            self.redis_error.get(),
            self.service_error.get(),
            self.total_requests.get(),
        ]
    }

    /// Every counter that moved since the previous call, as (statsd name, delta) — their
    /// gostats flush, which sends counters as deltas and skips those that did not change.
    /// Per-rule names use the sanitized stats key; keys past the series cap are reported
    /// under `__overflow__`, like the Prometheus series.
    pub fn statsd_counters(&self, mut emit: impl FnMut(&str, u64)) {
        // Snapshot the handles so the lock is not held while formatting and sending.
        let rules: Vec<Arc<RuleCounters>> = {
            let keys = self.keys.read();
            keys.values()
                .cloned()
                .chain(std::iter::once(self.overflow.clone()))
                .collect()
        };
        let mut name = String::with_capacity(128);
        for c in &rules {
            for ((stat, value), sent) in RULE_STATS.iter().zip(c.values()).zip(&c.statsd_sent) {
                let delta = value.saturating_sub(sent.swap(value, Ordering::Relaxed));
                if delta > 0 {
                    name.clear();
                    name.push_str(RATE_LIMIT_PREFIX);
                    name.push_str(&c.statsd_key);
                    name.push('.');
                    name.push_str(stat);
                    emit(&name, delta);
                }
            }
        }
        let values = self.service_values();
        for ((stat, value), sent) in SERVICE_STATS.iter().zip(values).zip(&self.statsd_sent.0) {
            let delta = value.saturating_sub(sent.swap(value, Ordering::Relaxed));
            if delta > 0 {
                emit(stat, delta);
            }
        }
    }

    /// Response times recorded since the previous call, as (milliseconds, samples), in
    /// increasing order of milliseconds. Nothing when statsd timings are off.
    pub fn statsd_timings(&self, mut emit: impl FnMut(u64, u64)) {
        let Some(t) = &self.statsd_timings else {
            return;
        };
        for (ms, slot) in t.fast.iter().enumerate() {
            let n = slot.swap(0, Ordering::Relaxed);
            if n > 0 {
                emit(ms as u64, n);
            }
        }
        let mut slow = std::mem::take(&mut *t.slow.lock());
        slow.sort_unstable();
        for chunk in slow.chunk_by(|a, b| a == b) {
            emit(chunk[0], chunk.len() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::HitStats;

    #[test]
    fn deltas_since_the_previous_flush_under_their_names() {
        let m = Metrics::new(0.8, 10, "memory");
        let c = m.rule_counters("dom.ip_10.0.0.1");
        let hit = |over| HitStats {
            limit: 1,
            before: 0,
            hits: 1,
            over,
            penalized: false,
            shadowed: false,
            cached: false,
        };
        m.record_hit(&c, hit(false));
        m.total_requests.inc();
        let mut got = Vec::new();
        m.statsd_counters(|n, d| got.push(format!("{n}:{d}")));
        got.sort();
        assert_eq!(
            got,
            [
                "ratelimit.service.rate_limit.dom.ip_10_0_0_1.near_limit:1",
                "ratelimit.service.rate_limit.dom.ip_10_0_0_1.total_hits:1",
                "ratelimit.service.rate_limit.dom.ip_10_0_0_1.within_limit:1",
                "ratelimit_server.ShouldRateLimit.total_requests:1",
            ]
        );
        // Nothing moved: nothing sent.
        let mut again = Vec::new();
        m.statsd_counters(|n, d| again.push(format!("{n}:{d}")));
        assert!(again.is_empty(), "{again:?}");
        c.over_limit.inc_by(3);
        let mut third = Vec::new();
        m.statsd_counters(|n, d| third.push(format!("{n}:{d}")));
        assert_eq!(
            third,
            ["ratelimit.service.rate_limit.dom.ip_10_0_0_1.over_limit:3"]
        );
    }

    #[test]
    fn timings_by_whole_millisecond_then_reset() {
        let mut m = Metrics::new(0.8, 10, "memory");
        let mut none = Vec::new();
        m.statsd_timings(|ms, n| none.push((ms, n)));
        assert!(none.is_empty());
        m.enable_statsd_timings();
        for us in [10, 999, 1_500, 2_000_000, 2_000_400] {
            m.observe_response_time(Duration::from_micros(us));
        }
        let mut got = Vec::new();
        m.statsd_timings(|ms, n| got.push((ms, n)));
        assert_eq!(got, [(0, 2), (1, 1), (2000, 2)]);
        let mut after = Vec::new();
        m.statsd_timings(|ms, n| after.push((ms, n)));
        assert!(after.is_empty());
    }
}
