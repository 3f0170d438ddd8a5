//! The command line: subcommands and `serve`'s flags, each with its `SLUICE_*` variable
//! (clap reads both), and how the binary was invoked (as `ratelimit`, Envoy Gateway's command,
//! it serves).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::*;

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
    /// Ask a rate limit server (any RLS v3 server) one question; print its answer.
    /// Exit status: 0 OK, 1 OVER_LIMIT, 2 error.
    Query(Box<QueryArgs>),
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
    /// When any descriptor of a request is over its limit, charge no other descriptor of it
    /// (also STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_STOP_INCREMENT_WHEN_OVER_LIMIT")]
    pub stop_increment_when_over_limit: Option<bool>,
    /// Memory for the local over-limit cache: descriptors over their limit are answered
    /// without the store until their denial ends; 0 disables it [default: 0]
    /// (also LOCAL_CACHE_SIZE_IN_BYTES)
    #[arg(long, value_name = "BYTES", env = "SLUICE_LOCAL_CACHE_SIZE_BYTES")]
    pub local_cache_size_bytes: Option<usize>,
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
    pub telemetry: TelemetryArgs,
    #[command(flatten)]
    pub listen: ListenArgs,
    #[command(flatten)]
    pub caps: CapArgs,
    #[command(flatten)]
    pub consistency: ConsistencyArgs,
    #[command(flatten)]
    pub rlqs: RlqsArgs,
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
