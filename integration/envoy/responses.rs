//! A rule's `response` as the client receives it through Envoy: the 429's `raw_body`,
//! `content_type` and `headers`; `hidden` (out of sluice's `RateLimit-*` and `Retry-After`)
//! and `hide_current_limit` (out of Envoy's `x-ratelimit-*` too).

use serde_json::json;

use super::setup;

#[tokio::test]
async fn raw_body_content_type_and_headers_go_with_the_rules_429() {
    let rules = r#"
domain: front
descriptors:
  - key: generic_key
    value: front
    rate_limit: {unit: minute, requests_per_unit: 1}
    response:
      raw_body: '{"error": "slow down"}'
      content_type: application/json
      headers: {x-ratelimit-rule: per-front}
"#;
    let s = setup::serving(rules).start_healthy().await;
    let front = setup::front_asking(&s).start().await;
    let ok = front.get("/", &[]).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("x-ratelimit-rule"), None, "only on the denial");
    assert_eq!(ok.body, "upstream\n");
    let denied = front.get("/", &[]).await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.body, r#"{"error": "slow down"}"#, "{denied:?}");
    assert_eq!(denied.header("content-type"), Some("application/json"));
    assert_eq!(denied.header("x-ratelimit-rule"), Some("per-front"));
}

#[tokio::test]
async fn hidden_rules_stay_out_of_the_headers_the_client_sees() {
    let rules = r#"
domain: front
descriptors:
  - key: generic_key
    value: visible
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: generic_key
    value: hidden
    rate_limit: {unit: minute, requests_per_unit: 1}
    response:
      hidden: true
      hide_current_limit: true
"#;
    let s = setup::serving(rules)
        .args(["--response-headers", "--retry-after-header"])
        .start_healthy()
        .await;
    let mut f = setup::front_asking(&s);
    f.route_rate_limits = json!([
        { "actions": [{ "generic_key": { "descriptor_value": "visible" } }] },
        { "actions": [{ "generic_key": { "descriptor_value": "hidden" } }] },
    ]);
    let front = f.start().await;
    let ok = front.get("/", &[]).await;
    assert_eq!(ok.status, 200);
    // Envoy's headers and sluice's show the visible rule only (4 left of 5), though the
    // hidden one (1 per minute) is the tighter.
    assert_eq!(ok.header("x-ratelimit-limit"), Some("5, 5;w=60"), "{ok:?}");
    assert_eq!(ok.header("x-ratelimit-remaining"), Some("4"));
    assert_eq!(ok.header("ratelimit-limit"), Some("5"));
    assert_eq!(ok.header("ratelimit-remaining"), Some("4"));
    let denied = front.get("/", &[]).await;
    assert_eq!(denied.status, 429, "the hidden rule denies");
    assert_eq!(
        denied.header("x-ratelimit-remaining"),
        Some("3"),
        "{denied:?}"
    );
    assert_eq!(denied.header("ratelimit-remaining"), Some("3"));
    assert_eq!(
        denied.header("retry-after"),
        None,
        "no Retry-After when only a hidden rule denies"
    );
}
