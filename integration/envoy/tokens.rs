//! Token usage reported at stream end, as LLM gateways do: the filter's `rate_limits` check
//! at `hits_addend: {number: 0}` when a request arrives, and report what the response used
//! with `apply_on_stream_done` and `hits_addend: {format: "%RESP(x-tokens)%"}` (Front's
//! upstream sets `x-tokens` from the request's `x-tokens-used`). The reports are counted
//! (with `overdraft: true` past the budget) and the next check is refused once the budget is
//! spent, on every algorithm that takes overdraft.

use std::time::{Duration, Instant};

use crate::support::envoy::RunningFront;
use crate::support::sluice::*;

use super::setup;

const FILTER_RATE_LIMITS: &str = r#"
- actions: [{generic_key: {descriptor_value: tokens}}]
  hits_addend: {number: 0}
- actions: [{generic_key: {descriptor_value: tokens}}]
  hits_addend: {format: "%RESP(x-tokens)%"}
  apply_on_stream_done: true
"#;

/// Every hit sluice has counted (all series: one rule per test).
async fn total_hits(s: &Sluice) -> f64 {
    let (_, body) = s.http_get("/metrics").await;
    body.lines()
        .filter(|l| l.starts_with("ratelimit_service_rate_limit_total_hits"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn wait_hits(s: &Sluice, want: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = total_hits(s).await;
        if got >= want || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A budget of 10 tokens per hour; two responses of 6 tokens each spend it (the second
/// overdrawing it), and the third request is refused at its check.
async fn spent_by_reports(algorithm: &str) {
    let rules = format!(
        "domain: front\n\
         descriptors:\n\
         \x20 - key: generic_key\n\
         \x20   value: tokens\n\
         \x20   rate_limit: {{unit: hour, requests_per_unit: 10, algorithm: {algorithm}, overdraft: true}}\n"
    );
    let s = setup::serving(&rules).start_healthy().await;
    let front: RunningFront = setup::front_asking(&s)
        .filter_rate_limits_yaml(FILTER_RATE_LIMITS)
        .start()
        .await;
    let used = [("x-tokens-used", "6")];
    // Each check costs 0 (a hit of 0 is counted as none); each report 6.
    for (i, want) in [(1, 6.0), (2, 12.0)] {
        let r = front.get("/", &used).await;
        assert_eq!(r.status, 200, "{algorithm}: request {i}: {r:?}");
        assert_eq!(r.header("x-tokens"), Some("6"));
        assert_eq!(
            wait_hits(&s, want).await,
            want,
            "{algorithm}: the report of request {i} is counted"
        );
    }
    let refused = front.get("/", &used).await;
    assert_eq!(refused.status, 429, "{algorithm}: {refused:?}");
}

#[tokio::test]
async fn fixed_window_is_spent_by_reported_tokens() {
    spent_by_reports("fixed_window").await;
}

#[tokio::test]
async fn token_bucket_is_spent_by_reported_tokens() {
    spent_by_reports("token_bucket").await;
}

#[tokio::test]
async fn gcra_is_spent_by_reported_tokens() {
    spent_by_reports("gcra").await;
}

#[tokio::test]
async fn sliding_window_is_spent_by_reported_tokens() {
    spent_by_reports("sliding_window").await;
}
