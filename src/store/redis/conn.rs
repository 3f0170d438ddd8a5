//! Connections to Redis: a small ring of long-lived multiplexed connections (or cluster
//! connections), a per-connection circuit breaker, and the single background task that
//! (re)connects with exponential backoff.
//!
//! No checkout per request (ARCHITECTURE.md, "deadpool and the ring"): a connection is made
//! once and owned by its batcher; requests clone it (cheap: the multiplexer is shared). On a
//! single node the connection is an object of the deadpool pool that dialed it, checked out
//! when it was made and held by its slot for its whole life, so the pool bounds the
//! connections and counts them, and never recycles one (no `PING` per call); a dead one is
//! detached from the pool (`Object::take`), which makes room for the next. A connection that
//! fails with an I/O error, or that answers nothing at all for `dead_after`, is dropped from
//! the ring; requests then go to the remaining ones, or fail fast with `Unavailable` when
//! none is left, while the reconnect task alone talks to the network. No request ever waits
//! for a connect.
//!
//! Idle is not alive either: a connection's death is seen when a call on it fails, so with no
//! traffic a dead Redis would look connected. When no connection of the store has heard from
//! Redis for a while, the health refresher pings each ([`Ring::ping_if_silent`]): one `PING`
//! per connection per second of silence, none while any connection is busy.
//!
//! Slow is not dead. A request that times out says only that *this* request was not answered
//! in time; under overload most do, while Redis keeps answering. So a timeout never drops a
//! connection. A single-node connection's batcher sees every reply, late ones included, and
//! gives the connection up only when a pipeline has had no reply at all for `dead_after`
//! (`batch.rs`). A cluster connection is dropped only for errors: redis-rs keeps one
//! connection per node and follows the cluster's own failovers, and a timed-out call is
//! dropped rather than followed to its reply, so that redis-rs never sends it again after its
//! caller was told it failed. Dropping a connection that is merely busy would add a
//! reconnect (and a script load) to the load, and its replacement would be just as slow.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::Script;
use redis::cluster_async::ClusterConnection;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::batch::{Batcher, MERGE_REQUESTS};
use super::config::ConnectError;
use super::is_connection_error;

/// What the reconnect task needs from whatever makes connections (the `Connector` of
/// `connect.rs`, which implements it). Declared here so this file does not import the
/// connector, which imports the ring.
pub(crate) trait Dial {
    /// Whether to wait rather than connect (a failover is under way).
    fn paused(&self) -> bool;
    /// Connect and preload `script` (whose text is `source`).
    fn connect(
        &self,
        script: &Script,
        source: &'static str,
    ) -> impl Future<Output = Result<Dialed, ConnectError>> + Send;
}

/// A connection as it was made: what requests use, and, on a single node, the pool's object
/// it was checked out as, held as long as the connection lives.
pub(crate) struct Dialed {
    pub conn: Conn,
    pub object: Option<deadpool_redis::Connection>,
}

/// A live connection; cloning shares it.
#[derive(Clone)]
pub(crate) enum Conn {
    /// A multiplexed connection behind its batcher (see `batch.rs`).
    Single(Batcher),
    Cluster(ClusterConnection),
}

struct Slot {
    /// The connection and the generation it was installed with; `None` while broken.
    conn: Mutex<Option<(u64, Conn)>>,
    /// Its pool object (single node), detached from the pool when the connection goes.
    object: Mutex<Option<deadpool_redis::Connection>>,
}

/// A connection borrowed for one request, with what is needed to report its fate.
pub(crate) struct Lease {
    slot: usize,
    generation: u64,
    pub conn: Conn,
}

/// The connections in use and the breaker state.
pub(crate) struct Ring {
    slots: Box<[Slot]>,
    next: AtomicUsize,
    generation: AtomicU64,
    connected: watch::Sender<usize>,
    wake: Notify,
    /// Connections dropped as broken (errors, silence), since the ring was made.
    dropped: AtomicU64,
    /// Which store this is, in logs (`redis`, `redis_per_second`).
    name: &'static str,
    /// Where it connects, credentials left out (`RedisConfig::shown_address`), in logs.
    addr: String,
    /// Why the last connection attempt failed, until one succeeds (health says it).
    last_error: Mutex<Option<String>>,
    /// How long a ping may go unanswered before its connection is dead (`--redis-dead-after`,
    /// the batchers' own bound).
    dead_after: Duration,
}

