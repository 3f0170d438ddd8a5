//! The HTTP `ratelimit` filter asking sluice: the answers Envoy turns into 429s and headers.

use std::time::Duration;

use super::setup;

fn rules() -> String {
    setup::rules("unit: minute, requests_per_unit: 2")
}

#[tokio::test]
async fn envoy_grpc_over_tcp_limits_with_429_and_headers() {
    let s = setup::serving(&rules()).start_healthy().await;
    let front = setup::front_asking(&s).deny_on_failure().start().await;
    let first = front.get("/", &[]).await;
    assert_eq!(first.status, 200, "{first:?}\n{}", front.envoy.log());
    assert_eq!(first.header("x-ratelimit-limit"), Some("2, 2;w=60"));
    assert_eq!(first.header("x-ratelimit-remaining"), Some("1"));
    assert_eq!(front.get("/", &[]).await.status, 200);
    let third = front.get("/", &[]).await;
    assert_eq!(third.status, 429, "{third:?}");
    assert_eq!(third.header("x-envoy-ratelimited"), Some("true"));
    assert_eq!(third.header("x-ratelimit-remaining"), Some("0"));
    // The filter counts on the route's cluster, not on the one it asks.
    let ok = front
        .envoy
        .wait_stat(
            "cluster.upstream.ratelimit.over_limit",
            1,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(ok, 1);
}
