//! The run-length counts `sliding_log` and `sliding_window` both keep: `(key, count)` runs
//! with ascending keys (a timestamp, a sub-window index) and their total, as Redis keeps
//! them for `sliding_log` in one ZSET (`src/store/lua/runs.lua`; `sliding_window` in one
//! string, `src/store/lua/sliding_window.lua`).
//!
//! What the two algorithms share is here: which runs are live, dropping the others when the
//! state is written, adding to the newest run, refunding newest first with bounded work.
//! What a key means (and so which runs a load drops, when a retry comes) stays in each.

use std::collections::VecDeque;

use crate::limit::SLIDING_LOG_REFUND_RUNS;

/// Runs by key, ascending, and the sum of their counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Runs {
    runs: VecDeque<(u64, u64)>,
    total: u64,
}

impl Runs {
    /// Bytes held on the heap (the memory store's accounting).
    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<(u64, u64)>()
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Where the live runs start, the first key `expired` does not hold for (keys ascend),
    /// and what they sum to: the state as a load sees it, nothing removed.
    pub fn live(&self, expired: impl Fn(u64) -> bool) -> (usize, u64) {
        let first = self.runs.partition_point(|&(key, _)| expired(key));
        let dropped = self
            .runs
            .range(..first)
            .fold(0u64, |s, &(_, c)| s.saturating_add(c));
        (first, self.total.saturating_sub(dropped))
    }

    /// Remove the runs before `first` (what the load found expired).
    pub fn prune(&mut self, first: usize) {
        for (_, c) in self.runs.drain(..first.min(self.runs.len())) {
            self.total = self.total.saturating_sub(c);
        }
    }

    /// Add `n` under `key`, or to the newest run when its key is `≥ key` (the same key, or a
    /// clock gone backwards: counted in the newest run, the conservative choice, so runs
    /// stay in order and Redis never inserts in the middle).
    pub fn add(&mut self, key: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.total = self.total.saturating_add(n);
        match self.runs.back_mut() {
            Some((k, c)) if *k >= key => *c = c.saturating_add(n),
            _ => self.runs.push_back((key, n)),
        }
    }

    /// Take `n` from the newest runs first, never below empty, reaching back at most
    /// [`SLIDING_LOG_REFUND_RUNS`] runs: older counts are not refunded, so a refund's work is
    /// bounded whatever its cost. Emptied runs are removed.
    pub fn refund(&mut self, mut n: u64) {
        let mut touched = 0;
        while n > 0 && touched < SLIDING_LOG_REFUND_RUNS {
            let Some((_, c)) = self.runs.back_mut() else {
                break;
            };
            let take = n.min(*c);
            *c -= take;
            n -= take;
            touched += 1;
            self.total = self.total.saturating_sub(take);
            if *c == 0 {
                self.runs.pop_back();
            }
        }
    }

    /// The newest run's key.
    pub fn newest(&self) -> Option<u64> {
        self.runs.back().map(|&(key, _)| key)
    }

    /// The runs from `first` on (the live ones), oldest first.
    pub fn from(&self, first: usize) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs.range(first.min(self.runs.len())..).copied()
    }
}
