//! The local over-limit cache (envoyproxy/ratelimit's `LOCAL_CACHE_SIZE_IN_BYTES`): a
//! descriptor the store has just denied is answered from memory, without a store call, until
//! its denial ends. So an abusive client costs Redis almost nothing.
//!
//! What makes an answer from memory exact:
//! - "Denied until" is the algorithm's own retry time (the longest among the denying limits
//!   of the descriptor, penalties included), counted from the moment the request was sent,
//!   never a window end where capacity frees sooner: the entry expires at or before the
//!   moment the store would admit the same hit. A denial that never ends (cost above
//!   capacity) is kept for the longest unit of the descriptor's limits.
//! - An entry answers only the same limits (a fingerprint of every parameter, so a reload or
//!   a different request override misses) and a cost at least as large as the denied one (a
//!   smaller cost may fit sooner).
//! - Denials that would have charged something are not cached, because answering from memory
//!   charges nothing: a limit with `overdraft` that admitted the hit, or any `overdraft`
//!   limit other than a denying `fixed_window` whose window end is the entry's end (a fixed
//!   window's count cannot change its denial before the window ends). So `fixed_window`
//!   rules with envoyproxy/ratelimit's defaults are cached, as theirs are.
//! - A refund of the descriptor through this instance drops its entry (a refund may lift a
//!   denial early). A refund through another instance cannot: the cache must not be enabled
//!   where rules take refunds (`is_negative_hits`) through several replicas.
//!
//! Bounded by bytes (an estimate per entry: key, results, bookkeeping); past the budget,
//! expired entries are swept, then the oldest entries evicted. Sharded by the descriptor's
//! tag (`limit::sharded`).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::limit::hash::FoldBuild;
use crate::limit::sharded::Sharded;
use crate::limit::{Algorithm, Clock, LimitResult, LimitSpec, StateTag};

const SHARDS: usize = 16;

/// See the module documentation.
pub struct OverLimitCache {
    clock: Arc<dyn Clock>,
    shards: Sharded<Shard>,
    budget: usize,
}

#[derive(Default)]
struct Shard {
    map: HashMap<u128, Entry, FoldBuild>,
    /// Insertion order, for eviction (entries replaced since may appear twice).
    order: VecDeque<u128>,
    bytes: usize,
}

struct Entry {
    /// [`LimitSpec::fingerprint`]: an entry only answers the limits it saw.
    fingerprint: u64,
    /// The smallest cost this denial covers.
    cost: u64,
    /// Local clock: when the request that was denied was sent, and when the denial ends.
    at_ms: u64,
    until_ms: u64,
    results: Box<[LimitResult]>,
}

impl Entry {
    fn bytes(&self) -> usize {
        // Map slot (key, entry, control byte), the queue slot, the results.
        std::mem::size_of::<(u128, Entry)>()
            + 1
            + std::mem::size_of::<u128>()
            + std::mem::size_of_val(&*self.results)
    }
}

/// How long (ms, from when the request was sent) the denial in `results` lasts for a hit of
/// the same cost, if answering it from memory is exact; `None` when it must not be cached.
pub fn cacheable_for(limits: &[LimitSpec], results: &[LimitResult]) -> Option<u64> {
    let mut until = 0u64;
    let mut denied = false;
    for r in results {
        if r.allowed {
            continue;
        }
        denied = true;
        // "Never" (cost above capacity): any horizon is exact; the longest unit.
        let horizon = limits.iter().map(LimitSpec::window_ms).max().unwrap_or(0);
        until = until.max(r.retry_ms.unwrap_or(horizon));
    }
    if !denied || until == 0 {
        return None;
    }
    for (l, r) in limits.iter().zip(results) {
        let fixed_until_end = l.algorithm == Algorithm::FixedWindow
            && !r.allowed
            && !r.penalized
            && r.retry_ms == Some(until);
        if l.overdraft && !fixed_until_end {
            return None;
        }
    }
    Some(until)
}

