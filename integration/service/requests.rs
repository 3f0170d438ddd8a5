//! Requests sluice refuses (INVALID_ARGUMENT with their messages and our bounds), and the
//! `/json` endpoint with health beside it.

use tonic_health::pb::health_check_response::ServingStatus;

use super::*;
use crate::support::health::grpc_health;

#[tokio::test]
async fn bad_requests_are_invalid_argument() {
    let s = in_process()
        .file("test.yaml", RULES)
        .arg("--max-descriptors")
        .arg("3")
        .arg("--max-value-bytes")
        .arg("16")
        .start()
        .await;
    let mut c = s.client().await;
    let cases = vec![
        (
            req("", vec![desc(&[("k", "v")])]),
            "rate limit domain must not be empty",
        ),
        (
            req("test", vec![]),
            "rate limit descriptor list must not be empty",
        ),
        (
            req("test", (0..4).map(|_| desc(&[("k", "v")])).collect()),
            "request has 4 descriptors; the maximum is 3",
        ),
        (
            req("test", vec![desc(&[("k", "01234567890123456789")])]),
            "descriptor 0 entry 0: value is 20 bytes; the maximum is 16",
        ),
        (
            req("test", vec![desc_override(&[("k", "v")], 1, 0)]),
            "unknown unit",
        ),
        (
            req("test", vec![desc_hits(&[("k", "v")], u64::MAX)]),
            "exceeds the maximum",
        ),
    ];
    for (r, want) in cases {
        let e = c.should_rate_limit(r).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains(want), "{} vs {want}", e.message());
    }
    // The server is still fine.
    assert_eq!(
        one(&mut c, &[("named", "x")]).await.overall_code,
        Code::Ok as i32
    );
}

#[tokio::test]
async fn json_endpoint_and_health() {
    let s = start().await;
    assert!(s.wait_healthy(HEALTHY_WITHIN).await);
    assert_eq!(s.http_get("/healthcheck").await, (200, "OK".to_string()));
    let body = r#"{"domain":"test","descriptors":[{"entries":[{"key":"banned","value":"x"}]}]}"#;
    let (code, text) = s.http_post("/json", body).await;
    assert_eq!(code, 429, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["overallCode"], "OVER_LIMIT");
    assert_eq!(v["statuses"][0]["currentLimit"]["name"], "banned_limit");
    assert_eq!(v["statuses"][0]["currentLimit"]["unit"], "HOUR");
    let body = r#"{"domain":"test","descriptors":[{"entries":[{"key":"named","value":"x"}]}]}"#;
    let (code, text) = s.http_post("/json", body).await;
    assert_eq!(code, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["statuses"][0]["limitRemaining"], 3);
    assert!(
        v["statuses"][0]["durationUntilReset"]
            .as_str()
            .unwrap()
            .ends_with('s')
    );
    assert_eq!(s.http_post("/json", "{not json").await.0, 400);
    let (code, text) = s
        .http_post("/json", r#"{"domain":"","descriptors":[]}"#)
        .await;
    assert_eq!(code, 400);
    assert!(
        text.contains("rate limit domain must not be empty"),
        "{text}"
    );

    // gRPC health, both service names.
    let channel = s.channel().await;
    for service in ["", "ratelimit"] {
        assert_eq!(
            grpc_health(channel.clone(), service).await,
            ServingStatus::Serving
        );
    }
}
