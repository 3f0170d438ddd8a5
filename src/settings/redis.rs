//! The Redis settings: the `--redis-*` flags and `SLUICE_REDIS_*` variables, or
//! envoyproxy/ratelimit's `REDIS_*` variables (their URL format, socket type, auth, TLS,
//! sentinel and per-second pool; declared in `redis_input.rs`), resolved into the stores'
//! own [`RedisConfig`]s. URL forms are in `redis_url.rs`.
//!
//! One TLS configuration (CA, client certificate, hostname check) serves every Redis
//! connection, main and per-second, as in theirs.

use std::path::PathBuf;
use std::time::Duration;

use super::parse::{SettingsError, err};
use super::redis_input::{Backend, PerSecondInput, RedisInput};
use super::redis_url::{RedisType, Target, Urls, check_url, target_urls};
use super::resolver::{Given, Group, Resolver, Source, defaults};
use crate::store::per_second::PER_SECOND;
use crate::store::redis::{
    DEFAULT_DEAD_AFTER, DEFAULT_KEY_PREFIX, RedisConfig, RedisTls, SentinelConfig,
};

pub use crate::store::redis::TimeSource;

/// Certificate files of Redis TLS (shared by the main and per-second Redis).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedisTlsFiles {
    pub ca_cert: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub skip_hostname_verification: bool,
}

/// The Redis stores, as their configs (TLS aside: the server reads the files).
#[derive(Clone, Debug, PartialEq)]
pub struct RedisSettings {
    pub main: RedisConfig,
    /// The Redis of per-second limits (`REDIS_PERSECOND`); it shares the key prefix, time
    /// source, request timeout and TLS files of the main one.
    pub per_second: Option<RedisConfig>,
    pub tls: RedisTlsFiles,
}

/// The store's defaults are the declarations': a store made without settings (tests, tools)
/// is the one `serve` makes from none but a URL.
impl Default for RedisConfig {
    fn default() -> Self {
        config(&defaults())
    }
}

/// A store's config from the Redis settings, at the default address.
fn config(i: &RedisInput) -> RedisConfig {
    RedisConfig {
        name: "redis",
        url: "redis://127.0.0.1:6379".to_owned(),
        cluster_nodes: Vec::new(),
        sentinel: None,
        tls: RedisTls::default(),
        refusal_grace: i.refusal_grace,
        pool_size: i.pool_size,
        connect_timeout: i.connect_timeout,
        request_timeout: i.timeout,
        key_prefix: (i.cache_key_prefix.as_deref())
            .unwrap_or(DEFAULT_KEY_PREFIX)
            .to_owned(),
        time_source: i.time_source,
        ttl_slack_ms: None,
        // Not settings: the ring's own pacing and silence limit.
        reconnect_backoff_min: Duration::from_millis(50),
        reconnect_backoff_max: Duration::from_secs(2),
        dead_after: DEFAULT_DEAD_AFTER,
        // The reference's CACHE_KEY_PREFIX as set (their default: none) before their keys.
        reference_prefix: (i.reference_keys)
            .then(|| i.cache_key_prefix.clone().unwrap_or_default()),
    }
}

/// `cfg` at the addresses `urls` name.
fn at(mut cfg: RedisConfig, urls: Urls) -> RedisConfig {
    match urls.redis_type {
        RedisType::Single => cfg.url = urls.urls.into_iter().next().unwrap_or_default(),
        RedisType::Cluster => cfg.cluster_nodes = urls.urls,
        RedisType::Sentinel => {
            cfg.sentinel = Some(SentinelConfig {
                master: urls.sentinel_master.unwrap_or_default(),
                sentinels: urls.urls,
                master_auth: urls.master_auth,
                db: 0,
            })
        }
    }
    cfg
}

/// The reference's default addresses when the backend is Redis but no URL is set.
const DEFAULT_SOCKET: &str = "/var/run/nutcracker/ratelimit.sock";
const DEFAULT_PER_SECOND_SOCKET: &str = "/var/run/nutcracker/ratelimitpersecond.sock";

