//! Operations through the real binary: Prometheus metrics with exact counts, /rlconfig,
//! response headers and dynamic metadata (the process lifecycle is in `ops/lifecycle.rs`,
//! colours in text logs in `ops/logs.rs`).

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::google::protobuf::value::Kind;

use crate::support::sluice::*;

mod lifecycle;
mod logs;
mod memory;

const RULES: &str = r#"
domain: m
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: svc
    metadata: {service: {name: one, tier: gold}}
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: svc2
    metadata: {service: {name: two, region: eu}}
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: tb
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: token_bucket, burst: 20, name: per_client}
  - key: multi
    rate_limits:
      - {unit: second, requests_per_unit: 10, algorithm: gcra, name: burst}
      - {unit: day, requests_per_unit: 1000, name: daily}
"#;

fn series(stat: &str, key: &str) -> String {
    let mut parts = key.splitn(4, '.');
    let (d, k1, k2) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    format!(
        "ratelimit_service_rate_limit_{stat}{{descriptor=\"{key}\",domain=\"{d}\",key1=\"{k1}\",key2=\"{k2}\"}}"
    )
}

async fn hit(c: &mut Client, pairs: &[(&str, &str)]) -> RateLimitResponse {
    call(c, req("m", vec![desc(pairs)])).await
}

#[tokio::test]
async fn per_rule_and_service_metrics_have_exact_counts() {
    let s = sluice().file("m.yaml", RULES).start().await;
    let mut c = s.client().await;
    for _ in 0..7 {
        hit(&mut c, &[("k", "a")]).await;
    }
    for _ in 0..3 {
        hit(&mut c, &[("shadowed", "x")]).await;
    }
    hit(&mut c, &[("detailed", "one")]).await;
    hit(&mut c, &[("detailed", "two")]).await;
    hit(&mut c, &[("path", "/api/users")]).await;
    let _ = c.should_rate_limit(req("", vec![])).await; // a service error
    let body = s.http_get("/metrics").await.1;
    let m = |series: &str| metric_value(&body, series).unwrap_or(-1.0);

    // 5/hour, 7 hits: 5 within, 2 over; near = floor(5 × 0.8) = 4 → the 5th hit is near.
    assert_eq!(m(&series("total_hits", "m.k")), 7.0, "{body}");
    assert_eq!(m(&series("within_limit", "m.k")), 5.0);
    assert_eq!(m(&series("over_limit", "m.k")), 2.0);
    assert_eq!(m(&series("near_limit", "m.k")), 1.0);
    // Shadow: 1 within, 2 over, both over also counted as shadow_mode.
    assert_eq!(m(&series("over_limit", "m.shadowed")), 2.0);
    assert_eq!(m(&series("shadow_mode", "m.shadowed")), 2.0);
    // detailed_metric: one series per request value; wildcards keep the pattern.
    assert_eq!(m(&series("total_hits", "m.detailed_one")), 1.0);
    assert_eq!(m(&series("total_hits", "m.detailed_two")), 1.0);
    assert_eq!(m(&series("total_hits", "m.path_/api/*")), 1.0);
    // Service metrics.
    assert_eq!(
        m("ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"}"),
        14.0
    );
    assert_eq!(
        m("ratelimit_service_response_time_seconds_count{grpc_method=\"ShouldRateLimit\"}"),
        14.0
    );
    assert_eq!(
        m("ratelimit_service_should_rate_limit_error{err_type=\"service_error\"}"),
        1.0
    );
    assert_eq!(m("ratelimit_service_config_load_success"), 1.0);
    assert_eq!(m("ratelimit_service_config_load_error"), 0.0);
    assert_eq!(m("sluice_rules_loaded"), 8.0);
    assert!(m("sluice_store_latency_seconds_count{store=\"memory\"}") >= 12.0);
    assert!(body.contains("sluice_build_info{version=\""), "{body}");
}

#[tokio::test]
async fn metric_series_are_capped() {
    let s = sluice()
        .file("m.yaml", RULES)
        .arg("--metrics-max-series")
        .arg("3")
        .start()
        .await;
    let mut c = s.client().await;
    for v in ["a", "b", "c", "d", "e"] {
        hit(&mut c, &[("detailed", v)]).await;
    }
    let body = s.http_get("/metrics").await.1;
    let detailed = body
        .lines()
        .filter(|l| {
            l.starts_with("ratelimit_service_rate_limit_total_hits{") && l.contains("m.detailed_")
        })
        .count();
    assert_eq!(detailed, 3, "{body}");
    assert_eq!(
        metric_value(
            &body,
            "ratelimit_service_rate_limit_total_hits{descriptor=\"__overflow__\",domain=\"\",key1=\"\",key2=\"\"}"
        ),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        metric_value(
            &body,
            "sluice_metrics_overflow_total{family=\"ratelimit_service_rate_limit\"}"
        ),
        Some(2.0)
    );
}

