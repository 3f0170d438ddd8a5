//! One `rate_limit` (or `rate_limits` entry) → a [`LimitSpec`]: their unit and `replaces`
//! checks first, with their messages, then the extension fields (`docs/explanation/algorithms.md`).

use std::sync::Arc;

use super::raw::{RawCalendar, RawLimit};
use super::yaml::Seg;
use crate::limit::algorithm::lmax;
use crate::limit::{
    Algorithm, BUCKETS_RANGE, Calendar, DEFAULT_BUCKETS, LimitSpec, MAX_WINDOW_SECONDS,
    SLIDING_LOG_MAX, Unit,
};

/// Most entries a `rate_limits` list may hold (`LimitSpec::slot` is a `u8`, and every entry
/// costs a state key per request).
pub(super) const MAX_RATE_LIMITS: usize = 16;

/// A validation error: the message (without the file prefix) and where it points,
/// relative to the limit's own map.
#[derive(Debug)]
pub(super) struct Problem {
    pub msg: String,
    pub at: Vec<Seg>,
}

impl Problem {
    pub fn new(msg: impl Into<String>, at: &[Seg]) -> Problem {
        Problem {
            msg: msg.into(),
            at: at.to_vec(),
        }
    }
}

pub(super) enum Compiled {
    Unlimited,
    Limit(LimitSpec),
}

/// Where a limit is written: it decides the default of `overdraft`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// `rate_limit`: the algorithm's default (their fixed window counts denied hits).
    Single,
    /// An entry of `rate_limits`: `false` unless set, so the limits are all-or-nothing (a
    /// hit denied by one limit does not use up the others).
    List,
}

/// `own_names`: every limit name of the descriptor (their check compares `replaces` with
/// the descriptor's own `name`; with `rate_limits` any of its names counts as its own).
pub(super) fn compile(
    raw: &RawLimit,
    slot: u8,
    place: Place,
    own_names: &[&str],
) -> Result<Compiled, Problem> {
    let unit = Unit::parse(&raw.unit);
    if raw.unlimited {
        if unit.is_some() {
            return Err(Problem::new(
                "should not specify rate limit unit when unlimited",
                &[Seg::Key("unit")],
            ));
        }
    } else if unit.is_none() {
        return Err(Problem::new(
            format!("invalid rate limit unit '{}'", raw.unit),
            &[Seg::Key("unit")],
        ));
    }
    for (i, name) in raw.replaces.iter().enumerate() {
        let at = [Seg::Key("replaces"), Seg::Index(i)];
        if name.is_empty() {
            return Err(Problem::new("should not have an empty replaces entry", &at));
        }
        if own_names.contains(&name.as_str()) {
            return Err(Problem::new(
                "replaces should not contain name of same descriptor",
                &at,
            ));
        }
    }
    let Some(unit) = unit.filter(|_| !raw.unlimited) else {
        return unlimited(raw);
    };
    extended(raw, unit, slot, place).map(Compiled::Limit)
}

/// Extension fields mean nothing on an unlimited limit: reject them rather than ignore.
fn unlimited(raw: &RawLimit) -> Result<Compiled, Problem> {
    let present = [
        ("algorithm", raw.algorithm.is_some()),
        ("burst", raw.burst.is_some()),
        ("buckets", raw.buckets.is_some()),
        ("overdraft", raw.overdraft.is_some()),
        ("penalty_seconds", raw.penalty_seconds.is_some()),
        ("unit_multiplier", raw.unit_multiplier.is_some()),
        ("calendar", raw.calendar.is_some()),
    ];
    match present.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(Problem::new(
            format!("should not specify {field} when unlimited"),
            &[Seg::Key(field)],
        )),
        None => Ok(Compiled::Unlimited),
    }
}

fn valid_algorithms() -> String {
    Algorithm::ALL.map(Algorithm::name).join(", ")
}

/// `unit_multiplier`: at least 1, and a window of at most [`MAX_WINDOW_SECONDS`].
fn multiplier(raw: &RawLimit, unit: Unit) -> Result<u32, Problem> {
    let at = [Seg::Key("unit_multiplier")];
    match raw.unit_multiplier {
        None => Ok(1),
        Some(0) => Err(Problem::new("unit_multiplier must be at least 1", &at)),
        Some(m) if unit.seconds() * u64::from(m) > MAX_WINDOW_SECONDS => {
            let unit = unit.name().to_ascii_lowercase();
            Err(Problem::new(
                format!(
                    "unit_multiplier {m} makes a window of {m} {unit}s, longer than the maximum of 100 years ({MAX_WINDOW_SECONDS} seconds)"
                ),
                &at,
            ))
        }
        Some(m) => Ok(m),
    }
}

/// `calendar`: the zone (empty: UTC), for a unit the calendar has and an algorithm whose
/// windows are periods.
fn calendar(raw: &RawCalendar, unit: Unit, algorithm: Algorithm) -> Result<Calendar, Problem> {
    let at = [Seg::Key("calendar")];
    match unit {
        Unit::Day | Unit::Week | Unit::Month | Unit::Year => {}
        Unit::Second | Unit::Minute | Unit::Hour => {
            return Err(Problem::new(
                format!(
                    "calendar is only valid with unit day, week, month or year, not {}",
                    unit.name().to_ascii_lowercase()
                ),
                &at,
            ));
        }
    }
    let why = match algorithm {
        Algorithm::FixedWindow | Algorithm::SlidingWindow => None,
        Algorithm::SlidingLog => Some("its window trails each hit by a fixed length"),
        Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra => {
            Some("it refills continuously, with no periods to follow")
        }
    };
    if let Some(why) = why {
        return Err(Problem::new(
            format!(
                "calendar is only valid with algorithm fixed_window or sliding_window, not {algorithm} ({why})"
            ),
            &at,
        ));
    }
    if raw.time_zone.is_empty() {
        return Ok(Calendar::utc());
    }
    Calendar::new(&raw.time_zone).ok_or_else(|| {
        Problem::new(
            format!(
                "unknown time zone '{}' in calendar (an IANA name, such as 'Asia/Kolkata' or 'America/New_York')",
                raw.time_zone
            ),
            &[Seg::Key("calendar"), Seg::Key("time_zone")],
        )
    })
}

