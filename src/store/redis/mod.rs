//! The Redis store: ONE Lua script call per request on a single node (every descriptor and
//! every limit of it, decided in order, each descriptor atomically, the request as a whole
//! atomically), one per slot on a cluster; one round trip either way.
//!
//! - Single node: the request's call goes in one pipeline on one connection, with other
//!   requests' calls (`batch.rs`). Calls that come back `NOSCRIPT` (after `SCRIPT FLUSH`, a
//!   restart, a failover) are resent, alone, behind a `SCRIPT LOAD`: resending the others
//!   would charge them twice. A request with more than [`MAX_LIMITS_PER_CALL`] limits is
//!   split over several calls of the same pipeline, so no call holds Redis long.
//! - Cluster: the keys of one descriptor share a hash tag (one slot); descriptors are grouped
//!   by slot, one `EVALSHA` per group, all sent concurrently on the cluster connection (one
//!   round trip of latency; `Script::invoke_async` handles `NOSCRIPT` per call).
//! - Stop-increment ([`Charge::StopWhenOver`]) is decided inside the script when the request
//!   is one call; over several calls, a dry run comes first (two round trips, not atomic).
//! - Connections live in a small ring (see `conn.rs`); a request never connects, never checks
//!   a connection out of a pool, and never waits longer than `request_timeout` per round trip.
//! - Time: `TIME` inside the script, or the injected [`Clock`] in local mode.
//!
//! Keys: `<prefix>{<tag>}:<code>:<unit s>:<buckets>:<slot>` and the same plus `:p` for the
//! penalty lock (sent only for limits with a penalty); the tag is the descriptor's
//! [`StateTag`] in base64url.

mod batch;
mod config;
mod conn;
mod pipeline;
mod script;

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis::cluster::ClusterClientBuilder;
use deadpool_redis::redis::cluster_async::ClusterConnection;
use deadpool_redis::redis::{
    AsyncConnectionConfig, ErrorKind, RedisError, Script, ServerErrorKind, Value,
};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::limit::{Charge, Check, Clock, LimitResult, LimitSpec, StateTag};
use crate::store::{Store, StoreError};

pub use config::{RedisConfig, RedisConfigError, TimeSource};
use conn::{Backoff, Conn, Connector, Ring};
pub use script::SCRIPT;
use script::{CallContext, Invocation, Mode, parse_reply};

/// State in Redis (single node or cluster). See the module documentation.
pub struct RedisStore {
    ring: Arc<Ring>,
    cluster: bool,
    script: Script,
    clock: Arc<dyn Clock>,
    time_source: TimeSource,
    slack_ms: u64,
    prefix: String,
    request_timeout: Duration,
    /// Stops the reconnect task when the store is dropped.
    _stop: DropGuard,
}

