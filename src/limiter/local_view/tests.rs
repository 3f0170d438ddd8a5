//! The local view through `limiter::decide` on the memory store with a manual clock: when
//! batched descriptors are answered locally, that their hits reach the store, and the
//! store-failure fallback (a store that can be switched off, `tests/stalling.rs`). The lab
//! here is the write-back tests' too.

pub(super) mod stalling;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::Mutex;

use super::*;
use crate::limit::{Calendar, ManualClock, Unit};
use crate::limiter::{Metered, Modes, Outcome, Plan, Sources, decide};
use stalling::Stalling;

const T0: u64 = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000;

/// A view over a [`Stalling`] store, both on a manual clock.
pub(super) struct Lab {
    pub clock: Arc<ManualClock>,
    pub store: Stalling,
    pub view: LocalView,
    /// Hits answered OK.
    admitted: Mutex<u64>,
}

/// A lab whose view writes back every 100 ms, gives half a limit to descriptors never seen
/// and holds 64 keys, with the fallback on or off.
pub(super) fn lab(fallback: bool) -> Lab {
    let clock = Arc::new(ManualClock::new(T0));
    let opts = ViewOptions {
        interval_ms: 100,
        fallback,
        unseen_share: 0.5,
        max_keys: 64,
    };
    Lab {
        store: Stalling::new(clock.clone()),
        view: LocalView::new(opts, clock.clone()),
        clock,
        admitted: Mutex::new(0),
    }
}

pub(super) fn hourly(n: u64) -> Vec<LimitSpec> {
    vec![LimitSpec::fixed_window(n, Unit::Hour)]
}

impl Lab {
    /// One hit on `tag`; counted when answered OK.
    pub async fn hit(
        &self,
        tag: u128,
        limits: &[LimitSpec],
        batched: bool,
    ) -> Result<bool, StoreError> {
        self.hit_by(tag, limits, batched, 1, None).await
    }

    pub async fn hit_n(
        &self,
        tag: u128,
        limits: &[LimitSpec],
        batched: bool,
        cost: u64,
    ) -> Result<bool, StoreError> {
        self.hit_by(tag, limits, batched, cost, None).await
    }

    /// One hit of `cost` whose store work ends by the caller's `deadline` (what the gRPC
    /// adapter gives).
    pub async fn hit_by(
        &self,
        tag: u128,
        limits: &[LimitSpec],
        batched: bool,
        cost: u64,
        deadline: Option<Instant>,
    ) -> Result<bool, StoreError> {
        let plans = [Plan::Metered(Metered::charge(limits, tag, cost))];
        let sources = Sources {
            cache: None,
            view: Some(&self.view),
            batched: &[batched],
        };
        let d = decide(&self.store, sources, &plans, Modes::default(), deadline).await?;
        let ok = matches!(&d.outcomes[0], Outcome::Metered(v) if !v.over_limit);
        if ok {
            *self.admitted.lock() += cost;
        }
        Ok(ok)
    }

    /// Hits answered OK so far.
    pub fn admitted(&self) -> u64 {
        *self.admitted.lock()
    }

    /// Write the view's hits back; this store knows no call's fate.
    pub async fn flush(&self) -> Result<u64, StoreError> {
        self.view.flush(&self.store, |_| Fate::Unknown).await
    }
}

#[tokio::test]
async fn batched_hits_are_local_once_the_rate_is_known_and_all_reach_the_store() {
    let l = lab(false);
    let limits = hourly(1_000_000);
    // Never seen, then no rate yet: the store decides.
    assert!(l.hit(1, &limits, true).await.expect("ok"));
    assert_eq!(l.view.stats.batched_decisions.load(Ordering::Relaxed), 0);
    l.clock.advance(60);
    assert!(l.hit(1, &limits, true).await.expect("ok"));
    // Two answers 60 ms apart: the rate is known, the room is large: local.
    for _ in 0..100 {
        assert!(l.hit(1, &limits, true).await.expect("ok"));
    }
    assert_eq!(l.view.stats.batched_decisions.load(Ordering::Relaxed), 100);
    assert_eq!(l.store.remaining(1, &limits).await, 1_000_000 - 2);
    assert_eq!(l.flush().await.expect("flush"), 100);
    assert_eq!(l.store.remaining(1, &limits).await, 1_000_000 - 102);
    assert_eq!(l.view.unwritten(), 0);
}

#[tokio::test]
async fn near_the_limit_batched_goes_back_to_the_store_and_never_overshoots() {
    let l = lab(false);
    let limits = hourly(50);
    let mut admitted = 0;
    for i in 0..200 {
        if i % 10 == 0 {
            l.clock.advance(60);
            l.flush().await.expect("flush");
        }
        if l.hit(2, &limits, true).await.expect("ok") {
            admitted += 1;
        }
    }
    l.flush().await.expect("flush");
    assert_eq!(admitted, 50, "one instance: exactly the limit");
    assert_eq!(l.store.remaining(2, &limits).await, 0);
}