fn extended(raw: &RawLimit, unit: Unit, slot: u8, place: Place) -> Result<LimitSpec, Problem> {
    let rpu = raw.requests_per_unit;
    let unit_multiplier = multiplier(raw, unit)?;
    // The window's length and name before the spec exists (same arithmetic as LimitSpec's).
    let window = LimitSpec {
        unit_multiplier,
        ..LimitSpec::fixed_window(rpu, unit)
    };
    let algorithm = match raw.algorithm.as_deref() {
        None => Algorithm::FixedWindow,
        Some(name) => Algorithm::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Problem::new(
                    format!("invalid algorithm '{name}' (valid: {})", valid_algorithms()),
                    &[Seg::Key("algorithm")],
                )
            })?,
    };
    let burst = match raw.burst {
        Some(_) if !algorithm.has_burst() => {
            return Err(Problem::new(
                format!(
                    "burst is only valid with algorithm token_bucket, leaky_bucket or gcra, not {algorithm}"
                ),
                &[Seg::Key("burst")],
            ));
        }
        Some(0) => {
            return Err(Problem::new(
                "burst must be at least 1",
                &[Seg::Key("burst")],
            ));
        }
        Some(b) => b,
        None => rpu,
    };
    let buckets = match raw.buckets {
        Some(_) if algorithm != Algorithm::SlidingWindow => {
            return Err(Problem::new(
                format!("buckets is only valid with algorithm sliding_window, not {algorithm}"),
                &[Seg::Key("buckets")],
            ));
        }
        Some(b) if !BUCKETS_RANGE.contains(&b) => {
            return Err(Problem::new(
                format!(
                    "buckets must be between {} and {}, found {b}",
                    BUCKETS_RANGE.start(),
                    BUCKETS_RANGE.end()
                ),
                &[Seg::Key("buckets")],
            ));
        }
        Some(b) => b,
        None if algorithm == Algorithm::SlidingWindow => DEFAULT_BUCKETS,
        None => 0,
    };
    let overdraft = raw.overdraft.unwrap_or(match place {
        Place::Single => algorithm.default_overdraft(),
        Place::List => false,
    });
    if overdraft && algorithm == Algorithm::SlidingLog {
        return Err(Problem::new(
            "overdraft is not supported with algorithm sliding_log (the log would grow without bound)",
            &[Seg::Key("overdraft")],
        ));
    }
    if algorithm == Algorithm::SlidingLog && rpu > SLIDING_LOG_MAX {
        return Err(Problem::new(
            format!(
                "requests_per_unit {rpu} is above the sliding_log maximum of {SLIDING_LOG_MAX} (use sliding_window for large limits)"
            ),
            &[Seg::Key("requests_per_unit")],
        ));
    }
    let calendar = match &raw.calendar {
        Some(c) => Some(calendar(c, unit, algorithm)?),
        None => None,
    };
    if algorithm.has_burst() {
        if rpu == 0 {
            // It is the refill/leak rate: zero would never refill and divide by zero.
            return Err(Problem::new(
                format!(
                    "requests_per_unit must be at least 1 with algorithm {algorithm} (it is the refill rate)"
                ),
                &[Seg::Key("requests_per_unit")],
            ));
        }
        // docs/explanation/algorithms.md's precondition `Cs ≤ Lmax`, `Lmax = min(2^53, 2^52·R)`: with
        // R ≥ 2 it is `burst × unit ≤ 2^53`, with R = 1 `burst × unit ≤ 2^52` (the TAT of a
        // saturated gcra, `now + Lmax/R`, must stay exact in Lua's doubles).
        let scaled = u128::from(burst) * u128::from(window.window_ms());
        if scaled > lmax(rpu) {
            let field = if raw.burst.is_some() {
                "burst"
            } else {
                "requests_per_unit"
            };
            let unit = window.window_name();
            let msg = if rpu == 1 {
                format!(
                    "burst {burst} per {unit} is too large for algorithm {algorithm} with requests_per_unit 1: burst × unit must be at most 2^52 request-milliseconds at that rate, 2^53 from requests_per_unit 2 (lower burst, use a shorter unit or raise requests_per_unit)"
                )
            } else {
                format!(
                    "burst {burst} per {unit} is too large for algorithm {algorithm}: burst × unit must be at most 2^53 request-milliseconds (lower burst or use a shorter unit)"
                )
            };
            return Err(Problem::new(msg, &[Seg::Key(field)]));
        }
    }
    Ok(LimitSpec {
        requests_per_unit: rpu,
        unit,
        unit_multiplier,
        algorithm,
        burst: if algorithm.has_burst() { burst } else { rpu },
        buckets,
        overdraft,
        penalty_ms: raw.penalty_seconds.map_or(0, |s| u64::from(s) * 1000),
        name: (!raw.name.is_empty()).then(|| Arc::from(raw.name.as_str())),
        slot,
        calendar,
    })
}