impl Ring {
    pub fn new(name: &'static str, addr: String, size: usize, dead_after: Duration) -> Ring {
        let slots = (0..size.max(1))
            .map(|_| Slot {
                conn: Mutex::new(None),
                object: Mutex::new(None),
            })
            .collect();
        Ring {
            slots,
            next: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            connected: watch::Sender::new(0),
            wake: Notify::new(),
            dropped: AtomicU64::new(0),
            name,
            addr,
            last_error: Mutex::new(None),
            dead_after,
        }
    }

    /// Where the ring connects, as logs show it.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Why the last connection attempt failed, if it did.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// The connection for the next request; `None` when every connection is down.
    ///
    /// Single node: the first live connection (in slot order) whose forming batch is not
    /// full yet, else the live one with the fewest waiting. Redis pays a fixed price per read
    /// (an event-loop turn, a `read`, a `write`: the same `INCRBY` cost it 1 µs pipelined ×16
    /// and 7 µs pipelined ×2) and per script call, so the requests waiting at one moment go
    /// in one batch rather than a quarter of them in each of four (script calls per request
    /// at one descriptor: 0.23 under round robin, 0.14; BENCHMARKS.md, "Redis cost per decision"). A request
    /// waits at most for the batch in flight on its connection, as it did under round robin,
    /// and the other connections take the overflow (a full batch, or a connection that
    /// stopped answering).
    /// Cluster: round robin (its connection routes and pipelines per node itself).
    pub fn pick(&self) -> Option<Lease> {
        let mut best: Option<(usize, Lease)> = None;
        for (slot, s) in self.slots.iter().enumerate() {
            let guard = s.conn.lock();
            let Some((generation, conn)) = guard.as_ref() else {
                continue;
            };
            let waiting = match conn {
                Conn::Single(b) => b.waiting(),
                Conn::Cluster(_) => break,
            };
            if best.as_ref().is_some_and(|(w, _)| *w <= waiting) {
                continue;
            }
            let lease = Lease {
                slot,
                generation: *generation,
                conn: conn.clone(),
            };
            if waiting < MERGE_REQUESTS {
                return Some(lease);
            }
            best = Some((waiting, lease));
        }
        match best {
            Some((_, lease)) => Some(lease),
            None => self.pick_round_robin(),
        }
    }

    /// Next live connection, round-robin.
    fn pick_round_robin(&self) -> Option<Lease> {
        let len = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..len).find_map(|i| {
            let slot = (start + i) % len;
            let guard = self.slots[slot].conn.lock();
            guard.as_ref().map(|(generation, conn)| Lease {
                slot,
                generation: *generation,
                conn: conn.clone(),
            })
        })
    }

    pub fn connected(&self) -> usize {
        *self.connected.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.connected.subscribe()
    }

    /// Connections dropped as broken since the ring was made.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Drop the lease's connection (unless it was already replaced) and wake the reconnector.
    pub fn broken(&self, lease: &Lease) {
        let slot = &self.slots[lease.slot];
        let mut guard = slot.conn.lock();
        if matches!(&*guard, Some((g, _)) if *g == lease.generation) {
            *guard = None;
            drop(guard);
            slot.detach();
            self.dropped.fetch_add(1, Ordering::Relaxed);
            self.connected.send_modify(|c| *c = c.saturating_sub(1));
            tracing::warn!(
                store = self.name,
                addr = %self.addr,
                slot = lease.slot,
                "redis connection dropped; reconnecting"
            );
            self.wake.notify_one();
        }
    }

    /// Drop every connection (they point at a master that is being replaced) and wake the
    /// reconnector. Requests fail fast from now until a new connection is installed.
    pub fn drop_all(&self) {
        let mut dropped = 0;
        for slot in self.slots.iter() {
            if slot.conn.lock().take().is_some() {
                slot.detach();
                dropped += 1;
            }
        }
        if dropped > 0 {
            self.connected
                .send_modify(|c| *c = c.saturating_sub(dropped));
        }
        self.wake.notify_one();
    }

    /// Wake the reconnector (it may connect again).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    fn empty_slots(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.conn.lock().is_none())
            .count()
    }

    /// Put a fresh connection in the first empty slot. Returns false when none was empty
    /// (its pool object is then detached).
    fn install(&self, dialed: Dialed) -> bool {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        for slot in self.slots.iter() {
            let mut guard = slot.conn.lock();
            if guard.is_none() {
                *slot.object.lock() = dialed.object;
                *guard = Some((generation, dialed.conn));
                drop(guard);
                self.connected.send_modify(|c| *c += 1);
                return true;
            }
        }
        if let Some(object) = dialed.object {
            drop(deadpool_redis::Connection::take(object));
        }
        false
    }

    /// When no single-node connection has heard from Redis for `after` (none is busy),
    /// `PING` each; one that does not answer within `dead_after`, or whose connection
    /// fails, is dropped as broken. The health refresher calls this at every tick, so an idle
    /// store notices a dead Redis within about `after` plus a tick.
    pub async fn ping_if_silent(&self, after: Duration) {
        let leases: Vec<(Lease, Batcher)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(slot, s)| match s.conn.lock().as_ref() {
                Some((generation, Conn::Single(b))) => Some((
                    Lease {
                        slot,
                        generation: *generation,
                        conn: Conn::Single(b.clone()),
                    },
                    b.clone(),
                )),
                _ => None,
            })
            .collect();
        if leases.is_empty() || leases.iter().any(|(_, b)| b.silent_for() < after) {
            return;
        }
        let pings = leases.iter().map(|(lease, b)| async move {
            match b.ping(self.dead_after).await {
                Err(e) if is_connection_error(&e) => {
                    tracing::debug!(store = self.name, slot = lease.slot, error = %e, "idle redis connection did not answer a ping");
                    self.broken(lease);
                }
                // Answered, if only with an error (`LOADING`): alive.
                _ => {}
            }
        });
        futures::future::join_all(pings).await;
    }
}

