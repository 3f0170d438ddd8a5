//! `token_bucket` (docs/explanation/algorithms.md): available tokens, scaled, refilled at `R` per ms.
//!
//! Decisions and reports are [`Level`]'s (shared with `leaky_bucket` and `gcra`); this file
//! only converts between the stored `(tokens, ts)` and the scaled usage `Us = Cs − tokens`.
//! Storing tokens (not usage) is what makes a changed `burst` keep the available tokens.

use super::Params;
use super::scaled::Level;

/// Available tokens × `W` (negative = overdraft debt) and the time they were computed at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenBucket {
    pub tokens: i128,
    pub ts: u64,
}

impl TokenBucket {
    /// Step 1: missing → full (`(Cs, now)`).
    /// `tokens = max(Cs − Lmax, min(Cs, tokens + max(0, now − ts)·R))`, `lag = max(0, ts − now)`,
    /// `ts = max(ts, now)`. The lower clamp keeps `Us = Cs − tokens ≤ Lmax`: it matters after
    /// a raised `burst` or a lowered `R` (a smaller `Lmax`) on a bucket deep in overdraft debt.
    pub fn load(stored: Option<&TokenBucket>, p: &Params, now: u64) -> Level {
        let Some(s) = stored else {
            return Level::default();
        };
        let cs = i128::try_from(p.cs).unwrap_or(i128::MAX);
        let floor = cs - i128::try_from(p.lmax).unwrap_or(0);
        let elapsed = i128::from(now.saturating_sub(s.ts));
        let refilled = s.tokens.saturating_add(elapsed * i128::from(p.r));
        let tokens = floor.max(cs.min(refilled));
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
