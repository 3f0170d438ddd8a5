//! Before the first config: sluice does not serve (their default), or serves and fails
//! every call (`FORCE_START_WITHOUT_INITIAL_CONFIG=true`); health follows
//! `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`.

use tonic::Code;

use super::*;
use crate::support::xds_server::XdsServer;

/// Whether `addr` answers an HTTP request within a short time.
async fn answers(addr: std::net::SocketAddr) -> bool {
    tokio::time::timeout(
        Duration::from_millis(500),
        http_request(addr, "GET", "/healthcheck", ""),
    )
    .await
    .is_ok()
}

#[tokio::test]
async fn nothing_is_served_before_the_first_valid_config() {
    let xds = XdsServer::start();
    let s = xds_sluice(&xds)
        .ready_on("waiting for the first xDS config before serving")
        .start()
        .await;
    assert!(
        xds.wait_request(WAIT, |_| true).await.is_some(),
        "subscribed"
    );
    assert!(!answers(s.http).await, "HTTP answered before any config");

    // An invalid first response is NACKed and still serves nothing.
    xds.set("v1", vec![bad_rules("bad", "edge")]);
    assert!(
        xds.wait_request(WAIT, |r| r.request.error_detail.is_some())
            .await
            .is_some()
    );
    assert!(
        !answers(s.http).await,
        "HTTP answered after an invalid config"
    );

    xds.set("v2", vec![rules("good", "edge", 3)]);
    assert!(s.wait_log("\"serving\"", WAIT).await, "{:?}", s.logs());
    assert!(s.wait_healthy(WAIT).await);
    let mut c = s.client().await;
    assert_eq!(limit(&mut c, "edge").await, Some(3));
}

#[tokio::test]
async fn force_start_serves_at_once_and_health_waits_for_a_config_when_required() {
    let xds = XdsServer::start();
    let s = xds_sluice(&xds)
        .env("FORCE_START_WITHOUT_INITIAL_CONFIG", "true")
        .env("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")
        .start()
        .await;
    // Serving, unhealthy, and every call fails with their message.
    assert_eq!(s.http_get("/healthcheck").await.0, 500);
    let mut c = s.client().await;
    let e = c
        .should_rate_limit(req("edge", vec![desc(&[("k", "v")])]))
        .await
        .expect_err("no config yet");
    assert_eq!(e.code(), Code::Unavailable);
    assert_eq!(e.message(), "no rate limit configuration loaded");
    assert_eq!(
        s.metric("ratelimit_service_should_rate_limit_error{err_type=\"service_error\"}")
            .await,
        1.0
    );
    let (code, body) = s
        .http_post(
            "/json",
            r#"{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#,
        )
        .await;
    assert_eq!(
        (code, body.trim()),
        (503, "no rate limit configuration loaded")
    );

    // A config with a domain arrives: healthy, and calls are decided.
    xds.set("v1", vec![rules("r", "edge", 3)]);
    assert!(
        s.wait_healthy(WAIT).await,
        "healthy once a domain is loaded"
    );
    assert!(wait_limit(&mut c, "edge", Some(3)).await);

    // An empty config is a loaded config, but no domain: unhealthy again, calls answered.
    xds.set("v2", Vec::new());
    assert!(wait_limit(&mut c, "edge", None).await);
    assert_eq!(s.http_get("/healthcheck").await.0, 500);
}

#[tokio::test]
async fn force_start_without_the_health_setting_is_healthy_without_a_config() {
    let xds = XdsServer::start();
    let s = xds_sluice(&xds)
        .env("FORCE_START_WITHOUT_INITIAL_CONFIG", "true")
        .start()
        .await;
    assert!(
        s.wait_healthy(WAIT).await,
        "their default: health ignores the config"
    );
    let mut c = s.client().await;
    let e = c
        .should_rate_limit(req("edge", vec![desc(&[("k", "v")])]))
        .await
        .expect_err("no config yet");
    assert_eq!(e.message(), "no rate limit configuration loaded");
}
