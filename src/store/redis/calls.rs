//! How a request becomes script calls, and replies become results: the grouping of a
//! request's checks into calls (one per request on a single node, one per slot on a cluster,
//! split past [`MAX_LIMITS_PER_CALL`]), each under its id key when the call has ids (a
//! request's, a write-back's batches), stop-increment over several calls, and one round trip
//! over the connection ring, with the breaker and error classification; on a cluster, the
//! calls of a slot that is moving are resent.

use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use super::conn::Conn;
use super::fate::{Tracker, Watch};
use super::script::{self, CallContext, IdKey, Invocation, Mode, parse_reply};
use super::{RedisStore, TimeSource, health, is_connection_error, is_transient};
use crate::limit::{Charge, Check, LimitResult};
use crate::store::{Call, CallId, Ids, StoreError};

/// Most limits in one script call: a request bigger than this (up to 64 descriptors with
/// several limits each) is split over several calls of one pipeline, so no call holds Redis
/// long (the SLOWLOG test).
pub(super) const MAX_LIMITS_PER_CALL: usize = 16;

/// How long Redis keeps an id (from the first send that reaches it): longer than the gap
/// until the last send of the same id, or the hits sent again would count twice.
/// - A request call ([`Ids::Request`]): sent again only when it failed,
///   with the write-back after the store answers again, a few seconds after a stall or
///   overload ends; a call applied and persisted just before a crash is covered by a restart
///   within this time. One key per request call with the fallback on: at `r` calls per
///   second, about `10·r` keys of ~150 bytes.
/// - A write-back: sent again at every interval until answered. One key per write-back
///   call, a few per second per instance.
pub(super) const REQUEST_ID_TTL_MS: u64 = 10_000;
pub(super) const WRITE_BACK_ID_TTL_MS: u64 = 60_000;

