use super::*;
use crate::limit::Unit;

const P: Policy = Policy {
    min_share_ppm: 10_000,
    threshold_ppm: 100_000,
};

fn others(count: u64, demand: u64, assigned: u64) -> Others {
    Others {
        count,
        demand,
        assigned,
    }
}

#[test]
fn alone_keeps_one_floor_free() {
    // 100 per window, floor 1: a lone subscriber gets 99, a newcomer can start with 1.
    assert_eq!(settle(100, Others::default(), 5_000, 0, P), 99);
    assert_eq!(settle(100, others(1, 5_000, 99), 1_000, 0, P), 1);
}

#[test]
fn shares_follow_demand_three_to_one() {
    let a = settle(100, others(1, 1_000, 25), 3_000, 0, P);
    let b = settle(100, others(1, 3_000, a), 1_000, 0, P);
    assert_eq!((a, b), (73, 25));
    assert!(a + b <= 100);
}

#[test]
fn never_more_than_what_the_others_leave() {
    assert_eq!(settle(100, others(2, 0, 95), 10_000, 0, P), 5);
    assert_eq!(settle(100, others(2, 0, 100), 10_000, 0, P), 0);
    assert_eq!(settle(100, others(2, 0, 150), 10_000, 0, P), 0);
}

#[test]
fn small_changes_keep_the_held_share() {
    // Target 73; 70 held is within 10 %: kept. 60 held is not: replaced.
    assert_eq!(settle(100, others(1, 1_000, 25), 3_000, 70, P), 70);
    assert_eq!(settle(100, others(1, 1_000, 25), 3_000, 60, P), 73);
    // Held above what the others leave: replaced even within the threshold.
    assert_eq!(settle(100, others(1, 1_000, 35), 3_000, 70, P), 65);
}

#[test]
fn sum_never_exceeds_the_limit() {
    // Any arrival order, any demands: after each report the held shares add up to ≤ limit.
    let demands = [0u64, 1, 7, 1_000, 3_000, 123_456, 0, 42];
    for limit in [
        0u64,
        1,
        2,
        3,
        10,
        100,
        1_000,
        4_294_967_295,
        30_000_000_000,
        (1 << 53) - 1,
        1 << 53,
    ] {
        let mut held = vec![0u64; demands.len()];
        for round in 0..4 {
            for i in 0..demands.len() {
                let o = Others {
                    count: demands.len() as u64 - 1,
                    demand: demands.iter().sum::<u64>() - demands[i],
                    assigned: held.iter().sum::<u64>() - held[i],
                };
                held[i] = settle(limit, o, demands[(i + round) % demands.len()], held[i], P);
                assert!(held.iter().sum::<u64>() <= limit, "{limit} {held:?}");
            }
        }
    }
}

#[test]
fn demand_is_per_second_in_thousandths() {
    assert_eq!(demand_milli(3, 1, Some(2_000)), 2_000);
    assert_eq!(demand_milli(5, 0, None), 5_000);
    assert_eq!(demand_milli(5, 0, Some(0)), 5_000);
    assert_eq!(demand_milli(u64::MAX, u64::MAX, Some(1)), 1 << 40);
}

#[test]
fn rule_quota() {
    let l = |n, unit| LimitSpec::fixed_window(n, unit);
    assert_eq!(Quota::of_rule(&[], true, false), Quota::AllowAll);
    assert_eq!(
        Quota::of_rule(&[l(5, Unit::Second)], false, true),
        Quota::AllowAll
    );
    assert_eq!(
        Quota::of_rule(&[l(0, Unit::Second)], false, false),
        Quota::DenyAll
    );
    // 100/s vs 1000/min: the minute is tighter.
    assert_eq!(
        Quota::of_rule(&[l(100, Unit::Second), l(1000, Unit::Minute)], false, false),
        Quota::Shared {
            limit: 1000,
            window_ms: 60_000
        }
    );
}

#[test]
fn decisions() {
    let q = Quota::Shared {
        limit: 10,
        window_ms: 1_000,
    };
    let g = |share, used| Grant {
        share,
        subscribers: 2,
        used,
        window_end_ms: 5_000,
    };
    assert_eq!(
        decide(q, Some(&g(4, 3)), 4_200, 60_000),
        Decision {
            assignment: Assignment::TokenBucket {
                tokens: 4,
                fill_interval_ms: 1_000
            },
            ttl_ms: 60_000
        }
    );
    // Over the limit in this window: denied until it ends.
    assert_eq!(
        decide(q, Some(&g(4, 10)), 4_200, 60_000),
        Decision {
            assignment: Assignment::DenyAll,
            ttl_ms: 800
        }
    );
    assert_eq!(
        decide(q, Some(&g(0, 3)), 4_200, 60_000).assignment,
        Assignment::DenyAll
    );
    assert_eq!(
        decide(Quota::AllowAll, None, 0, 9).assignment,
        Assignment::AllowAll
    );
    assert_eq!(
        decide(Quota::DenyAll, None, 0, 9).assignment,
        Assignment::DenyAll
    );
}

#[test]
fn a_share_past_2_to_the_32_is_sent_as_envoys_largest_bucket() {
    // Envoy's TokenBucket counts in uint32s: a share of a 30-billion budget is sent as
    // 4294967295 tokens per fill (fewer than granted, never more).
    let q = Quota::of_rule(
        &[LimitSpec::fixed_window(30_000_000_000, Unit::Month)],
        false,
        false,
    );
    assert_eq!(
        q,
        Quota::Shared {
            limit: 30_000_000_000,
            window_ms: 2_592_000_000
        }
    );
    let share = settle(30_000_000_000, Others::default(), 1_000, 0, P);
    assert!(
        share > u64::from(u32::MAX) && share <= 30_000_000_000,
        "{share}"
    );
    let g = Grant {
        share,
        subscribers: 1,
        used: 0,
        window_end_ms: 10,
    };
    assert_eq!(
        decide(q, Some(&g), 0, 60_000).assignment,
        Assignment::TokenBucket {
            tokens: u32::MAX,
            fill_interval_ms: 2_592_000_000
        }
    );
    // Usage is counted exactly: one token short of the budget is not over it.
    let near = Grant {
        used: 29_999_999_999,
        ..g
    };
    assert!(matches!(
        decide(q, Some(&near), 0, 60_000).assignment,
        Assignment::TokenBucket { .. }
    ));
    let over = Grant {
        used: 30_000_000_000,
        ..g
    };
    assert_eq!(
        decide(q, Some(&over), 0, 60_000).assignment,
        Assignment::DenyAll
    );
}
