//! `fixed_window`: counting, `after > limit`, alignment, reset = window end, boundary burst,
//! overdraft by default, cost above capacity, refunds, the usage cap, a backwards clock.

use super::*;
use crate::limit::algorithm::{FixedWindow, State};

fn second(rpu: u64) -> Lab {
    Lab::one(LimitSpec::new(Algorithm::FixedWindow, rpu, Unit::Second))
}

#[test]
fn counts_and_reports_until_the_window_end() {
    let mut lab = second(3);
    lab.at(T0 + 250);
    assert_eq!(lab.hit(1), ok(2, 750, 0));
    assert_eq!(lab.hit(1), ok(1, 750, 1));
    assert_eq!(lab.hit(1), ok(0, 750, 2));
    // Their semantics: over limit iff the count after the hit exceeds the limit; the
    // denied hit still counts (overdraft defaults to true), and retry is the window end.
    assert_eq!(lab.advance(100).hit(1), denied(650, Some(650), 3));
    assert_eq!(lab.hit(1), denied(650, Some(650), 4));
    assert_eq!(
        lab.states[0].state,
        State::FixedWindow(FixedWindow { ws: T0, c: 5 })
    );
    assert_eq!(lab.states[0].state_expires_ms, T0 + 1000);
}

#[test]
fn a_cost_counts_whole_and_over_limit_means_after_exceeds() {
    let mut lab = second(10);
    assert_eq!(lab.hit(8), ok(2, 1000, 0));
    assert_eq!(lab.hit(2), ok(0, 1000, 8));
    let mut lab = second(10);
    lab.hit(8);
    assert_eq!(lab.hit(3), denied(1000, Some(1000), 8));
    assert_eq!(lab.peek(), denied(1000, Some(1000), 11));
}

#[test]
fn windows_are_epoch_aligned() {
    let mut lab = Lab::one(LimitSpec::new(Algorithm::FixedWindow, 5, Unit::Minute));
    lab.at(T0 + 59_999);
    assert_eq!(lab.hit(5), ok(0, 1, 0));
    assert_eq!(lab.hit(1), denied(1, Some(1), 5));
    // The next window starts exactly at the boundary, empty.
    assert_eq!(lab.advance(1).hit(1), ok(4, 60_000, 0));
    let mut hour = Lab::one(LimitSpec::new(Algorithm::FixedWindow, 5, Unit::Hour));
    let ws = T0 - T0 % 3_600_000;
    assert_eq!(hour.at(ws + 1_000).hit(1), ok(4, 3_599_000, 0));
}

#[test]
fn admits_twice_the_limit_across_a_boundary() {
    let mut lab = second(10);
    lab.at(T0 + 999);
    assert_eq!(lab.burst(10), 10);
    lab.advance(1);
    assert_eq!(lab.burst(10), 10);
}

#[test]
fn retry_is_exact_to_the_millisecond() {
    let mut lab = Lab::one(overdraft(
        LimitSpec::new(Algorithm::FixedWindow, 2, Unit::Second),
        false,
    ));
    lab.at(T0 + 123);
    lab.burst(2);
    let r = lab.hit(1);
    assert_eq!(r, denied(877, Some(877), 2));
    lab.assert_retry_exact(1, 877);
}

#[test]
fn cost_above_capacity_still_answers_the_window_end() {
    let mut lab = second(10);
    lab.at(T0 + 400);
    assert_eq!(lab.hit(11), denied(600, Some(600), 0));
    let mut lab = Lab::one(overdraft(
        LimitSpec::new(Algorithm::FixedWindow, 10, Unit::Second),
        false,
    ));
    lab.at(T0 + 400);
    assert_eq!(lab.hit(11), denied(600, Some(600), 0));
    assert_eq!(lab.peek(), ok(10, 600, 0));
}

#[test]
fn without_overdraft_denied_hits_do_not_count() {
    let mut lab = Lab::one(overdraft(
        LimitSpec::new(Algorithm::FixedWindow, 2, Unit::Second),
        false,
    ));
    lab.burst(5);
    assert_eq!(lab.peek_pure(), ok(0, 1000, 2));
}

#[test]
fn refunds_never_go_below_zero() {
    let mut lab = second(5);
    lab.hit(3);
    assert_eq!(lab.refund(2), ok(4, 1000, 3));
    assert_eq!(lab.refund(10), ok(5, 1000, 1));
    assert_eq!(lab.hit(5), ok(0, 1000, 0));
    // A refund in a fresh window starts it at 0.
    assert_eq!(lab.advance(1000).refund(7), ok(5, 1000, 0));
    assert_eq!(lab.peek(), ok(5, 1000, 0));
}

#[test]
fn a_count_refunded_to_zero_is_deleted() {
    let mut lab = second(5);
    lab.at(T0 + 300).hit(2);
    assert_eq!(lab.refund(1), ok(4, 700, 2));
    assert_eq!(
        lab.states[0].state,
        State::FixedWindow(FixedWindow { ws: T0, c: 1 })
    );
    // The report still answers the window end; the state is gone (Redis: DEL).
    assert_eq!(lab.refund(1), ok(5, 700, 1));
    assert_eq!(lab.states[0], LimitState::default());
    // With a penalty lock alive, only the lock is kept.
    let mut lab = Lab::one(penalty(
        overdraft(
            LimitSpec::new(Algorithm::FixedWindow, 1, Unit::Second),
            false,
        ),
        5_000,
    ));
    lab.hit(1);
    lab.hit(1);
    assert_eq!(lab.refund(1), ok(1, 1000, 1));
    assert_eq!(lab.states[0].state, State::Empty);
    assert_eq!(lab.states[0].lock_until_ms, T0 + 5_000);
}

#[test]
fn peek_never_writes() {
    let mut lab = second(1);
    assert_eq!(lab.peek_pure(), ok(1, 1000, 0));
    assert_eq!(lab.states[0].state, State::Empty);
    lab.hit(2);
    assert_eq!(lab.peek_pure(), denied(1000, Some(1000), 2));
}

#[test]
fn rpu_zero_denies_everything_but_peeks() {
    let mut lab = second(0);
    lab.at(T0 + 10);
    assert_eq!(lab.hit(1), denied(990, Some(990), 0));
    assert_eq!(lab.hit(1), denied(990, Some(990), 1));
}

#[test]
fn changing_the_limit_keeps_the_count() {
    let mut lab = second(10);
    lab.burst(6);
    lab.limits[0].requests_per_unit = 5;
    lab.limits[0].burst = 5;
    assert_eq!(lab.hit(1), denied(1000, Some(1000), 6));
    lab.limits[0].requests_per_unit = 20;
    lab.limits[0].burst = 20;
    assert_eq!(lab.hit(1), ok(12, 1000, 7));
}

#[test]
fn counts_saturate_at_the_usage_cap() {
    let mut lab = second(10);
    assert_eq!(lab.hit(u64::MAX), denied(1000, Some(1000), 0));
    assert_eq!(lab.hit(u64::MAX), denied(1000, Some(1000), 1 << 53));
    assert_eq!(lab.refund(u64::MAX), ok(10, 1000, 1 << 53));
}

#[test]
fn a_clock_going_backwards_keeps_the_newer_window() {
    let mut lab = second(3);
    lab.at(T0 + 1_500);
    lab.burst(3);
    // Back into the previous window: the stored (later) window is kept, still full.
    assert_eq!(lab.at(T0 + 200).hit(1), denied(1_800, Some(1_800), 3));
    assert_eq!(lab.at(T0 + 2_000).hit(1), ok(2, 1000, 0));
}
