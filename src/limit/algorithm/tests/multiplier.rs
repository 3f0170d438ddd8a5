//! Windows of several units (`unit_multiplier`): every algorithm runs on `W = unit ×
//! unit_multiplier`, and fixed windows align to multiples of the whole window from the epoch.

use super::*;

/// `rpu` per `m` minutes.
fn minutes(algorithm: Algorithm, rpu: u64, m: u32) -> LimitSpec {
    LimitSpec {
        unit_multiplier: m,
        ..LimitSpec::new(algorithm, rpu, Unit::Minute)
    }
}

const FIVE_MIN: u64 = 300_000;

#[test]
fn fixed_windows_align_to_multiples_of_the_whole_window() {
    // T0 is minute-aligned but not 5-minute aligned: its window started 4 minutes earlier.
    let ws = T0 - T0 % FIVE_MIN;
    assert_eq!(T0 - ws, 240_000);
    let mut lab = Lab::one(minutes(Algorithm::FixedWindow, 2, 5));
    let end = ws + FIVE_MIN - T0;
    assert_eq!(lab.hit(1), ok(1, end, 0));
    assert_eq!(lab.hit(1), ok(0, end, 1));
    assert_eq!(lab.hit(1), denied(end, Some(end), 2));
    // T0 is the start of the window's last minute: the next minute starts a new window.
    assert_eq!(end, 60_000);
    assert_eq!(lab.advance(30_000).hit(0), denied(30_000, Some(30_000), 3));
    lab.at(ws + FIVE_MIN);
    assert_eq!(lab.hit(1), ok(1, FIVE_MIN, 0));
}

#[test]
fn every_algorithm_spreads_its_limit_over_the_whole_window() {
    for alg in Algorithm::ALL {
        let mut lab = Lab::one(minutes(alg, 5, 5));
        lab.at(T0 - T0 % FIVE_MIN);
        for _ in 0..5 {
            assert!(lab.hit(1).allowed, "{alg}");
        }
        let r = lab.hit(1);
        assert!(!r.allowed, "{alg}: 5 per 5 minutes");
        let retry = r.retry_ms.unwrap_or_default();
        let expected = match alg {
            // Until the window (or the sub-window of the first hit, one in ten) passes.
            Algorithm::FixedWindow | Algorithm::SlidingLog => FIVE_MIN,
            Algorithm::SlidingWindow => FIVE_MIN + FIVE_MIN / 10,
            // One request drains in W / R = 60 s.
            Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra => 60_000,
        };
        assert_eq!(retry, expected, "{alg}");
    }
}
