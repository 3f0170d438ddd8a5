//! sluice stopped behind Envoy: `failure_mode_deny: true` turns every check into a 500,
//! `false` (Envoy's default) lets requests through; Envoy's stats count both
//! (`ratelimit.error`, `ratelimit.failure_mode_allowed`).

use std::time::Duration;

use crate::support::envoy::Front;

use super::setup;

fn rules() -> String {
    setup::rules("unit: minute, requests_per_unit: 100")
}

async fn with_sluice_stopped(deny: bool, google: bool) {
    let s = setup::serving(&rules()).start_healthy().await;
    let mut f = Front::new("front", setup::rls(&s, google));
    f.failure_mode_deny = deny;
    let front = f.start().await;
    assert_eq!(front.get("/", &[]).await.status, 200, "served while up");
    drop(s);
    let want = if deny { 500 } else { 200 };
    for _ in 0..3 {
        let r = front.get("/", &[]).await;
        assert_eq!(r.status, want, "deny: {deny}, google: {google}: {r:?}");
    }
    let errors = front
        .envoy
        .wait_stat(
            "cluster.upstream.ratelimit.error",
            3,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(errors, 3);
    let allowed = front
        .envoy
        .stat("cluster.upstream.ratelimit.failure_mode_allowed")
        .await
        .unwrap_or(0);
    assert_eq!(allowed, if deny { 0 } else { 3 });
}

#[tokio::test]
async fn failure_mode_deny_answers_500() {
    with_sluice_stopped(true, false).await;
}

#[tokio::test]
async fn failure_mode_allow_lets_requests_through() {
    with_sluice_stopped(false, false).await;
}

#[tokio::test]
async fn google_grpc_failure_mode_deny_answers_500() {
    with_sluice_stopped(true, true).await;
}

#[tokio::test]
async fn google_grpc_failure_mode_allow_lets_requests_through() {
    with_sluice_stopped(false, true).await;
}
