//! Every algorithm's core behaviour, exact to the millisecond (local time mode). The numbers
//! are worked by hand from `docs/explanation/algorithms.md`; the retry of a denial is checked from both
//! sides (denied 1 ms before it, allowed at it).

use sluice::limit::{Algorithm, Unit};

use super::{Env, allow, deny, spec, tag};

#[tokio::test]
async fn fixed_window_counts_and_retries_at_window_end() {
    let env = Env::new().await;
    let l = spec(Algorithm::FixedWindow, 3, Unit::Second);
    let t = tag("fw");
    assert_eq!(env.hit1(t, &l, 1).await, allow(2, 1000, 0));
    env.at(10);
    assert_eq!(env.hit1(t, &l, 1).await, allow(1, 990, 1));
    assert_eq!(env.hit1(t, &l, 1).await, allow(0, 990, 2));
    env.at(250);
    // Denied and, with the default overdraft, still counted (envoyproxy/ratelimit).
    assert_eq!(env.hit1(t, &l, 1).await, deny(750, Some(750), 3));
    env.at(999);
    assert_eq!(env.hit1(t, &l, 1).await, deny(1, Some(1), 4));
    // Cost above the limit: still the window end (their answer).
    assert_eq!(env.hit1(t, &l, 9).await, deny(1, Some(1), 5));
    env.at(1000);
    assert_eq!(env.hit1(t, &l, 1).await, allow(2, 1000, 0));
}

#[tokio::test]
async fn fixed_window_without_overdraft_does_not_count_denials() {
    let env = Env::new().await;
    let mut l = spec(Algorithm::FixedWindow, 2, Unit::Minute);
    l.overdraft = false;
    let t = tag("fw-nood");
    env.at(30_000);
    assert_eq!(env.hit1(t, &l, 2).await, allow(0, 30_000, 0));
    assert_eq!(env.hit1(t, &l, 1).await, deny(30_000, Some(30_000), 2));
    assert_eq!(env.hit1(t, &l, 1).await, deny(30_000, Some(30_000), 2));
    assert_eq!(env.fixed_window_state(t, &l), Some((env.t0, 2)));
}

#[tokio::test]
async fn sliding_window_single_burst_retries_when_its_sub_window_leaves() {
    let env = Env::new().await;
    let l = spec(Algorithm::SlidingWindow, 10, Unit::Second); // 10 sub-windows of 100 ms
    let t = tag("sw1");
    // The sub-window [0, 100) is counted until idx(now) - 10 > 0, i.e. until 1100.
    assert_eq!(env.hit1(t, &l, 10).await, allow(0, 1100, 0));
    env.at(500);
    assert_eq!(env.hit1(t, &l, 1).await, deny(600, Some(600), 10));
    env.at(1099);
    assert_eq!(env.hit1(t, &l, 1).await, deny(1, Some(1), 10));
    env.at(1100);
    assert_eq!(env.hit1(t, &l, 1).await, allow(9, 1100, 0));
}

#[tokio::test]
async fn sliding_window_spread_hits() {
    let env = Env::new().await;
    let l = spec(Algorithm::SlidingWindow, 10, Unit::Second);
    let t = tag("sw2");
    assert_eq!(env.hit1(t, &l, 4).await, allow(6, 1100, 0));
    env.at(300);
    assert_eq!(env.hit1(t, &l, 3).await, allow(3, 1100, 4));
    env.at(600);
    assert_eq!(env.hit1(t, &l, 3).await, allow(0, 1100, 7));
    env.at(700);
    // reset: the newest counted sub-window (600) leaves at 1700.
    // cost 1: the 4 hits of sub-window 0 leave at 1100 → retry 400.
    assert_eq!(env.hit1(t, &l, 1).await, deny(1000, Some(400), 10));
    // cost 5: 4 + 3 must leave: sub-window 300 leaves at 1400 → retry 700.
    assert_eq!(env.hit1(t, &l, 5).await, deny(1000, Some(700), 10));
    assert_eq!(env.hit1(t, &l, 11).await, deny(1000, None, 10));
    env.at(1099);
    assert_eq!(env.hit1(t, &l, 1).await, deny(601, Some(1), 10));
    env.at(1100);
    assert_eq!(env.hit1(t, &l, 1).await, allow(3, 1100, 6));
    // One string 'hi:lo:base:P_hi:...:P_lo', newest sub-window first, P_i = base + the
    // counts of lo..i (sliding_window.lua); the expired sub-window 0 was dropped by the
    // write, its running total (4) is the base.
    let key = env.store.state_key(t, &l);
    let cur0 = env.t0 / 100;
    let state: String = env.server.query(&["GET", &key]);
    let at = |j: u64| (cur0 + j).to_string();
    assert_eq!(
        state,
        format!("{}:{}:4:11:10:10:10:10:10:7:7:7:4:4", at(11), at(1))
    );
}

