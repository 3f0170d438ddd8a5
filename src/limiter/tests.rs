use super::*;
use crate::limit::Unit;

fn spec(algorithm: Algorithm, rpu: u64) -> LimitSpec {
    LimitSpec::new(algorithm, rpu, Unit::Minute)
}

fn ok(remaining: u64, reset_ms: u64) -> LimitResult {
    LimitResult {
        allowed: true,
        remaining,
        reset_ms,
        ..Default::default()
    }
}

fn denied(retry_ms: Option<u64>, reset_ms: u64) -> LimitResult {
    LimitResult {
        allowed: false,
        reset_ms,
        retry_ms,
        ..Default::default()
    }
}

/// The tests' plans: `cost` hits of `tag` on a rule's `limits`, not shadowed, no quota.
impl<'a> Metered<'a> {
    pub(super) fn charge(limits: &'a [LimitSpec], tag: u128, cost: u64) -> Metered<'a> {
        Metered {
            limits: LimitSet::Rule(limits),
            tag: StateTag(tag),
            cost,
            refund: false,
            shadow: false,
            quota: false,
            reference_key: None,
        }
    }
}

fn limited<'a>(limits: &'a [LimitSpec], shadow: bool, quota: bool) -> Plan<'a> {
    Plan::Metered(Metered {
        shadow,
        quota,
        ..Metered::charge(limits, 1, 1)
    })
}

fn st(d: &Decision, i: usize) -> &Verdict {
    match &d.outcomes[i] {
        Outcome::Metered(s) => s,
        other => panic!("not limited: {other:?}"),
    }
}

#[test]
fn fixed_window_duration_is_whole_seconds_and_gcra_keeps_milliseconds() {
    let fw = [spec(Algorithm::FixedWindow, 10)];
    let g = [spec(Algorithm::Gcra, 10)];
    let plans = [limited(&fw, false, false), limited(&g, false, false)];
    let d = compose(&plans, vec![ok(9, 57_300), ok(9, 6_001)], Modes::default());
    assert_eq!(d.overall(), Code::Ok);
    assert_eq!(st(&d, 0).duration_ms, 58_000);
    assert_eq!(st(&d, 1).duration_ms, 6_001);
    assert_eq!(st(&d, 0).remaining, 9);
}

#[test]
fn several_limits_report_first_denial_else_least_remaining() {
    let l = [
        spec(Algorithm::Gcra, 10),
        spec(Algorithm::FixedWindow, 1000),
    ];
    let plans = [limited(&l, false, false)];
    let d = compose(&plans, vec![ok(5, 500), ok(3, 60_000)], Modes::default());
    assert_eq!(
        (
            st(&d, 0).reported,
            st(&d, 0).remaining,
            st(&d, 0).duration_ms
        ),
        (1, 3, 60_000)
    );
    let d = compose(
        &plans,
        vec![denied(Some(100), 1000), ok(3, 60_000)],
        Modes::default(),
    );
    let s = st(&d, 0);
    assert_eq!(
        (s.code, s.reported, s.remaining, s.duration_ms),
        (Code::OverLimit, 0, 0, 100)
    );
    // Never allowed (cost above capacity): time until fully replenished.
    let d = compose(
        &plans,
        vec![denied(None, 1234), ok(3, 60_000)],
        Modes::default(),
    );
    assert_eq!(st(&d, 0).duration_ms, 1234);
}

#[test]
fn over_limit_waits_for_the_longest_denying_limit() {
    // Denied by 1/second and by 1/hour: retrying after one second would be denied again
    // for the hour. The status names the first denying limit, the wait is the longest.
    let l = [
        spec(Algorithm::Gcra, 1),
        LimitSpec {
            unit: Unit::Hour,
            ..spec(Algorithm::FixedWindow, 1)
        },
        spec(Algorithm::TokenBucket, 50),
    ];
    let plans = [limited(&l, false, false)];
    let d = compose(
        &plans,
        vec![
            denied(Some(1_000), 1_000),
            denied(Some(3_599_200), 3_599_200),
            ok(40, 12_000),
        ],
        Modes::default(),
    );
    let s = st(&d, 0);
    // The fixed window's wait is whole seconds, as it reports alone.
    assert_eq!(
        (s.code, s.reported, s.duration_ms),
        (Code::OverLimit, 0, 3_600_000)
    );
    // A penalty counts like any other denial; "never" counts as the time until full.
    let d = compose(
        &plans,
        vec![
            LimitResult {
                penalized: true,
                ..denied(Some(300_000), 0)
            },
            denied(None, 2_000),
            ok(40, 12_000),
        ],
        Modes::default(),
    );
    assert_eq!((st(&d, 0).reported, st(&d, 0).duration_ms), (0, 300_000));
}

