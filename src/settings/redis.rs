//! The Redis settings: the `--redis-*` flags and `SLUICE_REDIS_*` variables, or
//! envoyproxy/ratelimit's `REDIS_*` variables (their URL format, socket type, auth, TLS,
//! sentinel and per-second pool), resolved into one [`RedisSettings`]. URL forms are in
//! `redis_url.rs`.
//!
//! One TLS configuration (CA, client certificate, hostname check) serves every Redis
//! connection, main and per-second, as in theirs.

use std::path::PathBuf;

use super::env::{Env, bool_var, num_var, var};
use super::redis_url::{RedisType, Target, check_url, target_urls};
use super::*;

pub use crate::store::redis::TimeSource;

fn parse_time_source(s: &str) -> Result<TimeSource, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "redis" => Ok(TimeSource::Redis),
        "local" => Ok(TimeSource::Local),
        _ => Err(format!("'{s}' is not redis or local")),
    }
}

/// The `--redis-*` flags of `serve`.
#[derive(Debug, Args)]
pub struct RedisArgs {
    /// Redis URL: redis://host:port/db, rediss://… (TLS), unix:///path; comma-separated node
    /// list for a cluster; `master,host:port,...` (sentinel addresses) for sentinel. Without
    /// it the in-memory store is used (also REDIS_URL with REDIS_SOCKET_TYPE, REDIS_AUTH,
    /// REDIS_TLS)
    #[arg(long, value_name = "URL", env = "SLUICE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// single, cluster or sentinel [default: single] (also REDIS_TYPE)
    #[arg(long, value_enum, env = "SLUICE_REDIS_TYPE")]
    pub redis_type: Option<RedisType>,
    /// Redis connections kept open (multiplexed) [default: 4] (also REDIS_POOL_SIZE)
    #[arg(long, value_name = "N", env = "SLUICE_REDIS_POOL_SIZE")]
    pub redis_pool_size: Option<usize>,
    /// Deadline of a call's Redis work when the call carries no deadline of its own (with a
    /// grpc-timeout, as Envoy always sends, what that leaves is the deadline); past it the
    /// call fails with UNAVAILABLE [default: 1s]
    #[arg(long, value_name = "DURATION", env = "SLUICE_REDIS_TIMEOUT")]
    pub redis_timeout: Option<String>,
    /// Deadline to establish a Redis connection [default: 1s] (also REDIS_TIMEOUT)
    #[arg(long, value_name = "DURATION", env = "SLUICE_REDIS_CONNECT_TIMEOUT")]
    pub redis_connect_timeout: Option<String>,
    /// Clock the Redis scripts use [default: redis]
    #[arg(long, value_name = "redis|local", value_parser = parse_time_source, env = "SLUICE_REDIS_TIME_SOURCE")]
    pub redis_time_source: Option<TimeSource>,
    /// Count envoy-compatible fixed windows exactly as envoyproxy/ratelimit does, with its
    /// pipelined INCRBY + EXPIRE under its key names, so both can share one Redis during a
    /// migration; requires --redis-time-source local [default: false]
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_REDIS_REFERENCE_KEYS")]
    pub redis_reference_keys: Option<bool>,
    /// Prefix of every Redis key [default: sluice:] (also CACHE_KEY_PREFIX)
    #[arg(long, value_name = "PREFIX", env = "SLUICE_CACHE_KEY_PREFIX")]
    pub cache_key_prefix: Option<String>,
    /// Password, or user:password, of the master found through sentinel (other URLs carry
    /// their own) (also REDIS_AUTH)
    #[arg(long, value_name = "AUTH", env = "SLUICE_REDIS_AUTH")]
    pub redis_auth: Option<String>,
    /// TLS for sentinel host:port addresses and their master [default: false] (also REDIS_TLS)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_REDIS_TLS")]
    pub redis_tls: Option<bool>,
    /// Password, or user:password, of the sentinels (also REDIS_SENTINEL_AUTH)
    #[arg(long, value_name = "AUTH", env = "SLUICE_REDIS_SENTINEL_AUTH")]
    pub redis_sentinel_auth: Option<String>,
    /// PEM CA bundle that signs the Redis servers' certificates (a private CA) [default: the
    /// Mozilla roots] (also REDIS_TLS_CACERT)
    #[arg(long, value_name = "PATH", env = "SLUICE_REDIS_TLS_CA_CERT")]
    pub redis_tls_ca_cert: Option<PathBuf>,
    /// PEM client certificate chain for Redis servers that require one (also REDIS_TLS_CLIENT_CERT)
    #[arg(long, value_name = "PATH", env = "SLUICE_REDIS_TLS_CLIENT_CERT")]
    pub redis_tls_client_cert: Option<PathBuf>,
    /// PEM private key of the client certificate (also REDIS_TLS_CLIENT_KEY)
    #[arg(long, value_name = "PATH", env = "SLUICE_REDIS_TLS_CLIENT_KEY")]
    pub redis_tls_client_key: Option<PathBuf>,
    /// Accept a Redis certificate issued for another name; the chain is still verified
    /// [default: false] (also REDIS_TLS_SKIP_HOSTNAME_VERIFICATION)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")]
    pub redis_tls_skip_hostname_verification: Option<bool>,
    /// How long Redis may refuse every write (OOM, READONLY, MISCONF…) before health turns
    /// NOT_SERVING [default: 1s]
    #[arg(long, value_name = "DURATION", env = "SLUICE_REDIS_REFUSAL_GRACE")]
    pub redis_refusal_grace: Option<String>,

