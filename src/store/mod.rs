//! Where limit state lives. The [`Store`] trait is the only way the limiter touches state;
//! [`memory::MemoryStore`] keeps it in process, [`redis::RedisStore`] in Redis (single node
//! or cluster) with one Lua script call per request (per slot on a cluster) and one round
//! trip; [`per_second::PerSecond`] sends per-second limits to a second Redis.
//!
//! Stores know nothing of gRPC, rule files or metrics.

pub mod deadline;
pub mod memory;
pub mod per_second;
pub mod quota;
pub mod redis;

use std::future::Future;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::limit::{Charge, Check, LimitResult, LimitSpec, StateTag};

/// What went wrong below a store, kept as the error's `source()`: the backend's own error
/// (a Redis error, to downcast), or a message where there is none (`"…".into()`).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// A backend's error with what it was doing in front (`"{context}: {source}"`), the error
/// kept as the source.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct Context {
    pub context: &'static str,
    #[source]
    pub source: Cause,
}

impl Context {
    pub fn cause(context: &'static str, source: impl Into<Cause>) -> Cause {
        Box::new(Context {
            context,
            source: source.into(),
        })
    }
}

/// The identity of a store call whose hits may be sent again (see [`Store::run_once`]): a
/// call sent twice under one id is applied at most once. Unique across instances: a random
/// base per process, then a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallId(pub u64);

impl CallId {
    pub fn fresh() -> CallId {
        static BASE: LazyLock<u64> = LazyLock::new(crate::limit::random::random_u64);
        static NEXT: AtomicU64 = AtomicU64::new(0);
        CallId(BASE.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)))
    }
}

/// What became of a call under an id that did not end answered ([`Store::fate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Never sent, and never will be: its hits may be written back like any others.
    NotSent,
    /// Sent (or about to be), not answered yet: it may still run.
    InFlight,
    /// It ran: its charges stand, and nothing of it needs sending again.
    Applied,
    /// Not known: it may or may not have run (resend it under its id).
    Unknown,
}

/// Hits already admitted, written back under one id ([`Store::write_back`]).
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub id: CallId,
    pub checks: &'a [Check<'a>],
}

/// Why a store could not decide. Mapped to gRPC `UNAVAILABLE` by the service.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend is not connected (startup, or reconnecting after a failure).
    #[error("store unavailable: {0}")]
    Unavailable(#[source] Cause),
    /// The backend did not answer within the configured timeout.
    #[error("store timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The backend answered with an error.
    #[error("store error: {0}")]
    Backend(#[source] Cause),
    /// An error of one of several stores (the per-second Redis), named.
    #[error("{store}: {error}")]
    In {
        store: &'static str,
        error: Box<StoreError>,
    },
}

impl StoreError {
    /// Short label for the `err_type` of metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Timeout(_) => "timeout",
            StoreError::Backend(_) => "backend",
            StoreError::In { error, .. } => error.kind(),
        }
    }

    /// The store that failed, when it is not the configured store itself.
    pub fn store(&self) -> Option<&'static str> {
        match self {
            StoreError::In { store, .. } => Some(store),
            _ => None,
        }
    }
}

