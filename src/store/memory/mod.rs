//! The embedded in-memory store: native algorithms (`limit::algorithm`) over sharded maps.
//!
//! State is keyed by `(StateTag, StateIdentity)` and sharded by the tag alone, so every limit
//! of one check lives in one shard and the check is decided atomically under one
//! `parking_lot` mutex, with no await while it is held. Each entry carries the doc's expiry
//! (TTL, slack 0): an expired state reads as missing, and expired entries are evicted inline
//! by an amortized sweep of the shard whenever it has doubled since the last sweep, so memory
//! stays proportional to the live keys without a background task ([`MemoryStore::sweep`] is
//! there for one that wants to return memory sooner).
//!
//! Hashing: tags are already 128-bit hashes, but of client-chosen values with an unkeyed
//! function, so the map and the shard choice each fold the tag through a multiply keyed by
//! per-store random seeds (one 64×64→128 multiply, as foldhash does) to keep crafted
//! descriptors from piling into one bucket chain.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;

use self::hash::{FoldBuild, folded_mul, random_seed};

use super::{Store, StoreError};
use crate::limit::algorithm::{self, LimitState};
use crate::limit::{Check, Clock, LimitResult, LimitSpec, StateTag};

mod hash;
#[cfg(test)]
mod tests;

/// Default cap on the bytes of live state (`--memory-max-bytes`).
pub const DEFAULT_MAX_BYTES: usize = 256 << 20;

/// Tuning of a [`MemoryStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryOptions {
    /// Number of independently locked shards (rounded up to a power of two, 1 to 65536).
    pub shards: usize,
    /// A shard is not swept before it holds this many entries.
    pub min_sweep_len: usize,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            shards: 64,
            min_sweep_len: 1024,
        }
    }
}

/// See the module documentation.
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    shards: Box<[Padded]>,
    mask: usize,
    shard_seed: (u64, u64),
    min_sweep_len: usize,
}

/// One shard per cache line, so two cores locking neighbouring shards do not false-share.
#[repr(align(64))]
struct Padded(Mutex<Shard>);

struct Shard {
    map: HashMap<Key, LimitState, FoldBuild>,
    /// Reused buffer for the states of a multi-limit check (no allocation per call).
    scratch: Vec<LimitState>,
    /// Sweep when `map.len()` exceeds this.
    sweep_at: usize,
}

/// A limit's state identity: the descriptor's tag and the packed `StateIdentity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    tag: u128,
    id: u64,
}

impl Key {
    fn new(tag: StateTag, spec: &LimitSpec) -> Key {
        let id = spec.identity();
        Key {
            tag: tag.0,
            id: u64::from(id.algorithm.code())
                | (id.unit as u64) << 8
                | u64::from(id.buckets) << 16
                | u64::from(id.slot) << 48,
        }
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // One write: distinct identities under one tag stay distinct (`id < 2^56`).
        state.write_u128(self.tag ^ u128::from(self.id) << 64);
    }
}

impl Shard {
    fn insert(&mut self, key: Key, st: LimitState, now: u64, min_sweep_len: usize) {
        self.map.insert(key, st);
        if self.map.len() > self.sweep_at {
            self.sweep(now, min_sweep_len);
        }
    }

    /// Drops expired entries; the next sweep waits until the live set has doubled, so the
    /// cost is amortized O(1) per insert. Returns memory after a burst of keys has expired.
    fn sweep(&mut self, now: u64, min_sweep_len: usize) {
        self.map.retain(|_, st| st.is_live(now));
        self.sweep_at = self.map.len().saturating_mul(2).max(min_sweep_len);
        if self.map.capacity() > self.sweep_at.saturating_mul(4) {
            self.map.shrink_to(self.sweep_at);
        }
    }
}

impl MemoryStore {
    pub fn new(clock: Arc<dyn Clock>) -> MemoryStore {
        MemoryStore::with_options(clock, MemoryOptions::default())
    }

