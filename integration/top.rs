//! Heavy hitters: the admin listener's `/top` (order, counts, denials, the window turning on
//! the injected clock, bad queries, turned off), the bounded Prometheus view, `sluice top`
//! from the real binary, and the memory bound: 100 000 distinct values through the real
//! binary grow its RSS less than the stated bound.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::in_process::*;
use crate::support::redis::RedisServer;
use crate::support::sluice::*;

const RULES: &str = r#"
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 100}
"#;

async fn top(admin: Option<SocketAddr>, query: &str) -> (u16, Value) {
    let admin = admin.expect("the admin listener is on");
    let (code, body) = http_request(admin, "GET", &format!("/top?{query}"), "").await;
    let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (code, json)
}

/// `(descriptor as k=v, hits, denied)` of each listed descriptor, in order.
fn listed(report: &Value) -> Vec<(String, u64, u64)> {
    report["top"]
        .as_array()
        .expect("top")
        .iter()
        .map(|e| {
            let entries: Vec<String> = e["entries"]
                .as_array()
                .expect("entries")
                .iter()
                .map(|kv| {
                    format!(
                        "{}={}",
                        kv["key"].as_str().unwrap(),
                        kv["value"].as_str().unwrap()
                    )
                })
                .collect();
            (
                entries.join(","),
                e["hits"].as_u64().unwrap(),
                e["denied"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// 6 hits from one address (3 denied), 4 on a path, 2 from another address.
async fn traffic(s: &Server) {
    let mut c = s.client().await;
    for _ in 0..6 {
        call(
            &mut c,
            req("edge", vec![desc(&[("remote_address", "10.0.0.1")])]),
        )
        .await;
    }
    for _ in 0..4 {
        call(&mut c, req("edge", vec![desc(&[("path", "/search")])])).await;
    }
    for _ in 0..2 {
        call(
            &mut c,
            req("edge", vec![desc(&[("remote_address", "10.0.0.2")])]),
        )
        .await;
    }
}

#[tokio::test]
async fn top_lists_the_heaviest_descriptors_first_with_their_denials() {
    let s = in_process().file("edge.yaml", RULES).start().await;
    traffic(&s).await;

    let (code, r) = top(s.admin, "domain=edge").await;
    assert_eq!(code, 200, "{r}");
    assert_eq!(
        listed(&r),
        [
            ("remote_address=10.0.0.1".to_owned(), 6, 3),
            ("path=/search".to_owned(), 4, 0),
            ("remote_address=10.0.0.2".to_owned(), 2, 0),
        ]
    );
    assert_eq!(r["top"][0]["rule"], "edge.remote_address");
    assert_eq!(
        (r["hits"].as_u64(), r["denied"].as_u64()),
        (Some(12), Some(3))
    );
    assert_eq!(
        r["error"],
        serde_json::json!({"hits": 0, "denied": 0}),
        "exact below the capacity"
    );
    assert_eq!(r["window_s"], 60);
    assert_eq!(r["by"], "hits");

    let (_, r) = top(s.admin, "domain=edge&by=denied").await;
    assert_eq!(listed(&r), [("remote_address=10.0.0.1".to_owned(), 6, 3)]);
    let (_, r) = top(s.admin, "domain=edge&n=1").await;
    assert_eq!(listed(&r).len(), 1);
}

#[tokio::test]
async fn the_window_keeps_the_half_before_this_one_and_forgets_the_rest() {
    let s = in_process().file("edge.yaml", RULES).start().await;
    traffic(&s).await;
    // The test clock starts a second into a half of the 60 s window.
    s.advance(Duration::from_secs(30));
    let (_, r) = top(s.admin, "domain=edge").await;
    assert_eq!(
        listed(&r).len(),
        3,
        "the half before this one is still read"
    );
    assert_eq!(
        r["covered_s"], 31,
        "the last half and the second of this one"
    );
    s.advance(Duration::from_secs(30));
    let (_, r) = top(s.admin, "domain=edge").await;
    assert!(listed(&r).is_empty(), "{r}");
}

#[tokio::test]
async fn bad_queries_and_unknown_domains_are_refused_with_a_reason() {
    let s = in_process().file("edge.yaml", RULES).start().await;
    for (query, why) in [
        ("", "domain=<domain>"),
        ("domain=edge&n=0", "n must be a number from 1 to 1000"),
        ("domain=edge&n=lots", "n must be a number"),
        ("domain=edge&by=cost", "by must be hits or denied"),
        (
            "domain=edge&descriptor=a=b",
            "unknown query parameter 'descriptor'",
        ),
    ] {
        let (code, r) = top(s.admin, query).await;
        assert_eq!(code, 400, "{query}: {r}");
        assert!(r["error"].as_str().unwrap().contains(why), "{query}: {r}");
    }
    let (code, r) = top(s.admin, "domain=nope").await;
    assert_eq!(code, 404);
    assert_eq!(r["error"], "domain 'nope' is not in the loaded config");
}

#[tokio::test]
async fn heavy_hitters_can_be_turned_off() {
    let s = in_process()
        .file("edge.yaml", RULES)
        .args(["--top-capacity", "0"])
        .start()
        .await;
    traffic(&s).await;
    let (code, r) = top(s.admin, "domain=edge").await;
    assert_eq!(code, 404);
    assert!(
        r["error"].as_str().unwrap().contains("--top-capacity 0"),
        "{r}"
    );
    let (_, metrics) = s.http_get("/metrics").await;
    assert!(!metrics.contains("sluice_top_hits{"), "{metrics}");
}

/// The gauges hold `--top-metrics` descriptors per domain and family, however many were seen.
#[tokio::test]
async fn the_prometheus_view_holds_the_top_n_of_each_domain() {
    let s = in_process()
        .file("edge.yaml", RULES)
        .args(["--top-metrics", "2"])
        .start()
        .await;
    traffic(&s).await;
    let (_, metrics) = s.http_get("/metrics").await;
    let series = |family: &str| {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // Prometheus orders series by their labels.
    assert_eq!(
        series("sluice_top_hits"),
        [
            "sluice_top_hits{domain=\"edge\",entries=\"path=/search\",rank=\"2\",rule=\"edge.path\"} 4",
            "sluice_top_hits{domain=\"edge\",entries=\"remote_address=10.0.0.1\",rank=\"1\",rule=\"edge.remote_address\"} 6",
        ]
    );
    assert_eq!(
        series("sluice_top_denied"),
        [
            "sluice_top_denied{domain=\"edge\",entries=\"remote_address=10.0.0.1\",rank=\"1\",rule=\"edge.remote_address\"} 3"
        ]
    );
}

#[tokio::test]
async fn sluice_top_prints_the_list_as_a_table() {
    let s = in_process().file("edge.yaml", RULES).start().await;
    traffic(&s).await;
    let admin = s.admin.expect("admin").to_string();
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["top", "--admin-addr", &admin, "--domain"])
            .args(extra)
            .env_remove("SLUICE_ADMIN_ADDR")
            .output()
            .expect("sluice top");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&["edge", "-n", "2"]);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<String> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        lines[..3],
        [
            "RULE DESCRIPTOR HITS DENIED",
            "edge.remote_address remote_address=10.0.0.1 6 3",
            "edge.path path=/search 4 0",
        ]
    );
    assert!(
        lines[3].starts_with(
            "domain edge by hits: the last 31s (window 60s): 12 hits, 3 denied; counts exact"
        ),
        "{out}"
    );
    let (code, out, _) = run(&["edge", "--by", "denied", "--json"]);
    assert_eq!(code, Some(0));
    let json: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(json["by"], "denied");

    let (code, _, err) = run(&["nope"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "sluice top: HTTP 404: domain 'nope' is not in the loaded config"
    );
}

/// Resident memory of a process, in bytes (`VmRSS` of `/proc/PID/status`).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// 100 000 distinct values through the real binary (state in Redis, so the process holds
/// only the heavy hitters): its RSS grows less than one domain's stated bound,
/// 4 × `--top-capacity` counters of at most 1 KiB (`sluice::top::MAX_COUNTER_BYTES`).
#[tokio::test]
async fn a_hundred_thousand_values_stay_within_the_memory_bound() {
    let redis = RedisServer::start();
    let capacity = 1000u64;
    let s = sluice()
        .file("edge.yaml", RULES)
        .redis(redis.url())
        .args(["--top-capacity", &capacity.to_string()])
        // However long the sending takes, the reading covers all of it.
        .args(["--top-window", "2h"])
        .start_healthy()
        .await;
    let mut c = s.client().await;
    let batch = |first: u64| {
        let descriptors = (first..first + 64)
            .map(|i| desc(&[("path", &format!("/item/{i:06}"))]))
            .collect();
        req("edge", descriptors)
    };
    // Warm up: connections, buffers, the allocator's pages for requests this size.
    for i in 0..50 {
        call(&mut c, batch(1_000_000 + (i % 2) * 64)).await;
    }
    let before = rss(s.pid());
    let values = 100_000u64;
    let mut sent = 0;
    while sent < values {
        call(&mut c, batch(sent)).await;
        sent += 64;
    }
    let after = rss(s.pid());
    let bound = 4 * capacity * sluice::top::MAX_COUNTER_BYTES as u64;
    let grown = after.saturating_sub(before);
    eprintln!("RSS {before} → {after}: {grown} bytes for {sent} distinct values (bound {bound})");
    assert!(
        grown < bound,
        "RSS grew {grown} bytes ({before} → {after}) for {sent} distinct values; bound {bound}"
    );
    let (_, r) = top(s.admin, "domain=edge&n=3").await;
    assert!(
        r["hits"].as_u64().unwrap() >= values,
        "every value counted: {r}"
    );
    assert!(
        r["error"]["hits"].as_u64().unwrap() > 0,
        "the summaries overflowed: {r}"
    );
}
