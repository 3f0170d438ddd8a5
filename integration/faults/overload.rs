//! Overload protection, functionally (no timing): calls past the admitted in-flight limit are
//! refused with RESOURCE_EXHAUSTED and never reach the store; a call whose `grpc-timeout`
//! has already passed is answered DEADLINE_EXCEEDED and never reaches the store; a Redis that
//! is slow but answers keeps its connections; and the admission limit follows the store's
//! round trip, down when it slows, up again when it recovers. The offered-load measurements
//! (goodput at 1×, 2×, 4× capacity) are `scripts/overload.sh`'s, recorded in RELIABILITY.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::support::delay_proxy::DelayProxy;
use crate::support::h2raw;
use crate::support::redis::RedisServer;
use crate::support::sluice::{Client, Sluice, call, desc, req, sluice};

const RULES: &str =
    "domain: ov\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n";
const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
/// How long a gauge may take to show what a test waits for: generous, only waited out when
/// something is wrong.
const EVENTUALLY: Duration = Duration::from_secs(60);

async fn start(redis_url: &str, extra: &[&str]) -> Sluice {
    sluice()
        .file("ov.yaml", RULES)
        .args(["--redis-url", redis_url])
        .args(extra.iter().copied())
        .start_healthy()
        .await
}

/// Wait until `series` satisfies `ok` (the gauges are published every 250 ms); its value.
async fn until(s: &Sluice, series: &str, what: &str, ok: impl Fn(f64) -> bool) -> f64 {
    let give_up = Instant::now() + EVENTUALLY;
    loop {
        let v = s.metric(series).await;
        if ok(v) {
            return v;
        }
        assert!(Instant::now() < give_up, "{series} never {what} (last {v})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Two calls hold the only two slots (`--max-in-flight 2`): their headers are sent, their
/// messages not yet, so they do no store work. Every other call is refused with
/// RESOURCE_EXHAUSTED (at once, or after a short wait in the queue), counted as shed, and
/// makes no store call: Redis has run no script and holds no key for any of them. Once the
/// two send their messages, they are answered, and the slots are free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_admitted_limit_are_refused_without_store_work() {
    let redis = RedisServer::start();
    let s = start(&redis.url(), &["--max-in-flight", "2"]).await;
    let mut c = s.client().await;
    call(&mut c, req("ov", vec![desc(&[("k", "warm")])])).await;

    let tcp = TcpStream::connect(s.grpc).await.expect("connect");
    let (mut send, conn) = h2raw::handshake(tcp).await;
    tokio::spawn(conn);
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(
            h2raw::start(&mut send, SHOULD_RATE_LIMIT)
                .await
                .expect("open"),
        );
    }
    until(&s, "sluice_admission_in_flight", "reached 2", |v| v == 2.0).await;
    let (evals, keys) = (
        redis.command_calls("evalsha"),
        redis.query::<i64>(&["DBSIZE"]),
    );

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
    for t in calls {
        let (code, message) = t.await.expect("call task").expect_err("refused");
        assert_eq!(code, tonic::Code::ResourceExhausted, "{message}");
        assert!(message.starts_with("overloaded:"), "{message}");
        assert!(message.contains("--max-in-flight"), "{message}");
    }
    assert_eq!(redis.command_calls("evalsha"), evals, "no store work");
    assert_eq!(redis.query::<i64>(&["DBSIZE"]), keys, "nothing counted");
    assert_eq!(
        s.metric("ratelimit_service_should_rate_limit_error{err_type=\"shed\"}")
            .await,
        10.0
    );

    // The two send their messages: answered, and counted.
    for (i, (resp, mut stream)) in held.into_iter().enumerate() {
        let ask = req("ov", vec![desc(&[("k", &format!("held{i}"))])]);
        stream.send_data(h2raw::frame(&ask), true).expect("send");
        let (http, status, _) = h2raw::finish(resp).await.expect("answered");
        assert_eq!((http, status.as_deref()), (200, Some("0")));
    }
    assert_eq!(redis.query::<i64>(&["DBSIZE"]), keys + 2);
    // The slots are free again.
    call(&mut c, req("ov", vec![desc(&[("k", "after")])])).await;
}

/// Calls in a closed loop from `tasks` tasks over a few connections, until `stop`; every
/// answer or error is fine (overload tests read the server's metrics). After an error a task
/// pauses, so that refusals do not take the CPU the round trips are measured with.
fn load(
    clients: &[Client],
    tasks: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..tasks)
        .map(|i| {
            let mut c = clients[i % clients.len()].clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let ask = req("ov", vec![desc(&[("k", &format!("t{i}.{}", n % 50))])]);
                    if c.should_rate_limit(ask).await.is_err() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    n += 1;
                }
            })
        })
        .collect()
}

