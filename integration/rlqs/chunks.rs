//! A report batch on Redis is settled in calls of a bounded number of buckets
//! (`src/store/redis/quota.rs`), so calls of concurrent reports interleave. These tests hold
//! the claim that this changes nothing the shares promise: whatever the order of the calls,
//! each bucket's shares sum to at most its limit, and each call answers what the memory store
//! (one lock per bucket settlement, `quota::settle`) answers for the same buckets in the
//! same order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sluice::limit::{Clock, ManualClock, StateTag};
use sluice::quota::{Grant, Policy};
use sluice::store::Backend;
use sluice::store::memory::MemoryStore;
use sluice::store::quota::{QuotaReport, QuotaStore, Subscriber};
use sluice::store::redis::{
    DEFAULT_KEY_PREFIX, QUOTA_BUCKETS_PER_CALL, RedisConfig, RedisStore, TimeSource, quota_key,
};

use crate::support::redis::{RedisCluster, RedisServer};

/// A subscription lifetime no test outlives: every recorded share is live.
const TTL_MS: u64 = 3_600_000;

async fn replica(server: &RedisServer, clock: Arc<ManualClock>) -> RedisStore {
    let cfg = RedisConfig {
        url: server.url(),
        time_source: TimeSource::Local,
        request_timeout: Duration::from_secs(5),
        pool_size: 1,
        ..RedisConfig::default()
    };
    let store = RedisStore::new(cfg, clock).expect("config");
    assert!(store.wait_ready(Duration::from_secs(10)).await);
    store
}

/// A deterministic generator (the test's seed is fixed).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// The shares recorded in Redis for `tag` (every `a:<subscriber>` field), summed.
fn recorded(server: &RedisServer, tag: StateTag) -> u64 {
    let fields: HashMap<String, String> =
        server.query(&["HGETALL", &quota_key(DEFAULT_KEY_PREFIX, tag)]);
    fields
        .iter()
        .filter(|(f, _)| f.starts_with("a:"))
        .map(|(_, v)| v.parse::<u64>().expect("a share"))
        .sum()
}

/// The share Redis records for subscriber `id` in bucket `tag`.
fn recorded_by(server: &RedisServer, tag: StateTag, id: &str) -> u64 {
    let fields: HashMap<String, String> =
        server.query(&["HGETALL", &quota_key(DEFAULT_KEY_PREFIX, tag)]);
    fields
        .get(&format!("a:{id}"))
        .map_or(0, |v| v.parse().expect("a share"))
}

fn sub(id: &str) -> Subscriber<'_> {
    Subscriber {
        id,
        ttl_ms: TTL_MS,
        policy: Policy::new(0.05, 0.1),
    }
}

/// Rounds of reports by five subscribers on two replicas (skewed clocks), each report cut
/// into the calls the store makes of it, and the calls of every report of a round run in a
/// random order (not even a report's own in order: a call cut short by its work budget
/// finishes after later ones). After every call, each bucket's shares sum to at most its
/// limit, in what the subscribers were granted and in what Redis records; and each call's
/// grants are the memory store's for the same buckets in the same order.
#[tokio::test]
async fn calls_of_concurrent_reports_in_any_order_never_over_assign() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::starting_now());
    let replicas = [
        Backend::Redis(replica(&server, clock.clone()).await),
        Backend::Redis(replica(&server, clock.clone()).await),
    ];
    let memory = Backend::Memory(MemoryStore::new(clock.clone()));
    let subs = ["one:a", "one:b", "two:c", "two:d", "two:e"];
    // Two full calls and a partial one, limits from tiny (everyone at the floor or 0) to large.
    let buckets: Vec<(StateTag, u64)> = (0..2 * QUOTA_BUCKETS_PER_CALL + 5)
        .map(|i| (StateTag(7_000 + i as u128), [1, 7, 100, 4_000][i % 4]))
        .collect();
    let limit_of: HashMap<StateTag, u64> = buckets.iter().copied().collect();
    let mut held: HashMap<(usize, StateTag), u64> = HashMap::new();
    let mut rng = Rng(0x0c0ffee);
    let t0 = clock.now_ms();
    let mut calls = 0;
    for round in 0..40u64 {
        // Each subscriber's report of this round: its instant and its calls.
        let mut runs: Vec<(usize, u64, Vec<QuotaReport>)> = Vec::new();
        for s in 0..subs.len() {
            if rng.below(5) == 0 {
                continue;
            }
            if rng.below(12) == 0 {
                let tags: Vec<StateTag> = buckets.iter().map(|b| b.0).collect();
                replicas[s % 2].leave(subs[s], &tags).await.expect("leave");
                memory.leave(subs[s], &tags).await.expect("memory leave");
                held.retain(|(x, _), _| *x != s);
                continue;
            }
            let now = t0 + round * 1_500 + rng.below(1_000);
            let mut reports = Vec::new();
            for &(bucket, limit) in &buckets {
                if rng.below(6) == 0 {
                    continue;
                }
                reports.push(QuotaReport {
                    bucket,
                    limit,
                    demand: [None, Some(0), Some(1), Some(500), Some(2_000), Some(90_000)]
                        [rng.below(6) as usize],
                    held: held.get(&(s, bucket)).copied().unwrap_or(0),
                });
            }
            for call in reports.chunks(QUOTA_BUCKETS_PER_CALL) {
                runs.push((s, now, call.to_vec()));
            }
        }
        while !runs.is_empty() {
            let (s, now, call) = runs.swap_remove(rng.below(runs.len() as u64) as usize);
            clock.set(now);
            let (mut r, mut m): (Vec<Grant>, Vec<Grant>) = (Vec::new(), Vec::new());
            replicas[s % 2]
                .report(sub(subs[s]), &call, &mut r)
                .await
                .expect("redis");
            memory
                .report(sub(subs[s]), &call, &mut m)
                .await
                .expect("memory");
            calls += 1;
            for (rep, g) in call.iter().zip(&r) {
                held.insert((s, rep.bucket), g.share);
                let limit = limit_of[&rep.bucket];
                let granted: u64 = (0..subs.len())
                    .filter_map(|x| held.get(&(x, rep.bucket)))
                    .sum();
                assert!(
                    granted <= limit,
                    "round {round}: {granted} granted of {limit}"
                );
                let stored = recorded(&server, rep.bucket);
                assert!(
                    stored <= limit,
                    "round {round}: {stored} recorded of {limit}"
                );
            }
            assert_eq!(r, m, "round {round}, {}: {call:?}", subs[s]);
        }
    }
    assert!(calls > 300, "{calls} calls");
}

