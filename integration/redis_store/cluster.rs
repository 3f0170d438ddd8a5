//! Redis `TIME` mode and Redis Cluster.

use std::time::Duration;

use sluice::limit::{Algorithm, Clock, LimitSpec, StateTag, SystemClock, Unit};
use sluice::store::redis::{RedisConfig, TimeSource};

use super::ops::checks;
use super::{Env, local_config, run_on, spec, tag};
use crate::support::redis::{RedisCluster, RedisServer};

#[tokio::test]
async fn redis_time_mode_counts_and_retries() {
    let server = RedisServer::start();
    let cfg = RedisConfig {
        time_source: TimeSource::Redis,
        ..local_config(&server)
    };
    // The clock must not be read in TIME mode: a clock stuck at 0 proves it.
    let env = Env::with_config(server, cfg).await;
    env.clock.set(0);
    let fw = spec(Algorithm::FixedWindow, 3, Unit::Hour);
    let t = tag("time");
    for used in 0..3 {
        let r = env.hit1(t, &fw, 1).await;
        assert!(
            r.allowed && r.used_before == used && r.reset_ms <= 3_600_000,
            "{r:?}"
        );
    }
    let r = env.hit1(t, &fw, 1).await;
    assert!(
        !r.allowed && r.retry_ms.is_some_and(|ms| ms > 0 && ms <= 3_600_000),
        "{r:?}"
    );
    let (w, _) = env.fixed_window_state(t, &fw).expect("window state");
    let real = SystemClock.now_ms();
    assert!(
        w <= real && real - w <= 3_600_000,
        "window start from TIME: {w} vs {real}"
    );

    let tb = LimitSpec {
        burst: 2,
        ..spec(Algorithm::TokenBucket, 10, Unit::Second)
    };
    assert!(env.hit1(t, &tb, 2).await.allowed);
    let r = env.hit1(t, &tb, 1).await;
    assert!(
        !r.allowed && r.retry_ms.is_some_and(|ms| (1..=100).contains(&ms)),
        "{r:?}"
    );
    tokio::time::sleep(Duration::from_millis(r.retry_ms.unwrap_or(100) + 5)).await;
    assert!(
        env.hit1(t, &tb, 1).await.allowed,
        "refilled after the retry time"
    );
}

#[tokio::test]
async fn cluster_checks_on_different_slots_in_one_run() {
    let cluster = RedisCluster::start(3);
    let store = super::cluster_store(&cluster).await;
    let limits = [
        spec(Algorithm::SlidingLog, 2, Unit::Minute),
        LimitSpec {
            slot: 1,
            ..spec(Algorithm::Gcra, 2, Unit::Minute)
        },
    ];
    let tags: Vec<StateTag> = (0..24).map(|i| tag(&format!("c{i}"))).collect();
    let run = |expect_used: u64| {
        let store = &store;
        let checks = checks(&tags, &limits);
        async move {
            let out = run_on(store, &checks, "cluster run").await;
            assert_eq!(out.len(), 48);
            assert!(
                out.iter()
                    .all(|r| r.allowed && r.used_before == expect_used),
                "{out:?}"
            );
        }
    };
    run(0).await;
    // The checks really spread over the nodes, and each check's keys share one slot.
    let holding = cluster.nodes_holding_keys();
    assert!(holding >= 2, "keys on {holding} node(s)");
    for t in &tags {
        let keys: Vec<String> = limits.iter().map(|l| store.state_key(*t, l)).collect();
        let slot: i64 = cluster.nodes[0].query(&["CLUSTER", "KEYSLOT", &keys[0]]);
        let node = cluster.node_for(&keys[0]);
        for k in &keys {
            assert_eq!(
                cluster.nodes[0].query::<i64>(&["CLUSTER", "KEYSLOT", k]),
                slot
            );
            assert_eq!(
                node.query::<i64>(&["EXISTS", k]),
                1,
                "{k} on its slot's node"
            );
        }
    }
    // Script lost everywhere: each call reloads it on its node.
    for n in &cluster.nodes {
        let _: () = n.query(&["SCRIPT", "FLUSH"]);
    }
    run(1).await;
}
