//! Overload protection, functionally (no timing): past `--max-in-flight` calls being worked
//! on, a call is shed at once with RESOURCE_EXHAUSTED; a call whose `grpc-timeout` has
//! already passed is answered DEADLINE_EXCEEDED and never reaches the store. The offered-load
//! measurements (answered rate, shed rate, p99 at 1×, 1.5×, 2× capacity) are
//! `scripts/overload.sh`'s, recorded in RELIABILITY.md.

use std::time::Duration;

use tokio::net::TcpStream;

use crate::support::h2raw;
use crate::support::redis::RedisServer;
use crate::support::sluice::{Sluice, call, desc, req, sluice};

const RULES: &str =
    "domain: ov\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n";
const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

async fn start(redis: &RedisServer, extra: &[&str]) -> Sluice {
    sluice()
        .file("ov.yaml", RULES)
        .args(["--redis-url", &redis.url()])
        // Calls wait on a paused Redis for as long as the test needs, not a round trip.
        .args(["--redis-timeout", "60s"])
        .args(extra.iter().copied())
        .start_healthy()
        .await
}

/// Redis frozen: the first two calls hang in the store; every other call of a burst is
/// refused at once with RESOURCE_EXHAUSTED and counted as shed. Once Redis answers, the two
/// complete and the bound is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_max_in_flight_are_shed_with_resource_exhausted() {
    let redis = RedisServer::start();
    let s = start(&redis, &["--max-in-flight", "2"]).await;
    let mut c = s.client().await;
    call(&mut c, req("ov", vec![desc(&[("k", "warm")])])).await;

    redis.pause();
    let calls: Vec<_> = (0..10)
        .map(|i| {
            let mut c = c.clone();
            tokio::spawn(async move {
                c.should_rate_limit(req("ov", vec![desc(&[("k", &format!("v{i}"))])]))
                    .await
                    .map(|_| ())
                    .map_err(|e| (e.code(), e.message().to_owned()))
            })
        })
        .collect();
    // Eight answers come back while Redis is frozen: the shed ones.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while calls.iter().filter(|t| t.is_finished()).count() < 8 {
        assert!(std::time::Instant::now() < deadline, "no shedding");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let shed = s
        .metric("ratelimit_service_should_rate_limit_error{err_type=\"shed\"}")
        .await;
    redis.resume();
    let mut ok = 0;
    let mut refused = Vec::new();
    for t in calls {
        match t.await.expect("call task") {
            Ok(()) => ok += 1,
            Err(e) => refused.push(e),
        }
    }
    assert_eq!(ok, 2, "the two calls in flight were answered: {refused:?}");
    assert_eq!(refused.len(), 8);
    for (code, message) in &refused {
        assert_eq!(*code, tonic::Code::ResourceExhausted, "{message}");
        assert!(message.contains("--max-in-flight"), "{message}");
    }
    assert_eq!(shed, 8.0);
    // The bound is free again.
    call(&mut c, req("ov", vec![desc(&[("k", "after")])])).await;
}

/// A call whose deadline has passed (`grpc-timeout` 0, or 1 ns: gone before it is read) is
/// answered DEADLINE_EXCEEDED and does no work: nothing reaches Redis. A call with time
/// left is answered as usual.
#[tokio::test]
async fn calls_past_their_deadline_are_not_worked_on() {
    let redis = RedisServer::start();
    let s = start(&redis, &[]).await;
    let tcp = TcpStream::connect(s.grpc).await.expect("connect");
    let (mut send, conn) = h2raw::handshake(tcp).await;
    tokio::spawn(conn);
    let ask = req("ov", vec![desc(&[("k", "late")])]);
    let evals = redis.command_calls("evalsha");
    for timeout in ["0n", "1n", "0m"] {
        let (http, status, _) = h2raw::call_with_headers(
            &mut send,
            SHOULD_RATE_LIMIT,
            &[("grpc-timeout", timeout)],
            &ask,
        )
        .await
        .expect("answered");
        // 4: DEADLINE_EXCEEDED.
        assert_eq!((http, status.as_deref()), (200, Some("4")), "{timeout}");
    }
    assert_eq!(redis.command_calls("evalsha"), evals, "no store work");
    assert_eq!(redis.query::<i64>(&["DBSIZE"]), 0, "nothing counted");
    assert_eq!(
        s.metric("ratelimit_service_should_rate_limit_error{err_type=\"deadline_exceeded\"}")
            .await,
        3.0
    );

    // Time left (and a malformed header, ignored): served.
    for timeout in ["5S", "100000m", "soon"] {
        let (http, status, _) = h2raw::call_with_headers(
            &mut send,
            SHOULD_RATE_LIMIT,
            &[("grpc-timeout", timeout)],
            &ask,
        )
        .await
        .expect("answered");
        assert_eq!((http, status.as_deref()), (200, Some("0")), "{timeout}");
    }
    assert_eq!(redis.query::<i64>(&["DBSIZE"]), 1, "counted once served");
}
