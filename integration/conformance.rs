//! The store conformance suite: one set of scenarios, written against the `Store` trait,
//! that every store must pass bit for bit (docs/explanation/algorithms.md is the contract).
//!
//! Instantiate it for a store with one line, giving a module name and an async factory
//! `async fn(Arc<ManualClock>) -> Option<S>` (`None` skips the test):
//!
//! ```ignore
//! conformance_suite!(memory, make_memory_store);
//! ```
//!
//! which generates one `#[tokio::test]` per scenario. Instantiated for the memory store and
//! for the Redis store (`RedisStore` in local time mode on the suite's clock, each test with
//! its own `redis-server`; never skipped: a missing `redis-server` fails the tests).
//!
//! Each test gets its own clock, starting at `ManualClock::starting_now()` and only ever
//! moved forward, and its own random tags, so a shared Redis could also run the tests in
//! parallel and keep keys from earlier runs. Windows are minutes (rarely seconds, or a year
//! where `C·W` must exceed 2^53) so real-time TTLs outlive the few milliseconds a scenario
//! takes, and no scenario relies on state surviving past its TTL.

mod budgets;
mod calendar;
mod multi_limit;
mod operator;
mod scenarios;

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use sluice::limit::{Algorithm, Check, Clock, LimitResult, LimitSpec, ManualClock, StateTag, Unit};
use sluice::store::memory::MemoryStore;
use sluice::store::redis::{RedisConfig, RedisStore, TimeSource};
use sluice::store::{Call, Store, StoreError};

use crate::support::redis::RedisServer;

pub use budgets::*;
pub use calendar::*;
pub use multi_limit::*;
pub use operator::*;
pub use scenarios::*;

/// Generates `mod $name` with one test per scenario, running on stores made by `$make`.
macro_rules! conformance_suite {
    ($name:ident, $make:path) => {
        mod $name {
            $crate::conformance::conformance_suite!(@tests $make;
                fixed_window_counts_and_resets,
                boundary_burst_only_for_fixed_window,
                retry_is_exact_for_every_algorithm,
                sliding_window_drops_oldest_sub_windows_first,
                sliding_window_uneven_sub_windows,
                sliding_log_retries_from_the_kth_oldest_entry,
                buckets_refill_and_leak,
                peek_never_writes,
                refunds_never_go_below_empty,
                overdraft_charges_denied_hits,
                penalty_denies_without_counting_and_expires_exactly,
                limits_of_a_check_are_all_or_nothing,
                bucket_usage_is_capped_at_lmax,
                window_limits_have_no_scaled_bound,
                several_checks_per_call,
                cost_larger_than_capacity,
                config_change_keeps_state,
                state_is_forgotten_after_its_ttl,
                concurrent_hits_are_counted_exactly,
                rate_limits_charge_all_or_nothing_by_default,
                shipped_rate_limits_example_holds,
                over_limit_waits_for_the_longest_denial,
                ok_reports_the_binding_limit,
                durations_fit_protobuf,
                multiplied_fixed_windows_align_to_the_whole_window,
                every_algorithm_runs_over_the_multiplied_window,
                changing_the_multiplier_starts_fresh_state,
                reset_forgets_counters_and_penalties_of_one_descriptor,
                budgets_past_2_to_the_32_are_exact,
                budgets_of_2_to_the_53_are_exact,
                calendar_days_follow_local_midnight_and_dst,
                calendar_month_in_kolkata_counts_a_30_billion_budget,
                calendar_sliding_window_weighs_the_previous_period,
                calendar_weeks_start_on_monday_and_state_is_their_own,
            );
        }
    };
    (@tests $make:path; $($scenario:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                let clock = std::sync::Arc::new(sluice::limit::ManualClock::starting_now());
                let Some(store) = $make(clock.clone()).await else {
                    eprintln!("{}: store unavailable, skipped", stringify!($scenario));
                    return;
                };
                let env = $crate::conformance::Env::new(store, clock);
                $crate::conformance::$scenario(&env).await;
            }
        )*
    };
}
pub(crate) use conformance_suite;

pub async fn make_memory_store(clock: Arc<ManualClock>) -> Option<MemoryStore> {
    Some(MemoryStore::new(clock))
}

conformance_suite!(memory, crate::conformance::make_memory_store);

/// A `RedisStore` and the `redis-server` it talks to, alive as long as the store (fields drop
/// in order: the store first).
pub struct RedisUnderTest {
    store: RedisStore,
    _server: RedisServer,
}

impl Store for RedisUnderTest {
    fn run(
        &self,
        call: &Call<'_>,
        out: &mut Vec<LimitResult>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.store.run(call, out)
    }

    fn reset(
        &self,
        tag: StateTag,
        limits: &[LimitSpec],
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        self.store.reset(tag, limits)
    }

    fn is_ready(&self) -> bool {
        self.store.is_ready()
    }
}