/// Checks of one store call under one id (with its TTL), or none.
#[derive(Clone, Copy)]
struct Part<'a, 'c> {
    pub id: Option<(CallId, u64)>,
    pub checks: &'a [Check<'c>],
}

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
    /// decode every reply: one result per limit, per call, in call order. The round trip
    /// must end by `deadline`; `budget` is what the whole store call was given (for the
    /// error message). `tracker` follows the pipeline on a single node (`fate.rs`).
    pub(super) async fn round_trip(
        &self,
        calls: Vec<Invocation>,
        deadline: Instant,
        budget: Duration,
        tracker: Option<&Tracker>,
    ) -> Result<Vec<Vec<LimitResult>>, StoreError> {
        let sizes: Vec<usize> = calls.iter().map(|c| c.limits).collect();
        // No time left (the caller's deadline, less the margin to answer): no store work.
        if deadline <= Instant::now() {
            return Err(StoreError::Timeout(budget));
        }
        // The breaker: with no live connection, fail now rather than connect or wait.
        let Some(lease) = self.ring.pick() else {
            return Err(StoreError::Unavailable("redis is not connected".into()));
        };
        // A call that times out is dropped: before the batcher takes it (single node) or
        // while redis-rs redirects it (cluster), it is then never sent, so a call its caller
        // was told failed is not counted later. One already sent is answered to the batcher,
        // which sees the late reply (`conn.rs`: slow is not dead).
        let done = match &lease.conn {
            Conn::Single(batcher) => {
                let exec = batcher.exec(calls, tracker.cloned());
                tokio::time::timeout_at(deadline.into(), exec).await
            }
            Conn::Cluster(c) => {
                tokio::time::timeout_at(deadline.into(), self.exec_cluster(c.clone(), &calls)).await
            }
        };
        let values = match done {
            Err(_) => return Err(StoreError::Timeout(budget)),
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

    /// [`Store::run`](crate::store::Store::run) by the script: the call's checks in parts,
    /// each under its id (one for a request, one per batch for a write-back, none), ending by
    /// the call's deadline, else by the store's own timeout (a write-back's is the admin
    /// one: off the request path, it carries every descriptor with hits, and one that times
    /// out is sent again, so a longer wait saves resends). A request's call is tracked
    /// through the batcher on a single node (`fate.rs`): redis-rs tells nothing of a call
    /// it was given on a cluster.
    pub(super) async fn run_script(
        &self,
        call: &Call<'_>,
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        let whole;
        let segments: Vec<Part<'_, '_>>;
        let (parts, watch): (&[Part<'_, '_>], _) = match call.ids {
            Ids::Unnamed => {
                whole = [Part {
                    id: None,
                    checks: call.checks,
                }];
                (&whole, None)
            }
            Ids::Request(id) => {
                whole = [Part {
                    id: Some((id, REQUEST_ID_TTL_MS)),
                    checks: call.checks,
                }];
                (&whole, (!self.cluster).then(|| self.fates.watch(id)))
            }
            Ids::WriteBack(batches) => {
                let mut rest = call.checks;
                segments = batches
                    .iter()
                    .map(|&(id, n)| {
                        let (checks, after) = rest.split_at(n.min(rest.len()));
                        rest = after;
                        Part {
                            id: Some((id, WRITE_BACK_ID_TTL_MS)),
                            checks,
                        }
                    })
                    .collect();
                (&segments, None)
            }
        };
        let deadline = self.deadline(call);
        let tracker = watch.as_ref().and_then(Watch::tracker);
        let result = self
            .run_within(parts, call.charge, out, deadline, tracker)
            .await;
        if let (Ok(()), Some(w)) = (&result, watch) {
            w.answered();
        }
        result
    }

    /// When `call` must end: its caller's deadline, else the store's own timeout from now.
    pub(super) fn deadline(&self, call: &Call<'_>) -> Instant {
        call.deadline.unwrap_or_else(|| {
            Instant::now()
                + match call.ids {
                    Ids::WriteBack(_) => self.admin_timeout,
                    Ids::Unnamed | Ids::Request(_) => self.request_timeout,
                }
        })
    }

    /// Every part (each under its id, if any), every round trip ending by `deadline`: each
    /// part's checks grouped into script calls as one request's are, every call of every
    /// part in one round trip, results part after part, in check order. `tracker` follows
    /// the round trip that applies the checks (not a dry run before it).
    async fn run_within(
        &self,
        parts: &[Part<'_, '_>],
        charge: Charge,
        out: &mut Vec<LimitResult>,
        deadline: Instant,
        tracker: Option<&Tracker>,
    ) -> Result<(), StoreError> {
        let budget = deadline.saturating_duration_since(Instant::now());
        let clock_ms = self.clock.now_ms();
        let ctx = CallContext {
            now_ms: match self.time_source {
                TimeSource::Local => Some(clock_ms),
                TimeSource::Redis => None,
            },
            calendar_ms: clock_ms,
            slack_ms: self.slack_ms,
            prefix: &self.prefix,
        };
        // Every script call: its part, and the checks (indexes into the part's) it carries.
        let calls: Vec<(usize, Vec<usize>)> = parts
            .iter()
            .enumerate()
            .flat_map(|(p, part)| self.groups(part.checks).into_iter().map(move |g| (p, g)))
            .collect();
        let build = |mode: Mode| -> Vec<Invocation> {
            // A part's calls are numbered in order: the same checks sent again under the
            // same id give the same calls, hence the same id keys.
            let mut index = vec![0; parts.len()];
            calls
                .iter()
                .map(|(p, g)| {
                    let part = &parts[*p];
                    let i = index[*p];
                    index[*p] += 1;
                    // A dry run writes nothing, not even an id.
                    let id = part
                        .id
                        .filter(|_| mode != Mode::Dry)
                        .map(|(id, ttl_ms)| IdKey {
                            key: script::id_key(
                                &self.prefix,
                                &part.checks[g[0]].tag.to_base64url(),
                                id.0,
                                i,
                            ),
                            ttl_ms,
                        });
                    Invocation::new(ctx, mode, g.iter().map(|&c| &part.checks[c]), id)
                })
                .collect()
        };
        let mode = match charge {
            Charge::Each => Mode::Each,
            Charge::Held => Mode::Held,
            // One call decides atomically whether the request has a denial.
            Charge::StopWhenOver if calls.len() <= 1 => Mode::Stop,
            // Over several calls (cluster slots, a very large request) it cannot: a dry run
            // first (a round trip that writes nothing), then the charge. Another request may
            // slip in between, as with envoyproxy/ratelimit's GET-then-INCRBY.
            Charge::StopWhenOver => {
                let dry = self
                    .round_trip(build(Mode::Dry), deadline, budget, None)
                    .await?;
                let denied = calls.iter().zip(&dry).any(|((p, g), results)| {
                    let mut at = 0;
                    g.iter().any(|&i| {
                        let c = &parts[*p].checks[i];
                        let r = &results[at..at + c.limits.len()];
                        at += c.limits.len();
                        !c.refund && r.iter().any(|r| !r.allowed)
                    })
                });
                if denied { Mode::Held } else { Mode::Stop }
            }
        };
        if calls.is_empty() {
            return Ok(());
        }
        let replies = self
            .round_trip(build(mode), deadline, budget, tracker)
            .await?;
        if calls.len() == 1 || !self.cluster {
            // In check order already, part after part.
            for r in replies {
                out.extend(r);
            }
            return Ok(());
        }
        // Cluster: back into check order.
        let mut per_check: Vec<Vec<&[LimitResult]>> = parts
            .iter()
            .map(|p| vec![&[][..]; p.checks.len()])
            .collect();
        for ((p, g), results) in calls.iter().zip(&replies) {
            let mut at = 0;
            for &i in g {
                let k = parts[*p].checks[i].limits.len();
                per_check[*p][i] = &results[at..at + k];
                at += k;
            }
        }
        for r in per_check.into_iter().flatten() {
            out.extend_from_slice(r);
        }
        Ok(())
    }

    /// One `EVALSHA` per call (one per slot), concurrently.
    ///
    /// A call answered `MOVED`, `ASK` or `TRYAGAIN` did not run: its slot is moving (the
    /// client's map is behind, a node has not heard of the new owner yet, or the call's keys
    /// are split between two nodes mid-`MIGRATE`). redis-rs follows a few redirects itself;
    /// past those, the call is sent again after a short pause rather than failed, until the
    /// round trip's deadline (the caller's, around this) ends it. Resending cannot count a
    /// hit twice: the script never ran.
    async fn exec_cluster(
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
