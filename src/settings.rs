//! Command line and environment → one [`Settings`].
//!
//! Precedence for every setting: command-line flag, then its `SLUICE_*` variable (clap reads
//! both), then the envoyproxy/ratelimit variable with the same meaning (so their manifests
//! work unchanged), then the default. Compatibility variables are read through a lookup
//! function rather than `std::env`, so tests can supply them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Default request-size bounds (documented in the README).
pub const DEFAULT_MAX_DESCRIPTORS: usize = 64;
pub const DEFAULT_MAX_ENTRIES: usize = 32;
pub const DEFAULT_MAX_KEY_BYTES: usize = 256;
pub const DEFAULT_MAX_VALUE_BYTES: usize = 8192;
pub const DEFAULT_MAX_HITS_ADDEND: u64 = 1_000_000_000;

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "Envoy-compatible external rate limit service",
    long_about = "Envoy-compatible external rate limit service: a drop-in for envoyproxy/ratelimit \
                  with sliding windows, token and leaky buckets, GCRA, several limits per \
                  descriptor and lock-out penalties, on Redis or in memory."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the rate limit API (gRPC) and the HTTP endpoints.
    Serve(Box<ServeArgs>),
    /// Validate rule files or directories; print every error.
    Check(CheckArgs),
    /// Which rule a descriptor matches and why, offline over rule files: each level of the
    /// walk, the rule, its limits, stats key and Redis keys.
    Explain(ExplainArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Rule files or directories (searched recursively for *.yaml / *.yml).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Allow one domain to be split over several files (also MERGE_DOMAIN_CONFIG).
    #[arg(long, env = "SLUICE_MERGE_DOMAINS")]
    pub merge_domains: bool,
    /// Largest rule file read, in bytes; a larger file is an error.
    #[arg(long, value_name = "BYTES", env = "SLUICE_MAX_CONFIG_FILE_BYTES", default_value_t = DEFAULT_MAX_CONFIG_FILE_BYTES)]
    pub max_config_file_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Rule file or directory; repeatable [default: ./config]
    /// (also RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY)
    #[arg(
        long = "config",
        value_name = "PATH",
        env = "SLUICE_CONFIG",
        value_delimiter = ','
    )]
    pub config: Vec<PathBuf>,
    /// gRPC listen address [default: 0.0.0.0:8081] (also GRPC_HOST/GRPC_PORT)
    #[arg(long, value_name = "ADDR", env = "SLUICE_GRPC_ADDR")]
    pub grpc_addr: Option<String>,
    /// HTTP listen address for /healthcheck, /json, /metrics, /rlconfig [default: 0.0.0.0:8080]
    /// (also HOST/PORT)
    #[arg(long, value_name = "ADDR", env = "SLUICE_HTTP_ADDR")]
    pub http_addr: Option<String>,
    /// Separate listener for Prometheus metrics (also PROMETHEUS_ADDR with USE_PROMETHEUS=true)
    #[arg(long, value_name = "ADDR", env = "SLUICE_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Admin listener (a descriptor's state: GET to peek, DELETE to reset; no
    /// authentication, see the README before exposing it), or `off`
    /// [default: 127.0.0.1:8082]
    #[arg(long, value_name = "ADDR|off", env = "SLUICE_ADMIN_ADDR")]
    pub admin_addr: Option<String>,
    /// Path of the metrics endpoint on the separate listener [default: /metrics] (also PROMETHEUS_PATH)
    #[arg(long, value_name = "PATH", env = "SLUICE_METRICS_PATH")]
    pub metrics_path: Option<String>,
    /// Allow one domain to be split over several files (also MERGE_DOMAIN_CONFIG)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_MERGE_DOMAINS")]
    pub merge_domains: Option<bool>,
    /// Watch config paths and reload on change [default: true]
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_WATCH_CONFIG")]
    pub watch_config: Option<bool>,

    #[command(flatten)]
    pub redis: RedisArgs,

    /// Never deny: OVER_LIMIT answers become OK (also SHADOW_MODE)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_SHADOW_MODE")]
    pub shadow_mode: Option<bool>,
    /// Treat every rule as quota_mode (also QUOTA_MODE)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_QUOTA_MODE")]
    pub quota_mode: Option<bool>,
    /// Fraction of a limit above which hits count as near_limit [default: 0.8] (also NEAR_LIMIT_RATIO)
    #[arg(long, value_name = "RATIO", env = "SLUICE_NEAR_LIMIT_RATIO")]
    pub near_limit_ratio: Option<f32>,

    /// Add RateLimit-Limit/-Remaining/-Reset response headers (also LIMIT_RESPONSE_HEADERS_ENABLED)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_RESPONSE_HEADERS")]
    pub response_headers: Option<bool>,
    /// Header style: draft03 (RateLimit-Limit/-Remaining/-Reset, their format) or ietf
    /// (RateLimit-Policy + RateLimit, current IETF draft) [default: draft03]
    #[arg(long, value_enum, env = "SLUICE_RESPONSE_HEADERS_STYLE")]
    pub response_headers_style: Option<HeaderStyle>,
    /// Add Retry-After to OVER_LIMIT responses [default: false]
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_RETRY_AFTER_HEADER")]
    pub retry_after_header: Option<bool>,
    /// Return rule metadata in dynamic metadata (also RESPONSE_DYNAMIC_METADATA)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_RESPONSE_DYNAMIC_METADATA")]
    pub response_dynamic_metadata: Option<bool>,

    /// Most descriptors one request may carry [default: 64]
    #[arg(long, value_name = "N", env = "SLUICE_MAX_DESCRIPTORS")]
    pub max_descriptors: Option<usize>,
    /// Most entries one descriptor may carry [default: 32]
    #[arg(long, value_name = "N", env = "SLUICE_MAX_ENTRIES")]
    pub max_entries: Option<usize>,
    /// Longest descriptor entry key, in bytes [default: 256]
    #[arg(long, value_name = "BYTES", env = "SLUICE_MAX_KEY_BYTES")]
    pub max_key_bytes: Option<usize>,
    /// Longest descriptor entry value (and domain), in bytes [default: 8192]
    #[arg(long, value_name = "BYTES", env = "SLUICE_MAX_VALUE_BYTES")]
    pub max_value_bytes: Option<usize>,
    /// Largest hits_addend accepted [default: 1000000000]
    #[arg(long, value_name = "N", env = "SLUICE_MAX_HITS_ADDEND")]
    pub max_hits_addend: Option<u64>,

    /// Most series per per-rule metric family; the rest fold into one overflow series
    /// [default: 10000]
    #[arg(long, value_name = "N", env = "SLUICE_METRICS_MAX_SERIES")]
    pub metrics_max_series: Option<usize>,
    /// Log level: trace, debug, info, warn, error [default: info] (also LOG_LEVEL; RUST_LOG
    /// filters win when set)
    #[arg(long, value_name = "LEVEL", env = "SLUICE_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// text or json [default: text] (also LOG_FORMAT)
    #[arg(long, value_enum, env = "SLUICE_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
    /// On SIGTERM: longest wait for in-flight requests before exiting [default: 10s]
    #[arg(long, value_name = "DURATION", env = "SLUICE_SHUTDOWN_GRACE")]
    pub shutdown_grace: Option<String>,
    /// Threads serving requests [default: the CPUs available to the process]
    #[arg(long, value_name = "N", env = "SLUICE_WORKER_THREADS")]
    pub worker_threads: Option<usize>,
    /// On SIGTERM: keep serving this long with health NOT_SERVING before closing the
    /// listeners, so load balancers stop sending first [default: 0s]
    #[arg(long, value_name = "DURATION", env = "SLUICE_SHUTDOWN_DELAY")]
    pub shutdown_delay: Option<String>,

    #[command(flatten)]
    pub caps: CapArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HeaderStyle {
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (envoyproxy/ratelimit).
    Draft03,
    /// `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers).
    Ietf,
}

