//! Key layout, hash tags, TTLs and integer formatting of the stored state.

use std::sync::Arc;
use std::time::Duration;

use sluice::limit::{Algorithm, LimitSpec, ManualClock, StateTag, Unit};
use sluice::store::redis::{RedisConfig, RedisConfigError, RedisStore, TimeSource};

use super::{Env, local_config, spec, tag};
use crate::support::redis::{RedisServer, free_port};

/// One limit of every algorithm, each with a penalty, on one descriptor.
fn every_algorithm(rate: u32) -> Vec<LimitSpec> {
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
    sluice::store::Store::run(&store, &checks, &mut out)
        .await
        .expect("run");
    assert!(out.iter().all(|r| r.allowed), "{out:?}");
    sluice::store::Store::run(&store, &checks, &mut out)
        .await
        .expect("run");
    let mut conn = server.conn();
    let mut stored = Vec::new();
    for l in &limits {
        let key = store.state_key(t, l);
        let kind: String = deadpool_redis::redis::cmd("TYPE")
            .arg(&key)
            .query(&mut conn)
            .expect("TYPE");
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
                let v: Vec<String> = server.query(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]);
                // Members are '%d:%d:<nonce>': check the numbers, not the nonce.
                v.into_iter()
                    .map(|m| match m.rfind(':') {
                        Some(i) if m.matches(':').count() == 2 => m[..i].to_owned(),
                        _ => m,
                    })
                    .collect()
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

/// fixed_window, token_bucket and leaky_bucket keep their state in one string ('ws:c',
/// 't:ts:x', 'l:ts:x', all '%d'); a key of another type is an error that writes nothing.
#[tokio::test]
async fn one_string_states_and_foreign_types() {
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
    assert_eq!(get(t, &fw), format!("{t0}:3"));
    assert_eq!(get(t, &tb), format!("7000:{now}:{}", now + 300));
    assert_eq!(get(t, &lb), format!("3000:{now}:{}", now + 300));

    // Any other type under a state key is an error, and nothing is written.
    let odd = tag("odd");
    let key = env.store.state_key(odd, &fw);
    env.server.query::<i64>(&["RPUSH", &key, "x"]);
    let before = env.dbsize();
    let check = sluice::limit::Check {
        tag: odd,
        limits: std::slice::from_ref(&fw),
        cost: 1,
        refund: false,
    };
    let r = env.try_run(&[check]).await;
    assert!(
        matches!(r, Err(sluice::store::StoreError::Backend(_))),
        "{r:?}"
    );
    assert_eq!(env.dbsize(), before);
    let kind: String = env.server.query(&["TYPE", &key]);
    assert_eq!(kind, "list");
}
