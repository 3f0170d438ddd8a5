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

use std::time::Duration;

use sluice::xds::proto::{RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit};

use crate::support::sluice::*;
use crate::support::xds_server::XdsServer;

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
