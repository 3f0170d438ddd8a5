//! The window of a limit (`unit × unit_multiplier`): its length, its place in the state
//! identity, and how it is reported in a `current_limit`.

use super::{LimitSpec, MAX_WINDOW_SECONDS, Unit};

fn every(rpu: u64, unit: Unit, unit_multiplier: u32) -> LimitSpec {
    LimitSpec {
        unit_multiplier,
        ..LimitSpec::fixed_window(rpu, unit)
    }
}

#[test]
fn the_window_is_unit_times_multiplier() {
    assert_eq!(every(1, Unit::Minute, 1).window_ms(), 60_000);
    assert_eq!(every(1, Unit::Minute, 5).window_ms(), 300_000);
    assert_eq!(every(1, Unit::Hour, 6).window_seconds(), 21_600);
    // 0 never comes from config; it reads as 1 rather than a window of 0.
    assert_eq!(every(1, Unit::Second, 0).window_ms(), 1000);
    assert_eq!(
        every(1, Unit::Year, 100).window_seconds(),
        MAX_WINDOW_SECONDS
    );
    assert_eq!(every(1, Unit::Minute, 1).window_name(), "minute");
    assert_eq!(every(1, Unit::Minute, 5).window_name(), "5 minutes");
}

#[test]
fn the_window_length_is_part_of_the_state_identity() {
    let one = every(100, Unit::Minute, 1).identity();
    let five = every(100, Unit::Minute, 5).identity();
    assert_ne!(one, five, "changing the multiplier starts fresh state");
    // Keys written before unit_multiplier existed keep their names.
    assert_eq!(one.suffix(), ":1:60:0:0");
    assert_eq!(five.suffix(), ":1:300:0:0");
    // One length, one state, however it is written.
    assert_eq!(
        every(7, Unit::Minute, 60).identity(),
        every(7, Unit::Hour, 1).identity()
    );
    // The limit itself is still not part of it.
    assert_eq!(every(1, Unit::Minute, 5).identity(), five);
}

#[test]
fn current_limit_reports_the_exact_rate() {
    let cases = [
        // A single unit: as configured.
        ((100, Unit::Minute, 1), (100, Unit::Minute)),
        // A window that is a unit: that unit, same count.
        ((100, Unit::Minute, 60), (100, Unit::Hour)),
        ((5, Unit::Day, 7), (5, Unit::Week)),
        ((5, Unit::Day, 30), (5, Unit::Month)),
        ((5, Unit::Day, 365), (5, Unit::Year)),
        // Otherwise the smallest unit from the configured one up where the rate is whole.
        ((100, Unit::Minute, 5), (20, Unit::Minute)),
        ((1000, Unit::Hour, 6), (4000, Unit::Day)),
        ((1, Unit::Minute, 5), (12, Unit::Hour)),
        ((100, Unit::Week, 2), (50, Unit::Week)),
        ((0, Unit::Minute, 5), (0, Unit::Minute)),
        // No unit makes 100 per 11 days whole: rounded down in the configured unit, and
        // never reported as 0 when something is allowed.
        ((100, Unit::Day, 11), (9, Unit::Day)),
        ((1, Unit::Day, 11), (1, Unit::Day)),
    ];
    for ((rpu, unit, m), want) in cases {
        assert_eq!(
            every(rpu, unit, m).reported(),
            want,
            "{rpu} per {m} × {unit}"
        );
    }
}
