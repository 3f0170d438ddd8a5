//! Random numbers of no cryptographic quality, for what must differ between processes, their
//! restarts and calls: call ids, replica ids, hash seeds, jitter. One source: std's random
//! hasher keys (random per process), a counter, the wall clock and the process id, hashed.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh draw on every call.
pub fn random_u64() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    RandomState::new().hash_one((nanos, std::process::id(), n))
}

/// A uniform draw in [0, 1).
pub fn random_unit() -> f64 {
    (random_u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_differ_and_units_stay_in_range() {
        assert_ne!(random_u64(), random_u64());
        assert!(
            (0..1000)
                .map(|_| random_unit())
                .all(|u| (0.0..1.0).contains(&u))
        );
    }
}
