//! A rolling restart behind Envoy: one of two sluice instances is stopped (SIGTERM) under
//! traffic and no check fails. The timeline the defaults are chosen for
//! (docs/how-to/deploy-and-restart.md): health goes NOT_SERVING at once; Envoy's gRPC health
//! check, as `examples/envoy.yaml` configures it, takes the instance out of the cluster
//! within interval × unhealthy_threshold; the instance keeps answering for its shutdown delay,
//! which is longer; then it closes its listener, lets the checks in flight finish, and exits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::support::delay_proxy::DelayProxy;
use crate::support::envoy::{Front, Rls, RunningFront};
use crate::support::example_bootstrap;
use crate::support::redis::RedisServer;

use super::setup::{self, WITHIN};

/// A limit no test reaches: every check goes to Redis and answers OK, so anything but a 200
/// is a failed check (`failure_mode_deny`: Envoy answers 500 when sluice does not).
fn rules() -> String {
    setup::rules("unit: second, requests_per_unit: 1000000")
}

/// `examples/envoy.yaml`'s cluster for sluice, without its endpoints: its health check,
/// circuit breakers, HTTP/2 options and load balancing, as a user copies them.
fn example_rls_cluster() -> Value {
    let bootstrap = example_bootstrap::read("examples/envoy.yaml");
    let mut c = example_bootstrap::cluster(&bootstrap, "rate_limit_cluster").clone();
    let fields = c.as_object_mut().expect("a cluster is an object");
    fields.remove("name");
    fields.remove("load_assignment");
    assert!(
        fields.contains_key("health_checks"),
        "examples/envoy.yaml: the sluice cluster has a health check"
    );
    c
}

/// HTTP clients sending requests through Envoy one after another until stopped, counting
/// the answers by status.
struct Clients {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Vec<u16>>>,
}

