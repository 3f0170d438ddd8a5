//! Metrics of the local view (batched consistency and the store-failure fallback). The
//! limiter counts in atomics; the batch task publishes them here every interval, and every
//! scrape before rendering (`service/view_metrics.rs`).

use prometheus::{IntCounter, IntCounterVec, IntGauge};

use super::Reg;

pub struct LocalMetrics {
    /// 1 while decisions are local because the store failed.
    pub degraded: IntGauge,
    /// Periods entered (0 → 1 transitions of `degraded`).
    pub degraded_periods: IntCounter,
    /// Decisions made locally, by reason (`batched`, `store_failure`, `overload`).
    pub decisions: IntCounterVec,
    /// Hits admitted without being kept for write-back (`--local-view-max-keys` reached).
    pub overflow: IntCounter,
    pub keys: IntGauge,
    /// Hits admitted locally and not yet in the store.
    pub unwritten: IntGauge,
    pub flushes: IntCounter,
    pub flush_errors: IntCounter,
    pub written: IntCounter,
    pub settled: IntCounter,
}

impl LocalMetrics {
    pub(super) fn new(reg: &Reg) -> LocalMetrics {
        let decisions = reg.counters(
            "sluice_local_decisions_total",
            "Descriptors decided from the local view, without the store, by reason (batched: a batched rule with room to spare; store_failure: the store failed, --store-failure-mode local; overload: the call could not get a timely store answer, --store-failure-mode local).",
            &["reason"],
        );
        for reason in ["batched", "store_failure", "overload"] {
            decisions.with_label_values(&[reason]);
        }
        LocalMetrics {
            degraded: reg.gauge(
                "sluice_store_degraded",
                "1 while decisions are local because the store failed (--store-failure-mode local).",
            ),
            degraded_periods: reg.counter(
                "sluice_store_degraded_periods_total",
                "Times the store failed and decisions went local.",
            ),
            decisions,
            overflow: reg.counter(
                "sluice_local_view_overflow_total",
                "Hits admitted while the store was down that could not be kept for write-back (--local-view-max-keys reached).",
            ),
            keys: reg.gauge(
                "sluice_local_view_keys",
                "Descriptors held by the local view.",
            ),
            unwritten: reg.gauge(
                "sluice_local_view_unwritten_hits",
                "Hits admitted locally and not yet written to the store.",
            ),
            flushes: reg.counter(
                "sluice_batch_flushes_total",
                "Write-backs of locally admitted hits that reached the store (one store call each).",
            ),
            flush_errors: reg.counter(
                "sluice_batch_flush_errors_total",
                "Write-backs that failed (their hits wait for the next one).",
            ),
            written: reg.counter(
                "sluice_batch_written_hits_total",
                "Locally admitted hits written to the store.",
            ),
            settled: reg.counter(
                "sluice_batch_settled_calls_total",
                "Store calls whose callers stopped waiting (timed out) that the store was seen to run, or never sent: settled without being sent again.",
            ),
        }
    }
}
