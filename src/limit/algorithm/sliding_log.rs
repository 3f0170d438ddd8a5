//! `sliding_log` (docs/explanation/algorithms.md): the timestamps of admitted hits, exact over the
//! trailing window `(now − W, now]`.
//!
//! Stored run-length encoded, `(ts, entries)`, oldest first: a hit of cost `n` is one run
//! (or one addition to the newest run), so memory is bounded by the number of distinct
//! timestamps, never by the cost. Semantically it is the doc's list of entries. Loading is
//! read-only ([`SlidingLog::view`]); expired runs are removed when the state is written.
//! Redis keeps the same runs (a ZSET of `(ts, cum:cnt)`), with every call bounded: see
//! `src/store/lua/runs.lua`.

use super::runs::Runs;
use super::scaled::sat_u64;

/// Entries by timestamp, ascending, with their total.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlidingLog {
    runs: Runs,
}

/// The result of step 1: what is live at `now`, without changing the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// Position of the first run with `ts > now − W`.
    first: usize,
    /// `U`: live entries.
    pub usage: u64,
}

impl SlidingLog {
    /// Bytes held on the heap (the memory store's accounting).
    pub fn heap_bytes(&self) -> usize {
        self.runs.heap_bytes()
    }

    /// Drop (virtually) entries with `ts ≤ now − W`; `U` = what is left.
    pub fn view(&self, w: u64, now: u64) -> View {
        let (first, usage) = self.runs.live(|ts| ts.saturating_add(w) <= now);
        View { first, usage }
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Add `n` entries at `now`, or to the newest run when its timestamp is `≥ now` (the
    /// same millisecond, or a clock gone backwards: the entries take the newest timestamp,
    /// the conservative choice, so runs stay in order and Redis never inserts mid-log).
    pub fn charge(&mut self, v: &View, n: u64, now: u64) {
        self.runs.prune(v.first);
        self.runs.add(now, n);
    }

    /// Remove the `n` newest entries (never below empty), reaching back at most
    /// [`SLIDING_LOG_REFUND_RUNS`](crate::limit::SLIDING_LOG_REFUND_RUNS) runs: older
    /// entries are not refunded, so a refund's work is bounded whatever its cost.
    pub fn refund(&mut self, v: &View, n: u64) {
        self.runs.prune(v.first);
        self.runs.refund(n);
    }

    /// Empty → 0; else `newest + W − now`.
    pub fn reset_ms(&self, v: &View, w: u64, now: u64) -> u64 {
        match self.runs.newest() {
            Some(ts) if v.usage > 0 => ts.saturating_add(w).saturating_sub(now),
            _ => 0,
        }
    }

    /// Denied with `n ≤ C`: `ts_k + W − now` for the `k`-th oldest live entry,
    /// `k = U + n − C`. `None` when `n > C`.
    pub fn retry_ms(&self, v: &View, n: u64, cap: u64, w: u64, now: u64) -> Option<u64> {
        if n > cap {
            return None;
        }
        let k = (u128::from(v.usage) + u128::from(n))
            .saturating_sub(u128::from(cap))
            .max(1);
        let mut seen: u128 = 0;
        for (ts, c) in self.runs.from(v.first) {
            seen += u128::from(c);
            if seen >= k {
                return Some(sat_u64(u128::from(ts) + u128::from(w)).saturating_sub(now));
            }
        }
        Some(self.reset_ms(v, w, now))
    }

    /// Stored runs as `(ts, entries)`, oldest first (tests and debugging).
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs.from(0)
    }
}