impl OverLimitCache {
    /// A cache of about `bytes` bytes; `None` when `bytes` is 0 (disabled).
    pub fn new(bytes: usize, clock: Arc<dyn Clock>) -> Option<OverLimitCache> {
        (bytes > 0).then(|| OverLimitCache {
            clock,
            shards: Sharded::new(SHARDS, Shard::default),
            budget: (bytes / SHARDS).max(1),
        })
    }

    /// The local clock the cache measures denials with.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The denial of `tag` for these limits and `cost` at `now_ms`, aged to now (results as
    /// the store answered them, reset and retry times counted down), into `out`.
    pub fn lookup(
        &self,
        tag: StateTag,
        limits: &[LimitSpec],
        cost: u64,
        now_ms: u64,
        out: &mut Vec<LimitResult>,
    ) -> bool {
        let mut shard = self.shards.of(tag).lock();
        let Some(e) = shard.map.get(&tag.0) else {
            return false;
        };
        if e.until_ms <= now_ms || e.fingerprint != LimitSpec::fingerprint(limits) {
            if let Some(e) = shard.map.remove(&tag.0) {
                shard.bytes = shard.bytes.saturating_sub(e.bytes());
            }
            return false;
        }
        if cost < e.cost {
            return false;
        }
        let elapsed = now_ms.saturating_sub(e.at_ms);
        out.extend(e.results.iter().map(|r| LimitResult {
            reset_ms: r.reset_ms.saturating_sub(elapsed),
            retry_ms: r.retry_ms.map(|t| t.saturating_sub(elapsed).max(1)),
            ..*r
        }));
        true
    }

    /// Remember the store's denial of `tag` (`results`, for a hit of `cost` sent at
    /// `sent_ms`) if it can be answered from memory exactly.
    pub fn insert(
        &self,
        tag: StateTag,
        limits: &[LimitSpec],
        cost: u64,
        sent_ms: u64,
        results: &[LimitResult],
    ) {
        let Some(until) = cacheable_for(limits, results) else {
            return;
        };
        let e = Entry {
            fingerprint: LimitSpec::fingerprint(limits),
            cost,
            at_ms: sent_ms,
            until_ms: sent_ms.saturating_add(until),
            results: results.into(),
        };
        let size = e.bytes();
        if size > self.budget {
            return;
        }
        let mut shard = self.shards.of(tag).lock();
        let shard = &mut *shard;
        if shard.bytes + size > self.budget {
            let now = self.clock.now_ms();
            let before = shard.map.len();
            shard.map.retain(|_, e| e.until_ms > now);
            if shard.map.len() != before {
                shard.bytes = shard.map.values().map(Entry::bytes).sum();
                let map = &shard.map;
                shard.order.retain(|k| map.contains_key(k));
            }
            while shard.bytes + size > self.budget {
                let Some(k) = shard.order.pop_front() else {
                    break;
                };
                if let Some(old) = shard.map.remove(&k) {
                    shard.bytes = shard.bytes.saturating_sub(old.bytes());
                }
            }
        }
        if let Some(old) = shard.map.insert(tag.0, e) {
            shard.bytes = shard.bytes.saturating_sub(old.bytes());
        }
        shard.bytes += size;
        shard.order.push_back(tag.0);
    }

    /// Drop the entry of `tag` (a refund may lift its denial early).
    pub fn forget(&self, tag: StateTag) {
        let mut shard = self.shards.of(tag).lock();
        if let Some(e) = shard.map.remove(&tag.0) {
            shard.bytes = shard.bytes.saturating_sub(e.bytes());
        }
    }

    /// Entries held (tests).
    pub fn len(&self) -> usize {
        self.shards.sum(|s| s.map.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held, as estimated against the budget (tests).
    pub fn bytes(&self) -> usize {
        self.shards.sum(|s| s.bytes)
    }
}

impl std::fmt::Debug for OverLimitCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OverLimitCache")
            .field("entries", &self.len())
            .field("budget_per_shard", &self.budget)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
