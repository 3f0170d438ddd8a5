//! Calendar periods: local midnights, DST days of 23 and 25 hours, ISO weeks, real month
//! lengths, quarters, and the sub-window arithmetic a `sliding_window` runs on them.

use super::{Calendar, Periods};
use crate::limit::Unit;

const H: u64 = 3_600_000;
const DAY: u64 = 24 * H;

/// Milliseconds since the epoch of a UTC date and time.
fn utc(y: i16, m: i8, d: i8, h: i8, min: i8) -> u64 {
    let ts = jiff::civil::date(y, m, d)
        .at(h, min, 0, 0)
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .expect("a UTC instant")
        .timestamp();
    u64::try_from(ts.as_millisecond()).expect("after 1970")
}

fn lengths(p: &Periods) -> Vec<u64> {
    p.bounds.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn days_start_at_local_midnight_and_follow_dst() {
    let ny = Calendar::new("America/New_York").expect("a known zone");
    // 2024-03-10, the spring-forward day: 23 hours, from 05:00Z (EST midnight).
    let p = ny.periods(Unit::Day, 1, utc(2024, 3, 10, 12, 0));
    assert_eq!(p.bounds[1], utc(2024, 3, 10, 5, 0));
    assert_eq!(lengths(&p), vec![DAY, 23 * H, DAY, DAY]);
    // 2024-11-03, the fall-back day: 25 hours, from 04:00Z (EDT midnight).
    let p = ny.periods(Unit::Day, 1, utc(2024, 11, 3, 12, 0));
    assert_eq!(p.bounds[1], utc(2024, 11, 3, 4, 0));
    assert_eq!(lengths(&p), vec![DAY, 25 * H, DAY, DAY]);
}

#[test]
fn a_half_hour_zone_has_its_own_midnight_and_month() {
    let kolkata = Calendar::new("Asia/Kolkata").expect("a known zone");
    // 2026-01-31T20:00Z is already 2026-02-01 01:30 in Kolkata (UTC+05:30).
    let t = utc(2026, 1, 31, 20, 0);
    let day = kolkata.periods(Unit::Day, 1, t);
    assert_eq!(day.bounds[1], utc(2026, 1, 31, 18, 30));
    let month = kolkata.periods(Unit::Month, 1, t);
    assert_eq!(month.bounds[1], utc(2026, 1, 31, 18, 30));
    // January, February (28 days in 2026), March, April.
    assert_eq!(
        lengths(&month),
        vec![31 * DAY, 28 * DAY, 31 * DAY, 30 * DAY]
    );
    assert_eq!(kolkata.zone(), "Asia/Kolkata");
}

#[test]
fn weeks_start_on_monday_and_years_on_january_first() {
    let utc_cal = Calendar::utc();
    // 2026-05-14 is a Thursday; its ISO week began on Monday 2026-05-11.
    let w = utc_cal.periods(Unit::Week, 1, utc(2026, 5, 14, 9, 0));
    assert_eq!(w.bounds[1], utc(2026, 5, 11, 0, 0));
    assert_eq!(lengths(&w), vec![7 * DAY; 4]);
    let y = utc_cal.periods(Unit::Year, 1, utc(2028, 7, 1, 0, 0));
    assert_eq!(y.bounds[1], utc(2028, 1, 1, 0, 0));
    // 2027, 2028 (leap), 2029, 2030.
    assert_eq!(
        lengths(&y),
        vec![365 * DAY, 366 * DAY, 365 * DAY, 365 * DAY]
    );
}

#[test]
fn a_multiplier_groups_units_from_1900() {
    // Months by 3 are the quarters from January.
    let q = Calendar::utc().periods(Unit::Month, 3, utc(2026, 5, 14, 9, 0));
    assert_eq!(
        q.bounds,
        [
            utc(2026, 1, 1, 0, 0),
            utc(2026, 4, 1, 0, 0),
            utc(2026, 7, 1, 0, 0),
            utc(2026, 10, 1, 0, 0),
            utc(2027, 1, 1, 0, 0),
        ]
    );
}

#[test]
fn zones_are_found_whatever_their_case_and_unknown_ones_are_not() {
    let c = Calendar::new("asia/kolkata").expect("case-insensitive");
    assert_eq!(c.zone(), "Asia/Kolkata");
    assert_eq!(c, Calendar::new("Asia/Kolkata").expect("known"));
    assert!(Calendar::new("Mars/Olympus_Mons").is_none());
    assert!(Calendar::new("").is_none());
}

#[test]
fn periods_are_the_same_from_every_instant_of_one_period() {
    let c = Calendar::new("Europe/Berlin").expect("known");
    let t = utc(2026, 3, 29, 12, 0); // a 23-hour day in Berlin
    let p = c.periods(Unit::Day, 1, t);
    // Asked again (the cache), or by a fresh calendar, from anywhere in the period.
    for at in [p.bounds[1], t, p.bounds[2] - 1] {
        assert_eq!(c.periods(Unit::Day, 1, at), p);
        let fresh = Calendar::new("Europe/Berlin").expect("known");
        assert_eq!(fresh.periods(Unit::Day, 1, at), p);
    }
    // Another unit is not answered from the cache of the first.
    assert_ne!(c.periods(Unit::Week, 1, t), p);
    // The next period's own periods are these, moved by one.
    let next = c.periods(Unit::Day, 1, p.bounds[2]);
    assert_eq!(next.first, p.first + 1);
    assert_eq!(next.bounds[..4], p.bounds[1..]);
}

#[test]
fn a_store_places_its_clock_in_the_first_three_periods() {
    let p = Calendar::utc().periods(Unit::Day, 1, utc(2026, 5, 14, 9, 0));
    assert_eq!(p.position(p.bounds[0]), Some(0));
    assert_eq!(p.position(p.bounds[2] + 5), Some(2));
    assert_eq!(p.position(p.bounds[3]), None);
    assert_eq!(p.position(p.bounds[0] - 1), None);
    assert_eq!(p.period(p.bounds[1] + 7), (p.bounds[1], p.bounds[2]));
    assert_eq!(p.end_of(p.bounds[2], p.bounds[1]), p.bounds[3]);
    // A start that is no boundary (a clock gone back by more than a period) ends one
    // period of the current length later.
    assert_eq!(
        p.end_of(p.bounds[0] - 5, p.bounds[1]),
        p.bounds[0] - 5 + DAY
    );
}

#[test]
fn sub_windows_cut_each_period_in_b_and_start_where_idx_says() {
    let c = Calendar::new("America/New_York").expect("known");
    let p = c.periods(Unit::Day, 1, utc(2024, 3, 10, 12, 0)); // 23-hour middle day
    for b in [2u64, 7, 10, 1000] {
        for i in 0..3 {
            let (s, e) = (p.bounds[i], p.bounds[i + 1]);
            for t in [s, s + 1, (s + e) / 2, e - 1] {
                let j = p.idx(t, b);
                assert_eq!(j / b, p.first + i as u64, "{t} in period {i}");
                let (lo, hi) = (p.start(u128::from(j), b), p.start(u128::from(j) + 1, b));
                assert!(lo <= u128::from(t) && u128::from(t) < hi, "b {b}, t {t}");
            }
        }
        // One period's sub-windows end where the next begins.
        let first_of_next = u128::from(p.first + 2) * u128::from(b);
        assert_eq!(p.start(first_of_next, b), u128::from(p.bounds[2]));
        // Beyond the five boundaries the start clamps (a clock gone back by a period).
        assert_eq!(
            p.start(u128::from(p.first + 9) * u128::from(b), b),
            u128::from(p.bounds[4])
        );
        assert_eq!(p.start(0, b), u128::from(p.bounds[0]));
    }
}
