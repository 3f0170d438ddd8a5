//! Batched consistency and the store-failure fallback, sluice in process on real
//! redis-server processes: three instances hammering one hot descriptor stay within the
//! README's bound, a hot descriptor costs Redis far less than a call per request, and
//! with `--store-failure-mode local` a Redis killed under traffic costs no error and no hit.
//! The local view measures rates and latencies, so time passes at its real pace here, on a
//! clock that starts where no window ends during a test ([`RunningClock`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

use crate::support::in_process::*;
use crate::support::redis::RedisServer;
use crate::support::sluice::*;

/// Tasks per instance sending back to back.
const TASKS: usize = 4;

fn hot_rule(limit: u64, consistency: &str) -> String {
    format!(
        "domain: b
descriptors:
  - key: hot
    consistency: {consistency}
    rate_limit: {{unit: hour, requests_per_unit: {limit}}}
"
    )
}

#[derive(Default)]
struct Tally {
    sent: AtomicU64,
    ok: AtomicU64,
    over: AtomicU64,
    errors: AtomicU64,
}

/// `TASKS` clients of each instance (one connection each).
async fn clients(instances: &[Server]) -> Vec<Vec<Client>> {
    let mut out = Vec::new();
    for s in instances {
        let mut v = Vec::new();
        for _ in 0..TASKS {
            v.push(s.client().await);
        }
        out.push(v);
    }
    out
}

/// One task per client, each sending `per_task` requests (or until `stop`) on the hot
/// descriptor. Returns the tally per instance and how long it took.
async fn hammer(
    instances: Vec<Vec<Client>>,
    per_task: u64,
    stop: Option<Arc<AtomicBool>>,
) -> (Vec<Arc<Tally>>, Duration) {
    let started = Instant::now();
    let mut tallies = Vec::new();
    let mut tasks = Vec::new();
    for clients in instances {
        let tally = Arc::new(Tally::default());
        tallies.push(tally.clone());
        for mut c in clients {
            let tally = tally.clone();
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..per_task {
                    if stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
                        break;
                    }
                    tally.sent.fetch_add(1, Ordering::Relaxed);
                    match c
                        .should_rate_limit(req("b", vec![desc(&[("hot", "x")])]))
                        .await
                    {
                        Ok(r) if r.get_ref().overall_code == Code::Ok as i32 => {
                            tally.ok.fetch_add(1, Ordering::Relaxed)
                        }
                        Ok(_) => tally.over.fetch_add(1, Ordering::Relaxed),
                        Err(_) => tally.errors.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }));
        }
    }
    for t in tasks {
        t.await.expect("task");
    }
    (tallies, started.elapsed())
}

fn sum(t: &[Arc<Tally>], f: impl Fn(&Tally) -> &AtomicU64) -> u64 {
    t.iter().map(|t| f(t).load(Ordering::Relaxed)).sum()
}

/// The hits Redis holds for the hot descriptor's hourly fixed window (every such key's
/// every field: the one window).
fn stored_hits(redis: &RedisServer) -> u64 {
    let keys: Vec<String> = redis.query(&["KEYS", "*:1:3600:0:0:h"]);
    keys.iter()
        .map(|k| {
            let h: Vec<(String, u64)> = redis.query(&["HGETALL", k]);
            h.iter().map(|(_, n)| n).sum::<u64>()
        })
        .sum()
}

/// An upper bound of the store latency `d`: the smallest histogram bucket holding every
/// store call of the instance.
async fn latency_bound(s: &Server) -> f64 {
    let (_, body) = s.http_get("/metrics").await;
    let count = body
        .lines()
        .find(|l| l.starts_with("sluice_store_latency_seconds_count"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    body.lines()
        .filter(|l| l.starts_with("sluice_store_latency_seconds_bucket"))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let n = l.rsplit(' ').next()?.parse::<f64>().ok()?;
            Some((le.parse::<f64>().unwrap_or(f64::INFINITY), n))
        })
        .find(|(_, n)| *n >= count)
        .map_or(1.0, |(le, _)| le.min(1.0))
}

async fn wait_metric(s: &Server, series: &str, want: f64) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if s.metric(series).await == want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// `n` instances on one Redis, sharing one clock.
async fn instances(redis: &RedisServer, rules: &str, n: usize) -> Vec<Server> {
    let clock = running_clock();
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(
            in_process()
                .file("b.yaml", rules)
                .redis(redis.url())
                .running(clock.clone())
                .start_healthy()
                .await,
        );
    }
    out
}

