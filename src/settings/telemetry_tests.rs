use super::*;
use crate::settings::tests::serve;
use crate::settings::{Error, TracingProtocol};

/// The telemetry settings of `sluice serve` under `pairs`.
fn resolve_env(pairs: &[(&str, &str)]) -> Result<TelemetrySettings, SettingsError> {
    match serve(&[], pairs) {
        Ok(s) => Ok(s.telemetry),
        Err(Error::Setting { error, .. }) => Err(error),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn statsd_is_off_unless_their_variables_ask() {
    assert_eq!(resolve_env(&[]).unwrap().statsd, None);
    assert_eq!(
        resolve_env(&[("USE_STATSD", "false"), ("STATSD_PORT", "9125")])
            .unwrap()
            .statsd,
        None
    );
    let s = resolve_env(&[("USE_STATSD", "true")])
        .unwrap()
        .statsd
        .unwrap();
    assert_eq!(
        (s.addr.as_str(), s.protocol, s.dogstatsd),
        ("localhost:8125", StatsdProtocol::Tcp, false)
    );
    assert_eq!(s.flush_interval, Duration::from_secs(10));
    // The reference's default USE_STATSD=true makes STATSD_HOST alone enough.
    let s = resolve_env(&[("STATSD_HOST", "exporter"), ("STATSD_PORT", "9125")])
        .unwrap()
        .statsd
        .unwrap();
    assert_eq!(s.addr, "exporter:9125");
    let s = resolve_env(&[("USE_DOG_STATSD", "true"), ("EXTRA_TAGS", "b:2.0,a:x|y")])
        .unwrap()
        .statsd
        .unwrap();
    assert_eq!((s.protocol, s.dogstatsd), (StatsdProtocol::Udp, true));
    assert_eq!(
        s.tags,
        [("a".into(), "x_y".into()), ("b".into(), "2_0".into())]
    );
    assert_eq!(
        resolve_env(&[("USE_STATSD", "true"), ("DISABLE_STATS", "true")])
            .unwrap()
            .statsd,
        None
    );
}

#[test]
fn statsd_errors_name_the_variable() {
    let e = resolve_env(&[("USE_STATSD", "true"), ("USE_DOG_STATSD", "true")]).unwrap_err();
    assert!(
        e.to_string()
            .contains("unable to use more than one stats sink"),
        "{e}"
    );
    let e = resolve_env(&[("USE_STATSD", "true"), ("EXTRA_TAGS", "novalue")]).unwrap_err();
    assert_eq!(e.name, "EXTRA_TAGS");
    let e = resolve_env(&[("USE_STATSD", "true"), ("STATSD_PROTOCOL", "quic")]).unwrap_err();
    assert_eq!(e.name, "STATSD_PROTOCOL");
}

#[test]
fn response_time_in_milliseconds_is_their_boolean() {
    let k = "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS";
    assert!(resolve_env(&[(k, "true")]).unwrap().response_time_ms);
    assert!(!resolve_env(&[(k, "0")]).unwrap().response_time_ms);
    assert!(!resolve_env(&[]).unwrap().response_time_ms);
    let e = resolve_env(&[(k, "sometimes")]).unwrap_err();
    assert_eq!(e.name, k);
}

#[test]
fn mogrifiers_are_read_for_dogstatsd_in_order() {
    let dog = [
        ("USE_DOG_STATSD", "true"),
        ("USE_DOG_STATSD_MOGRIFIERS", "B,A"),
        ("DOG_STATSD_MOGRIFIER_A_PATTERN", "^x$"),
        ("DOG_STATSD_MOGRIFIER_A_NAME", "y"),
        ("DOG_STATSD_MOGRIFIER_B_PATTERN", "^ratelimit\\.(.*)$"),
        ("DOG_STATSD_MOGRIFIER_B_NAME", "rl.$1"),
        ("DOG_STATSD_MOGRIFIER_B_TAGS", "z:$1,a:b"),
    ];
    let m = resolve_env(&dog).unwrap().statsd.unwrap().mogrifiers;
    assert_eq!(m.len(), 2);
    assert_eq!((m[0].name.as_str(), m[1].name.as_str()), ("rl.$1", "y"));
    assert_eq!(
        m[0].tags,
        [("a".into(), "b".into()), ("z".into(), "$1".into())]
    );
    let mut missing = dog.to_vec();
    missing.retain(|(k, _)| *k != "DOG_STATSD_MOGRIFIER_A_NAME");
    let e = resolve_env(&missing).unwrap_err();
    assert!(
        e.message.contains("no NAME specified for mogrifier A"),
        "{e}"
    );
    let mut bad = dog.to_vec();
    bad.push(("DOG_STATSD_MOGRIFIER_A_PATTERN", "("));
    bad.retain(|(k, v)| !(*k == "DOG_STATSD_MOGRIFIER_A_PATTERN" && *v == "^x$"));
    assert_eq!(
        resolve_env(&bad).unwrap_err().name,
        "DOG_STATSD_MOGRIFIER_A_PATTERN"
    );
}

#[test]
fn tracing_defaults_are_theirs() {
    assert_eq!(resolve_env(&[]).unwrap().tracing, None);
    let t = resolve_env(&[("TRACING_ENABLED", "true")])
        .unwrap()
        .tracing
        .unwrap();
    assert_eq!(t.protocol, TracingProtocol::Http);
    assert_eq!(t.service_name, "RateLimit");
    assert_eq!(t.sampling_rate, 1.0);
    let e =
        resolve_env(&[("TRACING_ENABLED", "true"), ("TRACING_SAMPLING_RATE", "2")]).unwrap_err();
    assert_eq!(e.name, "TRACING_SAMPLING_RATE");
    let e = resolve_env(&[
        ("TRACING_ENABLED", "true"),
        ("TRACING_EXPORTER_PROTOCOL", "zipkin"),
    ])
    .unwrap_err();
    assert_eq!(e.name, "TRACING_EXPORTER_PROTOCOL");
}
