//! The Redis settings as declared: the `--redis-*` flags and `SLUICE_REDIS_*` variables,
//! and envoyproxy/ratelimit's `REDIS_*` variables (their URL format, socket type, auth,
//! TLS, sentinel and per-second pool), before `redis.rs` makes them one `RedisSettings`.

use std::path::PathBuf;
use std::time::Duration;

use super::decl::{RefVar, Setting};
use super::declare::settings;
use super::redis_url::{RedisType, SocketType, redis_type, socket_type};
use super::resolver::{Given, Value};
use super::values::{
    boolean, duration, one_of, positive, positive_duration, some_duration, some_path, some_text,
};
use crate::store::redis::TimeSource;

impl Value for TimeSource {}

fn time_source(s: &str) -> Result<TimeSource, String> {
    let names = [("redis", TimeSource::Redis), ("local", TimeSource::Local)];
    one_of(s, &names).ok_or_else(|| format!("'{s}' is not redis or local"))
}

/// The reference's `BACKEND_TYPE`.
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
        return Err(
            "must not contain '{' or '}' (it would change the Redis Cluster hash slot)".into(),
        );
    }
    Ok(Some(s.to_owned()))
}

/// `--cache-key-prefix`, which `sluice explain` reads too.
pub(super) static CACHE_KEY_PREFIX: Setting<Option<String>> =
    Setting::value("cache-key-prefix", "PREFIX", key_prefix)
        .shown_default("`sluice:`")
        .help("Prefix of every Redis key (several deployments on one Redis)")
        .same(
            RefVar::new("CACHE_KEY_PREFIX", "rl:")
                .with(REDIS)
                .does("prefix of every Redis key (`--cache-key-prefix`); unset: `sluice:`"),
        );

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
    /// The Redis flags and the reference's variables, before they become a
    /// [`RedisSettings`](super::RedisSettings).
    pub(super) struct RedisInput {
        /// Redis URL: redis://host:port/db, rediss://… (TLS), unix:///path; comma-separated
        /// node list for a cluster; `master,host:port,...` (sentinel addresses) for sentinel.
        /// Without it the in-memory store is used
        pub(super) url: Given<Option<String>> = setting(
            Setting::value("redis-url", "URL", some_text)
                .shown_default("none (memory store)")
                .shown_vars("`REDIS_URL` + `REDIS_SOCKET_TYPE`, `REDIS_AUTH`, `REDIS_TLS`")
                .same(RefVar::new("REDIS_URL", "redis.example:6379").does(
                    "their forms (`host:port`, a socket path, `master,host:port,…`) or a URL \
                     (`--redis-url`); unset: the memory store",
                ))
        ),
        /// `redis` (their default socket when `REDIS_URL` is unset) or `memory`; `memcache`
        /// is refused: without server-side scripts a request's limits could not be decided
        /// atomically
        pub(super) backend: Option<Backend> = setting(
            Setting::ref_only(backend).same(RefVar::new("BACKEND_TYPE", "redis"))
        ),
        /// `tcp` or `unix`: how `REDIS_URL` is read (unset: by its form)
        pub(super) socket: Option<SocketType> = setting(
            Setting::ref_only(socket_type)
                .same(RefVar::new("REDIS_SOCKET_TYPE", "unix").with(REDIS))
        ),
        /// single, cluster or sentinel
        pub(super) redis_type: Option<RedisType> = setting(
            Setting::value("redis-type", "TYPE", redis_type)
                .values(&["single", "cluster", "sentinel"])
                .shown_default("`single`")
                .same(RefVar::new("REDIS_TYPE", "cluster").with(REDIS))
        ),
        /// Connections kept open to Redis (multiplexed); requests fill one connection's next
        /// batch (16 requests) before spilling to the next, so Redis reads big batches
        pub(super) pool_size: usize = setting(
            Setting::value("redis-pool-size", "N", positive)
                .default("4")
                .same(RefVar::new("REDIS_POOL_SIZE", "8").with(REDIS).does(
                    "multiplexed Redis connections (`--redis-pool-size`); unset: 4",
                ))
        ),
        // Why 1s: callers without a deadline (a gRPC client with none, `/json`) would rather
        // have the answer of a Redis that is busy but alive, which comes within a second
        // even on a saturated machine, than an error; a dead Redis is found by the
        // connection breaker's silence limit, not by this timeout.
        /// Deadline of a call's Redis work when the call carries no deadline of its own (with a
        /// grpc-timeout, as Envoy always sends, what that leaves is the deadline); past it the
        /// call fails with UNAVAILABLE
        pub(super) timeout: Duration = setting(
            Setting::value("redis-timeout", "DURATION", positive_duration)
                .default("1s")
                .see("[Redis](../how-to/redis.md#failures-and-health)")
        ),
        /// Deadline to establish a Redis connection
        pub(super) connect_timeout: Duration = setting(
            Setting::value("redis-connect-timeout", "DURATION", duration)
                .default("1s")
                .same(RefVar::new("REDIS_TIMEOUT", "2s").with(REDIS).does(
                    "deadline to connect (`--redis-connect-timeout`), as theirs; a call's Redis \
                     work ends by what its grpc-timeout leaves, or after `--redis-timeout` \
                     without one",
                ))
        ),
        /// Clock the Redis scripts use: redis (scripts read `TIME`) or local (sluice's clock,
        /// for a Redis that forbids `TIME` in scripts)
        pub(super) time_source: TimeSource = setting(
            Setting::value("redis-time-source", "SOURCE", time_source)
                .values(&["redis", "local"])
                .default("redis")
        ),
        /// Count envoy-compatible fixed windows exactly as envoyproxy/ratelimit does, with
        /// its pipelined INCRBY + EXPIRE under its key names, so both can share one Redis
        /// during a migration; requires --redis-time-source local
        pub(super) reference_keys: bool = setting(
            Setting::switch("redis-reference-keys").see("[Rolling migration on one Redis](../how-to/migrate-from-envoyproxy-ratelimit.md#rolling-migration-on-one-redis---redis-reference-keys)")
        ),
        /// `password` or `user:password` of the master found through sentinel (other URLs
        /// carry their own); their `REDIS_AUTH` is also the password of their `REDIS_URL`
        /// forms
        pub(super) auth: Option<String> = setting(
            Setting::value("redis-auth", "AUTH", some_text).same(
                RefVar::new("REDIS_AUTH", "secret").with(REDIS).does(
                    "`password` or `user:password` of Redis (of the master, for sentinel)",
                ),
            )
        ),
        /// TLS for `host:port` addresses (theirs, and sentinel entries); `rediss://` URLs are
        /// TLS anyway
        pub(super) tls: bool = setting(
            Setting::switch("redis-tls").same(RefVar::new("REDIS_TLS", "true").with(REDIS).does(
                "TLS to their `host:port` addresses (`--redis-tls`)",
            ))
        ),
        /// Password (or `user:password`) of the sentinels
        pub(super) sentinel_auth: Option<String> = setting(
            Setting::value("redis-sentinel-auth", "AUTH", some_text).same(
                RefVar::new("REDIS_SENTINEL_AUTH", "secret").with(SENTINEL),
            )
        ),
        /// PEM CA bundle of a private CA that signs the Redis servers' certificates
        pub(super) ca_cert: Option<PathBuf> = setting(
            Setting::value("redis-tls-ca-cert", "PATH", some_path)
                .shown_default("Mozilla roots")
                .same(RefVar::new("REDIS_TLS_CACERT", "/redis/ca.crt").with(REDIS_TLS))
        ),
        /// PEM client certificate chain, for Redis servers with `tls-auth-clients yes`
        pub(super) client_cert: Option<PathBuf> = setting(
            Setting::value("redis-tls-client-cert", "PATH", some_path)
                .same(RefVar::new("REDIS_TLS_CLIENT_CERT", "/redis/other.crt").with(REDIS_MTLS))
        ),
        /// PEM private key of the client certificate
        pub(super) client_key: Option<PathBuf> = setting(
            Setting::value("redis-tls-client-key", "PATH", some_path)
                .same(RefVar::new("REDIS_TLS_CLIENT_KEY", "/redis/other.key").with(REDIS_MTLS))
        ),
        /// Accept a Redis certificate issued for another name; the chain is still verified
        /// against the CA
        pub(super) skip_hostname_verification: bool = setting(
            Setting::switch("redis-tls-skip-hostname-verification").same(
                RefVar::new("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true").with(REDIS_TLS),
            )
        ),
        /// How long Redis may refuse every write (OOM, READONLY, MISCONF…) before health
        /// turns NOT_SERVING
        pub(super) refusal_grace: Duration = setting(
            Setting::value("redis-refusal-grace", "DURATION", duration)
                .default("1s")
                .see("[Redis](../how-to/redis.md)")
        ),
        pub(super) cache_key_prefix: Option<String> = shared(CACHE_KEY_PREFIX),
        pub(super) per_second: PerSecondInput = group(),
    }
}

