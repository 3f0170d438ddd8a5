//! The quota service's metrics (RLQS), per domain: streams and bucket subscriptions held by
//! this replica, assignments sent by kind, and the usage Envoys report (allowed and denied,
//! so dashboards show RLQS traffic beside RLS hits). The `domain` label takes only
//! configured domain names (the service passes [`UNKNOWN_DOMAIN`] for any other), so a
//! client cannot grow the series without bound.

use prometheus::{IntCounterVec, IntGaugeVec};

use super::Reg;

/// The `domain` label of streams whose domain is not configured.
pub const UNKNOWN_DOMAIN: &str = "__unknown__";

pub struct QuotaMetrics {
    /// `sluice_rlqs_streams{domain}`: open streams (one per Envoy).
    pub streams: IntGaugeVec,
    /// `sluice_rlqs_buckets{domain}`: buckets subscribed through this replica's streams.
    pub buckets: IntGaugeVec,
    /// `sluice_rlqs_assignments_total{domain,action}`: `token_bucket`, `allow_all`,
    /// `deny_all`, `abandon`, `expire` (TTL 0 at shutdown).
    pub assignments: IntCounterVec,
    /// `sluice_rlqs_usage_total{domain,outcome}`: requests reported `allowed` / `denied`.
    pub usage: IntCounterVec,
    /// `sluice_rlqs_errors_total{reason}`: streams refused (`invalid`), store calls failed
    /// (`store`), buckets over `--rlqs-max-buckets` (`too_many_buckets`).
    pub errors: IntCounterVec,
}

impl QuotaMetrics {
    pub(super) fn new(reg: &Reg) -> QuotaMetrics {
        QuotaMetrics {
            streams: reg.gauges(
                "sluice_rlqs_streams",
                "Open RLQS streams (one per Envoy), by domain.",
                &["domain"],
            ),
            buckets: reg.gauges(
                "sluice_rlqs_buckets",
                "RLQS buckets subscribed through this replica, by domain.",
                &["domain"],
            ),
            assignments: reg.counters(
                "sluice_rlqs_assignments_total",
                "RLQS bucket actions sent, by domain and action.",
                &["domain", "action"],
            ),
            usage: reg.counters(
                "sluice_rlqs_usage_total",
                "Requests Envoys reported over RLQS, by domain and outcome (allowed, denied).",
                &["domain", "outcome"],
            ),
            errors: reg.counters(
                "sluice_rlqs_errors_total",
                "RLQS failures: invalid streams, store errors, buckets over the cap.",
                &["reason"],
            ),
        }
    }
}
