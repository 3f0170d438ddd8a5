//! The local view's numbers on `/metrics`: its gauges (descriptors held, hits not yet in
//! the store) set, and its counters (local decisions by reason, write-backs, overflow)
//! stepped to the view's own counts. The batch task publishes them every interval, and
//! every scrape does before rendering, so a scrape never reads a value older than itself:
//! one that reads `sluice_store_degraded 1` (set the moment decisions go local) reads the
//! local decisions made so far with it, not those of the last write-back, which a failing
//! store can hold up for seconds.

use std::sync::atomic::Ordering::Relaxed;

use super::RateLimitService;

/// What was last published of the view's counters (Prometheus counters take increments).
#[derive(Default)]
pub(super) struct Published {
    batched: u64,
    fallback: u64,
    overload: u64,
    overflow: u64,
    flushes: u64,
    flush_errors: u64,
    written: u64,
    settled: u64,
}

impl RateLimitService {
    /// Publish the local view's gauges and counters as they are now (one publisher at a
    /// time, so no increment is counted twice).
    pub fn publish_view_metrics(&self) {
        let Some(view) = &self.view else {
            return;
        };
        let m = &self.metrics.local;
        m.keys.set(i64::try_from(view.len()).unwrap_or(i64::MAX));
        m.unwritten
            .set(i64::try_from(view.unwritten()).unwrap_or(i64::MAX));
        let s = &view.stats;
        let mut last = self.view_published.lock();
        let step = |last: &mut u64, now: u64| {
            let d = now.saturating_sub(*last);
            *last = now;
            d
        };
        m.decisions
            .with_label_values(&["batched"])
            .inc_by(step(&mut last.batched, s.batched_decisions.load(Relaxed)));
        m.decisions
            .with_label_values(&["store_failure"])
            .inc_by(step(&mut last.fallback, s.fallback_decisions.load(Relaxed)));
        m.decisions
            .with_label_values(&["overload"])
            .inc_by(step(&mut last.overload, s.overload_decisions.load(Relaxed)));
        m.overflow
            .inc_by(step(&mut last.overflow, s.overflow.load(Relaxed)));
        m.flushes
            .inc_by(step(&mut last.flushes, s.flushes.load(Relaxed)));
        m.flush_errors
            .inc_by(step(&mut last.flush_errors, s.flush_errors.load(Relaxed)));
        m.written
            .inc_by(step(&mut last.written, s.written_back.load(Relaxed)));
        m.settled
            .inc_by(step(&mut last.settled, s.settled.load(Relaxed)));
    }
}
