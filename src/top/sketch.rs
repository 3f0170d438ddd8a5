//! The Space-Saving summary (Metwally, Agrawal and El Abbadi, 2005): the heaviest keys of a
//! weighted stream in a fixed number of counters, whatever the number of distinct keys.
//!
//! `capacity` counters, each a key with its count and the error it may carry. A key already
//! held adds its weight to its counter; a new key takes a free counter or, when all are
//! taken, the one with the smallest count, starting from that count (the error it inherits)
//! plus its weight. With `N` the stream's total weight, every count then overestimates its
//! key's true weight by at most its error, and every error is at most the smallest count,
//! which is at most `N / capacity`; a key not held weighs at most that smallest count. So
//! any key heavier than `N / capacity` is held, and no count is off by more than
//! `N / capacity`.
//!
//! The smallest count is found through a binary min-heap of the counters (each knows its
//! place in it): a hit costs a hash lookup and a sift, O(log capacity).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Keys are already hashes (seeded, see `super::identity`): the map uses them as they are.
#[derive(Default)]
pub(super) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed; anything else is folded in, never expected.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// One counter: a key, its count, the count it inherited, and what it shows as.
struct Slot {
    key: u64,
    count: u64,
    error: u64,
    /// Index of this slot in `heap`.
    place: u32,
    label: Box<[u8]>,
}

/// What one counter takes, label aside (the memory bound's figure).
#[cfg(test)]
pub(super) const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// A held key as a reader sees it.
pub(super) struct Held<'a> {
    pub key: u64,
    /// At least the key's true weight, at most [`SpaceSaving::floor`] more.
    pub count: u64,
    pub label: &'a [u8],
}

pub(super) struct SpaceSaving {
    capacity: usize,
    index: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    slots: Vec<Slot>,
    /// Slot numbers, a min-heap by count.
    heap: Vec<u32>,
    /// Weight of everything added since the last clear.
    total: u64,
}

impl SpaceSaving {
    /// A summary of at most `capacity` counters (at least 1).
    pub fn new(capacity: usize) -> SpaceSaving {
        SpaceSaving {
            capacity: capacity.max(1),
            index: HashMap::default(),
            slots: Vec::new(),
            heap: Vec::new(),
            total: 0,
        }
    }

    /// Add `weight` to `key`; `label` is called only when the key takes a counter.
    pub fn add(&mut self, key: u64, weight: u64, label: impl FnOnce() -> Box<[u8]>) {
        self.total = self.total.saturating_add(weight);
        if let Some(&slot) = self.index.get(&key) {
            let s = &mut self.slots[slot as usize];
            s.count = s.count.saturating_add(weight);
            let place = s.place as usize;
            self.sift_down(place);
            return;
        }
        if self.slots.len() < self.capacity {
            let slot = self.slots.len() as u32;
            let place = self.heap.len();
            if self.slots.len() == self.slots.capacity() {
                // Grow toward the capacity, never past it.
                let more = self
                    .slots
                    .len()
                    .max(8)
                    .min(self.capacity - self.slots.len());
                self.slots.reserve_exact(more);
                self.heap.reserve_exact(more);
            }
            self.slots.push(Slot {
                key,
                count: weight,
                error: 0,
                place: place as u32,
                label: label(),
            });
            self.heap.push(slot);
            self.index.insert(key, slot);
            self.sift_up(place);
            return;
        }
        // Full: the smallest counter is taken over, its count kept as the newcomer's error.
        let slot = self.heap[0];
        let s = &mut self.slots[slot as usize];
        self.index.remove(&s.key);
        s.key = key;
        s.error = s.count;
        s.count = s.count.saturating_add(weight);
        s.label = label();
        self.index.insert(key, slot);
        self.sift_down(0);
    }

    /// The count and error of `key`, if held.
    pub fn get(&self, key: u64) -> Option<(u64, u64)> {
        let slot = *self.index.get(&key)?;
        let s = &self.slots[slot as usize];
        Some((s.count, s.error))
    }

    /// What a key not held may weigh at most: the smallest count once every counter is
    /// taken (at most `total / capacity`), else 0 (every key seen is held, exactly).
    pub fn floor(&self) -> u64 {
        if self.slots.len() < self.capacity {
            return 0;
        }
        self.heap
            .first()
            .map_or(0, |&slot| self.slots[slot as usize].count)
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn held(&self) -> impl Iterator<Item = Held<'_>> {
        self.slots.iter().map(|s| Held {
            key: s.key,
            count: s.count,
            label: &s.label,
        })
    }

    /// Forget everything; the memory already taken is kept for the next use.
    pub fn clear(&mut self) {
        self.index.clear();
        self.slots.clear();
        self.heap.clear();
        self.total = 0;
    }

    fn count_at(&self, place: usize) -> u64 {
        self.slots[self.heap[place] as usize].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        let (sa, sb) = (self.heap[a] as usize, self.heap[b] as usize);
        self.slots[sa].place = a as u32;
        self.slots[sb].place = b as u32;
    }

    fn sift_up(&mut self, mut place: usize) {
        while place > 0 {
            let parent = (place - 1) / 2;
            if self.count_at(parent) <= self.count_at(place) {
                break;
            }
            self.swap(parent, place);
            place = parent;
        }
    }

    fn sift_down(&mut self, mut place: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * place + 1, 2 * place + 2);
            let mut least = place;
            if l < n && self.count_at(l) < self.count_at(least) {
                least = l;
            }
            if r < n && self.count_at(r) < self.count_at(least) {
                least = r;
            }
            if least == place {
                return;
            }
            self.swap(place, least);
            place = least;
        }
    }
}
