//! `fixed_window` (docs/explanation/algorithms.md): a count per epoch-aligned window of `W` ms,
//! or per calendar period ([`Params::window`]).
//!
//! State `(ws, c)`. Everything is `u64`/`u128` with saturation so no input can overflow;
//! the count is capped at [`USAGE_MAX`] so the Lua doubles stay exact. A count refunded to 0
//! is not kept (the check deletes it, as Redis does).

use super::{Params, USAGE_MAX};

/// Window start (ms) and the hits counted in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FixedWindow {
    pub ws: u64,
    pub c: u64,
}

impl FixedWindow {
    /// Step 1: the window containing `now` (starting at `ws_now`), or the stored one if it is
    /// current (or in the future: the clock went backwards, keeping it is the conservative
    /// choice).
    pub fn load(stored: Option<&FixedWindow>, ws_now: u64) -> FixedWindow {
        match stored {
            Some(s) if s.ws >= ws_now => *s,
            _ => FixedWindow { ws: ws_now, c: 0 },
        }
    }

    /// `c + n ≤ C`.
    pub fn fits(&self, n: u64, cap: u64) -> bool {
        u128::from(self.c) + u128::from(n) <= u128::from(cap)
    }

    /// `c = min(c + n, 2^53)`.
    pub fn charge(&mut self, n: u64) {
        self.c = self.c.saturating_add(n).min(USAGE_MAX);
    }

    /// `c = max(0, c − n)`.
    pub fn refund(&mut self, n: u64) {
        self.c = self.c.saturating_sub(n);
    }

    /// `c = 0`: saved as a delete (docs/explanation/algorithms.md: after a refund to 0, the key goes).
    pub fn is_empty(&self) -> bool {
        self.c == 0
    }

    /// `max(0, C − c)`.
    pub fn remaining(&self, cap: u64) -> u64 {
        cap.saturating_sub(self.c)
    }

    /// Absolute end of the window (`ws + W`, or its calendar period's end): the state's
    /// expiry.
    pub fn end_ms(&self, p: &Params, now: u64) -> u64 {
        p.window_end(self.ws, now)
    }

    /// `end − now`: both `reset_ms` and (when denied, whatever the cost) `retry_ms`.
    pub fn until_end_ms(&self, p: &Params, now: u64) -> u64 {
        self.end_ms(p, now).saturating_sub(now)
    }
}