#[test]
fn ok_reports_the_binding_limit_longest_reset_on_ties() {
    let l = [
        spec(Algorithm::Gcra, 10),
        spec(Algorithm::TokenBucket, 10),
        spec(Algorithm::LeakyBucket, 10),
    ];
    let plans = [limited(&l, false, false)];
    let d = compose(
        &plans,
        vec![ok(4, 500), ok(4, 9_000), ok(4, 2_000)],
        Modes::default(),
    );
    assert_eq!((st(&d, 0).reported, st(&d, 0).duration_ms), (1, 9_000));
    // Least remaining wins over a longer reset.
    let d = compose(
        &plans,
        vec![ok(3, 500), ok(4, 9_000), ok(4, 2_000)],
        Modes::default(),
    );
    assert_eq!(
        (
            st(&d, 0).reported,
            st(&d, 0).remaining,
            st(&d, 0).duration_ms
        ),
        (0, 3, 500)
    );
    // Equal in both: the first.
    let d = compose(
        &plans,
        vec![ok(4, 500), ok(4, 500), ok(4, 500)],
        Modes::default(),
    );
    assert_eq!(st(&d, 0).reported, 0);
}

#[test]
fn durations_are_clamped_to_the_protobuf_range() {
    let l = [spec(Algorithm::TokenBucket, 1)];
    let plans = [limited(&l, false, false)];
    // An overdrafted bucket can owe ~2^52 ms (7.2e11 s); protobuf stops at 315 576 000 000 s.
    let d = compose(
        &plans,
        vec![denied(Some(1 << 52), 1 << 52)],
        Modes::default(),
    );
    assert_eq!(st(&d, 0).duration_ms, MAX_DURATION_MS);
    let d = compose(&plans, vec![ok(0, u64::MAX)], Modes::default());
    assert_eq!(st(&d, 0).duration_ms, MAX_DURATION_MS);
    let fw = [spec(Algorithm::FixedWindow, 1)];
    let d = compose(
        &[limited(&fw, false, false)],
        vec![ok(0, u64::MAX)],
        Modes::default(),
    );
    assert_eq!(st(&d, 0).duration_ms, MAX_DURATION_MS);
}

#[test]
fn shadow_quota_and_global_shadow() {
    let l = [spec(Algorithm::FixedWindow, 1)];
    // Per-rule shadow: OK, remaining 0, overall OK.
    let d = compose(
        &[limited(&l, true, false)],
        vec![denied(Some(1), 1)],
        Modes::default(),
    );
    let s = st(&d, 0);
    assert_eq!(
        (s.code, s.remaining, s.shadowed, s.over_limit),
        (Code::Ok, 0, true, true)
    );
    assert_eq!(d.overall(), Code::Ok);
    // Quota: one of two quota descriptors over → OK; both → OVER_LIMIT.
    let plans = [limited(&l, false, true), limited(&l, false, true)];
    let d = compose(&plans, vec![denied(Some(1), 1), ok(0, 1)], Modes::default());
    assert_eq!(d.overall(), Code::Ok);
    assert_eq!(st(&d, 0).code, Code::OverLimit);
    let d = compose(
        &plans,
        vec![denied(Some(1), 1), denied(Some(1), 1)],
        Modes::default(),
    );
    assert_eq!(d.overall(), Code::OverLimit);
    // A regular descriptor over → OVER_LIMIT whatever the quota ones say.
    let plans = [limited(&l, false, true), limited(&l, false, false)];
    let d = compose(&plans, vec![ok(0, 1), denied(Some(1), 1)], Modes::default());
    assert_eq!(d.overall(), Code::OverLimit);
    // Global shadow flips only the overall code.
    let d = compose(
        &plans,
        vec![ok(0, 1), denied(Some(1), 1)],
        Modes {
            global_shadow: true,
            ..Modes::default()
        },
    );
    assert_eq!(d.overall(), Code::Ok);
    assert!(d.global_shadowed);
    assert_eq!(st(&d, 1).code, Code::OverLimit);
}

#[test]
fn unlimited_and_unmatched_are_ok() {
    let d = compose(&[Plan::NoLimit, Plan::Unlimited], vec![], Modes::default());
    assert_eq!(d.overall(), Code::Ok);
    assert_eq!(d.outcomes, vec![Outcome::NoLimit, Outcome::Unlimited]);
}

#[test]
fn refunds_are_always_ok() {
    let l = [spec(Algorithm::TokenBucket, 5)];
    let plans = [Plan::Metered(Metered {
        refund: true,
        ..Metered::charge(&l, 1, 2)
    })];
    let d = compose(&plans, vec![ok(5, 0)], Modes::default());
    assert_eq!(st(&d, 0).code, Code::Ok);
    assert_eq!(st(&d, 0).remaining, 5);
}
