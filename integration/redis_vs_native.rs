//! Differential test: random traces (hits, peeks, refunds, several limits per descriptor,
//! penalties, overdraft, rate/burst changes, clock steps including backwards) run through
//! `RedisStore` in local time mode and through a native store sharing the same
//! `ManualClock`; every `LimitResult` must be identical.
//!
//! Native sides, both always run (`cargo test --test integration redis_vs_native`):
//! - `support::model::ModelStore`, `docs/explanation/algorithms.md` transcribed in exact integer
//!   arithmetic (an oracle for the Lua, independent of the script), clock going both ways;
//! - `MemoryStore` (the native algorithms of `src/limit/algorithm/`), clock moving forward
//!   only (see [`differential`] for why).
//!
//! The model is also run against a Redis store whose script is forced onto its Redis < 7
//! branch (`RedisStore::new_forcing_pre_redis7`), which the Redis 7 here never takes.
//!
//! Calendar windows (`calendar`, which the model does not transcribe) run the same way
//! against `MemoryStore`: day, week and month periods in zones with DST and half-hour offsets,
//! traces stepping by hours across local midnights.
//!
//! Cases: `SLUICE_DIFF_CASES` (default 96 per test, a few seconds; raise it for a deeper run,
//! e.g. `SLUICE_DIFF_CASES=5000 cargo test --test integration redis_vs_native`). Each case uses
//! fresh descriptor tags on one shared redis-server, so cases (and proptest's shrinking runs)
//! never see each other's state.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sluice::limit::{Algorithm, Calendar, Check, Clock, LimitSpec, ManualClock, StateTag, Unit};
use sluice::store::redis::{RedisConfig, RedisStore, TimeSource};
use sluice::store::{Call, Store};

use crate::support::model_store::ModelStore;
use crate::support::redis::RedisServer;

mod traces;

#[derive(Clone, Debug)]
enum Op {
    /// Move the clock (ms; negative = backwards).
    Step(i64),
    /// One request: a check per listed descriptor (several = one `run()`).
    Run(Vec<(usize, u64, bool)>),
    /// Hot change of one limit's rate and burst (same state identity).
    Retune {
        desc: usize,
        limit: usize,
        rate: u64,
        burst: u64,
    },
}

#[derive(Clone, Debug)]
struct Trace {
    start: u64,
    descriptors: Vec<Vec<LimitSpec>>,
    ops: Vec<Op>,
}

fn limit_strategy() -> impl Strategy<Value = LimitSpec> {
    (
        prop::sample::select(Algorithm::ALL.to_vec()),
        prop_oneof![12 => 1u64..=6, 1 => Just(0u64)],
        1u64..=6,
        prop::sample::select(vec![Unit::Second, Unit::Second, Unit::Minute]),
        // B = 1 is below what config allows (2) but within the doc's precondition (B ≥ 1).
        1u32..=5,
        any::<bool>(),
        prop::sample::select(vec![0u64, 0, 0, 300, 1500]),
        // Windows of several units (`unit_multiplier`): W = unit × multiplier everywhere.
        prop::sample::select(vec![1u32, 1, 1, 3]),
    )
        .prop_map(
            |(algorithm, rate, burst, unit, buckets, overdraft, penalty_ms, unit_multiplier)| {
                LimitSpec {
                    requests_per_unit: rate,
                    unit,
                    unit_multiplier,
                    algorithm,
                    burst: if algorithm.has_burst() { burst } else { rate },
                    buckets: if algorithm == Algorithm::SlidingWindow {
                        buckets
                    } else {
                        0
                    },
                    // Config rejects overdraft on a sliding log.
                    overdraft: overdraft && algorithm != Algorithm::SlidingLog,
                    penalty_ms,
                    name: None,
                    slot: 0,
                    calendar: None,
                }
            },
        )
}