#[tokio::test]
async fn fallback_decides_locally_and_writes_back_what_it_admitted() {
    let l = lab(true);
    let seen = hourly(100);
    // Seen once while the store is up: 99 left.
    assert!(l.hit(3, &seen, false).await.expect("ok"));
    l.store.down();
    let mut admitted = 0;
    for _ in 0..150 {
        if l.hit(3, &seen, false).await.expect("no error while down") {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 99, "the last known state");
    assert!(l.view.degraded());
    // Never seen: half the limit.
    let unseen = hourly(10);
    let mut fresh = 0;
    for _ in 0..20 {
        if l.hit(4, &unseen, false).await.expect("no error") {
            fresh += 1;
        }
    }
    assert_eq!(fresh, 5);
    assert!(l.flush().await.is_err(), "still down");
    l.store.resume(false).await;
    assert_eq!(l.flush().await.expect("back"), 99 + 5);
    assert!(!l.view.degraded());
    assert_eq!(l.store.remaining(3, &seen).await, 0);
    assert_eq!(l.store.remaining(4, &unseen).await, 5);
}

#[tokio::test]
async fn without_fallback_a_store_error_is_the_answer() {
    let l = lab(false);
    l.store.down();
    assert!(l.hit(5, &hourly(10), false).await.is_err());
    assert!(!l.view.degraded());
}

#[tokio::test]
async fn a_full_view_says_so_and_still_answers() {
    let l = lab(true);
    l.store.down();
    for tag in 0..2000u128 {
        assert!(l.hit(tag, &hourly(10), false).await.expect("answers"));
    }
    // One bound over every shard: exactly `max_keys` held, each other one's hit counted.
    assert_eq!(l.view.len(), 64);
    assert_eq!(l.view.stats.overflow.load(Ordering::Relaxed), 2000 - 64);
}

#[tokio::test]
async fn batched_budgets_past_2_to_the_32_count_exactly() {
    const P32: u64 = 1 << 32;
    let l = lab(false);
    let limits = hourly(1 << 53);
    assert!(l.hit_n(6, &limits, true, P32).await.expect("ok"));
    l.clock.advance(60);
    assert!(l.hit_n(6, &limits, true, P32).await.expect("ok"));
    // The rate is known and the room is vast: decided locally, charged exactly.
    for _ in 0..10 {
        assert!(l.hit_n(6, &limits, true, P32 + 1).await.expect("ok"));
    }
    assert_eq!(l.view.stats.batched_decisions.load(Ordering::Relaxed), 10);
    assert_eq!(l.flush().await.expect("flush"), 10 * (P32 + 1));
    assert_eq!(
        l.store.remaining(6, &limits).await,
        (1 << 53) - 2 * P32 - 10 * (P32 + 1)
    );
}

#[tokio::test]
async fn fallback_near_2_to_the_53_admits_exactly_what_is_left() {
    const P53: u64 = 1 << 53;
    let l = lab(true);
    let limits = hourly(P53);
    assert!(l.hit_n(7, &limits, false, P53 - 10).await.expect("ok"));
    l.store.down();
    let mut admitted = 0;
    for cost in [3, 3, 3, 3, 1, 1] {
        if l.hit_n(7, &limits, false, cost)
            .await
            .expect("no error while down")
        {
            admitted += cost;
        }
    }
    assert_eq!(
        admitted, 10,
        "3 + 3 + 3, then 1: every unit of the 2^53, none more"
    );
    l.store.resume(false).await;
    assert_eq!(l.flush().await.expect("back"), 10);
    assert_eq!(l.store.remaining(7, &limits).await, 0);
}

#[tokio::test]
async fn fallback_starts_a_new_calendar_day_at_local_midnight() {
    let l = lab(true);
    let limits = vec![LimitSpec {
        calendar: Calendar::new("Asia/Kolkata"),
        ..LimitSpec::fixed_window(5, Unit::Day)
    }];
    let p = limits[0].periods(l.clock.now_ms()).expect("a calendar");
    l.clock.set(p.bounds[2] - 1000);
    assert!(l.hit_n(8, &limits, false, 5).await.expect("ok"));
    l.store.down();
    assert!(!l.hit(8, &limits, false).await.expect("no error while down"));
    // The local day ends at the period's boundary (18:30 UTC), not at a UTC midnight.
    l.clock.set(p.bounds[2] - 1);
    assert!(!l.hit(8, &limits, false).await.expect("no error"));
    l.clock.set(p.bounds[2]);
    let mut admitted = 0;
    for _ in 0..8 {
        admitted += u64::from(l.hit(8, &limits, false).await.expect("no error"));
    }
    assert_eq!(admitted, 5, "a whole new day");
}
