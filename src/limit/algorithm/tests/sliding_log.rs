//! `sliding_log`: exact trailing window, reset = newest + W, retry from the k-th oldest
//! entry, no boundary burst, newest-first refunds, costs as run-length entries.

use super::*;
use crate::limit::algorithm::State;

fn log(rpu: u64) -> Lab {
    Lab::one(LimitSpec::new(Algorithm::SlidingLog, rpu, Unit::Second))
}

fn runs(lab: &Lab) -> Vec<(u64, u64)> {
    match &lab.states[0].state {
        State::SlidingLog(s) => s.runs().collect(),
        State::Empty => Vec::new(),
        other => panic!("unexpected state {other:?}"),
    }
}

#[test]
fn exact_trailing_window() {
    let mut lab = log(3);
    assert_eq!(lab.hit(1), ok(2, 1_000, 0));
    assert_eq!(lab.at(T0 + 200).hit(1), ok(1, 1_000, 1));
    assert_eq!(lab.at(T0 + 400).hit(1), ok(0, 1_000, 2));
    assert_eq!(lab.states[0].state_expires_ms, T0 + 1_400);
    // k = 3 + 1 − 3 = 1: the oldest entry (T0) leaves at T0 + 1000.
    lab.at(T0 + 500);
    assert_eq!(lab.hit(1), denied(900, Some(500), 3));
    lab.assert_retry_exact(1, 500);
    // k = 2: the second oldest (T0 + 200) leaves at T0 + 1200.
    assert_eq!(lab.hit(2), denied(900, Some(700), 3));
    lab.assert_retry_exact(2, 700);
    // Entries at exactly now − W are out.
    assert_eq!(lab.at(T0 + 1_000).hit(1), ok(0, 1_000, 2));
    assert_eq!(
        runs(&lab),
        vec![(T0 + 200, 1), (T0 + 400, 1), (T0 + 1_000, 1)]
    );
}

#[test]
fn no_boundary_burst() {
    let mut lab = log(10);
    lab.at(T0 + 999);
    assert_eq!(lab.burst(10), 10);
    assert_eq!(lab.advance(1).burst(10), 0);
    assert_eq!(lab.at(T0 + 1_998).burst(1), 0);
    assert_eq!(lab.at(T0 + 1_999).burst(10), 10);
}

#[test]
fn a_cost_is_one_run_and_refunds_take_the_newest() {
    let mut lab = log(10);
    lab.hit(4);
    lab.at(T0 + 300).hit(3);
    lab.hit(2);
    assert_eq!(runs(&lab), vec![(T0, 4), (T0 + 300, 5)]);
    assert_eq!(lab.refund(6), ok(7, 700, 9));
    assert_eq!(runs(&lab), vec![(T0, 3)]);
    assert_eq!(lab.refund(50), ok(10, 0, 3));
    assert_eq!(lab.states[0], LimitState::default());
}

#[test]
fn cost_above_capacity_never_fits() {
    let mut lab = log(3);
    lab.hit(1);
    assert_eq!(lab.advance(10).hit(4), denied(990, None, 1));
    assert_eq!(lab.peek_pure(), ok(2, 990, 1));
}

#[test]
fn peek_never_writes_even_dropping() {
    let mut lab = log(3);
    lab.hit(1);
    lab.at(T0 + 600).hit(1);
    lab.at(T0 + 1_200);
    assert_eq!(lab.peek_pure(), ok(2, 400, 1));
    assert_eq!(runs(&lab), vec![(T0, 1), (T0 + 600, 1)]);
}

#[test]
fn changing_the_limit_keeps_the_log() {
    let mut lab = log(5);
    lab.hit(4);
    lab.limits[0].requests_per_unit = 3;
    assert_eq!(lab.hit(1), denied(1_000, Some(1_000), 4));
    lab.limits[0].requests_per_unit = 6;
    assert_eq!(lab.hit(1), ok(1, 1_000, 4));
}

#[test]
fn a_clock_going_backwards_stamps_entries_with_the_newest_time() {
    let mut lab = log(3);
    lab.at(T0 + 500).hit(2);
    lab.at(T0 + 100);
    // Added to the newest run (T0 + 500): they leave the window with it.
    assert_eq!(lab.hit(1), ok(0, 1_400, 2));
    assert_eq!(runs(&lab), vec![(T0 + 500, 3)]);
    assert_eq!(lab.hit(1), denied(1_400, Some(1_400), 3));
    lab.assert_retry_exact(1, 1_400);
    lab.refund(2);
    assert_eq!(runs(&lab), vec![(T0 + 500, 1)]);
}

#[test]
fn a_refund_reaches_back_at_most_64_runs() {
    let mut lab = log(100);
    for i in 0..70 {
        lab.at(T0 + i).hit(1);
    }
    assert_eq!(runs(&lab).len(), 70);
    // 100 asked, 64 given back: the 64 newest runs; the 6 oldest stay.
    assert_eq!(lab.at(T0 + 70).refund(100), ok(94, 1_000 - 65, 70));
    assert_eq!(runs(&lab), (0..6).map(|i| (T0 + i, 1)).collect::<Vec<_>>());
}
