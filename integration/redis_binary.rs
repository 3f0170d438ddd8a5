//! sluice on a real redis-server: many instances share one truth, one round trip per
//! request, fast UNAVAILABLE while Redis is down, recovery without a restart (in process,
//! the instances sharing one clock), and startup from envoyproxy/ratelimit's Redis
//! variables (the real binary).

use std::sync::Arc;

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

use crate::support::in_process::*;
use crate::support::redis::{RedisCluster, RedisServer, free_port};
use crate::support::sluice::*;

const ALGORITHMS: [&str; 6] = [
    "fixed_window",
    "sliding_window",
    "sliding_log",
    "token_bucket",
    "leaky_bucket",
    "gcra",
];

/// One rule per algorithm, all 50 per hour (refill: one token per 72 s, far beyond a test).
fn rules() -> String {
    let mut s = String::from("domain: shared\ndescriptors:\n");
    for a in ALGORITHMS {
        s.push_str(&format!(
            "  - key: {a}\n    rate_limit: {{unit: hour, requests_per_unit: 50, algorithm: {a}}}\n"
        ));
    }
    s.push_str("  - key: plain\n    rate_limit: {unit: hour, requests_per_unit: 1000000}\n");
    s
}

async fn on_redis(redis: &RedisServer, clock: &Arc<ManualClock>) -> Server {
    in_process()
        .file("shared.yaml", &rules())
        .redis(redis.url())
        .clock(clock.clone())
        .start_healthy()
        .await
}

#[tokio::test]
async fn three_instances_on_one_redis_admit_exactly_the_limit() {
    let redis = RedisServer::start();
    let clock = test_clock();
    let instances = [
        on_redis(&redis, &clock).await,
        on_redis(&redis, &clock).await,
        on_redis(&redis, &clock).await,
    ];
    for algorithm in ALGORITHMS {
        let mut tasks = Vec::new();
        for s in &instances {
            for _ in 0..4 {
                let mut c = s.client().await;
                tasks.push(tokio::spawn(async move {
                    let mut ok = 0u32;
                    for _ in 0..10 {
                        let r = call(&mut c, req("shared", vec![desc(&[(algorithm, "one-key")])]))
                            .await;
                        if r.overall_code == Code::Ok as i32 {
                            ok += 1;
                        }
                    }
                    ok
                }));
            }
        }
        let mut ok = 0;
        for t in tasks {
            ok += t.await.unwrap();
        }
        assert_eq!(
            ok, 50,
            "{algorithm}: 120 hits through 3 instances against 50/hour"
        );
    }
}

#[tokio::test]
async fn one_round_trip_and_one_script_call_per_request_at_1_4_16_descriptors() {
    let redis = RedisServer::start();
    let s = on_redis(&redis, &test_clock()).await;
    let mut c = s.client().await;
    // Warm up: every pooled connection established (their handshakes and script loads are
    // reads too), then one request.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let clients: String = redis.query(&["INFO", "clients"]);
        let n: u64 = clients
            .lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        // The default pool of 4, plus the connection of this query.
        if n >= 5 {
            break;
        }
        assert!(Instant::now() < deadline, "pool never filled: {n} clients");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    call(&mut c, req("shared", vec![desc(&[("plain", "w")])])).await;
    // Every counter is read on one inspection connection opened before measuring, so the
    // only reads besides sluice's are this connection's own queries.
    let mut inspect = redis.conn();
    let mut info = |section: &str, field: &str| -> u64 {
        let text: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut inspect)
            .expect("INFO");
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|rest| rest.split([',', '\r']).next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    for descriptors in [1usize, 4, 16] {
        let evalsha0 = info("commandstats", "cmdstat_evalsha:calls=");
        let ping0 = info("commandstats", "cmdstat_ping:calls=");
        let reads0 = info("stats", "total_reads_processed:");
        let n = 20;
        for i in 0..n {
            let ds = (0..descriptors)
                .map(|d| desc(&[("plain", &format!("{i}-{d}"))]))
                .collect();
            call(&mut c, req("shared", ds)).await;
        }
        // Minus the read of this INFO query itself.
        let r = info("stats", "total_reads_processed:") - reads0 - 1;
        eprintln!("{descriptors} descriptors: {r} socket reads for {n} requests");
        assert!(
            r <= n as u64,
            "{descriptors} descriptors: {r} reads for {n} requests"
        );
        let evalsha = info("commandstats", "cmdstat_evalsha:calls=") - evalsha0;
        eprintln!("{descriptors} descriptors: {evalsha} script calls for {n} requests");
        assert_eq!(
            evalsha, n as u64,
            "{descriptors} descriptors: one script call per request"
        );
        let ping = info("commandstats", "cmdstat_ping:calls=") - ping0;
        assert_eq!(ping, 0, "no pool checkout per request");
    }
}

