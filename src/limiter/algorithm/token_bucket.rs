//! `token_bucket` (docs/algorithms.md): available tokens, scaled, refilled at `R` per ms.
//!
//! Decisions and reports are [`Level`]'s (shared with `leaky_bucket` and `gcra`); this file
//! only converts between the stored `(tokens, ts)` and the scaled usage `Us = Cs − tokens`.
//! Storing tokens (not usage) is what makes a changed `burst` keep the available tokens.

use super::scaled::Level;
use super::{Params, USAGE_MAX};

/// Available tokens × `W` (negative = overdraft debt) and the time they were computed at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenBucket {
    pub tokens: i128,
    pub ts: u64,
}

impl TokenBucket {
    /// Step 1: missing → full. `tokens = clamp(tokens + max(0, now − ts)·R, Cs − 2^53, Cs)`,
    /// `ts = max(ts, now)`. The lower clamp only matters after a `burst` increase on a bucket
    /// deep in overdraft debt; it keeps `Us ≤ 2^53`.
    pub fn load(stored: Option<&TokenBucket>, p: &Params, now: u64) -> Level {
        let Some(s) = stored else {
            return Level::default();
        };
        let cs = i128::try_from(p.cs).unwrap_or(i128::MAX);
        let elapsed = i128::from(now.saturating_sub(s.ts));
        let refilled = s.tokens.saturating_add(elapsed * i128::from(p.r));
        let tokens = refilled.min(cs).max(cs - i128::from(USAGE_MAX));
        Level {
            us: (cs - tokens).unsigned_abs(),
            lag: s.ts.saturating_sub(now),
        }
    }

    /// Step 6: full → `None` (delete: a missing bucket is full); else `(Cs − Us, now + lag)`.
    pub fn save(level: &Level, p: &Params, now: u64) -> Option<TokenBucket> {
        if level.us == 0 {
            return None;
        }
        let cs = i128::try_from(p.cs).unwrap_or(i128::MAX);
        Some(TokenBucket {
            tokens: cs - i128::try_from(level.us).unwrap_or(0),
            ts: now.saturating_add(level.lag),
        })
    }
}