#[tokio::test]
async fn separate_metrics_listener_with_their_variables() {
    // PROMETHEUS_ADDR needs a port we know: take one from the kernel and release it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = sluice()
        .file("m.yaml", RULES)
        .env("USE_PROMETHEUS", "true")
        .env("PROMETHEUS_ADDR", format!("127.0.0.1:{port}"))
        .env("PROMETHEUS_PATH", "/prom")
        .start()
        .await;
    let mut c = s.client().await;
    hit(&mut c, &[("k", "a")]).await;
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let (code, body) = http_request(addr, "GET", "/prom", "").await;
    assert_eq!(code, 200);
    assert_eq!(metric_value(&body, &series("total_hits", "m.k")), Some(1.0));
}

#[tokio::test]
async fn rlconfig_lists_every_limit() {
    let s = sluice().file("m.yaml", RULES).start().await;
    let (code, body) = s.http_get("/rlconfig").await;
    assert_eq!(code, 200);
    assert!(
        body.contains("m.k: unit=HOUR requests_per_unit=5"),
        "{body}"
    );
    assert!(
        body.contains("m.tb: unit=MINUTE requests_per_unit=10"),
        "{body}"
    );
    assert!(body.contains("token_bucket"), "{body}");
    assert!(body.contains("burst=20"), "{body}");
    assert_eq!(
        body.lines().filter(|l| l.starts_with("m.multi")).count(),
        2,
        "{body}"
    );
}

#[tokio::test]
async fn their_response_headers() {
    let s = sluice()
        .file("m.yaml", RULES)
        .env("LIMIT_RESPONSE_HEADERS_ENABLED", "true")
        .env("LIMIT_RESET_HEADER", "X-Reset")
        .start()
        .await;
    let mut c = s.client().await;
    let r = call(
        &mut c,
        req("m", vec![desc(&[("k", "a")]), desc(&[("svc2", "b")])]),
    )
    .await;
    // The most restrictive descriptor: k (remaining 4) over svc2 (99).
    assert_eq!(header(&r, "RateLimit-Limit"), Some("5"));
    assert_eq!(header(&r, "RateLimit-Remaining"), Some("4"));
    let reset: u64 = header(&r, "X-Reset").unwrap().parse().unwrap();
    assert!((1..=3600).contains(&reset));
    // No limited descriptor, no headers.
    let r = hit(&mut c, &[("unknown", "x")]).await;
    assert!(r.response_headers_to_add.is_empty());
}

#[tokio::test]
async fn ietf_headers_and_retry_after() {
    let s = sluice()
        .file("m.yaml", RULES)
        .arg("--response-headers")
        .arg("true")
        .arg("--response-headers-style")
        .arg("ietf")
        .arg("--retry-after-header")
        .arg("true")
        .start()
        .await;
    let mut c = s.client().await;
    let r = hit(&mut c, &[("multi", "a")]).await;
    assert_eq!(
        header(&r, "RateLimit-Policy"),
        Some("\"burst\";q=10;w=1, \"daily\";q=1000;w=86400")
    );
    assert!(
        header(&r, "RateLimit")
            .unwrap()
            .starts_with("\"burst\";r=9;t="),
        "{r:?}"
    );
    assert!(header(&r, "Retry-After").is_none());
    hit(&mut c, &[("svc", "x")]).await;
    let r = hit(&mut c, &[("svc", "x")]).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    let retry: u64 = header(&r, "Retry-After").unwrap().parse().unwrap();
    assert!((1..=3600).contains(&retry));
}

#[tokio::test]
async fn dynamic_metadata_merges_passed_descriptors() {
    let s = sluice()
        .file("m.yaml", RULES)
        .env("RESPONSE_DYNAMIC_METADATA", "true")
        .start()
        .await;
    let mut c = s.client().await;
    let r = call(
        &mut c,
        req("m", vec![desc(&[("svc", "a")]), desc(&[("svc2", "b")])]),
    )
    .await;
    let md = r.dynamic_metadata.expect("dynamic metadata");
    let Some(Kind::StringValue(d)) = &md.fields["domain"].kind else {
        panic!()
    };
    assert_eq!(d, "m");
    let Some(Kind::StructValue(meta)) = &md.fields["metadata"].kind else {
        panic!("{md:?}")
    };
    let Some(Kind::StructValue(service)) = &meta.fields["service"].kind else {
        panic!()
    };
    let get = |k: &str| match &service.fields[k].kind {
        Some(Kind::StringValue(s)) => s.clone(),
        _ => panic!(),
    };
    // First value wins; nested maps merge.
    assert_eq!(
        (get("name"), get("tier"), get("region")),
        ("one".into(), "gold".into(), "eu".into())
    );
    // svc is now over its limit: its metadata is no longer merged.
    let r = call(
        &mut c,
        req("m", vec![desc(&[("svc", "a")]), desc(&[("svc2", "b")])]),
    )
    .await;
    let md = r.dynamic_metadata.unwrap();
    let Some(Kind::StructValue(meta)) = &md.fields["metadata"].kind else {
        panic!()
    };
    let Some(Kind::StructValue(service)) = &meta.fields["service"].kind else {
        panic!()
    };
    assert!(matches!(&service.fields["name"].kind, Some(Kind::StringValue(n)) if n == "two"));
}
