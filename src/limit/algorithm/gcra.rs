//! `gcra` (docs/explanation/algorithms.md): one theoretical arrival time `TAT = a + b/R` ms.
//!
//! `(TAT − now)·R` is the same scaled level as `leaky_bucket`'s, so decisions and reports
//! are [`Level`]'s; this file only converts between the stored TAT and [`Level`]. Keeping
//! the TAT (not a level) is what makes a changed `requests_per_unit` keep the time at which
//! the key is free again.

use super::Params;
use super::scaled::{Level, sat_u64};

/// `TAT = a + b/r` ms, with `0 ≤ b < r`; `r` is the `R` it was written with (meaningful only
/// when `b > 0`, as in the Redis string form `"a"` / `"a:b:R"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gcra {
    pub a: u64,
    pub b: u64,
    pub r: u64,
}

impl Gcra {
    /// Step 1: missing → level 0. A fraction written with another `R'` is rescaled to `R`
    /// as `ceil(b·R/R')` in double precision (the same operations as Lua), carrying whole
    /// milliseconds into `a`. `level = min(Lmax, max(0, (a − now)·R + b))`: if the clock went
    /// backwards the level grows (never mints quota); the cap keeps it (and the TAT saved
    /// from it) exact in Lua.
    pub fn load(stored: Option<&Gcra>, p: &Params, now: u64) -> Level {
        let Some(s) = stored else {
            return Level::default();
        };
        let (mut a, mut b) = (s.a, s.b);
        if b > 0 && s.r != p.r {
            // `as` from f64 saturates (and maps NaN to 0): no input can panic here.
            let scaled = (b as f64 * p.r as f64 / s.r as f64).ceil() as u64;
            a = a.saturating_add(scaled.checked_div(p.r).unwrap_or(0));
            b = scaled.checked_rem(p.r).unwrap_or(0);
        }
        let level = (i128::from(a) - i128::from(now)) * i128::from(p.r) + i128::from(b);
        Level {
            us: level.max(0).unsigned_abs().min(p.lmax),
            lag: 0,
        }
    }

    /// Step 6: level 0 → `None` (delete); else `a = now + floor(level/R)`, `b = level mod R`.
    pub fn save(level: &Level, p: &Params, now: u64) -> Option<Gcra> {
        if level.us == 0 || p.r == 0 {
            return None;
        }
        // `us ≤ Lmax ≤ 2^53`: always fits.
        let us = sat_u64(level.us);
        Some(Gcra {
            a: now.saturating_add(us / p.r),
            b: us % p.r,
            r: p.r,
        })
    }
}