/// A calendar window: `fixed_window` or `sliding_window` over days (or weeks, or months) of a
/// zone with DST or a half-hour offset.
fn calendar_limit_strategy() -> impl Strategy<Value = LimitSpec> {
    (
        prop::sample::select(vec![Algorithm::FixedWindow, Algorithm::SlidingWindow]),
        1u64..=6,
        prop::sample::select(vec![
            Unit::Day,
            Unit::Day,
            Unit::Day,
            Unit::Week,
            Unit::Month,
        ]),
        prop::sample::select(vec![1u32, 1, 2]),
        1u32..=5,
        any::<bool>(),
        prop::sample::select(vec![
            "America/New_York",
            "Asia/Kolkata",
            "Europe/Berlin",
            "Australia/Lord_Howe",
            "UTC",
        ]),
    )
        .prop_map(
            |(algorithm, rate, unit, unit_multiplier, buckets, overdraft, zone)| LimitSpec {
                unit_multiplier,
                buckets: if algorithm == Algorithm::SlidingWindow {
                    buckets
                } else {
                    0
                },
                overdraft,
                calendar: Calendar::new(zone),
                ..LimitSpec {
                    algorithm,
                    ..LimitSpec::fixed_window(rate, unit)
                }
            },
        )
}

/// Clock steps for calendar traces: hours, as well as the milliseconds around a boundary.
fn calendar_step_strategy() -> impl Strategy<Value = Op> {
    prop::sample::select(vec![
        1i64,
        999,
        60_000,
        3_600_000,
        5_400_000,
        6 * 3_600_000,
        23 * 3_600_000,
        86_400_000,
        3 * 86_400_000,
    ])
    .prop_map(Op::Step)
}

fn op_strategy(descriptors: usize) -> impl Strategy<Value = Op> {
    let check = (
        0..descriptors,
        prop_oneof![
            15 => prop::sample::select(vec![0u64, 1, 1, 1, 2, 3, 7]),
            1 => Just(u64::MAX),
        ],
        prop::bool::weighted(0.1),
    );
    prop_oneof![
        3 => prop::sample::select(vec![0i64, 1, 37, 99, 100, 250, 333, 999, 1000, 2500, 61_000, -1, -120, -3000])
            .prop_map(Op::Step),
        6 => prop::collection::vec(check, 1..=3).prop_map(Op::Run),
        // Rate 0 too: a bucket turns inert (no state read or written) and back.
        1 => (0..descriptors, 0usize..3, prop_oneof![8 => 1u64..=6, 1 => Just(0u64)], 1u64..=6)
            .prop_map(|(desc, limit, rate, burst)| Op::Retune { desc, limit, rate, burst }),
    ]
}

fn trace_strategy() -> impl Strategy<Value = Trace> {
    traces(limit_strategy().boxed(), false)
}

fn calendar_trace_strategy() -> impl Strategy<Value = Trace> {
    traces(calendar_limit_strategy().boxed(), true)
}

/// Traces of up to three descriptors of up to three limits; `calendar`: starting anywhere in
/// a UTC day (calendar boundaries are local), with steps of hours too.
fn traces(limits: BoxedStrategy<LimitSpec>, calendar: bool) -> impl Strategy<Value = Trace> {
    prop::collection::vec(prop::collection::vec(limits, 1..=3), 1..=3)
        .prop_flat_map(move |descriptors| {
            let n = descriptors.len();
            let op = if calendar {
                prop_oneof![2 => op_strategy(n), 1 => calendar_step_strategy()].boxed()
            } else {
                op_strategy(n).boxed()
            };
            (
                if calendar {
                    0u64..86_400_000
                } else {
                    0u64..5000
                },
                Just(descriptors),
                prop::collection::vec(op, 1..60),
            )
        })
        .prop_map(|(start, mut descriptors, ops)| {
            // Limits of one descriptor need distinct state identities (their slot).
            for d in &mut descriptors {
                for (i, l) in d.iter_mut().enumerate() {
                    l.slot = i as u8;
                }
            }
            Trace {
                start,
                descriptors,
                ops,
            }
        })
}

