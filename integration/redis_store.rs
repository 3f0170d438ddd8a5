//! RedisStore against real redis-server processes (each test owns its server). Most tests
//! run in local time mode with a ManualClock, so every number is exact and comes from
//! `docs/explanation/algorithms.md` worked by hand; a few run on Redis `TIME`.
//!
//! Run: `cargo test --test integration redis_store` (needs `redis-server` and `redis-cli`).

mod algorithms;
mod calendar;
mod cluster;
mod ids;
mod keys;
mod merging;
mod ops;
mod pre_redis7;
mod protocol;
mod slowlog;
mod stop_increment;
mod upgrade;

use std::sync::Arc;
use std::time::Duration;

use sluice::limit::{Algorithm, Check, Clock, LimitResult, LimitSpec, ManualClock, StateTag, Unit};
use sluice::store::redis::{RedisConfig, RedisStore, TimeSource};
use sluice::store::{Call, Store};

use crate::support::redis::RedisServer;

/// A TTL slack long enough that real time never expires state a test still relies on
/// (simulated time moves in big steps, real time keeps flowing).
pub const TEST_SLACK_MS: u64 = 3_600_000;

/// A start time aligned to the day (so second/minute/hour windows and sub-windows start at
/// it), near the real clock.
pub fn t0() -> u64 {
    let now = sluice::limit::SystemClock.now_ms();
    now - now % 86_400_000
}

/// A limit with the defaults of a rule file: burst = rate, 10 buckets for sliding_window,
/// overdraft as the algorithm's default, no penalty.
pub fn spec(algorithm: Algorithm, rate: u64, unit: Unit) -> LimitSpec {
    LimitSpec::new(algorithm, rate, unit)
}

pub fn tag(name: &str) -> StateTag {
    StateTag::compute("test", [("key", name)])
}

pub fn local_config(server: &RedisServer) -> RedisConfig {
    RedisConfig {
        url: server.url(),
        time_source: TimeSource::Local,
        ttl_slack_ms: Some(TEST_SLACK_MS),
        // Generous: the test machine is shared; timeouts have their own tests.
        request_timeout: Duration::from_secs(2),
        pool_size: 2,
        ..RedisConfig::default()
    }
}

/// A store on `cluster` in local time mode, on a clock at real time (so TTLs hold), connected.
pub async fn cluster_store(cluster: &crate::support::redis::RedisCluster) -> RedisStore {
    let cfg = RedisConfig {
        cluster_nodes: cluster.urls(),
        time_source: TimeSource::Local,
        ttl_slack_ms: Some(TEST_SLACK_MS),
        request_timeout: Duration::from_secs(2),
        ..RedisConfig::default()
    };
    let store = RedisStore::new(cfg, Arc::new(ManualClock::starting_now())).expect("config");
    assert!(
        store.wait_ready(Duration::from_secs(20)).await,
        "cluster connected"
    );
    store
}

/// A server, a manual clock at [`t0`] and a connected store in local time mode.
pub struct Env {
    pub server: RedisServer,
    pub clock: Arc<ManualClock>,
    pub store: RedisStore,
    pub t0: u64,
}

impl Env {
    pub async fn new() -> Env {
        let server = RedisServer::start();
        let cfg = local_config(&server);
        Env::with_config(server, cfg).await
    }

    pub async fn with_config(server: RedisServer, cfg: RedisConfig) -> Env {
        Env::build(server, cfg, RedisStore::new).await
    }

    /// [`Env::with_config`] with the script's Redis < 7 branch forced (see `pre_redis7.rs`).
    pub async fn forcing_pre_redis7(server: RedisServer, cfg: RedisConfig) -> Env {
        Env::build(server, cfg, RedisStore::new_forcing_pre_redis7).await
    }

    async fn build(
        server: RedisServer,
        cfg: RedisConfig,
        new: fn(
            RedisConfig,
            Arc<dyn Clock>,
        ) -> Result<RedisStore, sluice::store::redis::RedisConfigError>,
    ) -> Env {
        let t0 = t0();
        let clock = Arc::new(ManualClock::new(t0));
        let pool_size = cfg.pool_size;
        let store = new(cfg, clock.clone()).expect("config");
        assert!(
            store.wait_ready(Duration::from_secs(10)).await,
            "store never connected"
        );
        // Every connection up (and its script preload done), so command statistics taken
        // from here on only see requests.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.connected() < pool_size {
            assert!(std::time::Instant::now() < deadline, "pool never filled");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Env {
            server,
            clock,
            store,
            t0,
        }
    }

    /// Set the clock to `t0 + ms`.
    pub fn at(&self, ms: u64) {
        self.clock.set(self.t0 + ms);
    }

    pub async fn run(&self, checks: &[Check<'_>]) -> Vec<LimitResult> {
        self.try_run(checks).await.expect("run")
    }

    pub async fn try_run(
        &self,
        checks: &[Check<'_>],
    ) -> Result<Vec<LimitResult>, sluice::store::StoreError> {
        let mut out = Vec::new();
        self.store
            .run(&Call::new(checks), &mut out)
            .await
            .map(|()| out)
    }

    pub async fn hit(&self, tag: StateTag, limits: &[LimitSpec], cost: u64) -> Vec<LimitResult> {
        self.run(&[Check {
            tag,
            limits,
            cost,
            refund: false,
        }])
        .await
    }

    /// One limit, one hit: its result.
    pub async fn hit1(&self, tag: StateTag, limit: &LimitSpec, cost: u64) -> LimitResult {
        self.hit(tag, std::slice::from_ref(limit), cost).await[0]
    }

    pub async fn refund1(&self, tag: StateTag, limit: &LimitSpec, cost: u64) -> LimitResult {
        self.run(&[Check {
            tag,
            limits: std::slice::from_ref(limit),
            cost,
            refund: true,
        }])
        .await[0]
    }

    pub fn dbsize(&self) -> i64 {
        self.server.query(&["DBSIZE"])
    }

    /// A fixed_window state as stored: a hash of one field, the window start, holding the
    /// count (`src/store/lua/fixed_window.lua`); `None` when there is no key.
    pub fn fixed_window_state(&self, tag: StateTag, limit: &LimitSpec) -> Option<(u64, u64)> {
        let h: Vec<String> = self
            .server
            .query(&["HGETALL", &self.store.state_key(tag, limit)]);
        match h.as_slice() {
            [] => None,
            [ws, c] => match (ws.parse(), c.parse()) {
                (Ok(ws), Ok(c)) => Some((ws, c)),
                _ => panic!("not a fixed_window state: {h:?}"),
            },
            _ => panic!("a fixed_window state holds one window: {h:?}"),
        }
    }
}

/// One call of `checks` on `store`: its results (a failed call panics, saying `what`).
pub async fn run_on(store: &RedisStore, checks: &[Check<'_>], what: &str) -> Vec<LimitResult> {
    let mut out = Vec::new();
    store.run(&Call::new(checks), &mut out).await.expect(what);
    out
}

/// An allowed result.
pub fn allow(remaining: u64, reset_ms: u64, used_before: u64) -> LimitResult {
    LimitResult {
        allowed: true,
        remaining,
        reset_ms,
        retry_ms: None,
        used_before,
        penalized: false,
    }
}

/// A denied result (not by a penalty).
pub fn deny(reset_ms: u64, retry_ms: Option<u64>, used_before: u64) -> LimitResult {
    LimitResult {
        allowed: false,
        remaining: 0,
        reset_ms,
        retry_ms,
        used_before,
        penalized: false,
    }
}
