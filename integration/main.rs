//! Black-box integration tests: the real `sluice` binary, real redis-server processes and
//! envoy-types' generated gRPC client. One test binary, so it links once.

mod support;

mod cli;
mod conformance;
mod deploy;
mod ops;
mod reload;
mod service;
