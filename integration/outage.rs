//! The store-failure fallback through a Redis outage or stall, against real redis-server
//! processes and sluice in process: afterwards the store holds exactly the hits that were
//! admitted (`docs/explanation/consistency.md`), counted from the answers the test received (OK × cost),
//! never from sluice's own metrics. Frozen (`stall`), killed and restarted empty or from its
//! append-only file (`kill`), the view's one key bound (`bound`), and what health and the
//! metrics say meanwhile (`health`). No timing assertion: every wait polls for a condition
//! with a generous deadline. The local view measures rates, so time passes at its real pace,
//! on a clock that starts at the beginning of a day ([`RunningClock`]): no test meets a
//! window's end.
//!
//! Run: `cargo test --test integration outage` (needs `redis-server`).

mod bound;
mod health;
mod kill;
mod overload;
mod stall;
mod table;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice::limit::{LimitSpec, StateTag, Unit};
use sluice::store::redis::{DEFAULT_KEY_PREFIX, state_key};

use crate::support::in_process::*;
use crate::support::redis::RedisServer;
use crate::support::sluice::*;

/// A strict descriptor and a batched one, daily limits no test reaches: every hit is
/// admitted, in the one day window the tests' clock stands in.
const RULES: &str = "domain: o
descriptors:
  - key: hot
    rate_limit: {unit: day, requests_per_unit: 1000000000}
  - key: warm
    consistency: batched
    rate_limit: {unit: day, requests_per_unit: 1000000000}
  - key: new
    rate_limit: {unit: day, requests_per_unit: 100}
";

/// The descriptors every request of the traffic carries.
const TRAFFIC: [(&str, &str); 2] = [("hot", "x"), ("warm", "x")];

/// Clients sending back to back.
const TASKS: usize = 4;

/// A deadline far above anything that works, so a failure is slow but never flaky.
const RECOVERY: Duration = Duration::from_secs(60);

/// sluice with the fallback on, its Redis deadlines short so that a stall outlasts many of
/// them (a write-back's is `--redis-connect-timeout` + `--redis-timeout`).
async fn start(redis: &RedisServer, extra: &[&str]) -> Server {
    start_mode(redis, "local", extra).await
}

/// [`start`] with `--store-failure-mode <mode>`.
async fn start_mode(redis: &RedisServer, mode: &str, extra: &[&str]) -> Server {
    in_process()
        .file("o.yaml", RULES)
        .running(running_clock())
        .args(["--redis-url", &redis.url()])
        .args(["--redis-timeout", "100ms"])
        .args(["--redis-connect-timeout", "200ms"])
        .args(["--store-failure-mode", mode])
        .args(extra.iter().copied())
        .start_healthy()
        .await
}

/// What the clients got: per descriptor of [`TRAFFIC`], the hits answered OK; and errors.
#[derive(Default)]
pub struct Tally {
    ok: [AtomicU64; 2],
    sent: AtomicU64,
    errors: AtomicU64,
}

impl Tally {
    fn ok(&self, i: usize) -> u64 {
        self.ok[i].load(Ordering::Relaxed)
    }
}