/// A Redis that answers every call 300 ms late (a delaying proxy in front of it), while calls
/// time out after 50 ms: the calls fail, but Redis is alive, so no connection is dropped or
/// replaced (the breaker counts late replies as signs of life). Once Redis is fast again the
/// same connections answer in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_redis_that_answers_keeps_its_connections() {
    let redis = RedisServer::start();
    let proxy = DelayProxy::start(format!("127.0.0.1:{}", redis.port())).await;
    let s = start(&proxy.url(), &["--redis-timeout", "50ms"]).await;
    let mut c = s.client().await;
    call(&mut c, req("ov", vec![desc(&[("k", "warm")])])).await;
    // Every connection of the pool is up (they are made one after another, in the background).
    until(
        &s,
        "sluice_store_connections{store=\"redis\"}",
        "reached 4",
        |v| v == 4.0,
    )
    .await;
    let connections = proxy.accepted();

    proxy.set_delay(Duration::from_millis(300));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = load(&[c.clone()], 8, &stop);
    until(
        &s,
        "sluice_store_errors_total{kind=\"timeout\",store=\"redis\"}",
        "counted 50 timeouts",
        |v| v >= 50.0,
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    assert_eq!(
        s.metric("sluice_store_connections_dropped_total{store=\"redis\"}")
            .await,
        0.0
    );
    assert_eq!(proxy.accepted(), connections, "no reconnect");

    // Fast again: once the replies already on their way have come in, calls are answered
    // in time, on the same connections.
    proxy.set_delay(Duration::ZERO);
    let give_up = Instant::now() + EVENTUALLY;
    while c
        .should_rate_limit(req("ov", vec![desc(&[("k", "after")])]))
        .await
        .is_err()
    {
        assert!(Instant::now() < give_up, "never answered in time again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(proxy.accepted(), connections, "the same connections answer");
}

/// The admission limit follows the store's round trip: with more calls offered than it
/// admits, it falls when every reply comes 80 ms late instead of 5 ms, and rises again when
/// replies are fast again (read from the `sluice_admission_limit` gauge). With fewer calls in
/// flight than half the limit it would not move: the store's latency then says nothing about
/// how many calls it can take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_limit_falls_when_the_store_slows_and_rises_when_it_recovers() {
    let redis = RedisServer::start();
    let proxy = DelayProxy::start(format!("127.0.0.1:{}", redis.port())).await;
    let s = start(&proxy.url(), &[]).await;
    proxy.set_delay(Duration::from_millis(5));
    let mut clients = Vec::new();
    for _ in 0..16 {
        clients.push(s.client().await);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = load(&clients, 32, &stop);
    // Busy with a steady store for a while: the limit has followed it.
    until(
        &s,
        "ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"}",
        "reached 2000 calls",
        |v| v >= 2000.0,
    )
    .await;
    let steady = s.metric("sluice_admission_limit").await;
    assert!(steady >= 4.0, "{steady}");

    // Slow, and more calls than the limit admits.
    proxy.set_delay(Duration::from_millis(80));
    tasks.extend(load(&clients, 64, &stop));
    let slowed = until(&s, "sluice_admission_limit", "fell", |v| v < steady).await;

    proxy.set_delay(Duration::from_millis(5));
    until(&s, "sluice_admission_limit", "rose again", |v| v > slowed).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
}

/// A call whose deadline has passed (`grpc-timeout` 0, or 1 ns: gone before it is read) is
/// answered DEADLINE_EXCEEDED and does no work: nothing reaches Redis. A call with time
/// left is answered as usual.
#[tokio::test]
async fn calls_past_their_deadline_are_not_worked_on() {
    let redis = RedisServer::start();
    let s = start(&redis.url(), &[]).await;
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
