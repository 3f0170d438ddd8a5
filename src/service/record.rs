//! Per-rule statistics after a decision (their arithmetic for total, over, near, within and
//! shadow counts), through counter handles cached per rule of the active config.

use super::proto::RateLimitRequest;

use super::plan::Matched;
use super::{ActiveConfig, RateLimitService};
use crate::limiter::{self, Outcome, Plan};
use crate::metrics::HitStats;

impl RateLimitService {
    /// Per-rule statistics (their arithmetic). Refunds and unlimited rules count nothing.
    pub(super) fn record(
        &self,
        active: &ActiveConfig,
        req: &RateLimitRequest,
        plans: &[Plan<'_>],
        matched: &[Matched<'_>],
        decision: &limiter::Decision,
    ) {
        let rows = plans.iter().zip(matched).zip(&decision.outcomes);
        for (i, ((plan, m), status)) in rows.enumerate() {
            let (Plan::Metered(l), Outcome::Metered(s)) = (plan, status) else {
                continue;
            };
            if l.refund || l.cost == 0 {
                continue;
            }
            let counters = if let Some(key) = &m.override_key {
                self.metrics.rule_counters(key)
            } else if let Some(mm) = &m.m {
                match mm.stats_key(&req.descriptors[i].entries) {
                    std::borrow::Cow::Borrowed(k) => active
                        .counters
                        .get(mm.rule.id)
                        .map(|c| c.get_or_init(|| self.metrics.rule_counters(k)).clone())
                        .unwrap_or_else(|| self.metrics.rule_counters(k)),
                    std::borrow::Cow::Owned(k) => self.metrics.rule_counters(&k),
                }
            } else {
                continue;
            };
            let r = decision.results[s.results.start + s.reported];
            let limit = &l.limits.as_slice()[s.reported];
            self.metrics.record_hit(
                &counters,
                HitStats {
                    limit: limit.capacity(),
                    before: r.used_before,
                    hits: l.cost,
                    over: s.over_limit,
                    penalized: r.penalized,
                    shadowed: s.shadowed,
                    cached: s.cached,
                },
            );
        }
    }
}
