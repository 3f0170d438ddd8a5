//! Property tests on random traces: the three bucket algorithms agree on every result;
//! `sliding_log` matches a plain list of timestamps; `sliding_window` matches the same list
//! grouped by sub-window, so it never under-counts the exact trailing window and
//! over-counts by at most one sub-window's hits; and for every algorithm: retry is exact to
//! the millisecond, peeks never write, usage never grows as the clock goes back (a clock
//! going backwards never mints quota), a full refund empties.

use proptest::prelude::*;

use super::*;

#[derive(Clone, Copy, Debug)]
enum Op {
    Wait(u64),
    Hit(u64),
    Refund(u64),
    Peek,
}

/// Forward-only traces with costs up to `max_cost` (and the occasional `u64::MAX`).
fn trace(max_cost: u64) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0u64..1_500).prop_map(Op::Wait),
        1 => (0u64..120_000).prop_map(Op::Wait),
        6 => (0..=max_cost).prop_map(Op::Hit),
        1 => Just(Op::Hit(u64::MAX)),
        2 => (0..=max_cost).prop_map(Op::Refund),
        1 => Just(Op::Peek),
    ];
    prop::collection::vec(op, 1..80)
}

fn unit() -> impl Strategy<Value = Unit> {
    prop_oneof![Just(Unit::Second), Just(Unit::Minute)]
}

/// Runs `op` on `lab`; `None` for a wait.
fn apply(lab: &mut Lab, op: Op) -> Option<LimitResult> {
    match op {
        Op::Wait(ms) => {
            lab.advance(ms);
            None
        }
        Op::Hit(n) => Some(lab.hit(n)),
        Op::Refund(n) => Some(lab.refund(n)),
        Op::Peek => Some(lab.peek()),
    }
}

