//! Redis Sentinel with real `redis-server` and `redis-sentinel` processes: finding the
//! master (past a dead sentinel, with auth), over TLS, and a failover under traffic.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use parking_lot::Mutex;
use sluice::store::redis::{RedisConfig, SentinelConfig};

use super::tls::{pki, server, tls};
use super::{config, hit, store};
use crate::support::in_process::in_process;
use crate::support::redis::{RedisServer, free_port};
use crate::support::sentinel::{MASTER, Sentinel};
use crate::support::sluice::{call, desc, req};

fn sentinel_config(sentinels: Vec<String>, master_auth: Option<&str>) -> RedisConfig {
    RedisConfig {
        sentinel: Some(SentinelConfig {
            master: MASTER.to_owned(),
            sentinels,
            master_auth: master_auth.map(str::to_owned),
            db: 0,
        }),
        ..config("")
    }
}

#[tokio::test]
async fn the_master_is_found_past_a_dead_sentinel_with_auth_on_both() {
    let master = RedisServer::start_with(&["--requirepass", "masterpw"]);
    let sentinel = Sentinel::start(
        master.port(),
        &format!("requirepass sentpw\nsentinel auth-pass {MASTER} masterpw"),
        false,
    );
    let dead = free_port();
    let s = store(sentinel_config(
        vec![
            format!("redis://:sentpw@127.0.0.1:{dead}"),
            format!("redis://:sentpw@127.0.0.1:{}", sentinel.port()),
        ],
        Some("masterpw"),
    ));
    assert!(
        s.wait_ready(Duration::from_secs(10)).await,
        "never connected"
    );
    assert_eq!(hit(&s, "x").await.expect("decided")[0].remaining, 999);
    let mut conn = redis::Client::open(format!("redis://:masterpw@127.0.0.1:{}/", master.port()))
        .and_then(|c| c.get_connection())
        .expect("connect");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).expect("KEYS");
    assert_eq!(keys.len(), 1, "the key is on the master: {keys:?}");

    // A wrong sentinel password is an error, not a connection.
    let wrong = store(sentinel_config(
        vec![format!("redis://:nope@127.0.0.1:{}", sentinel.port())],
        Some("masterpw"),
    ));
    assert!(!wrong.wait_ready(Duration::from_secs(2)).await);
}

#[tokio::test]
async fn sentinel_and_master_over_tls() {
    let pki = pki();
    let master = server(&pki.server, &pki, false);
    let files = format!(
        "tls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\ntls-auth-clients no\ntls-replication yes",
        pki.server.cert.display(),
        pki.server.key.display(),
        pki.ca.display()
    );
    let sentinel = Sentinel::start(master.tls_port(), &files, true);
    let cfg = RedisConfig {
        tls: tls(&pki.ca_pem, None, false),
        ..sentinel_config(
            vec![format!("rediss://127.0.0.1:{}", sentinel.tls_port())],
            None,
        )
    };
    let s = store(cfg);
    assert!(
        s.wait_ready(Duration::from_secs(10)).await,
        "never connected"
    );
    assert_eq!(hit(&s, "tls").await.expect("decided")[0].remaining, 999);
    let keys: Vec<String> = master.query(&["KEYS", "*"]);
    assert_eq!(keys.len(), 1, "{keys:?}");
}

const LIMIT: u64 = 1_000_000;
const WORKERS: usize = 4;

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    ok_after_switch: AtomicU64,
    /// Failures: gRPC code and how long each took.
    failures: Mutex<Vec<(tonic::Code, Duration)>>,
}

