//! The memory store's hashing: a keyed fold of 128-bit words (one 64×64→128 multiply, as
//! foldhash does). Tags are already well mixed, but they are unkeyed hashes of client-chosen
//! values, so the per-store random seeds keep crafted descriptors from colliding on purpose.

use std::hash::{BuildHasher, Hasher};

use crate::limit::sharded::folded_mul;

/// A random odd seed (odd: a multiply by it loses no bits).
pub(super) fn random_seed() -> u64 {
    crate::limit::random::random_u64() | 1
}

/// Keyed builder of [`FoldHasher`]s.
#[derive(Clone, Copy, Debug)]
pub(super) struct FoldBuild(u64, u64);

impl FoldBuild {
    pub(super) fn random() -> FoldBuild {
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
pub(super) struct FoldHasher {
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
