//! The configured store, from settings: memory when no Redis is configured, else a Redis
//! store (single node, cluster or sentinel) that connects in the background while health
//! waits, plus a second one for per-second limits when configured. Certificate files are
//! read here, so a bad path stops startup with the file's name.

use std::sync::Arc;

use super::ServerError;
use crate::limit::Clock;
use crate::settings::{RedisTlsFiles, Settings};
use crate::store::Backend;
use crate::store::memory::{MemoryOptions, MemoryStore};
use crate::store::per_second::PerSecond;
use crate::store::redis::{RedisConfig, RedisStore, RedisTls};
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
    let redis = |c: &RedisConfig| {
        let cfg = RedisConfig {
            tls: tls.clone(),
            ..c.clone()
        };
        RedisStore::new(cfg, clock.clone()).map_err(ServerError::Redis)
    };
    let main = redis(&r.main)?;
    let Some(p) = &r.per_second else {
        return Ok(Backend::Redis(main));
    };
    Ok(Backend::RedisPerSecond(Box::new(PerSecond {
        main,
        per_second: redis(p)?,
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