/// README "Consistency": admitted ≤ L + 2(N−1)·r·(I+d), and the 1.2 × L target.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_on_one_hot_key_stay_within_the_bound() {
    let redis = RedisServer::start();
    let limit = 3000;
    let all = instances(&redis, &hot_rule(limit, "batched"), 3).await;
    // Twice the limit in all.
    let per_task = 2 * limit / (3 * TASKS as u64);
    let (tallies, took) = hammer(clients(&all).await, per_task, None).await;
    let admitted = sum(&tallies, |t| &t.ok);
    let sent = sum(&tallies, |t| &t.sent);
    assert_eq!(sum(&tallies, |t| &t.errors), 0);
    let n = 3.0;
    let r = sent as f64 / n / took.as_secs_f64();
    let mut d: f64 = 0.0;
    for s in &all {
        d = d.max(latency_bound(s).await);
    }
    let i = 0.1;
    let bound = limit as f64 + 2.0 * (n - 1.0) * r * (i + d);
    eprintln!(
        "three instances, limit {limit}: {admitted} admitted of {sent} in {took:?} \
         (r = {r:.0}/s per instance, d ≤ {d}s): bound {bound:.0}, target {}",
        limit * 6 / 5
    );
    assert!(admitted >= limit, "a denial before the limit: {admitted}");
    assert!(admitted as f64 <= bound, "{admitted} > {bound}");
    assert!(admitted * 5 <= limit * 6, "{admitted} > 1.2 × {limit}");
}

/// One hot descriptor through three instances: once warm, Redis sees only the write-backs,
/// at most one per instance per interval whatever the request rate, so at the standard
/// load (BENCHMARKS.md) at most one call per hundred requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hot_key_costs_redis_one_call_per_instance_per_interval() {
    let redis = RedisServer::start();
    let all = instances(&redis, &hot_rule(1_000_000_000, "batched"), 3).await;
    // Warm: each instance has measured the descriptor's rate.
    hammer(clients(&all).await, 100, None).await;
    let calls0 = redis.command_calls("evalsha") + redis.command_calls("eval");
    let (tallies, took) = hammer(clients(&all).await, 1500, None).await;
    let calls = redis.command_calls("evalsha") + redis.command_calls("eval") - calls0;
    let sent = sum(&tallies, |t| &t.sent);
    let per_request = calls as f64 / sent as f64;
    eprintln!(
        "hot key, three instances: {calls} script calls for {sent} requests in {took:?} \
         ({:.0} req/s): {per_request:.4} per request",
        sent as f64 / took.as_secs_f64()
    );
    assert_eq!(sum(&tallies, |t| &t.ok), sent);
    // Every call is a write-back, no more than one per instance per 100 ms tick (plus the
    // one each may have in flight at either end), however many requests came.
    let ticks = (took.as_secs_f64() / 0.1).ceil() as u64 + 2;
    assert!(calls <= 3 * ticks, "{calls} calls in {ticks} ticks");
}

/// `--store-failure-mode local`: Redis frozen, killed under traffic and restarted on its
/// port. No call fails, and once the hits are written back Redis holds exactly the hits
/// admitted (Redis keeps its own across the restart: its append-only file, `appendfsync
/// always`, has every write it answered; with `everysec` it may lose its last second). The outage tests (`outage::*`) take this further: short deadlines,
/// stalls that outlast many of them, kills with calls in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_killed_under_traffic_costs_no_error_and_no_hit() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let s = in_process()
        .file("b.yaml", &hot_rule(1_000_000_000, "strict"))
        .redis(redis.url())
        .running(running_clock())
        .arg("--store-failure-mode=local")
        .start_healthy()
        .await;
    let stop = Arc::new(AtomicBool::new(false));
    let s = [s];
    let traffic = tokio::spawn(hammer(clients(&s).await, u64::MAX, Some(stop.clone())));
    let s = &s[0];
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Frozen first, then killed: the calls in flight at that moment never run; their hits,
    // decided locally, are written back under their ids.
    redis.pause();
    assert!(
        wait_metric(s, "sluice_store_degraded", 1.0).await,
        "never degraded"
    );
    redis.kill();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        s.wait_healthy(Duration::from_secs(1)).await,
        "health stays SERVING"
    );
    redis.restart();
    assert!(
        wait_metric(s, "sluice_store_degraded", 0.0).await,
        "never recovered"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let (tallies, took) = traffic.await.expect("traffic");
    assert!(
        wait_metric(s, "sluice_local_view_unwritten_hits", 0.0).await,
        "hits never written back"
    );
    let (sent, ok) = (sum(&tallies, |t| &t.sent), sum(&tallies, |t| &t.ok));
    let local = s
        .metric("sluice_local_decisions_total{reason=\"store_failure\"}")
        .await;
    eprintln!(
        "outage: {sent} calls in {took:?}, {ok} admitted, {local} decided locally, \
         {} errors; Redis holds {}",
        sum(&tallies, |t| &t.errors),
        stored_hits(&redis)
    );
    assert_eq!(sum(&tallies, |t| &t.errors), 0);
    assert!(local > 0.0, "nothing was decided locally");
    assert_eq!(ok, sent);
    assert_eq!(stored_hits(&redis), ok);
    assert!(s.logs().iter().any(|l| l.contains("deciding locally")));
    assert!(s.logs().iter().any(|l| l.contains("store answers again")));
}
