//! Memory-store specifics the conformance suite cannot see: bounded memory under many
//! distinct keys, the eviction policy, expired state reading as missing, and dropping empty
//! state.

use std::sync::Arc;

use super::{MemoryOptions, MemoryStore};
use crate::limit::{Algorithm, Check, LimitResult, LimitSpec, ManualClock, StateTag, Unit};

const T0: u64 = 1_700_000_040_000;

fn store(shards: usize, min_sweep_len: usize) -> (MemoryStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    let opts = MemoryOptions {
        shards,
        min_sweep_len,
        ..MemoryOptions::default()
    };
    (MemoryStore::with_options(clock.clone(), opts), clock)
}

fn hit(
    store: &MemoryStore,
    now: u64,
    tag: u128,
    limits: &[LimitSpec],
    cost: u64,
) -> Vec<LimitResult> {
    let check = Check {
        tag: StateTag(tag),
        limits,
        cost,
        refund: false,
    };
    let mut out = Vec::new();
    store.run_at(&[check], now, &mut out);
    out
}

#[test]
fn memory_stays_bounded_under_many_distinct_keys() {
    let (store, _) = store(4, 64);
    let limits = [LimitSpec::new(Algorithm::FixedWindow, 5, Unit::Second)];
    let mut peak = 0;
    // 200k distinct descriptors, one per ms: about 1000 are live at any time.
    for i in 0..200_000u64 {
        hit(
            &store,
            T0 + i,
            u128::from(i) * 0x9e37_79b9_7f4a_7c15,
            &limits,
            1,
        );
        if i % 1_000 == 0 {
            peak = peak.max(store.len());
        }
    }
    assert!(peak <= 4 * 1_200, "peak {peak}");
    assert!(store.len() >= 900, "live keys evicted: {}", store.len());
}

#[test]
fn sweep_evicts_everything_expired() {
    let (store, clock) = store(64, 1024);
    let limits = [LimitSpec::new(Algorithm::SlidingLog, 5, Unit::Second), {
        let mut s = LimitSpec::new(Algorithm::Gcra, 5, Unit::Minute);
        s.slot = 1;
        s
    }];
    for tag in 0..500 {
        hit(&store, T0, tag, &limits, 1);
    }
    assert_eq!(store.len(), 1_000);
    clock.set(T0 + 1_000);
    store.sweep();
    assert_eq!(store.len(), 500);
    clock.set(T0 + 12_000);
    store.sweep();
    assert!(store.is_empty());
}

#[test]
fn empty_state_is_not_kept() {
    let (store, _) = store(64, 1024);
    let tb = [LimitSpec::new(Algorithm::TokenBucket, 5, Unit::Second)];
    // Peeks and denied hits on missing state write nothing.
    hit(&store, T0, 1, &tb, 0);
    hit(&store, T0, 1, &tb, 6);
    assert!(store.is_empty());
    hit(&store, T0, 1, &tb, 2);
    assert_eq!(store.len(), 1);
    let check = Check {
        tag: StateTag(1),
        limits: &tb,
        cost: 5,
        refund: true,
    };
    store.run_at(&[check], T0, &mut Vec::new());
    assert!(store.is_empty());
}

#[test]
fn expired_state_reads_as_missing() {
    // A leaky bucket written at 10/s keeps its level after R drops to 1/s, but once its TTL
    // (computed at the write) has passed it is gone, as the Redis key would be.
    let (store, _) = store(64, 1024);
    let mut lb = [LimitSpec::new(Algorithm::LeakyBucket, 10, Unit::Second)];
    hit(&store, T0, 9, &lb, 10);
    lb[0].requests_per_unit = 1;
    assert_eq!(hit(&store, T0 + 999, 9, &lb, 0)[0].used_before, 10);
    assert_eq!(hit(&store, T0 + 1_000, 9, &lb, 0)[0].used_before, 0);
}

#[test]
fn limits_of_one_check_share_a_shard_and_keep_separate_state() {
    let (store, _) = store(64, 1024);
    let limits: Vec<LimitSpec> = Algorithm::ALL
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            let mut s = LimitSpec::new(a, 3, Unit::Minute);
            s.slot = i as u8;
            s
        })
        .collect();
    for tag in [1u128, 2, u128::MAX] {
        for _ in 0..3 {
            assert!(hit(&store, T0, tag, &limits, 1).iter().all(|r| r.allowed));
        }
        assert!(hit(&store, T0, tag, &limits, 1).iter().all(|r| !r.allowed));
    }
    assert_eq!(store.len(), 18);
    let st = store.state(StateTag(2), &limits[0]);
    assert!(st.is_some_and(|s| s.state_expires_ms == T0 + 60_000));
}

