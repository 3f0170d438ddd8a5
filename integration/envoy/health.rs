//! Envoy's gRPC health check of the RLS cluster (`service_name: ratelimit`): healthy while
//! sluice serves, failed while sluice reports NOT_SERVING (its Redis store down, with the
//! default `--store-failure-mode error`), healthy again when Redis is back.

use std::time::Duration;

use crate::support::redis::RedisServer;

use super::setup::{self, WITHIN};

fn rules() -> String {
    setup::rules("unit: minute, requests_per_unit: 100")
}

#[tokio::test]
async fn healthy_while_serving_failed_while_not_serving() {
    let mut redis = RedisServer::start();
    let s = setup::serving(&rules())
        .redis(redis.url())
        .start_healthy()
        .await;
    let front = setup::front_asking(&s)
        .health_check(Duration::from_millis(200))
        .start()
        .await;
    assert!(
        front.envoy.wait_healthy("rls", 1, WITHIN).await,
        "{:?}",
        front.envoy.health_flags("rls").await
    );
    assert_eq!(front.get("/", &[]).await.status, 200);
    redis.kill();
    let deadline = std::time::Instant::now() + WITHIN;
    let failed = loop {
        // sluice learns that Redis is gone from a call that fails (its idle connection
        // gives no sign): requests keep coming, as they do in production (passing here:
        // Envoy fails open).
        assert_eq!(front.get("/", &[]).await.status, 200);
        let flags = front.envoy.health_flags("rls").await;
        if flags.iter().any(|(_, f)| f.contains("failed_active_hc")) {
            break true;
        }
        if std::time::Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(failed, "{:?}", front.envoy.health_flags("rls").await);
    let failures = front
        .envoy
        .stat("cluster.rls.health_check.failure")
        .await
        .unwrap_or(0);
    assert!(failures >= 1, "{failures}");
    redis.restart();
    assert!(
        front.envoy.wait_healthy("rls", 1, WITHIN).await,
        "healthy again once Redis is back: {:?}",
        front.envoy.health_flags("rls").await
    );
}