/// Traffic until stopped: [`TASKS`] clients, each request both descriptors of [`TRAFFIC`].
pub struct Traffic {
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Traffic {
    async fn start(s: &Server) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let mut c = s.client().await;
            let (stop, tally) = (stop.clone(), tally.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    tally.sent.fetch_add(1, Ordering::Relaxed);
                    let descriptors = TRAFFIC.iter().map(|d| desc(&[*d])).collect();
                    match c.should_rate_limit(req("o", descriptors)).await {
                        Ok(r) => {
                            for (i, st) in r.get_ref().statuses.iter().enumerate().take(2) {
                                if st.code == Code::Ok as i32 {
                                    tally.ok[i].fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        Err(_) => {
                            tally.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
        Traffic { stop, tally, tasks }
    }

    /// Stop, and wait for every answer.
    async fn stop(self) -> Arc<Tally> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.expect("client task");
        }
        self.tally
    }

    fn sent(&self) -> u64 {
        self.tally.sent.load(Ordering::Relaxed)
    }
}

/// The count Redis holds for `entry` of domain `o` (its daily fixed window: every field of
/// its hash, the one window).
pub fn stored(redis: &RedisServer, entry: (&str, &str), limit: u64) -> u64 {
    let tag = StateTag::compute("o", [entry]);
    let key = state_key(
        DEFAULT_KEY_PREFIX,
        tag,
        &LimitSpec::fixed_window(limit, Unit::Day),
    );
    let h: Vec<(String, u64)> = redis.query(&["HGETALL", &key]);
    h.iter().map(|(_, n)| n).sum()
}

/// Wait until `series` reads `want` (polled).
pub async fn wait_metric(s: &Server, series: &str, want: f64) -> bool {
    wait_for(|| async { s.metric(series).await == want }).await
}

/// Wait until `cond` holds, polling, within [`RECOVERY`].
pub async fn wait_for<F, Fut>(cond: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + RECOVERY;
    while Instant::now() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// Wait until traffic has made `n` more calls (a busy machine may take a while).
async fn more_calls(t: &Traffic, n: u64) {
    let from = t.sent();
    assert!(
        wait_for(|| async { t.sent() >= from + n }).await,
        "traffic stalled at {}",
        t.sent()
    );
}

/// The store answers again: decisions went back to it.
async fn recovered(s: &Server) {
    assert!(
        wait_metric(s, "sluice_store_degraded", 0.0).await,
        "never left the degraded state: {:?}",
        s.logs()
    );
}

/// After the store is back and traffic stopped: nothing left to write, nothing degraded.
async fn settled(s: &Server) {
    recovered(s).await;
    assert!(
        wait_metric(s, "sluice_local_view_unwritten_hits", 0.0).await,
        "hits never written back"
    );
}

/// What every outage scenario shares, from the moment Redis went away (`errors_before`
/// read just before): with the fallback (`local`), once decisions are local, 200 more
/// calls; the outage lasts `outage`; `end` brings Redis back; once the store answers again,
/// 200 more calls; traffic stops and everything is written back. Then what was admitted
/// and what Redis holds.
async fn through_outage(
    s: &Server,
    redis: &mut RedisServer,
    traffic: Traffic,
    errors_before: f64,
    outage: Duration,
    local: bool,
    end: impl FnOnce(&mut RedisServer),
) -> Outcome {
    if local {
        assert!(
            wait_metric(s, "sluice_store_degraded", 1.0).await,
            "never degraded"
        );
        more_calls(&traffic, 200).await;
    }
    tokio::time::sleep(outage).await;
    end(redis);
    recovered(s).await;
    more_calls(&traffic, 200).await;
    let tally = traffic.stop().await;
    settled(s).await;
    Outcome::read(s, redis, tally, errors_before).await
}

/// What one scenario left: the answers, what Redis holds, the errors counted meanwhile.
#[derive(Debug)]
pub struct Outcome {
    calls: u64,
    /// Hits answered OK: strict descriptor, batched descriptor.
    admitted: (u64, u64),
    held: (u64, u64),
    /// Calls that failed (the fallback answers every one).
    errors: u64,
    /// `sluice_store_errors_total` counted during the scenario.
    store_errors: f64,
    /// What sluice says it did (not what the assertions read, only shown when they fail):
    /// hits written back, and Redis's failed commands.
    #[allow(dead_code)]
    written: f64,
    #[allow(dead_code)]
    script_errors: String,
}

impl Outcome {
    async fn read(
        s: &Server,
        redis: &RedisServer,
        tally: Arc<Tally>,
        errors_before: f64,
    ) -> Outcome {
        Outcome {
            calls: tally.sent.load(Ordering::Relaxed),
            admitted: (tally.ok(0), tally.ok(1)),
            held: (
                stored(redis, TRAFFIC[0], 1_000_000_000),
                stored(redis, TRAFFIC[1], 1_000_000_000),
            ),
            errors: tally.errors.load(Ordering::Relaxed),
            store_errors: store_errors(s).await - errors_before,
            written: s.metric("sluice_batch_written_hits_total").await,
            script_errors: redis
                .query::<String>(&["INFO", "commandstats"])
                .lines()
                .filter(|l| !l.contains("failed_calls=0") || !l.contains("rejected_calls=0"))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// The store errors counted so far, every kind.
async fn store_errors(s: &Server) -> f64 {
    let mut n = 0.0;
    for kind in ["unavailable", "timeout", "backend"] {
        n += s
            .metric(&format!(
                "sluice_store_errors_total{{kind=\"{kind}\",store=\"redis\"}}"
            ))
            .await;
    }
    n
}
