//! Quota subscriptions (RLQS): who is subscribed to which bucket, with what demand (or none
//! known yet) and share. Shared by every replica on Redis (script calls of a bounded number
//! of buckets, `lua/quota.lua`), in process on the memory store (a single instance).
//!
//! A subscription expires `ttl_ms` after its last report (the lifetime of the assignment it
//! got), so the subscribers of a replica that died age out and their shares go back to the
//! others; a stream that ends leaves at once ([`QuotaStore::leave`]). Shares are computed by
//! [`quota::settle`] (mirrored in the script) while the bucket's state is held, so the
//! shares outstanding never add up to more than the limit.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Backend, StoreError};
use crate::limit::{Clock, StateTag};
use crate::quota::{self, Grant, Others, Policy};

/// One bucket of a report batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaReport {
    /// The bucket's state identity (the matched rule's state tag).
    pub bucket: StateTag,
    /// Requests per window of the bucket's rule.
    pub limit: u64,
    /// Thousandths of a request per second ([`quota::demand_milli`]); `None` until the
    /// subscriber's demand is known.
    pub demand: Option<u64>,
    /// The share the subscriber's Envoy holds now (0: none).
    pub held: u64,
}

/// A subscriber and the settings its reports are settled with.
#[derive(Clone, Copy, Debug)]
pub struct Subscriber<'a> {
    /// Unique across replicas and streams.
    pub id: &'a str,
    /// How long the subscription lives without a report.
    pub ttl_ms: u64,
    pub policy: Policy,
}

/// Subscriptions and shares of quota buckets.
pub trait QuotaStore: Send + Sync {
    /// Subscribe (or refresh) `sub` to every bucket of `reports`, record the usage, and
    /// append one [`Grant`] per report to `out`, in order. Each bucket is settled
    /// atomically; the report as a whole is not (see `store/redis/quota.rs`). One round trip
    /// unless buckets with many subscribers need another.
    fn report(
        &self,
        sub: Subscriber<'_>,
        reports: &[QuotaReport],
        out: &mut Vec<Grant>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Unsubscribe `sub` from `buckets` (its stream ended or abandoned them).
    fn leave(
        &self,
        sub: &str,
        buckets: &[StateTag],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

impl QuotaStore for Backend {
    async fn report(
        &self,
        sub: Subscriber<'_>,
        reports: &[QuotaReport],
        out: &mut Vec<Grant>,
    ) -> Result<(), StoreError> {
        match self {
            Backend::Memory(s) => {
                s.quota().report(sub, reports, out);
                Ok(())
            }
            Backend::Redis(s) => s.report(sub, reports, out).await,
            // Quota state is not per second: it lives on the main Redis.
            Backend::RedisPerSecond(p) => p.main.report(sub, reports, out).await,
        }
    }

    async fn leave(&self, sub: &str, buckets: &[StateTag]) -> Result<(), StoreError> {
        match self {
            Backend::Memory(s) => {
                s.quota().leave(sub, buckets);
                Ok(())
            }
            Backend::Redis(s) => s.leave(sub, buckets).await,
            Backend::RedisPerSecond(p) => p.main.leave(sub, buckets).await,
        }
    }
}

/// One subscriber's entry in a bucket.
#[derive(Clone, Copy, Debug)]
struct Entry {
    demand: Option<u64>,
    assigned: u64,
    expires_ms: u64,
}

#[derive(Debug, Default)]
struct Bucket {
    subs: HashMap<Box<str>, Entry>,
}

/// Most buckets of a report settled under one hold of the memory store's lock.
const BUCKETS_PER_LOCK: usize = 256;

/// The memory store's subscriptions: one map under one lock (reports come every few
/// seconds per Envoy, not per request), held for at most `BUCKETS_PER_LOCK` buckets.
pub struct MemoryQuota {
    clock: Arc<dyn Clock>,
    buckets: Mutex<HashMap<StateTag, Bucket>>,
}

impl MemoryQuota {
    pub fn new(clock: Arc<dyn Clock>) -> MemoryQuota {
        MemoryQuota {
            clock,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    pub fn report(&self, sub: Subscriber<'_>, reports: &[QuotaReport], out: &mut Vec<Grant>) {
        let now = self.clock.now_ms();
        // Each bucket is settled whole under the lock, which is all the shares' bound needs
        // (as for the Redis store's calls, `store/redis/quota.rs`), so a large report takes
        // it in parts and other streams' reports get in between.
        for part in reports.chunks(BUCKETS_PER_LOCK) {
            self.report_part(sub, now, part, out);
        }
    }

    fn report_part(
        &self,
        sub: Subscriber<'_>,
        now: u64,
        reports: &[QuotaReport],
        out: &mut Vec<Grant>,
    ) {
        let mut buckets = self.buckets.lock();
        for r in reports {
            let b = buckets.entry(r.bucket).or_default();
            b.subs.retain(|id, e| &**id == sub.id || e.expires_ms > now);
            let mut others = Others::default();
            for (id, e) in &b.subs {
                if &**id != sub.id {
                    others.count += 1;
                    match e.demand {
                        Some(d) => others.demand += d,
                        None => others.unknown += 1,
                    }
                    others.assigned += e.assigned;
                }
            }
            let settled = quota::settle(r.limit, others, r.demand, r.held, sub.policy);
            b.subs.insert(
                sub.id.into(),
                Entry {
                    demand: r.demand,
                    assigned: settled.share,
                    expires_ms: now + sub.ttl_ms,
                },
            );
            out.push(Grant {
                share: settled.share,
                subscribers: others.count + 1,
                pending: settled.pending,
            });
        }
    }

    pub fn leave(&self, sub: &str, tags: &[StateTag]) {
        let mut buckets = self.buckets.lock();
        for t in tags {
            if let Some(b) = buckets.get_mut(t) {
                b.subs.remove(sub);
            }
        }
    }

    /// Drop buckets whose every subscription expired or left (the memory store's sweep).
    pub fn sweep(&self) {
        let now = self.clock.now_ms();
        self.buckets.lock().retain(|_, b| {
            b.subs.retain(|_, e| e.expires_ms > now);
            !b.subs.is_empty()
        });
    }
}
