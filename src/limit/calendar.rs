//! Calendar windows (`calendar: {time_zone: …}` in a rule): a limit's periods are the
//! calendar's days (from local midnight), ISO weeks (from Monday), months or years in an IANA
//! time zone, DST-correct, instead of epoch-aligned windows of a fixed length.
//! ([`Calendar`]: the zone; [`Periods`]: the boundaries around an instant, as both stores
//! use them, `docs/explanation/algorithms.md` "Calendar windows".)
//!
//! Periods are numbered from 1900-01-01 (a Monday, so a week's number is its days' over 7) in
//! the zone: day `d` is the `d`-th local date, month `(y − 1900)·12 + m − 1`, year `y − 1900`;
//! with `unit_multiplier` `M`, period `p` is units `p·M … p·M + M − 1` (months by 3 are
//! quarters from January). A period starts at the first instant of its first local date
//! (where midnight is skipped, the first instant after the gap; where it repeats, the first).
//!
//! Redis scripts cannot hold a time zone database, so the boundaries are computed here, by
//! this instance's clock, and sent: [`Periods`] holds the five boundaries of four periods (the
//! one before the instant's, its own and the two after), and the store picks the one holding
//! its own time (Redis `TIME`), so instances with skewed clocks, or in other zones, count one
//! period as long as they are less than a period apart.

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use parking_lot::Mutex;

use super::Unit;

/// Latest instant periods are computed for (9000-01-01T00:00:00Z): jiff's dates end at year
/// 9999, and a clock this far ahead is wrong anyway; later instants count as this one.
const LAST_MS: i64 = 221_845_392_000_000;

/// Days from 1900-01-01 to 1970-01-01.
const DAYS_1900_TO_EPOCH: i64 = 25_567;

/// A limit's calendar: an IANA time zone, resolved from jiff's bundled database (no system
/// files), and the periods last computed for it. Cheap to clone (shared).
#[derive(Clone)]
pub struct Calendar(Arc<Inner>);

struct Inner {
    /// The zone's name as the database spells it (`Asia/Kolkata`): part of the state
    /// identity, so `asia/kolkata` and `Asia/Kolkata` share state.
    name: Box<str>,
    tz: TimeZone,
    /// The last [`Periods`] computed, with the unit and multiplier they are for: reused
    /// while the instant asked about stays in their middle period (every check between two
    /// boundaries), so a check costs one lock, not ten zone conversions.
    last: Mutex<Option<(Unit, u32, Periods)>>,
}

impl Calendar {
    /// The calendar of `time_zone` (an IANA name, case-insensitive), or `None` when jiff's
    /// bundled database does not know it.
    pub fn new(time_zone: &str) -> Option<Calendar> {
        let tz = TimeZone::get(time_zone).ok()?;
        let name = tz.iana_name().unwrap_or(time_zone).into();
        Some(Calendar(Arc::new(Inner {
            name,
            tz,
            last: Mutex::new(None),
        })))
    }

    /// The calendar of UTC (`calendar: {}`).
    pub fn utc() -> Calendar {
        Calendar(Arc::new(Inner {
            name: "UTC".into(),
            tz: TimeZone::UTC,
            last: Mutex::new(None),
        }))
    }

    /// The zone's name (`Asia/Kolkata`).
    pub fn zone(&self) -> &str {
        &self.0.name
    }

    /// The periods of `unit × multiplier` around `now_ms`: the one holding it is the second
    /// (`bounds[1] ≤ now < bounds[2]`).
    pub fn periods(&self, unit: Unit, multiplier: u32, now_ms: u64) -> Periods {
        let m = multiplier.max(1);
        let mut last = self.0.last.lock();
        if let Some((u, lm, p)) = *last
            && u == unit
            && lm == m
            && p.bounds[1] <= now_ms
            && now_ms < p.bounds[2]
        {
            return p;
        }
        let p = self.compute(unit, m, now_ms);
        *last = Some((unit, m, p));
        p
    }

