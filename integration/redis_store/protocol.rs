//! The check protocol: peek, refund, penalty locks, all-or-nothing multi-limit checks,
//! overdraft, and what a configuration change keeps.

use sluice::limit::{Algorithm, Check, LimitResult, LimitSpec, Unit};
use sluice::store::Call;

use super::{Env, allow, deny, spec, tag};

/// Every key and its serialized value: a peek must leave this exactly as it was.
fn snapshot(env: &Env) -> Vec<(String, Vec<u8>)> {
    let mut keys: Vec<String> = env.server.query(&["KEYS", "*"]);
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let dump: Vec<u8> = env.server.query(&["DUMP", &k]);
            (k, dump)
        })
        .collect()
}

#[tokio::test]
async fn peek_writes_nothing_even_when_denied() {
    let env = Env::new().await;
    for alg in Algorithm::ALL {
        let mut l = spec(alg, 2, Unit::Second);
        l.penalty_ms = 1000;
        let t = tag(alg.name());
        // Empty: allowed with everything remaining, and still no key.
        let before = env.dbsize();
        let r = env.hit1(t, &l, 0).await;
        assert!(
            r.allowed && r.remaining == 2 && r.used_before == 0,
            "{alg}: {r:?}"
        );
        assert_eq!(env.dbsize(), before, "{alg}: a peek on empty state wrote");
        // Over the limit, then peek: denied, and still nothing written (no charge, no save,
        // no penalty lock). Over = full, then the capacity lowered to 1 (a token bucket clamps
        // its tokens to a lowered burst instead, so it goes into overdraft debt).
        let over = if alg == Algorithm::TokenBucket {
            l.overdraft = true;
            assert!(env.hit1(t, &l, 2).await.allowed, "{alg}");
            assert!(!env.hit1(t, &l, 1).await.allowed, "{alg}");
            env.server.query::<()>(&["DEL", &env.store.lock_key(t, &l)]);
            l.clone()
        } else {
            assert!(env.hit1(t, &l, 2).await.allowed, "{alg}");
            // The bucket family's capacity is the burst (gcra keeps TAT in time, so a lower
            // rate would also lower its level).
            LimitSpec {
                requests_per_unit: if alg.has_burst() { 2 } else { 1 },
                burst: 1,
                ..l.clone()
            }
        };
        let snap = snapshot(&env);
        let r = env.hit1(t, &over, 0).await;
        assert!(
            !r.allowed && !r.penalized && r.used_before >= 2,
            "{alg}: {r:?}"
        );
        assert_eq!(snapshot(&env), snap, "{alg}: a denied peek wrote");
        let lock: i64 = env.server.query(&["EXISTS", &env.store.lock_key(t, &l)]);
        assert_eq!(lock, 0, "{alg}: a peek set a penalty lock");
    }
}

#[tokio::test]
async fn refunds_give_back_never_below_empty() {
    let env = Env::new().await;
    // Time to empty of the 2 remaining hits... after refunding one: per algorithm.
    let reset_after_one = [1000, 1100, 1000, 334, 334, 334];
    let reset_when_empty = [1000, 0, 0, 0, 0, 0];
    for (i, alg) in Algorithm::ALL.into_iter().enumerate() {
        let l = spec(alg, 3, Unit::Second);
        let t = tag(alg.name());
        assert!(env.hit1(t, &l, 2).await.allowed, "{alg}");
        assert_eq!(
            env.refund1(t, &l, 1).await,
            allow(2, reset_after_one[i], 2),
            "{alg}"
        );
        assert_eq!(
            env.refund1(t, &l, 5).await,
            allow(3, reset_when_empty[i], 1),
            "{alg}"
        );
        let exists: i64 = env.server.query(&["EXISTS", &env.store.state_key(t, &l)]);
        assert_eq!(exists, 0, "{alg}: empty state must be deleted");
        assert_eq!(env.hit1(t, &l, 3).await.used_before, 0, "{alg}");
    }
}