/// Evaluates checks atomically per check (all limits of one check decided together).
pub trait Store: Send + Sync + 'static {
    /// Evaluate every check in order, appending exactly `check.limits.len()` results per
    /// check to `out`, in order, charging them together as `charge` says. On error, `out` may
    /// hold a partial prefix and must be discarded. One call is one network round trip for
    /// remote stores (two for a stop-increment request split over several Redis calls).
    fn run_with(
        &self,
        checks: &[Check<'_>],
        charge: Charge,
        out: &mut Vec<LimitResult>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// [`Store::run_with`], each check charged by its own decision.
    fn run(
        &self,
        checks: &[Check<'_>],
        out: &mut Vec<LimitResult>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.run_with(checks, Charge::Each, out)
    }

    /// [`Store::run_with`] under `id`: sent again under the same id (or as a
    /// [`Store::write_back`] batch under it, with the same checks in the same order, costs
    /// aside), the checks are applied at most once, whichever send arrives first; the others
    /// only report the state. For a call whose answer may be lost while the store still runs
    /// it (a timeout, a connection dropped mid-call): its hits can then be sent again, or the
    /// call fenced off, without counting anything twice. Redis records the id with the hits
    /// it applies (one key per script call, kept for a while); a store that cannot lose an
    /// answer it applied (memory) ignores the id.
    fn run_once(
        &self,
        checks: &[Check<'_>],
        charge: Charge,
        id: CallId,
        out: &mut Vec<LimitResult>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = id;
        self.run_with(checks, charge, out)
    }

    /// What became of the [`Store::run_once`] call under `id` that did not end answered (it
    /// failed, or its future was dropped at its caller's deadline), as far as the store
    /// knows; a settled fate is told once. Lets a write-back skip the resend of a call
    /// that ran, or that was never sent. A store that does not track calls says
    /// [`Fate::Unknown`].
    fn fate(&self, id: CallId) -> Fate {
        let _ = id;
        Fate::Unknown
    }

    /// Write back hits that were already admitted (a batch of this instance's local
    /// decisions, hits admitted while the store was down, or the hits of a call whose answer
    /// was lost), each batch under its id as [`Store::run_once`] says: every check is
    /// charged whatever it decides (the caller gives limits with `overdraft`), and the state
    /// after it is answered as by [`Store::run_with`], every batch's checks in order. Off the
    /// request path; one round trip for all the batches.
    fn write_back(
        &self,
        batches: &[Batch<'_>],
        out: &mut Vec<LimitResult>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move {
            for b in batches {
                self.run_with(b.checks, Charge::Each, out).await?;
            }
            Ok(())
        }
    }

    /// [`Store::run_with`], with envoyproxy/ratelimit's cache key of each check (without
    /// prefix and window start; `keys[i]` is `checks[i]`'s, `None` for none): a Redis store
    /// with `--redis-reference-keys` counts the checks that qualify as theirs does, under
    /// their keys (`store/redis/reference.rs`). Any other store ignores the keys.
    fn run_keyed(
        &self,
        checks: &[Check<'_>],
        keys: &[Option<&[u8]>],
        charge: Charge,
        out: &mut Vec<LimitResult>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = keys;
        self.run_with(checks, charge, out)
    }

    /// Forget the state of `limits` for the descriptor `tag`, counters and penalty locks
    /// alike, so its next check starts fresh (the admin listener's `DELETE`). Returns how
    /// many stored entries went: limit states in memory (a penalty lock belongs to its
    /// limit's), keys in Redis (a lock is a key of its own). Not on the request path.
    fn reset(
        &self,
        tag: StateTag,
        limits: &[LimitSpec],
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Whether the store can currently serve (health checks).
    fn is_ready(&self) -> bool {
        true
    }
}

/// The configured store. An enum rather than a trait object: the request path pays no
/// boxing or dynamic dispatch.
pub enum Backend {
    Memory(memory::MemoryStore),
    Redis(redis::RedisStore),
    /// Per-second limits on a second Redis (`REDIS_PERSECOND`).
    RedisPerSecond(Box<per_second::PerSecond<redis::RedisStore>>),
}

impl Backend {
    /// Label for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Memory(_) => "memory",
            Backend::Redis(_) | Backend::RedisPerSecond(_) => "redis",
        }
    }

    /// Where the store keeps its state, for logs: `memory`, or the Redis address(es),
    /// credentials left out.
    pub fn shown(&self) -> String {
        match self {
            Backend::Memory(_) => "memory".to_owned(),
            Backend::Redis(s) => s.addr().to_owned(),
            Backend::RedisPerSecond(p) => format!(
                "{} (per-second limits: {})",
                p.main.addr(),
                p.per_second.addr()
            ),
        }
    }

    /// Why the store cannot decide now, naming the Redis at fault; `None` when it can.
    pub fn not_ready_reason(&self) -> Option<String> {
        match self {
            Backend::Memory(_) => None,
            Backend::Redis(s) => s.not_ready_reason(),
            Backend::RedisPerSecond(p) => p
                .main
                .not_ready_reason()
                .or_else(|| p.per_second.not_ready_reason()),
        }
    }

    /// Each Redis store by its metrics label, with its live connections, readiness and the
    /// connections dropped as broken so far.
    pub fn redis_pools(&self) -> Vec<(&'static str, usize, bool, u64)> {
        let pool = |name, s: &redis::RedisStore| (name, s.connected(), s.is_ready(), s.dropped());
        match self {
            Backend::Memory(_) => Vec::new(),
            Backend::Redis(s) => vec![pool("redis", s)],
            Backend::RedisPerSecond(p) => vec![
                pool("redis", &p.main),
                pool(per_second::PER_SECOND, &p.per_second),
            ],
        }
    }

    /// Health probes of the Redis stores that are refusing writes (see
    /// `store/redis/health.rs`); nothing otherwise.
    pub async fn probe(&self) {
        match self {
            Backend::Memory(_) => {}
            Backend::Redis(s) => s.probe().await,
            Backend::RedisPerSecond(p) => {
                futures::join!(p.main.probe(), p.per_second.probe());
            }
        }
    }

    /// The Redis key prefix, for a Redis store.
    pub fn key_prefix(&self) -> Option<&str> {
        match self {
            Backend::Memory(_) => None,
            Backend::Redis(s) => Some(s.key_prefix()),
            Backend::RedisPerSecond(p) => Some(p.main.key_prefix()),
        }
    }
}

impl Store for Backend {
    async fn run_with(
        &self,
        checks: &[Check<'_>],
        charge: Charge,
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        match self {
            Backend::Memory(s) => s.run_with(checks, charge, out).await,
            // Boxed: the Redis future is ~0.5 KB, and every request's future (moved into
            // tonic's box) would otherwise carry it, memory store included.
            Backend::Redis(s) => Box::pin(s.run_with(checks, charge, out)).await,
            Backend::RedisPerSecond(s) => Box::pin(s.run_with(checks, charge, out)).await,
        }
    }

    async fn run_once(
        &self,
        checks: &[Check<'_>],
        charge: Charge,
        id: CallId,
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        match self {
            Backend::Memory(s) => s.run_once(checks, charge, id, out).await,
            Backend::Redis(s) => Box::pin(s.run_once(checks, charge, id, out)).await,
            Backend::RedisPerSecond(s) => Box::pin(s.run_once(checks, charge, id, out)).await,
        }
    }

    async fn write_back(
        &self,
        batches: &[Batch<'_>],
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        match self {
            Backend::Memory(s) => s.write_back(batches, out).await,
            Backend::Redis(s) => Box::pin(s.write_back(batches, out)).await,
            Backend::RedisPerSecond(s) => Box::pin(s.write_back(batches, out)).await,
        }
    }

    async fn run_keyed(
        &self,
        checks: &[Check<'_>],
        keys: &[Option<&[u8]>],
        charge: Charge,
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        match self {
            Backend::Redis(s) => Box::pin(s.run_keyed(checks, keys, charge, out)).await,
            _ => self.run_with(checks, charge, out).await,
        }
    }

    async fn reset(&self, tag: StateTag, limits: &[LimitSpec]) -> Result<u64, StoreError> {
        match self {
            Backend::Memory(s) => s.reset(tag, limits).await,
            Backend::Redis(s) => s.reset(tag, limits).await,
            Backend::RedisPerSecond(s) => s.reset(tag, limits).await,
        }
    }

    /// The per-second pair runs one id on two stores: its fate is not tracked.
    fn fate(&self, id: CallId) -> Fate {
        match self {
            Backend::Redis(s) => s.fate(id),
            Backend::Memory(_) | Backend::RedisPerSecond(_) => Fate::Unknown,
        }
    }

    fn is_ready(&self) -> bool {
        match self {
            Backend::Memory(s) => s.is_ready(),
            Backend::Redis(s) => s.is_ready(),
            Backend::RedisPerSecond(s) => s.is_ready(),
        }
    }
}