/// The Redis store, when a URL is given (or their `BACKEND_TYPE=redis`); `None`: memory.
pub(super) fn resolve(r: &Resolver<'_>) -> Result<Option<RedisSettings>, SettingsError> {
    let i = RedisInput::from_resolver(r)?;
    let url = match &i.url.value {
        None if i.backend == Some(Backend::Redis) => ref_default(DEFAULT_SOCKET, "REDIS_URL"),
        _ => i.url.clone(),
    };
    let main = Target {
        flag: "--redis",
        env: "REDIS",
        url,
        redis_type: i.redis_type.unwrap_or(RedisType::Single),
        auth: i.auth.clone(),
        tls: i.tls,
        sentinel_auth: i.sentinel_auth.clone(),
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
    let per_second = per_second(&i.per_second)?;
    if i.reference_keys {
        // The reference's clock is the server's own: a count shared with their pods must
        // start its windows at the same instants, which the Redis clock inside a script
        // would not.
        if i.time_source != TimeSource::Local {
            return Err(err(
                "--redis-reference-keys",
                "requires --redis-time-source local (envoyproxy/ratelimit reads its own \
                 clock, so windows shared with it must be timed by sluice's)",
            ));
        }
        if per_second.is_some() {
            return Err(err(
                "--redis-reference-keys",
                "is not supported with a per-second Redis (--redis-per-second-url, \
                 REDIS_PERSECOND)",
            ));
        }
    }
    let tls = RedisTlsFiles {
        ca_cert: i.ca_cert.clone(),
        client_cert: i.client_cert.clone(),
        client_key: i.client_key.clone(),
        skip_hostname_verification: i.skip_hostname_verification,
    };
    let base = config(&i);
    let settings = RedisSettings {
        per_second: per_second.map(|(urls, p)| {
            let cfg = RedisConfig {
                name: PER_SECOND,
                pool_size: p.pool_size,
                connect_timeout: p.connect_timeout.unwrap_or(base.connect_timeout),
                ..base.clone()
            };
            at(cfg, urls)
        }),
        main: at(base, main),
        tls,
    };
    check_tls(&settings)?;
    Ok(Some(settings))
}

fn ref_default(socket: &str, name: &str) -> Given<Option<String>> {
    Given {
        value: Some(socket.to_owned()),
        source: Source::RefVar,
        name: name.to_owned(),
    }
}

/// The per-second Redis: `--redis-per-second-url`, or `REDIS_PERSECOND=true` with their
/// `REDIS_PERSECOND_*` variables (their default socket when no URL is given).
fn per_second(p: &PerSecondInput) -> Result<Option<(Urls, &PerSecondInput)>, SettingsError> {
    let url = match &p.url {
        u if u.by_sluice() => u.clone(),
        _ if !p.on => return Ok(None),
        u if u.value.is_some() => u.clone(),
        _ => ref_default(DEFAULT_PER_SECOND_SOCKET, "REDIS_PERSECOND_URL"),
    };
    let target = Target {
        flag: "--redis-per-second",
        env: "REDIS_PERSECOND",
        url,
        redis_type: p.redis_type.unwrap_or(RedisType::Single),
        auth: p.auth.clone(),
        tls: p.tls,
        sentinel_auth: p.sentinel_auth.clone(),
        socket: p.socket,
    };
    Ok(target_urls(target)?.map(|urls| (urls, p)))
}

/// TLS files without any TLS connection are a mistake worth stopping for (a private CA that
/// is silently unused is how plaintext goes to production); `#insecure` is refused.
fn check_tls(s: &RedisSettings) -> Result<(), SettingsError> {
    let mut tls = false;
    for u in s
        .main
        .urls()
        .into_iter()
        .chain(s.per_second.iter().flat_map(RedisConfig::urls))
    {
        check_url(u)?;
        tls |= u.starts_with("rediss://");
    }
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