#[tokio::test]
async fn sliding_window_refund_takes_from_the_newest_sub_windows() {
    let env = Env::new().await;
    let l = spec(Algorithm::SlidingWindow, 10, Unit::Second);
    let t = tag("sw-refund");
    env.hit1(t, &l, 4).await;
    env.at(300);
    env.hit1(t, &l, 3).await;
    env.at(600);
    env.hit1(t, &l, 3).await;
    env.at(700);
    // 3 from sub-window 6, then 1 from sub-window 3: the newest counted is now 3 (→ 1400).
    assert_eq!(env.refund1(t, &l, 4).await, allow(4, 700, 10));
    let key = env.store.state_key(t, &l);
    let cur0 = env.t0 / 100;
    let state: String = env.server.query(&["GET", &key]);
    let at = |j: u64| (cur0 + j).to_string();
    // 'hi:lo:base:P_hi:...:P_lo' (running totals, sliding_window.lua): sub-window 6
    // emptied, 3 is the newest (2 left), 0 holds 4; a refund writes base 0.
    assert_eq!(state, format!("{}:{}:0:6:4:4:4", at(3), at(0)));
    // Sub-window 0 (4 hits) leaves at 1100: then 2 remain, 8 free.
    env.at(1100);
    assert_eq!(env.hit1(t, &l, 8).await, allow(0, 1100, 2));
}

#[tokio::test]
async fn penalty_locks_after_a_denial_and_leaves_counters_alone() {
    let env = Env::new().await;
    let mut l = spec(Algorithm::FixedWindow, 2, Unit::Second);
    l.overdraft = false;
    l.penalty_ms = 5000;
    let t = tag("penalty");
    env.hit1(t, &l, 2).await;
    env.at(100);
    // Denied: locked until 5100; its retry is at least the penalty.
    assert_eq!(env.hit1(t, &l, 1).await, deny(900, Some(5000), 2));
    let lock: String = env.server.query(&["GET", &env.store.lock_key(t, &l)]);
    assert_eq!(lock, (env.t0 + 5100).to_string());
    // A new window would allow, but the lock denies without touching the counter.
    env.at(1500);
    let penalized = LimitResult {
        penalized: true,
        ..deny(500, Some(3600), 0)
    };
    assert_eq!(env.hit1(t, &l, 1).await, penalized);
    assert_eq!(
        env.hit1(t, &l, 0).await,
        penalized,
        "a peek is penalized too"
    );
    assert_eq!(
        env.fixed_window_state(t, &l),
        Some((env.t0, 2)),
        "a penalized hit must not write state"
    );
    // A refund is always allowed, ignores the lock and leaves it in place.
    assert_eq!(env.refund1(t, &l, 1).await, allow(2, 500, 0));
    let lock: String = env.server.query(&["GET", &env.store.lock_key(t, &l)]);
    assert_eq!(lock, (env.t0 + 5100).to_string());
    env.at(5099);
    assert_eq!(env.hit1(t, &l, 1).await.retry_ms, Some(1));
    env.at(5100);
    assert_eq!(env.hit1(t, &l, 1).await, allow(1, 900, 0));
}

#[tokio::test]
async fn penalty_keeps_never_as_never() {
    let env = Env::new().await;
    let mut l = spec(Algorithm::TokenBucket, 2, Unit::Second);
    l.penalty_ms = 1000;
    let t = tag("penalty-never");
    // Cost above the burst: never fits; the lock is set but the retry stays "never".
    assert_eq!(env.hit1(t, &l, 3).await, deny(0, None, 0));
    let r = env.hit1(t, &l, 1).await;
    assert!(r.penalized && r.retry_ms == Some(1000), "{r:?}");
}

