//! `SANITIZE_DESCRIPTOR_METRIC_DOTS` (their pull request #1210): dots inside descriptor
//! keys and values become `_` in the stats key, so a host name does not split into metric
//! levels; matching and counting are unchanged.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

use super::*;

const HOSTS: &str = r#"
domain: d
descriptors:
  - key: host
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 1}
"#;

async fn hit(s: &Sluice) -> i32 {
    let r = call(
        &mut s.client().await,
        req("d", vec![desc(&[("host", "api.example.com")])]),
    )
    .await;
    r.overall_code
}

#[tokio::test]
async fn host_names_stay_one_level_of_the_stats_key() {
    let s = sluice()
        .file("d.yaml", HOSTS)
        .env("SANITIZE_DESCRIPTOR_METRIC_DOTS", "true")
        .start()
        .await;
    assert_eq!(hit(&s).await, Code::Ok as i32);
    assert_eq!(hit(&s).await, Code::OverLimit as i32, "still one counter");
    let series = "ratelimit_service_rate_limit_total_hits{descriptor=\"d.host_api_example_com\",\
                  domain=\"d\",key1=\"host_api_example_com\",key2=\"\"}";
    assert_eq!(s.metric(series).await, 2.0);

    // Theirs without it: the value's dots split it into levels.
    let t = sluice().file("d.yaml", HOSTS).start().await;
    hit(&t).await;
    let series = "ratelimit_service_rate_limit_total_hits{descriptor=\"d.host_api.example.com\",\
                  domain=\"d\",key1=\"host_api\",key2=\"example\"}";
    assert_eq!(t.metric(series).await, 1.0);
}
