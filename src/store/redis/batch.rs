//! Coalescing of concurrent requests on one single-node connection.
//!
//! Each connection of the ring has one batcher task. A request hands it its `EVALSHA` (one
//! per request; several only past 16 limits); the batcher sends everything queued at that
//! moment as ONE pipeline (one write, one read on both sides), waits for the replies and
//! hands each request its share.
//! A lone request is sent at once, so nothing waits for a batch to fill; under load the
//! batches grow by themselves while the previous one is in flight. Profiles of the
//! per-request version showed a `writev` per request in sluice and a read per request in
//! Redis as the largest single costs.
//!
//! A request is still exactly one round trip: its calls always travel in one pipeline.
//!
//! The batcher is also the connection's breaker: it waits for every pipeline's replies,
//! however late, so it knows what a request that timed out cannot: whether Redis is still
//! answering. Only a pipeline that has had no reply for `dead_after` ends the task (and so the
//! connection: the ring drops it when the next request finds the task gone).
//!
//! Within the pipeline, calls of different requests that charge each check by its own
//! decision (the default: no stop-increment) and share a `now` are merged into ONE script
//! call, up to [`MERGE_REQUESTS`] requests and [`MERGE_LIMITS`] limits: every script call
//! pays a fixed price in Redis (dispatch, `TIME`, unpacking its arguments) before any work,
//! and at one descriptor per request that price was most of the cost. Each check is still
//! decided atomically and all-or-nothing over its limits, as in a call of its own; the
//! reply is cut back into each request's share. Only what is already queued is merged: no
//! request waits for others.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{ErrorKind, RedisError, Value};
use tokio::sync::{mpsc, oneshot};

use super::fate::{Carried, Tracker};
use super::merge;
use super::pipeline::{self, Counted};
use super::script::Invocation;

/// Most calls in one pipeline, so one batch never holds Redis for long.
const MAX_CALLS: usize = 256;

/// Most requests' calls merged into one script call; also how many waiting requests make a
/// connection full for the ring (`Ring::pick` sends the next request elsewhere).
pub(crate) const MERGE_REQUESTS: usize = 16;

/// Most limits in one merged script call (twice a lone request's split size,
/// `calls::MAX_LIMITS_PER_CALL`): bounded work per call, so none holds Redis for long.
const MERGE_LIMITS: usize = 32;

struct Job {
    calls: Vec<Invocation>,
    /// `--redis-reference-keys` checks, sent after the batch's script calls.
    counts: Vec<Counted>,
    reply: oneshot::Sender<Result<Vec<Value>, RedisError>>,
    /// Where the job is, for a caller that may leave before its answer (`fate.rs`).
    tracker: Option<Carried>,
}

/// The handle requests use; cloning is cheap. Dropping every handle ends the task.
#[derive(Clone)]
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Job>,
    /// Requests handed over and not yet taken into a batch: the batch forming while the
    /// previous one is in flight.
    waiting: Arc<AtomicUsize>,
    /// The same multiplexed connection, for the odd command that is not a check (`reset`).
    conn: MultiplexedConnection,
    /// When Redis last answered on this connection ([`Heard`]).
    heard: Arc<Heard>,
}

/// When Redis last answered on a connection: milliseconds since the connection was made.
struct Heard {
    since: Instant,
    at_ms: AtomicU64,
}

impl Heard {
    fn now(&self) {
        let ms = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.at_ms.fetch_max(ms, Ordering::Relaxed);
    }
}

impl Batcher {
    /// Start the batcher task for `conn`; it gives the connection up when a pipeline has
    /// had no reply for `dead_after` (a paused or partitioned server).
    pub fn spawn(
        conn: MultiplexedConnection,
        sha: String,
        source: &'static str,
        dead_after: Duration,
    ) -> Batcher {
        let (tx, rx) = mpsc::unbounded_channel();
        let direct = conn.clone();
        let waiting = Arc::new(AtomicUsize::new(0));
        let heard = Arc::new(Heard {
            since: Instant::now(),
            at_ms: AtomicU64::new(0),
        });
        let batcher = run(
            conn,
            rx,
            waiting.clone(),
            heard.clone(),
            sha,
            source,
            dead_after,
        );
        tokio::spawn(batcher);
        Batcher {
            tx,
            waiting,
            conn: direct,
            heard,
        }
    }

