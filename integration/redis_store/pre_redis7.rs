//! The script's Redis < 7 branch, forced: on a server without `PEXPIRE ... NX` the
//! fixed-window fast path (`src/store/lua/main.lua`, path 1) asks `HLEN` whether a new
//! window's field shares the key with another window's. The test machine runs Redis 7, which
//! would never take that branch, so these stores are built by
//! `RedisStore::new_forcing_pre_redis7` (the real script with `local V7 = false`) and run the
//! same fixed-window scenarios as the Redis 7 branch, against a real redis-server each.

use std::time::Duration;

use sluice::limit::{Algorithm, Check, Clock, LimitResult, SystemClock, Unit};
use sluice::store::redis::{RedisConfig, TimeSource};

use super::{Env, TEST_SLACK_MS, allow, deny, local_config, spec, tag};
use crate::support::redis::RedisServer;

/// Which branch a store's script takes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Branch {
    /// What Redis 7 runs: `PEXPIRE ... NX` on a window's first hit.
    V7,
    /// Forced: `HLEN`, then a plain `PEXPIRE` when the key holds only the new field.
    PreV7,
}

async fn env(branch: Branch, cfg: impl FnOnce(&RedisServer) -> RedisConfig) -> Env {
    let server = RedisServer::start();
    let cfg = cfg(&server);
    match branch {
        Branch::V7 => Env::with_config(server, cfg).await,
        Branch::PreV7 => Env::forcing_pre_redis7(server, cfg).await,
    }
}

/// What one step left behind: the answers, and the state as stored (window start relative
/// to t0, count). TTLs are checked in place (they run on real time, so they are not compared
/// exactly between two servers).
type Step = (Vec<LimitResult>, Option<(u64, u64)>);

/// Assert the key's TTL is `ms` plus the slack, give or take the real time the test took.
fn assert_ttl(env: &Env, key: &str, ms: u64, what: &str) {
    let pttl: i64 = env.server.query(&["PTTL", key]);
    let bound = (ms + TEST_SLACK_MS) as i64;
    assert!(
        pttl <= bound && pttl > bound - 1000,
        "{what}: PTTL {pttl}, expected {bound}"
    );
}

/// The fixed-window scenarios in local time mode (a manual clock), with the answers worked by
/// hand from docs/explanation/algorithms.md "fixed_window": the first hit of a window sets the TTL, later
/// hits keep the window's end, the next window's first hit drops the earlier window's field,
/// a clock that goes back charges the later window, a fresh key beside a known one in one
/// call. Returns what each step left, to compare the two branches.
async fn fixed_window_scenarios(env: &Env) -> Vec<Step> {
    let l = spec(Algorithm::FixedWindow, 3, Unit::Minute);
    let (a, b) = (tag("pre7-a"), tag("pre7-b"));
    let key = env.store.state_key(a, &l);
    let state = |t| {
        env.fixed_window_state(t, &l)
            .map(|(ws, c)| (ws - env.t0, c))
    };
    let mut steps = Vec::new();

    // The window's first hit on a fresh key: the TTL is set to the window's end.
    env.at(1_000);
    let r = env.hit(a, std::slice::from_ref(&l), 1).await;
    assert_eq!(r, [allow(2, 59_000, 0)]);
    assert_eq!(state(a), Some((0, 1)));
    assert_ttl(env, &key, 59_000, "first hit");
    steps.push((r, state(a)));

    // Later hits of the window keep its end (local time: each sets it again, to the same end).
    env.at(30_000);
    let r = env.hit(a, std::slice::from_ref(&l), 1).await;
    assert_eq!(r, [allow(1, 30_000, 1)]);
    assert_ttl(env, &key, 30_000, "later hit");
    steps.push((r, state(a)));
    // Over the limit: denied and, with the default overdraft, still counted.
    let r = env.hit(a, std::slice::from_ref(&l), 5).await;
    assert_eq!(r, [deny(30_000, Some(30_000), 2)]);
    assert_eq!(state(a), Some((0, 7)));
    assert_ttl(env, &key, 30_000, "denied hit");
    steps.push((r, state(a)));

    // The next window's first hit: the earlier window's field goes (`fixed_window_state`
    // panics on a key of two fields), the TTL is the new window's end.
    env.at(61_000);
    let r = env.hit(a, std::slice::from_ref(&l), 1).await;
    assert_eq!(r, [allow(2, 59_000, 0)]);
    assert_eq!(state(a), Some((60_000, 1)));
    assert_ttl(env, &key, 59_000, "next window");
    steps.push((r, state(a)));

    // The clock goes back into the earlier window: the later window is charged (its reset
    // counted from it), its TTL left as it was (not shortened to the earlier window's end).
    env.at(10_000);
    let r = env.hit(a, std::slice::from_ref(&l), 1).await;
    assert_eq!(r, [allow(1, 110_000, 1)]);
    assert_eq!(state(a), Some((60_000, 2)));
    assert_ttl(env, &key, 59_000, "clock went back");
    steps.push((r, state(a)));

    // Forward again into that window: an existing field, the TTL at the window's end.
    env.at(70_000);
    let r = env.hit(a, std::slice::from_ref(&l), 1).await;
    assert_eq!(r, [allow(0, 50_000, 2)]);
    assert_ttl(env, &key, 50_000, "back in the later window");
    steps.push((r, state(a)));

    // One call: the known key over its limit, and a fresh key's first hit (its own TTL).
    let limits = std::slice::from_ref(&l);
    let r = env
        .run(&[
            Check {
                tag: a,
                limits,
                cost: 1,
                refund: false,
            },
            Check {
                tag: b,
                limits,
                cost: 1,
                refund: false,
            },
        ])
        .await;
    assert_eq!(r, [deny(50_000, Some(50_000), 3), allow(2, 50_000, 0)]);
    assert_eq!(state(b), Some((60_000, 1)));
    assert_ttl(
        env,
        &env.store.state_key(b, &l),
        50_000,
        "fresh key in a call",
    );
    steps.push((r, state(b)));
    steps
}

