//! ShouldRateLimit through sluice in process (in-memory store): matching, decisions and
//! every status field, as envoyproxy/ratelimit defines them.

use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};

use crate::support::in_process::*;
use crate::support::sluice::*;

mod bytes;
mod decision;
mod requests;
mod rule_response;
mod tokens;
mod windows;

const RULES: &str = r#"
domain: test
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: {unit: second, requests_per_unit: 5}
      - key: subkey1
        value: subvalue1
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: key1
    descriptors:
      - key: other
        rate_limit: {unit: hour, requests_per_unit: 9}
  - key: per_minute
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: wild
    value: foo*
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: wild
    value: f*
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: wild
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: wild
    value: foobar
    rate_limit: {unit: hour, requests_per_unit: 7}
  - key: internal
    rate_limit: {unlimited: true}
  - key: banned
    rate_limit: {unit: hour, requests_per_unit: 0, name: banned_limit}
  - key: vip
    rate_limit:
      unit: hour
      requests_per_unit: 1000
      replaces: [{name: banned_limit}]
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: files_no_share
    value: files_no_share/*
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: named
    rate_limit: {unit: day, requests_per_unit: 4, name: named_limit}
  - key: cost
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: busy
    rate_limit: {unit: hour, requests_per_unit: 200}
"#;

async fn start() -> Server {
    in_process().file("test.yaml", RULES).start().await
}

fn status(r: &RateLimitResponse, i: usize) -> &DescriptorStatus {
    &r.statuses[i]
}

fn limit_of(s: &DescriptorStatus) -> (u32, i32, String) {
    let l = s.current_limit.as_ref().expect("current_limit");
    (l.requests_per_unit, l.unit, l.name.clone())
}

async fn one(c: &mut Client, pairs: &[(&str, &str)]) -> RateLimitResponse {
    call(c, req("test", vec![desc(pairs)])).await
}

fn is_bare_ok(s: &DescriptorStatus) -> bool {
    s.code == Code::Ok as i32
        && s.current_limit.is_none()
        && s.limit_remaining == 0
        && s.duration_until_reset.is_none()
}

#[tokio::test]
async fn unknown_domain_and_unmatched_descriptors_are_bare_ok() {
    let s = start().await;
    let mut c = s.client().await;
    let r = call(&mut c, req("nope", vec![desc(&[("key1", "value1")])])).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert!(is_bare_ok(status(&r, 0)));
    // Only key1_value1 exists at level 1 with no limit of its own.
    assert!(is_bare_ok(status(
        &one(&mut c, &[("key1", "value1")]).await,
        0
    )));
    // Unknown key.
    assert!(is_bare_ok(status(&one(&mut c, &[("zzz", "1")]).await, 0)));
    // A limit applies only where the request ends: too deep.
    let r = one(&mut c, &[("per_minute", "x"), ("extra", "y")]).await;
    assert!(is_bare_ok(status(&r, 0)));
    // An empty descriptor matches nothing.
    assert!(is_bare_ok(status(&one(&mut c, &[]).await, 0)));
}

#[tokio::test]
async fn exact_then_wildcards_in_order_then_default() {
    let s = start().await;
    let mut c = s.client().await;
    let rpu = |r: &RateLimitResponse| limit_of(status(r, 0)).0;
    assert_eq!(rpu(&one(&mut c, &[("wild", "foobar")]).await), 7);
    assert_eq!(rpu(&one(&mut c, &[("wild", "foozz")]).await), 3);
    assert_eq!(rpu(&one(&mut c, &[("wild", "fzz")]).await), 4);
    assert_eq!(rpu(&one(&mut c, &[("wild", "other")]).await), 100);
    // Nested: exact level-1 value, then key-only child.
    let r = one(&mut c, &[("key1", "value1"), ("subkey1", "x")]).await;
    assert_eq!(limit_of(status(&r, 0)).0, 5);
    assert_eq!(limit_of(status(&r, 0)).1, Unit::Second as i32);
    let r = one(&mut c, &[("key1", "value1"), ("subkey1", "subvalue1")]).await;
    assert_eq!(limit_of(status(&r, 0)).0, 10);
}

#[tokio::test]
async fn no_backtracking_after_an_exact_match() {
    let s = start().await;
    let mut c = s.client().await;
    // key1_value1 matched exactly, and has no `other` child: the key-only `key1` branch
    // (which has one) is never tried.
    let r = one(&mut c, &[("key1", "value1"), ("other", "x")]).await;
    assert!(is_bare_ok(status(&r, 0)));
    let r = one(&mut c, &[("key1", "value2"), ("other", "x")]).await;
    assert_eq!(limit_of(status(&r, 0)).0, 9);
}

#[tokio::test]
async fn twenty_per_minute_counts_down_then_over_limit_until_the_next_minute() {
    let s = start().await;
    let mut c = s.client().await;
    for i in 1..=25u32 {
        let r = one(&mut c, &[("per_minute", "10.0.0.1")]).await;
        let st = status(&r, 0);
        assert_eq!(limit_of(st), (20, Unit::Minute as i32, String::new()));
        // The clock stands one second into the minute.
        let d = st.duration_until_reset.as_ref().unwrap();
        assert!(d.seconds == 59 && d.nanos == 0, "{d:?}");
        if i <= 20 {
            assert_eq!(st.code, Code::Ok as i32, "request {i}");
            assert_eq!(st.limit_remaining, 20 - i, "request {i}");
            assert_eq!(r.overall_code, Code::Ok as i32);
        } else {
            assert_eq!(st.code, Code::OverLimit as i32, "request {i}");
            assert_eq!(st.limit_remaining, 0);
            assert_eq!(r.overall_code, Code::OverLimit as i32);
        }
    }
    // Another value has its own counter.
    let r = one(&mut c, &[("per_minute", "10.0.0.2")]).await;
    assert_eq!(status(&r, 0).limit_remaining, 19);
    // The last millisecond of the minute is still over; the next minute starts afresh.
    s.advance(Duration::from_millis(58_999));
    let r = one(&mut c, &[("per_minute", "10.0.0.1")]).await;
    assert_eq!(status(&r, 0).code, Code::OverLimit as i32);
    s.advance(Duration::from_millis(1));
    let r = one(&mut c, &[("per_minute", "10.0.0.1")]).await;
    assert_eq!(status(&r, 0).code, Code::Ok as i32);
    assert_eq!(status(&r, 0).limit_remaining, 19);
}

#[tokio::test]
async fn two_descriptors_in_one_request() {
    let s = start().await;
    let mut c = s.client().await;
    let r = call(
        &mut c,
        req(
            "test",
            vec![
                desc(&[("named", "a")]),
                desc(&[("banned", "x")]),
                desc(&[("zzz", "1")]),
            ],
        ),
    )
    .await;
    assert_eq!(r.statuses.len(), 3);
    assert_eq!(status(&r, 0).code, Code::Ok as i32);
    assert_eq!(
        limit_of(status(&r, 0)),
        (4, Unit::Day as i32, "named_limit".into())
    );
    assert_eq!(status(&r, 0).limit_remaining, 3);
    assert_eq!(status(&r, 1).code, Code::OverLimit as i32);
    assert_eq!(limit_of(status(&r, 1)).2, "banned_limit");
    assert!(is_bare_ok(status(&r, 2)));
    assert_eq!(r.overall_code, Code::OverLimit as i32);
}

#[tokio::test]
async fn unlimited_and_replaces() {
    let s = start().await;
    let mut c = s.client().await;
    let r = one(&mut c, &[("internal", "svc")]).await;
    let st = status(&r, 0);
    assert_eq!(
        (
            st.code,
            st.limit_remaining,
            st.current_limit.is_none(),
            st.duration_until_reset.is_none()
        ),
        (Code::Ok as i32, u32::MAX, true, true)
    );
    assert_eq!(
        one(&mut c, &[("banned", "x")]).await.overall_code,
        Code::OverLimit as i32
    );
    // vip replaces banned_limit: banned is dropped (bare OK), vip applies.
    let r = call(
        &mut c,
        req(
            "test",
            vec![desc(&[("banned", "x")]), desc(&[("vip", "y")])],
        ),
    )
    .await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert!(is_bare_ok(status(&r, 0)));
    assert_eq!(limit_of(status(&r, 1)).0, 1000);
}

#[tokio::test]
async fn request_overrides_need_a_known_domain() {
    let s = start().await;
    let mut c = s.client().await;
    for i in 0..3 {
        let r = call(
            &mut c,
            req(
                "test",
                vec![desc_override(&[("anything", "v")], 2, Unit::Hour as i32)],
            ),
        )
        .await;
        let st = status(&r, 0);
        assert_eq!(limit_of(st).0, 2);
        let want = if i < 2 { Code::Ok } else { Code::OverLimit };
        assert_eq!(st.code, want as i32, "hit {i}");
    }
    let r = call(
        &mut c,
        req(
            "nope",
            vec![desc_override(&[("anything", "v")], 2, Unit::Hour as i32)],
        ),
    )
    .await;
    assert!(is_bare_ok(status(&r, 0)));
}

#[tokio::test]
async fn per_rule_shadow_mode_reports_ok_with_zero_remaining() {
    let s = start().await;
    let mut c = s.client().await;
    assert_eq!(
        status(&one(&mut c, &[("shadow", "a")]).await, 0).limit_remaining,
        0
    );
    let r = one(&mut c, &[("shadow", "a")]).await;
    let st = status(&r, 0);
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!((st.code, st.limit_remaining), (Code::Ok as i32, 0));
    assert!(st.current_limit.is_some() && st.duration_until_reset.is_some());
}

#[tokio::test]
async fn global_shadow_mode_flips_only_the_overall_code() {
    let s = in_process()
        .file("test.yaml", RULES)
        .env("SHADOW_MODE", "true")
        .start()
        .await;
    let mut c = s.client().await;
    let r = one(&mut c, &[("banned", "x")]).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(status(&r, 0).code, Code::OverLimit as i32);
}

#[tokio::test]
async fn quota_descriptors_deny_only_together() {
    let s = start().await;
    let mut c = s.client().await;
    let two = || {
        req(
            "test",
            vec![desc(&[("quota", "a")]), desc(&[("quota", "b")])],
        )
    };
    // Use up quota a only.
    one(&mut c, &[("quota", "a")]).await;
    let r = call(&mut c, two()).await;
    assert_eq!(status(&r, 0).code, Code::OverLimit as i32);
    assert_eq!(status(&r, 1).code, Code::Ok as i32);
    assert_eq!(r.overall_code, Code::Ok as i32, "one quota left");
    let r = call(&mut c, two()).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32, "all quotas over");
}

#[tokio::test]
async fn share_threshold_shares_one_counter_per_pattern() {
    let s = start().await;
    let mut c = s.client().await;
    for i in 0..10 {
        let r = one(&mut c, &[("files", &format!("files/{i}.pdf"))]).await;
        assert_eq!(status(&r, 0).limit_remaining, 9 - i);
    }
    let r = one(&mut c, &[("files", "files/b.csv")]).await;
    assert_eq!(status(&r, 0).code, Code::OverLimit as i32);
    for i in 0..10 {
        let r = one(
            &mut c,
            &[("files_no_share", &format!("files_no_share/{i}"))],
        )
        .await;
        assert_eq!(status(&r, 0).limit_remaining, 9);
    }
}

#[tokio::test]
async fn costs_peeks_and_refunds() {
    let s = start().await;
    let mut c = s.client().await;
    let remaining = |r: &RateLimitResponse| status(r, 0).limit_remaining;
    // Descriptor-level hits_addend.
    let r = call(&mut c, req("test", vec![desc_hits(&[("cost", "a")], 3)])).await;
    assert_eq!(remaining(&r), 7);
    // 0 = peek: nothing consumed.
    let r = call(&mut c, req("test", vec![desc_hits(&[("cost", "a")], 0)])).await;
    assert_eq!((remaining(&r), status(&r, 0).code), (7, Code::Ok as i32));
    // Request-level hits_addend applies when the descriptor has none.
    let mut r2 = req("test", vec![desc(&[("cost", "a")])]);
    r2.hits_addend = 2;
    assert_eq!(remaining(&call(&mut c, r2).await), 5);
    // Refund 4: back to 9 (never below empty: refund 100 → 10).
    let mut refund = desc_hits(&[("cost", "a")], 4);
    refund.is_negative_hits = true;
    let r = call(&mut c, req("test", vec![refund.clone()])).await;
    assert_eq!((remaining(&r), r.overall_code), (9, Code::Ok as i32));
    refund.hits_addend = Some(envoy_types::pb::google::protobuf::UInt64Value { value: 100 });
    assert_eq!(
        remaining(&call(&mut c, req("test", vec![refund])).await),
        10
    );
    // A cost above the remaining quota is denied and (fixed window) still counted.
    let r = call(&mut c, req("test", vec![desc_hits(&[("cost", "a")], 11)])).await;
    assert_eq!(status(&r, 0).code, Code::OverLimit as i32);
}

#[tokio::test]
async fn concurrent_clients_get_exactly_the_limit() {
    let s = start().await;
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let mut c = s.client().await;
        tasks.push(tokio::spawn(async move {
            let mut ok = 0;
            for _ in 0..25 {
                let r = call(&mut c, req("test", vec![desc(&[("busy", "k")])])).await;
                if r.overall_code == Code::Ok as i32 {
                    ok += 1;
                }
            }
            ok
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 200, "500 hits against 200/hour");
}
