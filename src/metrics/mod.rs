//! Prometheus metrics: every name is defined here, and handles are cached so the request
//! path only increments atomics.
//!
//! Per-rule families keep envoyproxy/ratelimit's Prometheus names and labels (`domain`,
//! `key1`, `key2` from the first levels of the rule's sanitized stats key, as their statsd
//! mapper produces them) plus `descriptor`, the whole stats key as the rule files and the
//! decision metadata write it. Stats keys built from request
//! values (`detailed_metric`, `value_to_metric`, overrides) are unbounded, so the number of
//! distinct keys is capped; the rest fold into one overflow series and are counted.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use prometheus::core::Collector;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// The label value under which overflowing stats keys are counted.
pub const OVERFLOW_DESCRIPTOR: &str = "__overflow__";

const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];

pub struct Metrics {
    registry: Registry,
    near_limit_ratio: f32,
    max_series: usize,
    rule: [IntCounterVec; 6],
    keys: RwLock<HashMap<Arc<str>, Arc<RuleCounters>>>,
    overflow: Arc<RuleCounters>,
    pub overflow_total: IntCounterVec,
    pub total_requests: IntCounter,
    pub response_time: Histogram,
    /// The family `response_time` belongs to, to swap it for the millisecond one.
    response_time_family: HistogramVec,
    /// `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS`: observe whole milliseconds.
    response_time_ms: bool,
    pub service_error: IntCounter,
    pub redis_error: IntCounter,
    /// Calls refused by admission: no slot among those in flight within what the queue or
    /// the call's deadline allows.
    pub shed: IntCounter,
    /// Calls answered DEADLINE_EXCEEDED: their `grpc-timeout` passed before an answer.
    pub deadline_exceeded: IntCounter,
    pub config_load_success: IntCounter,
    pub config_load_error: IntCounter,
    pub global_shadow_mode: IntCounter,
    pub store_latency: Histogram,
    pub store_errors: IntCounterVec,
    /// Live connections of each Redis store (`store`: `redis`, `redis_per_second`).
    pub store_connections: IntGaugeVec,
    /// 1 while a Redis store can decide (connected, not refusing writes), else 0.
    pub store_ready: IntGaugeVec,
    /// Redis connections dropped as broken (an error, or no reply at all for a while).
    pub store_connections_dropped: IntCounterVec,
    /// Admission: the adaptive limit on gRPC calls in flight, the calls holding a slot, and
    /// those waiting for one.
    pub admission_limit: IntGauge,
    pub admission_in_flight: IntGauge,
    pub admission_queued: IntGauge,
    pub rules_loaded: IntGauge,
    pub domains_loaded: IntGauge,
    pub domain_not_found: IntCounter,
    /// Response times in whole milliseconds for statsd's timer, when statsd is on.
    statsd_timings: Option<statsd::Timings>,
    /// Values of the service counters last sent to statsd.
    statsd_sent: statsd::Sent,
    /// A `PROMETHEUS_MAPPER_YAML` mapping applied when rendering.
    mapper: Option<mapper::Mapper>,
    /// Memory store: live entries evicted to stay within `--memory-max-bytes`.
    pub memory_evictions: IntCounter,
    /// Memory store: bytes of state held (what `--memory-max-bytes` bounds).
    pub memory_bytes: IntGauge,
    /// The local view: batched consistency and the store-failure fallback.
    pub local: local::LocalMetrics,
    /// The quota service's (RLQS) families (`quota.rs`).
    pub quota: quota::QuotaMetrics,
    /// The heavy hitters' gauges (`top.rs`).
    pub top: top::TopMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// `ratelimit_service_response_time_seconds{grpc_method}` with these buckets.
fn response_time_family(buckets: &[f64]) -> prometheus::Result<HistogramVec> {
    HistogramVec::new(
        HistogramOpts::new(
            "ratelimit_service_response_time_seconds",
            "ShouldRateLimit latency.",
        )
        .buckets(buckets.to_vec()),
        &["grpc_method"],
    )
}

fn must<T>(r: prometheus::Result<T>) -> T {
    // Registration fails only for invalid or duplicate names, which are constants here.
    r.unwrap_or_else(|e| panic!("metric definition error: {e}"))
}

/// Makes metrics and registers them: the one way every family here is created.
struct Reg<'r>(&'r Registry);

impl Reg<'_> {
    fn add<C: Collector + Clone + 'static>(&self, c: prometheus::Result<C>) -> C {
        let c = must(c);
        must(self.0.register(Box::new(c.clone())));
        c
    }

    fn counter(&self, name: &str, help: &str) -> IntCounter {
        self.add(IntCounter::new(name, help))
    }

    fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(IntGauge::new(name, help))
    }

    fn counters(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.add(IntCounterVec::new(Opts::new(name, help), labels))
    }

    fn gauges(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.add(IntGaugeVec::new(Opts::new(name, help), labels))
    }
}

