//! The arithmetic `token_bucket`, `leaky_bucket` and `gcra` share (docs/explanation/algorithms.md).
//!
//! All three reduce to a scaled usage `Us` (one request = `W` units, draining at `R` units
//! per ms): token bucket `Us = Cs − tokens`, leaky bucket and GCRA `Us = level`. Deciding,
//! charging and reporting on `Us` is written once here so the three cannot drift apart; they
//! differ only in how they load and store it. Everything is `u128`, so `n·W` with `n` up to
//! `u64::MAX` cannot overflow.
//!
//! `Us` is kept within `[0, Lmax]`, `Lmax = min(2^53, 2^52·R)` ([`Params::lmax`]): each
//! algorithm's load clamps it, and [`Level::charge`] saturates there.

use super::Params;

/// Scaled usage after step 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Level {
    /// `Us`, never above `Lmax` ([`Params::lmax`]).
    pub us: u128,
    /// `ts − now` after `ts = max(ts, now)`: how far the stored timestamp is ahead of a clock
    /// that went backwards. Nothing drains until the clock catches up, so it is added to
    /// `reset_ms` and `retry_ms`. Always 0 for GCRA (whose TAT is absolute).
    pub lag: u64,
}

pub(crate) fn ceil_div(a: u128, b: u128) -> u128 {
    if b == 0 {
        return u128::MAX;
    }
    a.div_ceil(b)
}

pub(crate) fn sat_u64(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

impl Level {
    /// `n·W` in scaled units.
    fn cost(n: u64, p: &Params) -> u128 {
        u128::from(n) * u128::from(p.w)
    }

    /// `n ≤ C` and `Us + n·W ≤ Cs` (the token bucket's `n·W ≤ tokens`).
    pub fn fits(&self, n: u64, p: &Params) -> bool {
        n <= p.c && self.us + Self::cost(n, p) <= p.cs
    }

    /// `Us = min(Us + n·W, Lmax)`: the token bucket's debt floor
    /// `tokens = max(tokens − n·W, Cs − Lmax)`, the leaky bucket's and GCRA's
    /// `level = min(level + n·W, Lmax)`. Only overdraft reaches the cap (`Cs ≤ Lmax`).
    pub fn charge(&mut self, n: u64, p: &Params) {
        self.us = (self.us + Self::cost(n, p)).min(p.lmax);
    }

    /// `Us = max(0, Us − n·W)`: never below empty.
    pub fn refund(&mut self, n: u64, p: &Params) {
        self.us = self.us.saturating_sub(Self::cost(n, p));
    }

    /// `floor(max(0, Cs − Us)/W)`.
    pub fn remaining(&self, p: &Params) -> u64 {
        sat_u64(p.cs.saturating_sub(self.us) / u128::from(p.w.max(1)))
    }

    /// `ceil(Us/W)`: usage in whole requests.
    pub fn used(&self, p: &Params) -> u64 {
        sat_u64(ceil_div(self.us, u128::from(p.w.max(1))))
    }

    /// `lag + ceil(Us/R)`: until the bucket is empty (full of tokens). `R > 0` (the caller
    /// handles `R = 0`).
    pub fn reset_ms(&self, p: &Params) -> u64 {
        sat_u64(ceil_div(self.us, u128::from(p.r))).saturating_add(self.lag)
    }

    /// `lag + ceil((Us − (Cs − n·W))/R)` when `n ≤ C` (the doc's form: `n·W ≤ Cs`, so
    /// `Cs − n·W` is free space, never negative), else `None` (never fits). Only called for
    /// a denied hit, where `Us > Cs − n·W`; the saturation is a guard, never reached.
    pub fn retry_ms(&self, n: u64, p: &Params) -> Option<u64> {
        if n > p.c {
            return None;
        }
        let free = p.cs - Self::cost(n, p);
        let excess = self.us.saturating_sub(free);
        Some(sat_u64(ceil_div(excess, u128::from(p.r))).saturating_add(self.lag))
    }

    /// The state's absolute expiry: `now + reset_ms`.
    pub fn expires_at(&self, p: &Params, now: u64) -> u64 {
        now.saturating_add(self.reset_ms(p))
    }
}
