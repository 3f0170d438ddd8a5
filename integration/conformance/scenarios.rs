//! The scenarios of the conformance suite, each `async fn(&Env<S>)` over any `Store`, with
//! hand-computed expectations from docs/explanation/algorithms.md.
//! One table of independent scenarios, one short function each.

use std::sync::Arc;

use sluice::limit::Algorithm::{self, *};
use sluice::limit::{Check, LimitSpec, Unit::*};
use sluice::store::{Call, Store};

use super::{Env, MIN, burst, denied, limit, ok, overdraft, penalized, penalty, slot};

const BUCKETS: [Algorithm; 3] = [TokenBucket, LeakyBucket, Gcra];

pub async fn fixed_window_counts_and_resets<S: Store>(env: &Env<S>) {
    let tag = env.tag("fixed");
    let l = limit(FixedWindow, 5, Minute);
    let ws = env.align(MIN, 250);
    for i in 0..5 {
        assert_eq!(env.hit(tag, &l, 1).await, ok(4 - i, 59_750, i));
    }
    // Over limit iff the count after the hit exceeds the limit; denied hits count too.
    assert_eq!(env.hit(tag, &l, 1).await, denied(59_750, Some(59_750), 5));
    assert_eq!(env.hit(tag, &l, 1).await, denied(59_750, Some(59_750), 6));
    env.set(ws + MIN - 1);
    assert_eq!(env.hit(tag, &l, 0).await, denied(1, Some(1), 7));
    env.set(ws + MIN);
    assert_eq!(env.hit(tag, &l, 1).await, ok(4, MIN, 0));
}

pub async fn boundary_burst_only_for_fixed_window<S: Store>(env: &Env<S>) {
    let ws = env.align(MIN, MIN - 1);
    for alg in Algorithm::ALL {
        assert_eq!(
            env.burst(env.tag(alg.name()), &limit(alg, 10, Minute), 10)
                .await,
            10
        );
    }
    env.set(ws + MIN);
    for alg in Algorithm::ALL {
        let second = env
            .burst(env.tag(alg.name()), &limit(alg, 10, Minute), 10)
            .await;
        assert_eq!(second, if alg == FixedWindow { 10 } else { 0 }, "{alg}");
    }
}

pub async fn retry_is_exact_for_every_algorithm<S: Store>(env: &Env<S>) {
    for alg in Algorithm::ALL {
        // 3 per minute, all three hits 100 ms into a minute.
        let (reset, retry) = match alg {
            FixedWindow => (59_900, 59_900),
            // Sub-window I is counted until idx I + 11 = 66 s into the minute.
            SlidingWindow => (65_900, 65_900),
            SlidingLog => (60_000, 60_000),
            // 3 units/ms, one request = 60 000 units.
            _ => (60_000, 20_000),
        };
        let tag = env.tag(alg.name());
        let l = overdraft(limit(alg, 3, Minute), false);
        env.align(MIN, 100);
        assert_eq!(env.burst(tag, &l, 3).await, 3, "{alg}");
        assert_eq!(
            env.hit(tag, &l, 1).await,
            denied(reset, Some(retry), 3),
            "{alg}"
        );
        env.advance(retry - 1);
        assert!(
            !env.hit(tag, &l, 1).await.allowed,
            "{alg} allowed 1 ms early"
        );
        env.advance(1);
        assert!(env.hit(tag, &l, 1).await.allowed, "{alg} denied at retry");
    }
}

pub async fn sliding_window_drops_oldest_sub_windows_first<S: Store>(env: &Env<S>) {
    let tag = env.tag("sw");
    let l = limit(SlidingWindow, 10, Minute);
    let ws = env.align(MIN, 0);
    assert_eq!(env.hit(tag, &l, 4).await, ok(6, 66_000, 0));
    env.set(ws + 30_000);
    assert_eq!(env.hit(tag, &l, 6).await, ok(0, 66_000, 4));
    env.set(ws + 36_000);
    // Cost 3 waits for sub-window I (k = 5), cost 5 for I + 5 too (k = 10).
    assert_eq!(env.hit(tag, &l, 3).await, denied(60_000, Some(30_000), 10));
    assert_eq!(env.hit(tag, &l, 5).await, denied(60_000, Some(60_000), 10));
    env.set(ws + 66_000);
    assert_eq!(env.hit(tag, &l, 3).await, ok(1, 66_000, 6));
}

