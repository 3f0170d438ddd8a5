//! `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=true`: the response-time histogram keeps its
//! name and observes whole milliseconds into the default Prometheus buckets, as their
//! legacy mapping; a mapping file overrides it, as theirs.

use super::*;

/// The `le` bounds of the response-time histogram and its sum, from `/metrics`.
async fn histogram(s: &Sluice) -> (Vec<String>, f64) {
    let (_, body) = s.http_get("/metrics").await;
    let les = body
        .lines()
        .filter(|l| l.starts_with("ratelimit_service_response_time_seconds_bucket"))
        .filter_map(|l| Some(l.split("le=\"").nth(1)?.split('"').next()?.to_string()))
        .collect();
    let sum = metric_value(
        &body,
        "ratelimit_service_response_time_seconds_sum{grpc_method=\"ShouldRateLimit\"}",
    )
    .unwrap_or(-1.0);
    (les, sum)
}

const DEFAULT_BUCKETS: [&str; 12] = [
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf",
];

#[tokio::test]
async fn milliseconds_into_the_default_buckets() {
    let s = sluice()
        .file("d.yaml", RULES)
        .env("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true")
        .start()
        .await;
    let mut c = s.client().await;
    for _ in 0..3 {
        call(&mut c, ask()).await;
    }
    let (les, sum) = histogram(&s).await;
    assert_eq!(les, DEFAULT_BUCKETS);
    // Whole milliseconds: an integer sum (in seconds it would be a small fraction).
    assert_eq!(sum, sum.trunc(), "sum {sum}");

    // Without the variable: seconds, sluice's finer buckets.
    let t = sluice().file("d.yaml", RULES).start().await;
    call(&mut t.client().await, ask()).await;
    let (les, sum) = histogram(&t).await;
    assert_ne!(les, DEFAULT_BUCKETS);
    assert!(les.contains(&"0.0001".to_string()), "{les:?}");
    assert!(sum > 0.0 && sum < 1.0, "sum {sum}");
}

#[tokio::test]
async fn a_mapping_file_wins_as_theirs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mapper = dir.path().join("mapper.yaml");
    std::fs::write(&mapper, "mappings: []\n").expect("mapper");
    let s = sluice()
        .file("d.yaml", RULES)
        .env("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true")
        .env("PROMETHEUS_MAPPER_YAML", mapper.display().to_string())
        .start()
        .await;
    assert!(
        s.logs().iter().any(|l| l.contains(
            "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS is ignored with PROMETHEUS_MAPPER_YAML"
        )),
        "{:?}",
        s.logs()
    );
}