#[tokio::test]
async fn several_limits_are_all_or_nothing_unless_overdraft() {
    let env = Env::new().await;
    let per_second = spec(Algorithm::Gcra, 5, Unit::Second);
    let mut per_minute = spec(Algorithm::FixedWindow, 7, Unit::Minute);
    per_minute.overdraft = false;
    let limits = [per_second.clone(), per_minute.clone()];
    let t = tag("multi");
    let mut allowed = Vec::new();
    for _ in 0..10 {
        let r = env.hit(t, &limits, 1).await;
        allowed.push(r[0].allowed && r[1].allowed);
    }
    assert_eq!(
        allowed,
        [
            true, true, true, true, true, false, false, false, false, false
        ]
    );
    // The minute limit allowed the last five too, but was not charged: 5, not 10.
    let r = env.hit(t, &limits, 1).await;
    assert_eq!(r[1], allow(2, 60_000, 5));
    let (_, c) = env.fixed_window_state(t, &per_minute).expect("state");
    assert_eq!(c, 5);

    // With overdraft (the fixed_window default) the minute limit is charged regardless.
    let od_minute = LimitSpec {
        overdraft: true,
        ..per_minute
    };
    let t2 = tag("multi-od");
    let limits = [per_second, od_minute.clone()];
    for _ in 0..10 {
        env.hit(t2, &limits, 1).await;
    }
    let (_, c) = env.fixed_window_state(t2, &od_minute).expect("state");
    assert_eq!(c, 10);
}

#[tokio::test]
async fn checks_of_one_run_are_independent() {
    let env = Env::new().await;
    let one = [spec(Algorithm::SlidingLog, 1, Unit::Second)];
    let two = [spec(Algorithm::TokenBucket, 2, Unit::Second)];
    let (a, b) = (tag("a"), tag("b"));
    let check = |tag, limits, cost| Check {
        tag,
        limits,
        cost,
        refund: false,
    };
    let out = env
        .run(&[
            check(a, &one[..], 1),
            check(b, &two[..], 1),
            check(a, &one[..], 1),
        ])
        .await;
    assert_eq!(out.len(), 3);
    assert!(
        out[0].allowed && out[1].allowed && !out[2].allowed,
        "{out:?}"
    );
    assert_eq!(out[2].used_before, 1, "checks run in order");
    // A check without limits contributes nothing.
    let out = env.run(&[check(b, &[], 1), check(b, &two[..], 1)]).await;
    assert_eq!(out, [allow(0, 1000, 1)]);
}

#[tokio::test]
async fn rate_and_burst_changes_keep_state() {
    let env = Env::new().await;
    // fixed_window: 2 of 3 used; lowered to 1 → denied on the same counter.
    let fw = spec(Algorithm::FixedWindow, 3, Unit::Second);
    let t = tag("hot");
    env.hit1(t, &fw, 2).await;
    let lowered = LimitSpec {
        requests_per_unit: 1,
        ..fw.clone()
    };
    assert_eq!(env.hit1(t, &lowered, 1).await, deny(1000, Some(1000), 2));
    // token_bucket: 4 of 5 tokens left; burst lowered to 2 clamps them to 2.
    let tb = LimitSpec {
        burst: 5,
        ..spec(Algorithm::TokenBucket, 10, Unit::Second)
    };
    env.hit1(t, &tb, 1).await;
    let small = LimitSpec { burst: 2, ..tb };
    assert_eq!(env.hit1(t, &small, 1).await, allow(1, 100, 0));
    // gcra: TAT 333.33 ms stored at rate 3 ('a:1:3'); read at rate 10, b = ceil(1*10/3) = 4,
    // level 333 * 10 + 4 = 3334 > Cs 3000.
    let g3 = spec(Algorithm::Gcra, 3, Unit::Second);
    env.hit1(t, &g3, 1).await;
    let g10 = LimitSpec {
        requests_per_unit: 10,
        ..g3
    };
    assert_eq!(env.hit1(t, &g10, 1).await, deny(334, Some(134), 4));
}

#[tokio::test]
async fn algorithm_unit_or_slot_change_starts_fresh() {
    let env = Env::new().await;
    let fw = spec(Algorithm::FixedWindow, 1, Unit::Second);
    let t = tag("fresh");
    env.hit1(t, &fw, 1).await;
    assert!(!env.hit1(t, &fw, 1).await.allowed);
    let per_minute = LimitSpec {
        unit: Unit::Minute,
        ..fw.clone()
    };
    assert_eq!(env.hit1(t, &per_minute, 1).await.used_before, 0);
    let sliding = LimitSpec {
        algorithm: Algorithm::SlidingWindow,
        buckets: 10,
        ..fw.clone()
    };
    assert_eq!(env.hit1(t, &sliding, 1).await.used_before, 0);
    let second_slot = LimitSpec { slot: 1, ..fw };
    assert_eq!(env.hit1(t, &second_slot, 1).await.used_before, 0);
}

