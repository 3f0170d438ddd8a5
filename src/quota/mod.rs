//! Fair shares of a global limit for Envoy's quota protocol (RLQS): pure arithmetic, no I/O.
//!
//! Each Envoy subscribed to a bucket reports its demand (requests allowed + denied per
//! second, in thousandths: integers, so every replica and the Redis script add them up
//! exactly). The bucket's rule gives a limit of `limit` requests per `window_ms`; each
//! subscriber gets a token bucket filling its share of that limit once per window:
//!
//! - a **floor** of `min_share × limit` (rounded up) for everyone (at most
//!   `limit / (n + 1)`), so a quiet
//!   Envoy can still start; one floor is always kept free, so a newcomer gets at least the
//!   floor at once, before the others' next reports shrink their shares;
//! - the rest split **in proportion to demand** (equally when nobody reports any);
//! - **capped** by what the other subscribers currently hold: `limit − Σ others`, so the
//!   shares outstanding never add up to more than the limit, whatever order the reports
//!   arrive in, on whichever replica;
//! - **kept** when the new target is within `threshold` of the share already held (the
//!   assignment is then extended, not replaced), so noisy demand does not churn Envoys.
//!
//! [`settle`] is the whole formula; the memory store calls it, and `store/lua/quota.lua`
//! is a line-by-line copy (same floating-point operations in the same order, so both give
//! the same integers; `store` tests hold them equal).

use crate::limit::LimitSpec;

/// What a bucket's rule says, before any share is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quota {
    /// No rule matched, an `unlimited` rule, or a `shadow_mode` rule: nothing to enforce.
    AllowAll,
    /// A limit of 0 requests.
    DenyAll,
    /// `limit` requests per `window_ms`, split among the subscribers.
    Shared { limit: u64, window_ms: u64 },
}

impl Quota {
    /// The quota of a matched rule's limits: the most restrictive rate among them (a rule
    /// with `rate_limits` is enforced as its tightest limit), any `requests_per_unit: 0`
    /// denying.
    pub fn of_rule(limits: &[LimitSpec], unlimited: bool, shadow: bool) -> Quota {
        if unlimited || shadow || limits.is_empty() {
            return Quota::AllowAll;
        }
        let tightest = limits.iter().min_by(|a, b| {
            // a/wa < b/wb  ⇔  a·wb < b·wa (no division, exact in u128).
            let l = u128::from(a.requests_per_unit) * u128::from(b.window_ms());
            let r = u128::from(b.requests_per_unit) * u128::from(a.window_ms());
            l.cmp(&r)
        });
        match tightest {
            Some(l) if l.requests_per_unit == 0 => Quota::DenyAll,
            Some(l) => Quota::Shared {
                limit: l.requests_per_unit,
                window_ms: l.window_ms().max(1),
            },
            None => Quota::AllowAll,
        }
    }
}

/// The policy knobs of [`settle`], as the store passes them on (parts per million, exact
/// in Lua's doubles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub min_share_ppm: u64,
    pub threshold_ppm: u64,
}

impl Policy {
    pub fn new(min_share: f64, threshold: f64) -> Policy {
        let ppm = |x: f64| (x.clamp(0.0, 1.0) * 1e6).round() as u64;
        Policy {
            min_share_ppm: ppm(min_share),
            threshold_ppm: ppm(threshold),
        }
    }
}

/// What the other live subscribers of a bucket add up to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Others {
    pub count: u64,
    /// Σ demand, thousandths of a request per second.
    pub demand: u64,
    /// Σ shares they hold.
    pub assigned: u64,
}

/// One subscriber's share of `limit`: see the module documentation. `held` is the share
/// its Envoy holds now (0 when none). Mirrored in `store/lua/quota.lua`.
pub fn settle(limit: u64, others: Others, my_demand: u64, held: u64, policy: Policy) -> u64 {
    let l = limit as f64;
    let n = others.count as f64 + 1.0;
    let floor = (l * policy.min_share_ppm as f64 / 1e6)
        .ceil()
        .min((l / (n + 1.0)).floor());
    let rest = l - (n + 1.0) * floor;
    let total = others.demand as f64 + my_demand as f64;
    let target = if total > 0.0 {
        floor + (rest * (my_demand as f64 / total)).floor()
    } else {
        floor + (rest / n).floor()
    };
    let cap = (l - others.assigned as f64).max(0.0);
    let held_f = held as f64;
    if held > 0
        && held_f <= cap
        && (target - held_f).abs() * 1e6 <= policy.threshold_ppm as f64 * held_f
    {
        return held;
    }
    target.min(cap) as u64
}

/// Demand of one report in thousandths of a request per second. A report without an
/// elapsed time (Envoy's immediate first report) counts as one second's worth.
pub fn demand_milli(allowed: u64, denied: u64, elapsed_ms: Option<u64>) -> u64 {
    let requests = u128::from(allowed) + u128::from(denied);
    let ms = u128::from(elapsed_ms.filter(|&m| m > 0).unwrap_or(1000));
    // Capped far below 2^53 so sums stay exact as doubles in Lua.
    u64::try_from(requests * 1_000_000 / ms)
        .unwrap_or(u64::MAX)
        .min(1 << 40)
}

/// The bucket as the store sees it after a report: this subscriber's share, how many
/// subscribers there are, and what was reported allowed in the rule's current window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    pub share: u64,
    pub subscribers: u64,
    pub used: u64,
    /// End of the rule's current window (epoch ms).
    pub window_end_ms: u64,
}

/// What an Envoy is told to enforce for a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assignment {
    AllowAll,
    DenyAll,
    /// `tokens` per `fill_interval_ms`, bucket size `tokens`.
    TokenBucket {
        tokens: u32,
        fill_interval_ms: u64,
    },
}

/// An assignment and how long it lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub assignment: Assignment,
    pub ttl_ms: u64,
}

/// The assignment for one subscriber of a bucket: its rule's quota and, for a shared one,
/// the store's grant. A bucket whose reported usage reached its limit in the current
/// window is denied until the window ends; a share of 0 (the others hold everything until
/// they next report) is denied until then.
pub fn decide(quota: Quota, grant: Option<&Grant>, now_ms: u64, ttl_ms: u64) -> Decision {
    let assignment = match (quota, grant) {
        (Quota::AllowAll, _) => Assignment::AllowAll,
        (Quota::DenyAll, _) => Assignment::DenyAll,
        (Quota::Shared { limit, .. }, Some(g)) if g.used >= limit => {
            return Decision {
                assignment: Assignment::DenyAll,
                ttl_ms: g
                    .window_end_ms
                    .saturating_sub(now_ms)
                    .clamp(1, ttl_ms.max(1)),
            };
        }
        (Quota::Shared { window_ms, .. }, Some(g)) if g.share > 0 => Assignment::TokenBucket {
            tokens: u32::try_from(g.share).unwrap_or(u32::MAX),
            fill_interval_ms: window_ms,
        },
        (Quota::Shared { .. }, _) => Assignment::DenyAll,
    };
    Decision { assignment, ttl_ms }
}

#[cfg(test)]
mod tests;
