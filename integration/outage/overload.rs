//! Overload with the fallback (`--store-failure-mode local`): calls that cannot get a
//! timely store answer are decided by the local view, counted as
//! `sluice_local_decisions_total{reason="overload"}`, without the store being called
//! degraded (health stays SERVING), and Redis ends holding exactly the hits answered OK.
//! Two ways in, against a real Redis behind a delaying proxy: calls admission refuses (the
//! one in-flight slot held), and calls whose round trip outlasts half their deadline, the
//! store's share with the fallback (Redis answers, but later than that: it ran them, so
//! their write-backs must not count them again, and the late replies say so: nothing is
//! sent again).

use tokio::net::TcpStream;

use super::*;
use crate::support::delay_proxy::DelayProxy;
use crate::support::h2raw;

const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
const HOT: (&str, &str) = ("hot", "x");
const LIMIT: u64 = 1_000_000_000;

/// One call on `HOT` with `timeout` as its `grpc-timeout`; whether it was answered OK.
async fn hit(c: &mut Client, timeout: Duration) -> bool {
    let mut r = tonic::Request::new(req("o", vec![desc(&[HOT])]));
    r.set_timeout(timeout);
    match c.should_rate_limit(r).await {
        Ok(r) => r.get_ref().overall_code == Code::Ok as i32,
        Err(e) => panic!("not answered: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overload_is_decided_locally_counted_apart_and_written_back_once() {
    let redis = RedisServer::start();
    let proxy = DelayProxy::start(format!("127.0.0.1:{}", redis.port())).await;
    let s = in_process()
        .file("o.yaml", RULES)
        .running(running_clock())
        .args(["--redis-url", &proxy.url()])
        .args(["--store-failure-mode", "local"])
        .args(["--max-in-flight", "1"])
        .start_healthy()
        .await;
    let mut c = s.client().await;
    let mut admitted = 0;
    for _ in 0..3 {
        assert!(hit(&mut c, Duration::from_secs(10)).await);
        admitted += 1;
    }

    // Refused by admission: the one slot is held by a call whose message is not sent yet;
    // every other call is read and decided here, none refused (their hits reach Redis only
    // by the write-backs).
    let tcp = TcpStream::connect(s.grpc).await.expect("connect");
    let (mut send, conn) = h2raw::handshake(tcp).await;
    tokio::spawn(conn);
    let (resp, mut held) = h2raw::start(&mut send, SHOULD_RATE_LIMIT)
        .await
        .expect("open");
    assert!(wait_metric(&s, "sluice_admission_in_flight", 1.0).await);
    let calls: Vec<_> = (0..20)
        .map(|_| {
            let mut c = c.clone();
            tokio::spawn(async move { hit(&mut c, Duration::from_secs(10)).await })
        })
        .collect();
    for t in calls {
        assert!(t.await.expect("call task"), "admitted here");
        admitted += 1;
    }
    let overload = "sluice_local_decisions_total{reason=\"overload\"}";
    assert!(
        wait_metric(&s, overload, 20.0).await,
        "{}",
        s.metric(overload).await
    );
    held.send_data(h2raw::frame(&req("o", vec![desc(&[HOT])])), true)
        .expect("send");
    let (http, status, _) = h2raw::finish(resp).await.expect("answered");
    assert_eq!((http, status.as_deref()), (200, Some("0")));
    admitted += 1;

    // Redis answers 700 ms late, the calls' deadlines are 1 s: strict, the round trip would
    // have its answer in time (the deadline less a 5 ms margin); the fallback gives it half
    // the deadline, so each round trip times out at 500 ms (Redis runs the call regardless)
    // and the view decides, with half the deadline left to answer.
    proxy.set_delay(Duration::from_millis(700));
    for _ in 0..5 {
        assert!(hit(&mut c, Duration::from_secs(1)).await);
        admitted += 1;
    }
    assert!(
        wait_metric(&s, overload, 25.0).await,
        "{}",
        s.metric(overload).await
    );
    assert_eq!(
        s.metric("sluice_local_decisions_total{reason=\"store_failure\"}")
            .await,
        0.0
    );
    assert_eq!(s.metric("sluice_store_degraded_periods_total").await, 0.0);
    assert_eq!(
        s.metric("ratelimit_service_should_rate_limit_error{err_type=\"shed\"}")
            .await,
        0.0
    );
    assert_eq!(s.http_get("/healthcheck").await.0, 200, "SERVING");

    // Fast again: everything written back, each admitted hit held once.
    proxy.set_delay(Duration::ZERO);
    settled(&s).await;
    assert_eq!(s.metric("sluice_store_degraded_periods_total").await, 0.0);
    assert_eq!(stored(&redis, HOT, LIMIT), admitted);
    // The five late round trips ran (their replies reached the connection, late): settled
    // from that, none sent again under its id. Waited for: the counter is published after
    // the write-back, and a scrape may see the unwritten hits at 0 before.
    let settled_calls = "sluice_batch_settled_calls_total";
    assert!(
        wait_metric(&s, settled_calls, 5.0).await,
        "{}",
        s.metric(settled_calls).await
    );
}