#[tokio::test]
async fn rate_zero_buckets_hold_nothing_and_admit_only_peeks() {
    let env = Env::new().await;
    let t = tag("zero");
    for alg in [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::Gcra,
    ] {
        let l = LimitSpec {
            requests_per_unit: 0,
            burst: 5,
            overdraft: true,
            penalty_ms: 1000,
            ..spec(alg, 1, Unit::Second)
        };
        assert_eq!(env.hit1(t, &l, 0).await, allow(0, 0, 0), "{alg}");
        assert_eq!(env.hit1(t, &l, 1).await, deny(0, None, 0), "{alg}");
        assert_eq!(env.refund1(t, &l, 3).await, allow(0, 0, 0), "{alg}");
        let state: i64 = env.server.query(&["EXISTS", &env.store.state_key(t, &l)]);
        assert_eq!(
            state, 0,
            "{alg}: nothing charged or saved, even with overdraft"
        );
        // The denial still locks.
        let r = env.hit1(t, &l, 1).await;
        assert!(r.penalized && r.retry_ms == Some(1000), "{alg}: {r:?}");
    }
    // The window algorithms need no special case: C = 0 denies every hit.
    let closed = LimitSpec {
        requests_per_unit: 0,
        burst: 0,
        ..spec(Algorithm::FixedWindow, 1, Unit::Second)
    };
    assert!(!env.hit1(tag("closed"), &closed, 1).await.allowed);
}

#[tokio::test]
async fn invalid_parameters_are_a_backend_error_not_a_write() {
    let env = Env::new().await;
    let no_buckets = LimitSpec {
        buckets: 0,
        ..spec(Algorithm::SlidingWindow, 1, Unit::Second)
    };
    let check = Check {
        tag: tag("bad"),
        limits: std::slice::from_ref(&no_buckets),
        cost: 1,
        refund: false,
    };
    let mut out = Vec::new();
    let err = sluice::store::Store::run(&env.store, &Call::new(&[check]), &mut out).await;
    assert!(
        matches!(err, Err(sluice::store::StoreError::Backend(_))),
        "{err:?}"
    );
    assert_eq!(env.dbsize(), 0);
}

#[tokio::test]
async fn any_u64_cost_saturates_instead_of_wrapping() {
    let env = Env::new().await;
    let fw = spec(Algorithm::FixedWindow, 5, Unit::Hour); // overdraft: charged anyway
    let mut sw = spec(Algorithm::SlidingWindow, 5, Unit::Hour);
    sw.overdraft = true;
    let t = tag("huge");
    for l in [&fw, &sw] {
        for _ in 0..3 {
            let r = env.hit1(t, l, u64::MAX).await;
            assert!(!r.allowed && r.used_before <= 1 << 53, "{l:?}: {r:?}");
        }
        let r = env.hit1(t, l, 1).await;
        assert_eq!((r.allowed, r.used_before), (false, 1 << 53), "{l:?}");
        assert_eq!(env.refund1(t, l, u64::MAX).await.remaining, 5, "{l:?}");
    }
    assert_eq!(
        env.fixed_window_state(t, &fw),
        None,
        "refunded to empty: deleted"
    );
    // A sliding log that could grow without bound is refused before anything is written.
    let mut log = spec(Algorithm::SlidingLog, 5, Unit::Second);
    log.overdraft = true;
    let huge_log = spec(Algorithm::SlidingLog, 1_000_000, Unit::Second);
    for l in [log, huge_log] {
        let check = Check {
            tag: t,
            limits: std::slice::from_ref(&l),
            cost: 1,
            refund: false,
        };
        let r = env.try_run(&[check]).await;
        assert!(
            matches!(r, Err(sluice::store::StoreError::Backend(_))),
            "{r:?}"
        );
    }
    assert_eq!(env.dbsize(), 0);
}