/// The command line as sluice parses it. Run as `ratelimit` (the image's `/bin/ratelimit`,
/// envoyproxy/ratelimit's binary path, which Envoy Gateway's deployment runs with no
/// arguments), sluice serves: their binary has no subcommands and reads its settings
/// from the environment.
pub fn invocation(mut argv: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let invoked_as = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let first = argv.get(1).and_then(|a| a.to_str()).unwrap_or_default();
    let explicit = ["serve", "check", "help", "--help", "-h", "--version", "-V"].contains(&first);
    if invoked_as == "ratelimit" && !explicit {
        argv.insert(1, "serve".into());
    }
    argv
}

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
    pub near_limit_ratio: f32,
    pub headers: HeaderSettings,
    pub dynamic_metadata: bool,
    pub limits: RequestLimits,
}

impl Default for DecisionSettings {
    fn default() -> Self {
        DecisionSettings {
            shadow_mode: false,
            quota_mode: false,
            near_limit_ratio: 0.8,
            headers: HeaderSettings::default(),
            dynamic_metadata: false,
            limits: RequestLimits::default(),
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
    /// `None`: the in-memory store.
    pub redis: Option<RedisSettings>,
    pub decision: DecisionSettings,
    pub metrics_max_series: usize,
    pub log_level: String,
    pub log_format: LogFormat,
    pub shutdown_grace: Duration,
    pub shutdown_delay: Duration,
    /// `None`: one per available CPU.
    pub worker_threads: Option<usize>,
    /// Health requires at least one loaded domain (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED).
    pub healthy_requires_config: bool,
    /// Notes on accepted-but-ignored compatibility variables, logged at startup.
    pub notes: Vec<String>,
    /// Rule file size, memory store state.
    pub caps: Caps,
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
            redis: None,
            decision: DecisionSettings::default(),
            metrics_max_series: 10_000,
            log_level: "info".into(),
            log_format: LogFormat::Text,
            shutdown_grace: Duration::from_secs(10),
            shutdown_delay: Duration::ZERO,
            worker_threads: None,
            healthy_requires_config: false,
            notes: Vec::new(),
            caps: Caps::default(),
        }
    }
}

mod caps;
mod compat;
mod explain;
mod parse;
mod redis;
mod redis_url;
mod xds;

pub use caps::{CapArgs, Caps, DEFAULT_MAX_CONFIG_FILE_BYTES, DEFAULT_MAX_REQUEST_BYTES};
pub use explain::ExplainArgs;
use parse::err;
pub use parse::{SettingsError, parse_addr, parse_bool, parse_duration};
pub use redis::{RedisArgs, RedisSettings, RedisTlsFiles, RedisType, TimeSource};
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
