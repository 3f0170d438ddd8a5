//! BENCHMARKS.md's outage table, from one run: admitted versus held after a 5 s freeze
//! (without the fallback too, for comparison) and a 3 s kill (restarted from the append-only
//! file, and empty); and what ids cost Redis. Exact counts, not timings, so a shared machine
//! serves:
//!
//! `cargo test --test integration -- --ignored --nocapture outage::table::outage_table`

use std::time::Duration;

use super::kill::{kill_aof, kill_empty};
use super::stall::freeze;
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "prints BENCHMARKS.md's outage table; run on demand"]
async fn outage_table() {
    let rows = [
        (
            "Redis frozen (SIGSTOP) 5 s, resumed; `--store-failure-mode error`",
            freeze(Duration::from_secs(5), "error").await,
        ),
        (
            "Redis frozen (SIGSTOP) 5 s, resumed",
            freeze(Duration::from_secs(5), "local").await,
        ),
        (
            "Redis killed 3 s, restarted from its AOF (`appendfsync always`)",
            kill_aof(Duration::from_secs(3)).await,
        ),
        (
            "Redis killed 3 s, restarted empty (hits from the kill on)",
            kill_empty(Duration::from_secs(3)).await,
        ),
    ];
    println!(
        "| scenario | calls | failed | admitted (strict / batched) | Redis holds (strict / batched) | store errors counted |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, o) in &rows {
        println!(
            "| {name} | {} | {} | {} / {} | {} / {} | {} |",
            o.calls, o.errors, o.admitted.0, o.admitted.1, o.held.0, o.held.1, o.store_errors
        );
    }
    for (_, o) in &rows[1..] {
        assert_eq!(o.held, o.admitted);
    }
}

/// `cmdstat_<command>` of `INFO commandstats`: calls and microseconds.
fn commandstat(redis: &RedisServer, command: &str) -> (u64, u64) {
    let info: String = redis.query(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:");
    let Some(line) = info.lines().find_map(|l| l.strip_prefix(&prefix)) else {
        return (0, 0);
    };
    let field = |name: &str| {
        line.split(',')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("calls"), field("usec"))
}

/// `n` requests from [`TASKS`] clients, each on `descriptor`.
async fn requests(s: &Server, descriptor: (&'static str, &'static str), n: usize) {
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let mut c = s.client().await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..n / TASKS {
                call(&mut c, req("o", vec![desc(&[descriptor])])).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("client");
    }
}

/// What ids cost Redis, from `INFO commandstats` (BENCHMARKS.md): script calls, the `SET`s
/// that record ids, Redis's time per request (every script call's, and the id `SET`s' part
/// of it), and the id keys left at the end (they expire: 10 s for a request's, 60 s for a
/// write-back's), for strict traffic without and with the fallback, and for batched traffic
/// (write-backs only).
///
/// `cargo test --test integration -- --ignored --nocapture outage::table::id_cost` (counts, and Redis's own time per call: the build of sluice does not matter)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "prints BENCHMARKS.md's id cost table; run on demand"]
async fn id_cost() {
    const N: usize = 20_000;
    println!(
        "| traffic ({N} requests, {TASKS} clients) | script calls | id `SET`s | Redis µs per request | of which id `SET`s | id keys left |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, descriptor, fallback) in [
        ("strict, fallback off (no ids)", ("hot", "x"), false),
        ("strict, `--store-failure-mode local`", ("hot", "x"), true),
        ("batched, fallback off (write-backs)", ("warm", "x"), false),
    ] {
        let redis = RedisServer::start();
        let mut b = in_process()
            .running(running_clock())
            .file("o.yaml", RULES)
            .args(["--redis-url", &redis.url(), "--redis-timeout", "2s"]);
        if fallback {
            b = b.arg("--store-failure-mode=local");
        }
        let s = b.start_healthy().await;
        requests(&s, descriptor, 400).await;
        let _: () = redis.query(&["CONFIG", "RESETSTAT"]);
        requests(&s, descriptor, N).await;
        // The last write-back.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (calls, usec) = commandstat(&redis, "evalsha");
        let (sets, set_usec) = commandstat(&redis, "set");
        let ids: Vec<String> = redis.query(&["KEYS", "*:id:*"]);
        println!(
            "| {name} | {calls} | {sets} | {:.1} | {:.1} | {} |",
            usec as f64 / N as f64,
            set_usec as f64 / N as f64,
            ids.len()
        );
    }
}
