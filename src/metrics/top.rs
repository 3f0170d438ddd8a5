//! The heavy hitters' Prometheus view: per domain, the heaviest descriptors by hits and by
//! denials over the recent window, as two gauge families whose series are replaced at each
//! scrape. A scrape holds at most `2 × --top-metrics` series per loaded domain; a series
//! is new whenever a descriptor enters a domain's top (its labels name it), so the number
//! of series over time follows who becomes heavy, not how many values were seen.

use prometheus::IntGaugeVec;

use super::Reg;

/// Label names of both families.
const LABELS: [&str; 4] = ["domain", "rank", "rule", "entries"];

pub struct TopMetrics {
    /// Hits over the window of the `rank`-th heaviest descriptor by hits.
    pub hits: IntGaugeVec,
    /// Denials over the window of the `rank`-th heaviest descriptor by denials.
    pub denied: IntGaugeVec,
}

impl TopMetrics {
    pub(super) fn new(reg: &Reg) -> TopMetrics {
        let family = |name: &str, help: &str| reg.gauges(name, help, &LABELS);
        TopMetrics {
            hits: family(
                "sluice_top_hits",
                "Heavy hitters: hits over the recent window (--top-window) of a domain's \
                 heaviest descriptors by hits, rank 1 the heaviest (--top-metrics of them).",
            ),
            denied: family(
                "sluice_top_denied",
                "Heavy hitters: denials over the recent window (--top-window) of a domain's \
                 most denied descriptors, rank 1 the most (--top-metrics of them).",
            ),
        }
    }

    /// Replace every series with `rows`: (domain, rank, rule, entries, value) of hits,
    /// then of denials.
    pub fn publish(&self, hits: &[TopRow], denied: &[TopRow]) {
        for (family, rows) in [(&self.hits, hits), (&self.denied, denied)] {
            family.reset();
            for r in rows {
                let rank = r.rank.to_string();
                family
                    .with_label_values(&[&r.domain, &rank, &r.rule, &r.entries])
                    .set(i64::try_from(r.value).unwrap_or(i64::MAX));
            }
        }
    }
}

/// One series of the view.
pub struct TopRow {
    pub domain: String,
    pub rank: usize,
    pub rule: String,
    /// The descriptor's entries as `k=v,k2=v2`.
    pub entries: String,
    pub value: u64,
}
