//! Scenarios for budgets past 2^32 and up to 2^53 (the largest count every store keeps
//! exact): counts, remaining and denials exact on both sides of each bound, for the window
//! algorithms and for a bucket whose capacity × window stays within its own bound.

use sluice::limit::Algorithm::*;
use sluice::limit::Unit::*;
use sluice::store::Store;

use super::{Env, MIN, burst, denied, limit, ok, overdraft};

const P32: u64 = 1 << 32;
const P53: u64 = 1 << 53;

pub async fn budgets_past_2_to_the_32_are_exact<S: Store>(env: &Env<S>) {
    let ws = env.align(MIN, 0);
    let reset = ws + MIN - env.now();
    let tag = env.tag("fixed-2^32");
    let l = overdraft(limit(FixedWindow, P32 + 5, Minute), false);
    assert_eq!(env.hit(tag, &l, P32).await, ok(5, reset, 0));
    assert_eq!(env.hit(tag, &l, 6).await, denied(reset, Some(reset), P32));
    assert_eq!(env.hit(tag, &l, 5).await, ok(0, reset, P32));
    assert_eq!(
        env.hit(tag, &l, 1).await,
        denied(reset, Some(reset), P32 + 5)
    );
    // sliding_window: the same counts, each sub-window's total exact.
    let tag = env.tag("sliding-2^32");
    let l = limit(SlidingWindow, 3 * P32, Minute);
    assert_eq!(env.hit(tag, &l, P32 + 1).await.remaining, 2 * P32 - 1);
    assert_eq!(env.hit(tag, &l, P32).await.remaining, P32 - 1);
    let r = env.hit(tag, &l, P32).await;
    assert!(!r.allowed && r.used_before == 2 * P32 + 1, "{r:?}");
    // A bucket of 2^33 per second (capacity × window = 2^33 · 1000 ≤ 2^53).
    let tag = env.tag("gcra-2^33");
    let l = burst(limit(Gcra, 2 * P32, Second), 2 * P32);
    let r = env.hit(tag, &l, 2 * P32 - 1).await;
    assert_eq!((r.allowed, r.remaining), (true, 1));
    let r = env.hit(tag, &l, 2).await;
    assert!(!r.allowed && r.used_before == 2 * P32 - 1, "{r:?}");
}

pub async fn budgets_of_2_to_the_53_are_exact<S: Store>(env: &Env<S>) {
    let ws = env.align(MIN, 0);
    let reset = ws + MIN - env.now();
    for alg in [FixedWindow, SlidingWindow] {
        let tag = env.tag(alg.name());
        let l = overdraft(limit(alg, P53, Minute), false);
        // A cost above 2^53 never fits, whatever a double would round it to.
        assert!(!env.hit(tag, &l, P53 + 1).await.allowed, "{alg}");
        let r = env.hit(tag, &l, P53 - 1).await;
        assert_eq!(
            (r.allowed, r.remaining, r.used_before),
            (true, 1, 0),
            "{alg}"
        );
        // 2^53 - 1 + 2 = 2^53 + 1, which a double rounds to 2^53: still over.
        let r = env.hit(tag, &l, 2).await;
        assert_eq!((r.allowed, r.used_before), (false, P53 - 1), "{alg}");
        let r = env.hit(tag, &l, 1).await;
        assert_eq!(
            (r.allowed, r.remaining, r.used_before),
            (true, 0, P53 - 1),
            "{alg}"
        );
        let r = env.hit(tag, &l, 1).await;
        assert_eq!((r.allowed, r.used_before), (false, P53), "{alg}");
        // A refund gives back exactly.
        let r = env.refund(tag, std::slice::from_ref(&l), 3).await[0];
        assert_eq!((r.remaining, r.used_before), (3, P53), "{alg}");
    }
    // With overdraft a count saturates at 2^53 (no cost wraps it), then refunds exactly.
    let tag = env.tag("fixed-saturated");
    let l = limit(FixedWindow, P53, Minute);
    assert_eq!(env.hit(tag, &l, P53 - 2).await, ok(2, reset, 0));
    assert_eq!(
        env.hit(tag, &l, 5).await,
        denied(reset, Some(reset), P53 - 2)
    );
    // Saturated at the capacity itself: full, not over.
    assert_eq!(env.hit(tag, &l, 0).await, ok(0, reset, P53));
    assert_eq!(
        env.refund(tag, std::slice::from_ref(&l), 7).await[0],
        ok(7, reset, P53)
    );
}
