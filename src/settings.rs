//! Command line and environment → one [`Settings`].
//!
//! Precedence for every setting: command-line flag, then its `SLUICE_*` variable (clap reads
//! both), then the envoyproxy/ratelimit variable with the same meaning (so their manifests
//! work unchanged), then the default. Compatibility variables are read through a lookup
//! function rather than `std::env`, so tests can supply them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// Default request-size bounds (documented in the README).
pub const DEFAULT_MAX_DESCRIPTORS: usize = 64;
pub const DEFAULT_MAX_ENTRIES: usize = 32;
pub const DEFAULT_MAX_KEY_BYTES: usize = 256;
pub const DEFAULT_MAX_VALUE_BYTES: usize = 8192;
pub const DEFAULT_MAX_HITS_ADDEND: u64 = 1_000_000_000;
/// Default `--max-in-flight`, the ceiling of the adaptive in-flight limit (`admission`): far
/// above what one instance keeps busy at its capacity (a few dozen calls at a Redis round
/// trip each), low enough that the limit cannot grow into seconds of queued work.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// Bounds on one request (oversized input → INVALID_ARGUMENT).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    pub max_descriptors: usize,
    pub max_entries: usize,
    pub max_key_bytes: usize,
    pub max_value_bytes: usize,
    pub max_hits_addend: u64,
    /// Largest gRPC request message (larger → RESOURCE_EXHAUSTED).
    pub max_request_bytes: usize,
    /// Ceiling of the adaptive limit on `ShouldRateLimit` gRPC calls worked on at once, and
    /// of those waiting for one (0: no ceiling).
    pub max_in_flight: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_descriptors: DEFAULT_MAX_DESCRIPTORS,
            max_entries: DEFAULT_MAX_ENTRIES,
            max_key_bytes: DEFAULT_MAX_KEY_BYTES,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            max_hits_addend: DEFAULT_MAX_HITS_ADDEND,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct HeaderSettings {
    pub enabled: bool,
    pub style: HeaderStyle,
    pub retry_after: bool,
    pub limit_header: String,
    pub remaining_header: String,
    pub reset_header: String,
}

impl Default for HeaderSettings {
    fn default() -> Self {
        HeaderSettings {
            enabled: false,
            style: HeaderStyle::Draft03,
            retry_after: false,
            limit_header: "RateLimit-Limit".into(),
            remaining_header: "RateLimit-Remaining".into(),
            reset_header: "RateLimit-Reset".into(),
        }
    }
}

/// Decision-affecting options the service reads on every request.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionSettings {
    pub shadow_mode: bool,
    pub quota_mode: bool,
    /// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT.
    pub stop_increment: bool,
    pub near_limit_ratio: f32,
    pub headers: HeaderSettings,
    pub dynamic_metadata: bool,
    pub limits: RequestLimits,
    /// `--redis-reference-keys`: plans carry envoyproxy/ratelimit's cache key of each
    /// descriptor, for the Redis store (see `store/redis/reference.rs`).
    pub reference_keys: bool,
}

impl Default for DecisionSettings {
    fn default() -> Self {
        DecisionSettings {
            shadow_mode: false,
            quota_mode: false,
            stop_increment: false,
            near_limit_ratio: 0.8,
            headers: HeaderSettings::default(),
            dynamic_metadata: false,
            limits: RequestLimits::default(),
            reference_keys: false,
        }
    }
}

