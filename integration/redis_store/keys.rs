//! Key layout, hash tags, TTLs and integer formatting of the stored state.

use std::sync::Arc;
use std::time::Duration;

use sluice::limit::{Algorithm, LimitSpec, ManualClock, StateTag, Unit};
use sluice::store::Call;
use sluice::store::redis::{RedisConfig, RedisConfigError, RedisStore, TimeSource};

use super::{Env, local_config, spec, tag};
use crate::support::redis::{RedisServer, free_port};

/// One limit of every algorithm, each with a penalty, on one descriptor.
fn every_algorithm(rate: u64) -> Vec<LimitSpec> {
    Algorithm::ALL
        .into_iter()
        .enumerate()
        .map(|(i, alg)| LimitSpec {
            penalty_ms: 700,
            slot: i as u8,
            ..spec(alg, rate, Unit::Second)
        })
        .collect()
}

#[tokio::test]
async fn keys_are_prefix_tag_identity_and_lock() {
    let server = RedisServer::start();
    let cfg = RedisConfig {
        key_prefix: "rl:".to_owned(),
        ..local_config(&server)
    };
    let env = Env::with_config(server, cfg).await;
    let l = LimitSpec {
        penalty_ms: 1000,
        slot: 2,
        ..spec(Algorithm::TokenBucket, 5, Unit::Minute)
    };
    let t = tag("layout");
    let b64 = t.to_base64url();
    assert_eq!(b64.len(), 22);
    assert_eq!(env.store.state_key(t, &l), format!("rl:{{{b64}}}:4:60:0:2"));
    assert_eq!(
        env.store.lock_key(t, &l),
        format!("rl:{{{b64}}}:4:60:0:2:p")
    );
    assert!(env.hit1(t, &l, 5).await.allowed);
    assert!(!env.hit1(t, &l, 1).await.allowed);
    let mut keys: Vec<String> = env.server.query(&["KEYS", "*"]);
    keys.sort();
    assert_eq!(
        keys,
        [env.store.state_key(t, &l), env.store.lock_key(t, &l)]
    );
    // A fixed window's state is a hash since that layout, under a name of its own (`:h`):
    // the keys of the earlier string layout are left to expire, never misread.
    let fw = LimitSpec {
        penalty_ms: 1000,
        ..spec(Algorithm::FixedWindow, 5, Unit::Minute)
    };
    assert_eq!(
        env.store.state_key(t, &fw),
        format!("rl:{{{b64}}}:1:60:0:0:h")
    );
    assert_eq!(
        env.store.lock_key(t, &fw),
        format!("rl:{{{b64}}}:1:60:0:0:h:p")
    );
}

/// A rolling upgrade: instances of the release before the hash layout write a fixed window as
/// the string `'ws:c'` under the key without `:h` (and its lock under that plus `:p`). The new
/// code never reads those keys: no WRONGTYPE, no misparsed count; every path of the script
/// (a charged fixed window with overdraft, one limit, a limit with a penalty) starts from an
/// empty window and leaves the old keys as the old instances wrote them.
#[tokio::test]
async fn the_string_layout_of_earlier_releases_is_never_read() {
    let server = RedisServer::start();
    let cfg = RedisConfig {
        key_prefix: "rl:".to_owned(),
        ..local_config(&server)
    };
    let env = Env::with_config(server, cfg).await;
    let overdraft = spec(Algorithm::FixedWindow, 5, Unit::Minute);
    let exact = LimitSpec {
        overdraft: false,
        slot: 1,
        ..overdraft.clone()
    };
    let penalized = LimitSpec {
        penalty_ms: 1000,
        slot: 2,
        ..overdraft.clone()
    };
    for (i, l) in [overdraft, exact, penalized].iter().enumerate() {
        let t = tag(&format!("upgrade{i}"));
        let new = env.store.state_key(t, l);
        let old = new
            .strip_suffix(":h")
            .expect("a fixed window key ends in :h");
        // What an earlier release left: a full window (5 of 5) and an active lock.
        let ws = 60_000 * (env.t0 / 60_000);
        let _: () = env
            .server
            .query(&["SET", old, &format!("{ws}:5"), "PX", "60000"]);
        let lock = format!("{old}:p");
        let until = (env.t0 + 1000).to_string();
        let _: () = env.server.query(&["SET", &lock, &until, "PX", "1000"]);
        let r = env.hit1(t, l, 1).await;
        assert!(r.allowed, "{l:?}: {r:?}");
        assert_eq!((r.used_before, r.remaining), (0, 4), "{l:?}");
        let kept: String = env.server.query(&["GET", old]);
        assert_eq!(kept, format!("{ws}:5"));
        let kept: String = env.server.query(&["GET", &lock]);
        assert_eq!(kept, until);
        let kind: String = env.server.query(&["TYPE", &new]);
        assert_eq!(kind, "hash");
    }
}