    fn compute(&self, unit: Unit, m: u32, now_ms: u64) -> Periods {
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX).min(LAST_MS);
        let local = Timestamp::from_millisecond(now)
            .map(|t| self.0.tz.to_datetime(t).date())
            .unwrap_or(Date::MIN);
        let p = unit_index(unit, local).div_euclid(i64::from(m));
        let mut bounds = [0u64; 5];
        for (i, b) in bounds.iter_mut().enumerate() {
            let u = (p - 1 + i as i64) * i64::from(m);
            *b = self.start_ms(unit, u);
        }
        // Every boundary is strictly after the one before, and the middle period holds
        // now_ms. Only a zone whose rules defeat that (none known) or an instant beyond
        // LAST_MS falls back to periods of the unit's nominal length around now_ms.
        let sound =
            bounds.windows(2).all(|w| w[0] < w[1]) && bounds[1] <= now_ms && now_ms < bounds[2];
        if !sound {
            let w = unit.millis().saturating_mul(u64::from(m));
            let start = now_ms - now_ms % w;
            for (i, b) in bounds.iter_mut().enumerate() {
                *b = start.saturating_add(i as u64 * w).saturating_sub(w);
            }
        }
        Periods {
            first: u64::try_from(p - 1).unwrap_or(0),
            bounds,
        }
    }

    /// The first instant (ms since the epoch, 0 before it) of unit number `u` of `unit` in
    /// this zone.
    fn start_ms(&self, unit: Unit, u: i64) -> u64 {
        let date = match unit {
            Unit::Week => date_of_day(u * 7),
            Unit::Month => {
                let (y, mo) = (1900 + u.div_euclid(12), u.rem_euclid(12) + 1);
                ymd(y, mo, 1)
            }
            Unit::Year => ymd(1900 + u, 1, 1),
            // Config allows calendars for day, week, month and year only; anything else
            // counts in days.
            Unit::Day | Unit::Second | Unit::Minute | Unit::Hour => date_of_day(u),
        };
        let at = DateTime::from(date);
        // Compatible disambiguation: a skipped midnight starts the day at the first instant
        // after the gap; a repeated one at its first occurrence.
        self.0
            .tz
            .to_timestamp(at)
            .map(|t| u64::try_from(t.as_millisecond()).unwrap_or(0))
            .unwrap_or(0)
    }
}

/// The number of `date`'s unit (see the module comment).
fn unit_index(unit: Unit, date: Date) -> i64 {
    let (y, m) = (i64::from(date.year()), i64::from(date.month()));
    match unit {
        Unit::Year => y - 1900,
        Unit::Month => (y - 1900) * 12 + m - 1,
        Unit::Week => day_index(date).div_euclid(7),
        Unit::Day | Unit::Second | Unit::Minute | Unit::Hour => day_index(date),
    }
}

/// Days from 1900-01-01 to `date` (Howard Hinnant's `days_from_civil`).
fn day_index(date: Date) -> i64 {
    let (y, m, d) = (
        i64::from(date.year()),
        i64::from(date.month()),
        i64::from(date.day()),
    );
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 + DAYS_1900_TO_EPOCH
}

/// The date `days` after 1900-01-01.
fn date_of_day(days: i64) -> Date {
    let (y, m, d) = civil_from_days(days - DAYS_1900_TO_EPOCH);
    ymd(y, m, d)
}

/// The proleptic Gregorian (year, month, day) `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`): the calendar's dates, and the one way sluice names a day (a
/// response's timestamps printed as JSON too).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A date, clamped to jiff's range (only reached by instants beyond [`LAST_MS`]).
fn ymd(y: i64, m: i64, d: i64) -> Date {
    let y = i16::try_from(y.clamp(-9999, 9999)).unwrap_or(9999);
    let m = i8::try_from(m.clamp(1, 12)).unwrap_or(1);
    let d = i8::try_from(d.clamp(1, 31)).unwrap_or(1);
    Date::new(y, m, d).unwrap_or(Date::MIN)
}

