//! The configured store, from settings: memory when no Redis is configured, else a Redis
//! store (single node or cluster) that connects in the background while health waits.

use std::sync::Arc;

use super::ServerError;
use crate::limit::SystemClock;
use crate::settings::{RedisType, Settings};
use crate::store::Backend;
use crate::store::memory::{MemoryOptions, MemoryStore};
use crate::store::redis::{RedisConfig, RedisStore};

pub(super) fn build(settings: &Settings) -> Result<Backend, ServerError> {
    let Some(r) = &settings.redis else {
        let opts = MemoryOptions {
            max_bytes: settings.caps.memory_max_bytes,
            ..MemoryOptions::default()
        };
        return Ok(Backend::Memory(MemoryStore::with_options(
            Arc::new(SystemClock),
            opts,
        )));
    };
    let mut cfg = RedisConfig {
        pool_size: r.pool_size,
        connect_timeout: r.connect_timeout,
        request_timeout: r.request_timeout,
        time_source: r.time_source,
        ..RedisConfig::default()
    };
    if let Some(p) = &r.key_prefix {
        cfg.key_prefix = p.clone();
    }
    match r.redis_type {
        RedisType::Single => cfg.url = r.urls.first().cloned().unwrap_or_default(),
        RedisType::Cluster => cfg.cluster_nodes = r.urls.clone(),
    }
    RedisStore::new(cfg, Arc::new(SystemClock))
        .map(Backend::Redis)
        .map_err(ServerError::Redis)
}