#[test]
fn a_fixed_window_refunded_to_zero_is_removed() {
    let (store, _) = store(64, 1024);
    let fw = [LimitSpec::new(Algorithm::FixedWindow, 5, Unit::Minute)];
    hit(&store, T0, 3, &fw, 2);
    assert_eq!(store.len(), 1);
    let check = Check {
        tag: StateTag(3),
        limits: &fw,
        cost: 2,
        refund: true,
    };
    let mut out = Vec::new();
    store.run_at(&[check], T0 + 10, &mut out);
    assert_eq!(out[0].remaining, 5);
    assert!(
        store.is_empty(),
        "kept {:?}",
        store.state(StateTag(3), &fw[0])
    );
}

/// One client floods 2 million distinct descriptors (say, every value of a header it
/// controls) while others sit at their limits: the store stays under its cap, the flood's
/// nearly-empty entries evict each other, and no limited client gets its quota back.
#[test]
fn two_million_keys_from_one_client_stay_under_the_cap() {
    const CAP: usize = 8 << 20;
    let clock = Arc::new(ManualClock::new(T0));
    let opts = MemoryOptions {
        max_bytes: CAP,
        ..MemoryOptions::default()
    };
    let store = MemoryStore::with_options(clock.clone(), opts);
    let strict = [LimitSpec::new(Algorithm::FixedWindow, 5, Unit::Hour)];
    let mut locked = [LimitSpec::new(Algorithm::SlidingLog, 1, Unit::Minute)];
    locked[0].penalty_ms = 3_600_000;
    let flood = [LimitSpec::new(Algorithm::TokenBucket, 1000, Unit::Hour)];
    let victims = 1u128..=200;
    for tag in victims.clone() {
        for _ in 0..6 {
            hit(&store, T0, tag, &strict, 1);
        }
        assert!(!hit(&store, T0, tag, &strict, 1)[0].allowed);
        hit(&store, T0, tag << 64, &locked, 2);
    }
    let mut peak = 0;
    let (mut now, mut out) = (T0, Vec::with_capacity(1));
    for i in 0..2_000_000u128 {
        let check = Check {
            tag: StateTag(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) | 1 << 127),
            limits: &flood,
            cost: 1,
            refund: false,
        };
        out.clear();
        store.run_at(&[check], now, &mut out);
        if i % 100_000 == 0 {
            peak = peak.max(store.bytes());
            now += 1_000;
        }
    }
    peak = peak.max(store.bytes());
    assert!(peak <= CAP, "peak {peak} bytes over the cap {CAP}");
    assert!(store.evictions() > 1_000_000, "{}", store.evictions());
    assert!(store.len() < 2_000_000 / 10, "{}", store.len());
    for tag in victims {
        assert!(
            !hit(&store, now, tag, &strict, 0)[0].allowed,
            "{tag} got its quota back"
        );
        let r = hit(&store, now, tag << 64, &locked, 1)[0];
        assert!(r.penalized, "{tag}: the lock-out was forgotten");
    }
    // Idle: everything expires, and the sweep gives the memory back.
    clock.set(now + 2 * 3_600_000);
    store.sweep();
    assert!(store.is_empty());
    // What is kept is the empty tables sized for the next burst (`min_sweep_len` slots).
    assert!(store.bytes() < CAP / 4, "{} bytes kept", store.bytes());
}

#[test]
fn a_full_shard_evicts_expired_then_least_used_state() {
    // One shard of 1 MiB: a few thousand slots.
    let clock = Arc::new(ManualClock::new(T0));
    let opts = MemoryOptions {
        shards: 1,
        max_bytes: 1 << 20,
        ..MemoryOptions::default()
    };
    let store = MemoryStore::with_options(clock, opts);
    let hour = [LimitSpec::new(Algorithm::Gcra, 100, Unit::Hour)];
    // Half used, then a flood of keys used 1%: the half-used ones stay.
    for tag in 0..100u128 {
        hit(&store, T0, tag, &hour, 50);
    }
    for tag in 1_000..200_000u128 {
        hit(&store, T0, tag, &hour, 1);
    }
    assert!(store.evictions() > 0);
    for tag in 0..100u128 {
        assert_eq!(hit(&store, T0, tag, &hour, 0)[0].used_before, 50, "{tag}");
    }
}

#[test]
fn what_states_hold_on_the_heap_counts_against_the_cap() {
    // 500 sliding logs of 400 distinct timestamps each: ~3 MB of runs for a 1 MiB store.
    let opts = MemoryOptions {
        shards: 1,
        max_bytes: 1 << 20,
        ..MemoryOptions::default()
    };
    let store = MemoryStore::with_options(Arc::new(ManualClock::new(T0)), opts);
    let log = [LimitSpec::new(Algorithm::SlidingLog, 10_000, Unit::Hour)];
    let mut peak = 0;
    for i in 0..200_000u64 {
        hit(&store, T0 + i, u128::from(i % 500), &log, 1);
        if i % 1_000 == 0 {
            peak = peak.max(store.bytes());
        }
    }
    assert!(peak <= 1 << 20, "peak {peak}");
    assert!(store.evictions() > 0);
}
