//! `LIMIT_REQUEST_HEADERS_ENABLED` (their pull request #1168): the response carries
//! `request_headers_to_add`, which Envoy adds to the request it forwards upstream, with
//! their three headers for the descriptor their response headers would report, under the
//! names `LIMIT_REQUEST_*_HEADER` give; the response headers stay as they are.

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;

use super::*;

fn request_header<'r>(r: &'r RateLimitResponse, name: &str) -> Option<&'r str> {
    r.request_headers_to_add
        .iter()
        .find(|h| h.key == name)
        .map(|h| h.value.as_str())
}

#[tokio::test]
async fn the_upstream_gets_limit_remaining_and_reset_under_their_names() {
    let s = sluice()
        .file("d.yaml", RULES)
        .env("LIMIT_REQUEST_HEADERS_ENABLED", "true")
        .env("LIMIT_REQUEST_REMAINING_HEADER", "x-upstream-remaining")
        .start()
        .await;
    let named = sluice()
        .file("d.yaml", RULES)
        .env("LIMIT_REQUEST_HEADERS_ENABLED", "true")
        .env("LIMIT_REQUEST_LIMIT_HEADER", "x-upstream-limit")
        .env("LIMIT_REQUEST_RESET_HEADER", "x-upstream-reset")
        .start()
        .await;
    let r = call(&mut named.client().await, ask()).await;
    assert_eq!(request_header(&r, "x-upstream-limit"), Some("2"));
    assert_eq!(request_header(&r, "RateLimit-Remaining"), Some("1"));
    assert!(request_header(&r, "x-upstream-reset").is_some(), "{r:?}");
    let mut c = s.client().await;
    let r = call(&mut c, ask()).await;
    assert_eq!(r.request_headers_to_add.len(), 3, "{r:?}");
    assert_eq!(request_header(&r, "RateLimit-Limit"), Some("2"));
    assert_eq!(request_header(&r, "x-upstream-remaining"), Some("1"));
    let reset: u64 = request_header(&r, "RateLimit-Reset")
        .expect("reset")
        .parse()
        .expect("seconds");
    assert!((1..=3600).contains(&reset), "{reset}");
    assert!(r.response_headers_to_add.is_empty(), "{r:?}");
    call(&mut c, ask()).await;
    let r = call(&mut c, ask()).await;
    assert_eq!(request_header(&r, "x-upstream-remaining"), Some("0"));

    // A descriptor no rule limits: nothing to tell.
    let r = call(&mut c, req("d", vec![desc(&[("other", "v")])])).await;
    assert!(r.request_headers_to_add.is_empty(), "{r:?}");
}

#[tokio::test]
async fn off_by_default() {
    let s = sluice().file("d.yaml", RULES).start().await;
    let r = call(&mut s.client().await, ask()).await;
    assert!(r.request_headers_to_add.is_empty(), "{r:?}");
}