/// `SENTINEL FAILOVER` while four clients send requests without pause: requests fail with
/// UNAVAILABLE, fast, while the master changes; then succeed on the new master, same
/// process; the counter on the new master matches the OK answers within the requests in
/// flight when the failover began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_under_traffic() {
    let started = Instant::now();
    let master = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port().to_string()]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !replica
        .query::<String>(&["INFO", "replication"])
        .contains("master_link_status:up")
    {
        assert!(Instant::now() < deadline, "replica never synced");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sentinel = Sentinel::start(master.port(), "", false);
    sentinel.wait_replica(Duration::from_secs(20));

    // In process, on the injected clock (`--redis-time-source local`): the count is read
    // at the end, in the window the traffic was in.
    let s = in_process()
        .file(
            "fo.yaml",
            &format!(
                "domain: fo\ndescriptors:\n  - key: k\n    rate_limit: {{unit: hour, requests_per_unit: {LIMIT}}}\n"
            ),
        )
        .env("REDIS_TYPE", "sentinel")
        .env(
            "REDIS_URL",
            format!("{MASTER},127.0.0.1:{},127.0.0.1:{}", free_port(), sentinel.port()),
        )
        // Generous: a timeout on a loaded machine would blur the count.
        .arg("--redis-timeout")
        .arg("1s")
        .start_healthy()
        .await;
    assert!(
        s.wait_log("sentinel events followed", Duration::from_secs(10))
            .await
    );

    let stop = Arc::new(AtomicBool::new(false));
    let switched = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let (stop, switched, tally) = (stop.clone(), switched.clone(), tally.clone());
        let mut c = s.client().await;
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let after = switched.load(Ordering::Relaxed);
                let t = Instant::now();
                match c
                    .should_rate_limit(req("fo", vec![desc(&[("k", "v")])]))
                    .await
                {
                    Ok(r) => {
                        assert_eq!(r.into_inner().overall_code, Code::Ok as i32);
                        tally.ok.fetch_add(1, Ordering::Relaxed);
                        if after {
                            tally.ok_after_switch.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(e) => tally.failures.lock().push((e.code(), t.elapsed())),
                }
                // Continuous traffic, not a busy loop on a machine shared with the servers
                // and the rest of the suite.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = tally.ok.load(Ordering::Relaxed);
    assert!(before > 0, "traffic flows before the failover");

    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = sentinel.query::<String>(&["SENTINEL", "FAILOVER", MASTER]) {
        assert!(Instant::now() < deadline, "SENTINEL FAILOVER: {e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let failover_at = Instant::now();
    while sentinel.master_port() != Some(replica.port()) {
        assert!(Instant::now() < deadline, "the sentinel never switched");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    switched.store(true, Ordering::Relaxed);
    while tally.ok_after_switch.load(Ordering::Relaxed) < 100 {
        assert!(
            Instant::now() < deadline,
            "no success on the new master: {:?}",
            s.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recovered_in = failover_at.elapsed();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.expect("worker");
    }

    let mut c = s.client().await;
    let last = call(&mut c, req("fo", vec![desc(&[("k", "v")])])).await;
    let used = LIMIT - u64::from(last.statuses[0].limit_remaining);
    let ok = tally.ok.load(Ordering::Relaxed) + 1;
    let failures = tally.failures.lock().clone();
    let slowest = failures.iter().map(|f| f.1).max().unwrap_or_default();
    let drift = ok as i64 - used as i64;
    eprintln!(
        "failover: {ok} OK, {} failed (slowest {slowest:?}), counted {used} on the new master \
         (drift {drift}), back {recovered_in:?} after SENTINEL FAILOVER, test {:?}",
        failures.len(),
        started.elapsed()
    );
    assert!(
        failures.iter().all(|f| f.0 == tonic::Code::Unavailable),
        "{failures:?}"
    );
    assert!(!failures.is_empty(), "the switch is visible as UNAVAILABLE");
    // Fail fast: no request waits for the failover (it takes seconds).
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    assert!(
        drift.unsigned_abs() <= WORKERS as u64,
        "counted {used} for {ok} OK answers"
    );
    let keys: Vec<String> = replica.query(&["KEYS", "*"]);
    assert_eq!(keys.len(), 1, "the state lives on the new master: {keys:?}");
}
