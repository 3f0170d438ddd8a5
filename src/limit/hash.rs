//! The hashing of every map keyed by a descriptor's tag or a call's id (the memory store's,
//! the over-limit cache's, the local view's): a keyed fold of 128-bit words (one 64×64→128
//! multiply, as foldhash does), a few instructions where SipHash takes dozens. Tags are
//! already well mixed, but they are unkeyed hashes of client-chosen values, so random seeds
//! per map keep crafted descriptors from colliding on purpose.

use std::hash::{BuildHasher, Hasher};

use super::random::random_u64;
use super::sharded::folded_mul;

/// A random odd seed (odd: a multiply by it loses no bits).
pub fn random_seed() -> u64 {
    random_u64() | 1
}

/// Keyed builder of [`FoldHasher`]s; its `Default` draws random seeds.
#[derive(Clone, Copy, Debug)]
pub struct FoldBuild(u64, u64);

impl Default for FoldBuild {
    fn default() -> FoldBuild {
        FoldBuild(random_seed(), random_seed())
    }
}

impl BuildHasher for FoldBuild {
    type Hasher = FoldHasher;
    fn build_hasher(&self) -> FoldHasher {
        FoldHasher {
            k: (self.0, self.1),
            h: 0,
        }
    }
}

/// `folded_mul(lo ^ k0, hi ^ k1)` of each 128-bit word written (the store's keys write one).
pub struct FoldHasher {
    k: (u64, u64),
    h: u64,
}

impl Hasher for FoldHasher {
    fn write_u128(&mut self, x: u128) {
        let (lo, hi) = (x as u64 ^ self.h, (x >> 64) as u64);
        self.h = folded_mul(lo ^ self.k.0, hi ^ self.k.1);
    }

    fn write_u64(&mut self, x: u64) {
        self.write_u128(u128::from(x));
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(16) {
            let mut buf = [0u8; 16];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.write_u128(u128::from_le_bytes(buf));
        }
    }

    fn finish(&self) -> u64 {
        self.h
    }
}
