use super::*;
use crate::limit::Unit;

const P: Policy = Policy {
    min_share_ppm: 10_000,
    threshold_ppm: 100_000,
};

fn others(count: u64, demand: u64, assigned: u64) -> Others {
    Others {
        count,
        unknown: 0,
        demand,
        assigned,
    }
}

fn share(limit: u64, o: Others, my: Option<u64>, held: u64) -> u64 {
    settle(limit, o, my, held, P).share
}

#[test]
fn alone_keeps_one_floor_free() {
    // 100 per window, floor 1: a lone subscriber gets 99, a newcomer can start with 1.
    assert_eq!(share(100, Others::default(), Some(5_000), 0), 99);
    let newcomer = settle(100, others(1, 5_000, 99), Some(1_000), 0, P);
    // Its target is 17: it waits for the other to shrink.
    assert_eq!(
        newcomer,
        Settled {
            share: 1,
            pending: true
        }
    );
}

#[test]
fn the_first_share_is_the_floor_and_the_others_make_room() {
    // Demand unknown (Envoy's first report covers no time): the floor, alone or not.
    assert_eq!(
        settle(100, Others::default(), None, 0, P),
        Settled {
            share: 1,
            pending: false
        }
    );
    assert_eq!(share(100, others(2, 9_000, 60), None, 0), 1);
    // The one already there counts the newcomer at its own demand: half of what is not
    // kept free, settled again soon (the newcomer's demand may differ).
    let unknown = Others {
        count: 1,
        unknown: 1,
        demand: 0,
        assigned: 1,
    };
    assert_eq!(
        settle(100, unknown, Some(3_000), 99, P),
        Settled {
            share: 49,
            pending: true
        }
    );
    // Two known at 1 000 and 3 000, one unknown counted at their mean, 2 000.
    let mixed = Others {
        count: 2,
        unknown: 1,
        demand: 1_000,
        assigned: 0,
    };
    // floor 1 kept free, 3 000 of 6 000 of the 99 left.
    assert_eq!(share(100, mixed, Some(3_000), 0), 49);
}

#[test]
fn shares_follow_demand_three_to_one() {
    let a = share(100, others(1, 1_000, 25), Some(3_000), 0);
    let b = share(100, others(1, 3_000, a), Some(1_000), 0);
    // 99 not kept free, split 3:1 (rounded down).
    assert_eq!((a, b), (74, 24));
    assert!(a + b <= 100);
}

#[test]
fn the_floor_is_a_minimum_not_an_addend() {
    // At a 5 % floor, demands of 3:1 still get 3:1 of what is not kept free (95).
    let five = Policy {
        min_share_ppm: 50_000,
        ..P
    };
    let a = settle(100, others(1, 1_000, 0), Some(3_000), 0, five).share;
    let b = settle(100, others(1, 3_000, a), Some(1_000), 0, five).share;
    assert_eq!((a, b), (71, 23));
    // A quiet one is raised to the floor.
    assert_eq!(
        settle(100, others(1, 100_000, 0), Some(1), 0, five).share,
        5
    );
}

#[test]
fn never_more_than_what_the_others_leave() {
    assert_eq!(share(100, others(2, 0, 95), Some(10_000), 0), 5);
    assert_eq!(share(100, others(2, 0, 100), Some(10_000), 0), 0);
    assert_eq!(share(100, others(2, 0, 150), Some(10_000), 0), 0);
    assert_eq!(share(100, others(2, 0, 150), None, 0), 0);
    assert!(settle(100, others(2, 0, 100), None, 0, P).pending);
}

#[test]
fn small_changes_keep_the_held_share() {
    // Target 74; 70 held is within 10 %: kept. 60 held is not: replaced.
    assert_eq!(share(100, others(1, 1_000, 25), Some(3_000), 70), 70);
    assert_eq!(share(100, others(1, 1_000, 25), Some(3_000), 60), 74);
    // Held above what the others leave: replaced even within the threshold.
    assert_eq!(share(100, others(1, 1_000, 35), Some(3_000), 70), 65);
}

#[test]
fn sum_never_exceeds_the_limit() {
    // Any arrival order, any demands, known or not: after each report the held shares add
    // up to ≤ limit.
    let demands = [
        Some(0u64),
        Some(1),
        None,
        Some(7),
        Some(1_000),
        Some(3_000),
        Some(123_456),
        None,
        Some(0),
        Some(42),
    ];
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
                let theirs = |j: usize| demands[(j + round) % demands.len()];
                let o = Others {
                    count: demands.len() as u64 - 1,
                    unknown: (0..demands.len())
                        .filter(|&j| j != i && theirs(j).is_none())
                        .count() as u64,
                    demand: (0..demands.len())
                        .filter(|&j| j != i)
                        .filter_map(theirs)
                        .sum(),
                    assigned: held.iter().sum::<u64>() - held[i],
                };
                held[i] = settle(limit, o, theirs(i), held[i], P).share;
                assert!(held.iter().sum::<u64>() <= limit, "{limit} {held:?}");
            }
        }
    }
}

#[test]
fn demand_is_per_second_in_thousandths() {
    assert_eq!(demand_milli(3, 1, Some(2_000)), Some(2_000));
    assert_eq!(demand_milli(5, 0, Some(5_000)), Some(1_000));
    // No time covered: no rate.
    assert_eq!(demand_milli(5, 0, None), None);
    assert_eq!(demand_milli(5, 0, Some(0)), None);
    assert_eq!(demand_milli(u64::MAX, u64::MAX, Some(1)), Some(1 << 40));
}

#[test]
fn a_bucket_holds_one_second_of_its_share() {
    // 600 a minute: 10 tokens.
    assert_eq!(burst(600, 60_000), 10);
    // Rounded up, at least one token, never more than the share.
    assert_eq!(burst(7, 60_000), 1);
    assert_eq!(burst(0, 60_000), 1);
    assert_eq!(burst(61, 60_000), 2);
    // A rule of a second banks its whole share.
    assert_eq!(burst(10, 1_000), 10);
    assert_eq!(burst(u64::MAX, 1_000), u64::MAX);
    assert_eq!(burst(3_600, 3_600_000), 1);
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
        limit: 120,
        window_ms: 60_000,
    };
    let g = |share| Grant {
        share,
        subscribers: 2,
        pending: false,
    };
    assert_eq!(
        decide(q, Some(&g(48)), 60_000),
        Decision {
            assignment: Assignment::TokenBucket {
                tokens: 48,
                burst: 1,
                fill_interval_ms: 60_000
            },
            ttl_ms: 60_000
        }
    );
    // Nothing left by the others: denied until they shrink.
    assert_eq!(
        decide(q, Some(&g(0)), 60_000).assignment,
        Assignment::DenyAll
    );
    assert_eq!(
        decide(Quota::AllowAll, None, 9).assignment,
        Assignment::AllowAll
    );
    assert_eq!(
        decide(Quota::DenyAll, None, 9).assignment,
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
    let share = settle(30_000_000_000, Others::default(), Some(1_000), 0, P).share;
    assert!(
        share > u64::from(u32::MAX) && share <= 30_000_000_000,
        "{share}"
    );
    let g = Grant {
        share,
        subscribers: 1,
        pending: false,
    };
    assert_eq!(
        decide(q, Some(&g), 60_000).assignment,
        Assignment::TokenBucket {
            tokens: u32::MAX,
            burst: 1_658,
            fill_interval_ms: 2_592_000_000
        }
    );
}
