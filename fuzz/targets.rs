//! The four targets. Each takes arbitrary bytes, answers whether they were accepted (parsed,
//! decoded), and must never panic, hang or allocate without bound. The request targets go
//! on through the whole decision path (validation, matching, the memory store, the
//! response) with two services: default settings, and every optional output on (headers,
//! dynamic metadata, stop-increment, quota mode).

use std::path::PathBuf;
use std::sync::Arc;

use prost::Message;
use sluice::config::{ConfigFile, LoadOptions, RateLimitConfig};
use sluice::limit::ManualClock;
use sluice::metrics::Metrics;
use sluice::service::RateLimitService;
use sluice::service::proto::RateLimitRequest;
use sluice::settings::{DecisionSettings, HeaderSettings, HeaderStyle};
use sluice::store::Backend;
use sluice::store::memory::MemoryStore;

use crate::Rng;
use crate::inputs;

pub trait Target {
    fn name(&self) -> &'static str;
    /// Feed one input; true when it was accepted.
    fn run(&mut self, input: &[u8]) -> bool;
    /// A structure-aware input.
    fn generate(&mut self, rng: &mut Rng) -> Vec<u8>;
}

pub fn all() -> Vec<Box<dyn Target>> {
    vec![
        Box::new(Rules),
        Box::new(Requests::new(Decoder::Proto)),
        Box::new(Requests::new(Decoder::Json)),
        Box::new(Xds),
    ]
}

/// Rule files: YAML parsing, the limits on aliases and nesting, validation, compilation,
/// error positions, and the dump of what loaded.
struct Rules;

impl Target for Rules {
    fn name(&self) -> &'static str {
        "rules"
    }

    fn run(&mut self, input: &[u8]) -> bool {
        let file = ConfigFile {
            name: "fuzz.yaml".into(),
            path: PathBuf::from("fuzz.yaml"),
            content: String::from_utf8_lossy(input).into_owned(),
        };
        let opts = LoadOptions {
            merge_domains: input.len().is_multiple_of(2),
            ..LoadOptions::default()
        };
        match RateLimitConfig::build(std::slice::from_ref(&file), &opts) {
            Ok(config) => {
                let _ = config.dump();
                for name in config.domain_names() {
                    assert!(config.domain(name).is_some(), "listed domain {name}");
                }
                true
            }
            Err(errors) => {
                assert!(!errors.is_empty(), "an error without a message");
                for e in errors {
                    let m = e.to_string();
                    if std::env::var_os("FUZZ_VERBOSE").is_some() {
                        eprintln!("rejected: {m}");
                    }
                }
                false
            }
        }
    }

    fn generate(&mut self, rng: &mut Rng) -> Vec<u8> {
        inputs::rules_yaml(rng).into_bytes()
    }
}

#[derive(Clone, Copy)]
enum Decoder {
    Proto,
    Json,
}

/// `ShouldRateLimit` bytes (protobuf, or `/json` text) through the service.
struct Requests {
    decoder: Decoder,
    runtime: tokio::runtime::Runtime,
    services: [RateLimitService; 3],
}

impl Requests {
    fn new(decoder: Decoder) -> Requests {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let paths = [
            root.join("config/extensions.yaml"),
            root.join("config/envoy-compatible.yaml"),
            root.join("fuzz/service.yaml"),
        ];
        let everything_on = DecisionSettings {
            quota_mode: false,
            stop_increment: true,
            headers: HeaderSettings {
                enabled: true,
                style: HeaderStyle::Ietf,
                retry_after: true,
                ..HeaderSettings::default()
            },
            dynamic_metadata: true,
            ..DecisionSettings::default()
        };
        let quota = DecisionSettings {
            quota_mode: true,
            ..everything_on.clone()
        };
        let _enter = runtime.enter();
        let service = |settings: DecisionSettings| {
            let clock = Arc::new(ManualClock::new(1_700_000_000_000));
            let config = RateLimitConfig::load(&paths, &LoadOptions::default()).expect("rules");
            RateLimitService::new(
                Some(config),
                Arc::new(Backend::Memory(MemoryStore::new(clock))),
                Arc::new(Metrics::new(0.8, 1_000, "memory")),
                settings,
            )
        };
        let services = [
            service(DecisionSettings::default()),
            service(everything_on),
            service(quota),
        ];
        drop(_enter);
        Requests {
            decoder,
            runtime,
            services,
        }
    }
}

impl Target for Requests {
    fn name(&self) -> &'static str {
        match self.decoder {
            Decoder::Proto => "proto",
            Decoder::Json => "json",
        }
    }

    fn run(&mut self, input: &[u8]) -> bool {
        let req = match self.decoder {
            Decoder::Proto => RateLimitRequest::decode(input).ok(),
            Decoder::Json => sluice::service::json::parse_request(input).ok(),
        };
        let Some(req) = req else {
            return false;
        };
        let service = &self.services[input.len() % 3];
        let result = self.runtime.block_on(service.should_rate_limit(&req));
        if let Ok(resp) = &result {
            assert_eq!(
                resp.statuses.len(),
                req.descriptors.len(),
                "one status per descriptor"
            );
            let _ = sluice::service::json::render_response(resp);
            let _ = resp.encode_to_vec();
        }
        true
    }

    fn generate(&mut self, rng: &mut Rng) -> Vec<u8> {
        match self.decoder {
            Decoder::Proto => inputs::request(rng).encode_to_vec(),
            Decoder::Json => inputs::request_json(rng).into_bytes(),
        }
    }
}

/// xDS: a `DiscoveryResponse`'s resources decoded, converted to rule trees and validated.
struct Xds;

impl Target for Xds {
    fn name(&self) -> &'static str {
        "xds"
    }

    fn run(&mut self, input: &[u8]) -> bool {
        let Ok(resp) =
            envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse::decode(input)
        else {
            return false;
        };
        match sluice::xds::build(&resp.resources, &LoadOptions::default()) {
            Ok(config) => {
                let _ = config.dump();
                true
            }
            Err(errors) => {
                assert!(!errors.is_empty(), "a NACK without a message");
                false
            }
        }
    }

    fn generate(&mut self, rng: &mut Rng) -> Vec<u8> {
        inputs::discovery_response(rng).encode_to_vec()
    }
}
