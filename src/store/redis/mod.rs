//! The Redis store: one Lua script per check (every limit of a descriptor decided atomically),
//! all checks of a request in one round trip.
//!
//! - Single node: the `EVALSHA`s of one `run()` go in one pipeline on one connection. Commands
//!   that come back `NOSCRIPT` (after `SCRIPT FLUSH`, a restart, a failover) are resent, alone,
//!   behind a `SCRIPT LOAD`: resending the others would charge them twice.
//! - Cluster: the keys of one check share a hash tag (one slot), different checks usually do
//!   not, so each check is its own `EVALSHA`, all sent concurrently on the cluster connection
//!   (one round trip of latency; `Script::invoke_async` handles `NOSCRIPT` per call).
//! - Connections live in a small ring (see `conn.rs`); a request never connects, never checks
//!   a connection out of a pool, and never waits longer than `request_timeout`.
//! - Time: `TIME` inside the script, or the injected [`Clock`] in local mode.
//!
//! Keys: `<prefix>{<tag>}:<code>:<window s>:<buckets>:<slot>` and the same plus `:p` for the
//! penalty lock; the tag is the descriptor's [`StateTag`] in base64url.

mod batch;
mod config;
mod conn;
mod connect;
mod health;
mod pipeline;
mod reset;
mod script;
mod sentinel;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_redis::redis::cluster_async::ClusterConnection;
use deadpool_redis::redis::{ErrorKind, RedisError, Script, ServerErrorKind, Value};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::limit::{Algorithm, Check, Clock, LimitResult, LimitSpec, StateTag, Unit};
use crate::store::{Store, StoreError};

pub use config::{
    DEFAULT_KEY_PREFIX, RedisConfig, RedisConfigError, RedisTls, SentinelConfig, TimeSource,
    check_prefix,
};
use conn::{Backoff, Conn, Ring};
use connect::Connector;
use health::Refusals;
pub use script::SCRIPT;
use script::{CallContext, Invocation, parse_reply};

/// State in Redis (single node or cluster). See the module documentation.
pub struct RedisStore {
    ring: Arc<Ring>,
    /// Calls refused by a server that will not write (see `health.rs`).
    refusals: Refusals,
    cluster: bool,
    script: Script,
    clock: Arc<dyn Clock>,
    time_source: TimeSource,
    slack_ms: u64,
    prefix: String,
    request_timeout: Duration,
    /// How long a `reset` (an admin command) may take.
    admin_timeout: Duration,
    nonce_seed: u64,
    nonce_counter: AtomicU64,
    /// Stops the reconnect task when the store is dropped.
    _stop: DropGuard,
}