settings! {
    /// The per-second Redis's flags and the reference's variables.
    pub(super) struct PerSecondInput {
        /// `true`: a second Redis for descriptors whose limits are all per second
        pub(super) on: bool = setting(
            Setting::ref_only(boolean)
                .default("false")
                .same(RefVar::new("REDIS_PERSECOND", "true").with(REDIS).does(
                    "`true`: a second Redis for descriptors whose limits are all per second \
                     (`--redis-per-second-url`)",
                ))
        ),
        /// A second Redis for descriptors whose limits are all per second, same forms as
        /// --redis-url; it shares the key prefix, time source, request deadline and TLS files
        /// of the main one
        pub(super) url: Given<Option<String>> = setting(
            Setting::value("redis-per-second-url", "URL", some_text)
                .shown_default("off")
                .shown_vars("`REDIS_PERSECOND=true` + `REDIS_PERSECOND_URL`")
                .same(RefVar::new("REDIS_PERSECOND_URL", "other.example:6380").with(PER_SECOND).does(
                    "as `REDIS_URL`, for the per-second Redis; unset: their default socket",
                ))
        ),
        /// As `REDIS_SOCKET_TYPE`, for the per-second Redis
        pub(super) socket: Option<SocketType> = setting(
            Setting::ref_only(socket_type)
                .same(RefVar::new("REDIS_PERSECOND_SOCKET_TYPE", "unix").with(PER_SECOND))
        ),
        /// Type of the per-second Redis
        pub(super) redis_type: Option<RedisType> = setting(
            Setting::value("redis-per-second-type", "TYPE", redis_type)
                .values(&["single", "cluster", "sentinel"])
                .shown_default("`single`")
                .same(RefVar::new("REDIS_PERSECOND_TYPE", "cluster").with(PER_SECOND))
        ),
        /// Connections to the per-second Redis
        pub(super) pool_size: usize = setting(
            Setting::value("redis-per-second-pool-size", "N", positive)
                .default("4")
                .same(RefVar::new("REDIS_PERSECOND_POOL_SIZE", "8").with(PER_SECOND))
        ),
        /// Deadline to connect to the per-second Redis
        pub(super) connect_timeout: Option<Duration> = setting(
            Setting::value("redis-per-second-connect-timeout", "DURATION", some_duration)
                .shown_default("as `--redis-connect-timeout`")
                .same(RefVar::new("REDIS_PERSECOND_TIMEOUT", "2s").with(PER_SECOND))
        ),
        /// Master auth of a per-second sentinel deployment, and of their URL forms
        pub(super) auth: Option<String> = setting(
            Setting::value("redis-per-second-auth", "AUTH", some_text)
                .same(RefVar::new("REDIS_PERSECOND_AUTH", "secret").with(PER_SECOND))
        ),
        /// TLS for per-second `host:port` addresses (the TLS files are shared)
        pub(super) tls: bool = setting(
            Setting::switch("redis-per-second-tls")
                .same(RefVar::new("REDIS_PERSECOND_TLS", "true").with(PER_SECOND))
        ),
        /// Sentinel auth of the per-second Redis
        pub(super) sentinel_auth: Option<String> = setting(
            Setting::value("redis-per-second-sentinel-auth", "AUTH", some_text).same(
                RefVar::new("REDIS_PERSECOND_SENTINEL_AUTH", "secret").with(PER_SECOND_SENTINEL),
            )
        ),
    }
}
