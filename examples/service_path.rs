//! Instructions per `ShouldRateLimit` through the service, without the network: the memory
//! store, one descriptor, N calls on one thread. For callgrind, which counts instructions
//! exactly where timings on a shared machine do not:
//!
//! `valgrind --tool=callgrind target/release/examples/service_path 20000 [metadata]`
//!
//! `metadata` turns on `--decision-metadata` (`dynamic`: `--response-dynamic-metadata`
//! alone). Heap allocations per call: `valgrind --tool=dhat` (its "Total" blocks) over two
//! call counts.
//!
//! BENCHMARKS.md records what it showed for the telemetry hooks (tracing and statsd off)
//! and for the decision metadata.

use std::sync::Arc;

use sluice::config::{LoadOptions, RateLimitConfig};
use sluice::limit::ManualClock;
use sluice::metrics::Metrics;
use sluice::service::RateLimitService;
use sluice::service::proto::{Entry, RateLimitDescriptor, RateLimitRequest};
use sluice::settings::DecisionSettings;
use sluice::store::Backend;
use sluice::store::memory::MemoryStore;

const RULES: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n";

fn main() {
    let calls: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let mode = std::env::args().nth(2).unwrap_or_default();
    let settings = DecisionSettings {
        decision_metadata: mode == "metadata",
        dynamic_metadata: mode == "dynamic",
        ..DecisionSettings::default()
    };
    let dir = std::env::temp_dir().join(format!("sluice-service-path-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("rules.yaml");
    if let Err(e) = std::fs::write(&file, RULES) {
        eprintln!("cannot write {}: {e}", file.display());
        return;
    }
    let config = match RateLimitConfig::load(&[file], &LoadOptions::default()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("config: {e:?}");
            return;
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let service = RateLimitService::new(
        Some(config),
        Arc::new(Backend::Memory(MemoryStore::new(clock))),
        Arc::new(Metrics::new(0.8, 10_000, "memory")),
        settings,
    );
    let request = RateLimitRequest {
        domain: "d".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            }],
            ..Default::default()
        }],
        hits_addend: 1,
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    let ok = runtime.block_on(async {
        let mut ok = 0u64;
        for _ in 0..calls {
            if service.should_rate_limit(&request).await.is_ok() {
                ok += 1;
            }
        }
        ok
    });
    println!("{ok} of {calls} calls answered");
}