    /// A second Redis for limits whose unit is SECOND, same forms as --redis-url (also
    /// REDIS_PERSECOND=true with REDIS_PERSECOND_URL)
    #[arg(long, value_name = "URL", env = "SLUICE_REDIS_PER_SECOND_URL")]
    pub redis_per_second_url: Option<String>,
    /// Type of the per-second Redis [default: single] (also REDIS_PERSECOND_TYPE)
    #[arg(long, value_enum, env = "SLUICE_REDIS_PER_SECOND_TYPE")]
    pub redis_per_second_type: Option<RedisType>,
    /// Connections to the per-second Redis [default: 4] (also REDIS_PERSECOND_POOL_SIZE)
    #[arg(long, value_name = "N", env = "SLUICE_REDIS_PER_SECOND_POOL_SIZE")]
    pub redis_per_second_pool_size: Option<usize>,
    /// Deadline to connect to the per-second Redis [default: as --redis-connect-timeout]
    /// (also REDIS_PERSECOND_TIMEOUT)
    #[arg(
        long,
        value_name = "DURATION",
        env = "SLUICE_REDIS_PER_SECOND_CONNECT_TIMEOUT"
    )]
    pub redis_per_second_connect_timeout: Option<String>,
    /// Master auth of a per-second sentinel deployment (also REDIS_PERSECOND_AUTH)
    #[arg(long, value_name = "AUTH", env = "SLUICE_REDIS_PER_SECOND_AUTH")]
    pub redis_per_second_auth: Option<String>,
    /// TLS for per-second sentinel host:port addresses (also REDIS_PERSECOND_TLS)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_REDIS_PER_SECOND_TLS")]
    pub redis_per_second_tls: Option<bool>,
    /// Sentinel auth of the per-second Redis (also REDIS_PERSECOND_SENTINEL_AUTH)
    #[arg(
        long,
        value_name = "AUTH",
        env = "SLUICE_REDIS_PER_SECOND_SENTINEL_AUTH"
    )]
    pub redis_per_second_sentinel_auth: Option<String>,
}

/// Certificate files of Redis TLS (shared by the main and per-second Redis).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedisTlsFiles {
    pub ca_cert: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub skip_hostname_verification: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RedisSettings {
    /// Single: one URL; cluster: the seed nodes; sentinel: the sentinels' URLs.
    pub urls: Vec<String>,
    pub redis_type: RedisType,
    /// Sentinel: the master's name and auth.
    pub sentinel_master: Option<String>,
    pub master_auth: Option<String>,
    pub pool_size: usize,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub time_source: TimeSource,
    /// `None`: the store's default (`sluice:`).
    pub key_prefix: Option<String>,
    /// `--redis-reference-keys` (time source local, no per-second Redis).
    pub reference_keys: bool,
    pub tls: RedisTlsFiles,
    pub refusal_grace: Duration,
    /// The Redis of per-second limits (`REDIS_PERSECOND`); it shares the key prefix, time
    /// source, request timeout and TLS files of the main one.
    pub per_second: Option<Box<RedisSettings>>,
}

