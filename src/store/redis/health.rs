//! Whether Redis can make decisions, beyond being connected.
//!
//! A Redis that answers but refuses writes (`OOM` under `maxmemory` with `noeviction`,
//! `MISCONF` after a failed save, `NOREPLICAS` under `min-replicas-to-write`, `READONLY`,
//! `MASTERDOWN`, `BUSY`, `LOADING`) fails every request while the connections look fine.
//! The rule: once calls have been refused with one of those errors, and none has succeeded,
//! for at least the grace period (`--redis-refusal-grace`, 1 s by default: a single refused
//! call or a short blip does not flip health), the store is not ready and health says
//! NOT_SERVING. The first successful call makes it ready again. While refusing, the health
//! refresher sends a probe (one real check on a key of its own) every tick, so recovery is
//! seen even when no traffic arrives because health sent it elsewhere.
//!
//! Disconnection is not this rule's business: with no live connection the store is not
//! ready at once (`conn.rs`); a `READONLY` reply drops its connection, and a replica is not
//! connected to again (`connect.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::RedisStore;
use crate::limit::{Check, LimitSpec, StateTag, Unit};
use crate::store::{Call, Store};

/// How long every connection of a store may hear nothing before the health refresher pings
/// them (`conn.rs`, `Ring::ping_if_silent`).
const IDLE_PING_AFTER: Duration = Duration::from_secs(1);

impl RedisStore {
    /// Called by the health refresher at every tick, so health follows Redis without
    /// traffic: while writes are being refused, try one (a real check on a key of the
    /// store's own, a per-second window no request can fill), so recovery is seen; when no
    /// connection has heard from Redis for `IDLE_PING_AFTER`, ping each, so a dead Redis
    /// is seen (its connections dropped, the store not ready).
    pub async fn probe(&self) {
        self.ring.ping_if_silent(IDLE_PING_AFTER).await;
        if !self.refusals.refusing() {
            return;
        }
        let limits = [LimitSpec::fixed_window(1_000_000_000, Unit::Second)];
        let check = [Check {
            tag: StateTag::compute("sluice.health", [("probe", "")]),
            limits: &limits,
            cost: 1,
            refund: false,
        }];
        let mut out = Vec::with_capacity(1);
        if let Err(e) = self.run(&Call::new(&check), &mut out).await {
            tracing::debug!(error = %e, "redis health probe failed");
        }
    }
}

/// Error codes that mean "this server will not take writes now".
pub(crate) fn is_refusal(code: &str) -> bool {
    matches!(
        code,
        "OOM" | "MISCONF" | "NOREPLICAS" | "READONLY" | "MASTERDOWN" | "BUSY" | "LOADING"
    )
}

/// Refused calls since the last success.
pub(crate) struct Refusals {
    epoch: Instant,
    /// Milliseconds since `epoch`, plus one, of the first refusal since the last success;
    /// 0 while calls succeed.
    since: AtomicU64,
    grace_ms: u64,
}

impl Refusals {
    pub fn new(grace: Duration) -> Refusals {
        Refusals {
            epoch: Instant::now(),
            since: AtomicU64::new(0),
            grace_ms: grace.as_millis() as u64,
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// A call was refused: start the clock unless it runs already.
    pub fn refused(&self) {
        let now = self.now();
        if self
            .since
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            tracing::warn!("redis refuses writes; health turns NOT_SERVING if it lasts");
        }
    }

    /// A call succeeded. A load, not a store, on the usual path.
    pub fn succeeded(&self) {
        if self.since.load(Ordering::Relaxed) != 0 && self.since.swap(0, Ordering::Relaxed) != 0 {
            tracing::info!("redis accepts writes again");
        }
    }

    /// Calls are being refused (a probe is worth sending).
    pub fn refusing(&self) -> bool {
        self.since.load(Ordering::Relaxed) != 0
    }

    /// Refused for at least the grace period with no success in between.
    pub fn sustained(&self) -> bool {
        let since = self.since.load(Ordering::Relaxed);
        since != 0 && self.now().saturating_sub(since) >= self.grace_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert!(is_refusal("OOM"));
        assert!(is_refusal("READONLY"));
        assert!(!is_refusal("ERR"));
        assert!(!is_refusal("NOSCRIPT"));
    }

    #[test]
    fn sustained_after_grace_and_reset_by_success() {
        let r = Refusals::new(Duration::ZERO);
        assert!(!r.refusing() && !r.sustained());
        r.refused();
        assert!(r.refusing() && r.sustained());
        r.succeeded();
        assert!(!r.refusing() && !r.sustained());

        let r = Refusals::new(Duration::from_secs(3600));
        r.refused();
        assert!(r.refusing() && !r.sustained());
    }
}