impl Metrics {
    pub fn new(near_limit_ratio: f32, max_series: usize, store: &str) -> Metrics {
        let registry = Registry::new();
        let reg = Reg(&registry);

        let rule_vec = |stat: &str, help: &str| {
            let name = format!("ratelimit_service_rate_limit_{stat}");
            reg.counters(&name, help, &["domain", "key1", "key2", "descriptor"])
        };
        let rule = [
            rule_vec("total_hits", "Hits (sum of hits_addend) on a rule."),
            rule_vec("over_limit", "Hits over the limit of a rule."),
            rule_vec(
                "near_limit",
                "Hits above NEAR_LIMIT_RATIO of a rule's limit.",
            ),
            rule_vec("within_limit", "Hits within the limit of a rule."),
            rule_vec("shadow_mode", "Over-limit hits allowed by shadow mode."),
            rule_vec(
                "over_limit_with_local_cache",
                "Over-limit hits answered from the local over-limit cache, without the store.",
            ),
        ];
        let overflow = Arc::new(counters(
            &rule,
            ["", "", "", OVERFLOW_DESCRIPTOR],
            OVERFLOW_DESCRIPTOR,
        ));

        let error_vec = reg.counters(
            "ratelimit_service_should_rate_limit_error",
            "ShouldRateLimit calls that failed, by cause.",
            &["err_type"],
        );
        let total_requests = reg.counters(
            "ratelimit_service_total_requests",
            "ShouldRateLimit calls.",
            &["grpc_method"],
        );
        let response_time = reg.add(response_time_family(LATENCY_BUCKETS));
        let store_latency = reg.add(HistogramVec::new(
            HistogramOpts::new(
                "sluice_store_latency_seconds",
                "Latency of one store call (one Redis round trip).",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["store"],
        ));
        let store_errors = reg.counters(
            "sluice_store_errors_total",
            "Failed store calls, by kind.",
            &["store", "kind"],
        );
        let store_connections = reg.gauges(
            "sluice_store_connections",
            "Live connections of each Redis store.",
            &["store"],
        );
        let store_ready = reg.gauges(
            "sluice_store_ready",
            "1 while a Redis store can decide (connected, accepting writes).",
            &["store"],
        );
        let store_connections_dropped = reg.counters(
            "sluice_store_connections_dropped_total",
            "Redis connections dropped as broken: an I/O error, or no reply at all for the \
             breaker's silence limit (late replies count as replies).",
            &["store"],
        );
        let overflow_total = reg.counters(
            "sluice_metrics_overflow_total",
            "Per-rule updates folded into the overflow series because of the series cap.",
            &["family"],
        );
        // Series that exist from the start, so rate() and alerts see a zero, not nothing.
        overflow_total.with_label_values(&["ratelimit_service_rate_limit"]);
        for kind in ["unavailable", "timeout", "backend"] {
            store_errors.with_label_values(&[store, kind]);
        }
        reg.gauges("sluice_build_info", "Build information.", &["version"])
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);

        Metrics {
            quota: quota::QuotaMetrics::new(&reg),
            near_limit_ratio,
            max_series,
            rule,
            keys: RwLock::new(HashMap::new()),
            overflow,
            overflow_total,
            total_requests: total_requests.with_label_values(&["ShouldRateLimit"]),
            response_time: response_time.with_label_values(&["ShouldRateLimit"]),
            response_time_family: response_time,
            response_time_ms: false,
            service_error: error_vec.with_label_values(&["service_error"]),
            redis_error: error_vec.with_label_values(&["redis_error"]),
            shed: error_vec.with_label_values(&["shed"]),
            deadline_exceeded: error_vec.with_label_values(&["deadline_exceeded"]),
            config_load_success: reg.counter(
                "ratelimit_service_config_load_success",
                "Successful config loads.",
            ),
            config_load_error: reg.counter(
                "ratelimit_service_config_load_error",
                "Rejected config loads (the previous config keeps serving).",
            ),
            global_shadow_mode: reg.counter(
                "ratelimit_service_global_shadow_mode",
                "Requests allowed by global shadow mode.",
            ),
            domain_not_found: reg.counter(
                "sluice_domain_not_found_total",
                "Descriptors whose domain is not configured.",
            ),
            store_latency: store_latency.with_label_values(&[store]),
            store_errors,
            store_connections,
            store_ready,
            store_connections_dropped,
            admission_limit: reg.gauge(
                "sluice_admission_limit",
                "Admission: the adaptive limit on ShouldRateLimit gRPC calls in flight (it \
                 follows the store's round trip; at most --max-in-flight).",
            ),
            admission_in_flight: reg.gauge(
                "sluice_admission_in_flight",
                "Admission: ShouldRateLimit gRPC calls holding a slot.",
            ),
            admission_queued: reg.gauge(
                "sluice_admission_queued",
                "Admission: ShouldRateLimit gRPC calls waiting for a slot.",
            ),
            rules_loaded: reg.gauge("sluice_rules_loaded", "Rules in the active config."),
            domains_loaded: reg.gauge("sluice_domains_loaded", "Domains in the active config."),
            statsd_timings: None,
            statsd_sent: statsd::Sent::default(),
            mapper: None,
            memory_evictions: reg.counter(
                "sluice_memory_store_evictions_total",
                "Memory store: live entries evicted to stay within --memory-max-bytes (the least used go first).",
            ),
            memory_bytes: reg.gauge(
                "sluice_memory_store_bytes",
                "Memory store: bytes of limit state held (tables and state heap).",
            ),
            local: local::LocalMetrics::new(&reg),
            top: top::TopMetrics::new(&reg),
            registry,
        }
    }