pub(super) fn resolve_redis(
    args: &RedisArgs,
    env: Env<'_>,
) -> Result<Option<RedisSettings>, SettingsError> {
    match var(env, "BACKEND_TYPE").map(|b| b.trim().to_ascii_lowercase()) {
        None => {}
        Some(b) if b == "redis" || b == "memory" => {}
        Some(b) if b == "memcache" => {
            return Err(err(
                "BACKEND_TYPE",
                "memcache is not supported: it has no server-side scripts, so a request's limits \
                 could not be decided atomically; use redis (REDIS_URL) or the in-memory store",
            ));
        }
        Some(b) => {
            return Err(err(
                "BACKEND_TYPE",
                format!("unknown backend '{b}' (redis or memory)"),
            ));
        }
    }
    let main_args = Target {
        flag: "--redis",
        env: "REDIS",
        url: args.redis_url.as_deref(),
        redis_type: args.redis_type,
        auth: args.redis_auth.as_deref(),
        tls: args.redis_tls,
        sentinel_auth: args.redis_sentinel_auth.as_deref(),
        default_socket: "/var/run/nutcracker/ratelimit.sock",
    };
    let backend_redis =
        var(env, "BACKEND_TYPE").is_some_and(|b| b.trim().eq_ignore_ascii_case("redis"));
    let Some(main) = target_urls(&main_args, env, backend_redis)? else {
        return Ok(None);
    };
    let pool_size = pool(
        args.redis_pool_size,
        env,
        "REDIS_POOL_SIZE",
        "--redis-pool-size",
    )?;
    let request_timeout = match &args.redis_timeout {
        Some(t) => parse_duration("--redis-timeout", t)?,
        None => crate::store::redis::DEFAULT_REQUEST_TIMEOUT,
    };
    if request_timeout.is_zero() {
        return Err(err("--redis-timeout", "must be greater than 0"));
    }
    let connect_timeout = match &args.redis_connect_timeout {
        Some(t) => parse_duration("--redis-connect-timeout", t)?,
        // Their REDIS_TIMEOUT is a dial timeout, so it maps here, not to the request deadline.
        None => match var(env, "REDIS_TIMEOUT") {
            Some(t) => parse_duration("REDIS_TIMEOUT", &t)?,
            None => Duration::from_secs(1),
        },
    };
    let key_prefix = args
        .cache_key_prefix
        .clone()
        .or_else(|| var(env, "CACHE_KEY_PREFIX"));
    if key_prefix
        .as_deref()
        .is_some_and(|p| p.contains(['{', '}']))
    {
        return Err(err(
            "--cache-key-prefix",
            "must not contain '{' or '}' (it would change the Redis Cluster hash slot)",
        ));
    }
    let refusal_grace = match &args.redis_refusal_grace {
        Some(g) => parse_duration("--redis-refusal-grace", g)?,
        None => Duration::from_secs(1),
    };
    let mut settings = RedisSettings {
        urls: main.urls,
        redis_type: main.redis_type,
        sentinel_master: main.sentinel_master,
        master_auth: main.master_auth,
        pool_size,
        request_timeout,
        connect_timeout,
        time_source: args.redis_time_source.unwrap_or(TimeSource::Redis),
        key_prefix,
        reference_keys: args.redis_reference_keys.unwrap_or(false),
        tls: tls_files(args, env)?,
        refusal_grace,
        per_second: None,
    };
    settings.per_second = per_second(args, env, &settings)?.map(Box::new);
    if settings.reference_keys {
        // Their clock is the server's own: a count shared with their pods must start its
        // windows at the same instants, which the Redis clock inside a script would not.
        if settings.time_source != TimeSource::Local {
            return Err(err(
                "--redis-reference-keys",
                "requires --redis-time-source local (envoyproxy/ratelimit reads its own \
                 clock, so windows shared with it must be timed by sluice's)",
            ));
        }
        if settings.per_second.is_some() {
            return Err(err(
                "--redis-reference-keys",
                "is not supported with a per-second Redis (--redis-per-second-url, \
                 REDIS_PERSECOND)",
            ));
        }
    }
    check_tls(&settings)?;
    Ok(Some(settings))
}

