//! The embedded in-memory store: native algorithms (`limit::algorithm`) over sharded maps.
//!
//! State is keyed by `(StateTag, StateIdentity)` and sharded by the tag alone, so every limit
//! of one check lives in one shard and the check is decided atomically under one
//! `parking_lot` mutex, with no await while it is held. Each entry carries the doc's expiry
//! (TTL, slack 0): an expired state reads as missing.
//!
//! Memory is bounded (`shard.rs`): each shard has a byte budget (its share of
//! `--memory-max-bytes`), and when full it evicts what is closest to empty, so a flood of
//! distinct keys cannot flush the counters that matter. Expired entries are dropped by an
//! amortized sweep whenever a shard has doubled since the last one, by eviction sampling,
//! and by [`MemoryStore::sweep`], which the server runs periodically so memory comes back
//! while idle.
//!
//! Hashing: tags are already 128-bit hashes, but of client-chosen values with an unkeyed
//! function, so the map and the shard choice (`limit::sharded`) each fold the tag through a
//! multiply keyed by per-store random seeds to keep crafted descriptors from piling into one
//! bucket chain.

use std::sync::Arc;

use self::shard::{Key, Shard, Slot};

use super::{Call, Store, StoreError};
use crate::limit::algorithm::{self, LimitState};
use crate::limit::hash::{FoldBuild, random_seed};
use crate::limit::sharded::Sharded;
use crate::limit::{Charge, Check, Clock, LimitResult, LimitSpec, StateTag};

mod shard;
#[cfg(test)]
mod tests;

/// Smallest budget a shard is given: a shard must hold the largest single state (a full
/// `sliding_log` of 10 000 distinct timestamps, 160 KB) many times over, so small totals
/// get fewer shards.
const MIN_SHARD_BYTES: usize = 1 << 20;

/// Tuning of a [`MemoryStore`]. Its `Default` is the settings' defaults (`settings/caps.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryOptions {
    /// Number of independently locked shards (rounded up to a power of two, 1 to 65536;
    /// fewer when `max_bytes` would give a shard less than 1 MiB).
    pub shards: usize,
    /// A shard is not swept inline before it holds this many entries.
    pub min_sweep_len: usize,
    /// Most bytes of state held (table and heap), split evenly among the shards.
    pub max_bytes: usize,
}

/// See the module documentation.
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    shards: Sharded<Shard>,
    /// RLQS subscriptions (`store/quota.rs`).
    quota: super::quota::MemoryQuota,
}

impl Key {
    fn new(tag: StateTag, spec: &LimitSpec) -> Key {
        let id = spec.identity();
        Key {
            tag: tag.0,
            id: u64::from(id.algorithm.code())
                | u64::from(id.buckets) << 16
                | u64::from(id.slot) << 48,
            window_s: id.window_key(),
        }
    }
}

impl MemoryStore {
    pub fn new(clock: Arc<dyn Clock>) -> MemoryStore {
        MemoryStore::with_options(clock, MemoryOptions::default())
    }

    pub fn with_options(clock: Arc<dyn Clock>, opts: MemoryOptions) -> MemoryStore {
        let by_budget = (opts.max_bytes / MIN_SHARD_BYTES).max(1);
        // A power of two at most `opts.shards` and `by_budget`, as `Sharded` rounds it.
        let n = opts
            .shards
            .min(by_budget)
            .clamp(1, 1 << 16)
            .next_power_of_two();
        let budget = opts.max_bytes / n;
        let map_hasher = FoldBuild::default();
        let shards = Sharded::new(n, || {
            Shard::new(map_hasher, budget, opts.min_sweep_len, random_seed())
        });
        MemoryStore {
            quota: super::quota::MemoryQuota::new(clock.clone()),
            clock,
            shards,
        }
    }

