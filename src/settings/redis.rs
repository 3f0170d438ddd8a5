//! The Redis settings: the `--redis-*` flags and `SLUICE_REDIS_*` variables, or
//! envoyproxy/ratelimit's `REDIS_*` variables (their URL format, socket type, auth, TLS,
//! sentinel and per-second pool), resolved into one [`RedisSettings`]. URL forms are in
//! `redis_url.rs`.
//!
//! One TLS configuration (CA, client certificate, hostname check) serves every Redis
//! connection, main and per-second, as in theirs.

use std::path::PathBuf;
use std::time::Duration;

use super::decl::{Setting, Their};
use super::declare::settings;
use super::parse::{SettingsError, err};
use super::redis_url::{RedisType, SocketType, Target, check_url, redis_type, socket_type, target_urls};
use super::resolver::{Given, Group, Resolver, Value};
use super::values::{
    boolean, duration, one_of, positive, positive_duration, some_duration, some_path, some_text,
};

pub use crate::store::redis::TimeSource;

impl Value for TimeSource {}

fn time_source(s: &str) -> Result<TimeSource, String> {
    let names = [("redis", TimeSource::Redis), ("local", TimeSource::Local)];
    one_of(s, &names).ok_or_else(|| format!("'{s}' is not redis or local"))
}

/// Their `BACKEND_TYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Backend {
    Redis,
    Memory,
}

impl Value for Backend {}

fn backend(s: &str) -> Result<Option<Backend>, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "redis" => Ok(Some(Backend::Redis)),
        "memory" => Ok(Some(Backend::Memory)),
        "memcache" => Err(
            "memcache is not supported: it has no server-side scripts, so a request's limits \
             could not be decided atomically; use redis (REDIS_URL) or the in-memory store"
                .into(),
        ),
        b => Err(format!("unknown backend '{b}' (redis or memory)")),
    }
}

/// No `{` or `}`: they would move the keys' Redis Cluster hash slot.
fn key_prefix(s: &str) -> Result<Option<String>, String> {
    if s.contains(['{', '}']) {
        return Err("must not contain '{' or '}' (it would change the Redis Cluster hash slot)".into());
    }
    Ok(Some(s.to_owned()))
}

/// `--cache-key-prefix`, which `sluice explain` reads too.
pub(super) static CACHE_KEY_PREFIX: Setting<Option<String>> =
    Setting::value("cache-key-prefix", "PREFIX", key_prefix)
        .shown_default("`sluice:`")
        .help("Prefix of every Redis key (several deployments on one Redis)")
        .same(Their::new("CACHE_KEY_PREFIX", "rl:").with(REDIS).does(
            "prefix of every Redis key (`--cache-key-prefix`); unset: `sluice:`",
        ));

const REDIS: &[(&str, &str)] = &[("REDIS_URL", "redis.example:6379")];
const REDIS_TLS: &[(&str, &str)] = &[("REDIS_URL", "redis.example:6379"), ("REDIS_TLS", "true")];
const REDIS_MTLS: &[(&str, &str)] = &[
    ("REDIS_URL", "redis.example:6379"),
    ("REDIS_TLS", "true"),
    ("REDIS_TLS_CLIENT_CERT", "/redis/tls.crt"),
    ("REDIS_TLS_CLIENT_KEY", "/redis/tls.key"),
];
const SENTINEL: &[(&str, &str)] = &[
    ("REDIS_TYPE", "sentinel"),
    ("REDIS_URL", "mymaster,sentinel.example:26379"),
];
const PER_SECOND: &[(&str, &str)] = &[
    ("REDIS_URL", "redis.example:6379"),
    ("REDIS_PERSECOND", "true"),
    ("REDIS_PERSECOND_URL", "persecond.example:6380"),
];
const PER_SECOND_SENTINEL: &[(&str, &str)] = &[
    ("REDIS_URL", "redis.example:6379"),
    ("REDIS_PERSECOND", "true"),
    ("REDIS_PERSECOND_TYPE", "sentinel"),
    ("REDIS_PERSECOND_URL", "psmaster,sentinel.example:26379"),
];

