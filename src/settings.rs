//! Command line and environment → one [`Settings`].
//!
//! Every setting is declared once, as a field of a `settings!` struct (`declare.rs`): its
//! flag, its `SLUICE_*` variable (the flag's name in upper case), envoyproxy/ratelimit's
//! variables that also set it and how their values map, its default, its parser and its
//! help (the field's doc comment). clap's arguments, `--help`, the settings reference's tables of
//! settings and the audit of the reference's variables (`audit`) are read from those declarations.
//!
//! Precedence for every setting: its flag, then its `SLUICE_*` variable, then their
//! variable (so their manifests work unchanged), then the default. The environment is a
//! lookup the caller passes ([`Env`]): [`resolve`] (the binary's whole command line) and
//! [`Settings::resolve`] (`serve`'s arguments) read it the same way for every command, so a
//! test resolves `SLUICE_*` and the reference's variables from a map, without the process's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use decl::{RefVar, Setting};
use declare::settings;
use env::host_port;
use resolver::Resolver;

pub mod audit;
mod caps;
mod cli;
mod consistency;
mod decision;
mod decl;
mod declare;
mod env;
mod explain;
mod listen;
mod logging;
mod parse;
mod query;
mod redis;
mod redis_input;
mod redis_url;
mod ref_var;
mod resolver;
mod rlqs;
mod rules;
mod telemetry;
mod top;
mod top_args;
mod trace;
mod values;
mod xds;

pub use self::redis::{RedisSettings, RedisTlsFiles, TimeSource};
pub use caps::Caps;
pub use cli::{CheckArgs, CheckSettings, Error, Invocation, invocation, resolve};
pub use consistency::{ConsistencySettings, StoreFailureMode};
pub use decision::{
    DecisionSettings, HeaderSettings, HeaderStyle, RequestHeaderSettings, RequestLimits,
};
pub use env::{Env, process as process_env};
pub use explain::{ExplainArgs, ExplainSettings};
pub use listen::{GrpcTlsSettings, ListenSettings};
pub use logging::{LogFormat, log_colour};
pub use parse::{SettingsError, parse_addr, parse_bool, parse_duration};
pub use query::QueryArgs;
pub use redis_url::RedisType;
pub use resolver::{Given, Source};
pub use rlqs::RlqsSettings;
pub use telemetry::{Mogrifier, StatsdProtocol, StatsdSettings, TelemetrySettings};
pub use top::TopSettings;
pub use top_args::{TopArgs, TopBy, TopQuerySettings};
pub use trace::{TracingProtocol, TracingSettings};
pub use xds::{ConfigSource, XdsBackoff, XdsSettings, XdsTls};
// The operator tools' descriptor syntax, re-exported for `client` (which uses `settings`).
pub use crate::limit::{Descriptor, parse_descriptor};

use parse::err;

/// The admin listener; `--admin-addr` set (flag or variable) makes a taken port fatal.
static ADMIN_ADDR: Setting<Option<SocketAddr>> =
    Setting::value("admin-addr", "ADDR|off", values::address_or_off)
        .default("127.0.0.1:8082")
        .help(
            "Admin listener (a descriptor's state: GET to peek, DELETE to reset; a domain's heavy \
             hitters: /top; no authentication, see the admin listener's security notes before \
             exposing it), or \
             `off`. At the default, a port already taken (a second instance on the host) is a \
             warning and sluice runs without it; an address set here that cannot be used stops \
             startup",
        )
        .see("[Operator's tools](../how-to/inspect-and-reset.md)");