    /// How long Redis has said nothing on this connection (to any pipeline or ping).
    pub fn silent_for(&self) -> Duration {
        let at = Duration::from_millis(self.heard.at_ms.load(Ordering::Relaxed));
        self.heard.since.elapsed().saturating_sub(at)
    }

    /// `PING` on the connection, outside the check pipelines (in order behind them): an
    /// error unless answered within `within` (a timeout is an I/O error, as silence is).
    pub async fn ping(&self, within: Duration) -> Result<(), RedisError> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("PING");
        let ping = cmd.query_async::<()>(&mut conn);
        match tokio::time::timeout(within, ping).await {
            Ok(answered) => {
                self.heard.now();
                answered
            }
            Err(_) => Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()),
        }
    }

    /// Requests waiting for the next batch on this connection.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The connection itself (cheap: the multiplexer is shared), for commands outside the
    /// check pipelines.
    pub fn connection(&self) -> MultiplexedConnection {
        self.conn.clone()
    }

    /// Count this connection as full until the guard drops, so the ring (`Ring::pick`) sends
    /// requests to the others: a long pipeline that is not checks is on it (a large RLQS
    /// report, `quota.rs`), and replies come back in order on one connection, so a check
    /// queued behind it would wait for all of it.
    pub fn occupy(&self) -> Occupied {
        self.waiting.fetch_add(MERGE_REQUESTS, Ordering::Relaxed);
        Occupied(self.waiting.clone())
    }

    /// Send `calls` in the next pipeline; one value per call, or the connection's error.
    /// `tracker` learns whether they were sent and answered, even after the caller left.
    pub async fn exec(
        &self,
        calls: Vec<Invocation>,
        tracker: Option<Tracker>,
    ) -> Result<Vec<Value>, RedisError> {
        self.send(calls, Vec::new(), tracker).await
    }

    /// Send `counts` (`INCRBY` + `EXPIRE` each) in the next pipeline; what each `INCRBY`
    /// returned, or the connection's error.
    pub async fn count(&self, counts: Vec<Counted>) -> Result<Vec<Value>, RedisError> {
        self.send(Vec::new(), counts, None).await
    }

    async fn send(
        &self,
        calls: Vec<Invocation>,
        counts: Vec<Counted>,
        tracker: Option<Tracker>,
    ) -> Result<Vec<Value>, RedisError> {
        let (reply, rx) = oneshot::channel();
        let gone = || RedisError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        self.waiting.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = &tracker {
            t.queued();
        }
        // Not queued after all (the task is gone): the job, dropped, says it was never sent.
        if self
            .tx
            .send(Job {
                calls,
                counts,
                reply,
                tracker: tracker.map(Carried),
            })
            .is_err()
        {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(gone());
        }
        rx.await.map_err(|_| gone())?
    }
}

/// See [`Batcher::occupy`].
pub(crate) struct Occupied(Arc<AtomicUsize>);

impl Drop for Occupied {
    fn drop(&mut self) {
        self.0.fetch_sub(MERGE_REQUESTS, Ordering::Relaxed);
    }
}

