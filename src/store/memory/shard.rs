//! One shard of the memory store: its map, what it costs in bytes, and what leaves when
//! the shard is full.
//!
//! **Accounting.** A shard's bytes are its table (capacity × the size of a slot, index
//! included) plus what the states hold on the heap (sliding windows and logs). An insert
//! that would take the shard over its budget (growing the table included) first makes room.
//!
//! **Policy when full: evict what is closest to empty.** A rate limiter's state is a
//! promise to deny; forgetting a key gives back the quota it had used. So the victim is,
//! among a few slots sampled at random, an expired one, else the one whose limit was least
//! used at its last write (its `worth`: the share of the capacity in use; a penalty lock
//! counts as full), the soonest to expire on ties. Refusing new keys instead would deny or
//! fail every new client once one client had filled the store; evicting by age or at
//! random would let a client flush any counter, its own over-limit one first, with one
//! cheap request per slot. Here a flood of distinct keys from one client creates
//! nearly-empty entries that evict each other, and pushing out a key at its limit takes
//! filling the whole store with keys at their limits too.

use std::hash::Hash;

use indexmap::IndexMap;

use crate::limit::algorithm::LimitState;
use crate::limit::hash::FoldBuild;
use crate::limit::{LimitResult, LimitSpec};

/// `worth` of a limit at its capacity (a penalty lock is worth more: `u16::MAX`).
pub(super) const FULL: u16 = 1 << 10;

/// Slots looked at per eviction.
const SAMPLE: usize = 8;

/// What one slot of the table costs besides its state's heap: key, slot, stored hash, and
/// the index table's entry and control byte at its maximum load.
pub(super) const SLOT_BYTES: usize =
    std::mem::size_of::<(u64, Key, Slot)>() + std::mem::size_of::<usize>() * 8 / 7 + 2;

/// A limit's state identity: the descriptor's tag, the packed `StateIdentity` and its
/// window (no larger than the tag's padding: the key stays 32 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Key {
    pub tag: u128,
    pub id: u64,
    pub window_s: u64,
}

impl Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // One write: identities under one tag differ in `id` (high half) or in the window
        // (low half); a collision would only cost a comparison, `Eq` sees every field.
        state.write_u128(self.tag ^ (u128::from(self.id) << 64) ^ u128::from(self.window_s));
    }
}

pub(super) struct Slot {
    pub st: LimitState,
    /// How much forgetting this state would give back, at its last write (0..=[`FULL`],
    /// `u16::MAX` while a penalty lock is on).
    pub worth: u16,
}

impl Slot {
    /// The state after a check, with its worth from the check's result.
    pub fn new(st: LimitState, spec: &LimitSpec, r: &LimitResult, now: u64) -> Slot {
        let worth = worth(&st, spec, r, now);
        Slot { st, worth }
    }
}

/// How much forgetting `st` would give back, from the result of the check that wrote it.
pub(super) fn worth(st: &LimitState, spec: &LimitSpec, r: &LimitResult, now: u64) -> u16 {
    if st.lock_until_ms > now {
        return u16::MAX;
    }
    let c = spec.capacity();
    if !r.allowed || c == 0 {
        return FULL;
    }
    // In u128: `c` goes up to 2^53, and 2^53 × FULL does not fit a u64.
    let used = u128::from(c.saturating_sub(r.remaining).min(c));
    (used * u128::from(FULL) / u128::from(c)) as u16
}

pub(super) struct Shard {
    pub map: IndexMap<Key, Slot, FoldBuild>,
    /// Reused buffer for the states of a multi-limit check (no allocation per call).
    pub scratch: Vec<LimitState>,
    /// Heap bytes of the states held.
    heap: usize,
    budget: usize,
    /// Sweep when `map.len()` exceeds this.
    sweep_at: usize,
    min_sweep_len: usize,
    rng: u64,
    /// Live entries evicted to make room.
    pub evictions: u64,
}