    /// [`Store::run`] at an explicit `now_ms`, synchronously.
    pub fn run_at(&self, checks: &[Check<'_>], now_ms: u64, out: &mut Vec<LimitResult>) {
        self.run_at_with(checks, Charge::Each, now_ms, out);
    }

    /// [`Store::run`] of `checks` charged as `charge` says, at an explicit `now_ms`,
    /// synchronously.
    ///
    /// Stop-increment over several checks holds every shard the request touches (locked in
    /// ascending order, so two requests never wait on each other in a cycle) while it first
    /// learns, reading only, whether any check is denied, then evaluates: atomic, as the
    /// Redis script is.
    pub fn run_at_with(
        &self,
        checks: &[Check<'_>],
        charge: Charge,
        now_ms: u64,
        out: &mut Vec<LimitResult>,
    ) {
        let held = charge == Charge::Held;
        if charge == Charge::Each || held || checks.len() < 2 {
            for check in checks {
                let mut guard = self.shards.of(check.tag).lock();
                run_check(&mut guard, check, now_ms, held, out);
            }
            return;
        }
        let mut order: Vec<usize> = checks.iter().map(|c| self.shards.index(c.tag)).collect();
        order.sort_unstable();
        order.dedup();
        let mut guards: Vec<_> = order.iter().map(|&i| self.shards.at(i).lock()).collect();
        let guard_of = |tag: StateTag| order.binary_search(&self.shards.index(tag)).unwrap_or(0);
        let held = checks.iter().any(|c| {
            let shard = &guards[guard_of(c.tag)];
            let states = c
                .limits
                .iter()
                .map(|spec| shard.map.get(&Key::new(c.tag, spec)).map(|slot| &slot.st));
            !algorithm::admits(c, now_ms, states)
        });
        for check in checks {
            let g = guard_of(check.tag);
            run_check(&mut guards[g], check, now_ms, held, out);
        }
    }

    /// Evicts every expired entry now and shrinks tables that emptied (the server runs it
    /// periodically; eviction is also amortized inline).
    pub fn sweep(&self) {
        let now = self.clock.now_ms();
        for shard in self.shards.iter() {
            shard.lock().sweep(now);
        }
        self.quota.sweep();
    }

    /// The RLQS subscriptions held in process.
    pub fn quota(&self) -> &super::quota::MemoryQuota {
        &self.quota
    }

    /// Bytes held: tables and the states' heap (what `max_bytes` bounds).
    pub fn bytes(&self) -> usize {
        self.shards.sum(Shard::bytes)
    }

    /// Live entries evicted so far to stay within `max_bytes`.
    pub fn evictions(&self) -> u64 {
        self.shards.sum(|s| s.evictions)
    }

    /// Entries held, expired ones not yet evicted included.
    pub fn len(&self) -> usize {
        self.shards.sum(|s| s.map.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`Store::reset`] at an explicit `now_ms`: remove the states of `limits` under `tag`;
    /// how many were still live.
    pub fn reset_at(&self, tag: StateTag, limits: &[LimitSpec], now_ms: u64) -> u64 {
        let mut shard = self.shards.of(tag).lock();
        let mut removed = 0;
        for spec in limits {
            let taken = shard
                .map
                .get_index_of(&Key::new(tag, spec))
                .and_then(|i| shard.take(i));
            if taken.is_some_and(|slot| slot.st.is_live(now_ms)) {
                removed += 1;
            }
        }
        removed
    }

    /// The stored state of `spec` under `tag`, if any (tests and debugging).
    pub fn state(&self, tag: StateTag, spec: &LimitSpec) -> Option<LimitState> {
        self.shards
            .of(tag)
            .lock()
            .map
            .get(&Key::new(tag, spec))
            .map(|slot| slot.st.clone())
    }
}

/// One check, under its shard's lock (every limit of a check lives in its tag's shard);
/// `held`: stop-increment decided that nothing of this request is charged.
fn run_check(
    shard: &mut Shard,
    check: &Check<'_>,
    now: u64,
    held: bool,
    out: &mut Vec<LimitResult>,
) {
    let first = out.len();
    match check.limits {
        [] => {}
        [spec] => {
            // Steady state: one lookup, updated in place.
            let key = Key::new(check.tag, spec);
            if let Some((i, _, slot)) = shard.map.get_full_mut(&key) {
                let before = slot.st.heap_bytes();
                algorithm::evaluate_held(check, now, std::slice::from_mut(&mut slot.st), held, out);
                let after = slot.st.heap_bytes();
                if !slot.st.is_live(now) {
                    shard.resized(before, after, None);
                    shard.take(i);
                } else if let Some(r) = out.get(first) {
                    slot.worth = shard::worth(&slot.st, spec, r, now);
                    if after != before {
                        shard.resized(before, after, Some(now));
                    }
                }
            } else {
                let mut st = LimitState::default();
                algorithm::evaluate_held(check, now, std::slice::from_mut(&mut st), held, out);
                if let (true, Some(r)) = (st.is_live(now), out.get(first)) {
                    shard.insert(key, Slot::new(st, spec, r, now), now);
                }
            }
        }
        limits => {
            // Several limits: move their states out (no clone: the deques move), decide
            // them together, put back what is still live. Limits with the same identity
            // (config never produces them) would share one state: the last one wins.
            let mut scratch = std::mem::take(&mut shard.scratch);
            let tag = check.tag;
            scratch.extend(limits.iter().map(|spec| {
                shard
                    .map
                    .get_index_of(&Key::new(tag, spec))
                    .and_then(|i| shard.take(i))
                    .map(|slot| slot.st)
                    .unwrap_or_default()
            }));
            algorithm::evaluate_held(check, now, &mut scratch, held, out);
            let results = out.get(first..).unwrap_or_default();
            for ((spec, st), r) in limits.iter().zip(scratch.drain(..)).zip(results) {
                if st.is_live(now) {
                    shard.insert(Key::new(tag, spec), Slot::new(st, spec, r, now), now);
                }
            }
            shard.scratch = scratch;
        }
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.count())
            .finish_non_exhaustive()
    }
}

impl Store for MemoryStore {
    /// Ids, deadline and keys aside: an answer in process cannot be lost, nor late.
    async fn run(&self, call: &Call<'_>, out: &mut Vec<LimitResult>) -> Result<(), StoreError> {
        // Fully synchronous: no await while a shard lock is held.
        self.run_at_with(call.checks, call.charge, self.clock.now_ms(), out);
        Ok(())
    }

    async fn reset(&self, tag: StateTag, limits: &[LimitSpec]) -> Result<u64, StoreError> {
        Ok(self.reset_at(tag, limits, self.clock.now_ms()))
    }
}
