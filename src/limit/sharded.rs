//! State split by descriptor into independently locked shards: the memory store's states,
//! the over-limit cache and the local view each keep theirs in a [`Sharded`]. A descriptor
//! (its [`StateTag`]) always lands in the same shard, so everything of one descriptor is under
//! one `parking_lot` mutex, which is never held across an await.
//!
//! Tags are already 128-bit hashes, but unkeyed hashes of client-chosen values: the shard is
//! chosen by folding the tag through a multiply keyed by per-map random seeds (one 64×64→128
//! multiply, as foldhash does), so crafted descriptors cannot pile into one shard.

use parking_lot::Mutex;

use super::StateTag;
use super::random::random_u64;

/// Most shards a map has.
const MAX_SHARDS: usize = 1 << 16;

/// `a × b` as 128 bits, its halves folded into 64 (foldhash's mixing step).
pub fn folded_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ (p >> 64) as u64
}

/// One shard per cache line, so two cores locking neighbouring shards do not false-share.
#[repr(align(64))]
struct Padded<S>(Mutex<S>);

/// See the module documentation.
pub struct Sharded<S> {
    shards: Box<[Padded<S>]>,
    mask: usize,
    seed: (u64, u64),
}

impl<S> Sharded<S> {
    /// `n` shards (rounded up to a power of two, 1 to 65536), each made by `make`.
    pub fn new(n: usize, mut make: impl FnMut() -> S) -> Sharded<S> {
        let n = n.clamp(1, MAX_SHARDS).next_power_of_two();
        Sharded {
            shards: (0..n).map(|_| Padded(Mutex::new(make()))).collect(),
            mask: n - 1,
            seed: (random_u64() | 1, random_u64() | 1),
        }
    }

    /// The number of shards.
    pub fn count(&self) -> usize {
        self.shards.len()
    }

    /// The index of the shard that holds `tag`.
    pub fn index(&self, tag: StateTag) -> usize {
        let h = folded_mul(
            tag.0 as u64 ^ self.seed.0,
            (tag.0 >> 64) as u64 ^ self.seed.1,
        );
        // High bits: a map inside a shard may hash the tag too (with other seeds); keep clear
        // of the low bits anyway.
        (h >> 40) as usize & self.mask
    }

    /// The shard that holds `tag`.
    pub fn of(&self, tag: StateTag) -> &Mutex<S> {
        self.at(self.index(tag))
    }

    /// Shard `i` (an [`index`](Sharded::index)).
    pub fn at(&self, i: usize) -> &Mutex<S> {
        &self.shards[i].0
    }

    /// Every shard, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &Mutex<S>> {
        self.shards.iter().map(|p| &p.0)
    }

    /// `f` of every shard, summed (each locked in turn).
    pub fn sum<T: std::iter::Sum>(&self, f: impl Fn(&S) -> T) -> T {
        self.iter().map(|s| f(&s.lock())).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_stays_in_its_shard_and_tags_spread() {
        let m: Sharded<()> = Sharded::new(16, || ());
        assert_eq!(m.count(), 16);
        let tag = StateTag(0xfeed_u128 << 70 | 7);
        assert_eq!(m.index(tag), m.index(tag));
        let used: std::collections::BTreeSet<_> =
            (0..1000u128).map(|i| m.index(StateTag(i))).collect();
        assert_eq!(used.len(), 16, "sequential tags reach every shard");
        assert_eq!(Sharded::new(3, || ()).count(), 4);
        assert_eq!(Sharded::new(0, || ()).count(), 1);
    }
}