settings! {
    /// The Redis flags and their variables, before they become a [`RedisSettings`].
    pub(super) struct RedisInput {
        /// Redis URL: redis://host:port/db, rediss://… (TLS), unix:///path; comma-separated
        /// node list for a cluster; `master,host:port,...` (sentinel addresses) for sentinel.
        /// Without it the in-memory store is used
        url: Given<Option<String>> = setting(
            Setting::value("redis-url", "URL", some_text)
                .shown_default("none (memory store)")
                .readme(
                    "`redis://[user:pass@]host:port[/db]`, `rediss://…`, `unix:///path`; \
                     comma-separated nodes for a cluster; `master,host:port,…` for sentinel",
                )
                .same(Their::new("REDIS_URL", "redis.example:6379").does(
                    "their forms (`host:port`, a socket path, `master,host:port,…`) or a URL \
                     (`--redis-url`); unset: the memory store",
                ))
        ),
        /// `redis` (their default socket when `REDIS_URL` is unset) or `memory`; `memcache`
        /// is refused: without server-side scripts a request's limits could not be decided
        /// atomically
        backend: Option<Backend> = setting(
            Setting::theirs_only(backend).same(Their::new("BACKEND_TYPE", "redis"))
        ),
        /// `tcp` or `unix`: how `REDIS_URL` is read (unset: by its form)
        socket: Option<SocketType> = setting(
            Setting::theirs_only(socket_type)
                .same(Their::new("REDIS_SOCKET_TYPE", "unix").with(REDIS))
        ),
        /// single, cluster or sentinel
        redis_type: Option<RedisType> = setting(
            Setting::value("redis-type", "TYPE", redis_type)
                .values(&["single", "cluster", "sentinel"])
                .shown_default("`single`")
                .same(Their::new("REDIS_TYPE", "cluster").with(REDIS))
        ),
        /// Connections kept open to Redis (multiplexed); requests fill one connection's next
        /// batch (16 requests) before spilling to the next, so Redis reads big batches
        pool_size: usize = setting(
            Setting::value("redis-pool-size", "N", positive)
                .default("4")
                .same(Their::new("REDIS_POOL_SIZE", "8").with(REDIS).does(
                    "multiplexed Redis connections (`--redis-pool-size`); unset: 4",
                ))
        ),
        /// Deadline of one Redis round trip; past it the request fails with UNAVAILABLE
        timeout: Duration = setting(
            Setting::value("redis-timeout", "DURATION", positive_duration).default("10ms")
        ),
        /// Deadline to establish a Redis connection
        connect_timeout: Duration = setting(
            Setting::value("redis-connect-timeout", "DURATION", duration)
                .default("1s")
                .same(Their::new("REDIS_TIMEOUT", "2s").with(REDIS).does(
                    "deadline to connect (`--redis-connect-timeout`), as theirs; a round \
                     trip's is `--redis-timeout`, 10ms",
                ))
        ),
        /// Clock the Redis scripts use: redis (scripts read `TIME`) or local (sluice's clock,
        /// for a Redis that forbids `TIME` in scripts)
        time_source: TimeSource = setting(
            Setting::value("redis-time-source", "SOURCE", time_source)
                .values(&["redis", "local"])
                .default("redis")
        ),
        /// Count envoy-compatible fixed windows exactly as envoyproxy/ratelimit does, with
        /// its pipelined INCRBY + EXPIRE under its key names, so both can share one Redis
        /// during a migration; requires --redis-time-source local
        reference_keys: bool = setting(
            Setting::switch("redis-reference-keys").readme(
                "count envoy-compatible fixed windows with envoyproxy/ratelimit's own commands \
                 and key names, for a rolling migration on one Redis; requires \
                 `--redis-time-source local`, see [Rolling migration on one \
                 Redis](#rolling-migration-on-one-redis---redis-reference-keys)",
            )
        ),
        /// `password` or `user:password` of the master found through sentinel (other URLs
        /// carry their own); their `REDIS_AUTH` is also the password of their `REDIS_URL`
        /// forms
        auth: Option<String> = setting(
            Setting::value("redis-auth", "AUTH", some_text).same(
                Their::new("REDIS_AUTH", "secret").with(REDIS).does(
                    "`password` or `user:password` of Redis (of the master, for sentinel)",
                ),
            )
        ),
        /// TLS for `host:port` addresses (theirs, and sentinel entries); `rediss://` URLs are
        /// TLS anyway
        tls: bool = setting(
            Setting::switch("redis-tls").same(Their::new("REDIS_TLS", "true").with(REDIS).does(
                "TLS to their `host:port` addresses (`--redis-tls`)",
            ))
        ),
        /// Password (or `user:password`) of the sentinels
        sentinel_auth: Option<String> = setting(
            Setting::value("redis-sentinel-auth", "AUTH", some_text).same(
                Their::new("REDIS_SENTINEL_AUTH", "secret").with(SENTINEL),
            )
        ),
        /// PEM CA bundle of a private CA that signs the Redis servers' certificates
        ca_cert: Option<PathBuf> = setting(
            Setting::value("redis-tls-ca-cert", "PATH", some_path)
                .shown_default("Mozilla roots")
                .same(Their::new("REDIS_TLS_CACERT", "/redis/ca.crt").with(REDIS_TLS))
        ),
        /// PEM client certificate chain, for Redis servers with `tls-auth-clients yes`
        client_cert: Option<PathBuf> = setting(
            Setting::value("redis-tls-client-cert", "PATH", some_path)
                .same(Their::new("REDIS_TLS_CLIENT_CERT", "/redis/other.crt").with(REDIS_MTLS))
        ),
        /// PEM private key of the client certificate
        client_key: Option<PathBuf> = setting(
            Setting::value("redis-tls-client-key", "PATH", some_path)
                .same(Their::new("REDIS_TLS_CLIENT_KEY", "/redis/other.key").with(REDIS_MTLS))
        ),
        /// Accept a Redis certificate issued for another name; the chain is still verified
        /// against the CA
        skip_hostname_verification: bool = setting(
            Setting::switch("redis-tls-skip-hostname-verification").same(
                Their::new("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true").with(REDIS_TLS),
            )
        ),
        /// How long Redis may refuse every write (OOM, READONLY, MISCONF…) before health
        /// turns NOT_SERVING
        refusal_grace: Duration = setting(
            Setting::value("redis-refusal-grace", "DURATION", duration)
                .default("1s")
                .readme(
                    "how long Redis may refuse every write before health turns NOT_SERVING \
                     ([Redis](#redis))",
                )
        ),
        cache_key_prefix: Option<String> = shared(CACHE_KEY_PREFIX),
        pub(super) per_second: PerSecondInput = group(),
    }
}

