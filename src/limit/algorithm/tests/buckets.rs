//! `token_bucket`, `leaky_bucket`, `gcra`: refill/leak, `burst`, retry exact to the ms,
//! overdraft and its cap, refunds, `R = 0`, what a configuration change keeps, the stored
//! forms, and a backwards clock. The three must agree wherever the doc says so, so most
//! tests run all three.

use super::*;
use crate::limit::algorithm::{Gcra, LeakyBucket, State, TokenBucket};

const BUCKETS: [Algorithm; 3] = [
    Algorithm::TokenBucket,
    Algorithm::LeakyBucket,
    Algorithm::Gcra,
];

/// 10 per second, capacity `burst`: one request = 1000 units, 10 units/ms (1 per 100 ms).
fn bucket(algorithm: Algorithm, burst_: u64) -> Lab {
    Lab::one(burst(LimitSpec::new(algorithm, 10, Unit::Second), burst_))
}

#[test]
fn drains_continuously_and_retries_exactly() {
    for alg in BUCKETS {
        let mut lab = bucket(alg, 10);
        assert_eq!(lab.hit(1), ok(9, 100, 0), "{alg}");
        assert_eq!(lab.burst(9), 9, "{alg}");
        assert_eq!(lab.peek(), ok(0, 1_000, 10), "{alg}");
        assert_eq!(lab.hit(1), denied(1_000, Some(100), 10), "{alg}");
        lab.assert_retry_exact(1, 100);
        // 150 ms later 1.5 requests have drained.
        lab.at(T0 + 150);
        assert_eq!(lab.hit(1), ok(0, 950, 9), "{alg}");
        assert_eq!(lab.hit(2), denied(950, Some(150), 10), "{alg}");
        lab.assert_retry_exact(2, 150);
        // Empty (full of tokens) again after reset: the state is gone.
        lab.advance(950);
        assert_eq!(lab.peek(), ok(10, 0, 0), "{alg}");
        assert_eq!(lab.states[0], LimitState::default(), "{alg}");
    }
}

#[test]
fn burst_is_the_capacity() {
    for alg in BUCKETS {
        let mut lab = bucket(alg, 5);
        assert_eq!(lab.burst(8), 5, "{alg}");
        assert_eq!(lab.hit(1), denied(500, Some(100), 5), "{alg}");
        let mut big = bucket(alg, 30);
        assert_eq!(big.burst(40), 30, "{alg}");
        assert_eq!(big.hit(1), denied(3_000, Some(100), 30), "{alg}");
    }
}

#[test]
fn no_boundary_burst() {
    for alg in BUCKETS {
        let mut lab = bucket(alg, 10);
        lab.at(T0 + 999);
        assert_eq!(lab.burst(10), 10, "{alg}");
        assert_eq!(lab.advance(1).burst(10), 0, "{alg}");
    }
}

#[test]
fn cost_above_capacity_never_fits() {
    for alg in BUCKETS {
        let mut lab = bucket(alg, 10);
        lab.hit(3);
        assert_eq!(lab.hit(11), denied(300, None, 3), "{alg}");
        assert_eq!(lab.hit(u64::MAX), denied(300, None, 3), "{alg}");
        assert_eq!(lab.peek_pure(), ok(7, 300, 3), "{alg}");
    }
}

#[test]
fn refunds_never_go_below_empty() {
    for alg in BUCKETS {
        let mut lab = bucket(alg, 10);
        lab.hit(5);
        assert_eq!(lab.refund(3), ok(8, 200, 5), "{alg}");
        assert_eq!(lab.refund(10), ok(10, 0, 2), "{alg}");
        assert_eq!(lab.states[0], LimitState::default(), "{alg}");
        assert_eq!(lab.refund(u64::MAX), ok(10, 0, 0), "{alg}");
    }
}

#[test]
fn overdraft_charges_denied_hits_up_to_the_cap() {
    for alg in BUCKETS {
        let mut lab = Lab::one(overdraft(
            burst(LimitSpec::new(alg, 10, Unit::Second), 10),
            true,
        ));
        lab.hit(10);
        assert_eq!(lab.hit(5), denied(1_500, Some(1_000), 10), "{alg}");
        lab.assert_retry_exact(5, 1_000);
        assert_eq!(lab.peek_pure(), denied(1_500, Some(500), 15), "{alg}");
        let cap: u64 = 1 << 53;
        assert_eq!(
            lab.hit(u64::MAX),
            denied(cap.div_ceil(10), None, 15),
            "{alg}"
        );
        let retry = (cap - 9_000).div_ceil(10);
        assert_eq!(
            lab.hit(1),
            denied(cap.div_ceil(10), Some(retry), cap.div_ceil(1000)),
            "{alg}"
        );
    }
}

