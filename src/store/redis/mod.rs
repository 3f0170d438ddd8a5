//! The Redis store: ONE Lua script call per request on a single node (every descriptor and
//! every limit of it, decided in order, each descriptor atomically, the request as a whole
//! atomically), one per slot on a cluster; one round trip either way.
//!
//! - Single node: the request's call goes in one pipeline on one connection, with other
//!   requests' calls (`batch.rs`). Calls that come back `NOSCRIPT` (after `SCRIPT FLUSH`, a
//!   restart, a failover) are resent, alone, behind a `SCRIPT LOAD`: resending the others
//!   would charge them twice. A request with more than 16 limits (`calls.rs`) is
//!   split over several calls of the same pipeline, so no call holds Redis long.
//! - Cluster: the keys of one descriptor share a hash tag (one slot); descriptors are grouped
//!   by slot, one `EVALSHA` per group, all sent concurrently on the cluster connection (one
//!   round trip of latency; `Script::invoke_async` handles `NOSCRIPT` per call).
//! - Stop-increment ([`Charge::StopWhenOver`](crate::limit::Charge::StopWhenOver)) is decided inside the script when the request
//!   is one call; over several calls, a dry run comes first (two round trips, not atomic).
//! - Connections live in a small ring (see `conn.rs`); a request never connects, never checks
//!   a connection out of a pool, and never waits past its deadline: what the caller's
//!   `grpc-timeout` leaves ([`Call::deadline`]), else `request_timeout` (`--redis-timeout`).
//! - Time: `TIME` inside the script, or the injected [`Clock`] in local mode.
//! - Ids ([`Ids`]: a request's, a write-back's batches): each script call of an identified
//!   call records its id key (`SET NX PX`, in the slot of its first check, kept for the TTLs
//!   of `calls.rs`) with its hits, and only reports when the key is there already (a resend
//!   of a call Redis ran but could not answer in time). `header.lua`: segments. What became
//!   of a request call whose caller left is [`RedisStore::fate`] (`fate.rs`).
//!
//! Methods by concern: construction, accessors and [`Store`] here; script calls in
//! `calls.rs`, envoyproxy/ratelimit's counters in `reference.rs`, RLQS in `quota.rs`, the
//! health probe in `health.rs`.
//!
//! Keys: `<prefix>{<tag>}:<code>:<window s>:<buckets>:<slot>` and the same plus `:p` for the
//! penalty lock (sent only for limits with a penalty); the tag is the descriptor's
//! [`StateTag`] in base64url.

mod batch;
mod calls;
mod config;
mod conn;
mod connect;
mod fate;
mod health;
mod merge;
mod pipeline;
mod quota;
mod reference;
mod script;
mod sentinel;

use std::sync::Arc;
use std::time::Duration;

use redis::{ErrorKind, RedisError, Script, ServerErrorKind};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::limit::{Clock, LimitResult, LimitSpec, StateTag};
use crate::store::{Call, CallId, Ids, Store, StoreError};

pub use config::{
    DEFAULT_DEAD_AFTER, DEFAULT_KEY_PREFIX, RedisConfig, RedisConfigError, RedisTls,
    SentinelConfig, TimeSource, check_prefix, shown_url,
};
use conn::{Backoff, Conn, Ring};
use connect::Connector;
pub use fate::Fate;
use health::Refusals;
pub use quota::{QUOTA_BUCKETS_PER_CALL, QUOTA_SCRIPT, quota_key};
pub use script::SCRIPT;

/// State in Redis (single node or cluster). See the module documentation.
pub struct RedisStore {
    ring: Arc<Ring>,
    /// The single-node pool that dials the ring's connections (`connect.rs`), for its
    /// status.
    pool: Option<deadpool_redis::Pool>,
    /// Calls refused by a server that will not write (see `health.rs`).
    refusals: Refusals,
    cluster: bool,
    script: Script,
    clock: Arc<dyn Clock>,
    time_source: TimeSource,
    slack_ms: u64,
    prefix: String,
    /// `--redis-reference-keys` (local time only): their `CACHE_KEY_PREFIX` (`reference.rs`).
    reference_prefix: Option<String>,
    request_timeout: Duration,
    /// How long a `reset` (an admin command) may take.
    admin_timeout: Duration,
    /// Request calls that did not end answered, and where each went (`fate.rs`); the
    /// per-second pair, whose calls run on two stores, reads both stores'.
    pub(in crate::store) fates: fate::Fates,
    /// Stops the reconnect task when the store is dropped.
    _stop: DropGuard,
}

impl RedisStore {
    /// Validate `cfg` and start connecting in the background; never blocks. Must be called
    /// inside a tokio runtime. Until a connection is up, [`Store::is_ready`] is false and
    /// `run()` fails with [`StoreError::Unavailable`].
    pub fn new(cfg: RedisConfig, clock: Arc<dyn Clock>) -> Result<RedisStore, RedisConfigError> {
        RedisStore::with_script(cfg, clock, SCRIPT)
    }

