//! The service's side of the heavy hitters (`crate::top`): each decided descriptor is fed to
//! them after the decision, and the admin listener's `/top?domain=D[&n=N][&by=hits|denied]`
//! reads them back as JSON; the Prometheus view (`sluice_top_*`) is refreshed from the same
//! rankings before each scrape.
//!
//! A descriptor counts when it was metered and charged something (refunds and peeks of
//! cost 0 do not, as in the per-rule statistics); it is denied when its limit said
//! OVER_LIMIT, shadow mode and the local over-limit cache included.

use serde::Serialize;

use super::RateLimitService;
use super::inspect::{Reply, Status, error, json};
use super::plan::Matched;
use super::proto::RateLimitRequest;
use crate::config::shown;
use crate::limiter::{Decision, Outcome, Plan};
use crate::metrics::top::TopRow;
use crate::top::{By, Part, Ranked, read_label};

/// Most descriptors one `/top` answer lists.
pub const MAX_TOP_N: usize = 1000;

/// `/top`'s answer.
#[derive(Debug, Serialize)]
struct TopReport {
    domain: String,
    /// The longest history a reading covers (`--top-window`).
    window_s: u64,
    /// The history this reading covers: between half the window and all of it.
    covered_s: u64,
    by: &'static str,
    /// Hits and denials of the whole domain in the reading.
    hits: u64,
    denied: u64,
    /// Most a count shown may be off, either way (0: exact).
    error: Bounds,
    top: Vec<TopEntry>,
}

#[derive(Debug, Serialize)]
struct Bounds {
    hits: u64,
    denied: u64,
}

#[derive(Debug, Serialize)]
pub(crate) struct TopEntry {
    pub rule: String,
    pub entries: Vec<crate::explain::EntryJson>,
    /// The descriptor had more entries than were kept (`crate::top::MAX_ENTRIES`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub more_entries: bool,
    pub hits: u64,
    pub denied: u64,
}

/// A label part as text (`\xNN` for bytes that are not UTF-8), `…` when it was cut.
fn text(p: Part<'_>) -> String {
    let mut s = shown(p.bytes).into_owned();
    if p.cut {
        s.push('…');
    }
    s
}

impl TopEntry {
    pub(crate) fn of(r: &Ranked) -> TopEntry {
        let l = read_label(&r.label);
        TopEntry {
            rule: text(l.rule),
            entries: l
                .entries
                .iter()
                .map(|&(k, v)| crate::explain::EntryJson {
                    key: text(k),
                    value: text(v),
                })
                .collect(),
            more_entries: l.more_entries,
            hits: r.hits,
            denied: r.denied,
        }
    }

    /// `k=v,k2=v2`, as the command line writes a descriptor (the Prometheus label).
    pub(crate) fn entries_text(&self) -> String {
        let mut out = String::new();
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&e.key);
            out.push('=');
            out.push_str(&e.value);
        }
        if self.more_entries {
            out.push_str(",…");
        }
        out
    }
}

impl RateLimitService {
    /// Feed the heavy hitters with a decided request (see the module comment).
    pub(super) fn feed_top(
        &self,
        req: &RateLimitRequest,
        plans: &[Plan<'_>],
        matched: &[Matched<'_>],
        decision: &Decision,
    ) {
        let Some(top) = &self.top else {
            return;
        };
        let rows = plans.iter().zip(matched).zip(&decision.outcomes);
        for (i, ((plan, m), outcome)) in rows.enumerate() {
            let (Plan::Metered(l), Outcome::Metered(v)) = (plan, outcome) else {
                continue;
            };
            if l.refund || l.cost == 0 {
                continue;
            }
            let rule: &str = match (&m.m, &m.override_key) {
                (Some(mm), _) => &mm.rule.full_key,
                (None, Some(key)) => key,
                (None, None) => continue,
            };
            let Some(d) = req.descriptors.get(i) else {
                continue;
            };
            let entries = d.entries.iter().map(|e| (&e.key[..], &e.value[..]));
            top.observe(&req.domain, rule, entries, l.cost, v.over_limit);
        }
    }

    /// Replace the `sluice_top_*` gauges with the rankings as they are now (before a
    /// scrape renders them).
    pub fn refresh_top_gauges(&self) {
        let (Some(top), n) = (&self.top, self.top_metrics) else {
            return;
        };
        if n == 0 {
            return;
        }
        let rows = |by: By| -> Vec<TopRow> {
            let mut rows = Vec::new();
            for domain in top.domains() {
                let r = top.rank(&domain, by, n);
                for (i, ranked) in r.top.iter().enumerate() {
                    let e = TopEntry::of(ranked);
                    let value = match by {
                        By::Hits => e.hits,
                        By::Denied => e.denied,
                    };
                    rows.push(TopRow {
                        domain: domain.clone(),
                        rank: i + 1,
                        entries: e.entries_text(),
                        rule: e.rule,
                        value,
                    });
                }
            }
            rows
        };
        self.metrics.top.publish(&rows(By::Hits), &rows(By::Denied));
    }

    /// The admin listener's `GET /top`.
    pub fn top_query(&self, query: Option<&str>) -> Reply {
        let Some(top) = &self.top else {
            return error(Status::NotFound, "heavy hitters are off (--top-capacity 0)");
        };
        let mut domain = None;
        let mut n = 10;
        let mut by = By::Hits;
        for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match &*k {
                "domain" => domain = Some(v.into_owned()),
                "n" => match v.parse::<usize>() {
                    Ok(x) if (1..=MAX_TOP_N).contains(&x) => n = x,
                    _ => {
                        return error(
                            Status::BadRequest,
                            format!("n must be a number from 1 to {MAX_TOP_N}, found '{v}'"),
                        );
                    }
                },
                "by" => {
                    by = match &*v {
                        "hits" => By::Hits,
                        "denied" => By::Denied,
                        other => {
                            return error(
                                Status::BadRequest,
                                format!("by must be hits or denied, found '{other}'"),
                            );
                        }
                    }
                }
                other => {
                    return error(
                        Status::BadRequest,
                        format!("unknown query parameter '{other}' (use domain, n and by)"),
                    );
                }
            }
        }
        let Some(domain) = domain.filter(|d| !d.is_empty()) else {
            return error(Status::BadRequest, "the query needs domain=<domain>");
        };
        if self.config().config.domain(&domain).is_none() {
            return error(
                Status::NotFound,
                format!("domain '{domain}' is not in the loaded config"),
            );
        }
        let r = top.rank(&domain, by, n);
        let report = TopReport {
            window_s: top.options().window_ms / 1000,
            covered_s: r.covered_ms / 1000,
            by: match by {
                By::Hits => "hits",
                By::Denied => "denied",
            },
            hits: r.hits,
            denied: r.denied,
            error: Bounds {
                hits: r.hits_error,
                denied: r.denied_error,
            },
            top: r.top.iter().map(TopEntry::of).collect(),
            domain,
        };
        json(Status::Ok, &report)
    }
}