#[tokio::test]
async fn a_prefix_with_braces_is_rejected() {
    for prefix in ["a{b", "}x", "{tenant}:"] {
        let cfg = RedisConfig {
            key_prefix: prefix.to_owned(),
            ..RedisConfig::default()
        };
        let r = RedisStore::new(cfg, Arc::new(ManualClock::new(0)));
        assert!(
            matches!(r, Err(RedisConfigError::PrefixBraces(_))),
            "{prefix}"
        );
    }
}

#[tokio::test]
async fn every_key_of_a_check_hashes_to_the_tag_slot() {
    // A cluster-enabled node computes slots (CLUSTER KEYSLOT) without owning any.
    let bus = free_port().to_string();
    let slots = RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-port",
        &bus,
    ]);
    let env = Env::new().await;
    let keyslot = |k: &str| -> i64 { slots.query(&["CLUSTER", "KEYSLOT", k]) };
    let limits = every_algorithm(3);
    // Braces (and anything else) in descriptor values only ever feed the hash.
    for value in ["plain", "a{b}c", "{", "}", "{}{x}", "}{"] {
        let t = StateTag::compute("dom", [("key", value), ("other", "{v}")]);
        let expected = keyslot(&t.to_base64url());
        for l in &limits {
            for key in [env.store.state_key(t, l), env.store.lock_key(t, l)] {
                assert_eq!(keyslot(&key), expected, "{key}");
                assert_eq!(key.matches('{').count(), 1, "{key}");
            }
        }
        // And the script accepts them all in one call (a cluster would reject cross-slot).
        env.hit(t, &limits, 1).await;
    }
}

#[tokio::test]
async fn entry_boundaries_never_collide() {
    let env = Env::new().await;
    let a = StateTag::compute("d", [("a", "b_c")]);
    let b = StateTag::compute("d", [("a_b", "c")]);
    let c = StateTag::compute("d", [("a", "b"), ("c", "")]);
    assert!(a != b && a != c && b != c);
    let l = spec(Algorithm::FixedWindow, 1, Unit::Hour);
    assert_ne!(env.store.state_key(a, &l), env.store.state_key(b, &l));
    assert!(env.hit1(a, &l, 1).await.allowed);
    assert!(!env.hit1(a, &l, 1).await.allowed);
    assert!(env.hit1(b, &l, 1).await.allowed);
    assert!(env.hit1(c, &l, 1).await.allowed);
}

