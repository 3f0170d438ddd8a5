//! Sliding-algorithm keys across the change to named layouts (`:s`, `:r`): the keys of earlier
//! releases are never read (the layouts have names of their own), and an earlier layout found under
//! the new name reads as empty (sliding_window) or as it is (sliding_log's runs without
//! the cache).

use sluice::limit::{Algorithm, Unit};

use super::{Env, spec, tag};

/// A rolling upgrade of the sliding layouts: their keys are named for the layout
/// (`:s` for a `sliding_window`, `:r` for a `sliding_log`), so the keys an earlier release
/// writes (without the suffix) are never read or written, as for the fixed window.
#[tokio::test]
async fn sliding_keys_of_earlier_releases_are_never_read() {
    let env = Env::new().await;
    let sw = spec(Algorithm::SlidingWindow, 5, Unit::Second);
    let log = spec(Algorithm::SlidingLog, 5, Unit::Second);
    let t = tag("sliding-upgrade");
    let cur = (env.t0 * 10 / 1000).to_string();
    let ts = env.t0.to_string();
    for (l, suffix, score) in [(&sw, ":s", &cur), (&log, ":r", &ts)] {
        let new = env.store.state_key(t, l);
        let old = new.strip_suffix(suffix).expect("the layout suffix");
        // What an earlier release left: a full window (5 of 5) as its run-length ZSET.
        let _: i64 = env.server.query(&["ZADD", old, score, "5:5"]);
        let r = env.hit1(t, l, 1).await;
        assert!(r.allowed, "{l:?}: {r:?}");
        assert_eq!((r.used_before, r.remaining), (0, 4), "{l:?}");
        let kept: Vec<String> = env.server.query(&["ZRANGE", old, "0", "-1"]);
        assert_eq!(kept, ["5:5"]);
    }
    let kind: String = env.server.query(&["TYPE", &env.store.state_key(t, &sw)]);
    assert_eq!(kind, "string");
    let kind: String = env.server.query(&["TYPE", &env.store.state_key(t, &log)]);
    assert_eq!(kind, "zset");
}

/// A `sliding_window` key holding an earlier layout (the run-length ZSET, members 'cum:cnt',
/// or the hash before it; only if something wrote one under the new name) reads as empty and
/// the next write replaces it, with no WRONGTYPE error on any path (a peek, a refund, a hit,
/// a denial's retry).
#[tokio::test]
async fn sliding_window_keys_of_earlier_layouts_read_as_empty() {
    let env = Env::new().await;
    let l = spec(Algorithm::SlidingWindow, 5, Unit::Second);
    let cur = (env.t0 * 10 / 1000).to_string();
    for (i, old) in ["zset", "hash"].into_iter().enumerate() {
        let t = tag(&format!("sw-upgrade{i}"));
        let key = env.store.state_key(t, &l);
        // What an earlier release left: the window full (5 of 5) in the current sub-window.
        if old == "zset" {
            let _: i64 = env.server.query(&["ZADD", &key, &cur, "5:5"]);
        } else {
            let _: i64 = env.server.query(&["HSET", &key, &cur, "5", "total", "5"]);
        }
        let _: i64 = env.server.query(&["PEXPIRE", &key, "60000"]);
        let peek = env.hit(t, std::slice::from_ref(&l), 0).await;
        assert!(peek[0].allowed, "{old}: {peek:?}");
        assert_eq!(peek[0].used_before, 0, "{old}");
        // A peek writes nothing: the old key is still there.
        let kind: String = env.server.query(&["TYPE", &key]);
        assert_eq!(kind, old);
        // A refund of nothing live drops it.
        assert!(env.refund1(t, &l, 1).await.allowed, "{old}");
        assert_eq!(env.dbsize(), 0, "{old}");
        if old == "zset" {
            let _: i64 = env.server.query(&["ZADD", &key, &cur, "5:5"]);
        } else {
            let _: i64 = env.server.query(&["HSET", &key, &cur, "5", "total", "5"]);
        }
        let r = env.hit1(t, &l, 4).await;
        assert!(r.allowed, "{old}: {r:?}");
        assert_eq!((r.used_before, r.remaining), (0, 1), "{old}");
        let kind: String = env.server.query(&["TYPE", &key]);
        assert_eq!(kind, "string", "{old}");
        // Counted in the new layout: 4 of 5, a cost of 2 is denied with a retry.
        let r = env.hit1(t, &l, 2).await;
        assert!(!r.allowed, "{old}: {r:?}");
        assert_eq!(r.used_before, 4, "{old}");
        assert!(r.retry_ms.is_some(), "{old}: {r:?}");
        let _: i64 = env.server.query(&["DEL", &key]);
    }
}

/// Sliding-log runs without the cache ('cum:cnt' members: the layout before the named keys, were
/// one written under the new name) are read as they are, and the next write adds the cache
/// to the newest member: '%d:%d:%d:%d' = (cum, cnt, the oldest run's ts, its cum - cnt).
#[tokio::test]
async fn sliding_log_runs_of_the_earlier_layout_are_read_and_cached() {
    let env = Env::new().await;
    let l = spec(Algorithm::SlidingLog, 10, Unit::Second);
    let t = tag("log-upgrade");
    let key = env.store.state_key(t, &l);
    let (a, b) = (env.t0.to_string(), (env.t0 + 100).to_string());
    let _: i64 = env.server.query(&["ZADD", &key, &a, "3:3", &b, "5:2"]);
    let _: i64 = env.server.query(&["PEXPIRE", &key, "60000"]);
    env.at(200);
    let r = env.hit1(t, &l, 1).await;
    assert!(r.allowed, "{r:?}");
    assert_eq!((r.used_before, r.remaining), (5, 4));
    let runs: Vec<String> = env.server.query(&["ZRANGE", &key, "0", "-1"]);
    assert_eq!(runs, ["3:3", "5:2", &format!("6:1:{a}:0")]);
    // The same ms: the newest run grows, the cache stays.
    let r = env.hit1(t, &l, 2).await;
    assert_eq!(r.used_before, 6);
    let runs: Vec<String> = env.server.query(&["ZRANGE", &key, "0", "-1"]);
    assert_eq!(runs, ["3:3", "5:2", &format!("8:3:{a}:0")]);
    // The run at t0 leaves: the load reads the oldest runs, the write prunes it and caches
    // the run at t0 + 100 (base 3).
    env.at(1000);
    let r = env.hit1(t, &l, 1).await;
    assert_eq!(r.used_before, 5);
    let runs: Vec<String> = env.server.query(&["ZRANGE", &key, "0", "-1"]);
    assert_eq!(
        runs,
        ["5:2".to_owned(), format!("8:3:{a}:0"), format!("9:1:{b}:3")]
    );
    // A refund of 2 empties the newest run and takes 1 from the run before: that run is
    // the newest now and gets the current cache.
    let r = env.refund1(t, &l, 2).await;
    assert!(r.allowed);
    let runs: Vec<String> = env.server.query(&["ZRANGE", &key, "0", "-1"]);
    assert_eq!(runs, ["5:2", &format!("7:2:{b}:3")]);
    assert_eq!(
        env.hit(t, std::slice::from_ref(&l), 0).await[0].used_before,
        4
    );
}
