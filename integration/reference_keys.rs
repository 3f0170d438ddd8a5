//! `--redis-reference-keys` (`src/store/redis/reference.rs`): against keys written exactly
//! as envoyproxy/ratelimit writes them (`INCRBY key hits` + `EXPIRE`, key
//! `CACHE_KEY_PREFIX + domain + "_" + Σ(key + "_" + value + "_") + windowStart`, their
//! `src/limiter/cache_key.go` and `src/redis/fixed_cache_impl.go`), sluice (in process, on
//! the local time source their keys need) counts the same counter: their pods' hits count
//! against sluice's answers and sluice's hits are in the count theirs read. Checks that are
//! not their fixed window keep sluice's own keys.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;

use crate::support::in_process::*;
use crate::support::redis::RedisServer;
use crate::support::sluice::*;

const RULES: &str = r#"domain: mig
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: files
    value: "files/*"
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: sliding
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: sliding_window}
  - key: pair
    rate_limits:
      - {unit: hour, requests_per_unit: 5}
      - {unit: day, requests_per_unit: 50}
"#;

/// The hour window's start in Unix seconds, as their `windowStart` for an HOUR limit, on
/// the server's clock (the local time source: theirs is their pods' clock too).
fn hour_start(s: &Server) -> u64 {
    let now = s.now_ms() / 1000;
    now - now % 3600
}

/// What one of their pods sends for a hit on `key` (jitter left out).
fn their_hit(redis: &RedisServer, key: &str, hits: u64) -> i64 {
    let n: i64 = redis.query(&["INCRBY", key, &hits.to_string()]);
    let _: i64 = redis.query(&["EXPIRE", key, "3600"]);
    n
}

async fn start(redis: &RedisServer) -> Server {
    in_process()
        .file("mig.yaml", RULES)
        .redis(redis.url())
        .arg("--redis-reference-keys")
        .env("CACHE_KEY_PREFIX", "rl:")
        .start_healthy()
        .await
}

#[tokio::test]
async fn their_pods_and_sluice_share_one_count() {
    let redis = RedisServer::start();
    let s = start(&redis).await;
    let mut c = s.client().await;
    let ws = hour_start(&s);
    let key = format!("rl:mig_user_alice_{ws}");

    // Their pod counted 3 hits; sluice's next one is the 4th of 5.
    assert_eq!(their_hit(&redis, &key, 3), 3);
    let r = call(&mut c, req("mig", vec![desc(&[("user", "alice")])])).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 1);
    assert_eq!(redis.query::<i64>(&["GET", &key]), 4);
    let ttl: i64 = redis.query(&["TTL", &key]);
    assert!(ttl > 0 && ttl <= 3600 + 10, "ttl {ttl}");
    // Their pod's 5th, then sluice's 6th is over the limit (and counted, as theirs would).
    assert_eq!(their_hit(&redis, &key, 1), 5);
    let r = call(&mut c, req("mig", vec![desc(&[("user", "alice")])])).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(
        their_hit(&redis, &key, 1),
        7,
        "their pod sees sluice's hits"
    );

    // share_threshold: the pattern in place of the value, one counter for every match.
    for v in ["files/a", "files/b"] {
        let r = call(&mut c, req("mig", vec![desc(&[("files", v)])])).await;
        assert_eq!(r.overall_code, Code::Ok as i32);
    }
    assert_eq!(
        redis.query::<i64>(&["GET", &format!("rl:mig_files_files/*_{ws}")]),
        2
    );

    // A request override: their key from the entries as sent; hits_addend as INCRBY's.
    let d = RateLimitDescriptor {
        hits_addend: desc_hits(&[], 3).hits_addend,
        ..desc_override(&[("user", "bob")], 10, Unit::Hour as i32)
    };
    let r = call(&mut c, req("mig", vec![d])).await;
    assert_eq!(r.statuses[0].limit_remaining, 7);
    assert_eq!(
        redis.query::<i64>(&["GET", &format!("rl:mig_user_bob_{ws}")]),
        3
    );

    // Not their fixed window (another algorithm, several limits): sluice's own keys, so
    // nothing under their names; both still answered in the same request.
    let r = call(
        &mut c,
        req(
            "mig",
            vec![
                desc(&[("sliding", "x")]),
                desc(&[("user", "carol")]),
                desc(&[("pair", "y")]),
            ],
        ),
    )
    .await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(
        r.statuses
            .iter()
            .map(|s| s.limit_remaining)
            .collect::<Vec<_>>(),
        [4, 4, 4]
    );
    for theirs in [
        format!("rl:mig_sliding_x_{ws}"),
        format!("rl:mig_pair_y_{ws}"),
    ] {
        assert_eq!(redis.query::<i64>(&["EXISTS", &theirs]), 0, "{theirs}");
    }
    assert_eq!(
        redis.query::<i64>(&["GET", &format!("rl:mig_user_carol_{ws}")]),
        1
    );
    let ours: Vec<String> = redis.query(&["KEYS", "rl:{*"]);
    assert_eq!(ours.len(), 3, "sliding, and pair's two limits: {ours:?}");
}
