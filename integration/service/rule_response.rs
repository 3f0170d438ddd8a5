//! A rule's `response`: its body, content type and headers go with the 429 it decides
//! (the first denying descriptor's, when several deny); `hidden` keeps it out of sluice's
//! rate limit headers, `hide_current_limit` out of the status's `current_limit` (and so
//! out of Envoy's `x-ratelimit-*`).

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

use crate::support::sluice::*;

const RULES: &str = r#"
domain: r
descriptors:
  - key: abuse
    rate_limit: {unit: hour, requests_per_unit: 1}
    response:
      raw_body: '{"error": "blocked"}'
      content_type: application/json
      headers: {X-Blocked-By: abuse}
      hidden: true
      hide_current_limit: true
  - key: plan
    rate_limit: {unit: hour, requests_per_unit: 1, name: plan_quota}
    response:
      raw_body: upgrade your plan
      headers: {x-plan: free}
  - key: open
    rate_limit: {unit: hour, requests_per_unit: 100}
"#;

fn ask(keys: &[&str]) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
    req("r", keys.iter().map(|k| desc(&[(k, "v")])).collect())
}

#[tokio::test]
async fn the_first_denying_rule_answers_with_its_body_and_headers() {
    let s = sluice().file("r.yaml", RULES).start().await;
    let mut c = s.client().await;
    let ok = call(&mut c, ask(&["plan", "abuse"])).await;
    assert_eq!(ok.overall_code, Code::Ok as i32);
    assert!(
        ok.raw_body.is_empty() && ok.response_headers_to_add.is_empty(),
        "{ok:?}"
    );
    // Both deny now: the first in request order answers.
    let r = call(&mut c, ask(&["plan", "abuse"])).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(r.raw_body, b"upgrade your plan");
    assert_eq!(header(&r, "x-plan"), Some("free"));
    assert_eq!(
        header(&r, "content-type"),
        None,
        "no content_type: Envoy's text/plain"
    );
    assert_eq!(header(&r, "x-blocked-by"), None);
    let r = call(&mut c, ask(&["abuse", "plan"])).await;
    assert_eq!(r.raw_body, br#"{"error": "blocked"}"#);
    assert_eq!(header(&r, "content-type"), Some("application/json"));
    assert_eq!(header(&r, "x-blocked-by"), Some("abuse"));
    // Global shadow mode answers OK: no body, no headers.
    let shadow = sluice()
        .file("r.yaml", RULES)
        .env("SHADOW_MODE", "true")
        .start()
        .await;
    let mut c = shadow.client().await;
    call(&mut c, ask(&["plan"])).await;
    let r = call(&mut c, ask(&["plan"])).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert!(
        r.raw_body.is_empty() && r.response_headers_to_add.is_empty(),
        "{r:?}"
    );
}

#[tokio::test]
async fn a_hidden_rule_is_out_of_the_rate_limit_headers() {
    let s = sluice()
        .file("r.yaml", RULES)
        .env("LIMIT_RESPONSE_HEADERS_ENABLED", "true")
        .env("SLUICE_RETRY_AFTER_HEADER", "true")
        .start()
        .await;
    let mut c = s.client().await;
    let r = call(&mut c, ask(&["open", "abuse"])).await;
    // The hidden rule has the least remaining (0), yet the headers tell the open one's.
    assert_eq!(header(&r, "RateLimit-Limit"), Some("100"));
    assert_eq!(header(&r, "RateLimit-Remaining"), Some("99"));
    // Its status has no current_limit: Envoy's x-ratelimit-* skip it too.
    assert!(r.statuses[1].current_limit.is_none(), "{r:?}");
    assert!(r.statuses[0].current_limit.is_some());
    assert_eq!(r.statuses[1].limit_remaining, 0);
    // Denied by the hidden rule alone: no Retry-After telling when it resets.
    let r = call(&mut c, ask(&["open", "abuse"])).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(header(&r, "Retry-After"), None, "{r:?}");
    assert_eq!(header(&r, "RateLimit-Limit"), Some("100"));
    assert_eq!(header(&r, "x-blocked-by"), Some("abuse"));

    // The IETF style leaves it out of RateLimit-Policy as well.
    let ietf = sluice()
        .file("r.yaml", RULES)
        .env("LIMIT_RESPONSE_HEADERS_ENABLED", "true")
        .env("SLUICE_RESPONSE_HEADERS_STYLE", "ietf")
        .start()
        .await;
    let r = call(&mut ietf.client().await, ask(&["open", "abuse"])).await;
    let policy = header(&r, "RateLimit-Policy").expect("policy");
    assert!(
        policy.contains("r.open") && !policy.contains("abuse"),
        "{policy}"
    );
}
