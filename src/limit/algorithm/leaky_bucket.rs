//! `leaky_bucket` (docs/explanation/algorithms.md): a level, scaled, leaking at `R` per ms.
//!
//! Decisions and reports are [`Level`]'s (shared with `token_bucket` and `gcra`); this file
//! only converts between the stored `(level, ts)` and [`Level`]. Storing the level is what
//! makes a changed `burst` keep the usage.

use super::Params;
use super::scaled::{Level, sat_u64};

/// Usage × `W` and the time it was computed at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeakyBucket {
    pub level: u64,
    pub ts: u64,
}

impl LeakyBucket {
    /// Step 1: missing → empty (`(0, now)`).
    /// `level = min(Lmax, max(0, level − max(0, now − ts)·R))`, `lag = max(0, ts − now)`,
    /// `ts = max(ts, now)`. The cap (after the leak, as written) matters once `R` was lowered
    /// (a smaller `Lmax`) on a level saturated under the old one.
    pub fn load(stored: Option<&LeakyBucket>, p: &Params, now: u64) -> Level {
        let Some(s) = stored else {
            return Level::default();
        };
        let leaked = u128::from(now.saturating_sub(s.ts)) * u128::from(p.r);
        Level {
            us: u128::from(s.level).saturating_sub(leaked).min(p.lmax),
            lag: s.ts.saturating_sub(now),
        }
    }

    /// Step 6: empty → `None` (delete); else `(level, now + lag)`.
    pub fn save(level: &Level, now: u64) -> Option<LeakyBucket> {
        if level.us == 0 {
            return None;
        }
        Some(LeakyBucket {
            // `us ≤ Lmax ≤ 2^53`: always fits.
            level: sat_u64(level.us),
            ts: now.saturating_add(level.lag),
        })
    }
}
