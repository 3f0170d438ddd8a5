//! Resolution of `serve` arguments, including envoyproxy/ratelimit's variable names.

use std::path::PathBuf;

use super::env::{Env, bool_var, host_port, num_var, var};
use super::redis::resolve_redis;
use super::xds::resolve_config_source;
use super::*;

pub(super) fn resolve(args: &ServeArgs, env: Env<'_>) -> Result<Settings, SettingsError> {
    let mut s = Settings::default();

    // Config paths: flag, else RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY (their
    // layout: the rule files live in ROOT/SUBDIRECTORY/APPDIRECTORY), else ./config.
    if !args.config.is_empty() {
        s.config_paths = args.config.clone();
    } else if let Some(dir) = runtime_dir(env) {
        s.config_paths = vec![dir];
    }
    s.merge_domains = match args.merge_domains {
        Some(b) => b,
        None => bool_var(env, "MERGE_DOMAIN_CONFIG")?.unwrap_or(false),
    };
    s.watch_config = args.watch_config.unwrap_or(true);
    s.config_source = resolve_config_source(args, env, &mut s.notes)?;
    s.force_start_without_initial_config =
        bool_var(env, "FORCE_START_WITHOUT_INITIAL_CONFIG")?.unwrap_or(false);

    s.grpc_addr = match &args.grpc_addr {
        Some(a) => parse_addr("--grpc-addr", a)?,
        None => host_port(env, "GRPC_HOST", "GRPC_PORT", 8081)?.unwrap_or(s.grpc_addr),
    };
    s.http_addr = match &args.http_addr {
        Some(a) => parse_addr("--http-addr", a)?,
        None => host_port(env, "HOST", "PORT", 8080)?.unwrap_or(s.http_addr),
    };
    s.metrics_addr = match &args.metrics_addr {
        Some(a) => Some(parse_addr("--metrics-addr", a)?),
        // Their Prometheus endpoint is a separate listener enabled by USE_PROMETHEUS.
        None if bool_var(env, "USE_PROMETHEUS")?.unwrap_or(false) => Some(parse_addr(
            "PROMETHEUS_ADDR",
            &var(env, "PROMETHEUS_ADDR").unwrap_or_else(|| ":9090".into()),
        )?),
        None => None,
    };
    s.metrics_path = args
        .metrics_path
        .clone()
        .or_else(|| var(env, "PROMETHEUS_PATH"))
        .unwrap_or(s.metrics_path);
    if !s.metrics_path.starts_with('/') {
        return Err(err("--metrics-path", "must start with '/'"));
    }
    s.admin_addr = match args.admin_addr.as_deref().map(str::trim) {
        None => s.admin_addr,
        Some("off") => None,
        Some(a) => Some(parse_addr("--admin-addr", a)?),
    };
    s.admin_addr_explicit = args.admin_addr.is_some();

    s.redis = resolve_redis(&args.redis, env)?;

    let d = &mut s.decision;
    d.reference_keys = s.redis.as_ref().is_some_and(|r| r.reference_keys);
    d.shadow_mode = match args.shadow_mode {
        Some(b) => b,
        None => bool_var(env, "SHADOW_MODE")?.unwrap_or(false),
    };
    d.quota_mode = match args.quota_mode {
        Some(b) => b,
        None => bool_var(env, "QUOTA_MODE")?.unwrap_or(false),
    };
    d.stop_increment = match args.stop_increment_when_over_limit {
        Some(b) => b,
        None => bool_var(env, "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT")?.unwrap_or(false),
    };
    s.local_cache_bytes = match args.local_cache_size_bytes {
        Some(b) => b,
        None => num_var(env, "LOCAL_CACHE_SIZE_IN_BYTES")?.unwrap_or(0),
    };
    d.near_limit_ratio = match args.near_limit_ratio {
        Some(r) => r,
        None => num_var(env, "NEAR_LIMIT_RATIO")?.unwrap_or(0.8),
    };
    if !(0.0..=1.0).contains(&d.near_limit_ratio) {
        return Err(err("--near-limit-ratio", "must be between 0 and 1"));
    }
    let h = &mut d.headers;
    h.enabled = match args.response_headers {
        Some(b) => b,
        None => bool_var(env, "LIMIT_RESPONSE_HEADERS_ENABLED")?.unwrap_or(false),
    };
    h.style = args.response_headers_style.unwrap_or(HeaderStyle::Draft03);
    h.retry_after = args.retry_after_header.unwrap_or(false);
    if let Some(v) = var(env, "LIMIT_LIMIT_HEADER") {
        h.limit_header = v;
    }
    if let Some(v) = var(env, "LIMIT_REMAINING_HEADER") {
        h.remaining_header = v;
    }
    if let Some(v) = var(env, "LIMIT_RESET_HEADER") {
        h.reset_header = v;
    }
    d.dynamic_metadata = match args.response_dynamic_metadata {
        Some(b) => b,
        None => bool_var(env, "RESPONSE_DYNAMIC_METADATA")?.unwrap_or(false),
    };
    let l = &mut d.limits;
    l.max_descriptors = args.max_descriptors.unwrap_or(l.max_descriptors);
    l.max_entries = args.max_entries.unwrap_or(l.max_entries);
    l.max_key_bytes = args.max_key_bytes.unwrap_or(l.max_key_bytes);
    l.max_value_bytes = args.max_value_bytes.unwrap_or(l.max_value_bytes);
    l.max_hits_addend = args.max_hits_addend.unwrap_or(l.max_hits_addend);

    s.metrics_max_series = args.metrics_max_series.unwrap_or(s.metrics_max_series);
    if s.metrics_max_series == 0 {
        return Err(err("--metrics-max-series", "must be at least 1"));
    }
    s.log_level = match &args.log_level {
        Some(l) => l.clone(),
        None => var(env, "LOG_LEVEL").unwrap_or(s.log_level),
    };
    s.log_level = normalize_level(&s.log_level)?;
    s.log_format = match args.log_format {
        Some(f) => f,
        None => match var(env, "LOG_FORMAT").as_deref().map(str::trim) {
            None => LogFormat::Text,
            Some(f) if f.eq_ignore_ascii_case("json") => LogFormat::Json,
            Some(f) if f.eq_ignore_ascii_case("text") => LogFormat::Text,
            Some(f) => return Err(err("LOG_FORMAT", format!("'{f}' is not text or json"))),
        },
    };
    if let Some(g) = &args.shutdown_grace {
        s.shutdown_grace = parse_duration("--shutdown-grace", g)?;
    }
    if let Some(d) = &args.shutdown_delay {
        s.shutdown_delay = parse_duration("--shutdown-delay", d)?;
    }
    if args.worker_threads == Some(0) {
        return Err(err("--worker-threads", "must be at least 1"));
    }
    s.worker_threads = args.worker_threads;
    s.healthy_requires_config =
        bool_var(env, "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED")?.unwrap_or(false);
    s.listen = super::listen::resolve_listen(&args.listen, env, &mut s.notes)?;

    s.telemetry = super::telemetry::resolve(&args.telemetry, env)?;

    super::caps::resolve(&args.caps, &mut s)?;
    super::consistency::resolve(&args.consistency, &mut s)?;
    super::rlqs::resolve(&args.rlqs, &mut s)?;

    // Their variables sluice refuses or ignores: the lists in `audit`.
    super::audit::refuse(env)?;
    super::audit::note(env, &mut s.notes);
    Ok(s)
}

fn runtime_dir(env: Env<'_>) -> Option<PathBuf> {
    let root = var(env, "RUNTIME_ROOT");
    let sub = var(env, "RUNTIME_SUBDIRECTORY");
    let app = var(env, "RUNTIME_APPDIRECTORY");
    if root.is_none() && sub.is_none() && app.is_none() {
        return None;
    }
    let mut dir = PathBuf::from(root.unwrap_or_else(|| "/srv/runtime_data/current".into()));
    if let Some(sub) = sub {
        dir.push(sub);
    }
    dir.push(app.unwrap_or_else(|| "config".into()));
    Some(dir)
}

fn normalize_level(level: &str) -> Result<String, SettingsError> {
    let l = level.trim().to_ascii_lowercase();
    Ok(match l.as_str() {
        "trace" | "debug" | "info" | "error" => l,
        "warn" | "warning" => "warn".into(),
        // logrus levels above error have no tracing equivalent.
        "fatal" | "panic" => "error".into(),
        _ => {
            return Err(err(
                "--log-level",
                format!("'{level}' is not one of trace, debug, info, warn, error"),
            ));
        }
    })
}