pub async fn sliding_window_uneven_sub_windows<S: Store>(env: &Env<S>) {
    // W/B = 60000/7: sub-window k starts at ceil(k·60000/7): +8572, ..., +68572.
    let tag = env.tag("sw7");
    let mut l = limit(SlidingWindow, 2, Minute);
    l.buckets = 7;
    let ws = env.align(MIN, 8_571);
    assert_eq!(env.hit(tag, &l, 2).await, ok(0, 60_001, 0));
    assert_eq!(env.hit(tag, &l, 1).await, denied(60_001, Some(60_001), 2));
    env.set(ws + 68_571);
    assert_eq!(env.hit(tag, &l, 1).await, denied(1, Some(1), 2));
    env.set(ws + 68_572);
    // Counted until sub-window I + 16 starts, at ceil(16·60000/7) = +137143.
    assert_eq!(env.hit(tag, &l, 1).await, ok(1, 68_571, 0));
}

pub async fn sliding_log_retries_from_the_kth_oldest_entry<S: Store>(env: &Env<S>) {
    let tag = env.tag("log");
    let l = limit(SlidingLog, 3, Minute);
    let ws = env.align(MIN, 0);
    for t in [0, 20_000, 40_000] {
        env.set(ws + t);
        assert!(env.hit(tag, &l, 1).await.allowed);
    }
    env.set(ws + 50_000);
    assert_eq!(env.hit(tag, &l, 2).await, denied(50_000, Some(30_000), 3));
    env.set(ws + 79_999);
    assert!(!env.hit(tag, &l, 2).await.allowed);
    env.set(ws + 80_000);
    assert_eq!(env.hit(tag, &l, 2).await, ok(0, MIN, 1));
}

pub async fn buckets_refill_and_leak<S: Store>(env: &Env<S>) {
    for alg in BUCKETS {
        // 60 per minute (one per second), burst 10.
        let tag = env.tag(alg.name());
        let l = burst(limit(alg, 60, Minute), 10);
        assert_eq!(env.burst(tag, &l, 12).await, 10, "{alg}");
        assert_eq!(
            env.hit(tag, &l, 1).await,
            denied(10_000, Some(1_000), 10),
            "{alg}"
        );
        env.advance(2_500);
        assert_eq!(env.hit(tag, &l, 0).await, ok(2, 7_500, 8), "{alg}");
        assert_eq!(
            env.hit(tag, &l, 3).await,
            denied(7_500, Some(500), 8),
            "{alg}"
        );
        assert_eq!(env.hit(tag, &l, 2).await, ok(0, 9_500, 8), "{alg}");
    }
}

pub async fn peek_never_writes<S: Store>(env: &Env<S>) {
    env.align(MIN, 0);
    for alg in Algorithm::ALL {
        let tag = env.tag(alg.name());
        let l = limit(alg, 4, Minute);
        let fresh = env.hit(tag, &l, 0).await;
        assert!(
            fresh.allowed && fresh.remaining == 4 && fresh.used_before == 0,
            "{alg}"
        );
        assert_eq!(env.burst(tag, &l, 4).await, 4);
        let peek = env.hit(tag, &l, 0).await;
        assert!(
            peek.allowed && peek.remaining == 0 && peek.used_before == 4,
            "{alg}"
        );
        assert_eq!(env.hit(tag, &l, 0).await, peek, "{alg}");
        assert_eq!(env.hit(tag, &l, 1).await.used_before, 4, "{alg}");
    }
}

pub async fn refunds_never_go_below_empty<S: Store>(env: &Env<S>) {
    env.align(MIN, 0);
    for alg in Algorithm::ALL {
        let tag = env.tag(alg.name());
        let l = [limit(alg, 5, Minute)];
        assert!(env.check(tag, &l, 3).await[0].allowed);
        let r = env.refund(tag, &l, 10).await[0];
        assert!(r.allowed && !r.penalized && r.retry_ms.is_none(), "{alg}");
        assert_eq!((r.remaining, r.used_before), (5, 3), "{alg}");
        let r = env.check(tag, &l, 1).await[0];
        assert_eq!(
            (r.allowed, r.remaining, r.used_before),
            (true, 4, 0),
            "{alg}"
        );
    }
}