settings! {
    /// Everything `serve` needs, resolved.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Settings {
        pub config_paths: Vec<PathBuf> = shared(rules::CONFIG),
        /// What named `config_paths` (`--config`, `SLUICE_CONFIG`, their `RUNTIME_*`, the
        /// default), for the startup log; beside their `RUNTIME_*`, a note names both.
        pub config_from: String = with(rules::config_from),
        pub merge_domains: bool = shared(rules::MERGE_DOMAINS),
        pub sanitize_metric_dots: bool = shared(rules::SANITIZE_METRIC_DOTS),
        /// Watch config paths and reload when they change
        pub watch_config: bool = setting(Setting::switch("watch-config").default("true")),
        /// gRPC listen address
        pub grpc_addr: SocketAddr = setting(
            Setting::value("grpc-addr", "ADDR", values::address)
                .default("0.0.0.0:8081")
                .map(|env| host_port(env, "GRPC_HOST", "GRPC_PORT", 8081))
                .ref_var(RefVar::new("GRPC_HOST", "127.0.0.1").does("host of the gRPC listener (`--grpc-addr`)"))
                .ref_var(RefVar::new("GRPC_PORT", "9081").does("port of the gRPC listener (`--grpc-addr`), 8081"))
        ),
        /// Serve gRPC on this unix domain socket instead of `--grpc-addr` (the socket file is
        /// created at startup, a stale one from a crashed run replaced, and removed on exit)
        pub grpc_uds: Option<PathBuf> = setting(
            Setting::value("grpc-uds", "PATH", values::some_path)
                .shown_default("off")
                .see("[gRPC on a unix socket](../how-to/tls-and-connections.md#grpc-on-a-unix-socket)")
                .same(RefVar::new("GRPC_UDS", "/run/ratelimit.sock").does(
                    "serve gRPC on this unix socket instead of `GRPC_HOST`/`GRPC_PORT` \
                     (`--grpc-uds`)",
                ))
        ),
        /// HTTP listen address for /healthcheck, /json, /metrics, /rlconfig
        pub http_addr: SocketAddr = setting(
            Setting::value("http-addr", "ADDR", values::address)
                .default("0.0.0.0:8080")
                .map(|env| host_port(env, "HOST", "PORT", 8080))
                .ref_var(RefVar::new("HOST", "127.0.0.1").does("host of the HTTP listener (`--http-addr`)"))
                .ref_var(RefVar::new("PORT", "9080").does("port of the HTTP listener (`--http-addr`), 8080"))
        ),
        /// Separate listener for Prometheus metrics
        pub metrics_addr: Option<SocketAddr> = setting(
            Setting::value("metrics-addr", "ADDR", values::some_address)
                .shown_default("off")
                .map(prometheus_addr)
                .shown_vars("`USE_PROMETHEUS` + `PROMETHEUS_ADDR` (`:9090`)")
                .ref_var(RefVar::new("USE_PROMETHEUS", "true").does(
                    "a separate metrics listener at `PROMETHEUS_ADDR` (`--metrics-addr`); the \
                     HTTP port serves `/metrics` anyway",
                ))
                .ref_var(RefVar::new("PROMETHEUS_ADDR", ":9191").with(&[("USE_PROMETHEUS", "true")]).does(
                    "address of the metrics listener `USE_PROMETHEUS` opens, `:9090`",
                ))
        ),
        /// Path of the metrics endpoint on the separate listener
        pub metrics_path: String = setting(
            Setting::value("metrics-path", "PATH", metrics_path)
                .default("/metrics")
                .same(RefVar::new("PROMETHEUS_PATH", "/prom").does(
                    "path of metrics on the `USE_PROMETHEUS` listener (`--metrics-path`), `/metrics`",
                ))
        ),
        pub admin_addr: Option<SocketAddr> = shared(ADMIN_ADDR),
        /// `admin_addr` was chosen (flag or `SLUICE_ADMIN_ADDR`): a taken port stops startup.
        /// At the default, a taken port only costs the admin listener (a second instance on
        /// the host, set up with envoyproxy/ratelimit's variables, still starts).
        pub admin_addr_explicit: bool = with(|r| Ok(r.given(&ADMIN_ADDR)?.by_sluice())),
        /// `None`: the in-memory store.
        pub redis: Option<RedisSettings> = with(self::redis::resolve, redis_input::RedisInput),
        pub decision: DecisionSettings = group(),
        /// Memory for the local over-limit cache, in bytes: descriptors over their limit are
        /// answered without the store until their denial ends; 0 disables it
        pub local_cache_bytes: usize = setting(
            Setting::value("local-cache-size-bytes", "BYTES", values::number)
                .default("0")
                .shown_default("0 (off)")
                .same(RefVar::new("LOCAL_CACHE_SIZE_IN_BYTES", "1048576"))
        ),
        /// Rule file size, memory store state.
        pub caps: Caps = group(),
        /// Most series per per-rule metric family; the rest fold into one overflow series
        pub metrics_max_series: usize = setting(
            Setting::value("metrics-max-series", "N", values::positive)
                .default("10000")
                .shown_default("10 000")
        ),
        /// Default consistency, batching and the store-failure fallback.
        pub consistency: ConsistencySettings = group(),
        /// Log level: trace, debug, info, warn, error (RUST_LOG filters win when set)
        pub log_level: String = setting(
            Setting::value("log-level", "LEVEL", logging::log_level)
                .default("info")
                .same(RefVar::new("LOG_LEVEL", "debug").does(
                    "`--log-level`; their `fatal` and `panic` mean `error`",
                ))
        ),
        /// Log format: text or json
        pub log_format: LogFormat = setting(
            Setting::value("log-format", "FORMAT", logging::log_format)
                .values(&["text", "json"])
                .default("text")
                .same(RefVar::new("LOG_FORMAT", "json"))
        ),
        /// Threads serving requests (unset: one per CPU available to the process; with one,
        /// everything runs on a single-threaded runtime, the least CPU per call)
        pub worker_threads: Option<usize> = setting(
            Setting::value("worker-threads", "N", |s| values::positive(s).map(Some))
                .shown_default("CPUs available")
        ),
        // Why 5s by default: a rolling restart behind Envoy fails checks unless Envoy has
        // taken the instance out before its listener closes. The examples' gRPC health check
        // (examples/envoy.yaml: interval 1s, unhealthy_threshold 2) notices within 2s plus
        // two round trips; Kubernetes removes a terminating pod from its Services within a
        // second or two. 5s covers both with room on a loaded node, and costs only a later
        // exit (docs/how-to/deploy-and-restart.md).
        /// On SIGTERM: keep serving this long with health NOT_SERVING before closing the
        /// listeners, so load balancers and Envoy's health checks stop sending first
        pub shutdown_delay: Duration = setting(
            Setting::value("shutdown-delay", "DURATION", values::duration).default("5s")
        ),
        /// On SIGTERM, after the delay: longest wait for in-flight requests before exiting
        pub shutdown_grace: Duration = setting(
            Setting::value("shutdown-grace", "DURATION", values::duration).default("10s")
        ),
        /// The quota service (RLQS, `settings/rlqs.rs`).
        pub rlqs: RlqsSettings = group(),
        /// Heavy hitters (`settings/top.rs`).
        pub top: TopSettings = group(),
        /// Unhealthy while no domain is loaded
        pub healthy_requires_config: bool = setting(
            Setting::ref_only(values::boolean)
                .default("false")
                .same(RefVar::new("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true"))
        ),
        /// Files at `config_paths` (the default) or an xDS server (CONFIG_TYPE=GRPC_XDS_SOTW).
        pub config_source: ConfigSource = with(xds::source, xds::SourceInput, XdsSettings),
        /// With xDS: serve before the first config arrives (calls fail with "no rate limit
        /// configuration loaded" until it does) instead of waiting for it
        pub force_start_without_initial_config: bool = setting(
            Setting::ref_only(values::boolean)
                .default("false")
                .same(RefVar::new("FORCE_START_WITHOUT_INITIAL_CONFIG", "true"))
        ),
        /// statsd, the Prometheus mapping file and tracing (`settings/telemetry.rs`).
        pub telemetry: TelemetrySettings = group(),
        /// gRPC TLS, the debug listener, connection timeouts and caps.
        pub listen: ListenSettings = group(),
        /// Notes on the reference's variables that have no effect here (`settings/audit`) and on
        /// ignored combinations, logged once at startup.
        pub notes: Vec<String> = with(|r| Ok(r.take_notes())),
    }
}

