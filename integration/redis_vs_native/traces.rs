//! Hand-made traces of the differential test: the corners random traces rarely reach.

use super::*;

/// Hand-made traces for what random ones rarely reach: big clock jumps backwards then
/// forwards again (future state, a sliding window whose sub-windows span far more than B),
/// refunds across them, and every algorithm on one descriptor.
pub(super) fn fixed_traces() -> Vec<Trace> {
    let all: Vec<LimitSpec> = Algorithm::ALL
        .into_iter()
        .enumerate()
        .map(|(i, algorithm)| LimitSpec {
            requests_per_unit: 4,
            unit: Unit::Second,
            unit_multiplier: 1,
            algorithm,
            burst: 3,
            buckets: if algorithm == Algorithm::SlidingWindow {
                2
            } else {
                0
            },
            overdraft: false,
            penalty_ms: if i % 2 == 0 { 700 } else { 0 },
            name: None,
            slot: i as u8,
            calendar: None,
        })
        .collect();
    let one_each: Vec<Vec<LimitSpec>> = all.iter().map(|l| vec![l.clone()]).collect();
    let hit = |d: usize, cost: u64| Op::Run(vec![(d, cost, false)]);
    let refund = |d: usize, cost: u64| Op::Run(vec![(d, cost, true)]);
    let mut jumps = Vec::new();
    for d in 0..one_each.len() {
        jumps.extend([
            Op::Step(10_000),
            hit(d, 1),
            Op::Step(-2_000),
            hit(d, 1),
            Op::Step(-7_000),
            hit(d, 1),
            hit(d, 2),
            Op::Step(9_400),
            hit(d, 1),
            hit(d, 3),
            refund(d, 2),
            hit(d, 0),
            Op::Step(-100),
            refund(d, 9),
            hit(d, 4),
            Op::Step(1_000_000),
            hit(d, 1),
        ]);
    }
    let together = vec![
        hit(0, 1),
        hit(0, 3),
        Op::Step(-5_000),
        hit(0, 1),
        Op::Step(5_500),
        hit(0, 2),
        refund(0, 1),
        hit(0, 0),
    ];
    // Overdraft with the largest cost on the slowest bucket: usage saturates at Lmax, and
    // gcra's TAT (now + Lmax / R) must still be exact.
    let slowest: Vec<Vec<LimitSpec>> = [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::Gcra,
    ]
    .into_iter()
    .map(|algorithm| {
        vec![LimitSpec {
            requests_per_unit: 1,
            burst: 1,
            overdraft: true,
            ..all[0].clone()
        }]
        .into_iter()
        .map(|l| LimitSpec {
            algorithm,
            buckets: 0,
            penalty_ms: 0,
            ..l
        })
        .collect()
    })
    .collect();
    let mut saturate = Vec::new();
    for d in 0..slowest.len() {
        saturate.extend([
            Op::Step(1),
            hit(d, u64::MAX),
            hit(d, 0),
            hit(d, u64::MAX),
            Op::Step(999),
            Op::Retune {
                desc: d,
                limit: 0,
                rate: 3,
                burst: 1,
            },
            hit(d, 1),
            // Saturated at Lmax(3) = 2^53, then loaded at R = 1: clamped to Lmax(1) = 2^52
            // (the token bucket's debt floor, the leaky level after the leak, GCRA's TAT).
            hit(d, u64::MAX),
            Op::Retune {
                desc: d,
                limit: 0,
                rate: 1,
                burst: 1,
            },
            hit(d, 0),
            Op::Step(10),
            hit(d, 0),
            hit(d, 1),
            refund(d, u64::MAX),
            hit(d, 1),
        ]);
    }
    // Window limits whose C·W is far above 2^53 (legal: only the buckets are bounded).
    let year = |algorithm, buckets| LimitSpec {
        requests_per_unit: 4_000_000_000,
        unit: Unit::Year,
        unit_multiplier: 1,
        algorithm,
        burst: 4_000_000_000,
        buckets,
        overdraft: true,
        penalty_ms: 0,
        name: None,
        slot: 0,
        calendar: None,
    };
    let huge_windows = vec![
        vec![year(Algorithm::FixedWindow, 0)],
        vec![year(Algorithm::SlidingWindow, 10)],
    ];
    let mut windows = Vec::new();
    for d in 0..huge_windows.len() {
        windows.extend([
            hit(d, 5),
            hit(d, u64::MAX),
            hit(d, 0),
            Op::Step(61_000),
            refund(d, 3),
            hit(d, 0),
            refund(d, u64::MAX),
            hit(d, 1),
        ]);
    }
    // Budgets at 2^53 and one below, with and without overdraft: costs that reach, pass
    // and (as doubles) round onto the capacity.
    let top = |algorithm, buckets, capacity, overdraft| LimitSpec {
        requests_per_unit: capacity,
        burst: capacity,
        overdraft,
        ..year(algorithm, buckets)
    };
    let exact_budgets = vec![
        vec![top(Algorithm::FixedWindow, 0, 1 << 53, false)],
        vec![top(Algorithm::FixedWindow, 0, (1 << 53) - 1, true)],
        vec![top(Algorithm::SlidingWindow, 10, 1 << 53, false)],
        vec![top(Algorithm::SlidingWindow, 10, (1 << 53) - 1, true)],
    ];
    let mut budgets = Vec::new();
    for d in 0..exact_budgets.len() {
        budgets.extend([
            hit(d, (1 << 53) + 1),
            hit(d, (1 << 53) - 2),
            hit(d, 3),
            hit(d, 1),
            hit(d, 0),
            hit(d, 1),
            refund(d, 2),
            hit(d, 2),
            hit(d, 1 << 52),
            hit(d, 0),
            refund(d, 1 << 53),
            hit(d, 0),
        ]);
    }
    vec![
        Trace {
            start: 1,
            descriptors: slowest,
            ops: saturate,
        },
        Trace {
            start: 11,
            descriptors: exact_budgets,
            ops: budgets,
        },
        Trace {
            start: 7,
            descriptors: huge_windows,
            ops: windows,
        },
        Trace {
            start: 0,
            descriptors: one_each,
            ops: jumps,
        },
        Trace {
            start: 123,
            descriptors: vec![all],
            ops: together,
        },
    ]
}