#[tokio::test]
async fn redis_down_is_unavailable_fast_then_recovers_without_restart() {
    let mut redis = RedisServer::start();
    let s = in_process()
        .file("shared.yaml", &rules())
        .arg("--redis-url")
        .arg(redis.url())
        // Not the 10 ms default: under the whole suite's load a healthy call can miss it.
        // Failures while Redis is down are immediate either way (refused connections).
        .arg("--redis-timeout")
        .arg("200ms")
        .start_healthy()
        .await;
    let mut c = s.client().await;
    let one = || req("shared", vec![desc(&[("plain", "x")])]);
    assert_eq!(call(&mut c, one()).await.overall_code, Code::Ok as i32);

    redis.kill();
    for _ in 0..5 {
        let started = Instant::now();
        let e = c.should_rate_limit(one()).await.expect_err("Redis is down");
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
        // The default deadline is 10 ms; allow for a loaded machine, never a hang.
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.http_get("/healthcheck").await.0 != 500 {
        assert!(Instant::now() < deadline, "health never went NOT_SERVING");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, _) = s
        .http_post(
            "/json",
            r#"{"domain":"shared","descriptors":[{"entries":[{"key":"plain","value":"x"}]}]}"#,
        )
        .await;
    assert_eq!(code, 503);
    assert!(
        s.metric("ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"}")
            .await
            >= 5.0
    );

    redis.restart();
    assert!(s.wait_healthy(HEALTHY_WITHIN).await, "never recovered");
    let r = call(&mut c, one()).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
}

#[tokio::test]
async fn not_serving_until_redis_is_reachable() {
    let port = free_port();
    let s = in_process()
        .file("shared.yaml", &rules())
        .arg("--redis-url")
        .arg(format!("redis://127.0.0.1:{port}"))
        .arg("--redis-timeout")
        .arg("2s")
        .start()
        .await;
    assert_eq!(s.http_get("/healthcheck").await.0, 500);
    let mut c = s.client().await;
    let e = c
        .should_rate_limit(req("shared", vec![desc(&[("plain", "x")])]))
        .await
        .expect_err("no Redis yet");
    assert_eq!(e.code(), tonic::Code::Unavailable);
    let _redis = RedisServer::start_on(port);
    assert!(s.wait_healthy(HEALTHY_WITHIN).await, "never healthy");
    let r = call(&mut c, req("shared", vec![desc(&[("plain", "x")])])).await;
    assert_eq!(r.statuses[0].limit_remaining, 999_999);
}

#[tokio::test]
async fn their_redis_variables() {
    let redis = RedisServer::start();
    let s = sluice()
        .file("shared.yaml", &rules())
        .env("REDIS_SOCKET_TYPE", "tcp")
        .env("REDIS_URL", format!("127.0.0.1:{}", redis.port()))
        .env("REDIS_POOL_SIZE", "2")
        .env("CACHE_KEY_PREFIX", "legacy:")
        // Generous under a loaded CI machine: this test is about the variables.
        .arg("--redis-timeout")
        .arg("2s")
        .start_healthy()
        .await;
    let mut c = s.client().await;
    call(&mut c, req("shared", vec![desc(&[("gcra", "v")])])).await;
    let keys: Vec<String> = redis.query(&["KEYS", "*"]);
    assert!(
        !keys.is_empty() && keys.iter().all(|k| k.starts_with("legacy:{")),
        "{keys:?}"
    );
}

#[tokio::test]
async fn serves_from_a_redis_cluster() {
    let cluster = RedisCluster::start(3);
    let s = in_process()
        .file("shared.yaml", &rules())
        .arg("--redis-type")
        .arg("cluster")
        .redis(cluster.urls().join(","))
        .start_healthy()
        .await;
    let mut c = s.client().await;
    // Descriptors on different slots in one request.
    let ds: Vec<_> = ALGORITHMS.iter().map(|a| desc(&[(a, "x")])).collect();
    for i in 0..3u32 {
        let r = call(&mut c, req("shared", ds.clone())).await;
        assert_eq!(r.overall_code, Code::Ok as i32);
        for st in &r.statuses {
            assert_eq!(st.limit_remaining, 49 - i);
        }
    }
}