settings! {
    /// The per-second Redis's flags and their variables.
    pub(super) struct PerSecondInput {
        /// `true`: a second Redis for descriptors whose limits are all per second
        on: bool = setting(
            Setting::theirs_only(boolean)
                .default("false")
                .same(Their::new("REDIS_PERSECOND", "true").with(REDIS).does(
                    "`true`: a second Redis for descriptors whose limits are all per second \
                     (`--redis-per-second-url`)",
                ))
        ),
        /// A second Redis for limits whose unit is SECOND, same forms as --redis-url
        url: Given<Option<String>> = setting(
            Setting::value("redis-per-second-url", "URL", some_text)
                .shown_default("off")
                .same(Their::new("REDIS_PERSECOND_URL", "other.example:6380").with(PER_SECOND).does(
                    "as `REDIS_URL`, for the per-second Redis; unset: their default socket",
                ))
        ),
        /// As `REDIS_SOCKET_TYPE`, for the per-second Redis
        socket: Option<SocketType> = setting(
            Setting::theirs_only(socket_type)
                .same(Their::new("REDIS_PERSECOND_SOCKET_TYPE", "unix").with(PER_SECOND))
        ),
        /// Type of the per-second Redis
        redis_type: Option<RedisType> = setting(
            Setting::value("redis-per-second-type", "TYPE", redis_type)
                .values(&["single", "cluster", "sentinel"])
                .shown_default("`single`")
                .same(Their::new("REDIS_PERSECOND_TYPE", "cluster").with(PER_SECOND))
        ),
        /// Connections to the per-second Redis
        pool_size: usize = setting(
            Setting::value("redis-per-second-pool-size", "N", positive)
                .default("4")
                .same(Their::new("REDIS_PERSECOND_POOL_SIZE", "8").with(PER_SECOND))
        ),
        /// Deadline to connect to the per-second Redis
        connect_timeout: Option<Duration> = setting(
            Setting::value("redis-per-second-connect-timeout", "DURATION", some_duration)
                .shown_default("as `--redis-connect-timeout`")
                .same(Their::new("REDIS_PERSECOND_TIMEOUT", "2s").with(PER_SECOND))
        ),
        /// Master auth of a per-second sentinel deployment, and of their URL forms
        auth: Option<String> = setting(
            Setting::value("redis-per-second-auth", "AUTH", some_text)
                .same(Their::new("REDIS_PERSECOND_AUTH", "secret").with(PER_SECOND))
        ),
        /// TLS for per-second `host:port` addresses (the TLS files are shared)
        tls: bool = setting(
            Setting::switch("redis-per-second-tls")
                .same(Their::new("REDIS_PERSECOND_TLS", "true").with(PER_SECOND))
        ),
        /// Sentinel auth of the per-second Redis
        sentinel_auth: Option<String> = setting(
            Setting::value("redis-per-second-sentinel-auth", "AUTH", some_text).same(
                Their::new("REDIS_PERSECOND_SENTINEL_AUTH", "secret").with(PER_SECOND_SENTINEL),
            )
        ),
    }
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


/// Their default addresses when the backend is Redis but no URL is set.
const DEFAULT_SOCKET: &str = "/var/run/nutcracker/ratelimit.sock";
const DEFAULT_PER_SECOND_SOCKET: &str = "/var/run/nutcracker/ratelimitpersecond.sock";

/// The Redis store, when a URL is given (or their `BACKEND_TYPE=redis`); `None`: memory.
pub(super) fn resolve(r: &Resolver<'_>) -> Result<Option<RedisSettings>, SettingsError> {
    let i = RedisInput::from_resolver(r)?;
    let url = match i.url.value {
        None if i.backend == Some(Backend::Redis) => their_default(DEFAULT_SOCKET, "REDIS_URL"),
        _ => i.url,
    };
    let main = Target {
        flag: "--redis",
        env: "REDIS",
        url,
        redis_type: i.redis_type.unwrap_or(RedisType::Single),
        auth: i.auth,
        tls: i.tls,
        sentinel_auth: i.sentinel_auth,
        socket: i.socket,
    };
    let Some(main) = target_urls(main)? else {
        return Ok(None);
    };
    if i.client_cert.is_some() != i.client_key.is_some() {
        return Err(err(
            "--redis-tls-client-cert",
            "a client certificate and its key go together (REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY)",
        ));
    }
    let mut settings = RedisSettings {
        urls: main.urls,
        redis_type: main.redis_type,
        sentinel_master: main.sentinel_master,
        master_auth: main.master_auth,
        pool_size: i.pool_size,
        request_timeout: i.timeout,
        connect_timeout: i.connect_timeout,
        time_source: i.time_source,
        key_prefix: i.cache_key_prefix,
        reference_keys: i.reference_keys,
        tls: RedisTlsFiles {
            ca_cert: i.ca_cert,
            client_cert: i.client_cert,
            client_key: i.client_key,
            skip_hostname_verification: i.skip_hostname_verification,
        },
        refusal_grace: i.refusal_grace,
        per_second: None,
    };
    settings.per_second = per_second(i.per_second, &settings)?.map(Box::new);
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

fn their_default(socket: &str, name: &str) -> Given<Option<String>> {
    Given {
        value: Some(socket.to_owned()),
        source: super::resolver::Source::Theirs,
        name: name.to_owned(),
    }
}

/// The per-second Redis: `--redis-per-second-url`, or `REDIS_PERSECOND=true` with their
/// `REDIS_PERSECOND_*` variables (their default socket when no URL is given).
fn per_second(
    p: PerSecondInput,
    main: &RedisSettings,
) -> Result<Option<RedisSettings>, SettingsError> {
    let url = match p.url {
        u if u.by_sluice() => u,
        _ if !p.on => return Ok(None),
        u if u.value.is_some() => u,
        _ => their_default(DEFAULT_PER_SECOND_SOCKET, "REDIS_PERSECOND_URL"),
    };
    let target = Target {
        flag: "--redis-per-second",
        env: "REDIS_PERSECOND",
        url,
        redis_type: p.redis_type.unwrap_or(RedisType::Single),
        auth: p.auth,
        tls: p.tls,
        sentinel_auth: p.sentinel_auth,
        socket: p.socket,
    };
    let Some(urls) = target_urls(target)? else {
        return Ok(None);
    };
    Ok(Some(RedisSettings {
        urls: urls.urls,
        redis_type: urls.redis_type,
        sentinel_master: urls.sentinel_master,
        master_auth: urls.master_auth,
        pool_size: p.pool_size,
        connect_timeout: p.connect_timeout.unwrap_or(main.connect_timeout),
        per_second: None,
        ..main.clone()
    }))
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