impl Shard {
    pub fn new(hasher: FoldBuild, budget: usize, min_sweep_len: usize, seed: u64) -> Shard {
        Shard {
            map: IndexMap::with_hasher(hasher),
            scratch: Vec::new(),
            heap: 0,
            budget,
            sweep_at: min_sweep_len,
            min_sweep_len,
            rng: seed | 1,
            evictions: 0,
        }
    }

    /// Bytes held: the table and the states' heap.
    pub fn bytes(&self) -> usize {
        self.map.capacity() * SLOT_BYTES + self.heap
    }

    /// A state written back in place changed its heap from `before` to `after` bytes; with
    /// `make_room` at `now`, evict others if it grew past the budget (none while a slot
    /// index is still to be used).
    pub fn resized(&mut self, before: usize, after: usize, make_room: Option<u64>) {
        self.heap = self.heap - before + after;
        let Some(now) = make_room else { return };
        while after > before && self.bytes() > self.budget && self.evict_one(now, true) {}
    }

    /// Store `slot` under `key` (absent), making room first: a slot when the table is full
    /// and could not double within the budget, heap when the states hold too much.
    pub fn insert(&mut self, key: Key, slot: Slot, now: u64) {
        let heap = slot.st.heap_bytes();
        while !self.map.is_empty() {
            let (len, cap) = (self.map.len(), self.map.capacity());
            let room = if len >= cap {
                // Inserting grows the table: it (at least) doubles.
                (cap + cap.max(4)) * SLOT_BYTES + self.heap + heap <= self.budget
            } else {
                // One slot more: an insert that reuses a removed entry's place in the index
                // table counts one more slot in `capacity()` (hashbrown's items plus growth
                // left), without allocating.
                self.bytes() + SLOT_BYTES + heap <= self.budget
            };
            // Only a free slot avoids growth; only a state's heap frees heap.
            if room || !self.evict_one(now, len < cap) {
                break;
            }
        }
        self.heap += heap;
        self.map.insert(key, slot);
        if self.map.len() > self.sweep_at {
            self.sweep(now);
        }
    }

    /// Remove the slot at `index` (taken out for a check, or dead).
    pub fn take(&mut self, index: usize) -> Option<Slot> {
        let (_, slot) = self.map.swap_remove_index(index)?;
        self.heap -= slot.st.heap_bytes();
        Some(slot)
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64: cheap, and seeded per store so a client cannot predict the sample.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Evict one slot: among [`SAMPLE`] random ones (with `heap_only`, ones holding heap),
    /// an expired one, else the least worth (the soonest to expire on ties). `false` when
    /// the sample found nothing to evict.
    fn evict_one(&mut self, now: u64, heap_only: bool) -> bool {
        let len = self.map.len();
        let mut victim: Option<(usize, u16, u64)> = None;
        let (mut looked, mut tries) = (0, 0);
        while looked < SAMPLE.min(len) && tries < 4 * SAMPLE {
            tries += 1;
            let i = (self.next_random() % len as u64) as usize;
            let Some((_, slot)) = self.map.get_index(i) else {
                break;
            };
            if heap_only && slot.st.heap_bytes() == 0 {
                continue;
            }
            looked += 1;
            if !slot.st.is_live(now) {
                self.take(i);
                return true;
            }
            let rank = (slot.worth, slot.st.expires_at_ms());
            if victim.is_none_or(|(_, w, e)| rank < (w, e)) {
                victim = Some((i, rank.0, rank.1));
            }
        }
        let Some((i, _, _)) = victim else {
            return false;
        };
        self.take(i);
        self.evictions += 1;
        true
    }

    /// Drops expired entries and gives memory back; the next amortized sweep waits until
    /// the live set has doubled, so inline sweeps cost O(1) per insert.
    pub fn sweep(&mut self, now: u64) {
        let mut freed = 0;
        self.map.retain(|_, slot| {
            let live = slot.st.is_live(now);
            if !live {
                freed += slot.st.heap_bytes();
            }
            live
        });
        self.heap -= freed;
        self.sweep_at = self.map.len().saturating_mul(2).max(self.min_sweep_len);
        if self.map.capacity() > self.map.len().saturating_mul(4).max(self.min_sweep_len) {
            self.map.shrink_to(self.sweep_at);
        }
    }
}