pub async fn overdraft_charges_denied_hits<S: Store>(env: &Env<S>) {
    env.align(MIN, 0);
    // Fixed window: on by default (their semantics).
    let (tag, l) = (env.tag("fixed"), limit(FixedWindow, 2, Minute));
    assert_eq!(env.burst(tag, &l, 4).await, 2);
    assert_eq!(env.hit(tag, &l, 0).await, denied(MIN, Some(MIN), 4));
    // Token bucket: off by default, opt-in: 2 units/ms, one request = 60 000 units.
    let (tag, l) = (env.tag("tb"), burst(limit(TokenBucket, 2, Minute), 2));
    assert_eq!(env.burst(tag, &l, 4).await, 2);
    assert_eq!(env.hit(tag, &l, 0).await, ok(0, MIN, 2));
    let (tag, l) = (env.tag("tb-od"), overdraft(l, true));
    assert_eq!(env.burst(tag, &l, 4).await, 2);
    assert_eq!(env.hit(tag, &l, 0).await, denied(120_000, Some(MIN), 4));
}

pub async fn penalty_denies_without_counting_and_expires_exactly<S: Store>(env: &Env<S>) {
    let tag = env.tag("fixed");
    let l = penalty(overdraft(limit(FixedWindow, 2, Minute), false), 5_000);
    let ws = env.align(MIN, 0);
    assert_eq!(env.burst(tag, &l, 2).await, 2);
    assert_eq!(env.hit(tag, &l, 1).await, denied(MIN, Some(MIN), 2));
    env.set(ws + 100);
    assert_eq!(env.hit(tag, &l, 1).await, penalized(59_900, 4_900, 2));
    env.set(ws + 4_999);
    assert_eq!(env.hit(tag, &l, 0).await, penalized(55_001, 1, 2));
    env.set(ws + 5_000);
    assert_eq!(env.hit(tag, &l, 1).await, denied(55_000, Some(55_000), 2));
    // A lock longer than the log: retry is the lock, which expires to the millisecond.
    let tag = env.tag("log");
    let l = penalty(limit(SlidingLog, 1, Minute), 90_000);
    let t = env.align(MIN, 0);
    assert_eq!(env.hit(tag, &l, 1).await, ok(0, MIN, 0));
    env.set(t + 1);
    assert_eq!(env.hit(tag, &l, 1).await, denied(59_999, Some(90_000), 1));
    env.set(t + 90_000);
    assert_eq!(env.hit(tag, &l, 1).await, penalized(0, 1, 0));
    env.set(t + 90_001);
    assert_eq!(env.hit(tag, &l, 1).await, ok(0, MIN, 0));
}

pub async fn limits_of_a_check_are_all_or_nothing<S: Store>(env: &Env<S>) {
    env.align(MIN, 0);
    for minute_overdraft in [false, true] {
        let tag = env.tag(&format!("multi-{minute_overdraft}"));
        let limits = [
            limit(Gcra, 10, Second),
            slot(
                overdraft(limit(FixedWindow, 100, Minute), minute_overdraft),
                1,
            ),
        ];
        for i in 0..15 {
            let r = env.check(tag, &limits, 1).await;
            assert_eq!(r[0].allowed, i < 10);
            assert!(r[1].allowed);
        }
        // The per-second denials left the minute count alone, unless it has overdraft.
        let charged = if minute_overdraft { 15 } else { 10 };
        assert_eq!(
            env.check(tag, &limits, 0).await[1],
            ok(100 - charged, MIN, charged)
        );
    }
}

/// `Lmax = min(2^53, 2^52·R)` (docs/explanation/algorithms.md): the buckets' scaled usage saturates at
/// 2^52 with `R = 1` (so a saturated GCRA's TAT stays exact), at 2^53 from `R = 2`; a state
/// saturated under `R = 2` is clamped to the smaller cap when loaded after `R` drops to 1.
pub async fn bucket_usage_is_capped_at_lmax<S: Store>(env: &Env<S>) {
    const LMAX_1: u64 = 1 << 52;
    const LMAX_2: u64 = 1 << 53;
    let used = LMAX_1.div_ceil(1_000);
    for alg in BUCKETS {
        let tag = env.tag(alg.name());
        // 1 per second, burst 1: Cs = 1000 units, refilled at 1 unit/ms.
        let mut l = overdraft(burst(limit(alg, 1, Second), 1), true);
        assert_eq!(
            env.hit(tag, &l, u64::MAX).await,
            denied(LMAX_1, None, 0),
            "{alg}"
        );
        // Denied, charged, still at the cap; retry = Us − (Cs − n·W) = 2^52.
        assert_eq!(
            env.hit(tag, &l, 1).await,
            denied(LMAX_1, Some(LMAX_1), used),
            "{alg}"
        );
        env.advance(1_000);
        assert_eq!(
            env.hit(tag, &l, 0).await,
            denied(LMAX_1 - 1_000, Some(LMAX_1 - 2_000), used - 1),
            "{alg}"
        );
        // R = 2: the token and leaky buckets drained 2000 since their write, GCRA's level is
        // its TAT distance (2^52 − 1000 ms) at the new rate. Overdraft fills up to 2^53.
        l.requests_per_unit = 2;
        let before = match alg {
            Gcra => (LMAX_2 - 2_000).div_ceil(1_000),
            _ => (LMAX_1 - 2_000).div_ceil(1_000),
        };
        assert_eq!(
            env.hit(tag, &l, u64::MAX).await,
            denied(LMAX_2 / 2, None, before),
            "{alg}"
        );
        // Back to R = 1: loaded as 2^52, not 2^53.
        l.requests_per_unit = 1;
        assert_eq!(
            env.hit(tag, &l, 0).await,
            denied(LMAX_1, Some(LMAX_1 - 1_000), used),
            "{alg}"
        );
        assert_eq!(
            env.refund(tag, std::slice::from_ref(&l), u64::MAX).await[0],
            ok(1, 0, used)
        );
        assert_eq!(env.hit(tag, &l, 1).await, ok(0, 1_000, 0), "{alg}");
    }
}

