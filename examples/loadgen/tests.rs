//! The load generator's own tests: key choice, request building, the shared request
//! budget, stats merging, and an end-to-end run against the stand-in with exact counts,
//! so that figures in BENCHMARKS.md rest on a checked client.

use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use clap::Parser;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as RlCode;

use crate::args::{Args, KeyOrder, KeyPicker, Workload};
use crate::run::{Schedule, run};
use crate::stats::Stats;

fn args(extra: &[&str]) -> Args {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(extra);
    Args::parse_from(argv)
}

#[test]
fn random_keys_are_in_range_and_spread() {
    let mut p = KeyPicker::new(KeyOrder::Random, 10, 1, 0, 1);
    let mut seen = [0u32; 10];
    for _ in 0..10_000 {
        seen[p.next()] += 1;
    }
    assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
}

#[test]
fn round_robin_covers_every_key_and_tasks_start_apart() {
    let mut p = KeyPicker::new(KeyOrder::RoundRobin, 10, 3, 0, 2);
    let mut seen = [false; 10];
    for _ in 0..10 {
        seen[p.next()] = true;
    }
    assert!(seen.iter().all(|&s| s));
    let mut q = KeyPicker::new(KeyOrder::RoundRobin, 10, 3, 1, 2);
    assert_eq!(q.next(), 5);
}

#[test]
fn requests_carry_distinct_wrapping_keys() {
    let w = Workload::new(&args(&["--keys", "5", "--descriptors", "3", "--key", "k"]));
    let r = w.request(4);
    let values: Vec<&str> = r
        .descriptors
        .iter()
        .map(|d| d.entries[0].value.as_str())
        .collect();
    assert_eq!(values, ["v4", "v0", "v1"]);
    assert_eq!(r.descriptors[0].entries[0].key, "k");
    assert_eq!(r.domain, "bench");
    assert_eq!(r.hits_addend, 0);
}

#[test]
fn requests_budget_is_shared() {
    let s = Schedule {
        measure_start: Instant::now(),
        deadline: None,
        limit: Some(2),
        issued: AtomicU64::new(0),
    };
    let now = Instant::now();
    assert!(s.admit(now) && s.admit(now) && !s.admit(now));
}

#[test]
fn stats_merge_and_count() {
    let mut a = Stats::new().unwrap();
    let mut b = Stats::new().unwrap();
    let ok = RateLimitResponseFixture::with(RlCode::Ok);
    a.record(Ok(ok), Duration::from_micros(1500));
    b.record(
        Ok(RateLimitResponseFixture::with(RlCode::OverLimit)),
        Duration::from_micros(500),
    );
    b.record(Err(tonic::Status::unavailable("down")), Duration::ZERO);
    a.merge(b).unwrap();
    assert_eq!(
        (a.ok, a.over_limit, a.error_total(), a.requests()),
        (1, 1, 1, 3)
    );
    assert_eq!(a.latency_us.len(), 2, "errors are not timed");
    assert_eq!(a.latency_us.max(), 1500);
    assert_eq!(
        a.errors_by_code().collect::<Vec<_>>(),
        [("Unavailable".to_string(), 1)]
    );
    assert_eq!(a.error_sample.as_deref(), Some("Unavailable: down"));
}

struct RateLimitResponseFixture;
impl RateLimitResponseFixture {
    fn with(
        code: RlCode,
    ) -> tonic::Response<envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse> {
        tonic::Response::new(
            envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse {
                overall_code: code as i32,
                ..Default::default()
            },
        )
    }
}

/// End to end against the stand-in: exact counts in `--requests` mode.
#[test]
fn self_test_counts_every_outcome() {
    let common = [
        "--self-test",
        "--warmup",
        "100ms",
        "--requests",
        "300",
        "--connections",
        "2",
        "--concurrency",
        "4",
        "--keys",
        "10",
        "--descriptors",
        "2",
    ];
    let ok = run(&args(&common)).expect("run against the stand-in");
    assert_eq!((ok.stats.requests(), ok.stats.ok), (300, 300));
    assert!(ok.succeeded());
    assert_eq!(ok.to_json()["latency_ms"]["samples"], 300);
    if cfg!(target_os = "linux") {
        assert!(ok.client_cpu.is_some(), "/proc/self/stat is readable");
    }

    let over = run(&args(&[&common[..], &["--key", "limited"]].concat()))
        .expect("run against the stand-in");
    assert_eq!(over.stats.over_limit, 300);
    assert!(over.succeeded(), "OVER_LIMIT is an answer, not a failure");

    let failed =
        run(&args(&[&common[..], &["--domain", ""]].concat())).expect("run against the stand-in");
    assert_eq!(
        failed.stats.errors[tonic::Code::InvalidArgument as usize],
        300
    );
    assert!(!failed.succeeded());
    assert!(failed.to_json()["latency_ms"].is_null());
    assert!(failed.to_text().contains("InvalidArgument 300"));
}

#[test]
fn open_loop_sends_exactly_the_requested_count_at_its_rate() {
    let r = run(&args(&[
        "--self-test",
        "--rate",
        "2000",
        "--warmup",
        "0s",
        "--requests",
        "200",
        "--connections",
        "2",
    ]))
    .expect("run against the stand-in");
    assert_eq!((r.stats.requests(), r.stats.ok), (200, 200));
    assert_eq!(r.to_json()["offered_rate"], 2000.0);
    assert!(r.to_text().contains("open loop at 2000 req/s"));
}

#[test]
fn key_lists_and_churn_shape_the_descriptors() {
    let w = Workload::new(&args(&["--keys", "4", "--key", "a,b"]));
    let keys: Vec<String> = (0..4)
        .map(|i| w.request(i).descriptors[0].entries[0].key.clone())
        .collect();
    assert_eq!(keys, ["a", "b", "a", "b"]);
    let c = Workload::new(&args(&["--keys", "4", "--key", "a,b", "--churn"]));
    let e = &c.request(3).descriptors[0].entries[0];
    assert_eq!(e.key, "b");
    let (v, second) = e.value.split_once('.').expect("v{i}.{second}");
    assert_eq!(v, "v3");
    assert!(second.parse::<u64>().is_ok_and(|s| s > 1_700_000_000));
}

/// Open loop: answers later than `--timeout` after a call was due are late, not answers; past
/// `--max-outstanding` calls fail in the client, counted apart, never sent.
#[test]
fn open_loop_counts_late_answers_and_client_overflow_apart() {
    let common = [
        "--self-test",
        "--rate",
        "2000",
        "--warmup",
        "0s",
        "--requests",
        "100",
        "--connections",
        "2",
    ];
    let late = run(&args(
        &[
            &common[..],
            &["--self-test-delay", "300ms", "--timeout", "50ms"],
        ]
        .concat(),
    ))
    .expect("run against the stand-in");
    assert_eq!(late.stats.ok, 0);
    assert_eq!(
        late.stats.errors[tonic::Code::DeadlineExceeded as usize],
        100
    );

    // Every call is still outstanding when the last is due (100 in 50 ms, answers after 2 s).
    let bounded = run(&args(
        &[
            &common[..],
            &[
                "--self-test-delay",
                "2s",
                "--timeout",
                "30s",
                "--max-outstanding",
                "10",
            ],
        ]
        .concat(),
    ))
    .expect("run against the stand-in");
    assert_eq!((bounded.stats.ok, bounded.stats.overflow), (10, 90));
    assert_eq!(bounded.to_json()["client_overflow"], 90);
    assert!(bounded.to_text().contains("overflow     90 calls"));
}
