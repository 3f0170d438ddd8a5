//! Where limit state lives. The [`Store`] trait is the only way the limiter touches state;
//! [`memory::MemoryStore`] keeps it in process, [`redis::RedisStore`] in Redis (single node
//! or cluster) with one Lua script call per request (per slot on a cluster) and one round
//! trip; [`per_second::PerSecond`] sends per-second limits to a second Redis.
//!
//! Stores know nothing of gRPC, rule files or metrics.

mod call;
pub mod memory;
pub mod per_second;
pub mod quota;
pub mod redis;

use std::future::Future;

use crate::limit::{LimitResult, LimitSpec, StateTag};
pub use call::{Call, CallId, Ids};

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
    /// Evaluate every check of `call` in order, appending exactly `check.limits.len()`
    /// results per check to `out`, in order, charging them together as `call.charge` says,
    /// under its ids ([`Ids`]). On error, `out` may hold a partial prefix and must be
    /// discarded. One call is one network round trip for remote stores (two for a
    /// stop-increment request split over several Redis calls).
    fn run(
        &self,
        call: &Call<'_>,
        out: &mut Vec<LimitResult>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

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

    /// Each Redis store by its metrics label, with its open connections, readiness and the
    /// connections dropped as broken so far.
    pub fn redis_pools(&self) -> Vec<(&'static str, usize, bool, u64)> {
        let pool =
            |name, s: &redis::RedisStore| (name, s.open_connections(), s.is_ready(), s.dropped());
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

    /// What became of the request call under `id` that did not end answered, as far as the
    /// store knows (`store/redis/fate.rs`); the memory store cannot lose an answer, and
    /// knows nothing of ids.
    pub fn fate(&self, id: CallId) -> redis::Fate {
        match self {
            Backend::Memory(_) => redis::Fate::Unknown,
            Backend::Redis(s) => s.fate(id),
            Backend::RedisPerSecond(p) => p.fate(id),
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
    async fn run(&self, call: &Call<'_>, out: &mut Vec<LimitResult>) -> Result<(), StoreError> {
        match self {
            Backend::Memory(s) => s.run(call, out).await,
            // Boxed: the Redis future is ~0.5 KB, and every request's future (moved into
            // tonic's box) would otherwise carry it, memory store included.
            Backend::Redis(s) => Box::pin(s.run(call, out)).await,
            Backend::RedisPerSecond(s) => Box::pin(s.run(call, out)).await,
        }
    }

    async fn reset(&self, tag: StateTag, limits: &[LimitSpec]) -> Result<u64, StoreError> {
        match self {
            Backend::Memory(s) => s.reset(tag, limits).await,
            Backend::Redis(s) => s.reset(tag, limits).await,
            Backend::RedisPerSecond(s) => s.reset(tag, limits).await,
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
