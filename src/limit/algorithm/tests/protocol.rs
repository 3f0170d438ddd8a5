//! The check protocol: penalties (deny without touching counters, expire exactly, locks
//! only on charged denials), all-or-nothing across limits with per-limit overdraft,
//! refunds ignoring penalties, peeks writing nothing, and no panic on any input.

use super::*;
use crate::limit::Calendar;
use crate::limit::algorithm::{FixedWindow, State};

fn penalized(reset_ms: u64, retry_ms: u64, used_before: u64) -> LimitResult {
    LimitResult {
        allowed: false,
        remaining: 0,
        reset_ms,
        retry_ms: Some(retry_ms),
        used_before,
        penalized: true,
    }
}

#[test]
fn penalty_denies_without_touching_counters() {
    let mut lab = Lab::one(penalty(
        LimitSpec::new(Algorithm::FixedWindow, 2, Unit::Minute),
        5_000,
    ));
    lab.burst(2);
    // The denial (charged: overdraft) locks; retry = max(window end, penalty).
    assert_eq!(lab.hit(1), denied(60_000, Some(60_000), 2));
    assert_eq!(lab.states[0].lock_until_ms, T0 + 5_000);
    let count = State::FixedWindow(FixedWindow { ws: T0, c: 3 });
    assert_eq!(lab.at(T0 + 100).hit(1), penalized(59_900, 4_900, 3));
    assert_eq!(lab.at(T0 + 4_999).hit(5), penalized(55_001, 1, 3));
    assert_eq!(lab.peek(), penalized(55_001, 1, 3));
    assert_eq!(lab.states[0].state, count);
    // Expired exactly at lock_until; the next denial locks again.
    assert_eq!(lab.at(T0 + 5_000).hit(1), denied(55_000, Some(55_000), 3));
    assert_eq!(lab.states[0].lock_until_ms, T0 + 10_000);
}

#[test]
fn penalty_expires_exactly_and_stretches_retry() {
    // 1/s, burst 1: after one hit, the next needs 999 ms; the penalty says 3000.
    let mut lab = Lab::one(penalty(
        LimitSpec::new(Algorithm::TokenBucket, 1, Unit::Second),
        3_000,
    ));
    assert_eq!(lab.hit(1), ok(0, 1_000, 0));
    assert_eq!(lab.at(T0 + 1).hit(1), denied(999, Some(3_000), 1));
    assert_eq!(lab.at(T0 + 3_000).hit(1), penalized(0, 1, 0));
    assert_eq!(lab.at(T0 + 3_001).hit(1), ok(0, 1_000, 0));
}

#[test]
fn peeks_and_refunds_never_lock_and_refunds_ignore_locks() {
    let spec_ = penalty(
        overdraft(
            LimitSpec::new(Algorithm::FixedWindow, 1, Unit::Minute),
            false,
        ),
        5_000,
    );
    let mut lab = Lab::one(spec_);
    lab.hit(1);
    assert_eq!(lab.hit(0), ok(0, 60_000, 1));
    lab.hit(2);
    assert_eq!(lab.states[0].lock_until_ms, T0 + 5_000);
    assert_eq!(lab.refund(1), ok(1, 60_000, 1));
    assert_eq!(lab.states[0].lock_until_ms, T0 + 5_000);
    assert_eq!(lab.hit(1), penalized(60_000, 5_000, 0));
    // A denied peek does not lock.
    let mut lab = Lab::one(LimitSpec::new(Algorithm::FixedWindow, 1, Unit::Minute));
    lab.hit(2);
    lab.limits[0].penalty_ms = 5_000;
    let before = lab.states.clone();
    assert_eq!(lab.hit(0), denied(60_000, Some(60_000), 2));
    assert_eq!(lab.states, before);
}

#[test]
fn a_never_fitting_cost_locks_but_retry_stays_none() {
    let mut lab = Lab::one(penalty(
        LimitSpec::new(Algorithm::Gcra, 5, Unit::Second),
        2_000,
    ));
    assert_eq!(lab.hit(6), denied(0, None, 0));
    assert_eq!(lab.states[0].lock_until_ms, T0 + 2_000);
    assert_eq!(lab.hit(1), penalized(0, 2_000, 0));
}

/// gcra 5/s (no overdraft) and a 7/min fixed window, overdraft as given.
fn pair(fixed_overdraft: bool) -> Lab {
    Lab::new(vec![
        LimitSpec::new(Algorithm::Gcra, 5, Unit::Second),
        slot(
            overdraft(
                LimitSpec::new(Algorithm::FixedWindow, 7, Unit::Minute),
                fixed_overdraft,
            ),
            1,
        ),
    ])
}

