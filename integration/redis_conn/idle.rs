//! A dead Redis is noticed without traffic: when no connection of the store has heard from
//! Redis for a second, the health refresher pings each (none while requests flow), so
//! `/healthcheck` and gRPC health go NOT_SERVING soon after Redis is killed with no request
//! in flight, the connection gauge (the pool's count) drops to 0, and all of it comes back
//! once Redis does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tonic_health::pb::health_check_response::ServingStatus;

use crate::support::health::grpc_health;
use crate::support::redis::RedisServer;
use crate::support::sluice::{Sluice, call, desc, req, sluice};

const RULES: &str = "\
domain: idle
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
";

/// Generous bounds for the shared test machine; the times taken are printed. Without the
/// pings, health stayed SERVING for as long as nothing was sent.
const NOTICED_WITHIN: Duration = Duration::from_secs(10);

/// `/healthcheck` and gRPC health (`""`), until both say `serving`, within `within`.
async fn wait_health(s: &Sluice, serving: bool, within: Duration, what: &str) -> Duration {
    let started = Instant::now();
    let (code, status) = if serving {
        (200, ServingStatus::Serving)
    } else {
        (500, ServingStatus::NotServing)
    };
    loop {
        if s.http_get("/healthcheck").await.0 == code
            && grpc_health(s.channel().await, "").await == status
        {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "health never {status:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_metric(s: &Sluice, series: &str, want: f64, what: &str) {
    let deadline = Instant::now() + NOTICED_WITHIN;
    while s.metric(series).await != want {
        assert!(Instant::now() < deadline, "{series} never {want}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_store_sees_redis_go_and_come_back_and_a_busy_one_is_not_pinged() {
    let mut redis = RedisServer::start();
    let s = sluice()
        .file("idle.yaml", RULES)
        .arg("--redis-url")
        .arg(redis.url())
        .start_healthy()
        .await;
    let connections = "sluice_store_connections{store=\"redis\"}";
    wait_metric(&s, connections, 4.0, "the pool filled").await;
    let c = s.client().await;
    let one = || req("idle", vec![desc(&[("k", "v")])]);

    // Busy: while requests flow, no connection is pinged.
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (mut c, stop) = (c.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    call(&mut c, one()).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pings = redis.command_calls("ping");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        redis.command_calls("ping"),
        pings,
        "a busy store was pinged"
    );
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.expect("load");
    }

    // Idle: pinged.
    let deadline = Instant::now() + NOTICED_WITHIN;
    while redis.command_calls("ping") == pings {
        assert!(Instant::now() < deadline, "an idle store was never pinged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Killed while idle: nothing is sent, and health says so all the same.
    redis.kill();
    let took = wait_health(&s, false, NOTICED_WITHIN, "Redis killed, no traffic").await;
    eprintln!("NOT_SERVING {took:?} after Redis was killed");
    wait_metric(&s, connections, 0.0, "Redis killed").await;

    redis.restart();
    let took = wait_health(&s, true, NOTICED_WITHIN, "Redis back").await;
    eprintln!("SERVING {took:?} after Redis came back");
    wait_metric(&s, connections, 4.0, "Redis back").await;
    let mut c = c.clone();
    call(&mut c, one()).await;
}
