//! How a request becomes script calls, and replies become results: the grouping of a
//! request's checks into calls (one per request on a single node, one per slot on a cluster,
//! split past [`MAX_LIMITS_PER_CALL`]) and one round trip over the connection ring, with the
//! breaker and error classification; on a cluster, the calls of a slot that is moving are
//! resent.

use std::time::Duration;

use deadpool_redis::redis::cluster_async::ClusterConnection;
use deadpool_redis::redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use super::script::{self, Invocation, parse_reply};
use super::{RedisStore, health, is_connection_error, is_transient};
use crate::limit::{Check, LimitResult};
use crate::store::StoreError;

/// Most limits in one script call: a request bigger than this (up to 64 descriptors with
/// several limits each) is split over several calls of one pipeline, so no call holds Redis
/// long (the SLOWLOG test).
pub(super) const MAX_LIMITS_PER_CALL: usize = 16;

impl RedisStore {
    /// The checks (indexes into `checks`) of each script call: on a single node, in order,
    /// as few calls as [`MAX_LIMITS_PER_CALL`] allows (one for any ordinary request); on a
    /// cluster, one group per slot (first-seen order), split the same way.
    pub(super) fn groups(&self, checks: &[Check<'_>]) -> Vec<Vec<usize>> {
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
    pub(super) async fn round_trip(
        &self,
        calls: Vec<Invocation>,
        timeout: std::time::Duration,
    ) -> Result<Vec<Vec<LimitResult>>, StoreError> {
        let sizes: Vec<usize> = calls.iter().map(|c| c.limits).collect();
        // The breaker: with no live connection, fail now rather than connect or wait.
        let Some(lease) = self.ring.pick() else {
            return Err(StoreError::Unavailable("redis is not connected".into()));
        };
        let values = match tokio::time::timeout(timeout, self.exec(lease.conn.clone(), calls)).await
        {
            Err(_) => {
                self.ring.timed_out(&lease);
                return Err(StoreError::Timeout(timeout));
            }
            Ok(Err(e)) if is_connection_error(&e) => {
                self.ring.broken(&lease);
                return Err(StoreError::Unavailable(e.into()));
            }
            Ok(Err(e)) if e.code().is_some_and(health::is_refusal) => {
                self.refusals.refused();
                return Err(StoreError::Unavailable(e.into()));
            }
            Ok(Err(e)) if matches!(e.kind(), ErrorKind::Server(k) if is_transient(k)) => {
                return Err(StoreError::Unavailable(e.into()));
            }
            Ok(Err(e)) => return Err(StoreError::Backend(e.into())),
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
                        return Err(StoreError::Unavailable(e.clone().into()));
                    }
                    Some(k) if is_transient(k) => {
                        return Err(StoreError::Unavailable(e.clone().into()));
                    }
                    _ if refused => return Err(StoreError::Unavailable(e.clone().into())),
                    _ => {}
                }
            }
        }
        if values.len() != sizes.len() {
            return Err(StoreError::Backend(
                format!("expected {} replies, got {}", sizes.len(), values.len()).into(),
            ));
        }
        let mut out = Vec::with_capacity(sizes.len());
        for (&limits, value) in sizes.iter().zip(&values) {
            let mut results = Vec::with_capacity(limits);
            parse_reply(value, limits, &mut results)?;
            out.push(results);
        }
        self.refusals.succeeded();
        Ok(out)
    }
}

impl RedisStore {
    /// One `EVALSHA` per call (one per slot), concurrently.
    ///
    /// A call answered `MOVED`, `ASK` or `TRYAGAIN` did not run: its slot is moving (the
    /// client's map is behind, a node has not heard of the new owner yet, or the call's keys
    /// are split between two nodes mid-`MIGRATE`). redis-rs follows a few redirects itself;
    /// past those, the call is sent again after a short pause rather than failed, until the
    /// round trip's deadline (`request_timeout`, around this) ends it. Resending cannot
    /// count a hit twice: the script never ran.
    pub(super) async fn exec_cluster(
        &self,
        conn: ClusterConnection,
        calls: &[Invocation],
    ) -> Result<Vec<Value>, RedisError> {
        let calls = calls.iter().map(|call| {
            let conn = conn.clone();
            async move {
                let mut pause = CLUSTER_RETRY_MIN;
                loop {
                    let mut conn = conn.clone();
                    let mut inv = self.script.prepare_invoke();
                    inv.key(&call.keys).arg(&call.args);
                    match inv.invoke_async::<Value>(&mut conn).await {
                        Err(e) if is_slot_moving(&e) => {
                            tracing::debug!(error = %e, retry_in = ?pause, "cluster slot moving");
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(CLUSTER_RETRY_MAX);
                        }
                        r => return r,
                    }
                }
            }
        });
        futures::future::join_all(calls).await.into_iter().collect()
    }
}

/// First and longest pause before resending a cluster call whose slot is moving.
const CLUSTER_RETRY_MIN: Duration = Duration::from_millis(1);
const CLUSTER_RETRY_MAX: Duration = Duration::from_millis(20);

/// A cluster answer that says the call did not run because its slot is moving.
fn is_slot_moving(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain
        )
    )
}
