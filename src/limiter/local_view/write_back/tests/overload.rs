//! Overload with the fallback: calls that cannot get a timely store answer are decided by
//! the view, counted as overload, without making it degraded, and each hit they admit
//! reaches the store exactly once.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Lab, hourly, lab};
use crate::limit::LimitSpec;
use crate::store::StoreError;

/// One hit on `tag` within a caller's deadline `d` from now (what the gRPC adapter sets).
async fn within(
    l: &Lab,
    d: Duration,
    tag: u128,
    limits: &[LimitSpec],
    batched: bool,
) -> Result<bool, StoreError> {
    l.hit_by(tag, limits, batched, 1, Some(Instant::now() + d))
        .await
}

#[tokio::test]
async fn a_timeout_at_the_callers_deadline_is_overload_and_its_hits_count_once() {
    let l = lab(true);
    let limits = hourly(1_000_000);
    l.hits(1, &limits, 5).await;
    // Busy: every call is taken and times out at the caller's deadline; Redis runs them
    // later. Decided here, answered OK, held under their ids.
    l.store.stall();
    for _ in 0..20 {
        let ok = within(&l, Duration::from_secs(60), 1, &limits, false).await;
        assert!(ok.expect("decided here"));
    }
    assert!(!l.view.degraded(), "busy is not failing");
    let stats = &l.view.stats;
    assert_eq!(stats.overload_decisions.load(Ordering::Relaxed), 20);
    assert_eq!(stats.fallback_decisions.load(Ordering::Relaxed), 0);
    // The late calls run, then the resends find their ids: each hit counted once.
    l.store.resume(true).await;
    l.settle().await;
    assert_eq!(l.admitted(), 25);
    assert_eq!(l.store.used(1, &limits).await, 25);
}

#[tokio::test]
async fn resent_first_the_held_calls_fence_off_the_late_ones() {
    let l = lab(true);
    let limits = hourly(1_000_000);
    l.hits(1, &limits, 5).await;
    l.store.stall();
    for _ in 0..20 {
        let _ = within(&l, Duration::from_secs(60), 1, &limits, false).await;
    }
    l.resends_before_the_late_calls().await;
    assert_eq!(l.admitted(), 25);
    assert_eq!(l.store.used(1, &limits).await, 25);
}

#[tokio::test]
async fn no_time_left_decides_here_without_sending_anything() {
    let l = lab(true);
    let limits = hourly(1_000_000);
    l.hits(1, &limits, 5).await;
    // Admission refused the calls (the adapter gives them a deadline already passed).
    l.store.stall();
    for _ in 0..20 {
        let ok = within(&l, Duration::ZERO, 1, &limits, false).await;
        assert!(ok.expect("decided here"));
    }
    assert!(l.store.queue.lock().is_empty(), "nothing sent");
    assert!(!l.view.degraded());
    assert_eq!(l.view.stats.overload_decisions.load(Ordering::Relaxed), 20);
    assert_eq!(l.view.unwritten(), 20, "pending, for the next write-back");
    l.store.resume(true).await;
    l.settle().await;
    assert_eq!(l.store.used(1, &limits).await, 25);
}

#[tokio::test]
async fn without_a_callers_deadline_a_timeout_is_a_store_failure() {
    let l = lab(true);
    let limits = hourly(1_000_000);
    l.hits(1, &limits, 5).await;
    l.store.stall();
    assert!(l.hit(1, &limits, false).await.expect("decided here"));
    assert!(l.view.degraded());
    assert_eq!(l.view.stats.fallback_decisions.load(Ordering::Relaxed), 1);
    assert_eq!(l.view.stats.overload_decisions.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn without_the_fallback_the_store_is_asked_as_ever() {
    let l = lab(false);
    let limits = hourly(1_000_000);
    // A batched rule keeps a view without the fallback: with no time left, its call still
    // goes to the store (the Redis store then fails it at once).
    let asked = within(&l, Duration::ZERO, 1, &limits, true).await;
    assert!(asked.expect("this store ignores deadlines"));
    assert_eq!(l.store.used(1, &limits).await, 1);
    assert_eq!(l.view.stats.overload_decisions.load(Ordering::Relaxed), 0);
}
