//! The extension fields: defaults, compiled specs, and one fixture per error.

use super::{build, find, load};
use crate::limit::{Algorithm, LimitSpec, Unit};

fn spec(c: &crate::config::RateLimitConfig, key: &str) -> Vec<LimitSpec> {
    find(c, "ext", &[(key, "")])
        .map(|m| m.rule.limits.to_vec())
        .unwrap_or_default()
}

#[test]
fn compiled_specs() {
    let c = load(&["extensions.yaml"]);
    let s = |key| spec(&c, key);
    let one = |key| s(key).first().cloned().unwrap_or_else(|| panic!("{key}"));
    let fixed = one("fixed");
    assert_eq!(fixed, LimitSpec::fixed_window(5, Unit::Second));
    let sliding = one("sliding");
    assert_eq!(
        (
            sliding.algorithm,
            sliding.buckets,
            sliding.burst,
            sliding.overdraft
        ),
        (Algorithm::SlidingWindow, 20, 100, false)
    );
    assert_eq!(one("sliding_default").buckets, 10);
    let log = one("log");
    assert_eq!(
        (log.algorithm, log.buckets, log.overdraft),
        (Algorithm::SlidingLog, 0, false)
    );
    let token = one("token");
    assert_eq!(
        (token.algorithm, token.burst, token.buckets, token.overdraft),
        (Algorithm::TokenBucket, 40, 0, false)
    );
    let leaky = one("leaky");
    assert_eq!((leaky.algorithm, leaky.burst), (Algorithm::LeakyBucket, 10));
    let gcra = one("gcra");
    assert_eq!(
        (gcra.algorithm, gcra.burst, gcra.overdraft, gcra.penalty_ms),
        (Algorithm::Gcra, 5, true, 30_000)
    );
    assert!(!one("no_overdraft").overdraft);
    let multi = s("multi");
    assert_eq!(multi.len(), 2);
    assert_eq!(
        (multi[0].slot, multi[0].algorithm, multi[0].burst),
        (0, Algorithm::TokenBucket, 20)
    );
    assert_eq!(
        (multi[1].slot, multi[1].unit, multi[1].requests_per_unit),
        (1, Unit::Day, 10_000)
    );
    // Inside rate_limits a fixed window does not overdraft unless it says so: a hit denied
    // by the burst limit must not use up the daily quota.
    assert_eq!(
        (multi[1].algorithm, multi[1].overdraft),
        (Algorithm::FixedWindow, false)
    );
    let five = one("five_minutes");
    assert_eq!(
        (five.unit, five.unit_multiplier, five.window_ms()),
        (Unit::Minute, 5, 300_000)
    );
    assert_eq!(fixed.unit_multiplier, 1, "the default");
    let six = one("six_hours");
    assert_eq!((six.window_seconds(), six.burst), (21_600, 1000));
    let rule = find(&c, "ext", &[("multi", "")]).map(|m| m.rule);
    assert!(rule.is_some_and(
        |r| r.name.as_deref() == Some("burst") && r.names().eq(["burst", "burst", "daily"])
    ));
    assert!(
        rule.is_some_and(|r| r.replaces.len() == 1 && &*r.replaces[0] == "other" && !r.unlimited)
    );
}

