//! `sliding_window` (docs/explanation/algorithms.md): counts per sub-window of `W/B` ms, summed over
//! the `B + 1` sub-windows overlapping the trailing window.
//!
//! Loading is read-only ([`SlidingWindow::view`]): sub-windows the load drops are only
//! removed when the state is written (charge or refund), as in Redis. A call costs
//! O(dropped + live sub-windows) at worst, O(1) amortized when the clock moves forward.
//! Redis keeps the same counts in one string with every call bounded
//! (`src/store/lua/sliding_window.lua`).

use super::USAGE_MAX;
use super::runs::Runs;
use super::scaled::sat_u64;
use crate::limit::Periods;

/// Non-zero counts by sub-window index, ascending, and their sum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlidingWindow {
    subs: Runs,
}

/// Sub-window arithmetic for one `(W, B)`: `idx(t) = floor(t·B/W)`, `start(i) = ceil(i·W/B)`;
/// with calendar periods, `B` sub-windows per period ([`Periods::idx`], [`Periods::start`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub w: u64,
    pub b: u64,
    pub cal: Option<Periods>,
}

impl Geometry {
    pub fn idx(&self, t: u64) -> u64 {
        match &self.cal {
            Some(p) => p.idx(t, self.b),
            None => sat_u64(u128::from(t) * u128::from(self.b) / u128::from(self.w.max(1))),
        }
    }

    pub fn start(&self, i: u128) -> u128 {
        match &self.cal {
            Some(p) => p.start(i, self.b),
            None => {
                let b = u128::from(self.b.max(1));
                (i * u128::from(self.w)).div_ceil(b)
            }
        }
    }

    /// `start(i) − now`, in ms, never negative.
    fn until(&self, i: u128, now: u64) -> u64 {
        sat_u64(self.start(i).saturating_sub(u128::from(now)))
    }
}

/// The result of step 1: what is live at `now`, without changing the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// `idx(now)`.
    pub cur: u64,
    /// Position of the first sub-window with `j ≥ cur − B` (the ones before are dropped).
    first: usize,
    /// `U`: the sum of the live counts.
    pub usage: u64,
}

impl SlidingWindow {
    /// Bytes held on the heap (the memory store's accounting).
    pub fn heap_bytes(&self) -> usize {
        self.subs.heap_bytes()
    }

    /// The live sub-windows at `now` (missing state: `SlidingWindow::default()`).
    pub fn view(&self, g: &Geometry, now: u64) -> View {
        let cur = g.idx(now);
        let lo = cur.saturating_sub(g.b);
        let (first, usage) = self.subs.live(|j| j < lo);
        View { cur, first, usage }
    }

    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// `count[cur] += min(n, 2^53 − U)`: `U` stays exact in a double. Written with what the
    /// load dropped; a clock gone backwards counts in the newest sub-window (`Runs::add`).
    pub fn charge(&mut self, v: &View, n: u64) {
        self.subs.prune(v.first);
        self.subs
            .add(v.cur, n.min(USAGE_MAX.saturating_sub(v.usage)));
    }

    /// Take `n` from the newest sub-windows first, never below 0, reaching back at most
    /// [`SLIDING_LOG_REFUND_RUNS`](crate::limit::SLIDING_LOG_REFUND_RUNS) sub-windows
    /// (bounded work); empty ones are removed.
    pub fn refund(&mut self, v: &View, n: u64) {
        self.subs.prune(v.first);
        self.subs.refund(n);
    }

    /// `U = 0` → 0; else `start(j* + B + 1) − now`, `j*` the highest index with a count.
    pub fn reset_ms(&self, v: &View, g: &Geometry, now: u64) -> u64 {
        match self.subs.newest() {
            Some(j) if v.usage > 0 => g.until(u128::from(j) + u128::from(g.b) + 1, now),
            _ => 0,
        }
    }

    /// Denied with `n ≤ C`: `start(cur + k) − now` for the smallest `k ≥ 1` such that
    /// `U − Σ_{j=cur−B}^{cur−B+k−1} count[j] + n ≤ C`; `reset_ms` if no `k ≤ B + 1` works
    /// (only when the clock went backwards). `None` when `n > C`.
    pub fn retry_ms(&self, v: &View, n: u64, cap: u64, g: &Geometry, now: u64) -> Option<u64> {
        if n > cap {
            return None;
        }
        let need = i128::from(v.usage) + i128::from(n) - i128::from(cap);
        // Index of the oldest sub-window still counted, possibly negative near the epoch.
        let lo = i128::from(v.cur) - i128::from(g.b);
        let mut k: i128 = 1;
        if need > 0 {
            let mut freed: i128 = 0;
            let mut found = None;
            for (j, c) in self.subs.from(v.first) {
                freed += i128::from(c);
                if freed >= need {
                    found = Some((i128::from(j) - lo + 1).max(1));
                    break;
                }
            }
            k = found.unwrap_or(i128::MAX);
        }
        if k > i128::from(g.b) + 1 {
            return Some(self.reset_ms(v, g, now));
        }
        Some(g.until(u128::from(v.cur) + k.unsigned_abs(), now))
    }

    /// Stored sub-windows as `(index, count)`, oldest first (tests and debugging).
    pub fn counts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.subs.from(0)
    }
}