/// `Cs ≤ Lmax` is a precondition of the bucket algorithms only: a window limit whose
/// `C·W` is far above 2^53 (4e9 per year) counts, saturates at 2^53 and refunds like any other.
pub async fn window_limits_have_no_scaled_bound<S: Store>(env: &Env<S>) {
    const YEAR: u64 = 31_536_000_000;
    let c: u64 = 4_000_000_000;
    let tag = env.tag("fixed-year");
    let l = limit(FixedWindow, c, Year);
    let now = env.now();
    let end = now - now % YEAR + YEAR - now;
    assert_eq!(env.hit(tag, &l, 5).await, ok(c - 5, end, 0));
    assert_eq!(env.hit(tag, &l, u64::MAX).await, denied(end, Some(end), 5));
    assert_eq!(env.hit(tag, &l, 0).await, denied(end, Some(end), 1 << 53));
    assert_eq!(
        env.refund(tag, std::slice::from_ref(&l), u64::MAX).await[0],
        ok(c, end, 1 << 53)
    );
    assert_eq!(env.hit(tag, &l, 1).await, ok(c - 1, end, 0));
    // sliding_window: 10 sub-windows of 36.5 days; counted until sub-window cur + 11 starts.
    let tag = env.tag("sliding-year");
    let l = overdraft(limit(SlidingWindow, c, Year), true);
    let now = env.now();
    let cur = u128::from(now) * 10 / u128::from(YEAR);
    let reset = ((cur + 11) * u128::from(YEAR)).div_ceil(10) as u64 - now;
    assert_eq!(env.hit(tag, &l, 5).await, ok(c - 5, reset, 0));
    assert_eq!(env.hit(tag, &l, u64::MAX).await, denied(reset, None, 5));
    assert_eq!(env.hit(tag, &l, 0).await.used_before, 1 << 53);
    assert_eq!(
        env.refund(tag, std::slice::from_ref(&l), u64::MAX).await[0],
        ok(c, 0, 1 << 53)
    );
}

pub async fn several_checks_per_call<S: Store>(env: &Env<S>) {
    let (ta, tb) = (env.tag("a"), env.tag("b"));
    let a = [limit(FixedWindow, 2, Minute)];
    let b = [
        limit(TokenBucket, 1, Minute),
        slot(limit(SlidingLog, 5, Minute), 1),
    ];
    env.align(MIN, 0);
    let check = |tag, limits, cost, refund| Check {
        tag,
        limits,
        cost,
        refund,
    };
    let checks = [
        check(ta, &a[..], 1, false),
        check(tb, &b[..], 1, false),
        check(ta, &a[..], 2, false),
    ];
    let out = env.run(&checks).await;
    // In order, and the third check sees the first one's charge.
    assert_eq!(
        out,
        [
            ok(1, MIN, 0),
            ok(0, MIN, 0),
            ok(4, MIN, 0),
            denied(MIN, Some(MIN), 1)
        ]
    );
    let out = env.run(&[checks[1], check(ta, &a[..], 3, true)]).await;
    assert_eq!(
        out,
        [denied(MIN, Some(MIN), 1), ok(4, MIN, 1), ok(2, MIN, 3)]
    );
}

