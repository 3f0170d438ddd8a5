//! Envoy's quota protocol (RLQS) through the real binary: envoy-types' generated client
//! acting as several Envoys, each a stream of usage reports, on the memory store and on two
//! replicas sharing one real redis-server.

use std::time::Duration;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::{BucketId, RateLimitQuotaUsageReports};
use tonic::Code;

use crate::support::redis::RedisServer;
use crate::support::sluice::*;

mod chunks;
pub(crate) mod envoy;
mod lifecycle;
mod shares;
mod store;
mod tls;
mod tools;

pub(crate) use envoy::*;

/// 100 requests a minute for `name=api`; `name=open` unlimited; `name=closed` 0; the
/// two-level `name=shop` → `tier=gold` (a bucket's keys, sorted).
pub(crate) const RULES: &str = "\
domain: rlqs
descriptors:
  - key: name
    value: api
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: name
    value: open
    rate_limit: {unlimited: true}
  - key: name
    value: closed
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: name
    value: shop
    descriptors:
      - key: tier
        value: gold
        rate_limit: {unit: second, requests_per_unit: 10}
";

pub(crate) async fn start(extra: &[&str]) -> Sluice {
    sluice()
        .file("rlqs.yaml", RULES)
        .args(["--rlqs-min-share", "0.01"])
        .args(extra.iter().copied())
        .start()
        .await
}

