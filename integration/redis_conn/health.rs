//! Health says whether decisions can be made: a Redis that refuses writes (OOM under
//! `maxmemory` + `noeviction`, a READONLY replica after `REPLICAOF`) for longer than the
//! refusal grace turns health NOT_SERVING, and it comes back by itself, without traffic,
//! when Redis accepts writes again.

use std::time::{Duration, Instant};

use sluice::store::{Store, StoreError};

use super::{config, hit, store};
use crate::support::redis::RedisServer;
use crate::support::sluice::{Sluice, call, desc, req, sluice};

#[tokio::test]
async fn the_store_is_not_ready_while_redis_refuses_writes_for_the_grace_period() {
    let redis = RedisServer::start();
    let s = store(sluice::store::redis::RedisConfig {
        refusal_grace: Duration::from_millis(300),
        ..config(&redis.url())
    });
    assert!(s.wait_ready(Duration::from_secs(10)).await);
    assert!(hit(&s, "a").await.is_ok());

    let _: String = redis.query(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let _: String = redis.query(&["CONFIG", "SET", "maxmemory", "1"]);
    let e = hit(&s, "a").await.expect_err("OOM");
    assert!(e.to_string().contains("OOM"), "{e}");
    // Redis's own error is kept as the source, to inspect as what it is.
    let StoreError::Unavailable(cause) = &e else {
        panic!("{e:?}")
    };
    let redis_error = cause
        .downcast_ref::<redis::ServerError>()
        .unwrap_or_else(|| panic!("not Redis's error: {cause:?}"));
    assert_eq!(redis_error.code(), "OOM");
    assert!(std::error::Error::source(&e).is_some());
    assert!(s.is_ready(), "one refusal is not yet sustained");
    // The health refresher probes while Redis refuses; the grace runs out.
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.is_ready() {
        assert!(Instant::now() < deadline, "still ready after the grace");
        s.probe().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _: String = redis.query(&["CONFIG", "SET", "maxmemory", "0"]);
    // No request: the probe alone sees the recovery.
    s.probe().await;
    assert!(s.is_ready());
    assert!(hit(&s, "a").await.is_ok());
}

async fn wait_health(s: &Sluice, code: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while s.http_get("/healthcheck").await.0 != code {
        assert!(Instant::now() < deadline, "health never {code}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn health_follows_oom_and_readonly_refusals() {
    let redis = RedisServer::start();
    let other = RedisServer::start();
    let s = sluice()
        .file(
            "h.yaml",
            "domain: h\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100}\n",
        )
        .arg("--redis-url")
        .arg(redis.url())
        .arg("--redis-refusal-grace")
        .arg("300ms")
        .arg("--redis-timeout")
        .arg("1s")
        .start()
        .await;
    wait_health(&s, 200, "at start").await;
    let mut c = s.client().await;
    let one = || req("h", vec![desc(&[("k", "v")])]);
    call(&mut c, one()).await;

    // OOM: one refused request, then health turns NOT_SERVING and back without traffic.
    let _: String = redis.query(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let _: String = redis.query(&["CONFIG", "SET", "maxmemory", "1"]);
    let e = c.should_rate_limit(one()).await.expect_err("OOM");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    wait_health(&s, 500, "while OOM").await;
    let _: String = redis.query(&["CONFIG", "SET", "maxmemory", "0"]);
    wait_health(&s, 200, "after OOM").await;
    call(&mut c, one()).await;

    // READONLY: the server becomes a replica.
    let port = other.port().to_string();
    let _: String = redis.query(&["REPLICAOF", "127.0.0.1", &port]);
    let e = c.should_rate_limit(one()).await.expect_err("READONLY");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    wait_health(&s, 500, "while a replica").await;
    let _: String = redis.query(&["REPLICAOF", "NO", "ONE"]);
    wait_health(&s, 200, "after REPLICAOF NO ONE").await;
    call(&mut c, one()).await;
}