async fn run(
    mut conn: MultiplexedConnection,
    mut rx: mpsc::UnboundedReceiver<Job>,
    waiting: Arc<AtomicUsize>,
    heard: Arc<Heard>,
    sha: String,
    source: &'static str,
    dead_after: Duration,
) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        let mut count = jobs[0].calls.len() + jobs[0].counts.len();
        while count < MAX_CALLS {
            match rx.try_recv() {
                Ok(job) => {
                    count += job.calls.len() + job.counts.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        waiting.fetch_sub(jobs.len(), Ordering::Relaxed);
        // A request that already gave up (timed out) is not charged after the fact (its
        // job, dropped here, tells its tracker it was never sent).
        jobs.retain(|j| !j.reply.is_closed());
        for Job { tracker, .. } in &jobs {
            if let Some(Carried(t)) = tracker {
                t.sent();
            }
        }
        if jobs.is_empty() {
            continue;
        }
        let (calls, parts) = merged(&mut jobs);
        let counted: Vec<usize> = jobs.iter().map(|j| j.counts.len()).collect();
        let counts: Vec<Counted> = jobs.iter_mut().flat_map(|j| j.counts.drain(..)).collect();
        let expected = calls.len() + counts.len();
        let sent = pipeline::evalsha_all(&mut conn, &sha, source, &calls, &counts);
        let answer = tokio::time::timeout(dead_after, sent).await;
        if let Ok(Ok(_)) = answer {
            heard.now();
        }
        match answer {
            Ok(Ok(values)) if values.len() == expected => {
                let mut per_job: Vec<Vec<Value>> = jobs.iter().map(|_| Vec::new()).collect();
                let mut values = values.into_iter();
                for (value, part) in values.by_ref().take(calls.len()).zip(parts) {
                    if let [(job, _)] = part[..] {
                        per_job[job].push(value);
                        continue;
                    }
                    let limits: Vec<usize> = part.iter().map(|&(_, k)| k).collect();
                    for ((job, _), v) in part.into_iter().zip(merge::split_reply(value, &limits)) {
                        per_job[job].push(v);
                    }
                }
                // The counts, in job order (a job has calls or counts, not both).
                for (job, out) in counted.iter().zip(per_job.iter_mut()) {
                    out.extend(values.by_ref().take(*job));
                }
                for (job, values) in jobs.into_iter().zip(per_job) {
                    if let Some(Carried(t)) = &job.tracker {
                        // A script's error may come after some of its writes.
                        if values.iter().any(|v| matches!(v, Value::ServerError(_))) {
                            t.lost();
                        } else {
                            t.applied();
                        }
                    }
                    let _ = job.reply.send(Ok(values));
                }
            }
            Ok(Ok(values)) => {
                let e = RedisError::from((
                    ErrorKind::Parse,
                    "reply count mismatch",
                    format!("{} replies for {expected} commands", values.len()),
                ));
                fail(jobs, &e);
            }
            Ok(Err(e)) => fail(jobs, &e),
            Err(_) => {
                let e = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
                fail(jobs, &e);
                // Nothing at all for `dead_after`: give the connection up; the ring replaces
                // it when the next request finds this task gone.
                tracing::warn!(
                    silent_for = ?dead_after,
                    "redis connection answered nothing; giving it up"
                );
                return;
            }
        }
    }
}

/// The calls of `jobs` as sent, and for each the (job, limits) of the calls it does: calls
/// that may merge (see [`Invocation::merges_with`]) and follow one another are merged, up to
/// the bounds; a job's calls keep their order.
fn merged(jobs: &mut [Job]) -> (Vec<Invocation>, Vec<Vec<(usize, usize)>>) {
    let mut calls = Vec::new();
    let mut parts: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut run: Vec<Invocation> = Vec::new();
    let mut run_parts: Vec<(usize, usize)> = Vec::new();
    let mut run_limits = 0;
    let flush = |run: &mut Vec<Invocation>,
                 run_parts: &mut Vec<(usize, usize)>,
                 calls: &mut Vec<Invocation>,
                 parts: &mut Vec<Vec<(usize, usize)>>| {
        match run.len() {
            0 => {}
            1 => calls.append(run),
            _ => {
                calls.push(Invocation::merge(run));
                run.clear();
            }
        }
        if !run_parts.is_empty() {
            parts.push(std::mem::take(run_parts));
        }
    };
    for (j, job) in jobs.iter_mut().enumerate() {
        for call in job.calls.drain(..) {
            // Only other requests' calls: a request split over several calls stays split.
            let joins = run.last().is_some_and(|last| {
                run_parts.last().is_some_and(|&(other, _)| other != j)
                    && last.merges_with(&call)
                    && run.len() < MERGE_REQUESTS
                    && run_limits + call.limits <= MERGE_LIMITS
            });
            if !joins {
                flush(&mut run, &mut run_parts, &mut calls, &mut parts);
                run_limits = 0;
            }
            run_limits += call.limits;
            run_parts.push((j, call.limits));
            run.push(call);
        }
    }
    flush(&mut run, &mut run_parts, &mut calls, &mut parts);
    (calls, parts)
}

/// Every job of a failed batch gets an equivalent error (`RedisError` is not `Clone`), with
/// the same classification (I/O errors stay I/O errors: they mark the connection broken).
fn fail(jobs: Vec<Job>, e: &RedisError) {
    // Each job, dropped after its answer, tells its tracker the call was lost.
    for job in jobs {
        let copy = match e.kind() {
            ErrorKind::Io => RedisError::from(std::io::Error::other(e.to_string())),
            kind => RedisError::from((kind, "redis error", e.to_string())),
        };
        let _ = job.reply.send(Err(copy));
    }
}