#[tokio::test]
async fn first_report_subscribes_and_gets_an_assignment() {
    let s = start(&["--rlqs-assignment-ttl", "30s"]).await;
    let mut e = Envoy::connect(&s, "rlqs").await;
    let api = bucket(&[("name", "api")]);
    let a = e.report(&api, 0, 0).await;
    match got(&a) {
        // Alone: everything but one floor (1 % of 100), kept free for a newcomer.
        // A second of it banked.
        (
            Got::Tokens {
                tokens,
                burst,
                fill_ms,
            },
            Some(ttl),
        ) => {
            assert_eq!((tokens, burst, fill_ms, ttl), (99, 2, 60_000, 30_000));
        }
        _ => panic!("{a:?}"),
    }
    assert_eq!(s.metric("sluice_rlqs_streams{domain=\"rlqs\"}").await, 1.0);
    assert_eq!(s.metric("sluice_rlqs_buckets{domain=\"rlqs\"}").await, 1.0);
    assert_eq!(
        s.metric("sluice_rlqs_assignments_total{action=\"token_bucket\",domain=\"rlqs\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn buckets_map_to_descriptors_sorted_by_key() {
    let s = start(&[]).await;
    let mut e = Envoy::connect(&s, "rlqs").await;
    // {tier, name} in any order is name=shop,tier=gold: 10 a second.
    let shop = bucket(&[("tier", "gold"), ("name", "shop")]);
    let open = bucket(&[("name", "open")]);
    let closed = bucket(&[("name", "closed")]);
    let unknown = bucket(&[("name", "nothing-matches")]);
    e.send(vec![
        usage(&shop, 3, 0, 1000),
        usage(&open, 1, 0, 1000),
        usage(&closed, 0, 1, 1000),
        usage(&unknown, 1, 0, 1000),
    ])
    .await;
    let r = e.next().await.unwrap().unwrap();
    assert_eq!(r.bucket_action.len(), 4, "{r:?}");
    let find = |b: &BucketId| {
        r.bucket_action
            .iter()
            .find(|a| a.bucket_id.as_ref() == Some(b))
            .cloned()
            .expect("an action per bucket")
    };
    // A rule of a second banks its whole share.
    assert!(matches!(
        got(&find(&shop)).0,
        Got::Tokens {
            tokens: 9,
            burst: 9,
            fill_ms: 1000
        }
    ));
    assert!(matches!(got(&find(&open)).0, Got::Allow));
    assert!(matches!(got(&find(&closed)).0, Got::Deny));
    // Unmatched: as RLS answers an unmatched descriptor, nothing is enforced.
    assert!(matches!(got(&find(&unknown)).0, Got::Allow));
    // Usage is counted per domain, allowed and denied.
    assert_eq!(
        s.metric("sluice_rlqs_usage_total{domain=\"rlqs\",outcome=\"allowed\"}")
            .await,
        5.0
    );
    assert_eq!(
        s.metric("sluice_rlqs_usage_total{domain=\"rlqs\",outcome=\"denied\"}")
            .await,
        1.0
    );
}

/// Two Envoys reporting 3:1 demand (allowed + denied per second), alternately: their shares
/// settle near 3:1, never adding up to more than the limit. Few requests are reported
/// allowed, so the minute's window stays under the limit whatever the tests add.
pub(crate) async fn three_to_one(a: &mut Envoy, b: &mut Envoy) -> (u32, u32) {
    let api = bucket(&[("name", "api")]);
    let first = tokens(&a.report(&api, 1, 29).await);
    // B arrives while A holds 99: it starts on the floor kept free.
    let second = tokens(&b.report(&api, 1, 9).await);
    assert_eq!((first, second), (99, 1));
    let ta = tokens(&a.report(&api, 1, 29).await);
    let tb = tokens(&b.report(&api, 1, 9).await);
    assert!(ta + tb <= 100, "{ta} + {tb}");
    (ta, tb)
}

#[tokio::test]
async fn shares_follow_demand_and_never_exceed_the_limit() {
    let s = start(&[]).await;
    let mut a = Envoy::connect(&s, "rlqs").await;
    let mut b = Envoy::connect(&s, "rlqs").await;
    let (ta, tb) = three_to_one(&mut a, &mut b).await;
    let ratio = f64::from(ta) / f64::from(tb);
    assert!((2.5..=3.5).contains(&ratio), "{ta}:{tb}");
    assert!(ta + tb >= 95, "the limit is used: {ta} + {tb}");
}

#[tokio::test]
async fn a_disconnected_envoys_share_goes_to_the_others() {
    let s = start(&[]).await;
    let mut a = Envoy::connect(&s, "rlqs").await;
    let mut b = Envoy::connect(&s, "rlqs").await;
    let (ta, _) = three_to_one(&mut a, &mut b).await;
    b.close();
    drop(b);
    // The server sees the stream end and unsubscribes it.
    let deadline = std::time::Instant::now() + WITHIN;
    while s.metric("sluice_rlqs_streams{domain=\"rlqs\"}").await != 1.0 {
        assert!(std::time::Instant::now() < deadline, "stream end not seen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let api = bucket(&[("name", "api")]);
    let alone = tokens(&a.report(&api, 1, 29).await);
    assert!(alone > ta, "{alone} after {ta}");
    assert_eq!(alone, 99);
}

#[tokio::test]
async fn two_replicas_on_one_redis_split_one_limit() {
    let redis = RedisServer::start();
    let one = sluice()
        .file("rlqs.yaml", RULES)
        .redis(redis.url())
        .args(["--rlqs-min-share", "0.01"])
        .start_healthy()
        .await;
    let two = sluice()
        .file("rlqs.yaml", RULES)
        .redis(redis.url())
        .args(["--rlqs-min-share", "0.01"])
        .start_healthy()
        .await;
    let mut a = Envoy::connect(&one, "rlqs").await;
    let mut b = Envoy::connect(&two, "rlqs").await;
    let (ta, tb) = three_to_one(&mut a, &mut b).await;
    let ratio = f64::from(ta) / f64::from(tb);
    assert!((2.5..=3.5).contains(&ratio), "{ta}:{tb}");
    // Replica two's Envoy leaves: replica one's gets the whole limit back.
    b.close();
    drop(b);
    let deadline = std::time::Instant::now() + WITHIN;
    while two.metric("sluice_rlqs_streams{domain=\"rlqs\"}").await != 0.0 {
        assert!(std::time::Instant::now() < deadline, "stream end not seen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let api = bucket(&[("name", "api")]);
    assert_eq!(tokens(&a.report(&api, 1, 29).await), 99);
}

#[tokio::test]
async fn malformed_streams_get_invalid_argument_and_nothing_else_breaks() {
    let s = start(&[]).await;
    let api = bucket(&[("name", "api")]);
    // A healthy stream beside the bad ones.
    let mut good = Envoy::connect(&s, "rlqs").await;
    assert_eq!(tokens(&good.report(&api, 0, 0).await), 99);

    // No domain on the first message.
    let mut e = Envoy::connect(&s, "").await;
    e.send(vec![usage(&api, 1, 0, 1000)]).await;
    let err = e.next().await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("domain"), "{}", err.message());

    // Another domain later on the stream.
    let mut e = Envoy::connect(&s, "rlqs").await;
    e.report(&api, 0, 0).await;
    e.send_raw(RateLimitQuotaUsageReports {
        domain: "other".into(),
        bucket_quota_usages: vec![usage(&api, 1, 0, 1000)],
    })
    .await;
    let err = loop {
        match e.next().await {
            Err(err) => break err,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("stream ended without an error"),
        }
    };
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");

    // A bucket without entries.
    let mut e = Envoy::connect(&s, "rlqs").await;
    e.send(vec![usage(&BucketId::default(), 1, 0, 1000)]).await;
    let err = e.next().await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("bucket_id"), "{}", err.message());

    // The healthy stream, a new one and ShouldRateLimit all still work.
    assert!(matches!(
        got(&good.report(&bucket(&[("name", "open")]), 0, 0).await).0,
        Got::Allow
    ));
    let mut fresh = Envoy::connect(&s, "rlqs").await;
    let closed = bucket(&[("name", "closed")]);
    assert!(matches!(
        got(&fresh.report(&closed, 0, 0).await).0,
        Got::Deny
    ));
    let mut c = s.client().await;
    let r = call(&mut c, req("rlqs", vec![desc(&[("name", "api")])])).await;
    assert_eq!(r.overall_code, 1, "OK: {r:?}");
    assert!(
        s.metric("sluice_rlqs_errors_total{reason=\"invalid\"}")
            .await
            >= 3.0
    );
}

/// Bytes that are not a `RateLimitQuotaUsageReports` (a gRPC frame of garbage): the stream
/// ends with `INVALID_ARGUMENT`, and the server goes on serving.
#[tokio::test]
async fn an_undecodable_report_is_invalid_argument() {
    use crate::support::h2raw;
    let s = start(&[]).await;
    let tcp = tokio::net::TcpStream::connect(s.grpc)
        .await
        .expect("connect");
    let (mut send, conn) = h2raw::handshake(tcp).await;
    tokio::spawn(conn);
    let path = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas";
    let (resp, mut stream) = h2raw::start(&mut send, path).await.expect("start");
    // A length-prefixed message whose body is an unterminated varint field.
    static GARBAGE: [u8; 8] = [0, 0, 0, 0, 3, 0x08, 0xff, 0xff];
    stream
        .send_data(prost::bytes::Bytes::from_static(&GARBAGE), true)
        .expect("send");
    let (_, status, _) = tokio::time::timeout(WITHIN, h2raw::finish(resp))
        .await
        .expect("an answer in time")
        .expect("finish");
    assert_eq!(status.as_deref(), Some("3"), "INVALID_ARGUMENT");
    let mut e = Envoy::connect(&s, "rlqs").await;
    let api = bucket(&[("name", "api")]);
    assert_eq!(tokens(&e.report(&api, 0, 0).await), 99);
}