#[test]
fn rpu_zero_holds_nothing() {
    for alg in BUCKETS {
        let mut lab = Lab::one(overdraft(
            burst(LimitSpec::new(alg, 0, Unit::Second), 5),
            true,
        ));
        assert_eq!(lab.hit(1), denied(0, None, 0), "{alg}");
        assert_eq!(lab.peek(), ok(0, 0, 0), "{alg}");
        assert_eq!(lab.refund(3), ok(0, 0, 0), "{alg}");
        assert_eq!(lab.states[0], LimitState::default(), "{alg}");
    }
}

#[test]
fn stored_forms() {
    let mut tb = bucket(Algorithm::TokenBucket, 10);
    tb.at(T0 + 7).hit(3);
    let tokens = TokenBucket {
        tokens: 7_000,
        ts: T0 + 7,
    };
    assert_eq!(tb.states[0].state, State::TokenBucket(tokens));
    assert_eq!(tb.states[0].state_expires_ms, T0 + 307);
    let mut lb = bucket(Algorithm::LeakyBucket, 10);
    lb.at(T0 + 7).hit(3);
    let level = LeakyBucket {
        level: 3_000,
        ts: T0 + 7,
    };
    assert_eq!(lb.states[0].state, State::LeakyBucket(level));
    // 3 per second: T = 333⅓ ms, one request = TAT + 333 ms + 1/3.
    let mut g = bucket(Algorithm::Gcra, 3);
    g.limits[0].requests_per_unit = 3;
    g.hit(1);
    assert_eq!(
        g.states[0].state,
        State::Gcra(Gcra {
            a: T0 + 333,
            b: 1,
            r: 3
        })
    );
    assert_eq!(g.states[0].state_expires_ms, T0 + 334);
    g.hit(2);
    assert_eq!(
        g.states[0].state,
        State::Gcra(Gcra {
            a: T0 + 1_000,
            b: 0,
            r: 3
        })
    );
}

#[test]
fn a_burst_change_keeps_tokens_or_level() {
    let mut tb = bucket(Algorithm::TokenBucket, 10);
    tb.hit(5);
    tb.limits[0].burst = 20;
    assert_eq!(tb.peek_pure(), ok(5, 1_500, 15));
    tb.limits[0].burst = 3;
    assert_eq!(tb.peek(), ok(3, 0, 0));
    for alg in [Algorithm::LeakyBucket, Algorithm::Gcra] {
        let mut lab = bucket(alg, 10);
        lab.hit(5);
        lab.limits[0].burst = 20;
        assert_eq!(lab.peek_pure(), ok(15, 500, 5), "{alg}");
        lab.limits[0].burst = 3;
        assert_eq!(lab.peek_pure(), denied(500, Some(200), 5), "{alg}");
    }
}

#[test]
fn a_rate_change_keeps_level_or_tat() {
    // 3/s, burst 3: one hit leaves level 1000, TAT = T0 + 333⅓.
    let mut leaky = Lab::one(LimitSpec::new(Algorithm::LeakyBucket, 3, Unit::Second));
    let mut gcra = Lab::one(LimitSpec::new(Algorithm::Gcra, 3, Unit::Second));
    leaky.hit(1);
    gcra.hit(1);
    leaky.limits[0].requests_per_unit = 4;
    gcra.limits[0].requests_per_unit = 4;
    // Leaky keeps the level (1000, now leaking 4/ms).
    assert_eq!(leaky.peek_pure(), ok(2, 250, 1));
    // GCRA keeps the TAT: b = ceil(1·4/3) = 2, level = 333·4 + 2 = 1334.
    assert_eq!(gcra.peek_pure(), ok(1, 334, 2));
    assert_eq!(gcra.hit(1), ok(0, 584, 2));
    assert_eq!(
        gcra.states[0].state,
        State::Gcra(Gcra {
            a: T0 + 583,
            b: 2,
            r: 4
        })
    );
    // A denied (uncharged) hit writes nothing: the token bucket refills from its last write.
    let mut tb = Lab::one(LimitSpec::new(Algorithm::TokenBucket, 10, Unit::Second));
    tb.hit(10);
    let written = tb.states[0].clone();
    assert!(!tb.at(T0 + 50).hit(1).allowed);
    assert_eq!(tb.states[0], written);
}

#[test]
fn a_clock_going_backwards_never_mints_quota() {
    for alg in BUCKETS {
        let mut lab = bucket(alg, 10);
        lab.at(T0 + 1_000).hit(10);
        lab.at(T0);
        // The buckets wait for `ts` (lag 1000 ms); GCRA's level grows instead.
        let used = if alg == Algorithm::Gcra { 20 } else { 10 };
        assert_eq!(lab.hit(1), denied(2_000, Some(1_100), used), "{alg}");
        lab.assert_retry_exact(1, 1_100);
        assert!(!lab.at(T0 + 1_099).hit(1).allowed, "{alg}");
        assert_eq!(lab.at(T0 + 1_100).hit(1), ok(0, 1_000, 9), "{alg}");
    }
}