#[test]
fn extension_errors() {
    let algorithms = "fixed_window, sliding_window, sliding_log, token_bucket, leaky_bucket, gcra";
    let cases: &[(&str, &str)] = &[
        (
            "bad_algorithm",
            &format!("invalid algorithm 'fixed' (valid: {algorithms})"),
        ),
        (
            "burst_on_window",
            "burst is only valid with algorithm token_bucket, leaky_bucket or gcra, not fixed_window",
        ),
        ("burst_zero", "burst must be at least 1"),
        (
            "buckets_wrong_algorithm",
            "buckets is only valid with algorithm sliding_window, not token_bucket",
        ),
        (
            "buckets_range",
            "buckets must be between 2 and 1000, found 1001",
        ),
        (
            "log_overdraft",
            "overdraft is not supported with algorithm sliding_log (the log would grow without bound)",
        ),
        (
            "log_too_large",
            "requests_per_unit 10001 is above the sliding_log maximum of 10000 (use sliding_window for large limits)",
        ),
        (
            "scaled_too_large",
            "burst 300000 per year is too large for algorithm token_bucket with requests_per_unit 1: burst × unit must be at most 2^52 request-milliseconds at that rate, 2^53 from requests_per_unit 2 (lower burst, use a shorter unit or raise requests_per_unit)",
        ),
        (
            "bucket_zero_rate",
            "requests_per_unit must be at least 1 with algorithm leaky_bucket (it is the refill rate)",
        ),
        (
            "both_limits",
            "rate_limit and rate_limits cannot both be set (use one rate_limits list)",
        ),
        ("empty_limits", "rate_limits must not be empty"),
        (
            "too_many_limits",
            "rate_limits cannot have more than 16 entries, found 17",
        ),
        (
            "unlimited_in_list",
            "rate_limits[0]: unlimited is not allowed in rate_limits (use rate_limit)",
        ),
        (
            "list_bad_unit",
            "rate_limits[1]: invalid rate limit unit 'fortnight'",
        ),
        (
            "list_replaces_sibling",
            "rate_limits[1]: replaces should not contain name of same descriptor",
        ),
        (
            "unlimited_with_algorithm",
            "should not specify algorithm when unlimited",
        ),
        (
            "penalty_negative",
            "error loading config file: 'penalty_seconds' must be an integer between 0 and 4294967295, found '-5'",
        ),
        (
            "rpu_not_integer",
            "error loading config file: 'requests_per_unit' must be an integer between 0 and 9007199254740992, found 'lots'",
        ),
        (
            "wrong_level",
            "config error, key 'unit' is not allowed in a descriptor (it belongs in rate_limit)",
        ),
        ("multiplier_zero", "unit_multiplier must be at least 1"),
        (
            "multiplier_too_large",
            "unit_multiplier 101 makes a window of 101 years, longer than the maximum of 100 years (3153600000 seconds)",
        ),
        (
            "multiplier_unlimited",
            "should not specify unit_multiplier when unlimited",
        ),
        (
            "multiplier_not_integer",
            "error loading config file: 'unit_multiplier' must be an integer between 0 and 4294967295, found 'five'",
        ),
        (
            "calendar_unknown_zone",
            "unknown time zone 'Mars/Olympus_Mons' in calendar (an IANA name, such as 'Asia/Kolkata' or 'America/New_York')",
        ),
        (
            "calendar_hour",
            "calendar is only valid with unit day, week, month or year, not hour",
        ),
        (
            "calendar_bucket",
            "calendar is only valid with algorithm fixed_window or sliding_window, not token_bucket (it refills continuously, with no periods to follow)",
        ),
        (
            "calendar_log",
            "calendar is only valid with algorithm fixed_window or sliding_window, not sliding_log (its window trails each hit by a fixed length)",
        ),
        (
            "calendar_unlimited",
            "should not specify calendar when unlimited",
        ),
        (
            "multiplier_scaled_too_large",
            "burst 300000 per 365 days is too large for algorithm token_bucket: burst × unit must be at most 2^53 request-milliseconds (lower burst or use a shorter unit)",
        ),
    ];
    for (name, want) in cases {
        let file = format!("ext_{name}.yaml");
        let got = match build(&[&file], false) {
            Ok(_) => panic!("{file} should fail"),
            Err(e) => e,
        };
        assert_eq!(got.len(), 1, "{file}: {got:?}");
        assert_eq!(got[0].to_string(), format!("{file}: {want}"));
        assert!(got[0].line.is_some(), "{file}: no line");
    }
}

