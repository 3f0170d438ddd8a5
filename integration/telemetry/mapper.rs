//! `PROMETHEUS_MAPPER_YAML` through the real binary: Envoy Gateway's mapping file (their
//! built-in one) gives their series, a custom file relabels and drops, a broken file stops
//! startup with its reason.

use crate::support::sluice::*;

const ENVOY_GATEWAY: &str = r#"
# Requires statsd exporter >= v0.6.0 since it uses the "drop" action.
mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "ratelimit_service_rate_limit_total_hits"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
  - match: "ratelimit.service.rate_limit.*.*.over_limit"
    name: "ratelimit_service_rate_limit_over_limit"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
  - match: "ratelimit\\.service\\.rate_limit\\.(.*)\\.(.*)\\.(.*)(\\..*)\\.total_hits"
    match_type: regex
    name: "ratelimit_service_rate_limit_total_hits"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
      key2: "$3"
  - match: "ratelimit.service.call.should_rate_limit.*"
    name: "ratelimit_service_should_rate_limit_error"
    match_metric_type: counter
    labels:
      err_type: "$1"
  - match: "ratelimit_server.*.total_requests"
    name: "ratelimit_service_total_requests"
    match_metric_type: counter
    labels:
      grpc_method: "$1"
  - match: "ratelimit_server.*.response_time"
    name: "ratelimit_service_response_time_seconds"
    timer_type: histogram
    labels:
      grpc_method: "$1"
  - match: "ratelimit.service.config_load_success"
    name: "ratelimit_service_config_load_success"
    match_metric_type: counter
"#;

#[tokio::test]
async fn envoy_gateway_mapping_gives_their_series() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conf.yaml");
    write(&path, ENVOY_GATEWAY);
    let s = sluice()
        .file("rules.yaml", super::RULES)
        .env("PROMETHEUS_MAPPER_YAML", path.display().to_string())
        .start()
        .await;
    let mut c = s.client().await;
    for _ in 0..3 {
        call(&mut c, req("d", vec![desc(&[("k", "x")])])).await;
    }
    let (_, body) = s.http_get("/metrics").await;
    for series in [
        "ratelimit_service_rate_limit_total_hits{domain=\"d\",key1=\"k\"} 3",
        "ratelimit_service_rate_limit_over_limit{domain=\"d\",key1=\"k\"} 1",
        "ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"} 3",
        "ratelimit_service_response_time_seconds_count{grpc_method=\"ShouldRateLimit\"} 3",
        "ratelimit_service_config_load_success 1",
        "ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"} 0",
        // Unmapped in their file: the escaped statsd name, as statsd_exporter exports it.
        "ratelimit_service_rate_limit_d_k_within_limit 2",
        "ratelimit_service_config_load_error 0",
    ] {
        assert!(
            body.lines().any(|l| l == series),
            "{series} missing:\n{body}"
        );
    }
    assert!(!body.contains("descriptor=\"d.k\""), "{body}");
    assert!(
        s.logs().iter().any(|l| l.contains("timer_type")),
        "ignored fields are reported"
    );
}

#[tokio::test]
async fn custom_mapping_relabels_and_drops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conf.yaml");
    write(
        &path,
        r#"
mappings:
  - match: "ratelimit.service.rate_limit.*.*.*"
    name: "rl_$3"
    labels: {tenant: "$1"}
  - match: "ratelimit_server.*.*"
    action: drop
"#,
    );
    let s = sluice()
        .file("rules.yaml", super::RULES)
        .arg("--metrics-mapper")
        .arg(path.display().to_string())
        .start()
        .await;
    let mut c = s.client().await;
    call(&mut c, req("d", vec![desc(&[("k", "x")])])).await;
    let (_, body) = s.http_get("/metrics").await;
    assert!(
        body.lines().any(|l| l == "rl_total_hits{tenant=\"d\"} 1"),
        "{body}"
    );
    assert!(!body.contains("total_requests"), "{body}");
    assert!(body.contains("sluice_rules_loaded 1"), "{body}");
}

#[tokio::test]
async fn broken_mapping_stops_startup_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conf.yaml");
    write(
        &path,
        "mappings:\n  - match: a.b\n    name: x\n    colour: red\n",
    );
    let err = sluice()
        .file("rules.yaml", super::RULES)
        .env("PROMETHEUS_MAPPER_YAML", path.display().to_string())
        .try_start()
        .await
        .err()
        .expect("refused");
    assert!(
        err.contains("PROMETHEUS_MAPPER_YAML") && err.contains("mapping 0: unknown field 'colour'"),
        "{err}"
    );
    let missing = sluice()
        .file("rules.yaml", super::RULES)
        .env("PROMETHEUS_MAPPER_YAML", "/nonexistent/conf.yaml")
        .try_start()
        .await
        .err()
        .expect("refused");
    assert!(missing.contains("/nonexistent/conf.yaml"), "{missing}");
}