impl PartialEq for Calendar {
    fn eq(&self, other: &Calendar) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Calendar {}

impl std::hash::Hash for Calendar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl fmt::Debug for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Calendar({})", self.0.name)
    }
}

/// Five boundaries of four consecutive periods (ms since the epoch, ascending): period
/// `first + i` is `[bounds[i], bounds[i + 1])`. What a store needs to place an instant in its
/// period, and a `sliding_window`'s sub-windows in theirs (`docs/explanation/algorithms.md`
/// "Calendar windows").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Periods {
    /// The number of the first period (see the module comment).
    pub first: u64,
    pub bounds: [u64; 5],
}

impl Periods {
    /// Which of the first three periods holds `t` (`bounds[i] ≤ t < bounds[i + 1]`): the
    /// periods a store accepts its clock in (the fourth is only there to end the third's
    /// sub-windows).
    pub fn position(&self, t: u64) -> Option<usize> {
        (0..3).find(|&i| self.bounds[i] <= t && t < self.bounds[i + 1])
    }

    /// The period holding `t` as `(start, end)`; the nearest of the first three when none
    /// does (a clock a period or more away from the one that computed them).
    pub fn period(&self, t: u64) -> (u64, u64) {
        let i = self
            .position(t)
            .unwrap_or(if t < self.bounds[0] { 0 } else { 2 });
        (self.bounds[i], self.bounds[i + 1])
    }

    /// The end of the period starting at `start`: the next boundary when `start` is one of
    /// the first four, else `start` plus the length of the period holding `t` (a window
    /// stored by a clock that has since gone back by more than a period).
    pub fn end_of(&self, start: u64, t: u64) -> u64 {
        match (0..4).find(|&i| self.bounds[i] == start) {
            Some(i) => self.bounds[i + 1],
            None => {
                let (s, e) = self.period(t);
                start.saturating_add(e - s)
            }
        }
    }

    /// `idx(t)` of a `sliding_window` of `b` sub-windows per period: `p·b + floor((t −
    /// start(p))·b / len(p))` for the period `p` holding `t` (see [`Periods::period`]).
    pub fn idx(&self, t: u64, b: u64) -> u64 {
        let i = self
            .position(t)
            .unwrap_or(if t < self.bounds[0] { 0 } else { 2 });
        // (A period is never empty; the guard only keeps any input from dividing by 0.)
        let s = u128::from(self.bounds[i]);
        let e = u128::from(self.bounds[i + 1]).max(s + 1);
        let off = u128::from(t).clamp(s, e - 1) - s;
        let k = off * u128::from(b) / (e - s);
        let p = u128::from(self.first) + i as u128;
        u64::try_from(p * u128::from(b) + k).unwrap_or(u64::MAX)
    }

    /// `start(j)` of sub-window `j` (`b` per period): `start(p) + ceil(k·len(p) / b)` with
    /// `p = floor(j/b)`, `k = j mod b`; before the first period its start, from the fifth
    /// boundary on that boundary (only reached by a clock gone back by more than a period).
    pub fn start(&self, j: u128, b: u64) -> u128 {
        let b = u128::from(b.max(1));
        let (p, k) = (j / b, j % b);
        let Some(r) = p.checked_sub(u128::from(self.first)) else {
            return u128::from(self.bounds[0]);
        };
        if r > 4 || (r == 4 && k > 0) {
            return u128::from(self.bounds[4]);
        }
        let r = r as usize;
        if k == 0 {
            return u128::from(self.bounds[r]);
        }
        let (s, e) = (u128::from(self.bounds[r]), u128::from(self.bounds[r + 1]));
        s + (k * (e - s)).div_ceil(b)
    }
}

#[cfg(test)]
mod tests;