#[test]
fn largest_exact_bucket_is_accepted() {
    // Cs ≤ Lmax = min(2^53, 2^52·R). From R = 2: 2^53 / 31_536_000_000 ms per year = 285_616.4…
    let ok = "domain: ext\ndescriptors:\n  - {key: k, rate_limit: {unit: year, requests_per_unit: 2, algorithm: gcra, burst: 285616}}\n";
    assert!(super::build_files(&[super::inline("x.yaml", ok)], false).is_ok());
    // R = 1: 2^52 / 31_536_000_000 = 142_808.2…
    let ok = "domain: ext\ndescriptors:\n  - {key: k, rate_limit: {unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: 142808}}\n";
    assert!(super::build_files(&[super::inline("x.yaml", ok)], false).is_ok());
    let zero = "domain: ext\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 0, algorithm: sliding_window}}\n";
    assert!(super::build_files(&[super::inline("x.yaml", zero)], false).is_ok());
    // The longest window: 100 years.
    let century = "domain: ext\ndescriptors:\n  - {key: k, rate_limit: {unit: year, unit_multiplier: 100, requests_per_unit: 1}}\n";
    assert!(super::build_files(&[super::inline("x.yaml", century)], false).is_ok());
    // The window algorithms have no scaled arithmetic: no such bound.
    let window = "domain: ext\ndescriptors:\n  - {key: k, rate_limit: {unit: year, requests_per_unit: 4000000000, algorithm: fixed_window}}\n";
    assert!(super::build_files(&[super::inline("x.yaml", window)], false).is_ok());
}

/// docs/explanation/algorithms.md's precondition `Cs ≤ Lmax` for the bucket algorithms, with
/// `Lmax = min(2^53, 2^52·R)`: one request-millisecond above the bound is rejected, naming
/// `burst` (or `requests_per_unit` when burst defaults to it), for each bucket algorithm.
#[test]
fn bucket_capacity_above_lmax_is_rejected() {
    let build = |alg: &str, rpu: u64, burst: Option<u64>| {
        let burst = burst.map(|b| format!(", burst: {b}")).unwrap_or_default();
        let yaml = format!(
            "domain: ext\ndescriptors:\n  - key: k\n    rate_limit: {{unit: year, requests_per_unit: {rpu}, algorithm: {alg}{burst}}}\n"
        );
        super::build_files(&[super::inline("x.yaml", &yaml)], false)
            .err()
            .map(|e| (e.len(), e[0].to_string(), e[0].line))
    };
    for alg in ["token_bucket", "leaky_bucket", "gcra"] {
        // R = 1: 142_808 years·ms fit under 2^52, 142_809 do not (though under 2^53).
        assert_eq!(build(alg, 1, Some(142_808)), None, "{alg}");
        let (n, msg, line) = build(alg, 1, Some(142_809)).expect("rejected");
        assert_eq!(n, 1);
        assert_eq!(
            msg,
            format!(
                "x.yaml: burst 142809 per year is too large for algorithm {alg} with requests_per_unit 1: burst × unit must be at most 2^52 request-milliseconds at that rate, 2^53 from requests_per_unit 2 (lower burst, use a shorter unit or raise requests_per_unit)"
            )
        );
        assert_eq!(line, Some(4), "{alg}: points at the limit");
        // The same burst at R = 2 is fine; from R = 2 the bound is 2^53.
        assert_eq!(build(alg, 2, Some(142_809)), None, "{alg}");
        assert_eq!(build(alg, 2, Some(285_616)), None, "{alg}");
        let (_, msg, _) = build(alg, 2, Some(285_617)).expect("rejected");
        assert_eq!(
            msg,
            format!(
                "x.yaml: burst 285617 per year is too large for algorithm {alg}: burst × unit must be at most 2^53 request-milliseconds (lower burst or use a shorter unit)"
            )
        );
        // burst defaults to requests_per_unit (R ≥ 2 here, so the bound is 2^53).
        let (_, msg, _) = build(alg, 285_617, None).expect("rejected");
        assert!(
            msg.starts_with("x.yaml: burst 285617 per year is too large"),
            "{msg}"
        );
    }
}