/// Run `trace` through both stores; the first difference fails the case.
async fn run_trace<A: Store, B: Store>(
    a: &A,
    b: &B,
    clock: &ManualClock,
    trace: &Trace,
    case: u64,
    backwards: bool,
) -> Result<(), TestCaseError> {
    // Day-aligned, near real time (Redis TTLs are real time), plus the case's offset.
    let now = sluice::limit::SystemClock.now_ms();
    clock.set(now - now % 86_400_000 + trace.start);
    let mut descriptors = trace.descriptors.clone();
    let tags: Vec<StateTag> = (0..descriptors.len())
        .map(|i| {
            StateTag::compute(
                "diff",
                [("case", case.to_string().as_str()), ("d", &i.to_string())],
            )
        })
        .collect();
    for (step, op) in trace.ops.iter().enumerate() {
        match op {
            Op::Step(ms) if *ms < 0 && !backwards => {}
            Op::Step(ms) => clock.set(clock.now_ms().saturating_add_signed(*ms)),
            Op::Retune {
                desc,
                limit,
                rate,
                burst,
            } => {
                if let Some(l) = descriptors[*desc].get_mut(*limit) {
                    l.requests_per_unit = *rate;
                    l.burst = if l.algorithm.has_burst() {
                        *burst
                    } else {
                        *rate
                    };
                }
            }
            Op::Run(list) => {
                let checks: Vec<Check<'_>> = list
                    .iter()
                    .map(|&(d, cost, refund)| Check {
                        tag: tags[d],
                        limits: &descriptors[d],
                        cost,
                        refund,
                    })
                    .collect();
                let (mut ra, mut rb) = (Vec::new(), Vec::new());
                a.run(&Call::new(&checks), &mut ra)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("store A failed: {e}")))?;
                b.run(&Call::new(&checks), &mut rb)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("store B failed: {e}")))?;
                prop_assert_eq!(ra, rb, "step {} {:?} at {}", step, op, clock.now_ms());
            }
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("SLUICE_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

/// Run the property with `other` built per case from the shared clock.
/// `backwards`: whether the clock may step back. The memory store evicts a state once its
/// expiry has passed, so after a backwards step it can have forgotten what Redis (whose TTLs
/// run on real time) and the model still hold: the stores agree under a clock that goes
/// backwards only while no expiry is crossed, which random traces do not respect.
/// `pre_redis7`: the Redis store's script takes its Redis < 7 branch.
fn differential<S: Store>(make: impl Fn(Arc<dyn Clock>) -> S, backwards: bool, pre_redis7: bool) {
    differential_over(make, backwards, pre_redis7, trace_strategy());
}

/// [`differential`] over the traces of `strategy`.
fn differential_over<S: Store>(
    make: impl Fn(Arc<dyn Clock>) -> S,
    backwards: bool,
    pre_redis7: bool,
    strategy: impl Strategy<Value = Trace>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let server = RedisServer::start();
    let clock = Arc::new(ManualClock::new(0));
    let redis = rt.block_on(async {
        let cfg = RedisConfig {
            url: server.url(),
            time_source: TimeSource::Local,
            ttl_slack_ms: Some(3_600_000),
            request_timeout: Duration::from_secs(5),
            pool_size: 1,
            ..RedisConfig::default()
        };
        let store = if pre_redis7 {
            RedisStore::new_forcing_pre_redis7(cfg, clock.clone())
        } else {
            RedisStore::new(cfg, clock.clone())
        }
        .expect("config");
        assert!(store.wait_ready(Duration::from_secs(10)).await);
        store
    });
    let case = AtomicU64::new(0);
    for trace in traces::fixed_traces() {
        let other = make(clock.clone());
        let id = case.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = rt.block_on(run_trace(&redis, &other, &clock, &trace, id, backwards)) {
            panic!("redis and the native store disagree on a fixed trace: {e}");
        }
    }
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&strategy, |trace| {
        let other = make(clock.clone());
        let id = case.fetch_add(1, Ordering::Relaxed);
        rt.block_on(run_trace(&redis, &other, &clock, &trace, id, backwards))
    });
    if let Err(e) = result {
        panic!("redis and the native store disagree: {e}");
    }
    // The forced branch ran (it is the only one that asks HLEN); the other never did.
    assert_eq!(server.command_calls("hlen") > 0, pre_redis7);
}

#[test]
fn redis_matches_the_document_model() {
    differential(ModelStore::new, true, false);
}

#[test]
fn redis_pre_redis7_branch_matches_the_document_model() {
    differential(ModelStore::new, true, true);
}

#[test]
fn redis_matches_memory_store() {
    differential(sluice::store::memory::MemoryStore::new, false, false);
}

#[test]
fn redis_matches_memory_store_on_calendar_windows() {
    differential_over(
        sluice::store::memory::MemoryStore::new,
        false,
        false,
        calendar_trace_strategy(),
    );
}
