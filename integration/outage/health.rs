//! Health with the fallback on: NOT_SERVING until Redis has been reachable once (a readiness
//! probe keeps a misconfigured instance out of rotation), SERVING through a later outage
//! (decisions are local) unless `--unhealthy-when-degraded`; gRPC health and `/healthcheck`
//! say the same throughout (one source).

use tonic_health::pb::health_check_response::ServingStatus;

use super::*;
use crate::support::health::grpc_health;
use crate::support::redis::free_port;

/// `/healthcheck` (which publishes the state as it is now), then gRPC health (`""` and
/// `ratelimit`) right after: serving or not, each.
async fn health(s: &Server) -> [bool; 3] {
    let http = s.http_get("/healthcheck").await.0 == 200;
    let channel = s.channel().await;
    let mut out = [http, false, false];
    for (i, service) in ["", "ratelimit"].into_iter().enumerate() {
        out[i + 1] = grpc_health(channel.clone(), service).await == ServingStatus::Serving;
    }
    out
}

/// Health while it is not changing: `/healthcheck` and gRPC health agree.
async fn steady(s: &Server) -> bool {
    let h = health(s).await;
    assert_eq!(h, [h[0]; 3], "gRPC health and /healthcheck disagree");
    h[0]
}

async fn wait_health(s: &Server, want: bool) -> bool {
    wait_for(|| async { health(s).await == [want; 3] }).await
}

async fn answered(s: &Server) -> bool {
    let mut c = s.client().await;
    let r = call(&mut c, req("o", vec![desc(&[("hot", "h")])])).await;
    r.overall_code == Code::Ok as i32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_serving_until_redis_was_reachable_then_serving_through_an_outage() {
    let port = free_port();
    let s = in_process()
        .file("o.yaml", RULES)
        .running(running_clock())
        .args(["--redis-url", &format!("redis://127.0.0.1:{port}/")])
        .args([
            "--redis-timeout",
            "100ms",
            "--redis-connect-timeout",
            "200ms",
        ])
        .arg("--store-failure-mode=local")
        .start()
        .await;
    // Never reachable: requests are answered locally, health says NOT_SERVING.
    assert!(answered(&s).await);
    assert!(
        !steady(&s).await,
        "NOT_SERVING before Redis was ever reachable"
    );
    assert_eq!(s.metric("sluice_store_degraded").await, 1.0);
    let mut redis = RedisServer::start_on(port);
    assert!(wait_health(&s, true).await, "SERVING once Redis answers");
    redis.kill();
    assert!(answered(&s).await);
    assert!(
        wait_metric(&s, "sluice_store_degraded", 1.0).await,
        "degraded once Redis went"
    );
    // Decisions are local; health stays SERVING (read a few times over the outage).
    for _ in 0..10 {
        assert!(
            steady(&s).await,
            "SERVING through an outage with the fallback"
        );
        assert!(answered(&s).await);
    }
    redis.restart();
    assert!(
        wait_metric(&s, "sluice_store_degraded", 0.0).await,
        "recovered"
    );
    assert!(wait_health(&s, true).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unhealthy_when_degraded_turns_both_at_once() {
    let mut redis = RedisServer::start();
    let s = start(&redis, &["--unhealthy-when-degraded"]).await;
    assert!(steady(&s).await);
    redis.kill();
    assert!(answered(&s).await);
    assert_eq!(s.metric("sluice_store_degraded").await, 1.0);
    assert!(wait_health(&s, false).await, "NOT_SERVING while degraded");
    redis.restart();
    assert!(
        wait_health(&s, true).await,
        "SERVING once the store answers"
    );
}