impl RedisStore {
    /// Validate `cfg` and start connecting in the background; never blocks. Must be called
    /// inside a tokio runtime. Until a connection is up, [`Store::is_ready`] is false and
    /// `run()` fails with [`StoreError::Unavailable`].
    pub fn new(cfg: RedisConfig, clock: Arc<dyn Clock>) -> Result<RedisStore, RedisConfigError> {
        check_prefix(&cfg.key_prefix)?;
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| RedisConfigError::NoRuntime)?;
        // Every path that may open a TLS connection gets the crypto provider, not only the
        // server's startup (tests and embedders build stores directly).
        crate::tls::install_crypto_provider();
        let pool_size = cfg.pool_size.max(1);
        let cluster = !cfg.cluster_nodes.is_empty() && cfg.sentinel.is_none();
        let connector = Connector::new(&cfg, pool_size)?;
        let ring = Arc::new(Ring::new(
            cfg.name,
            pool_size,
            cfg.breaker_timeouts,
            cfg.request_timeout,
        ));
        let script = Script::new(SCRIPT);
        let stop = CancellationToken::new();
        let backoff = Backoff {
            min: cfg.reconnect_backoff_min,
            max: cfg.reconnect_backoff_max.max(cfg.reconnect_backoff_min),
            connect_timeout: cfg.connect_timeout,
        };
        connector.spawn_watchers(&ring, &stop);
        runtime.spawn(conn::reconnect_loop(
            ring.clone(),
            connector,
            script.clone(),
            backoff,
            stop.clone(),
        ));
        Ok(RedisStore {
            ring,
            refusals: Refusals::new(cfg.refusal_grace),
            cluster,
            script,
            clock,
            time_source: cfg.time_source,
            slack_ms: cfg.effective_slack_ms(),
            prefix: cfg.key_prefix,
            request_timeout: cfg.request_timeout,
            admin_timeout: cfg.connect_timeout + cfg.request_timeout,
            nonce_seed: nonce_seed(),
            nonce_counter: AtomicU64::new(0),
            _stop: stop.drop_guard(),
        })
    }

    /// Wait until at least one connection is up; false if `timeout` passed first.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let mut rx = self.ring.subscribe();
        matches!(
            tokio::time::timeout(timeout, rx.wait_for(|c| *c > 0)).await,
            Ok(Ok(_))
        )
    }

    /// Connections currently up.
    pub fn connected(&self) -> usize {
        self.ring.connected()
    }

    /// While writes are being refused, try one: a real check on a key of the store's own (a
    /// per-second window no request can fill), so recovery is seen without traffic. Does
    /// nothing otherwise. Called by the health refresher.
    pub async fn probe(&self) {
        if !self.refusals.refusing() {
            return;
        }
        let limits = [LimitSpec {
            requests_per_unit: 1_000_000_000,
            unit: Unit::Second,
            unit_multiplier: 1,
            algorithm: Algorithm::FixedWindow,
            burst: 1_000_000_000,
            buckets: 0,
            overdraft: true,
            penalty_ms: 0,
            name: None,
            slot: 0,
        }];
        let check = Check {
            tag: StateTag::compute("sluice.health", [("probe", "")]),
            limits: &limits,
            cost: 1,
            refund: false,
        };
        let mut out = Vec::with_capacity(1);
        if let Err(e) = self.run(&[check], &mut out).await {
            tracing::debug!(error = %e, "redis health probe failed");
        }
    }

    /// SHA1 of [`SCRIPT`], as used by `EVALSHA`.
    pub fn script_sha(&self) -> &str {
        self.script.get_hash()
    }

    /// The key holding `spec`'s state for the descriptor `tag`.
    pub fn state_key(&self, tag: StateTag, spec: &LimitSpec) -> String {
        state_key(&self.prefix, tag, spec)
    }

    /// The key holding `spec`'s penalty lock for the descriptor `tag`.
    pub fn lock_key(&self, tag: StateTag, spec: &LimitSpec) -> String {
        lock_key(&self.prefix, tag, spec)
    }

    /// The prefix of every key.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// Unique per `EVALSHA` (sliding-log members embed it, so two calls in one ms never
    /// collide, including across sluice instances).
    fn nonce(&self) -> String {
        let n = self.nonce_counter.fetch_add(1, Ordering::Relaxed);
        format!("{:x}.{n:x}", self.nonce_seed)
    }

    async fn exec(&self, conn: Conn, calls: Vec<Invocation>) -> Result<Vec<Value>, RedisError> {
        match conn {
            Conn::Single(batcher) => batcher.exec(calls).await,
            Conn::Cluster(c) => self.exec_cluster(c, &calls).await,
        }
    }

    /// One `EVALSHA` per check, concurrently (checks usually live on different slots).
    async fn exec_cluster(
        &self,
        conn: ClusterConnection,
        calls: &[Invocation],
    ) -> Result<Vec<Value>, RedisError> {
        let calls = calls.iter().map(|call| {
            let mut conn = conn.clone();
            let mut inv = self.script.prepare_invoke();
            inv.key(&call.keys).arg(&call.args);
            async move { inv.invoke_async::<Value>(&mut conn).await }
        });
        futures::future::join_all(calls).await.into_iter().collect()
    }
}

/// The key a store with key prefix `prefix` keeps `spec`'s state in for the descriptor
/// `tag` (`sluice explain` shows it without a store).
pub fn state_key(prefix: &str, tag: StateTag, spec: &LimitSpec) -> String {
    script::state_key(prefix, &tag.to_base64url(), spec)
}

/// The key of `spec`'s penalty lock: [`state_key`] plus `:p`.
pub fn lock_key(prefix: &str, tag: StateTag, spec: &LimitSpec) -> String {
    script::lock_key(prefix, &tag.to_base64url(), spec)
}

