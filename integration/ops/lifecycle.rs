//! The process around the service: what it logs, how SIGTERM drains it, and starting from
//! envoyproxy/ratelimit's environment variables alone.

use tonic_health::pb::health_check_response::ServingStatus;

use super::*;
use crate::support::health::grpc_health;

#[tokio::test]
async fn json_logs_and_no_per_request_logging_at_info() {
    let s = sluice().file("m.yaml", RULES).start().await;
    let mut c = s.client().await;
    hit(&mut c, &[("k", "a")]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = s.logs();
    assert!(!logs.is_empty());
    for l in &logs {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"));
        assert!(v["level"].is_string() && v["message"].is_string(), "{l}");
    }
    assert!(
        !logs.iter().any(|l| l.contains("decided")),
        "no per-request line at info"
    );

    let s = sluice()
        .file("m.yaml", RULES)
        .env("LOG_LEVEL", "debug")
        .start()
        .await;
    let mut c = s.client().await;
    hit(&mut c, &[("k", "a")]).await;
    assert!(s.wait_log("\"decided\"", Duration::from_secs(5)).await);
    let line = s
        .logs()
        .into_iter()
        .find(|l| l.contains("\"decided\""))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["domain"], "m");
    // The code as a word, and the descriptor with its rule.
    assert_eq!(v["code"], "OK", "{line}");
    assert_eq!(v["descriptors"], "k=a → OK m.k", "{line}");
}

#[tokio::test]
async fn sigterm_drains_then_exits() {
    let mut s = sluice()
        .file("m.yaml", RULES)
        .arg("--shutdown-delay")
        .arg("1s")
        .arg("--shutdown-grace")
        .arg("5s")
        .start_healthy()
        .await;
    let mut c = s.client().await;
    // Opened before the signal: a draining server takes no new connection.
    let health = s.channel().await;
    s.signal("TERM");
    let started = Instant::now();
    // Health fails at once, while requests are still answered.
    let deadline = Instant::now() + Duration::from_millis(800);
    let mut saw_unhealthy = false;
    while Instant::now() < deadline {
        if s.http_get("/healthcheck").await.0 == 500 {
            saw_unhealthy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(saw_unhealthy, "health went NOT_SERVING");
    assert_eq!(
        grpc_health(health, "ratelimit").await,
        ServingStatus::NotServing
    );
    assert_eq!(
        hit(&mut c, &[("k", "a")]).await.overall_code,
        Code::Ok as i32
    );
    drop(c);
    let status = s.wait_exit(Duration::from_secs(8)).await.expect("exited");
    assert!(status.success(), "{status}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "kept serving for the delay"
    );
}

/// A second signal ends the process at once, without waiting out the shutdown delay.
#[tokio::test]
async fn a_second_signal_exits_at_once() {
    let mut s = sluice()
        .file("m.yaml", RULES)
        .args(["--shutdown-delay", "30s"])
        .start_healthy()
        .await;
    s.signal("TERM");
    assert!(
        s.wait_log("shutting down", Duration::from_secs(10)).await,
        "{:?}",
        s.logs()
    );
    s.signal("INT");
    let status = s.wait_exit(Duration::from_secs(10)).await.expect("exited");
    assert_eq!(status.code(), Some(130), "{status}");
    assert!(
        s.logs().iter().any(|l| l.contains("second signal")),
        "{:?}",
        s.logs()
    );
}

/// One worker thread runs tokio's current-thread scheduler (everything on the thread that
/// serves): gRPC, gRPC health and the HTTP port answer, and SIGTERM drains and exits.
#[tokio::test]
async fn one_worker_thread_serves_and_drains() {
    let mut s = sluice()
        .file("m.yaml", RULES)
        .args(["--worker-threads", "1", "--shutdown-grace", "5s"])
        .args(["--shutdown-delay", "0s"])
        .start_healthy()
        .await;
    let mut c = s.client().await;
    for _ in 0..3 {
        assert_eq!(
            hit(&mut c, &[("k", "a")]).await.overall_code,
            Code::Ok as i32
        );
    }
    assert_eq!(
        grpc_health(s.channel().await, "ratelimit").await,
        ServingStatus::Serving
    );
    assert_eq!(s.http_get("/healthcheck").await.0, 200);
    drop(c);
    s.signal("TERM");
    let status = s.wait_exit(Duration::from_secs(8)).await.expect("exited");
    assert!(status.success(), "{status}");
}

/// envoyproxy/ratelimit's README examples, laid out as their docs show
/// (`RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml`), served from their variables alone.
#[tokio::test]
async fn boots_from_their_environment_variables_alone() {
    let dir = tempfile::TempDir::new().unwrap();
    let config = dir.path().join("current/ratelimit/config");
    std::fs::create_dir_all(&config).unwrap();
    write(
        &config.join("example1.yaml"),
        r#"
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
"#,
    );
    write(
        &config.join("example2.yaml"),
        r#"
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
"#,
    );
    write(
        &config.join("example3.yaml"),
        r#"
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 10
"#,
    );
    // A dot-file (e.g. an editor swap file) must not be loaded.
    write(&config.join(".example1.yaml.swp"), "garbage: [");
    let s = sluice()
        .no_default_args()
        .env("RUNTIME_ROOT", dir.path().join("current").to_str().unwrap())
        .env("RUNTIME_SUBDIRECTORY", "ratelimit")
        .env("RUNTIME_APPDIRECTORY", "config")
        .env("RUNTIME_WATCH_ROOT", "false")
        .env("RUNTIME_IGNOREDOTFILES", "true")
        .env("USE_STATSD", "false")
        .env("LOG_LEVEL", "debug")
        .env("LOG_FORMAT", "json")
        .env("GRPC_HOST", "127.0.0.1")
        .env("GRPC_PORT", "0")
        .env("HOST", "127.0.0.1")
        .env("PORT", "0")
        .env("SHADOW_MODE", "false")
        .env("MERGE_DOMAIN_CONFIG", "false")
        .env("NEAR_LIMIT_RATIO", "0.8")
        .env("LOCAL_CACHE_SIZE_IN_BYTES", "0")
        .start()
        .await;
    let mut c = s.client().await;
    let r = call(
        &mut c,
        req("mongo_cps", vec![desc(&[("database", "users")])]),
    )
    .await;
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        500
    );
    let r = call(
        &mut c,
        req(
            "messaging",
            vec![desc(&[
                ("message_type", "marketing"),
                ("to_number", "2061234567"),
            ])],
        ),
    )
    .await;
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        5
    );
    assert_eq!(r.statuses[0].limit_remaining, 4);
    let r = call(
        &mut c,
        req(
            "edge_proxy_per_ip",
            vec![desc(&[("remote_address", "50.0.0.5")])],
        ),
    )
    .await;
    assert_eq!(r.statuses[0].limit_remaining, 9);
    assert!(s.wait_healthy(HEALTHY_WITHIN).await);
    // Settings without an effect here are reported, not silently dropped.
    assert!(s.logs().iter().any(|l| l.contains("RUNTIME_WATCH_ROOT")));
}
