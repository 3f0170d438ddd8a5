//! The quota script (`store/lua/quota.lua`) and the memory store's subscriptions (through
//! `quota::settle`) give the same grants for the same reports: one trace of subscribers
//! joining, reporting varied demand (known or not yet), and leaving, on both, under one clock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sluice::limit::{ManualClock, StateTag};
use sluice::quota::{Grant, Policy};
use sluice::store::Backend;
use sluice::store::memory::MemoryStore;
use sluice::store::quota::{QuotaReport, QuotaStore, Subscriber};
use sluice::store::redis::{RedisConfig, RedisStore, TimeSource};

use crate::support::redis::RedisServer;

#[tokio::test]
async fn the_script_and_the_memory_store_agree() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::starting_now());
    let cfg = RedisConfig {
        url: server.url(),
        time_source: TimeSource::Local,
        request_timeout: Duration::from_secs(5),
        pool_size: 1,
        ..RedisConfig::default()
    };
    let redis = RedisStore::new(cfg, clock.clone()).expect("config");
    assert!(redis.wait_ready(Duration::from_secs(10)).await);
    let redis = Backend::Redis(redis);
    let memory = Backend::Memory(MemoryStore::new(clock.clone()));

    let subs = ["a", "b", "c", "d"];
    let buckets = [
        (StateTag(1), 100u64),
        (StateTag(2), 7),
        (StateTag(3), 4_000_000_000),
        // Budgets past 2^32, to 2^53: the same shares on both.
        (StateTag(4), 30_000_000_000),
        (StateTag(5), 1 << 53),
    ];
    let policy = Policy::new(0.05, 0.1);
    let mut held: HashMap<(usize, usize), u64> = HashMap::new();
    let mut seed: u64 = 0x5eed;
    let mut rand = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for step in 0..400 {
        let s = rand(subs.len() as u64) as usize;
        clock.advance(rand(700));
        if rand(10) == 0 {
            let tags: Vec<StateTag> = buckets.iter().map(|b| b.0).collect();
            memory.leave(subs[s], &tags).await.expect("memory leave");
            redis.leave(subs[s], &tags).await.expect("redis leave");
            held.retain(|(sub, _), _| *sub != s);
            continue;
        }
        let mut reports = Vec::new();
        for (b, &(bucket, limit)) in buckets.iter().enumerate() {
            if rand(3) == 0 {
                continue;
            }
            reports.push(QuotaReport {
                bucket,
                limit,
                demand: [
                    None,
                    Some(0),
                    Some(1),
                    Some(999),
                    Some(3_000),
                    Some(1 << 40),
                ][rand(6) as usize],
                held: held.get(&(s, b)).copied().unwrap_or(0),
            });
        }
        let sub = Subscriber {
            id: subs[s],
            ttl_ms: 2_000,
            policy,
        };
        let (mut m, mut r): (Vec<Grant>, Vec<Grant>) = (Vec::new(), Vec::new());
        memory.report(sub, &reports, &mut m).await.expect("memory");
        redis.report(sub, &reports, &mut r).await.expect("redis");
        assert_eq!(m, r, "step {step}: {reports:?}");
        for (rep, g) in reports.iter().zip(&m) {
            let b = buckets.iter().position(|x| x.0 == rep.bucket).unwrap();
            held.insert((s, b), g.share);
        }
    }
}
