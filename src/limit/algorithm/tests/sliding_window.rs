//! `sliding_window`: sub-window arithmetic (also with `W/B` not an integer), reset at the
//! end of the last counted sub-window, retry by dropping sub-windows oldest first, no
//! boundary burst, newest-first refunds, the usage cap, a backwards clock.

use super::*;
use crate::limit::algorithm::State;

/// `idx(T0)` for `W = 1 s`, `B = 10`.
const I0: u64 = T0 / 100;

fn sw(rpu: u64, buckets: u32) -> Lab {
    let mut s = LimitSpec::new(Algorithm::SlidingWindow, rpu, Unit::Second);
    s.buckets = buckets;
    Lab::one(s)
}

fn counts(lab: &Lab) -> Vec<(u64, u64)> {
    match &lab.states[0].state {
        State::SlidingWindow(s) => s.counts().collect(),
        State::Empty => Vec::new(),
        other => panic!("unexpected state {other:?}"),
    }
}

#[test]
fn counts_over_b_plus_one_sub_windows() {
    let mut lab = sw(10, 10);
    // Usage counts until sub-window I0 leaves [cur − B, cur]: at idx I0 + 11 = T0 + 1100.
    assert_eq!(lab.hit(4), ok(6, 1_100, 0));
    assert_eq!(lab.at(T0 + 500).hit(6), ok(0, 1_100, 4));
    assert_eq!(counts(&lab), vec![(I0, 4), (I0 + 5, 6)]);
    assert_eq!(lab.states[0].state_expires_ms, T0 + 1_600);
    // Cost 3 needs sub-window I0 dropped (k = 5): start(I0 + 11) = T0 + 1100.
    lab.at(T0 + 600);
    assert_eq!(lab.hit(3), denied(1_000, Some(500), 10));
    lab.assert_retry_exact(3, 500);
    // Cost 5 needs I0 + 5 dropped too (k = 10): start(I0 + 16) = T0 + 1600.
    assert_eq!(lab.hit(5), denied(1_000, Some(1_000), 10));
    lab.assert_retry_exact(5, 1_000);
    assert_eq!(lab.at(T0 + 1_100).hit(3), ok(1, 1_100, 6));
}

#[test]
fn uneven_sub_windows_round_starts_up() {
    // W = 1000, B = 3: sub-windows start at +0, +334, +667, +1000, +1334, ...
    let i = T0 * 3 / 1000;
    let mut lab = sw(2, 3);
    lab.at(T0 + 333);
    assert_eq!(lab.hit(2), ok(0, 1_001, 0));
    assert_eq!(counts(&lab), vec![(i, 2)]);
    assert_eq!(lab.hit(1), denied(1_001, Some(1_001), 2));
    lab.assert_retry_exact(1, 1_001);
    assert_eq!(lab.at(T0 + 334).hit(1), denied(1_000, Some(1_000), 2));
    assert_eq!(counts(&lab), vec![(i, 2)]);
}

#[test]
fn no_boundary_burst() {
    let mut lab = sw(10, 10);
    lab.at(T0 + 999);
    assert_eq!(lab.burst(10), 10);
    assert_eq!(lab.advance(1).burst(10), 0);
    // Sub-window I0 + 9 is counted until idx I0 + 20.
    assert_eq!(lab.at(T0 + 1_999).burst(1), 0);
    assert_eq!(lab.at(T0 + 2_000).burst(10), 10);
}

#[test]
fn refunds_take_from_the_newest_sub_windows() {
    let mut lab = sw(10, 10);
    lab.hit(5);
    lab.at(T0 + 500).hit(3);
    assert_eq!(lab.refund(4), ok(6, 600, 8));
    assert_eq!(counts(&lab), vec![(I0, 4)]);
    assert_eq!(lab.refund(100), ok(10, 0, 4));
    assert_eq!(lab.states[0], LimitState::default());
}

#[test]
fn cost_above_capacity_never_fits() {
    let mut lab = sw(10, 10);
    lab.hit(2);
    assert_eq!(lab.hit(11), denied(1_100, None, 2));
    assert_eq!(lab.peek_pure(), ok(8, 1_100, 2));
}

#[test]
fn peek_never_writes_even_dropping() {
    let mut lab = sw(3, 10);
    lab.hit(1);
    lab.at(T0 + 500).hit(2);
    assert_eq!(lab.peek_pure(), ok(0, 1_100, 3));
    // Later, the load drops I0 but a peek must not write that.
    lab.at(T0 + 1_100);
    assert_eq!(lab.peek_pure(), ok(1, 500, 2));
    assert_eq!(counts(&lab), vec![(I0, 1), (I0 + 5, 2)]);
}

#[test]
fn overdraft_saturates_at_the_usage_cap() {
    let mut lab = Lab::one(overdraft(
        LimitSpec::new(Algorithm::SlidingWindow, 10, Unit::Second),
        true,
    ));
    assert_eq!(lab.hit(u64::MAX), denied(1_100, None, 0));
    assert_eq!(lab.advance(100).hit(u64::MAX), denied(1_000, None, 1 << 53));
    assert_eq!(counts(&lab), vec![(I0, 1 << 53)]);
    // A denied hit that fits in C waits for the whole overdraft to leave.
    assert_eq!(lab.hit(1), denied(1_000, Some(1_000), 1 << 53));
    assert_eq!(counts(&lab), vec![(I0, 1 << 53)]);
}

#[test]
fn a_clock_going_backwards_keeps_newer_sub_windows() {
    let mut lab = sw(10, 10);
    lab.at(T0 + 500).hit(10);
    // 2 s earlier, I0 + 5 is "in the future": still counted; no k ≤ B + 1 frees it, so
    // retry is the reset.
    lab.at(T0 - 2_000);
    assert_eq!(lab.hit(1), denied(3_600, Some(3_600), 10));
    lab.assert_retry_exact(1, 3_600);
    // A charge in an older sub-window is counted in the newest one (conservative, and the
    // sub-windows stay in order); refunds take the newest.
    let mut lab = sw(10, 10);
    lab.at(T0 + 500).hit(1);
    lab.at(T0 + 100).hit(2);
    assert_eq!(counts(&lab), vec![(I0 + 5, 3)]);
    lab.refund(2);
    assert_eq!(counts(&lab), vec![(I0 + 5, 1)]);
}
