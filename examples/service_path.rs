//! Instructions per `ShouldRateLimit` through the service, without the network: the memory
//! store, one descriptor, N calls on one thread. For callgrind, which counts instructions
//! exactly where timings on a shared machine do not:
//!
//! `valgrind --tool=callgrind target/release/examples/service_path 20000 [metadata|top|off] [distinct]`
//!
//! `metadata` turns on `--decision-metadata` (`dynamic`: `--response-dynamic-metadata`
//! alone); `top` keeps the heavy hitters, at their defaults (`off`, or nothing: everything
//! off). `distinct` gives every call a value of its own (a new descriptor each time: new
//! store state, and for the heavy hitters a counter taken over); without it every call is
//! the same descriptor. Heap allocations per call: `valgrind --tool=dhat` (its "Total"
//! blocks) over two call counts.
//!
//! BENCHMARKS.md records what it showed for the telemetry hooks (tracing and statsd off),
//! the decision metadata and the heavy hitters.

use std::sync::Arc;

use sluice::config::{LoadOptions, RateLimitConfig};
use sluice::limit::ManualClock;
use sluice::metrics::Metrics;
use sluice::service::RateLimitService;
use sluice::service::proto::{Entry, RateLimitDescriptor, RateLimitRequest};
use sluice::settings::DecisionSettings;
use sluice::store::Backend;
use sluice::store::memory::MemoryStore;
use sluice::top::{TopHitters, TopOptions};

const RULES: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n";

fn main() {
    let calls: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let mode = std::env::args().nth(2).unwrap_or_default();
    let distinct = std::env::args().nth(3).as_deref() == Some("distinct");
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
    // `--top-capacity` and `--top-window` at their defaults.
    let top = (mode == "top").then(|| {
        let opts = TopOptions {
            capacity: 1000,
            window_ms: 60_000,
        };
        Arc::new(TopHitters::new(opts, clock.clone()))
    });
    let service = RateLimitService::new(
        Some(config),
        Arc::new(Backend::Memory(MemoryStore::new(clock))),
        Arc::new(Metrics::new(0.8, 10_000, "memory")),
        settings,
    )
    .with_top(top, 10);
    let mut request = RateLimitRequest {
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
        for i in 0..calls {
            if distinct {
                request.descriptors[0].entries[0].value = format!("v{i}").into_bytes();
            }
            if service.should_rate_limit(&request).await.is_ok() {
                ok += 1;
            }
        }
        ok
    });
    println!("{ok} of {calls} calls answered");
}
