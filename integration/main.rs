//! Black-box integration tests: the real `sluice` binary, real redis-server processes and
//! envoy-types' generated gRPC client. One test binary, so it links once; one module per area.

mod support;

mod admin;
mod alerts;
mod answers;
mod architecture;
mod batched;
mod bench_scripts;
mod cli;
mod conformance;
mod dashboards;
mod deploy;
mod doc_paths;
mod dropin;
mod edge;
mod envoy;
mod explain;
mod faults;
mod local_cache;
mod ops;
mod outage;
mod readme_walkthrough;
mod redis_binary;
mod redis_conn;
mod redis_store;
mod redis_vs_native;
mod reference_keys;
mod reload;
mod rlqs;
mod schema;
mod service;
mod startup;
mod telemetry;
mod top;
mod xds;
