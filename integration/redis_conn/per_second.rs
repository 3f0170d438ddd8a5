//! The per-second Redis (`REDIS_PERSECOND`): descriptors whose limits are all per second go
//! to a second Redis, everything else (including a `rate_limits` list mixing units) to the
//! main one, one round trip per Redis per request; its own pool, health and metric labels.

use std::time::{Duration, Instant};

use crate::support::redis::RedisServer;
use crate::support::sluice::{Sluice, call, desc, req, sluice};

const RULES: &str = "\
domain: ps
descriptors:
  - key: sec
    rate_limit: {unit: second, requests_per_unit: 1000}
  - key: day
    rate_limit: {unit: day, requests_per_unit: 1000}
  - key: mixed
    rate_limits:
      - {unit: second, requests_per_unit: 1000}
      - {unit: day, requests_per_unit: 1000}
";

/// One field of `INFO section`, read on `conn` (one inspection connection per server, so
/// the only reads besides sluice's are these queries').
fn stat(conn: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let text: String = redis::cmd("INFO").arg(section).query(conn).expect("INFO");
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split([',', '\r']).next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn wait_pools(s: &Sluice) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for store in ["redis", "redis_per_second"] {
        let series = format!("sluice_store_connections{{store=\"{store}\"}}");
        while s.metric(&series).await < 4.0 {
            assert!(Instant::now() < deadline, "{store} pool never filled");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn per_second_limits_go_to_their_own_redis_in_one_round_trip_each() {
    let main = RedisServer::start();
    let fast = RedisServer::start();
    let s = sluice()
        .file("ps.yaml", RULES)
        .arg("--redis-url")
        .arg(main.url())
        .arg("--redis-per-second-url")
        .arg(fast.url())
        // Local time: keys keep 2 s of slack, so per-second keys are still there to inspect.
        .arg("--redis-time-source")
        .arg("local")
        // A deadline the shared test machine always meets.
        .arg("--redis-timeout")
        .arg("1s")
        .start_healthy()
        .await;
    wait_pools(&s).await;
    let mut c = s.client().await;
    let all = || {
        req(
            "ps",
            vec![
                desc(&[("sec", "a")]),
                desc(&[("day", "a")]),
                desc(&[("mixed", "a")]),
            ],
        )
    };
    let r = call(&mut c, all()).await;
    let remaining: Vec<u32> = r.statuses.iter().map(|s| s.limit_remaining).collect();
    assert_eq!(remaining, [999, 999, 999]);

    let keys = |r: &RedisServer| {
        let mut k: Vec<String> = r.query(&["KEYS", "*"]);
        k.sort();
        k
    };
    let fast_keys = keys(&fast);
    let main_keys = keys(&main);
    assert_eq!(
        fast_keys.len(),
        1,
        "only `sec` on the per-second Redis: {fast_keys:?}"
    );
    assert!(
        fast_keys[0].contains(":1:"),
        "a per-second key: {fast_keys:?}"
    );
    assert_eq!(
        main_keys.len(),
        3,
        "`day` and both limits of `mixed` on the main Redis: {main_keys:?}"
    );
    assert!(!main_keys.contains(&fast_keys[0]));

    // Round trips: socket reads on each server, for requests carrying both kinds.
    let n = 20u64;
    let (mut main_conn, mut fast_conn) = (main.conn(), fast.conn());
    let reads = |c: &mut _| stat(c, "stats", "total_reads_processed:");
    let evalsha = |c: &mut _| stat(c, "commandstats", "cmdstat_evalsha:calls=");
    let (main_calls, fast_calls) = (evalsha(&mut main_conn), evalsha(&mut fast_conn));
    let (main_reads, fast_reads) = (reads(&mut main_conn), reads(&mut fast_conn));
    for _ in 0..n {
        call(&mut c, all()).await;
    }
    // Minus the read of this query itself.
    let main_r = reads(&mut main_conn) - main_reads - 1;
    let fast_r = reads(&mut fast_conn) - fast_reads - 1;
    eprintln!("per-second: {main_r} reads on main, {fast_r} on per-second for {n} requests");
    assert!(main_r <= n, "main: {main_r} reads for {n} requests");
    assert!(fast_r <= n, "per-second: {fast_r} reads for {n} requests");
    assert_eq!(
        evalsha(&mut fast_conn) - fast_calls,
        n,
        "one script call per request"
    );
    let main_evalsha = evalsha(&mut main_conn) - main_calls;
    assert!((n..=2 * n).contains(&main_evalsha), "{main_evalsha}");

    // Its own health and metrics: the per-second Redis down fails per-second requests and
    // health, labelled as such; the main Redis keeps deciding the rest.
    drop(fast);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let e = c
            .should_rate_limit(req("ps", vec![desc(&[("sec", "a")])]))
            .await;
        if let Err(e) = e {
            assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "per-second Redis still answering"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = call(&mut c, req("ps", vec![desc(&[("day", "a")])])).await;
    assert_eq!(r.statuses[0].limit_remaining, 1000 - n as u32 - 2);
    let errors = s
        .metric("sluice_store_errors_total{kind=\"unavailable\",store=\"redis_per_second\"}")
        .await;
    assert!(errors >= 1.0, "{errors}");
    assert_eq!(
        s.metric("sluice_store_errors_total{kind=\"unavailable\",store=\"redis\"}")
            .await,
        0.0
    );
    // Each failed request drops the connection it used; with none left, health fails.
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.http_get("/healthcheck").await.0 == 200 {
        assert!(
            Instant::now() < deadline,
            "health ignores the per-second Redis"
        );
        let _ = c
            .should_rate_limit(req("ps", vec![desc(&[("sec", "a")])]))
            .await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The gauges follow within a health tick.
    while s
        .metric("sluice_store_ready{store=\"redis_per_second\"}")
        .await
        != 0.0
    {
        assert!(Instant::now() < deadline, "sluice_store_ready stays 1");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.metric("sluice_store_ready{store=\"redis\"}").await, 1.0);
}