impl Settings {
    /// `sluice serve ARGS` under the environment `env`: the settings the binary would serve
    /// with. `args` are what follows `serve`; `env` is read for `SLUICE_*` and their
    /// variables alike, and nothing else is.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use sluice::settings::Settings;
    ///
    /// let env = HashMap::from([("SLUICE_SHADOW_MODE", "true"), ("GRPC_PORT", "9081")]);
    /// let lookup = |name: &str| env.get(name).map(|v| v.to_string());
    /// let s = Settings::resolve(["--http-addr", "127.0.0.1:0"], &lookup).unwrap();
    /// assert!(s.decision.shadow_mode);
    /// assert_eq!(s.grpc_addr.port(), 9081);
    /// assert_eq!(s.http_addr.port(), 0);
    /// ```
    pub fn resolve<I, S>(args: I, env: Env<'_>) -> Result<Settings, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString>,
    {
        cli::serve(args, env)
    }

    /// The settings, with what spans groups: the store's reference keys reach the decision,
    /// the reference's variables sluice refuses stop it, and those with no effect are noted.
    fn from_command_line(r: &Resolver<'_>) -> Result<Settings, SettingsError> {
        let mut s = <Settings as resolver::Group>::from_resolver(r)?;
        s.decision.reference_keys = s
            .redis
            .as_ref()
            .is_some_and(|r| r.main.reference_prefix.is_some());
        audit::refuse(r.env())?;
        audit::note(r.env(), &mut s.notes);
        Ok(s)
    }
}

fn metrics_path(s: &str) -> Result<String, String> {
    if !s.starts_with('/') {
        return Err("must start with '/'".into());
    }
    Ok(s.to_owned())
}

/// The reference's Prometheus endpoint: a separate listener that `USE_PROMETHEUS` turns on.
fn prometheus_addr(env: Env<'_>) -> Result<Option<Option<SocketAddr>>, SettingsError> {
    if !env::bool_var(env, "USE_PROMETHEUS")?.unwrap_or(false) {
        return Ok(None);
    }
    let addr = env::var(env, "PROMETHEUS_ADDR").unwrap_or_else(|| ":9090".into());
    values::address(&addr)
        .map(|a| Some(Some(a)))
        .map_err(|m| err("PROMETHEUS_ADDR", m))
}

#[cfg(test)]
mod readme;
#[cfg(test)]
mod tests;
