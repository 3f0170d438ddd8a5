//! The configured store, from settings: memory when no Redis is configured, else a Redis
//! store (single node, cluster or sentinel) that connects in the background while health
//! waits, plus a second one for per-second limits when configured. Certificate files are
//! read here, so a bad path stops startup with the file's name.

use std::sync::Arc;

use super::ServerError;
use crate::limit::Clock;
use crate::settings::{RedisSettings, RedisTlsFiles, RedisType, Settings};
use crate::store::Backend;
use crate::store::memory::{MemoryOptions, MemoryStore};
use crate::store::per_second::{PER_SECOND, PerSecond};
use crate::store::redis::{RedisConfig, RedisStore, RedisTls, SentinelConfig};
use crate::tls::{PemKind, read_pem};

pub(super) fn build(settings: &Settings, clock: &Arc<dyn Clock>) -> Result<Backend, ServerError> {
    let Some(r) = &settings.redis else {
        let opts = MemoryOptions {
            max_bytes: settings.caps.memory_max_bytes,
            ..MemoryOptions::default()
        };
        return Ok(Backend::Memory(MemoryStore::with_options(
            clock.clone(),
            opts,
        )));
    };
    let tls = tls(&r.tls)?;
    let main = redis(r, "redis", &tls, clock)?;
    let Some(p) = &r.per_second else {
        return Ok(Backend::Redis(main));
    };
    let per_second = redis(p, PER_SECOND, &tls, clock)?;
    // One id on two stores: the pair's fate is not tracked (`Backend::fate`).
    Ok(Backend::RedisPerSecond(Box::new(PerSecond {
        main: main.untracked(),
        per_second: per_second.untracked(),
    })))
}

fn tls(files: &RedisTlsFiles) -> Result<RedisTls, ServerError> {
    let ca_pem = files
        .ca_cert
        .as_deref()
        .map(|p| read_pem(p, PemKind::Certificates))
        .transpose()?;
    let client_identity = match (&files.client_cert, &files.client_key) {
        (Some(c), Some(k)) => Some((
            read_pem(c, PemKind::Certificates)?,
            read_pem(k, PemKind::PrivateKey)?,
        )),
        _ => None,
    };
    Ok(RedisTls {
        ca_pem,
        client_identity,
        skip_hostname_verification: files.skip_hostname_verification,
    })
}

fn redis(
    r: &RedisSettings,
    name: &'static str,
    tls: &RedisTls,
    clock: &Arc<dyn Clock>,
) -> Result<RedisStore, ServerError> {
    let mut cfg = RedisConfig {
        name,
        pool_size: r.pool_size,
        connect_timeout: r.connect_timeout,
        request_timeout: r.request_timeout,
        time_source: r.time_source,
        tls: tls.clone(),
        refusal_grace: r.refusal_grace,
        ..RedisConfig::default()
    };
    if let Some(p) = &r.key_prefix {
        cfg.key_prefix = p.clone();
    }
    if r.reference_keys {
        // Their CACHE_KEY_PREFIX as set (their default: none) before their keys.
        cfg.reference_prefix = Some(r.key_prefix.clone().unwrap_or_default());
    }
    match r.redis_type {
        RedisType::Single => cfg.url = r.urls.first().cloned().unwrap_or_default(),
        RedisType::Cluster => cfg.cluster_nodes = r.urls.clone(),
        RedisType::Sentinel => {
            cfg.sentinel = Some(SentinelConfig {
                master: r.sentinel_master.clone().unwrap_or_default(),
                sentinels: r.urls.clone(),
                master_auth: r.master_auth.clone(),
                db: 0,
            });
        }
    }
    RedisStore::new(cfg, clock.clone()).map_err(ServerError::Redis)
}
