//! Telemetry through the real binary: statsd and DogStatsD lines received by a UDP (or TCP)
//! listener the test owns, `PROMETHEUS_MAPPER_YAML` applied to a scrape, and OpenTelemetry
//! spans received by an OTLP receiver (gRPC and HTTP) started inside the test.

mod mapper;
mod statsd;
mod trace;

/// One hour-limited rule: three calls give total 3, within 2, near 1, over 1.
pub const RULES: &str = r#"
domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 2}
"#;