/// Every key carries a TTL: the state's time to empty (or window end), the lock's penalty,
/// plus `slack`. Checked after a charge, a denial that locks, and a refund.
async fn check_ttls(env: &Env, slack: i64) {
    let limits = every_algorithm(2);
    let t = tag("ttl");
    let results = env.hit(t, &limits, 2).await;
    let denied = env.hit(t, &limits, 1).await; // sets every penalty lock
    assert!(denied.iter().all(|r| !r.allowed), "{denied:?}");
    for (l, r) in limits.iter().zip(&results) {
        let pttl: i64 = env.server.query(&["PTTL", &env.store.state_key(t, l)]);
        let bound = r.reset_ms as i64 + slack;
        assert!(
            pttl > 0 && pttl <= bound && pttl > bound - 1000,
            "{l:?}: {pttl} vs {bound}"
        );
        let lock: i64 = env.server.query(&["PTTL", &env.store.lock_key(t, l)]);
        let bound = l.penalty_ms as i64 + slack;
        assert!(
            lock > 0 && lock <= bound && lock > bound - 1000,
            "lock {l:?}: {lock}"
        );
    }
    let refunded = env
        .run(&[sluice::limit::Check {
            tag: t,
            limits: &limits,
            cost: 1,
            refund: true,
        }])
        .await;
    for (l, r) in limits.iter().zip(&refunded) {
        let pttl: i64 = env.server.query(&["PTTL", &env.store.state_key(t, l)]);
        let bound = r.reset_ms as i64 + slack;
        assert!(
            pttl > 0 && pttl <= bound,
            "after refund {l:?}: {pttl} vs {bound}"
        );
    }
    let keys: Vec<String> = env.server.query(&["KEYS", "*"]);
    assert_eq!(keys.len(), 2 * limits.len());
    for k in keys {
        let pttl: i64 = env.server.query(&["PTTL", &k]);
        assert!(pttl > 0, "{k} has no TTL");
    }
}

#[tokio::test]
async fn ttls_follow_the_state_with_redis_time() {
    let server = RedisServer::start();
    let cfg = RedisConfig {
        time_source: TimeSource::Redis,
        ttl_slack_ms: None, // 0 with TIME
        ..local_config(&server)
    };
    let env = Env::with_config(server, cfg).await;
    // Per-second windows on Redis' clock (this machine's): start just after a second
    // begins, so the calls below share one window even on a loaded machine.
    let into = sluice::limit::Clock::now_ms(&sluice::limit::SystemClock) % 1000;
    tokio::time::sleep(Duration::from_millis(1000 - into + 20)).await;
    check_ttls(&env, 0).await;
}

#[tokio::test]
async fn ttls_include_the_slack_in_local_time() {
    let server = RedisServer::start();
    let cfg = RedisConfig {
        ttl_slack_ms: None, // 2000 in local mode
        ..local_config(&server)
    };
    let env = Env::with_config(server, cfg).await;
    check_ttls(&env, 2000).await;
}

#[tokio::test]
async fn large_timestamps_are_stored_as_plain_integers() {
    let server = RedisServer::start();
    let cfg = local_config(&server);
    let clock = Arc::new(ManualClock::new(0));
    let store = RedisStore::new(cfg, clock.clone()).expect("config");
    assert!(store.wait_ready(Duration::from_secs(10)).await);
    // Above 1e15 (where '%.14g' switches to exponents) yet `now * buckets` below 2^53.
    let now = (1u64 << 50) + 123;
    clock.set(now);
    let mut limits = every_algorithm(3);
    for l in &mut limits {
        l.buckets = if l.algorithm == Algorithm::SlidingWindow {
            2
        } else {
            0
        };
    }
    let t = tag("big");
    let mut out = Vec::new();
    let checks = [sluice::limit::Check {
        tag: t,
        limits: &limits,
        cost: 2,
        refund: false,
    }];
    sluice::store::Store::run(&store, &Call::new(&checks), &mut out)
        .await
        .expect("run");
    assert!(out.iter().all(|r| r.allowed), "{out:?}");
    sluice::store::Store::run(&store, &Call::new(&checks), &mut out)
        .await
        .expect("run");
    let mut conn = server.conn();
    let mut stored = Vec::new();
    for l in &limits {
        let key = store.state_key(t, l);
        let kind: String = redis::cmd("TYPE").arg(&key).query(&mut conn).expect("TYPE");
        let values: Vec<String> = match kind.as_str() {
            "hash" => {
                let mut v: Vec<String> = server.query(&["HVALS", &key]);
                let fields: Vec<String> = server.query(&["HKEYS", &key]);
                // Sub-window indexes are fields too; the named ones are not numbers.
                v.extend(
                    fields
                        .into_iter()
                        .filter(|f| f.starts_with(|c: char| c.is_ascii_digit())),
                );
                v
            }
            "string" => vec![server.query(&["GET", &key])],
            "zset" => {
                // Members are runs, '%d:%d' (cum, cnt); scores are timestamps.
                server.query(&["ZRANGE", &key, "0", "-1", "WITHSCORES"])
            }
            other => panic!("{key}: unexpected type {other}"),
        };
        stored.extend(values);
        stored.push(server.query::<String>(&["GET", &store.lock_key(t, l)]));
    }
    assert!(
        stored.iter().any(|v| v.contains(&now.to_string())),
        "{stored:?}"
    );
    for v in &stored {
        let plain = !v.is_empty() && v.split(':').all(|n| n.parse::<i64>().is_ok());
        assert!(plain, "not plain integers in stored state: {v}");
    }
}