/// Reports of 300 buckets by eight subscribers on two replicas, all at once, three times:
/// every bucket has eight subscribers, so a call stops at its work budget before its 16th
/// bucket and the rest of it goes in a further round trip, while the other reports' calls
/// run in between. Every report still gets one grant per bucket, in order, and no bucket's
/// shares sum past its limit.
#[tokio::test]
async fn concurrent_reports_cut_by_the_work_budget_never_over_assign() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::starting_now());
    let replicas = [
        replica(&server, clock.clone()).await,
        replica(&server, clock.clone()).await,
    ];
    let subs: Vec<String> = (0..8).map(|i| format!("r{}:{i}", i % 2)).collect();
    let buckets: Vec<(StateTag, u64)> = (0..300u64)
        .map(|i| (StateTag(9_000 + u128::from(i)), 10 + i * 37))
        .collect();
    let mut held: HashMap<(usize, StateTag), u64> = HashMap::new();
    let mut rng = Rng(0xbadcafe);
    for round in 0..3 {
        let reports: Vec<Vec<QuotaReport>> = (0..subs.len())
            .map(|s| {
                buckets
                    .iter()
                    .map(|&(bucket, limit)| QuotaReport {
                        bucket,
                        limit,
                        demand: Some(1 + rng.below(5_000)),
                        held: held.get(&(s, bucket)).copied().unwrap_or(0),
                    })
                    .collect()
            })
            .collect();
        let before = server.command_calls("evalsha");
        let answers = futures::future::join_all(subs.iter().enumerate().map(|(s, id)| {
            let store = &replicas[s % 2];
            let reports = &reports[s];
            async move {
                let mut out = Vec::new();
                store.report(sub(id), reports, &mut out).await.map(|()| out)
            }
        }))
        .await;
        let calls = server.command_calls("evalsha") - before;
        for (s, grants) in answers.into_iter().enumerate() {
            let grants = grants.expect("report");
            assert_eq!(grants.len(), buckets.len());
            for (&(bucket, limit), g) in buckets.iter().zip(&grants) {
                // In order: the grant at a bucket's place is what Redis recorded for it.
                assert_eq!(recorded_by(&server, bucket, &subs[s]), g.share, "in order");
                assert!(g.share <= limit && (1..=subs.len() as u64).contains(&g.subscribers));
                held.insert((s, bucket), g.share);
            }
        }
        for &(bucket, limit) in &buckets {
            let granted: u64 = (0..subs.len()).filter_map(|s| held.get(&(s, bucket))).sum();
            assert!(
                granted <= limit,
                "round {round}: {granted} granted of {limit}"
            );
            assert!(recorded(&server, bucket) <= limit);
        }
        let whole = subs.len() as u64 * buckets.len().div_ceil(QUOTA_BUCKETS_PER_CALL) as u64;
        if round > 0 {
            // Eight subscribers per bucket: more calls than whole chunks (the budget cut them).
            assert!(calls > whole, "{calls} calls for {whole} chunks");
        } else {
            assert!(calls >= whole, "{calls} calls for {whole} chunks");
        }
    }
}