fn pool(
    flag: Option<usize>,
    env: Env<'_>,
    var_name: &str,
    flag_name: &str,
) -> Result<usize, SettingsError> {
    let n = match flag {
        Some(n) => n,
        None => num_var(env, var_name)?.unwrap_or(4),
    };
    if n == 0 {
        return Err(err(flag_name, "must be at least 1"));
    }
    Ok(n)
}

/// The per-second Redis: `--redis-per-second-url`, or `REDIS_PERSECOND=true` with their
/// `REDIS_PERSECOND_*` variables (their default socket when no URL is given).
fn per_second(
    args: &RedisArgs,
    env: Env<'_>,
    main: &RedisSettings,
) -> Result<Option<RedisSettings>, SettingsError> {
    let target = Target {
        flag: "--redis-per-second",
        env: "REDIS_PERSECOND",
        url: args.redis_per_second_url.as_deref(),
        redis_type: args.redis_per_second_type,
        auth: args.redis_per_second_auth.as_deref(),
        tls: args.redis_per_second_tls,
        sentinel_auth: args.redis_per_second_sentinel_auth.as_deref(),
        default_socket: "/var/run/nutcracker/ratelimitpersecond.sock",
    };
    let enabled =
        args.redis_per_second_url.is_some() || bool_var(env, "REDIS_PERSECOND")?.unwrap_or(false);
    if !enabled {
        return Ok(None);
    }
    let Some(urls) = target_urls(&target, env, true)? else {
        return Ok(None);
    };
    let connect_timeout = match &args.redis_per_second_connect_timeout {
        Some(t) => parse_duration("--redis-per-second-connect-timeout", t)?,
        None => match var(env, "REDIS_PERSECOND_TIMEOUT") {
            Some(t) => parse_duration("REDIS_PERSECOND_TIMEOUT", &t)?,
            None => main.connect_timeout,
        },
    };
    Ok(Some(RedisSettings {
        urls: urls.urls,
        redis_type: urls.redis_type,
        sentinel_master: urls.sentinel_master,
        master_auth: urls.master_auth,
        pool_size: pool(
            args.redis_per_second_pool_size,
            env,
            "REDIS_PERSECOND_POOL_SIZE",
            "--redis-per-second-pool-size",
        )?,
        connect_timeout,
        per_second: None,
        ..main.clone()
    }))
}

fn tls_files(args: &RedisArgs, env: Env<'_>) -> Result<RedisTlsFiles, SettingsError> {
    let path = |flag: &Option<PathBuf>, name: &str| {
        flag.clone().or_else(|| var(env, name).map(PathBuf::from))
    };
    let files = RedisTlsFiles {
        ca_cert: path(&args.redis_tls_ca_cert, "REDIS_TLS_CACERT"),
        client_cert: path(&args.redis_tls_client_cert, "REDIS_TLS_CLIENT_CERT"),
        client_key: path(&args.redis_tls_client_key, "REDIS_TLS_CLIENT_KEY"),
        skip_hostname_verification: match args.redis_tls_skip_hostname_verification {
            Some(b) => b,
            None => bool_var(env, "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")?.unwrap_or(false),
        },
    };
    if files.client_cert.is_some() != files.client_key.is_some() {
        return Err(err(
            "--redis-tls-client-cert",
            "a client certificate and its key go together (REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY)",
        ));
    }
    Ok(files)
}

/// TLS files without any TLS connection are a mistake worth stopping for (a private CA that
/// is silently unused is how plaintext goes to production); `#insecure` is refused.
fn check_tls(s: &RedisSettings) -> Result<(), SettingsError> {
    let all: Vec<&String> = s
        .urls
        .iter()
        .chain(s.per_second.iter().flat_map(|p| p.urls.iter()))
        .collect();
    for u in &all {
        check_url(u)?;
    }
    let tls = all.iter().any(|u| u.starts_with("rediss://"));
    let files = &s.tls;
    if !tls
        && (files.ca_cert.is_some()
            || files.client_cert.is_some()
            || files.skip_hostname_verification)
    {
        return Err(err(
            "--redis-tls-ca-cert",
            "Redis TLS files or options are set but no Redis connection uses TLS \
             (use rediss:// URLs or REDIS_TLS=true)",
        ));
    }
    Ok(())
}
