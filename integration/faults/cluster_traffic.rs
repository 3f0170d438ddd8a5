//! The traffic the cluster fault tests send through sluice (in process), and how they
//! read it back: each worker owns one descriptor value and sends requests one after
//! another, so every answer says exactly how many hits its key holds (a daily limit nobody
//! reaches; `limit_remaining` gives the count after the hit).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use parking_lot::Mutex;
use sluice::limit::StateTag;

use crate::support::fault_cluster::FaultCluster;
use crate::support::in_process::{Server, in_process};
use crate::support::sluice::{call, desc, desc_hits, req};

pub(super) const DOMAIN: &str = "cf";
/// A daily limit nobody reaches: the answers are pure counts.
pub(super) const LIMIT: u64 = 1_000_000_000;
pub(super) const WORKERS: usize = 12;

/// One answer: when the call was sent and came back, and the count after it (or the code).
#[derive(Clone, Debug)]
pub(super) struct Answer {
    pub sent: Instant,
    pub done: Instant,
    pub result: Result<u64, tonic::Code>,
    /// The error's message, for the failure report.
    pub message: String,
}

pub(super) struct Traffic {
    stop: Arc<AtomicBool>,
    answers: Vec<Arc<Mutex<Vec<Answer>>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

pub(super) fn value(worker: usize) -> String {
    format!("w{worker}")
}

/// The hash tag of worker `w`'s key (how the tests find it in the cluster).
pub(super) fn tag(key: &str, worker: usize) -> String {
    format!(
        "{{{}}}",
        StateTag::compute(DOMAIN, [(key, value(worker))]).to_base64url()
    )
}

/// sluice in process on the cluster, on the injected clock (`--redis-time-source local`):
/// every count a test reads is in the day window it started in.
pub(super) async fn start_sluice(cluster: &FaultCluster) -> Server {
    in_process()
        .file(
            "cf.yaml",
            &format!(
                "domain: {DOMAIN}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: day, requests_per_unit: {LIMIT}}}\n  \
                 - key: m\n    rate_limits:\n      - {{unit: day, requests_per_unit: {LIMIT}}}\n      \
                 - {{unit: day, requests_per_unit: {LIMIT}, name: second}}\n"
            ),
        )
        .env("REDIS_TYPE", "cluster")
        .env("REDIS_URL", cluster.urls().join(","))
        // Generous: a timeout on a loaded machine would blur the counts.
        .args(["--redis-timeout", "1s"])
        .start_healthy()
        .await
}

impl Traffic {
    /// Every worker sends requests for its own value of descriptor key `key`.
    pub(super) async fn start(s: &Server, key: &'static str) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let mut answers = Vec::new();
        let mut tasks = Vec::new();
        for w in 0..WORKERS {
            let log = Arc::new(Mutex::new(Vec::new()));
            answers.push(log.clone());
            let stop = stop.clone();
            let mut c = s.client().await;
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let r = c
                        .should_rate_limit(req(DOMAIN, vec![desc(&[(key, &value(w))])]))
                        .await;
                    let mut message = String::new();
                    let result = match r {
                        Ok(r) => {
                            let r = r.into_inner();
                            assert_eq!(r.overall_code, Code::Ok as i32);
                            Ok(LIMIT - u64::from(r.statuses[0].limit_remaining))
                        }
                        Err(e) => {
                            message = e.message().to_owned();
                            Err(e.code())
                        }
                    };
                    log.lock().push(Answer {
                        sent,
                        done: Instant::now(),
                        result,
                        message,
                    });
                    // Continuous traffic, not a busy loop on a machine shared with the
                    // servers and the rest of the suite.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }));
        }
        Traffic {
            stop,
            answers,
            tasks,
        }
    }

    fn ok_count(&self, w: usize) -> usize {
        self.answers[w]
            .lock()
            .iter()
            .filter(|a| a.result.is_ok())
            .count()
    }

    /// Wait until every worker has `n` more OK answers than now.
    pub(super) async fn wait_ok(&self, n: usize, s: &Server) {
        let base: Vec<usize> = (0..WORKERS).map(|w| self.ok_count(w)).collect();
        let deadline = Instant::now() + Duration::from_secs(30);
        while (0..WORKERS).any(|w| self.ok_count(w) < base[w] + n) {
            assert!(
                Instant::now() < deadline,
                "traffic stalled: {:?}\n{:?}",
                (0..WORKERS).map(|w| self.ok_count(w)).collect::<Vec<_>>(),
                s.logs().iter().rev().take(20).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(super) async fn stop(self) -> Vec<Vec<Answer>> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.expect("worker");
        }
        self.answers
            .into_iter()
            .map(|a| std::mem::take(&mut *a.lock()))
            .collect()
    }
}

/// The count each key holds now, read through sluice without a hit (`hits_addend: 0`).
pub(super) async fn counts(s: &Server, key: &str) -> Vec<u64> {
    let mut c = s.client().await;
    let mut out = Vec::new();
    for w in 0..WORKERS {
        let r = call(&mut c, req(DOMAIN, vec![desc_hits(&[(key, &value(w))], 0)])).await;
        out.push(LIMIT - u64::from(r.statuses[0].limit_remaining));
    }
    out
}

/// The node holding each worker's key (after traffic created them).
pub(super) fn homes(cluster: &FaultCluster, key: &str) -> Vec<(usize, String)> {
    (0..WORKERS)
        .map(|w| {
            let found = cluster.keys_matching(&tag(key, w));
            assert!(!found.is_empty(), "worker {w}'s key: {found:?}");
            found.into_iter().next().expect("one key")
        })
        .collect()
}