/// `INFO commandstats` for `EVALSHA`: (calls, microseconds).
fn evalsha_stats(server: &RedisServer) -> (u64, u64) {
    let info: String = server.query(&["INFO", "commandstats"]);
    let line = info
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap_or_default();
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(name))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("calls="), field("usec="))
}

/// What a report of 10 000 buckets costs Redis: one script call per 16 buckets (asserted),
/// and the Redis CPU per bucket from `INFO commandstats` (printed: a time, not asserted).
#[tokio::test]
async fn a_report_is_one_call_per_sixteen_buckets() {
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::starting_now());
    let store = replica(&server, clock.clone()).await;
    let n = 10_000;
    let reports: Vec<QuotaReport> = (0..n)
        .map(|i| QuotaReport {
            bucket: StateTag(1 << 40 | i as u128),
            limit: 1_000,
            demand: Some(1_500),
            held: 0,
        })
        .collect();
    // The script's first use answers NOSCRIPT (then loaded and sent again): not counted.
    let mut out = Vec::new();
    let warm = [QuotaReport {
        bucket: StateTag(1),
        ..reports[0]
    }];
    store
        .report(sub("s:warm"), &warm, &mut out)
        .await
        .expect("warm-up");
    for (what, id) in [
        ("new buckets", "s:a"),
        ("a second subscriber", "s:b"),
        ("refreshed (two subscribers)", "s:a"),
    ] {
        server.query::<String>(&["CONFIG", "RESETSTAT"]);
        let mut out = Vec::new();
        store
            .report(sub(id), &reports, &mut out)
            .await
            .expect("report");
        assert_eq!(out.len(), n);
        let (calls, usec) = evalsha_stats(&server);
        eprintln!(
            "{n} buckets, {what}: {calls} script calls, {usec} us in Redis, {:.2} us per bucket",
            usec as f64 / n as f64
        );
        assert_eq!(calls, n.div_ceil(QUOTA_BUCKETS_PER_CALL) as u64);
    }
}

/// On a cluster every bucket is in the `{rlqs}` slot: a report's calls go in one pipeline to
/// that slot's node (the first use of the script there answers `NOSCRIPT`, then it is loaded
/// and the calls sent again), and leaving reaches every bucket.
#[tokio::test]
async fn a_report_on_a_cluster_goes_to_the_node_of_the_rlqs_slot() {
    let cluster = RedisCluster::start(3);
    let cfg = RedisConfig {
        cluster_nodes: cluster.urls(),
        time_source: TimeSource::Local,
        request_timeout: Duration::from_secs(2),
        ..RedisConfig::default()
    };
    let store = RedisStore::new(cfg, Arc::new(ManualClock::starting_now())).expect("config");
    assert!(store.wait_ready(Duration::from_secs(20)).await);
    let n = 3 * QUOTA_BUCKETS_PER_CALL + 1;
    let reports: Vec<QuotaReport> = (0..n)
        .map(|i| QuotaReport {
            bucket: StateTag(5 << 40 | i as u128),
            limit: 10,
            demand: Some(1_000),
            held: 0,
        })
        .collect();
    let node = cluster.node_for(&quota_key(DEFAULT_KEY_PREFIX, reports[0].bucket));
    for id in ["c:a", "c:b"] {
        let mut out = Vec::new();
        store
            .report(sub(id), &reports, &mut out)
            .await
            .expect("report");
        assert_eq!(out.len(), n);
    }
    let calls = node.command_calls("evalsha");
    let chunks = n.div_ceil(QUOTA_BUCKETS_PER_CALL) as u64;
    assert!(
        (2 * chunks..=3 * chunks).contains(&calls),
        "{calls} calls on the slot's node"
    );
    for r in &reports {
        assert!(recorded(node, r.bucket) <= r.limit);
    }
    let tags: Vec<StateTag> = reports.iter().map(|r| r.bucket).collect();
    store.leave("c:a", &tags).await.expect("leave");
    store.leave("c:b", &tags).await.expect("leave");
    for t in tags {
        let fields: HashMap<String, String> =
            node.query(&["HGETALL", &quota_key(DEFAULT_KEY_PREFIX, t)]);
        assert!(fields.keys().all(|f| f == "w" || f == "u"), "{fields:?}");
    }
}
