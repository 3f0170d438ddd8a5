//! How sluice connects to Redis, against real servers: TLS with certificates the tests
//! generate (private CA, client certificates, hostname-only skip; single node, cluster,
//! sentinel), Redis Sentinel including a failover under traffic, the per-second Redis, and
//! health while Redis refuses writes.
//!
//! Run: `cargo test --test integration redis_conn` (needs `redis-server`, `redis-cli` and
//! `redis-sentinel`).

mod health;
mod idle;
mod per_second;
mod sentinel;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use sluice::limit::{Check, LimitResult, LimitSpec, StateTag, SystemClock, Unit};
use sluice::store::redis::{RedisConfig, RedisStore};
use sluice::store::{Call, Store, StoreError};

/// A store on `url` with generous request deadlines (the machine is shared) and fast
/// reconnects.
pub fn config(url: &str) -> RedisConfig {
    RedisConfig {
        url: url.to_owned(),
        request_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(2),
        pool_size: 2,
        reconnect_backoff_min: Duration::from_millis(20),
        reconnect_backoff_max: Duration::from_millis(200),
        ..RedisConfig::default()
    }
}

pub fn store(cfg: RedisConfig) -> RedisStore {
    RedisStore::new(cfg, Arc::new(SystemClock)).expect("valid config")
}

pub fn limit(rate: u64, unit: Unit) -> LimitSpec {
    LimitSpec::fixed_window(rate, unit)
}

/// One hit on a per-day limit of 1000 for the descriptor `name`.
pub async fn hit(store: &RedisStore, name: &str) -> Result<Vec<LimitResult>, StoreError> {
    let limits = [limit(1000, Unit::Day)];
    let checks = [Check {
        tag: StateTag::compute("conn", [("key", name)]),
        limits: &limits,
        cost: 1,
        refund: false,
    }];
    let mut out = Vec::new();
    store.run(&Call::new(&checks), &mut out).await.map(|()| out)
}

/// Whether `cfg` gives a store that connects and decides (within 10 s), or — `expect`
/// false — one that has not connected after 2 s of attempts (a refused handshake never
/// succeeds, so waiting longer proves nothing more).
pub async fn connects(cfg: RedisConfig, expect: bool) -> bool {
    let s = store(cfg);
    let wait = if expect { 10 } else { 2 };
    if !s.wait_ready(Duration::from_secs(wait)).await {
        return false;
    }
    hit(&s, "connects").await.is_ok()
}