    /// [`RedisStore::new`] with the script's Redis 7 detection forced off, so its
    /// fixed-window path takes the Redis < 7 branch (`HLEN` instead of `PEXPIRE ... NX`)
    /// whatever the server. For tests: the machines they run on have Redis 7, so without it
    /// that branch would never run. Production never calls it, and [`RedisStore::new`] pays
    /// nothing for it (the source is chosen once, here).
    #[doc(hidden)]
    pub fn new_forcing_pre_redis7(
        cfg: RedisConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<RedisStore, RedisConfigError> {
        RedisStore::with_script(cfg, clock, script::pre_redis7_script())
    }

    fn with_script(
        cfg: RedisConfig,
        clock: Arc<dyn Clock>,
        source: &'static str,
    ) -> Result<RedisStore, RedisConfigError> {
        check_prefix(&cfg.key_prefix)?;
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| RedisConfigError::NoRuntime)?;
        // Every path that may open a TLS connection gets the crypto provider, not only the
        // server's startup (tests and embedders build stores directly).
        crate::tls::install_crypto_provider();
        let pool_size = cfg.pool_size.max(1);
        let cluster = !cfg.cluster_nodes.is_empty() && cfg.sentinel.is_none();
        let connector = Connector::new(&cfg, pool_size)?;
        let pool = connector.pool();
        let ring = Arc::new(Ring::new(
            cfg.name,
            cfg.shown_address(),
            pool_size,
            cfg.dead_after,
        ));
        let script = Script::new(source);
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
            source,
            backoff,
            stop.clone(),
        ));
        Ok(RedisStore {
            ring,
            pool,
            refusals: Refusals::new(cfg.refusal_grace),
            cluster,
            script,
            clock,
            time_source: cfg.time_source,
            slack_ms: cfg.effective_slack_ms(),
            prefix: cfg.key_prefix,
            reference_prefix: cfg
                .reference_prefix
                .filter(|_| cfg.time_source == TimeSource::Local),
            request_timeout: cfg.request_timeout,
            admin_timeout: cfg.connect_timeout + cfg.request_timeout,
            fates: fate::Fates::default(),
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

    /// Connections currently up and in use (their script loaded).
    pub fn connected(&self) -> usize {
        self.ring.connected()
    }

    /// Connections open, for the connection gauge: on a single node, the objects of the
    /// deadpool pool (deadpool's status: each connection is one, checked out for its life);
    /// otherwise those of the ring.
    pub fn open_connections(&self) -> usize {
        self.pool
            .as_ref()
            .map_or_else(|| self.ring.connected(), |p| p.status().size)
    }

    /// Where this store connects, credentials left out (`redis://host:6379/0`).
    pub fn addr(&self) -> &str {
        self.ring.addr()
    }

    /// Why the store is not ready, in words naming its address; `None` when it is.
    pub fn not_ready_reason(&self) -> Option<String> {
        if self.ring.connected() == 0 {
            let why = self.ring.last_error().map_or_else(
                || "not connected yet".to_owned(),
                |e| format!("last attempt: {e}"),
            );
            return Some(format!("no connection to redis at {} ({why})", self.addr()));
        }
        if self.refusals.sustained() {
            return Some(format!(
                "redis at {} refuses writes (OOM, READONLY, MISCONF…)",
                self.addr()
            ));
        }
        None
    }

    /// Connections dropped as broken (an error, or silence: `conn.rs`) since the store was
    /// made.
    pub fn dropped(&self) -> u64 {
        self.ring.dropped()
    }

    /// What became of the request call under `id` that did not end answered (it failed, or
    /// its future was dropped at its caller's deadline), as far as this store knows; a
    /// settled fate is told once. Lets the local view skip the resend of a call that ran,
    /// or that was never sent.
    pub fn fate(&self, id: CallId) -> Fate {
        self.fates.take(id)
    }

    /// SHA1 of the store's script ([`SCRIPT`] unless built by
    /// [`RedisStore::new_forcing_pre_redis7`]), as used by `EVALSHA`.
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
    /// By the script, or, with `--redis-reference-keys` and the keys given, the checks that
    /// qualify as envoyproxy/ratelimit counts them (`reference.rs`).
    async fn run(&self, call: &Call<'_>, out: &mut Vec<LimitResult>) -> Result<(), StoreError> {
        match (call.keys, &self.reference_prefix, call.ids) {
            // Boxed: that future holds a script call's and more, and every request's
            // future (boxed once per request, `Backend`) would otherwise carry its size.
            (Some(keys), Some(prefix), Ids::Unnamed) => {
                Box::pin(self.run_reference(call, keys, prefix, out)).await
            }
            _ => self.run_script(call, out).await,
        }
    }

    /// One `DEL` of the limits' state and lock keys. They share the descriptor's hash tag,
    /// so on a cluster they live in one slot and one command reaches them all. It goes to a
    /// connection of the ring, whatever the topology, but not through a batcher's pipeline,
    /// which carries only checks: on a single node, straight onto the batcher's multiplexed
    /// connection.
    async fn reset(&self, tag: StateTag, limits: &[LimitSpec]) -> Result<u64, StoreError> {
        if limits.is_empty() {
            return Ok(0);
        }
        let mut cmd = redis::cmd("DEL");
        for spec in limits {
            cmd.arg(self.state_key(tag, spec))
                .arg(self.lock_key(tag, spec));
        }
        let lease = self
            .ring
            .pick()
            .ok_or_else(|| StoreError::Unavailable("redis is not connected".into()))?;
        let deleted = async {
            match &lease.conn {
                Conn::Single(batcher) => cmd.query_async::<u64>(&mut batcher.connection()).await,
                Conn::Cluster(conn) => cmd.query_async::<u64>(&mut conn.clone()).await,
            }
            .map_err(classify)
        };
        let limit = self.admin_timeout;
        tokio::time::timeout(limit, deleted)
            .await
            .map_err(|_| StoreError::Timeout(limit))?
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

/// A Redis error as the store reports it: the connection gone or the server saying "not
/// now" is `Unavailable`, anything else the backend's error.
fn classify(e: RedisError) -> StoreError {
    if is_connection_error(&e) || matches!(e.kind(), ErrorKind::Server(k) if is_transient(k)) {
        StoreError::Unavailable(e.into())
    } else {
        StoreError::Backend(e.into())
    }
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
