//! One store call ([`Call`]): the checks, how they are charged together, the ids under which
//! they are applied at most once, when the caller stops waiting, and envoyproxy/ratelimit's
//! cache keys. Every store answers a `Call` and nothing else ([`super::Store::run`]); what a
//! store does not use (memory: ids, deadline and keys) it ignores.
//!
//! Why the deadline is a field and not the store's own: between the service, which knows
//! the caller's `grpc-timeout`, and the Redis store, which needs it, are the limiter and the
//! per-second split; the call carries it through them, and the limiter reads it too (no time
//! left: the local view answers without a call).

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::limit::{Charge, Check};

/// One call to a store: see the module documentation.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// Decided in order, each atomically; one result per limit of each check, in order.
    pub checks: &'a [Check<'a>],
    pub charge: Charge,
    /// Under which ids the checks are applied at most once (see [`Ids`]).
    pub ids: Ids<'a>,
    /// When the caller stops waiting (what its `grpc-timeout` leaves less the margin to
    /// answer); `None`: the store's own timeout (`--redis-timeout`; a write-back, off the
    /// request path, gets longer).
    pub deadline: Option<Instant>,
    /// With `--redis-reference-keys`: envoyproxy/ratelimit's cache key of each check,
    /// without prefix and window start (`keys[i]` is `checks[i]`'s, `None` for none); a Redis
    /// store counts the checks that qualify as theirs does, under their keys
    /// (`store/redis/reference.rs`).
    pub keys: Option<&'a [Option<&'a [u8]>]>,
}

impl<'a> Call<'a> {
    /// `checks`, each charged by its own decision, without id, deadline or keys.
    pub fn new(checks: &'a [Check<'a>]) -> Call<'a> {
        Call {
            checks,
            charge: Charge::Each,
            ids: Ids::Unnamed,
            deadline: None,
            keys: None,
        }
    }

    /// Results the call must append: one per limit of each check.
    pub fn results(&self) -> usize {
        self.checks.iter().map(|c| c.limits.len()).sum()
    }
}

/// The ids a call's checks are applied under. Sent again under the same id (the same checks
/// in the same order, costs aside), a call is applied at most once, whichever send arrives
/// first; the others only report the state. For a call whose answer may be lost while the
/// store still runs it (a timeout, a connection dropped mid-call): its hits can then be
/// sent again, or the call fenced off, without counting anything twice. Redis records the
/// id with the hits it applies (one key per script call, kept for a while); a store that
/// cannot lose an answer it applied (memory) ignores ids.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ids<'a> {
    /// None: the call's hits are never sent again.
    #[default]
    Unnamed,
    /// A request's call, every check under one id; sent again only after it failed.
    Request(CallId),
    /// A write-back: consecutive runs of the checks, `(id, how many checks)` each, one per
    /// batch of hits already admitted (every check is charged whatever it decides: the
    /// caller gives limits with `overdraft`). Sent again at every write-back until answered.
    WriteBack(&'a [(CallId, usize)]),
}

/// The identity of a call whose hits may be sent again (see [`Ids`]). Unique across
/// instances: a random base per process, then a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallId(pub u64);

impl CallId {
    pub fn fresh() -> CallId {
        static BASE: LazyLock<u64> = LazyLock::new(crate::limit::random::random_u64);
        static NEXT: AtomicU64 = AtomicU64::new(0);
        CallId(BASE.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)))
    }
}
