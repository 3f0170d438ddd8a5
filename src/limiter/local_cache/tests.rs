//! The local over-limit cache through `limiter::decide` on the memory store with a manual
//! clock: what it answers, until when (the exact retry), and where it must not answer.

use std::sync::Arc;

use super::*;
use crate::limit::{Algorithm, ManualClock, Unit};
use crate::limiter::{Decision, Metered, Modes, Outcome, Plan, Sources, decide};
use crate::store::memory::MemoryStore;

const T0: u64 = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000;

struct Lab {
    clock: Arc<ManualClock>,
    store: MemoryStore,
    cache: OverLimitCache,
}

fn lab() -> Lab {
    let clock = Arc::new(ManualClock::new(T0));
    Lab {
        store: MemoryStore::new(clock.clone()),
        cache: OverLimitCache::new(1 << 20, clock.clone()).expect("enabled"),
        clock,
    }
}

impl Lab {
    async fn hit(&self, limits: &[LimitSpec], cost: u64, refund: bool) -> Decision {
        let plans = [Plan::Metered(Metered {
            refund,
            ..Metered::charge(limits, 7, cost)
        })];
        let sources = Sources {
            cache: Some(&self.cache),
            ..Sources::default()
        };
        decide(&self.store, sources, &plans, Modes::default(), None)
            .await
            .expect("memory store")
    }

    fn at(&self, ms: u64) -> &Lab {
        self.clock.set(T0 + ms);
        self
    }
}

