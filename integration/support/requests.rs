//! Building requests for the real binary: descriptors, overrides, calls, and the timing
//! and file helpers the black-box tests share (re-exported by `support::sluice`).

use std::path::Path;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;

use super::sluice::Client;

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

/// Sleep until at least `margin` seconds remain in the current epoch-aligned window of
/// `unit_secs`, so a short test never straddles a boundary.
pub async fn avoid_boundary(unit_secs: u64, margin: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let into = now.as_secs() % unit_secs;
    if unit_secs - into <= margin {
        let wait = Duration::from_secs(unit_secs - into)
            - Duration::from_nanos(u64::from(now.subsec_nanos()));
        tokio::time::sleep(wait + Duration::from_millis(50)).await;
    }
}

pub fn write(path: &Path, content: &str) {
    std::fs::write(path, content).expect("write file");
}
