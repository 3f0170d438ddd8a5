//! Before the first config: sluice does not serve, its gRPC, HTTP and debug ports refusing
//! every connection (their default), or serves and fails
//! every call (`FORCE_START_WITHOUT_INITIAL_CONFIG=true`); health follows
//! `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`.

use tonic::Code;

use super::*;
use crate::support::xds_server::XdsServer;

/// Whether a TCP connection to `addr` is refused (nothing listens there).
async fn refused(addr: std::net::SocketAddr) -> bool {
    match tokio::net::TcpStream::connect(addr).await {
        Ok(_) => false,
        Err(e) => {
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::ConnectionRefused,
                "{addr}: {e}"
            );
            true
        }
    }
}

/// A field of the "waiting for the first xDS config" log line, as an address.
fn waiting_addr(s: &Sluice, field: &str) -> std::net::SocketAddr {
    s.logs()
        .iter()
        .find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["message"] == "waiting for the first xDS config before serving")
                .then(|| v[field].as_str()?.parse().ok())
                .flatten()
        })
        .unwrap_or_else(|| panic!("no {field} address logged: {:?}", s.logs()))
}

/// Their order: before the first valid config the gRPC, HTTP and debug ports accept no TCP
/// connection at all (a probe or Envoy sees a refusal, not a hang); the metrics port serves
/// from the start, as their Prometheus sink does.
#[tokio::test]
async fn ports_refuse_connections_before_the_first_valid_config() {
    let xds = XdsServer::start();
    let s = xds_sluice(&xds)
        .args([
            "--debug-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .ready_on("waiting for the first xDS config before serving")
        .start()
        .await;
    let debug = waiting_addr(&s, "debug");
    let metrics = waiting_addr(&s, "metrics");
    assert!(
        xds.wait_request(WAIT, |_| true).await.is_some(),
        "subscribed"
    );
    let closed = [("grpc", s.grpc), ("http", s.http), ("debug", debug)];
    for (name, addr) in closed {
        assert!(
            refused(addr).await,
            "{name} accepted a connection before any config"
        );
    }
    let (code, body) = http_request(metrics, "GET", "/metrics", "").await;
    assert_eq!(code, 200, "metrics are served before the first config");
    assert!(body.contains("ratelimit_service_config_load"), "{body}");

    // An invalid first response is NACKed and still opens nothing.
    xds.set("v1", vec![bad_rules("bad", "edge")]);
    assert!(
        xds.wait_request(WAIT, |r| r.request.error_detail.is_some())
            .await
            .is_some()
    );
    for (name, addr) in closed {
        assert!(
            refused(addr).await,
            "{name} accepted a connection after an invalid config"
        );
    }

    // The first valid config: the same ports accept and serve.
    xds.set("v2", vec![rules("good", "edge", 3)]);
    assert!(s.wait_log("\"serving\"", WAIT).await, "{:?}", s.logs());
    assert!(s.wait_healthy(WAIT).await);
    let mut c = s.client().await;
    assert_eq!(limit(&mut c, "edge").await, Some(3));
    assert_eq!(http_request(debug, "GET", "/rlconfig", "").await.0, 200);
    assert_eq!(s.serving_addr("grpc"), Some(s.grpc));
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