#[tokio::test]
async fn sliding_log_exact_retry_from_the_kth_oldest_entry() {
    let env = Env::new().await;
    let l = spec(Algorithm::SlidingLog, 3, Unit::Second);
    let t = tag("log");
    assert_eq!(env.hit1(t, &l, 1).await, allow(2, 1000, 0));
    env.at(100);
    assert_eq!(env.hit1(t, &l, 1).await, allow(1, 1000, 1));
    env.at(200);
    assert_eq!(env.hit1(t, &l, 1).await, allow(0, 1000, 2));
    env.at(300);
    assert_eq!(env.hit1(t, &l, 1).await, deny(900, Some(700), 3));
    assert_eq!(env.hit1(t, &l, 2).await, deny(900, Some(800), 3));
    assert_eq!(env.hit1(t, &l, 4).await, deny(900, None, 3));
    env.at(999);
    assert_eq!(env.hit1(t, &l, 1).await, deny(201, Some(1), 3));
    env.at(1000);
    // The entry at 0 is out of (now - W, now]: 2 left.
    assert_eq!(env.hit1(t, &l, 1).await, allow(0, 1000, 2));
    let key = env.store.state_key(t, &l);
    let runs: Vec<String> = env.server.query(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]);
    // Run-length entries, score = ts, member = 'cum:cnt', the newest written with the cache
    // of the oldest run (':ts:cum-cnt', runs.lua), the older ones keep the one they had when
    // they were the newest; the expired run at 0 is pruned by the write.
    let (a, b, c) = (env.t0 + 100, env.t0 + 200, env.t0 + 1000);
    let t0 = env.t0;
    assert_eq!(
        runs,
        [
            format!("2:1:{t0}:0"),
            a.to_string(),
            format!("3:1:{t0}:0"),
            b.to_string(),
            format!("4:1:{a}:1"),
            c.to_string()
        ],
        "{runs:?}"
    );
}

/// The three bucket algorithms make identical decisions; one trace for all of them.
/// rate 10/s (one token per 100 ms), burst 5: Cs = 5000 scaled units, refill 10 per ms.
async fn bucket_trace(algorithm: Algorithm) {
    let env = Env::new().await;
    let l = spec(algorithm, 10, Unit::Second);
    let l = sluice::limit::LimitSpec { burst: 5, ..l };
    let t = tag("bucket");
    assert_eq!(env.hit1(t, &l, 5).await, allow(0, 500, 0), "{algorithm}");
    assert_eq!(
        env.hit1(t, &l, 1).await,
        deny(500, Some(100), 5),
        "{algorithm}"
    );
    env.at(99);
    assert_eq!(
        env.hit1(t, &l, 1).await,
        deny(401, Some(1), 5),
        "{algorithm}"
    );
    env.at(100);
    assert_eq!(env.hit1(t, &l, 1).await, allow(0, 500, 4), "{algorithm}");
    env.at(350);
    assert_eq!(env.hit1(t, &l, 2).await, allow(0, 450, 3), "{algorithm}");
    assert_eq!(env.hit1(t, &l, 6).await, deny(450, None, 5), "{algorithm}");
    env.at(799);
    assert_eq!(env.hit1(t, &l, 5).await, deny(1, Some(1), 1), "{algorithm}");
    env.at(800);
    assert_eq!(env.hit1(t, &l, 5).await, allow(0, 500, 0), "{algorithm}");
}

#[tokio::test]
async fn token_bucket_refills_continuously() {
    bucket_trace(Algorithm::TokenBucket).await;
}

#[tokio::test]
async fn leaky_bucket_leaks_continuously() {
    bucket_trace(Algorithm::LeakyBucket).await;
}

#[tokio::test]
async fn gcra_matches_the_buckets() {
    bucket_trace(Algorithm::Gcra).await;
}

#[tokio::test]
async fn gcra_stores_one_string_with_its_rate() {
    let env = Env::new().await;
    let l = spec(Algorithm::Gcra, 3, Unit::Second); // T = 333.33 ms
    let t = tag("gcra-fmt");
    let key = env.store.state_key(t, &l);
    assert_eq!(env.hit1(t, &l, 1).await, allow(2, 334, 0));
    let v: String = env.server.query(&["GET", &key]);
    assert_eq!(v, format!("{}:1:3", env.t0 + 333));
    assert_eq!(env.hit1(t, &l, 2).await, allow(0, 1000, 1));
    let v: String = env.server.query(&["GET", &key]);
    assert_eq!(v, (env.t0 + 1000).to_string());
    env.at(333);
    // level (1000 - 333) * 3 = 2001 scaled units: 2.001 requests, rounded up.
    assert_eq!(env.hit1(t, &l, 1).await, deny(667, Some(1), 3));
    env.at(334);
    assert_eq!(env.hit1(t, &l, 1).await, allow(0, 1000, 2));
}

#[tokio::test]
async fn bucket_costs_scale_and_overdraft_goes_into_debt() {
    let env = Env::new().await;
    // rate 2/s (a token per 500 ms), burst 2, overdraft: denied hits are charged anyway.
    let mut l = spec(Algorithm::TokenBucket, 2, Unit::Second);
    l.overdraft = true;
    let t = tag("debt");
    assert_eq!(env.hit1(t, &l, 2).await, allow(0, 1000, 0));
    // tokens 0 → -1000: retry (1000 - (-1000)) / 2 = 1000, reset 3000 / 2.
    assert_eq!(env.hit1(t, &l, 1).await, deny(1500, Some(1000), 2));
    assert_eq!(env.hit1(t, &l, 1).await, deny(2000, Some(1500), 3));
    // tokens -2000 + 1499 * 2 = 998: one short, and the denial is charged again (-2).
    env.at(1499);
    assert_eq!(env.hit1(t, &l, 1).await, deny(1001, Some(501), 2));
    env.at(1999);
    assert_eq!(env.hit1(t, &l, 1).await, deny(1001, Some(501), 2));
    env.at(2500);
    assert_eq!(env.hit1(t, &l, 1).await, allow(0, 1000, 1));
}