    /// `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS`: `ratelimit_service_response_time_seconds`
    /// observes whole milliseconds into Prometheus's default buckets, as their statsd
    /// exporter's mapping did before it scaled the timer to seconds (same name, same
    /// buckets). Call before serving: earlier observations are dropped with the old family.
    pub fn response_time_in_milliseconds(&mut self) {
        let _ = self
            .registry
            .unregister(Box::new(self.response_time_family.clone()));
        let family = must(response_time_family(prometheus::DEFAULT_BUCKETS));
        must(self.registry.register(Box::new(family.clone())));
        self.response_time = family.with_label_values(&["ShouldRateLimit"]);
        self.response_time_family = family;
        self.response_time_ms = true;
    }

    /// Create the error and dropped-connection series of a Redis store, so they start at 0.
    pub fn add_store(&self, store: &str) {
        for kind in ["unavailable", "timeout", "backend"] {
            self.store_errors.with_label_values(&[store, kind]);
        }
        self.store_connections_dropped.with_label_values(&[store]);
    }

    /// Counters for a stats key, created on first use; past the series cap, the overflow
    /// counters.
    pub fn rule_counters(&self, stats_key: &str) -> Arc<RuleCounters> {
        if let Some(c) = self.keys.read().get(stats_key) {
            return c.clone();
        }
        let mut keys = self.keys.write();
        if let Some(c) = keys.get(stats_key) {
            return c.clone();
        }
        if keys.len() >= self.max_series {
            self.overflow_total
                .with_label_values(&["ratelimit_service_rate_limit"])
                .inc();
            return self.overflow.clone();
        }
        // `domain`, `key1`, `key2` as their Prometheus output has them: levels of the statsd
        // name, which their SanitizeStatName wrote (`:`, `|` and the dots of an IPv4
        // address as `_`). `descriptor` is the stats key itself, as `/rlconfig`, `explain`
        // and the decision metadata (`rule`, `decidingRule`) show it, so a log line's rule
        // finds its series.
        let key = sanitize(stats_key);
        let mut parts = key.splitn(4, '.');
        let labels = [
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            stats_key,
        ];
        let c = Arc::new(counters(&self.rule, labels, &key));
        keys.insert(Arc::from(stats_key), c.clone());
        c
    }

    /// Record one hit with their arithmetic (`base_limiter.go`): hits crossing the limit
    /// split between near and over; `near = floor(limit × NEAR_LIMIT_RATIO)` in f32.
    pub fn record_hit(&self, c: &RuleCounters, h: HitStats) {
        if h.hits == 0 {
            return;
        }
        c.total_hits.inc_by(h.hits);
        let near = (h.limit as f32 * self.near_limit_ratio).floor() as u64;
        let after = h.before.saturating_add(h.hits);
        if h.over {
            // From the cache: theirs counts the whole hit as over, and as cached.
            let over = if h.cached || h.penalized || h.before >= h.limit {
                h.hits
            } else {
                c.near_limit
                    .inc_by(h.limit.saturating_sub(near.max(h.before)));
                after.saturating_sub(h.limit).max(1)
            };
            c.over_limit.inc_by(over);
            if h.cached {
                c.over_limit_with_local_cache.inc_by(h.hits);
            }
            if h.shadowed {
                c.shadow_mode.inc_by(over);
            }
        } else {
            c.within_limit.inc_by(h.hits);
            if after > near {
                c.near_limit.inc_by(if h.before >= near {
                    h.hits
                } else {
                    after - near
                });
            }
        }
    }

    /// Prometheus text exposition (through the mapper when one is set).
    pub fn render(&self) -> String {
        let mut families = self.registry.gather();
        if let Some(m) = &self.mapper {
            families = m.apply(families);
        }
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for well-formed families.
        let _ = TextEncoder::new().encode(&families, &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

pub mod local;
pub mod mapper;
pub mod quota;
mod rule;
mod sanitize;
pub mod statsd;
pub mod top;

use rule::counters;
pub use rule::{HitStats, RULE_STATS, RuleCounters};
pub use sanitize::sanitize;

#[cfg(test)]
mod tests;