impl RedisStore {
    /// Validate `cfg` and start connecting in the background; never blocks. Must be called
    /// inside a tokio runtime. Until a connection is up, [`Store::is_ready`] is false and
    /// `run()` fails with [`StoreError::Unavailable`].
    pub fn new(cfg: RedisConfig, clock: Arc<dyn Clock>) -> Result<RedisStore, RedisConfigError> {
        if cfg.key_prefix.contains(['{', '}']) {
            return Err(RedisConfigError::PrefixBraces(cfg.key_prefix));
        }
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| RedisConfigError::NoRuntime)?;
        let pool_size = cfg.pool_size.max(1);
        let cluster = !cfg.cluster_nodes.is_empty();
        let connector = if cluster {
            let client = ClusterClientBuilder::new(cfg.cluster_nodes.clone())
                .connection_timeout(cfg.connect_timeout)
                .retries(3)
                .build()
                .map_err(|e| RedisConfigError::Url(e.to_string()))?;
            Connector::Cluster(Box::new(client))
        } else {
            // No response timeout on the connection itself: every request is bounded by
            // `request_timeout` around it, and the preload by `connect_timeout`.
            let conn_cfg = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(cfg.connect_timeout))
                .set_response_timeout(None);
            let manager = deadpool_redis::Manager::new_with_config(cfg.url.as_str(), conn_cfg)
                .map_err(|e| RedisConfigError::Url(e.to_string()))?;
            let pool = deadpool_redis::Pool::builder(manager)
                .max_size(pool_size)
                .runtime(deadpool_redis::Runtime::Tokio1)
                .create_timeout(Some(cfg.connect_timeout))
                .wait_timeout(Some(cfg.connect_timeout))
                .build()
                .map_err(|e| RedisConfigError::Pool(e.to_string()))?;
            Connector::Single(pool)
        };
        let ring = Arc::new(Ring::new(
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
        runtime.spawn(conn::reconnect_loop(
            ring.clone(),
            connector,
            script.clone(),
            backoff,
            stop.clone(),
        ));
        Ok(RedisStore {
            ring,
            cluster,
            script,
            clock,
            time_source: cfg.time_source,
            slack_ms: cfg.effective_slack_ms(),
            prefix: cfg.key_prefix,
            request_timeout: cfg.request_timeout,
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

    /// SHA1 of [`SCRIPT`], as used by `EVALSHA`.
    pub fn script_sha(&self) -> &str {
        self.script.get_hash()
    }

    /// The key holding `spec`'s state for the descriptor `tag`.
    pub fn state_key(&self, tag: StateTag, spec: &LimitSpec) -> String {
        script::state_key(&self.prefix, &tag.to_base64url(), spec)
    }

    /// The key holding `spec`'s penalty lock for the descriptor `tag`.
    pub fn lock_key(&self, tag: StateTag, spec: &LimitSpec) -> String {
        script::lock_key(&self.prefix, &tag.to_base64url(), spec)
    }

    async fn exec(&self, conn: Conn, calls: Vec<Invocation>) -> Result<Vec<Value>, RedisError> {
        match conn {
            Conn::Single(batcher) => batcher.exec(calls).await,
            Conn::Cluster(c) => self.exec_cluster(c, &calls).await,
        }
    }

    /// One `EVALSHA` per call (one per slot), concurrently.
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

/// Most limits in one script call: a request bigger than this (up to 64 descriptors with
/// several limits each) is split over several calls of one pipeline, so no call holds Redis
/// long (the SLOWLOG test).
const MAX_LIMITS_PER_CALL: usize = 16;

impl RedisStore {
    /// The checks (indexes into `checks`) of each script call: on a single node, in order,
    /// as few calls as [`MAX_LIMITS_PER_CALL`] allows (one for any ordinary request); on a
    /// cluster, one group per slot (first-seen order), split the same way.
    fn groups(&self, checks: &[Check<'_>]) -> Vec<Vec<usize>> {
        let mut groups: Vec<(u16, usize, Vec<usize>)> = Vec::new();
        for (i, c) in checks.iter().enumerate() {
            if c.limits.is_empty() {
                continue;
            }
            let slot = if self.cluster {
                script::slot(&c.tag.to_base64url())
            } else {
                0
            };
            let k = c.limits.len();
            match groups.iter_mut().rev().find(|g| g.0 == slot) {
                Some(g) if g.1 + k <= MAX_LIMITS_PER_CALL || g.2.is_empty() => {
                    g.1 += k;
                    g.2.push(i);
                }
                _ => groups.push((slot, k, vec![i])),
            }
        }
        groups.into_iter().map(|g| g.2).collect()
    }

    /// Send `calls` in one round trip (one pipeline, or concurrent calls on a cluster) and
    /// decode every reply: one result per limit, per call, in call order.
    async fn round_trip(
        &self,
        calls: Vec<Invocation>,
    ) -> Result<Vec<Vec<LimitResult>>, StoreError> {
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
        let mut out = Vec::with_capacity(sizes.len());
        for (&limits, value) in sizes.iter().zip(&values) {
            let mut results = Vec::with_capacity(limits);
            parse_reply(value, limits, &mut results)?;
            out.push(results);
        }
        Ok(out)
    }
}

impl Store for RedisStore {
    async fn run_with(
        &self,
        checks: &[Check<'_>],
        charge: Charge,
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
        let groups = self.groups(checks);
        let build = |mode: Mode| -> Vec<Invocation> {
            groups
                .iter()
                .map(|g| Invocation::new(ctx, mode, g.iter().map(|&i| &checks[i])))
                .collect()
        };
        let mode = match charge {
            Charge::Each => Mode::Each,
            Charge::Held => Mode::Held,
            // One call decides atomically whether the request has a denial.
            Charge::StopWhenOver if groups.len() <= 1 => Mode::Stop,
            // Over several calls (cluster slots, a very large request) it cannot: a dry run
            // first (a round trip that writes nothing), then the charge. Another request may
            // slip in between, as with envoyproxy/ratelimit's GET-then-INCRBY.
            Charge::StopWhenOver => {
                let dry = self.round_trip(build(Mode::Dry)).await?;
                let denied = groups.iter().zip(&dry).any(|(g, results)| {
                    let mut at = 0;
                    g.iter().any(|&i| {
                        let c = &checks[i];
                        let r = &results[at..at + c.limits.len()];
                        at += c.limits.len();
                        !c.refund && r.iter().any(|r| !r.allowed)
                    })
                });
                if denied { Mode::Held } else { Mode::Stop }
            }
        };
        if groups.is_empty() {
            return Ok(());
        }
        let replies = self.round_trip(build(mode)).await?;
        if groups.len() == 1 || !self.cluster {
            // In request order already.
            for r in replies {
                out.extend(r);
            }
            return Ok(());
        }
        // Cluster: back into request order.
        let mut per_check: Vec<&[LimitResult]> = vec![&[]; checks.len()];
        for (g, results) in groups.iter().zip(&replies) {
            let mut at = 0;
            for &i in g {
                let k = checks[i].limits.len();
                per_check[i] = &results[at..at + k];
                at += k;
            }
        }
        for r in per_check {
            out.extend_from_slice(r);
        }
        Ok(())
    }

    fn is_ready(&self) -> bool {
        self.ring.connected() > 0
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
