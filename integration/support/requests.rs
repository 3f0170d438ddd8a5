//! Building requests for the real binary: descriptors, overrides, calls, and the timing
//! and file helpers the black-box tests share (re-exported by `support::sluice`).

use std::path::Path;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use tonic::transport::Channel;

/// A gRPC client of the rate limit service.
pub type Client = RateLimitServiceClient<Channel>;

pub fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
    pairs
        .iter()
        .map(|(k, v)| Entry {
            key: k.to_string(),
            value: v.to_string(),
        })
        .collect()
}

pub fn desc(pairs: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries(pairs),
        ..Default::default()
    }
}

pub fn desc_hits(pairs: &[(&str, &str)], hits: u64) -> RateLimitDescriptor {
    RateLimitDescriptor {
        hits_addend: Some(UInt64Value { value: hits }),
        ..desc(pairs)
    }
}

pub fn desc_override(pairs: &[(&str, &str)], rpu: u32, unit: i32) -> RateLimitDescriptor {
    RateLimitDescriptor {
        limit: Some(RateLimitOverride {
            requests_per_unit: rpu,
            unit,
        }),
        ..desc(pairs)
    }
}

pub fn req(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: 0,
    }
}

/// One call; panics on a gRPC error.
pub async fn call(c: &mut Client, r: RateLimitRequest) -> RateLimitResponse {
    c.should_rate_limit(r)
        .await
        .expect("ShouldRateLimit")
        .into_inner()
}

/// How long a test waits for what should happen soon (a reload, a log line, an xDS
/// update): generous, as a loaded machine needs, and only waited out when something is
/// wrong.
pub const WAIT: Duration = Duration::from_secs(15);

/// The limit applied to (domain, k=v), if any (a peek: nothing is counted); panics on a
/// gRPC error.
pub async fn limit(c: &mut Client, domain: &str) -> Option<u32> {
    try_limit(c, domain)
        .await
        .unwrap_or_else(|e| panic!("ShouldRateLimit: {e:?}"))
}

/// [`limit`], or the call's error (before the first config, every call fails).
pub async fn try_limit(c: &mut Client, domain: &str) -> Result<Option<u32>, tonic::Status> {
    let r = c
        .should_rate_limit(req(domain, vec![desc_hits(&[("k", "v")], 0)]))
        .await?
        .into_inner();
    Ok(r.statuses[0]
        .current_limit
        .as_ref()
        .map(|l| l.requests_per_unit))
}

/// Wait up to [`WAIT`] until [`limit`] is `want` (a failing call counts as not yet).
pub async fn wait_limit(c: &mut Client, domain: &str, want: Option<u32>) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if try_limit(c, domain).await.ok() == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The response's dynamic metadata as JSON (null when there is none).
pub fn metadata_json(r: &RateLimitResponse) -> serde_json::Value {
    use envoy_types::pb::google::protobuf::value::Kind;
    use envoy_types::pb::google::protobuf::{Struct, Value};
    fn object(s: &Struct) -> serde_json::Value {
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), value(v)))
            .collect()
    }
    fn value(v: &Value) -> serde_json::Value {
        match &v.kind {
            Some(Kind::StringValue(s)) => s.clone().into(),
            Some(Kind::NumberValue(n)) => (*n).into(),
            Some(Kind::BoolValue(b)) => (*b).into(),
            Some(Kind::StructValue(s)) => object(s),
            Some(Kind::ListValue(l)) => l.values.iter().map(value).collect(),
            Some(Kind::NullValue(_)) | None => serde_json::Value::Null,
        }
    }
    r.dynamic_metadata
        .as_ref()
        .map_or(serde_json::Value::Null, object)
}

/// A response header's value.
pub fn header<'a>(r: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    r.response_headers_to_add
        .iter()
        .find(|h| h.key == name)
        .map(|h| h.value.as_str())
}

pub fn write(path: &Path, content: &str) {
    std::fs::write(path, content).expect("write file");
}