impl Store for RedisStore {
    async fn run(
        &self,
        checks: &[Check<'_>],
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        let ctx = CallContext {
            now_ms: match self.time_source {
                TimeSource::Local => Some(self.clock.now_ms()),
                TimeSource::Redis => None,
            },
            slack_ms: self.slack_ms,
            prefix: &self.prefix,
        };
        let calls: Vec<Invocation> = checks
            .iter()
            .filter(|c| !c.limits.is_empty())
            .map(|c| Invocation::new(ctx, c, &self.nonce()))
            .collect();
        if calls.is_empty() {
            return Ok(());
        }
        let sizes: Vec<usize> = calls.iter().map(|c| c.limits).collect();
        // The breaker: with no live connection, fail now rather than connect or wait.
        let Some(lease) = self.ring.pick() else {
            return Err(StoreError::Unavailable("redis is not connected".to_owned()));
        };
        let values =
            match tokio::time::timeout(self.request_timeout, self.exec(lease.conn.clone(), calls))
                .await
            {
                Err(_) => {
                    self.ring.timed_out(&lease);
                    return Err(StoreError::Timeout(self.request_timeout));
                }
                Ok(Err(e)) if is_connection_error(&e) => {
                    self.ring.broken(&lease);
                    return Err(StoreError::Unavailable(e.to_string()));
                }
                Ok(Err(e)) if e.code().is_some_and(health::is_refusal) => {
                    self.refusals.refused();
                    return Err(StoreError::Unavailable(e.to_string()));
                }
                Ok(Err(e)) if matches!(e.kind(), ErrorKind::Server(k) if is_transient(k)) => {
                    return Err(StoreError::Unavailable(e.to_string()));
                }
                Ok(Err(e)) => return Err(StoreError::Backend(e.to_string())),
                Ok(Ok(values)) => values,
            };
        self.ring.succeeded(&lease);
        // Per-command errors that say "wrong server" or "not now" rather than "bad call".
        for v in &values {
            if let Value::ServerError(e) = v {
                // A server that will not write (Redis passes a script's `OOM`, `READONLY`…
                // on as the script's error code).
                let refused = health::is_refusal(e.code());
                if refused {
                    self.refusals.refused();
                }
                match e.kind() {
                    // Connected to a demoted primary (failover behind a DNS name or proxy):
                    // reconnect so the name is resolved again.
                    Some(ServerErrorKind::ReadOnly) => {
                        self.ring.broken(&lease);
                        return Err(StoreError::Unavailable(e.to_string()));
                    }
                    Some(k) if is_transient(k) => {
                        return Err(StoreError::Unavailable(e.to_string()));
                    }
                    _ if refused => return Err(StoreError::Unavailable(e.to_string())),
                    _ => {}
                }
            }
        }
        if values.len() != sizes.len() {
            return Err(StoreError::Backend(format!(
                "expected {} replies, got {}",
                sizes.len(),
                values.len()
            )));
        }
        for (&limits, value) in sizes.iter().zip(&values) {
            parse_reply(value, limits, out)?;
        }
        self.refusals.succeeded();
        Ok(())
    }

    async fn reset(&self, tag: StateTag, limits: &[LimitSpec]) -> Result<u64, StoreError> {
        self.delete_state(tag, limits).await
    }

    /// Connected, and not refusing writes for longer than the grace period.
    fn is_ready(&self) -> bool {
        self.ring.connected() > 0 && !self.refusals.sustained()
    }
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("cluster", &self.cluster)
            .field("connected", &self.ring.connected())
            .field("time_source", &self.time_source)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Errors after which the connection cannot be trusted any more (or points at a replica).
fn is_connection_error(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}

/// Server answers that mean "not now" (loading, failover, resharding), not "bad call".
fn is_transient(kind: ServerErrorKind) -> bool {
    matches!(
        kind,
        ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::TryAgain
    )
}

/// A per-instance random-enough seed without a RNG dependency: time, pid and an address.
fn nonce_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let local = 0u8;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&nanos.to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(&(std::ptr::addr_of!(local) as usize).to_le_bytes());
    h.digest()
}