pub async fn cost_larger_than_capacity<S: Store>(env: &Env<S>) {
    env.align(MIN, 1_000);
    for alg in Algorithm::ALL {
        let tag = env.tag(alg.name());
        let l = overdraft(limit(alg, 5, Minute), false);
        let expected = if alg == FixedWindow {
            denied(59_000, Some(59_000), 0)
        } else {
            denied(0, None, 0)
        };
        assert_eq!(env.hit(tag, &l, 6).await, expected, "{alg}");
        assert_eq!(env.hit(tag, &l, u64::MAX).await, expected, "{alg}");
        assert!(
            env.hit(tag, &l, 5).await.allowed,
            "{alg}: a denied hit was charged"
        );
    }
}

pub async fn config_change_keeps_state<S: Store>(env: &Env<S>) {
    env.align(MIN, 0);
    let tag = env.tag("fixed");
    let mut l = overdraft(limit(FixedWindow, 10, Minute), false);
    assert_eq!(env.burst(tag, &l, 6).await, 6);
    l.requests_per_unit = 5;
    assert_eq!(env.hit(tag, &l, 1).await, denied(MIN, Some(MIN), 6));
    l.requests_per_unit = 20;
    assert_eq!(env.hit(tag, &l, 1).await, ok(13, MIN, 6));
    // burst: the token bucket keeps its tokens, the leaky bucket its level.
    for (alg, expected) in [
        (TokenBucket, ok(5, 15_000, 15)),
        (LeakyBucket, ok(15, 5_000, 5)),
    ] {
        let tag = env.tag(alg.name());
        let mut l = burst(limit(alg, 60, Minute), 10);
        assert_eq!(env.hit(tag, &l, 5).await.remaining, 5);
        l.burst = 20;
        assert_eq!(env.hit(tag, &l, 0).await, expected, "{alg}");
    }
    // rate: GCRA keeps its TAT, rescaling the fraction in double precision:
    // 7/min → TAT = +8571 + 3/7 ms; at 9/min b = ceil(3·9/7) = 4, level = 8571·9 + 4.
    let tag = env.tag("gcra");
    let mut l = limit(Gcra, 7, Minute);
    assert_eq!(env.hit(tag, &l, 1).await, ok(6, 8_572, 0));
    l.requests_per_unit = 9;
    assert_eq!(env.hit(tag, &l, 0).await, ok(5, 8_572, 2));
}

pub async fn state_is_forgotten_after_its_ttl<S: Store>(env: &Env<S>) {
    env.align(MIN, 0);
    for alg in Algorithm::ALL {
        let tag = env.tag(alg.name());
        let l = limit(alg, 2, Minute);
        assert_eq!(env.burst(tag, &l, 3).await, 2, "{alg}");
        env.advance(2 * MIN);
        let r = env.hit(tag, &l, 0).await;
        assert_eq!(
            (r.allowed, r.remaining, r.used_before),
            (true, 2, 0),
            "{alg}"
        );
    }
}

pub async fn concurrent_hits_are_counted_exactly<S: Store>(env: &Env<S>) {
    env.align(MIN, 1);
    let cases: [(&str, Vec<LimitSpec>, u64); 4] = [
        (
            "fixed",
            vec![overdraft(limit(FixedWindow, 100, Minute), false)],
            100,
        ),
        ("token", vec![burst(limit(TokenBucket, 1, Hour), 100)], 100),
        ("log", vec![limit(SlidingLog, 100, Minute)], 100),
        (
            "multi",
            vec![
                overdraft(limit(FixedWindow, 300, Minute), false),
                slot(burst(limit(Gcra, 1, Hour), 150), 1),
            ],
            150,
        ),
    ];
    for (name, limits, expected) in cases {
        let tag = env.tag(name);
        let limits = Arc::new(limits);
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (store, limits) = (env.store.clone(), limits.clone());
                tokio::spawn(async move {
                    let (mut allowed, mut out) = (0u64, Vec::new());
                    for _ in 0..25 {
                        out.clear();
                        let check = Check {
                            tag,
                            limits: &limits,
                            cost: 1,
                            refund: false,
                        };
                        store
                            .run(&Call::new(&[check]), &mut out)
                            .await
                            .expect("store error");
                        allowed += u64::from(out.iter().all(|r| r.allowed));
                    }
                    allowed
                })
            })
            .collect();
        let mut total = 0;
        for task in tasks {
            total += task.await.expect("task panicked");
        }
        assert_eq!(total, expected, "{name}");
        let peek = env.check(tag, &limits, 0).await;
        assert!(
            peek.iter().all(|r| r.used_before == expected),
            "{name}: {peek:?}"
        );
    }
}