/// (allowed, answered from the cache)
fn verdict(d: &Decision) -> (bool, bool) {
    match &d.outcomes[0] {
        Outcome::Metered(v) => (!v.over_limit, v.cached),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_fixed_window_denial_is_answered_from_memory_until_the_window_ends() {
    let lab = lab();
    let l = [LimitSpec::new(Algorithm::FixedWindow, 2, Unit::Second)];
    lab.at(100);
    assert_eq!(verdict(&lab.hit(&l, 1, false).await), (true, false));
    assert_eq!(verdict(&lab.hit(&l, 1, false).await), (true, false));
    assert_eq!(verdict(&lab.hit(&l, 1, false).await), (false, false));
    // The store counted 3 (overdraft); from now on nothing reaches it.
    for _ in 0..5 {
        let d = lab.at(999).hit(&l, 1, false).await;
        assert_eq!(verdict(&d), (false, true));
        // Aged: 1 ms left in the window.
        assert_eq!(d.results[0].retry_ms, Some(1));
    }
    let st = lab.store.state(StateTag(7), &l[0]).expect("state");
    assert!(
        matches!(st.state, crate::limit::algorithm::State::FixedWindow(f) if f.c == 3),
        "{st:?}"
    );
    // The window ended: the store again.
    assert_eq!(
        verdict(&lab.at(1_000).hit(&l, 1, false).await),
        (true, false)
    );
}

#[tokio::test]
async fn until_is_the_exact_retry_not_the_window_end() {
    let lab = lab();
    // 10/s: one token per 100 ms.
    let l = [LimitSpec::new(Algorithm::TokenBucket, 10, Unit::Second)];
    lab.at(0).hit(&l, 10, false).await;
    let d = lab.at(50).hit(&l, 1, false).await;
    assert_eq!(verdict(&d), (false, false));
    assert_eq!(d.results[0].retry_ms, Some(50));
    assert_eq!(verdict(&lab.at(99).hit(&l, 1, false).await), (false, true));
    // The token is back at 100: the store admits it.
    assert_eq!(verdict(&lab.at(100).hit(&l, 1, false).await), (true, false));
}

#[tokio::test]
async fn smaller_costs_refunds_and_changed_limits_go_to_the_store() {
    let lab = lab();
    let l = [LimitSpec::new(Algorithm::TokenBucket, 10, Unit::Second)];
    lab.at(0).hit(&l, 8, false).await;
    // Cost 5 denied (2 tokens left): cached for costs >= 5 only.
    assert_eq!(verdict(&lab.hit(&l, 5, false).await), (false, false));
    assert_eq!(verdict(&lab.hit(&l, 6, false).await), (false, true));
    assert_eq!(verdict(&lab.hit(&l, 1, false).await), (true, false));
    // A changed limit (a reload) misses.
    let raised = [LimitSpec::new(Algorithm::TokenBucket, 100, Unit::Second)];
    lab.hit(&l, 5, false).await;
    assert!(!verdict(&lab.hit(&raised, 5, false).await).1);
    // A refund drops the entry: its denial may end early.
    lab.hit(&l, 5, false).await;
    assert_eq!(verdict(&lab.hit(&l, 5, false).await), (false, true));
    lab.hit(&l, 5, true).await;
    assert_eq!(verdict(&lab.hit(&l, 5, false).await), (true, false));
}

#[test]
fn what_must_not_be_cached() {
    let denied = |retry| LimitResult {
        allowed: false,
        retry_ms: retry,
        ..Default::default()
    };
    let allowed = LimitResult {
        allowed: true,
        ..Default::default()
    };
    let fw = LimitSpec::new(Algorithm::FixedWindow, 5, Unit::Second);
    let tb = LimitSpec::new(Algorithm::TokenBucket, 5, Unit::Second);
    // A fixed window (overdraft, their default) denied until its window end: cached.
    assert_eq!(
        cacheable_for(std::slice::from_ref(&fw), &[denied(Some(300))]),
        Some(300)
    );
    // An overdraft bucket is charged by every denied hit: a cached answer would lose them.
    let tb_od = LimitSpec {
        overdraft: true,
        ..tb.clone()
    };
    assert_eq!(cacheable_for(&[tb_od], &[denied(Some(300))]), None);
    // An overdraft fixed window that admits while another limit denies would be charged.
    assert_eq!(
        cacheable_for(&[fw.clone(), tb.clone()], &[allowed, denied(Some(300))]),
        None
    );
    // ...or denied, but freed before the other limit: charged in its next window.
    assert_eq!(
        cacheable_for(
            &[fw.clone(), tb.clone()],
            &[denied(Some(100)), denied(Some(300))]
        ),
        None
    );
    // Without overdraft: the longest retry.
    let fw_no = LimitSpec {
        overdraft: false,
        ..fw
    };
    assert_eq!(
        cacheable_for(
            &[fw_no, tb.clone()],
            &[denied(Some(100)), denied(Some(300))]
        ),
        Some(300)
    );
    // Never (cost above capacity): the longest unit.
    assert_eq!(
        cacheable_for(std::slice::from_ref(&tb), &[denied(None)]),
        Some(1000)
    );
    // Nothing denied: nothing to cache.
    assert_eq!(cacheable_for(&[tb], &[allowed]), None);
}

#[test]
fn bounded_by_bytes() {
    let clock = Arc::new(ManualClock::new(T0));
    let cache = OverLimitCache::new(64 * 1024, clock.clone()).expect("enabled");
    let l = [LimitSpec::new(Algorithm::TokenBucket, 5, Unit::Second)];
    let r = [LimitResult {
        allowed: false,
        retry_ms: Some(500),
        ..Default::default()
    }];
    for i in 0..100_000u128 {
        cache.insert(StateTag(i), &l, 1, T0, &r);
    }
    assert!(cache.bytes() <= 64 * 1024, "{} bytes", cache.bytes());
    assert!(cache.len() > 100, "{} entries", cache.len());
    // The newest are kept.
    let mut out = Vec::new();
    assert!(cache.lookup(StateTag(99_999), &l, 1, T0 + 1, &mut out));
    assert!(OverLimitCache::new(0, clock).is_none());
}

#[tokio::test]
async fn a_calendar_month_denial_of_a_big_budget_lasts_until_the_local_month_ends() {
    let lab = lab();
    let l = [LimitSpec {
        calendar: crate::limit::Calendar::new("Asia/Kolkata"),
        ..LimitSpec::new(Algorithm::FixedWindow, 30_000_000_000, Unit::Month)
    }];
    let p = l[0].periods(T0).expect("a calendar");
    let end = p.bounds[2] - T0;
    assert_eq!(
        verdict(&lab.at(0).hit(&l, 29_999_999_999, false).await),
        (true, false)
    );
    assert_eq!(verdict(&lab.hit(&l, 2, false).await), (false, false));
    let d = lab.at(end - 1).hit(&l, 2, false).await;
    assert_eq!(verdict(&d), (false, true));
    assert_eq!(d.results[0].retry_ms, Some(1));
    assert_eq!(d.outcomes.len(), 1);
    // A new local month: the store again, with the whole budget.
    let d = lab.at(end).hit(&l, 1, false).await;
    assert_eq!(verdict(&d), (true, false));
    assert_eq!(d.results[0].remaining, 29_999_999_999);
}