#[test]
fn a_write_behind_the_stored_time_keeps_it() {
    for alg in BUCKETS {
        let mut lab = bucket(alg, 10);
        lab.at(T0 + 1_000).hit(10);
        // Refund 1 request at T0: nothing may refill before T0 + 1000 (lag 1000 ms).
        let expected = match alg {
            Algorithm::Gcra => ok(0, 1_900, 20),
            Algorithm::TokenBucket | Algorithm::LeakyBucket => ok(1, 1_900, 10),
            Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
                unreachable!("not a bucket")
            }
        };
        assert_eq!(lab.at(T0).refund(1), expected, "{alg}");
        assert_eq!(lab.at(T0 + 1_000).peek_pure(), ok(1, 900, 9), "{alg}");
    }
}

/// `Lmax = min(2^53, 2^52·R)`: with `R = 1` overdraft saturates at 2^52 (so a saturated
/// GCRA's TAT, `now + Lmax/R`, stays below 2^53), and retry is `Us − (Cs − n·W)` over `R`.
#[test]
fn overdraft_saturates_at_lmax_with_rate_one() {
    let lmax: u64 = 1 << 52;
    let used = lmax.div_ceil(1_000);
    for alg in BUCKETS {
        // 1 per second, burst 1: Cs = 1000, 1 unit/ms.
        let mut lab = Lab::one(overdraft(
            burst(LimitSpec::new(alg, 1, Unit::Second), 1),
            true,
        ));
        assert_eq!(lab.hit(u64::MAX), denied(lmax, None, 0), "{alg}");
        assert_eq!(lab.hit(1), denied(lmax, Some(lmax), used), "{alg}");
        lab.assert_retry_exact(1, lmax);
        assert_eq!(
            lab.peek_pure(),
            denied(lmax, Some(lmax - 1_000), used),
            "{alg}"
        );
        let stored = match alg {
            Algorithm::TokenBucket => State::TokenBucket(TokenBucket {
                tokens: 1_000 - i128::from(lmax),
                ts: T0,
            }),
            Algorithm::LeakyBucket => State::LeakyBucket(LeakyBucket {
                level: lmax,
                ts: T0,
            }),
            Algorithm::Gcra => State::Gcra(Gcra {
                a: T0 + lmax,
                b: 0,
                r: 1,
            }),
            Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
                unreachable!("not a bucket")
            }
        };
        assert_eq!(lab.states[0].state, stored, "{alg}");
        assert_eq!(lab.states[0].state_expires_ms, T0 + lmax, "{alg}");
        lab.advance(1_000);
        assert_eq!(
            lab.peek_pure(),
            denied(lmax - 1_000, Some(lmax - 2_000), used - 1),
            "{alg}"
        );
    }
}

/// A state saturated at `Lmax(R = 2) = 2^53` loads, after `R` drops to 1, clamped to the new
/// `Lmax = 2^52`: the token bucket's debt floor and the leaky bucket's level are clamped on
/// load (the leaky bucket after the leak), GCRA's TAT is `now + 2^52` already.
#[test]
fn a_lowered_rate_lowers_the_cap_on_load() {
    let lmax: u64 = 1 << 52;
    for alg in BUCKETS {
        let mut lab = Lab::one(overdraft(
            burst(LimitSpec::new(alg, 2, Unit::Second), 1),
            true,
        ));
        assert_eq!(lab.hit(u64::MAX), denied(lmax, None, 0), "{alg}");
        assert_eq!(
            lab.peek_pure().used_before,
            (1u64 << 53) / 1_000 + 1,
            "{alg}"
        );
        lab.limits[0].requests_per_unit = 1;
        let used = lmax.div_ceil(1_000);
        assert_eq!(
            lab.peek_pure(),
            denied(lmax, Some(lmax - 1_000), used),
            "{alg}"
        );
        // 10 ms later (nothing was written): the stored debt and level moved by 10 from
        // 2^53, still clamped to 2^52 on load; GCRA's TAT is 10 ms closer.
        lab.advance(10);
        let expected = match alg {
            Algorithm::Gcra => denied(lmax - 10, Some(lmax - 1_010), used),
            Algorithm::TokenBucket | Algorithm::LeakyBucket => {
                denied(lmax, Some(lmax - 1_000), used)
            }
            Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
                unreachable!("not a bucket")
            }
        };
        assert_eq!(lab.peek_pure(), expected, "{alg}");
    }
}
