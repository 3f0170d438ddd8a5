//! sluice: an Envoy-compatible external rate limit service.
//!
//! Layout (one module per concern; data flows top to bottom):
//! - [`settings`]: flags and environment (including envoyproxy/ratelimit names) → one `Settings`.
//! - [`config`]: rule files → validated, immutable per-domain rule trees; matching.
//! - [`service`]: the gRPC `RateLimitService` and health; protocol types stop here.
//! - [`admission`]: which calls get store work under overload: an adaptive in-flight limit
//!   and a queue that refuses what waited too long.
//! - [`limit`]: the vocabulary of limits (units, algorithms, state tags, store checks and
//!   results) and the native algorithms; no I/O.
//! - [`limiter`]: one request's decision: one store call, then the status rules.
//! - [`store`]: the `Store` trait and its memory and Redis implementations.
//! - [`metrics`]: the Prometheus registry and cached handles.
//! - [`protojson`]: proto3 JSON of the responses' well-known types (`/json`, `sluice query
//!   --json`).
//! - [`explain`]: which rule a descriptor matches and why, its limits and Redis keys
//!   (`sluice explain`, `/explain`).
//! - [`http`]: `/healthcheck`, `/json`, `/metrics`, `/rlconfig`, `/explain`.
//! - [`admin`]: the admin listener: a descriptor's state, peeked or reset.
//! - [`server`]: wires listeners, services and shutdown together.
//! - [`cli`]: the one-shot commands `check`, `explain` and `query`: arguments in, exit status
//!   out.
//! - [`client`]: `sluice query`, a client of the RLS v3 API (any server), plain or TLS.
//! - [`tls`]: TLS plumbing shared by Redis, gRPC and the client (crypto provider, PEM files,
//!   reloadable server config).
//! - [`top`]: heavy hitters: per domain, the descriptors with the most hits and denials over
//!   a recent window, in bounded memory (`/top`, `sluice top`).
//! - [`transport`]: serving a listener: accept loop, connection caps, timeouts, TLS, drain.
//! - [`xds`]: rules from an xDS management server (state-of-the-world ADS).

pub mod admin;
pub mod admission;
pub mod cli;
pub mod client;
pub mod config;
pub mod explain;
pub mod http;
pub mod limit;
pub mod limiter;
pub mod metrics;
pub mod protojson;
pub mod quota;
pub mod reload;
pub mod server;
pub mod service;
pub mod settings;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod top;
pub mod transport;
pub mod xds;