/// Checks retry exactness of a denied, unpenalized hit of cost `n` just applied to `lab`.
fn check_retry(lab: &Lab, op: Op, r: &LimitResult) {
    if let (Op::Hit(n), false, false, Some(retry)) = (op, r.allowed, r.penalized, r.retry_ms) {
        let capacity = lab.limits[0].capacity();
        // A fixed window answers its end even for a cost that never fits.
        if n <= capacity {
            lab.assert_retry_exact(n, retry);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn buckets_make_identical_decisions(
        (rpu, burst_, unit, od, pen, ops) in (1u64..2_000, 0u64..60, unit(), any::<bool>(),
            prop_oneof![Just(0u64), 1u64..3_000])
            .prop_flat_map(|(r, b, u, od, pen)| (Just(r), Just(b), Just(u), Just(od), Just(pen),
                trace(b + 2)))
    ) {
        let mut labs: Vec<Lab> = [Algorithm::TokenBucket, Algorithm::LeakyBucket, Algorithm::Gcra]
            .into_iter()
            .map(|a| Lab::one(penalty(overdraft(burst(LimitSpec::new(a, rpu, unit), burst_), od), pen)))
            .collect();
        for op in ops {
            let results: Vec<_> = labs.iter_mut().map(|lab| apply(lab, op)).collect();
            prop_assert_eq!(results[0], results[1], "token vs leaky after {:?}", op);
            prop_assert_eq!(results[0], results[2], "token vs gcra after {:?}", op);
            if let Some(r) = results[0] {
                check_retry(&labs[0], op, &r);
                check_retry(&labs[2], op, &r);
            }
        }
    }

    #[test]
    fn sliding_log_matches_a_list_of_timestamps(
        (rpu, unit, ops) in (0u64..40, unit())
            .prop_flat_map(|(r, u)| (Just(r), Just(u), trace(r + 2)))
    ) {
        let mut lab = Lab::one(LimitSpec::new(Algorithm::SlidingLog, rpu, unit));
        let (c, w) = (rpu, unit.millis());
        let mut model: Vec<u64> = Vec::new();
        for op in ops {
            let now = lab.now;
            model.retain(|&ts| ts + w > now);
            let u = model.len() as u64;
            let got = apply(&mut lab, op);
            let expected = match op {
                Op::Wait(_) => None,
                Op::Refund(n) => {
                    model.truncate(model.len().saturating_sub(usize::try_from(n).unwrap_or(usize::MAX)));
                    let reset = model.last().map_or(0, |ts| ts + w - now);
                    Some(ok(c - model.len() as u64, reset, u))
                }
                Op::Hit(_) | Op::Peek => {
                    let n = if let Op::Hit(n) = op { n } else { 0 };
                    if u.checked_add(n).is_some_and(|after| after <= c) {
                        model.extend(std::iter::repeat_n(now, n as usize));
                        let reset = model.last().map_or(0, |ts| ts + w - now);
                        Some(ok(c - u - n, reset, u))
                    } else {
                        let reset = model.last().map_or(0, |ts| ts + w - now);
                        let retry = (n <= c).then(|| model[(u + n - c - 1) as usize] + w - now);
                        Some(denied(reset, retry, u))
                    }
                }
            };
            prop_assert_eq!(got, expected, "after {:?} at {}", op, now);
            if let Some(r) = got {
                check_retry(&lab, op, &r);
            }
        }
    }

    #[test]
    fn sliding_window_is_the_list_grouped_by_sub_window(
        (rpu, buckets, unit, ops) in (0u64..40, 2u32..20, unit())
            .prop_flat_map(|(r, b, u)| (Just(r), Just(b), Just(u), trace(r + 2)))
    ) {
        let mut s = LimitSpec::new(Algorithm::SlidingWindow, rpu, unit);
        s.buckets = buckets;
        let mut lab = Lab::one(s);
        let (w, b) = (unit.millis(), u64::from(buckets));
        let idx = |t: u64| t * b / w;
        let mut model: Vec<u64> = Vec::new();
        for op in ops {
            let now = lab.now;
            let cur = idx(now);
            // What the sub-windows [cur − B, cur] hold, and the exact trailing count.
            let counted = model.iter().filter(|&&ts| idx(ts) + b >= cur).count() as u64;
            let exact = model.iter().filter(|&&ts| ts + w > now).count() as u64;
            let oldest = model.iter().filter(|&&ts| idx(ts) + b == cur).count() as u64;
            prop_assert!(exact <= counted && counted <= exact + oldest);
            let got = apply(&mut lab, op);
            if let Some(r) = got {
                prop_assert_eq!(r.used_before, counted, "after {:?} at {}", op, now);
                check_retry(&lab, op, &r);
                match op {
                    Op::Hit(n) if r.allowed => model.extend(std::iter::repeat_n(now, n as usize)),
                    Op::Refund(n) => model.truncate(
                        model.len().saturating_sub(usize::try_from(n).unwrap_or(usize::MAX)),
                    ),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn every_algorithm_peeks_purely_and_never_mints_quota_backwards(
        (alg, rpu, od, ops, back) in (prop::sample::select(Algorithm::ALL.to_vec()), 1u64..30,
            any::<bool>())
            .prop_flat_map(|(a, r, od)| (Just(a), Just(r), Just(od), trace(r + 1),
                prop::collection::vec(0u64..5_000, 1..8)))
    ) {
        let od = od && alg != Algorithm::SlidingLog;
        let mut lab = Lab::one(overdraft(LimitSpec::new(alg, rpu, Unit::Second), od));
        for op in ops {
            if let Some(r) = apply(&mut lab, op) {
                check_retry(&lab, op, &r);
            }
            lab.peek_pure();
        }
        // Looking back in time from the last instant never shows less usage.
        let mut earlier = Vec::new();
        for d in back {
            let mut probe = lab.clone();
            probe.now = lab.now.saturating_sub(d);
            earlier.push((probe.now, probe.peek_pure().used_before));
        }
        let latest = lab.clone().peek_pure().used_before;
        for (t, used) in earlier {
            prop_assert!(used >= latest, "used {} at {} < {} at {}", used, t, latest, lab.now);
        }
        prop_assert_eq!(lab.refund(u64::MAX).remaining, lab.limits[0].capacity());
        prop_assert_eq!(lab.peek().used_before, 0);
    }
}