#[test]
fn limits_are_all_or_nothing() {
    let mut lab = pair(false);
    for _ in 0..5 {
        assert!(lab.run(1, false).iter().all(|r| r.allowed));
    }
    // The per-second limit denies: the minute limit admits but is not charged.
    let r = lab.run(1, false);
    assert_eq!(r[0], denied(1_000, Some(200), 5));
    assert_eq!(r[1], ok(2, 60_000, 5));
    for _ in 0..4 {
        lab.run(1, false);
    }
    assert_eq!(lab.run(0, false)[1], ok(2, 60_000, 5));
    // And the reverse: the minute limit denies, the second one is not charged.
    let mut lab = pair(false);
    lab.run(5, false);
    lab.at(T0 + 1_000).run(2, false);
    let r = lab.run(1, false);
    assert_eq!(r[0], ok(3, 400, 2));
    assert_eq!(r[1], denied(59_000, Some(59_000), 7));
    assert_eq!(lab.run(0, false)[0], ok(3, 400, 2));
}

#[test]
fn overdraft_limits_are_charged_anyway() {
    let mut lab = pair(true);
    for _ in 0..10 {
        lab.run(1, false);
    }
    let r = lab.run(0, false);
    assert_eq!(r[0], ok(0, 1_000, 5));
    assert_eq!(r[1], denied(60_000, Some(60_000), 10));
}

#[test]
fn a_penalized_limit_stops_every_charge() {
    let mut lab = Lab::new(vec![
        penalty(
            LimitSpec::new(Algorithm::FixedWindow, 1, Unit::Minute),
            10_000,
        ),
        slot(LimitSpec::new(Algorithm::FixedWindow, 100, Unit::Minute), 1),
    ]);
    lab.run(1, false);
    // Denied by limit 0 (which locks); limit 1 has overdraft: charged.
    let r = lab.run(1, false);
    assert_eq!(r[0], denied(60_000, Some(60_000), 1));
    assert_eq!(r[1], ok(98, 60_000, 1));
    // Penalized: nothing is charged, not even the overdraft limit.
    let r = lab.at(T0 + 1).run(1, false);
    assert_eq!(r[0], penalized(59_999, 9_999, 2));
    assert_eq!(r[1], ok(98, 59_999, 2));
    assert_eq!(lab.run(0, false)[1].used_before, 2);
}

#[test]
fn refunds_give_back_to_every_limit() {
    let mut lab = pair(false);
    lab.run(3, false);
    let r = lab.run(5, true);
    assert_eq!(r[0], ok(5, 0, 3));
    assert_eq!(r[1], ok(7, 60_000, 3));
}

#[test]
fn several_algorithms_in_one_check() {
    let limits: Vec<LimitSpec> = Algorithm::ALL
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            slot(
                overdraft(LimitSpec::new(a, 3, Unit::Second), false),
                i as u8,
            )
        })
        .collect();
    let mut lab = Lab::new(limits);
    for _ in 0..3 {
        assert!(lab.run(1, false).iter().all(|r| r.allowed));
    }
    let r = lab.run(1, false);
    assert!(r.iter().all(|r| !r.allowed && r.used_before == 3), "{r:?}");
    assert!(
        lab.run(0, false)
            .iter()
            .all(|r| r.allowed && r.used_before == 3)
    );
}

#[test]
fn no_input_panics() {
    let units = [Unit::Second, Unit::Year];
    let times = [0, 1, 999, T0, u64::MAX / 2, u64::MAX - 1, u64::MAX];
    let costs = [0, 1, 2, u64::from(u32::MAX), 1 << 53, u64::MAX];
    // Every algorithm with and without a calendar (which config allows for two of them,
    // with units of a day or more: the store must not panic on the others either).
    let calendars = [None, Calendar::new("America/New_York")];
    for (alg, cal) in Algorithm::ALL
        .into_iter()
        .flat_map(|a| calendars.iter().map(move |c| (a, c)))
    {
        for unit in units {
            for rpu in [0, 1, 7, u64::from(u32::MAX), 1 << 53, u64::MAX] {
                let mut s = LimitSpec::new(alg, rpu, unit);
                s.burst = if rpu == 7 { u64::MAX } else { rpu };
                s.buckets = if rpu == 1 { 0 } else { s.buckets };
                s.penalty_ms = if rpu == 7 { u64::MAX } else { 1 };
                s.calendar = cal.clone();
                for od in [false, true] {
                    let mut lab = Lab::new(vec![overdraft(s.clone(), od), slot(s.clone(), 1)]);
                    for &t in times.iter().chain(times.iter().rev()) {
                        for &n in &costs {
                            lab.at(t).run(n, false);
                            lab.run(n, true);
                        }
                    }
                }
            }
        }
    }
}