impl Clients {
    fn start(front: &Arc<RunningFront>, n: usize) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let tasks = (0..n)
            .map(|_| {
                let (front, stop, ok, failed) =
                    (front.clone(), stop.clone(), ok.clone(), failed.clone());
                tokio::spawn(async move {
                    let mut other = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let status = front.get("/", &[]).await.status;
                        if status == 200 {
                            ok.fetch_add(1, Ordering::Relaxed);
                        } else {
                            failed.fetch_add(1, Ordering::Relaxed);
                            other.push(status);
                        }
                    }
                    other
                })
            })
            .collect();
        Clients {
            stop,
            ok,
            failed,
            tasks,
        }
    }

    fn answered(&self) -> u64 {
        self.ok.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed)
    }

    /// Wait until `n` more requests than now have been answered.
    async fn run_for(&self, n: u64) {
        let target = self.answered() + n;
        let deadline = tokio::time::Instant::now() + WITHIN;
        while self.answered() < target {
            assert!(
                tokio::time::Instant::now() < deadline,
                "clients stalled at {} answers",
                self.answered()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stop; (200s, the other statuses).
    async fn stop(self) -> (u64, Vec<u16>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut other = Vec::new();
        for t in self.tasks {
            other.extend(t.await.expect("client task"));
        }
        (self.ok.load(Ordering::Relaxed), other)
    }
}

/// Two instances on one Redis behind one Envoy cluster with the example's health check,
/// four clients, `failure_mode_deny`: one instance is stopped with sluice's default shutdown
/// settings and exits, and not one check fails. Envoy has marked the instance unhealthy
/// while it was still serving (so the delay, not luck, covered the health check), and the
/// other instance serves everything afterwards.
#[tokio::test]
async fn sigterm_to_one_of_two_instances_fails_no_check() {
    let redis = RedisServer::start();
    let start = || {
        setup::serving(&rules())
            .args(["--redis-url", &redis.url()])
            .start_healthy()
    };
    let mut stopping = start().await;
    let staying = start().await;
    let mut front =
        Front::new("front", Rls::Tcp(vec![stopping.grpc, staying.grpc])).deny_on_failure();
    front.cluster_extra = example_rls_cluster();
    let front = Arc::new(front.start().await);
    assert!(
        front.envoy.wait_healthy("rls", 2, WITHIN).await,
        "both instances healthy in Envoy: {:?}",
        front.envoy.health_flags("rls").await
    );

    let clients = Clients::start(&front, 4);
    clients.run_for(40).await;
    stopping.signal("TERM");
    let host = stopping.grpc.to_string();
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let flags = front.envoy.health_flags("rls").await;
        let marked = flags
            .iter()
            .any(|(h, f)| *h == host && f.contains("failed_active_hc"));
        if marked {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Envoy never marked the stopping instance unhealthy: {flags:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        tokio::net::TcpStream::connect(stopping.grpc).await.is_ok(),
        "the instance's listener was still open when Envoy took it out (its shutdown delay \
         covers the example's health check)"
    );
    let status = stopping.wait_exit(WITHIN).await.expect("exited");
    assert!(status.success(), "{status}");
    clients.run_for(40).await;
    let (ok, other) = clients.stop().await;
    eprintln!(
        "rolling restart: {ok} checks answered OK, {} failed",
        other.len()
    );
    let mut by_status = std::collections::BTreeMap::<u16, usize>::new();
    for s in &other {
        *by_status.entry(*s).or_default() += 1;
    }
    assert!(
        other.is_empty(),
        "{} of {} checks failed during the restart (status: count) {by_status:?}\n{}",
        other.len(),
        ok as usize + other.len(),
        front.envoy.log()
    );
    assert_eq!(
        front
            .envoy
            .stat("cluster.upstream.ratelimit.error")
            .await
            .unwrap_or(0),
        0
    );
}

/// How long Redis replies are held in the drain test: long enough that the checks are still
/// in flight after the signal has been sent and the listener seen closed (a few steps of the
/// test), short enough that sluice does not give the connection up as silent (2 s).
const HELD: Duration = Duration::from_millis(1200);

/// The drain itself: checks in flight on the stopping instance when it closes its listener
/// are answered, not cut. Each check is held in a slow Redis; Envoy has them all outstanding
/// when SIGTERM is sent; the listener closes while they still are (its shutdown delay is 0
/// here: the delay is the test above's subject, and no Redis reply can be held across 5 s);
/// every one gets its 200 and the process then exits cleanly.
#[tokio::test]
async fn checks_in_flight_when_the_listener_closes_are_answered() {
    const CHECKS: u64 = 6;
    let redis = RedisServer::start();
    let slow = DelayProxy::start(format!("127.0.0.1:{}", redis.port())).await;
    let mut s = setup::serving(&rules())
        .args(["--redis-url", &slow.url(), "--shutdown-delay", "0s"])
        .start_healthy()
        .await;
    let mut front = setup::front_asking(&s).deny_on_failure();
    // Envoy's deadline (its grpc-timeout) well past the held replies.
    front.timeout = Duration::from_secs(10);
    let front = Arc::new(front.start().await);
    assert_eq!(front.get("/", &[]).await.status, 200);

    slow.set_delay(HELD);
    let requests: Vec<_> = (0..CHECKS)
        .map(|_| {
            let front = front.clone();
            tokio::spawn(async move { front.get("/", &[]).await.status })
        })
        .collect();
    let active = "cluster.rls.upstream_rq_active";
    assert_eq!(
        front.envoy.wait_stat(active, CHECKS, WITHIN).await,
        CHECKS,
        "every check outstanding at sluice"
    );
    s.signal("TERM");
    let deadline = tokio::time::Instant::now() + WITHIN;
    while tokio::net::TcpStream::connect(s.grpc).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the listener never closed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let in_flight_at_close = front.envoy.stat(active).await;
    let mut statuses = Vec::new();
    for r in requests {
        statuses.push(r.await.expect("request task"));
    }
    assert_eq!(
        statuses,
        vec![200; CHECKS as usize],
        "every check in flight at the drain answered\n{}",
        front.envoy.log()
    );
    assert_eq!(
        in_flight_at_close,
        Some(CHECKS),
        "the checks were still in flight when the listener closed (held {HELD:?} in Redis): \
         otherwise this test showed nothing"
    );
    let status = s.wait_exit(WITHIN).await.expect("exited after the drain");
    assert!(status.success(), "{status}");
    assert_eq!(
        front
            .envoy
            .stat("cluster.rls.upstream_cx_destroy_remote_with_active_rq")
            .await
            .unwrap_or(0),
        0,
        "sluice closed no connection with a check on it"
    );
}