/// A fresh `redis-server` and a `RedisStore` on it reading the suite's clock (local time
/// mode). The TTL slack (1 h) is far longer than a scenario runs, so real-time TTLs never
/// drop state the simulated clock still needs; state the simulated clock has outlived is
/// equivalent to missing (docs/explanation/algorithms.md, "Expiry").
pub async fn make_redis_store(clock: Arc<ManualClock>) -> Option<RedisUnderTest> {
    let server = tokio::task::spawn_blocking(RedisServer::start)
        .await
        .expect("redis-server start panicked");
    let cfg = RedisConfig {
        url: server.url(),
        time_source: TimeSource::Local,
        ttl_slack_ms: Some(3_600_000),
        // Generous: the machine is shared and the concurrency scenario queues 16 tasks.
        request_timeout: std::time::Duration::from_secs(5),
        pool_size: 4,
        ..RedisConfig::default()
    };
    let store = RedisStore::new(cfg, clock).expect("redis config");
    assert!(
        store.wait_ready(std::time::Duration::from_secs(10)).await,
        "redis store never connected"
    );
    Some(RedisUnderTest {
        store,
        _server: server,
    })
}

conformance_suite!(redis, crate::conformance::make_redis_store);

pub const MIN: u64 = 60_000;

/// A store under test, the clock it reads, and a per-test nonce for tags.
pub struct Env<S> {
    pub store: Arc<S>,
    pub clock: Arc<ManualClock>,
    nonce: u64,
}

impl<S: Store> Env<S> {
    pub fn new(store: S, clock: Arc<ManualClock>) -> Env<S> {
        let nonce = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Env {
            store: Arc::new(store),
            clock,
            nonce,
        }
    }

    /// A descriptor tag unique to this test run.
    pub fn tag(&self, name: &str) -> StateTag {
        let nonce = self.nonce.to_string();
        StateTag::compute(
            "sluice-conformance",
            [("scenario", name), ("nonce", nonce.as_str())],
        )
    }

    pub fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    pub fn set(&self, t: u64) {
        assert!(t >= self.now(), "the conformance clock only moves forward");
        self.clock.set(t);
    }

    pub fn advance(&self, ms: u64) {
        self.clock.advance(ms);
    }

    /// Moves to `offset` ms into the next window of `w` ms; returns that window's start.
    pub fn align(&self, w: u64, offset: u64) -> u64 {
        let now = self.now();
        let ws = now - now % w + w;
        self.set(ws + offset);
        ws
    }

    pub async fn run(&self, checks: &[Check<'_>]) -> Vec<LimitResult> {
        let mut out = Vec::new();
        self.store
            .run(&Call::new(checks), &mut out)
            .await
            .expect("store error");
        assert_eq!(
            out.len(),
            checks.iter().map(|c| c.limits.len()).sum::<usize>()
        );
        out
    }

    pub async fn check(&self, tag: StateTag, limits: &[LimitSpec], cost: u64) -> Vec<LimitResult> {
        self.run(&[Check {
            tag,
            limits,
            cost,
            refund: false,
        }])
        .await
    }

    pub async fn refund(&self, tag: StateTag, limits: &[LimitSpec], cost: u64) -> Vec<LimitResult> {
        self.run(&[Check {
            tag,
            limits,
            cost,
            refund: true,
        }])
        .await
    }

    pub async fn hit(&self, tag: StateTag, limit: &LimitSpec, cost: u64) -> LimitResult {
        self.check(tag, std::slice::from_ref(limit), cost).await[0]
    }

    /// `k` hits of cost 1; how many were allowed.
    pub async fn burst(&self, tag: StateTag, limit: &LimitSpec, k: u64) -> u64 {
        let mut allowed = 0;
        for _ in 0..k {
            allowed += u64::from(self.hit(tag, limit, 1).await.allowed);
        }
        allowed
    }
}

/// A limit with the defaults config gives it (`burst = rpu`, 10 sub-windows, overdraft
/// only for fixed windows, no penalty, slot 0).
pub fn limit(algorithm: Algorithm, rpu: u64, unit: Unit) -> LimitSpec {
    LimitSpec::new(algorithm, rpu, unit)
}

pub fn burst(mut s: LimitSpec, burst: u64) -> LimitSpec {
    s.burst = burst;
    s
}

pub fn overdraft(mut s: LimitSpec, on: bool) -> LimitSpec {
    s.overdraft = on;
    s
}

pub fn penalty(mut s: LimitSpec, ms: u64) -> LimitSpec {
    s.penalty_ms = ms;
    s
}

pub fn slot(mut s: LimitSpec, slot: u8) -> LimitSpec {
    s.slot = slot;
    s
}

pub fn ok(remaining: u64, reset_ms: u64, used_before: u64) -> LimitResult {
    LimitResult {
        allowed: true,
        remaining,
        reset_ms,
        retry_ms: None,
        used_before,
        penalized: false,
    }
}

pub fn denied(reset_ms: u64, retry_ms: Option<u64>, used_before: u64) -> LimitResult {
    LimitResult {
        allowed: false,
        remaining: 0,
        reset_ms,
        retry_ms,
        used_before,
        penalized: false,
    }
}

pub fn penalized(reset_ms: u64, retry_ms: u64, used_before: u64) -> LimitResult {
    LimitResult {
        penalized: true,
        retry_ms: Some(retry_ms),
        ..denied(reset_ms, None, used_before)
    }
}
