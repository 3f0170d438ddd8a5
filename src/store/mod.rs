//! Where limit state lives. The [`Store`] trait is the only way the limiter touches state;
//! [`memory::MemoryStore`] keeps it in process, [`redis::RedisStore`] in Redis (single node
//! or cluster) with one Lua script call per request (per slot on a cluster) and one round
//! trip.
//!
//! Stores know nothing of gRPC, rule files or metrics.

pub mod memory;
pub mod redis;

use std::future::Future;

use crate::limit::{Charge, Check, LimitResult};

/// Why a store could not decide. Mapped to gRPC `UNAVAILABLE` by the service.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend is not connected (startup, or reconnecting after a failure).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The backend did not answer within the configured timeout.
    #[error("store timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The backend answered with an error.
    #[error("store error: {0}")]
    Backend(String),
}

impl StoreError {
    /// Short label for the `err_type` of metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Timeout(_) => "timeout",
            StoreError::Backend(_) => "backend",
        }
    }
}

/// Evaluates checks atomically per check (all limits of one check decided together), in
/// order.
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
}

impl Backend {
    /// Label for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Memory(_) => "memory",
            Backend::Redis(_) => "redis",
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
        }
    }

    fn is_ready(&self) -> bool {
        match self {
            Backend::Memory(s) => s.is_ready(),
            Backend::Redis(s) => s.is_ready(),
        }
    }
}
