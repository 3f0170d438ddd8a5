//! Windows of several units (`unit_multiplier`) through sluice in process: the response's
//! `current_limit` states the exact rate, `limit_remaining` and the reset stay the real
//! window's, `/rlconfig` and the IETF headers state the window itself.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;

use super::limit_of;
use crate::support::in_process::*;
use crate::support::sluice::*;

const WINDOWS: &str = r#"
domain: w
descriptors:
  - key: five_minutes
    rate_limit: {name: five, unit: minute, unit_multiplier: 5, requests_per_unit: 100}
  - key: hour_in_minutes
    rate_limit: {unit: minute, unit_multiplier: 60, requests_per_unit: 7}
  - key: six_hours
    rate_limit: {unit: hour, unit_multiplier: 6, requests_per_unit: 1000, algorithm: gcra}
"#;

#[tokio::test]
async fn current_limit_states_the_rate_and_remaining_the_window() {
    let s = in_process().file("w.yaml", WINDOWS).start().await;
    let mut c = s.client().await;
    let r = call(&mut c, req("w", vec![desc(&[("five_minutes", "a")])])).await;
    let st = &r.statuses[0];
    // 100 per 5 minutes is exactly 20 per minute; the window still holds 99 more.
    assert_eq!(limit_of(st), (20, Unit::Minute as i32, "five".into()));
    assert_eq!(st.limit_remaining, 99);
    // The test's clock stands one second into the 5-minute window.
    let reset = st.duration_until_reset.expect("reset").seconds;
    assert_eq!(reset, 299, "the rest of the 5-minute window");
    // A window that is a whole unit is reported as that unit.
    let r = call(&mut c, req("w", vec![desc(&[("hour_in_minutes", "a")])])).await;
    assert_eq!(
        limit_of(&r.statuses[0]),
        (7, Unit::Hour as i32, String::new())
    );
    // 1000 per 6 hours = 4000 per day.
    let r = call(&mut c, req("w", vec![desc(&[("six_hours", "a")])])).await;
    assert_eq!(
        limit_of(&r.statuses[0]),
        (4000, Unit::Day as i32, String::new())
    );
    assert_eq!(r.statuses[0].limit_remaining, 999);
}

#[tokio::test]
async fn rlconfig_states_the_multiplier_next_to_the_unit() {
    let s = in_process().file("w.yaml", WINDOWS).start().await;
    let (code, body) = s.http_get("/rlconfig").await;
    assert_eq!(code, 200);
    assert!(
        body.lines().any(|l| l
            == "w.five_minutes: unit=MINUTE unit_multiplier=5 requests_per_unit=100, shadow_mode: false, quota_mode: false, algorithm=fixed_window"),
        "{body}"
    );
}

#[tokio::test]
async fn ietf_headers_state_the_whole_window() {
    let s = in_process()
        .file("w.yaml", WINDOWS)
        .arg("--response-headers")
        .arg("true")
        .arg("--response-headers-style")
        .arg("ietf")
        .start()
        .await;
    let mut c = s.client().await;
    let r = call(&mut c, req("w", vec![desc(&[("five_minutes", "a")])])).await;
    assert_eq!(header(&r, "RateLimit-Policy"), Some("\"five\";q=100;w=300"));
    assert!(
        header(&r, "RateLimit").is_some_and(|h| h.starts_with("\"five\";r=99;t=")),
        "{r:?}"
    );
}

#[tokio::test]
async fn draft03_headers_state_the_window_quota() {
    let s = in_process()
        .file("w.yaml", WINDOWS)
        .arg("--response-headers")
        .arg("true")
        .start()
        .await;
    let mut c = s.client().await;
    let r = call(&mut c, req("w", vec![desc(&[("five_minutes", "a")])])).await;
    // The quota of the window, counted down by Remaining, reset within the 5 minutes.
    assert_eq!(header(&r, "RateLimit-Limit"), Some("100"));
    assert_eq!(header(&r, "RateLimit-Remaining"), Some("99"));
    assert_eq!(header(&r, "RateLimit-Reset"), Some("299"));
}
