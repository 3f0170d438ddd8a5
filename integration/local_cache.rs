//! The local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`) and stop-increment
//! (`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`) in process: Redis calls counted in `INFO
//! commandstats`, on the Redis store and (stop-increment) the memory store.

use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

use crate::support::in_process::*;
use crate::support::redis::RedisServer;
use crate::support::sluice::*;

fn rules() -> &'static str {
    "domain: d
descriptors:
  - key: limited
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: refunded
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: token_bucket}
  - key: debt
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: token_bucket, overdraft: true}
"
}

/// Every sample of a metric family whose labels contain `needle`, summed.
async fn family(s: &Server, name: &str, needle: &str) -> f64 {
    let (_, body) = s.http_get("/metrics").await;
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn on_redis(redis: &RedisServer, extra: &[(&str, &str)]) -> Server {
    let mut b = in_process().file("d.yaml", rules()).redis(redis.url());
    for (k, v) in extra {
        b = b.env(k, *v);
    }
    b.start_healthy().await
}

#[tokio::test]
async fn over_limit_traffic_is_answered_from_memory() {
    let redis = RedisServer::start();
    let s = on_redis(&redis, &[("LOCAL_CACHE_SIZE_IN_BYTES", "1048576")]).await;
    let mut c = s.client().await;
    let evalsha0 = redis.command_calls("evalsha");
    let (values, per_value) = (5, 200);
    let mut over = 0;
    for v in 0..values {
        for _ in 0..per_value {
            let r = call(&mut c, req("d", vec![desc(&[("limited", &v.to_string())])])).await;
            if r.overall_code == Code::OverLimit as i32 {
                over += 1;
            }
        }
    }
    assert_eq!(over, values * (per_value - 10));
    let calls = redis.command_calls("evalsha") - evalsha0;
    // 10 allowed and the first denial per value reach Redis; the other denials do not.
    let per_over_limit = (calls - values * 10) as f64 / f64::from(over as u32);
    eprintln!(
        "{calls} script calls for {} requests, {over} over the limit: {per_over_limit:.3} per over-limit request",
        values * per_value
    );
    assert_eq!(calls, values * 11);
    assert!(per_over_limit <= 0.05);
    let cached = family(
        &s,
        "ratelimit_service_rate_limit_over_limit_with_local_cache",
        "descriptor=\"d.limited\"",
    )
    .await;
    assert_eq!(cached, f64::from((values * (per_value - 11)) as u32));
    let all_over = family(
        &s,
        "ratelimit_service_rate_limit_over_limit",
        "descriptor=\"d.limited\"",
    )
    .await;
    assert_eq!(all_over, f64::from(over as u32));
    // A cached denial lasts as long as its window: the next minute asks Redis again.
    s.advance(Duration::from_secs(59));
    let before = redis.command_calls("evalsha");
    let r = call(&mut c, req("d", vec![desc(&[("limited", "0")])])).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(redis.command_calls("evalsha") - before, 1);
}

#[tokio::test]
async fn not_answered_from_memory_where_a_charge_or_a_refund_would_be_lost() {
    let redis = RedisServer::start();
    let s = in_process()
        .file("d.yaml", rules())
        .redis(redis.url())
        .arg("--local-cache-size-bytes")
        .arg("1048576")
        .start_healthy()
        .await;
    let mut c = s.client().await;

    // Overdraft: every denied hit is charged (debt), so each one goes to Redis.
    let debt = || req("d", vec![desc(&[("debt", "x")])]);
    for _ in 0..2 {
        assert_eq!(call(&mut c, debt()).await.overall_code, Code::Ok as i32);
    }
    let before = redis.command_calls("evalsha");
    for _ in 0..5 {
        assert_eq!(
            call(&mut c, debt()).await.overall_code,
            Code::OverLimit as i32
        );
    }
    assert_eq!(redis.command_calls("evalsha") - before, 5);

    // A refund lifts a denial early: it drops the cached one, and the next hit asks Redis.
    let hit = || req("d", vec![desc(&[("refunded", "x")])]);
    for _ in 0..2 {
        call(&mut c, hit()).await;
    }
    assert_eq!(
        call(&mut c, hit()).await.overall_code,
        Code::OverLimit as i32
    );
    let before = redis.command_calls("evalsha");
    assert_eq!(
        call(&mut c, hit()).await.overall_code,
        Code::OverLimit as i32
    );
    assert_eq!(
        redis.command_calls("evalsha"),
        before,
        "answered from memory"
    );
    let mut refund = desc(&[("refunded", "x")]);
    refund.is_negative_hits = true;
    call(&mut c, req("d", vec![refund])).await;
    assert_eq!(call(&mut c, hit()).await.overall_code, Code::Ok as i32);
    assert_eq!(redis.command_calls("evalsha") - before, 2);
}

fn their_rules() -> &'static str {
    "domain: another
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 10}
"
}

/// Their integration test: 15 requests with key2 (20/min) and key3 (10/h). key3 is over from
/// the 11th; with stop-increment key2 stays at remaining 10, without it key2 keeps counting.
async fn their_scenario(s: &Server, stop: bool) {
    let mut c = s.client().await;
    let value = format!("{}", std::process::id());
    for i in 1..=15u32 {
        let r = call(
            &mut c,
            req(
                "another",
                vec![desc(&[("key2", &value)]), desc(&[("key3", &value)])],
            ),
        )
        .await;
        let (key2, key3) = (&r.statuses[0], &r.statuses[1]);
        if i <= 10 {
            assert_eq!(r.overall_code, Code::Ok as i32, "request {i}");
            assert_eq!(key2.limit_remaining, 20 - i, "request {i}");
            assert_eq!(key3.limit_remaining, 10 - i, "request {i}");
        } else {
            assert_eq!(r.overall_code, Code::OverLimit as i32, "request {i}");
            assert_eq!(key2.code, Code::Ok as i32, "request {i}");
            assert_eq!(key3.code, Code::OverLimit as i32, "request {i}");
            let expected = if stop { 10 } else { 20 - i };
            assert_eq!(key2.limit_remaining, expected, "request {i} (stop: {stop})");
        }
    }
}

#[tokio::test]
async fn stop_increment_their_scenario_on_both_stores() {
    // Memory store, their variable.
    let s = in_process()
        .file("another.yaml", their_rules())
        .env("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true")
        .start()
        .await;
    their_scenario(&s, true).await;
    // Memory store, without it: key2 keeps counting.
    let s = in_process()
        .file("another.yaml", their_rules())
        .start()
        .await;
    their_scenario(&s, false).await;
    // Redis, the flag, with and without the local cache (its denials hold the others too).
    for cache in ["0", "1048576"] {
        let redis = RedisServer::start();
        let s = in_process()
            .file("another.yaml", their_rules())
            .redis(redis.url())
            .arg("--stop-increment-when-over-limit")
            .arg("--local-cache-size-bytes")
            .arg(cache)
            .start_healthy()
            .await;
        let before = redis.command_calls("evalsha");
        their_scenario(&s, true).await;
        assert_eq!(
            redis.command_calls("evalsha") - before,
            15,
            "one script call per request"
        );
    }
}