impl Slot {
    /// Detach the slot's pool object, if any, from its pool: the connection is gone, and
    /// the pool may dial another.
    fn detach(&self) {
        if let Some(object) = self.object.lock().take() {
            drop(deadpool_redis::Connection::take(object));
        }
    }
}

/// Reconnect policy of the background task.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Backoff {
    pub min: Duration,
    pub max: Duration,
    pub connect_timeout: Duration,
}

/// The only place that connects: fills empty slots, backing off exponentially while Redis is
/// unreachable, then sleeps until a connection breaks. Ends when `stop` is cancelled.
pub(crate) async fn reconnect_loop(
    ring: Arc<Ring>,
    connector: impl Dial,
    script: Script,
    source: &'static str,
    backoff: Backoff,
    stop: CancellationToken,
) {
    let mut delay = backoff.min;
    loop {
        if ring.empty_slots() == 0 {
            tokio::select! {
                () = stop.cancelled() => return,
                () = ring.wake.notified() => continue,
            }
        }
        if connector.paused() {
            // A failover is under way: connect to nothing until it ends (or is given up).
            tokio::select! {
                () = stop.cancelled() => return,
                () = ring.wake.notified() => {}
                () = tokio::time::sleep(backoff.min) => {}
            }
            continue;
        }
        let attempt = connector.connect(&script, source);
        let result = tokio::select! {
            () = stop.cancelled() => return,
            r = tokio::time::timeout(backoff.connect_timeout, attempt) => r,
        };
        match result {
            // Made just before a failover began: not used.
            Ok(Ok(Dialed { object, .. })) if connector.paused() => {
                if let Some(object) = object {
                    drop(deadpool_redis::Connection::take(object));
                }
            }
            Ok(Ok(conn)) => {
                ring.last_error.lock().take();
                if ring.install(conn) {
                    tracing::info!(
                        store = ring.name,
                        addr = %ring.addr,
                        connected = ring.connected(),
                        "redis connection established"
                    );
                }
                delay = backoff.min;
            }
            Ok(Err(e)) => {
                tracing::warn!(store = ring.name, addr = %ring.addr, error = %e, retry_in = ?delay, "redis connect failed");
                *ring.last_error.lock() = Some(e.to_string());
                if sleep_or_stop(delay, &stop).await {
                    return;
                }
                delay = (delay * 2).min(backoff.max);
            }
            Err(_) => {
                tracing::warn!(store = ring.name, addr = %ring.addr, timeout = ?backoff.connect_timeout, retry_in = ?delay, "redis connect timed out");
                *ring.last_error.lock() = Some(format!(
                    "connect timed out after {:?}",
                    backoff.connect_timeout
                ));
                if sleep_or_stop(delay, &stop).await {
                    return;
                }
                delay = (delay * 2).min(backoff.max);
            }
        }
    }
}

/// Sleep for `d`; true when stopped meanwhile.
async fn sleep_or_stop(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        () = stop.cancelled() => true,
        () = tokio::time::sleep(d) => false,
    }
}
