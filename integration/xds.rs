//! Rules from xDS (`CONFIG_TYPE=GRPC_XDS_SOTW`): the real binary against a real management
//! server running in the test (`support::xds_server`, tonic serving envoy-types' ADS).
//!
//! `stream`: first load, update, ACK with version and nonce, NACK with the file messages
//! while the last good config keeps serving, server restart then resync, node and headers.
//! `startup`: waiting for the first config, `FORCE_START_WITHOUT_INITIAL_CONFIG`, health
//! with `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`. `tls`: TLS and mutual TLS to the server.

mod startup;
mod stream;
mod tls;

use std::time::{Duration, Instant};

use sluice::xds::proto::{RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit};

use crate::support::sluice::*;
use crate::support::xds_server::XdsServer;

const WAIT: Duration = Duration::from_secs(15);

/// One resource: domain `domain`, key `k` limited to `rpu` per hour.
fn rules(name: &str, domain: &str, rpu: u32) -> RateLimitConfig {
    RateLimitConfig {
        name: name.into(),
        domain: domain.into(),
        descriptors: vec![RateLimitDescriptor {
            key: "k".into(),
            rate_limit: Some(RateLimitPolicy {
                unit: RateLimitUnit::Hour as i32,
                requests_per_unit: rpu,
                ..Default::default()
            }),
            ..Default::default()
        }],
    }
}

/// A resource the validator rejects: a limit without a unit.
fn bad_rules(name: &str, domain: &str) -> RateLimitConfig {
    let mut r = rules(name, domain, 1);
    if let Some(p) = r.descriptors[0].rate_limit.as_mut() {
        p.unit = RateLimitUnit::Unknown as i32;
    }
    r
}

/// sluice reading its rules from `xds`, reconnecting quickly.
fn xds_sluice(xds: &XdsServer) -> Builder {
    sluice()
        .env("CONFIG_TYPE", "GRPC_XDS_SOTW")
        .env("CONFIG_GRPC_XDS_SERVER_URL", xds.url())
        .env("CONFIG_GRPC_XDS_NODE_ID", "test-node")
        .env("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "100ms")
        .env("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "500ms")
}

/// The limit applied to (domain, k=v), if any (a peek: nothing is counted).
async fn limit(c: &mut Client, domain: &str) -> Option<u32> {
    try_limit(c, domain)
        .await
        .unwrap_or_else(|e| panic!("ShouldRateLimit: {e:?}"))
}

/// [`limit`], or the call's error (before the first config, every call fails).
async fn try_limit(c: &mut Client, domain: &str) -> Result<Option<u32>, tonic::Status> {
    let r = c
        .should_rate_limit(req(domain, vec![desc_hits(&[("k", "v")], 0)]))
        .await?
        .into_inner();
    Ok(r.statuses[0]
        .current_limit
        .as_ref()
        .map(|l| l.requests_per_unit))
}

async fn wait_limit(c: &mut Client, domain: &str, want: Option<u32>) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if try_limit(c, domain).await.ok() == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
