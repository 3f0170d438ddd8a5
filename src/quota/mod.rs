//! Fair shares of a global limit for Envoy's quota protocol (RLQS): pure arithmetic, no I/O.
//!
//! Each Envoy subscribed to a bucket reports its demand (requests allowed + denied per
//! second, in thousandths: integers, so every replica and the Redis script add them up
//! exactly). The bucket's rule gives a limit of `limit` requests per `window_ms`; each
//! subscriber gets a **share**: a rate of `share` requests per window, which its Envoy
//! enforces as a token bucket holding one second of it ([`burst`]). Shares are rates
//! because Envoy's token bucket is one: a re-split takes effect the moment the Envoy gets
//! it, and nobody holds a window's budget it could spend at once.
//!
//! - a **floor** of `min_share × limit` (rounded up, at most `limit / (n + 1)`): the least
//!   anyone gets, so a quiet Envoy can still start; one floor is always kept free, so a
//!   newcomer gets at least the floor at once;
//! - the **first share is the floor**: a subscriber whose demand is not known yet (Envoy's
//!   first report of a bucket, sent at its first request, covers no time) gets the floor,
//!   and the others count it at their mean demand, leaving room for it. So the first
//!   Envoy of a bucket cannot take the whole limit before the second one's demand is
//!   known, and Envoys that start together start equal;
//! - the rest split **in proportion to demand** (equally when nobody reports any), each
//!   share raised to the floor where demand gives less: a minimum, not an addend, so
//!   demands of 3:1 get shares of 3:1 whatever the floor;
//! - **capped** by what the other subscribers currently hold: `limit − Σ others`, so the
//!   shares outstanding never add up to more than the limit, whatever order the reports
//!   arrive in, on whichever replica;
//! - **kept** when the new target is within `threshold` of the share already held (the
//!   assignment is then extended, not replaced), so noisy demand does not churn Envoys.
//!
//! A share is **pending** when the cap held it below its target (it waits for others to
//! shrink), or when it was computed while another subscriber's demand was unknown: the
//! stream settles it again at its next tick rather than at the Envoy's next report, so a
//! re-split completes within a tick of the report that starts it.
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
    /// How many of them have no known demand yet (counted at the others' mean).
    pub unknown: u64,
    /// Σ known demand, thousandths of a request per second.
    pub demand: u64,
    /// Σ shares they hold.
    pub assigned: u64,
}

/// One subscriber's settled share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    pub share: u64,
    /// Settle again soon: the cap held the share below its target, or another subscriber's
    /// demand was unknown (see the module documentation).
    pub pending: bool,
}

/// One subscriber's share of `limit`: see the module documentation. `my_demand` is `None`
/// until its demand is known; `held` is the share its Envoy holds now (0 when none).
/// Mirrored in `store/lua/quota.lua`.
pub fn settle(
    limit: u64,
    others: Others,
    my_demand: Option<u64>,
    held: u64,
    policy: Policy,
) -> Settled {
    let l = limit as f64;
    let n = others.count as f64 + 1.0;
    let floor = (l * policy.min_share_ppm as f64 / 1e6)
        .ceil()
        .min((l / (n + 1.0)).floor());
    // One floor kept free for a newcomer; the rest split by demand.
    let available = l - floor;
    let target = match my_demand {
        None => floor,
        Some(my) => {
            // The unknown ones at the mean of the known ones (this one included).
            let known = others.count.saturating_sub(others.unknown) as f64 + 1.0;
            let mean = (others.demand as f64 + my as f64) / known;
            let total = others.demand as f64 + my as f64 + others.unknown as f64 * mean;
            let by_demand = if total > 0.0 {
                (available * (my as f64 / total)).floor()
            } else {
                (available / n).floor()
            };
            by_demand.max(floor)
        }
    };
    let cap = (l - others.assigned as f64).max(0.0);
    let waiting = my_demand.is_some() && others.unknown > 0;
    let held_f = held as f64;
    if held > 0
        && held_f <= cap
        && (target - held_f).abs() * 1e6 <= policy.threshold_ppm as f64 * held_f
    {
        return Settled {
            share: held,
            pending: waiting,
        };
    }
    Settled {
        share: target.min(cap) as u64,
        pending: waiting || target > cap,
    }
}

/// Demand of one report in thousandths of a request per second over `span_ms`; `None`
/// when the report covers no time (Envoy's first report of a bucket) and says nothing of
/// a rate.
pub fn demand_milli(allowed: u64, denied: u64, span_ms: Option<u64>) -> Option<u64> {
    let requests = u128::from(allowed) + u128::from(denied);
    let ms = u128::from(span_ms.filter(|&m| m > 0)?);
    // Capped far below 2^53 so sums stay exact as doubles in Lua.
    Some(
        u64::try_from(requests * 1_000_000 / ms)
            .unwrap_or(u64::MAX)
            .min(1 << 40),
    )
}

/// How many tokens an Envoy's bucket may hold for a share: one second of it, at least one
/// token and at most the share (a rule of a second banks its whole share, as a
/// window-long bucket would).
///
/// Why so little: Envoy keeps a bucket's fill time when its assignment changes, so a
/// bucket whose rate goes up by a factor holds that factor more tokens, up to this size.
/// Every raise of a share can thus mint a full bucket; at one second of the share, what an
/// Envoy admits follows its share within about a second of it, and a window sees at most
/// a second's worth more than the limit per raise.
pub fn burst(share: u64, window_ms: u64) -> u64 {
    let window = u128::from(window_ms.max(1000));
    let tokens = (u128::from(share) * 1000).div_ceil(window);
    u64::try_from(tokens)
        .unwrap_or(u64::MAX)
        .clamp(1, share.max(1))
}

/// The bucket as the store sees it after a report: this subscriber's share and how many
/// subscribers there are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    pub share: u64,
    pub subscribers: u64,
    /// [`Settled::pending`].
    pub pending: bool,
}

/// What an Envoy is told to enforce for a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assignment {
    AllowAll,
    DenyAll,
    /// `tokens` per `fill_interval_ms`, in a bucket of `burst` tokens.
    TokenBucket {
        tokens: u32,
        burst: u32,
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
/// the store's grant. A share of 0 (the others hold everything until they next report) is
/// denied until then.
pub fn decide(quota: Quota, grant: Option<&Grant>, ttl_ms: u64) -> Decision {
    let assignment = match (quota, grant) {
        (Quota::AllowAll, _) => Assignment::AllowAll,
        (Quota::DenyAll, _) => Assignment::DenyAll,
        (Quota::Shared { window_ms, .. }, Some(g)) if g.share > 0 => {
            let tokens = u32::try_from(g.share).unwrap_or(u32::MAX);
            Assignment::TokenBucket {
                tokens,
                burst: u32::try_from(burst(u64::from(tokens), window_ms)).unwrap_or(tokens),
                fill_interval_ms: window_ms,
            }
        }
        (Quota::Shared { .. }, _) => Assignment::DenyAll,
    };
    Decision { assignment, ttl_ms }
}

#[cfg(test)]
mod tests;