/// The scenarios through both branches: the same answers and states; and the commands each
/// ran show which branch that was. Of the 8 hits, 4 create their window's field (the first
/// hit, the next window's, the hit after the clock went back, the fresh key); the forced
/// branch asks HLEN for each, where Redis 7's asks PEXPIRE ... NX. Plain PEXPIREs: on a key
/// of the new field alone or after dropping the earlier window's (3 forced; 1 with Redis 7,
/// whose NX set the rest), and on each hit of an existing field (4, both).
#[tokio::test]
async fn fixed_window_pre_redis7_branch_matches_redis7() {
    let v7 = env(Branch::V7, local_config).await;
    let old = env(Branch::PreV7, local_config).await;
    assert_ne!(v7.store.script_sha(), old.store.script_sha());
    let expected = fixed_window_scenarios(&v7).await;
    let got = fixed_window_scenarios(&old).await;
    assert_eq!(got, expected);
    assert_eq!(v7.server.command_calls("hlen"), 0);
    assert_eq!(v7.server.command_calls("pexpire"), 9);
    assert_eq!(old.server.command_calls("hlen"), 4);
    assert_eq!(old.server.command_calls("pexpire"), 7);
}

/// With Redis `TIME` the TTL is an absolute PEXPIREAT at the window's end, set once by the
/// window's first hit and never again: through the forced branch, one HLEN and one PEXPIREAT
/// for three hits, and the key expires at the window's end (no slack with `TIME`).
#[tokio::test]
async fn fixed_window_pre_redis7_branch_sets_the_ttl_once_with_redis_time() {
    let old = env(Branch::PreV7, |server| RedisConfig {
        time_source: TimeSource::Redis,
        ttl_slack_ms: None, // 0 with TIME
        ..local_config(server)
    })
    .await;
    // Hour windows on Redis' clock (this machine's): if the hour is about to turn, let it
    // turn first, so the three hits share a window even on a loaded machine.
    let to_end = 3_600_000 - SystemClock.now_ms() % 3_600_000;
    if to_end < 10_000 {
        tokio::time::sleep(Duration::from_millis(to_end + 20)).await;
    }
    let l = spec(Algorithm::FixedWindow, 5, Unit::Hour);
    let t = tag("pre7-time");
    let first = old.hit1(t, &l, 1).await;
    assert!(first.allowed && first.remaining == 4, "{first:?}");
    for used in 1..3 {
        let r = old.hit1(t, &l, 1).await;
        assert_eq!((r.allowed, r.used_before), (true, used), "{r:?}");
    }
    let pttl: i64 = old.server.query(&["PTTL", &old.store.state_key(t, &l)]);
    let end = first.reset_ms as i64;
    assert!(
        pttl <= end && pttl > end - 1000,
        "PTTL {pttl}, window end {end}"
    );
    assert_eq!(old.server.command_calls("hlen"), 1);
    assert_eq!(old.server.command_calls("pexpireat"), 1);
    assert_eq!(old.server.command_calls("pexpire"), 0);
}
