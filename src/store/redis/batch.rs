//! Coalescing of concurrent requests on one single-node connection.
//!
//! Each connection of the ring has one batcher task. A request hands it the `EVALSHA`s of
//! its checks; the batcher sends everything queued at that moment as ONE pipeline (one
//! write, one read on both sides), waits for the replies and hands each request its share.
//! A lone request is sent at once, so nothing waits for a batch to fill; under load the
//! batches grow by themselves while the previous one is in flight. Profiles of the
//! per-request version showed a `writev` per request in sluice and a read per request in
//! Redis as the largest single costs.
//!
//! A request is still exactly one round trip: its calls always travel in one pipeline.

use deadpool_redis::redis::aio::MultiplexedConnection;
use deadpool_redis::redis::{ErrorKind, RedisError, Value};
use tokio::sync::{mpsc, oneshot};

use super::pipeline;
use super::script::Invocation;

/// Most calls in one pipeline, so one batch never holds Redis for long.
const MAX_CALLS: usize = 256;

/// A batch that has not been answered after this long is abandoned with its connection (a
/// paused or partitioned server): its requests timed out long ago.
const STALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

struct Job {
    calls: Vec<Invocation>,
    reply: oneshot::Sender<Result<Vec<Value>, RedisError>>,
}

/// The handle requests use; cloning is cheap. Dropping every handle ends the task.
#[derive(Clone)]
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<Job>,
    /// The same multiplexed connection, for the odd command that is not a check (`reset`).
    conn: MultiplexedConnection,
}

impl Batcher {
    /// Start the batcher task for `conn`.
    pub fn spawn(conn: MultiplexedConnection, sha: String, source: &'static str) -> Batcher {
        let (tx, rx) = mpsc::unbounded_channel();
        let direct = conn.clone();
        tokio::spawn(run(conn, rx, sha, source));
        Batcher { tx, conn: direct }
    }

    /// The connection itself (cheap: the multiplexer is shared), for commands outside the
    /// check pipelines.
    pub fn connection(&self) -> MultiplexedConnection {
        self.conn.clone()
    }

    /// Send `calls` in the next pipeline; one value per call, or the connection's error.
    pub async fn exec(&self, calls: Vec<Invocation>) -> Result<Vec<Value>, RedisError> {
        let (reply, rx) = oneshot::channel();
        let gone = || RedisError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        self.tx.send(Job { calls, reply }).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
}

async fn run(
    mut conn: MultiplexedConnection,
    mut rx: mpsc::UnboundedReceiver<Job>,
    sha: String,
    source: &'static str,
) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        let mut count = jobs[0].calls.len();
        while count < MAX_CALLS {
            match rx.try_recv() {
                Ok(job) => {
                    count += job.calls.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        // A request that already gave up (timed out) is not charged after the fact.
        jobs.retain(|j| !j.reply.is_closed());
        if jobs.is_empty() {
            continue;
        }
        let mut calls = Vec::with_capacity(count);
        let mut sizes = Vec::with_capacity(jobs.len());
        for job in &mut jobs {
            sizes.push(job.calls.len());
            calls.append(&mut job.calls);
        }
        let sent = pipeline::evalsha_all(&mut conn, &sha, source, &calls);
        match tokio::time::timeout(STALL_LIMIT, sent).await {
            Ok(Ok(values)) if values.len() == calls.len() => {
                let mut values = values.into_iter();
                for (job, size) in jobs.into_iter().zip(sizes) {
                    let _ = job.reply.send(Ok(values.by_ref().take(size).collect()));
                }
            }
            Ok(Ok(values)) => {
                let e = RedisError::from((
                    ErrorKind::Parse,
                    "reply count mismatch",
                    format!("{} replies for {} calls", values.len(), calls.len()),
                ));
                fail(jobs, &e);
            }
            Ok(Err(e)) => fail(jobs, &e),
            Err(_) => {
                let e = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
                fail(jobs, &e);
                // Give the connection up; the ring replaces it when requests report errors.
                return;
            }
        }
    }
}

/// Every job of a failed batch gets an equivalent error (`RedisError` is not `Clone`), with
/// the same classification (I/O errors stay I/O errors: they mark the connection broken).
fn fail(jobs: Vec<Job>, e: &RedisError) {
    for job in jobs {
        let copy = match e.kind() {
            ErrorKind::Io => RedisError::from(std::io::Error::other(e.to_string())),
            kind => RedisError::from((kind, "redis error", e.to_string())),
        };
        let _ = job.reply.send(Err(copy));
    }
}
