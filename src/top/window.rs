//! One domain's recent window: two halves of `window / 2` each, aligned to the Unix epoch,
//! each with two Space-Saving summaries (`sketch.rs`), one weighted by hits and one by
//! denials. Hits land in the half that holds `now`; when the clock enters the next half, the
//! older half is cleared and takes the new one (after a longer silence, both are). A reading
//! covers the half in progress and the whole half before it: between `window / 2` and
//! `window` of history, never more.
//!
//! A descriptor's count over the window is the sum of its counts in the two halves (0 where
//! a half does not hold it). In each half the count is off by at most that half's floor
//! (`SpaceSaving::floor`: over when held, under when not), so the sum is off by at most the
//! two floors together, which is at most `N / capacity` for `N` the hits (or denials) of
//! the window.

use std::collections::HashMap;

use super::sketch::SpaceSaving;

/// What a ranking orders by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    Hits,
    Denied,
}

/// One half of the window.
struct Half {
    hits: SpaceSaving,
    denied: SpaceSaving,
}

impl Half {
    fn new(capacity: usize) -> Half {
        Half {
            hits: SpaceSaving::new(capacity),
            denied: SpaceSaving::new(capacity),
        }
    }

    fn by(&self, by: By) -> &SpaceSaving {
        match by {
            By::Hits => &self.hits,
            By::Denied => &self.denied,
        }
    }

    fn clear(&mut self) {
        self.hits.clear();
        self.denied.clear();
    }
}

/// A descriptor of a ranking: its label (`label.rs`) and its counts over the window.
#[derive(Debug, PartialEq, Eq)]
pub struct Ranked {
    pub label: Box<[u8]>,
    pub hits: u64,
    pub denied: u64,
}

/// The heaviest descriptors of a window, heaviest first, and how far their counts may be
/// off.
#[derive(Debug, PartialEq, Eq)]
pub struct Ranking {
    pub top: Vec<Ranked>,
    /// Hits and denials of the whole window (every descriptor of the domain).
    pub hits: u64,
    pub denied: u64,
    /// Most any `hits` (`denied`) shown may differ from the true count, either way: at most
    /// `hits / capacity` (`denied / capacity`), and 0 while every descriptor seen is held.
    pub hits_error: u64,
    pub denied_error: u64,
    /// Where the window reading starts (milliseconds since the Unix epoch): the start of the
    /// half before the one in progress.
    pub since_ms: u64,
    /// How much history the reading covers: from `since_ms` to now.
    pub covered_ms: u64,
}

pub struct Recent {
    half_ms: u64,
    /// `now / half_ms` of the half in progress, `halves[0]`; `halves[1]` is the one before.
    current: u64,
    halves: [Half; 2],
}

impl Recent {
    pub fn new(capacity: usize, half_ms: u64) -> Recent {
        Recent {
            half_ms: half_ms.max(1),
            current: 0,
            halves: [Half::new(capacity), Half::new(capacity)],
        }
    }

    /// Move to the half holding `now_ms`. A clock that went back keeps counting in the
    /// current half.
    fn rotate(&mut self, now_ms: u64) {
        let at = now_ms / self.half_ms;
        if at <= self.current {
            return;
        }
        if at == self.current + 1 {
            self.halves.swap(0, 1);
            self.halves[0].clear();
        } else {
            self.halves[0].clear();
            self.halves[1].clear();
        }
        self.current = at;
    }

    /// One descriptor's hits (`cost`), denied or not. `label` is called only for a
    /// descriptor that takes a counter.
    pub fn add(
        &mut self,
        now_ms: u64,
        key: u64,
        cost: u64,
        denied: bool,
        label: impl Fn() -> Box<[u8]>,
    ) {
        self.rotate(now_ms);
        let half = &mut self.halves[0];
        half.hits.add(key, cost, &label);
        if denied {
            half.denied.add(key, cost, &label);
        }
    }

    /// The `n` heaviest descriptors by `by`, with both counts of each.
    pub fn rank(&mut self, now_ms: u64, by: By, n: usize) -> Ranking {
        self.rotate(now_ms);
        let mut scores: HashMap<u64, (u64, &[u8])> = HashMap::new();
        for half in &self.halves {
            for held in half.by(by).held() {
                let e = scores.entry(held.key).or_insert((0, held.label));
                e.0 = e.0.saturating_add(held.count);
            }
        }
        let mut order: Vec<(u64, u64, &[u8])> =
            scores.into_iter().map(|(k, (s, l))| (k, s, l)).collect();
        // Heaviest first; equal counts in label order, so a reading is reproducible.
        order.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.2.cmp(b.2)));
        order.truncate(n);
        let sum = |key: u64, pick: fn(&Half) -> &SpaceSaving| -> u64 {
            self.halves
                .iter()
                .filter_map(|h| pick(h).get(key))
                .fold(0u64, |acc, (count, _)| acc.saturating_add(count))
        };
        let top = order
            .into_iter()
            .map(|(key, _, label)| Ranked {
                label: label.into(),
                hits: sum(key, |h| &h.hits),
                denied: sum(key, |h| &h.denied),
            })
            .collect();
        let both = |pick: fn(&SpaceSaving) -> u64, of: fn(&Half) -> &SpaceSaving| {
            self.halves
                .iter()
                .fold(0u64, |acc, h| acc.saturating_add(pick(of(h))))
        };
        let since_ms = self.current.saturating_sub(1).saturating_mul(self.half_ms);
        Ranking {
            top,
            hits: both(SpaceSaving::total, |h| &h.hits),
            denied: both(SpaceSaving::total, |h| &h.denied),
            hits_error: both(SpaceSaving::floor, |h| &h.hits),
            denied_error: both(SpaceSaving::floor, |h| &h.denied),
            since_ms,
            covered_ms: now_ms.saturating_sub(since_ms),
        }
    }
}
