//! Scenarios for calendar windows (`calendar: {time_zone}`): a fixed window is the local day
//! or month, DST days included; a sliding window's previous period weighs in by sub-window.
//! Every expected boundary is computed here with jiff's own date arithmetic, independently
//! of `sluice::limit::Calendar`'s period numbering.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use sluice::limit::Algorithm::*;
use sluice::limit::{Calendar, LimitSpec, Unit::*};
use sluice::store::Store;

use super::{Env, denied, limit, ok, overdraft};

const HOUR: u64 = 3_600_000;

fn ms(t: Timestamp) -> u64 {
    u64::try_from(t.as_millisecond()).expect("after 1970")
}

/// The first instant of local date `d` in `tz`.
fn midnight(tz: &TimeZone, d: Date) -> u64 {
    ms(tz.to_timestamp(d.into()).expect("a local midnight"))
}

/// The local date of `t` in `tz`.
fn date(tz: &TimeZone, t: u64) -> Date {
    let ts = Timestamp::from_millisecond(i64::try_from(t).expect("ms")).expect("instant");
    tz.to_datetime(ts).date()
}

fn calendar(l: LimitSpec, zone: &str) -> LimitSpec {
    LimitSpec {
        calendar: Some(Calendar::new(zone).expect("a known zone")),
        ..l
    }
}

pub async fn calendar_days_follow_local_midnight_and_dst<S: Store>(env: &Env<S>) {
    let zone = "America/New_York";
    let tz = TimeZone::get(zone).expect("zone");
    // The next DST change from now: its local day lasts 23 or 25 hours.
    let now = Timestamp::from_millisecond(env.now() as i64).expect("now");
    let change = tz
        .following(now)
        .next()
        .expect("New York changes its clocks");
    let day = date(&tz, ms(change.timestamp()));
    let (start, end) = (
        midnight(&tz, day),
        midnight(&tz, day.tomorrow().expect("date")),
    );
    let after = midnight(&tz, day.checked_add(2.days()).expect("date"));
    assert!(
        end - start == 23 * HOUR || end - start == 25 * HOUR,
        "{day}: {} h",
        (end - start) / HOUR
    );
    let tag = env.tag("dst-day");
    let l = calendar(limit(FixedWindow, 3, Day), zone);
    env.set(start + 1000);
    let left = end - start - 1000;
    for i in 0..3 {
        assert_eq!(env.hit(tag, &l, 1).await, ok(2 - i, left, i));
    }
    // Over limit until the next local midnight (overdraft: the denied hit counts too).
    assert_eq!(env.hit(tag, &l, 1).await, denied(left, Some(left), 3));
    env.set(end - 1);
    assert_eq!(env.hit(tag, &l, 0).await, denied(1, Some(1), 4));
    env.set(end);
    assert_eq!(env.hit(tag, &l, 1).await, ok(2, after - end, 0));
}

pub async fn calendar_month_in_kolkata_counts_a_30_billion_budget<S: Store>(env: &Env<S>) {
    let zone = "Asia/Kolkata";
    let tz = TimeZone::get(zone).expect("zone");
    let first = date(&tz, env.now()).first_of_month();
    let next = first.checked_add(1.month()).expect("date");
    let (start, end) = (
        midnight(&tz, next),
        midnight(&tz, next.checked_add(1.month()).expect("date")),
    );
    let after = midnight(&tz, next.checked_add(2.months()).expect("date"));
    const BUDGET: u64 = 30_000_000_000;
    let tag = env.tag("kolkata-month");
    // rate_limit's fixed window: overdraft on, so a report larger than what is left is charged.
    let l = calendar(limit(FixedWindow, BUDGET, Month), zone);
    env.set(start + 1000);
    let left = end - start - 1000;
    // The check at arrival costs 0; the tokens come at stream end.
    assert_eq!(env.hit(tag, &l, 0).await, ok(BUDGET, left, 0));
    assert_eq!(env.hit(tag, &l, BUDGET - 1).await, ok(1, left, 0));
    assert_eq!(
        env.hit(tag, &l, 5).await,
        denied(left, Some(left), BUDGET - 1)
    );
    assert_eq!(
        env.hit(tag, &l, 0).await,
        denied(left, Some(left), BUDGET + 4)
    );
    // Not a second before the local month ends (18:30 UTC the day before the 1st).
    env.set(end - 1);
    assert_eq!(env.hit(tag, &l, 0).await, denied(1, Some(1), BUDGET + 4));
    env.set(end);
    assert_eq!(env.hit(tag, &l, 7).await, ok(BUDGET - 7, after - end, 0));
}

pub async fn calendar_sliding_window_weighs_the_previous_period<S: Store>(env: &Env<S>) {
    let tz = TimeZone::UTC;
    let d0 = date(&tz, env.now()).tomorrow().expect("date");
    let [s0, s1, s2] = [0, 1, 2].map(|i| midnight(&tz, d0.checked_add(i.days()).expect("date")));
    let tag = env.tag("sliding-day");
    // Four sub-windows of six hours per day.
    let l = LimitSpec {
        buckets: 4,
        ..calendar(overdraft(limit(SlidingWindow, 10, Day), false), "UTC")
    };
    // 8 hits in day 0's second sub-window (06:00-12:00), counted for B + 1 = 5 sub-windows:
    // until day 1, 12:00.
    env.set(s0 + 7 * HOUR);
    for i in 0..8 {
        assert_eq!(
            env.hit(tag, &l, 1).await,
            ok(9 - i, s1 + 12 * HOUR - env.now(), i)
        );
    }
    // Day 1, 07:00: yesterday's 06:00-12:00 has not been repeated yet, and still counts.
    env.set(s1 + 7 * HOUR);
    assert_eq!(
        env.hit(tag, &l, 2).await,
        ok(0, s2 + 12 * HOUR - env.now(), 8)
    );
    // The next hit passes once that sub-window leaves, at 12:00.
    assert_eq!(
        env.hit(tag, &l, 1).await,
        denied(s2 + 12 * HOUR - env.now(), Some(5 * HOUR), 10)
    );
    env.set(s1 + 12 * HOUR);
    assert_eq!(
        env.hit(tag, &l, 1).await,
        ok(7, s2 + 18 * HOUR - env.now(), 2)
    );
}

pub async fn calendar_weeks_start_on_monday_and_state_is_their_own<S: Store>(env: &Env<S>) {
    let tz = TimeZone::get("Europe/Paris").expect("zone");
    let today = date(&tz, env.now());
    // The Monday after today.
    let back = i64::from(today.weekday().to_monday_zero_offset());
    let monday = today.checked_add((7 - back).days()).expect("date");
    let (start, end) = (
        midnight(&tz, monday),
        midnight(&tz, monday.checked_add(7.days()).expect("date")),
    );
    let tag = env.tag("week");
    let week = calendar(limit(FixedWindow, 2, Week), "Europe/Paris");
    let plain = limit(FixedWindow, 2, Week);
    env.set(start + 1000);
    assert_eq!(env.hit(tag, &week, 2).await, ok(0, end - env.now(), 0));
    // The same descriptor's 7-day epoch-aligned window is another state entirely.
    assert!(env.hit(tag, &plain, 1).await.allowed);
    assert_eq!(
        env.hit(tag, &week, 1).await,
        denied(end - env.now(), Some(end - env.now()), 2)
    );
}