    pub fn with_options(clock: Arc<dyn Clock>, opts: MemoryOptions) -> MemoryStore {
        let n = opts.shards.clamp(1, 1 << 16).next_power_of_two();
        let map_hasher = FoldBuild::random();
        let shards = (0..n)
            .map(|_| {
                Padded(Mutex::new(Shard {
                    map: HashMap::with_hasher(map_hasher),
                    scratch: Vec::new(),
                    sweep_at: opts.min_sweep_len,
                }))
            })
            .collect();
        MemoryStore {
            clock,
            shards,
            mask: n - 1,
            shard_seed: (random_seed(3), random_seed(4)),
            min_sweep_len: opts.min_sweep_len,
        }
    }

    fn shard(&self, tag: StateTag) -> &Mutex<Shard> {
        let h = folded_mul(
            tag.0 as u64 ^ self.shard_seed.0,
            (tag.0 >> 64) as u64 ^ self.shard_seed.1,
        );
        // High bits: the map's own hash is independent (other seeds), but keep clear of the
        // low bits anyway.
        &self.shards[(h >> 40) as usize & self.mask].0
    }

    /// [`Store::run`] at an explicit `now_ms`, synchronously.
    pub fn run_at(&self, checks: &[Check<'_>], now_ms: u64, out: &mut Vec<LimitResult>) {
        for check in checks {
            self.run_check(check, now_ms, out);
        }
    }

    fn run_check(&self, check: &Check<'_>, now: u64, out: &mut Vec<LimitResult>) {
        let mut guard = self.shard(check.tag).lock();
        let shard = &mut *guard;
        match check.limits {
            [] => {}
            [spec] => {
                // Steady state: one lookup, updated in place.
                let key = Key::new(check.tag, spec);
                if let Some(st) = shard.map.get_mut(&key) {
                    algorithm::evaluate(check, now, std::slice::from_mut(st), out);
                    if !st.is_live(now) {
                        shard.map.remove(&key);
                    }
                } else {
                    let mut st = LimitState::default();
                    algorithm::evaluate(check, now, std::slice::from_mut(&mut st), out);
                    if st.is_live(now) {
                        shard.insert(key, st, now, self.min_sweep_len);
                    }
                }
            }
            limits => {
                // Several limits: move their states out (no clone: the deques move), decide
                // them together, put back what is still live. Limits with the same identity
                // (config never produces them) would share one state: the last one wins.
                let mut scratch = std::mem::take(&mut shard.scratch);
                let tag = check.tag;
                scratch.extend(
                    limits
                        .iter()
                        .map(|spec| shard.map.remove(&Key::new(tag, spec)).unwrap_or_default()),
                );
                algorithm::evaluate(check, now, &mut scratch, out);
                for (spec, st) in limits.iter().zip(scratch.drain(..)) {
                    if st.is_live(now) {
                        shard.insert(Key::new(tag, spec), st, now, self.min_sweep_len);
                    }
                }
                shard.scratch = scratch;
            }
        }
    }

    /// Evicts every expired entry now (optional: eviction is also amortized inline).
    pub fn sweep(&self) {
        let now = self.clock.now_ms();
        for shard in self.shards.iter() {
            shard.0.lock().sweep(now, self.min_sweep_len);
        }
    }

    /// Entries held, expired ones not yet evicted included.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock().map.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stored state of `spec` under `tag`, if any (tests and debugging).
    pub fn state(&self, tag: StateTag, spec: &LimitSpec) -> Option<LimitState> {
        self.shard(tag)
            .lock()
            .map
            .get(&Key::new(tag, spec))
            .cloned()
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

impl Store for MemoryStore {
    async fn run(
        &self,
        checks: &[Check<'_>],
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        // Fully synchronous: each check takes and releases its shard lock before the next.
        self.run_at(checks, self.clock.now_ms(), out);
        Ok(())
    }
}
