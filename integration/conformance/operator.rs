//! Scenarios for windows of several units (`unit_multiplier`): `W = unit × unit_multiplier`
//! for every algorithm, fixed windows aligned to multiples of the whole window from the
//! epoch, and the window length as part of the state identity. And `Store::reset`, which
//! the operator's tools (the admin listener) added with them.

use sluice::limit::Algorithm::{self, *};
use sluice::limit::{LimitSpec, Unit::*};
use sluice::store::Store;

use super::{Env, MIN, denied, limit, ok};

/// `rpu` per `m` minutes, with the defaults config gives.
fn minutes(alg: Algorithm, rpu: u64, m: u32) -> LimitSpec {
    LimitSpec {
        unit_multiplier: m,
        ..limit(alg, rpu, Minute)
    }
}

pub async fn multiplied_fixed_windows_align_to_the_whole_window<S: Store>(env: &Env<S>) {
    let tag = env.tag("five");
    let l = minutes(FixedWindow, 2, 5);
    // 4 minutes into a 5-minute window (epoch-aligned): one minute of it is left.
    let ws = env.align(5 * MIN, 4 * MIN);
    assert_eq!(env.hit(tag, &l, 1).await, ok(1, MIN, 0));
    assert_eq!(env.hit(tag, &l, 1).await, ok(0, MIN, 1));
    assert_eq!(env.hit(tag, &l, 1).await, denied(MIN, Some(MIN), 2));
    env.set(ws + 5 * MIN - 1);
    assert_eq!(env.hit(tag, &l, 0).await, denied(1, Some(1), 3));
    env.set(ws + 5 * MIN);
    assert_eq!(env.hit(tag, &l, 1).await, ok(1, 5 * MIN, 0));
}

pub async fn every_algorithm_runs_over_the_multiplied_window<S: Store>(env: &Env<S>) {
    env.align(5 * MIN, 0);
    for alg in Algorithm::ALL {
        let tag = env.tag(alg.name());
        let l = minutes(alg, 5, 5);
        assert_eq!(env.burst(tag, &l, 6).await, 5, "{alg}: 5 per 5 minutes");
        let r = env.hit(tag, &l, 1).await;
        let (reset, retry) = match alg {
            FixedWindow | SlidingLog => (5 * MIN, 5 * MIN),
            // The hits' sub-window (a tenth of the window) is counted for B + 1 of them.
            SlidingWindow => (5 * MIN + 30_000, 5 * MIN + 30_000),
            // One request drains in W / R = 1 minute.
            _ => (5 * MIN, MIN),
        };
        // The fixed window counts the denied sixth hit too (overdraft by default).
        let used = if alg == FixedWindow { 6 } else { 5 };
        assert_eq!(r, denied(reset, Some(retry), used), "{alg}");
    }
}

pub async fn changing_the_multiplier_starts_fresh_state<S: Store>(env: &Env<S>) {
    env.align(10 * MIN, 0);
    for alg in Algorithm::ALL {
        let tag = env.tag(alg.name());
        let five = minutes(alg, 2, 5);
        assert_eq!(env.burst(tag, &five, 3).await, 2, "{alg}");
        // Another window length is another state: full again.
        let ten = minutes(alg, 2, 10);
        assert_eq!(env.hit(tag, &ten, 0).await.used_before, 0, "{alg}");
        // One length, one state, however it is written: 60 minutes is an hour.
        let hour = limit(alg, 2, Hour);
        assert_eq!(env.burst(tag, &hour, 1).await, 1, "{alg}");
        let r = env.hit(tag, &minutes(alg, 2, 60), 0).await;
        assert_eq!(
            r.used_before, 1,
            "{alg}: minute × 60 shares the hour's state"
        );
    }
}

pub async fn reset_forgets_counters_and_penalties_of_one_descriptor<S: Store>(env: &Env<S>) {
    env.align(MIN, 0);
    for alg in Algorithm::ALL {
        let (tag, other) = (env.tag(alg.name()), env.tag(&format!("{alg}-other")));
        let limits = [
            LimitSpec {
                penalty_ms: 30_000,
                ..limit(alg, 2, Minute)
            },
            LimitSpec {
                slot: 1,
                ..minutes(alg, 5, 5)
            },
        ];
        for t in [tag, other] {
            for _ in 0..2 {
                let r = env.check(t, &limits, 1).await;
                assert!(r.iter().all(|r| r.allowed), "{alg}");
            }
            // The third is denied and locks the descriptor out.
            assert!(!env.check(t, &limits, 1).await[0].allowed, "{alg}");
        }
        let removed = env.store.reset(tag, &limits).await.expect("reset");
        assert!(removed > 0, "{alg}: something was stored");
        assert_eq!(
            env.store.reset(tag, &limits).await.expect("reset"),
            0,
            "{alg}"
        );
        // Fresh: no penalty, nothing used, on every limit.
        let r = env.check(tag, &limits, 0).await;
        assert_eq!(
            (r[0].allowed, r[0].used_before, r[0].penalized),
            (true, 0, false),
            "{alg}"
        );
        assert_eq!(r[1].used_before, 0, "{alg}");
        // Another descriptor keeps its state.
        let r = env.check(other, &limits, 0).await;
        assert!(
            r[0].penalized,
            "{alg}: the other descriptor is still locked out"
        );
    }
}