/// Everything `serve` needs, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub config_paths: Vec<PathBuf>,
    /// Files at `config_paths` (the default) or an xDS server (CONFIG_TYPE=GRPC_XDS_SOTW).
    pub config_source: ConfigSource,
    /// Serve before the first xDS config arrives (FORCE_START_WITHOUT_INITIAL_CONFIG);
    /// requests fail with "no rate limit configuration loaded" until it does.
    pub force_start_without_initial_config: bool,
    pub merge_domains: bool,
    pub watch_config: bool,
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    pub metrics_path: String,
    /// The admin listener; `None`: disabled.
    pub admin_addr: Option<SocketAddr>,
    /// `admin_addr` was chosen (flag or `SLUICE_ADMIN_ADDR`): a taken port stops startup.
    /// At the default, a taken port only costs the admin listener (a second instance on
    /// the host, set up with envoyproxy/ratelimit's variables, still starts).
    pub admin_addr_explicit: bool,
    /// `None`: the in-memory store.
    pub redis: Option<RedisSettings>,
    pub decision: DecisionSettings,
    pub metrics_max_series: usize,
    /// Budget of the local over-limit cache, in bytes; 0: disabled.
    pub local_cache_bytes: usize,
    pub log_level: String,
    pub log_format: LogFormat,
    pub shutdown_grace: Duration,
    pub shutdown_delay: Duration,
    /// `None`: one per available CPU.
    pub worker_threads: Option<usize>,
    /// Health requires at least one loaded domain (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED).
    pub healthy_requires_config: bool,
    /// statsd, the Prometheus mapping file and tracing (`settings/telemetry.rs`).
    pub telemetry: TelemetrySettings,
    /// gRPC TLS, the debug listener, connection timeouts and caps.
    pub listen: ListenSettings,
    /// Notes on their variables that have no effect here (`settings/audit`) and on ignored
    /// combinations, logged once at startup.
    pub notes: Vec<String>,
    /// Rule file size, memory store state.
    pub caps: Caps,
    /// Default consistency, batching and the store-failure fallback.
    pub consistency: ConsistencySettings,
    /// The quota service (RLQS, `settings/rlqs.rs`).
    pub rlqs: RlqsSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            config_paths: vec![PathBuf::from("config")],
            config_source: ConfigSource::Files,
            force_start_without_initial_config: false,
            merge_domains: false,
            watch_config: true,
            grpc_addr: SocketAddr::from(([0, 0, 0, 0], 8081)),
            http_addr: SocketAddr::from(([0, 0, 0, 0], 8080)),
            metrics_addr: None,
            metrics_path: "/metrics".into(),
            // Loopback only: the admin listener has no authentication.
            admin_addr: Some(SocketAddr::from(([127, 0, 0, 1], 8082))),
            admin_addr_explicit: false,
            redis: None,
            decision: DecisionSettings::default(),
            metrics_max_series: 10_000,
            local_cache_bytes: 0,
            log_level: "info".into(),
            log_format: LogFormat::Text,
            shutdown_grace: Duration::from_secs(10),
            shutdown_delay: Duration::ZERO,
            worker_threads: None,
            healthy_requires_config: false,
            telemetry: TelemetrySettings::default(),
            listen: ListenSettings::default(),
            notes: Vec::new(),
            caps: Caps::default(),
            consistency: ConsistencySettings::default(),
            rlqs: RlqsSettings::default(),
        }
    }
}

pub mod audit;
mod caps;
mod cli;
mod compat;
mod consistency;
mod env;
mod explain;
mod listen;
mod parse;
mod query;
mod redis;
mod redis_url;
mod rlqs;
mod telemetry;
mod xds;

pub use caps::{CapArgs, Caps, DEFAULT_MAX_CONFIG_FILE_BYTES, DEFAULT_MAX_REQUEST_BYTES};
pub use cli::{CheckArgs, Cli, Command, HeaderStyle, LogFormat, ServeArgs, invocation};
pub use consistency::{
    ConsistencyArgs, ConsistencySettings, DEFAULT_BATCH_INTERVAL, StoreFailureMode,
};
pub use explain::ExplainArgs;
pub use listen::{GrpcTlsSettings, ListenArgs, ListenSettings};
pub use query::QueryArgs;
// The operator tools' descriptor syntax, re-exported for `client` (which uses `settings`).
pub use crate::limit::{Descriptor, parse_descriptor};

use parse::err;
pub use parse::{SettingsError, parse_addr, parse_bool, parse_duration};
pub use redis::{RedisArgs, RedisSettings, RedisTlsFiles, TimeSource};
pub use redis_url::RedisType;
pub use rlqs::{RlqsArgs, RlqsSettings};
pub use telemetry::{
    Mogrifier, StatsdProtocol, StatsdSettings, TelemetryArgs, TelemetrySettings, TracingProtocol,
    TracingSettings,
};
pub use xds::{ConfigSource, XdsBackoff, XdsSettings, XdsTls};

impl Settings {
    /// Resolve `serve` arguments against compatibility variables read through `env`.
    pub fn resolve(
        args: &ServeArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Settings, SettingsError> {
        compat::resolve(args, env)
    }

    /// Resolve from the process environment.
    pub fn from_env(args: &ServeArgs) -> Result<Settings, SettingsError> {
        Settings::resolve(args, &|name| std::env::var(name).ok())
    }
}

#[cfg(test)]
mod tests;
