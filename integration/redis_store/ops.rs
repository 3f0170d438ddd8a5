//! Operations: script loss, round trips, outages and recovery, connection URLs, replicas.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::limit::{Algorithm, Check, LimitSpec, ManualClock, StateTag, SystemClock, Unit};
use sluice::store::redis::{RedisConfig, RedisStore, TimeSource};
use sluice::store::{Call, Store, StoreError};

use super::{Env, local_config, spec, tag};
use crate::support::redis::{RedisServer, free_port};

pub fn checks<'a>(tags: &[StateTag], limits: &'a [LimitSpec]) -> Vec<Check<'a>> {
    tags.iter()
        .map(|&tag| Check {
            tag,
            limits,
            cost: 1,
            refund: false,
        })
        .collect()
}

/// Run and time one call.
async fn timed(store: &RedisStore, checks: &[Check<'_>]) -> (Result<(), StoreError>, Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    let r = store.run(&Call::new(checks), &mut out).await;
    (r, start.elapsed())
}

/// Fast failure: an error (never a hang, never a connect attempt in the request path).
const FAST: Duration = Duration::from_millis(200);

#[tokio::test]
async fn script_flush_is_recovered_without_double_counting() {
    let env = Env::new().await;
    let limits = [spec(Algorithm::FixedWindow, 10, Unit::Minute)];
    let tags = [tag("f1"), tag("f2"), tag("f3")];
    let first = env.run(&checks(&tags, &limits)).await;
    assert!(first.iter().all(|r| r.used_before == 0));
    let _: () = env.server.query(&["SCRIPT", "FLUSH"]);
    let _: () = env.server.query(&["CONFIG", "RESETSTAT"]);
    let second = env.run(&checks(&tags, &limits)).await;
    assert!(
        second.iter().all(|r| r.allowed && r.used_before == 1),
        "{second:?}"
    );
    for t in tags {
        let (_, c) = env.fixed_window_state(t, &limits[0]).expect("state");
        assert_eq!(c, 2, "each check ran exactly once");
    }
    assert_eq!(env.server.command_calls("script|load"), 1);
    let third = env.run(&checks(&tags, &limits)).await;
    assert!(third.iter().all(|r| r.used_before == 2), "{third:?}");
}

#[tokio::test]
async fn one_round_trip_and_one_evalsha_per_request_and_no_ping() {
    let env = Env::new().await;
    let limits = [
        spec(Algorithm::TokenBucket, 100, Unit::Second),
        spec(Algorithm::SlidingWindow, 100, Unit::Minute),
    ];
    let tags: Vec<StateTag> = (0..5).map(|i| tag(&format!("rt{i}"))).collect();
    env.run(&checks(&tags, &limits)).await; // warm-up
    let _: () = env.server.query(&["CONFIG", "RESETSTAT"]);
    for _ in 0..10 {
        env.run(&checks(&tags, &limits)).await;
    }
    assert_eq!(
        env.server.command_calls("evalsha"),
        10,
        "one EVALSHA per request (5 checks of 2 limits each)"
    );
    assert_eq!(
        env.server.command_calls("ping"),
        0,
        "no pool checkout per request"
    );
    // Nothing else from the client: no checkout PING/UNWATCH, no reload, no transaction.
    // (commandstats also counts the commands scripts run, so this is a deny list.)
    for cmd in [
        "unwatch",
        "script|load",
        "eval",
        "multi",
        "exec",
        "hello",
        "select",
    ] {
        assert_eq!(env.server.command_calls(cmd), 0, "{cmd}");
    }
    // One pipeline: all checks of a run on one connection, so the server saw them on at
    // most pool_size client connections. (Only the store's connections are counted: this
    // test's own inspection connections are one per query and may still be closing.)
    let clients: String = env.server.query(&["CLIENT", "LIST"]);
    let store_clients = clients
        .lines()
        .filter(|l| l.contains("cmd=evalsha"))
        .count();
    assert!(store_clients <= 2, "{clients}");
}

#[tokio::test]
async fn killed_redis_fails_fast_and_recovers_after_restart() {
    let mut server = RedisServer::start();
    let cfg = RedisConfig {
        reconnect_backoff_max: Duration::from_millis(100),
        ..local_config(&server)
    };
    let port = server.port();
    let clock = Arc::new(ManualClock::starting_now());
    let store = RedisStore::new(cfg, clock).expect("config");
    assert!(store.wait_ready(Duration::from_secs(10)).await);
    let limits = [spec(Algorithm::Gcra, 10, Unit::Second)];
    let tags = [tag("k1"), tag("k2")];
    assert!(timed(&store, &checks(&tags, &limits)).await.0.is_ok());

    server.kill();
    for _ in 0..5 {
        let (r, took) = timed(&store, &checks(&tags, &limits)).await;
        assert!(
            matches!(r, Err(StoreError::Unavailable(_) | StoreError::Timeout(_))),
            "{r:?}"
        );
        assert!(took < FAST, "took {took:?}");
    }
    assert!(!store.is_ready(), "every connection found broken");

    server.restart();
    assert_eq!(server.port(), port);
    assert!(
        store.wait_ready(Duration::from_secs(10)).await,
        "reconnected"
    );
    let mut out = Vec::new();
    store
        .run(&Call::new(&checks(&tags, &limits)), &mut out)
        .await
        .expect("works again");
    assert!(
        out.iter().all(|r| r.allowed && r.used_before == 0),
        "fresh server: {out:?}"
    );
}

#[tokio::test]
async fn unreachable_at_startup_then_connects_when_redis_appears() {
    let port = free_port();
    let cfg = RedisConfig {
        url: format!("redis://127.0.0.1:{port}/"),
        time_source: TimeSource::Local,
        request_timeout: Duration::from_secs(2),
        reconnect_backoff_max: Duration::from_millis(100),
        ..RedisConfig::default()
    };
    let started = Instant::now();
    let store = RedisStore::new(cfg, Arc::new(SystemClock)).expect("config");
    assert!(started.elapsed() < FAST, "new() must not block");
    assert!(!store.is_ready());
    let limits = [spec(Algorithm::FixedWindow, 1, Unit::Second)];
    let tags = [tag("x")];
    for _ in 0..3 {
        let (r, took) = timed(&store, &checks(&tags, &limits)).await;
        assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
        assert!(
            took < Duration::from_millis(100),
            "breaker open: took {took:?}"
        );
    }
    assert!(!store.wait_ready(Duration::from_millis(300)).await);

    let _server = RedisServer::start_on(port);
    assert!(store.wait_ready(Duration::from_secs(10)).await);
    assert!(timed(&store, &checks(&tags, &limits)).await.0.is_ok());
}

/// A paused Redis (SIGSTOP: the socket stays open, nothing answers) is told from a slow one by
/// its silence: requests time out until the connection has answered nothing for
/// `dead_after`, then it is dropped and requests fail at once until it is back.
#[tokio::test]
async fn paused_redis_times_out_then_breaker_opens_then_recovers() {
    let server = RedisServer::start();
    let timeout = Duration::from_millis(50);
    let cfg = RedisConfig {
        request_timeout: timeout,
        pool_size: 1,
        dead_after: Duration::from_millis(100),
        reconnect_backoff_max: Duration::from_millis(100),
        connect_timeout: Duration::from_millis(200),
        ..local_config(&server)
    };
    let store = RedisStore::new(cfg, Arc::new(SystemClock)).expect("config");
    assert!(store.wait_ready(Duration::from_secs(10)).await);
    let limits = [spec(Algorithm::LeakyBucket, 10, Unit::Second)];
    let tags = [tag("p")];
    assert!(timed(&store, &checks(&tags, &limits)).await.0.is_ok());

    server.pause();
    let (r, _) = timed(&store, &checks(&tags, &limits)).await;
    assert!(
        matches!(r, Err(StoreError::Timeout(d)) if d <= timeout),
        "{r:?}"
    );
    // Timeouts until the silence is long enough; then the connection is dropped.
    let mut tries = 0;
    loop {
        let (r, took) = timed(&store, &checks(&tags, &limits)).await;
        assert!(took < FAST, "took {took:?}");
        match r {
            Err(StoreError::Timeout(_)) => {}
            Err(StoreError::Unavailable(_)) => break,
            r => panic!("{r:?}"),
        }
        tries += 1;
        assert!(tries < 100, "never found dead");
    }
    assert!(!store.is_ready());
    assert!(store.dropped() >= 1);
    // Dropped: requests fail at once.
    let (r, took) = timed(&store, &checks(&tags, &limits)).await;
    assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    assert!(took < Duration::from_millis(100), "took {took:?}");

    server.resume();
    assert!(
        store.wait_ready(Duration::from_secs(10)).await,
        "reconnected"
    );
    assert!(timed(&store, &checks(&tags, &limits)).await.0.is_ok());
}

#[tokio::test]
async fn a_replica_is_not_used_until_it_is_promoted() {
    let primary = RedisServer::start();
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let cfg = local_config(&replica);
    let store = RedisStore::new(cfg, Arc::new(SystemClock)).expect("config");
    // Every write would fail with READONLY: the store does not connect to a replica (a
    // demoted primary behind a name, a stale sentinel answer), so health says so.
    assert!(!store.wait_ready(Duration::from_secs(1)).await);
    let limits = [spec(Algorithm::TokenBucket, 5, Unit::Second)];
    let tags = [tag("ro")];
    let (r, _) = timed(&store, &checks(&tags, &limits)).await;
    assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    let _: String = replica.query(&["REPLICAOF", "NO", "ONE"]);
    assert!(store.wait_ready(Duration::from_secs(10)).await);
    assert!(timed(&store, &checks(&tags, &limits)).await.0.is_ok());
}

#[tokio::test]
async fn unix_socket_and_password_urls() {
    let sock_dir = tempfile::tempdir().expect("tempdir");
    let sock = sock_dir.path().join("redis.sock");
    let sock = sock.to_str().expect("utf-8 path");
    let server = RedisServer::start_with(&[
        "--unixsocket",
        sock,
        "--unixsocketperm",
        "700",
        "--requirepass",
        "s3cret",
    ]);
    let limits = [spec(Algorithm::FixedWindow, 1, Unit::Second)];
    let tags = [tag("url")];
    for (url, works) in [
        (format!("unix://{sock}?pass=s3cret"), true),
        (
            format!("redis://:s3cret@127.0.0.1:{}/0", server.port()),
            true,
        ),
        (
            format!("redis://:wrong@127.0.0.1:{}/0", server.port()),
            false,
        ),
    ] {
        let cfg = RedisConfig {
            url: url.clone(),
            ..local_config(&server)
        };
        let store = RedisStore::new(cfg, Arc::new(SystemClock)).expect("config");
        assert_eq!(
            store.wait_ready(Duration::from_secs(2)).await,
            works,
            "{url}"
        );
        assert_eq!(
            timed(&store, &checks(&tags, &limits)).await.0.is_ok(),
            works,
            "{url}"
        );
    }
    let bad = RedisConfig {
        url: "nonsense://x".to_owned(),
        ..RedisConfig::default()
    };
    assert!(RedisStore::new(bad, Arc::new(SystemClock)).is_err());
}