#[test]
fn budgets_go_to_2_to_the_53() {
    let yaml = "domain: ext\ndescriptors:\n  - {key: tokens, rate_limit: {unit: month, requests_per_unit: 30000000000}}\n  - {key: most, rate_limit: {unit: day, requests_per_unit: 9007199254740992, algorithm: sliding_window}}\n  - {key: bucket, rate_limit: {unit: second, requests_per_unit: 8589934592, algorithm: gcra}}\n";
    let c = super::build_files(&[super::inline("x.yaml", yaml)], false).expect("valid");
    let rpu = |key| spec(&c, key)[0].requests_per_unit;
    assert_eq!(rpu("tokens"), 30_000_000_000);
    assert_eq!(rpu("most"), 1 << 53);
    // A bucket's capacity is still held to burst × unit ≤ 2^53 request-ms: 2^33 per second.
    assert_eq!(spec(&c, "bucket")[0].burst, 1 << 33);
}

#[test]
fn calendars_name_their_zone_and_default_to_utc() {
    let yaml = "domain: ext\ndescriptors:\n  - key: kolkata\n    rate_limit: {unit: month, requests_per_unit: 30000000000, calendar: {time_zone: asia/kolkata}}\n  - key: utc\n    rate_limit: {unit: Day, requests_per_unit: 5, algorithm: sliding_window, calendar: {}}\n  - key: quarter\n    rate_limits:\n      - {unit: month, unit_multiplier: 3, requests_per_unit: 9, calendar: {time_zone: Europe/Paris}}\n  - key: none\n    rate_limit: {unit: month, requests_per_unit: 5, calendar: ~}\n";
    let c = super::build_files(&[super::inline("x.yaml", yaml)], false).expect("valid");
    let zone = |key| {
        spec(&c, key)[0]
            .calendar
            .as_ref()
            .map(|z| z.zone().to_owned())
    };
    assert_eq!(zone("kolkata").as_deref(), Some("Asia/Kolkata"));
    assert_eq!(zone("utc").as_deref(), Some("UTC"));
    assert_eq!(zone("quarter").as_deref(), Some("Europe/Paris"));
    assert_eq!(zone("none"), None);
    let k = &spec(&c, "kolkata")[0];
    assert_eq!(k.window_name(), "calendar month in Asia/Kolkata");
    assert_eq!(k.identity().suffix(), ":1:month@Asia/Kolkata:0:0");
    assert_eq!(
        spec(&c, "quarter")[0].identity().suffix(),
        ":1:3month@Europe/Paris:0:0"
    );
    // A calendar month is never the state of a 30-day month.
    let plain = LimitSpec::fixed_window(5, Unit::Month);
    assert_ne!(plain.identity(), k.identity());
    assert_ne!(plain.identity().window_key(), k.identity().window_key());
}

#[test]
fn a_calendar_error_names_its_line() {
    let yaml = "domain: ext\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: month\n      requests_per_unit: 5\n      calendar:\n        time_zone: Asia/Kolkatta\n";
    let e = super::build_files(&[super::inline("x.yaml", yaml)], false).expect_err("unknown zone");
    assert_eq!(
        e[0].to_string(),
        "x.yaml: unknown time zone 'Asia/Kolkatta' in calendar (an IANA name, such as 'Asia/Kolkata' or 'America/New_York')"
    );
    assert_eq!(e[0].line, Some(8), "the time_zone line");
    let misplaced = "domain: ext\ndescriptors:\n  - key: k\n    calendar: {time_zone: UTC}\n    rate_limit: {unit: day, requests_per_unit: 5}\n";
    let e =
        super::build_files(&[super::inline("x.yaml", misplaced)], false).expect_err("wrong level");
    assert_eq!(
        e[0].to_string(),
        "x.yaml: config error, key 'calendar' is not allowed in a descriptor (it belongs in rate_limit)"
    );
    let unknown = "domain: ext\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 5, calendar: {zone: UTC}}\n";
    let e =
        super::build_files(&[super::inline("x.yaml", unknown)], false).expect_err("unknown key");
    assert_eq!(e[0].to_string(), "x.yaml: config error, unknown key 'zone'");
}
