//! Drop-in for today's envoyproxy/ratelimit: the real binary started with one of their
//! variables (their name only, no sluice flag for it), its effect checked over gRPC — over
//! a unix socket where that is the variable.

use crate::support::sluice::*;

mod metric_dots;
mod request_headers;
mod response_time;
mod uds;

const RULES: &str = r#"
domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 2, name: two_per_hour}
"#;

fn ask() -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
    req("d", vec![desc(&[("k", "v")])])
}