/// token_bucket and leaky_bucket keep their state in one string ('t:ts:x', 'l:ts:x', all
/// '%d'), fixed_window in a hash of one field (window start -> count); a key of another
/// type is an error that writes nothing.
#[tokio::test]
async fn state_layouts_and_foreign_types() {
    let env = Env::new().await;
    let fw = spec(Algorithm::FixedWindow, 5, Unit::Second);
    // Rate 10/s: one request = 1000 units, 10 units/ms; 3 hits take 300 ms to drain.
    let tb = spec(Algorithm::TokenBucket, 10, Unit::Second);
    let lb = spec(Algorithm::LeakyBucket, 10, Unit::Second);
    let (t0, now) = (env.t0, env.t0 + 250);
    env.at(250);
    let t = tag("strings");
    for l in [&fw, &tb, &lb] {
        assert!(env.hit1(t, l, 3).await.allowed, "{l:?}");
    }
    let get =
        |t, l: &LimitSpec| -> String { env.server.query(&["GET", &env.store.state_key(t, l)]) };
    let window: Vec<String> = env.server.query(&["HGETALL", &env.store.state_key(t, &fw)]);
    assert_eq!(window, [t0.to_string(), "3".to_owned()]);
    assert_eq!(get(t, &tb), format!("7000:{now}:{}", now + 300));
    assert_eq!(get(t, &lb), format!("3000:{now}:{}", now + 300));

    // Any other type under a state key is an error, and nothing is written: every
    // algorithm, through each path of the script (main.lua: a charged fixed window with
    // overdraft; one limit; several limits or a penalty).
    let fw_exact = LimitSpec {
        overdraft: false,
        ..fw.clone()
    };
    let mut cases: Vec<Vec<LimitSpec>> = vec![vec![fw.clone()], vec![fw_exact]];
    cases.extend(Algorithm::ALL.map(|a| vec![spec(a, 5, Unit::Second)]));
    cases.extend(Algorithm::ALL.map(|a| {
        vec![LimitSpec {
            penalty_ms: 1000,
            ..spec(a, 5, Unit::Second)
        }]
    }));
    for (i, limits) in cases.iter().enumerate() {
        let odd = tag(&format!("odd{i}"));
        let key = env.store.state_key(odd, &limits[0]);
        env.server.query::<i64>(&["RPUSH", &key, "x"]);
        let before = env.dbsize();
        let check = sluice::limit::Check {
            tag: odd,
            limits,
            cost: 1,
            refund: false,
        };
        let r = env.try_run(&[check]).await;
        assert!(
            matches!(r, Err(sluice::store::StoreError::Backend(_))),
            "{limits:?}: {r:?}"
        );
        assert_eq!(env.dbsize(), before, "{limits:?}");
        let kind: String = env.server.query(&["TYPE", &key]);
        assert_eq!(kind, "list");
    }
}
