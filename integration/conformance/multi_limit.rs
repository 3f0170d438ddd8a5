//! Several limits on one descriptor (`rate_limits`), from the rule file to the answer:
//! config defaults, the store's all-or-nothing charge and the limiter's report, on every
//! store. The contract is the README's `rate_limits` example, ARCHITECTURE.md ("State
//! identity") and docs/explanation/algorithms.md ("One check").

use sluice::config::{ConfigFile, LoadOptions, RateLimitConfig};
use sluice::limit::LimitResult;
use sluice::limiter::{
    self, Code, Decision, LimitSet, MAX_DURATION_MS, Metered, Modes, Outcome, Plan, Sources,
    Verdict,
};
use sluice::store::Store;

use super::{Env, MIN};

fn config(yaml: &str) -> RateLimitConfig {
    let file = ConfigFile {
        name: "multi.yaml".into(),
        path: "multi.yaml".into(),
        content: yaml.into(),
    };
    RateLimitConfig::build(&[file], &LoadOptions::default())
        .unwrap_or_else(|e| panic!("config rejected: {e:?}"))
}

/// One request with one descriptor `[key=value]` against `config`'s domain, cost 1.
async fn ask<S: Store>(
    env: &Env<S>,
    config: &RateLimitConfig,
    domain: &str,
    entries: &[(&str, &str)],
    cost: u64,
) -> (Verdict, Vec<LimitResult>) {
    let m = config
        .domain(domain)
        .and_then(|d| d.find(entries))
        .unwrap_or_else(|| panic!("no rule for {entries:?}"));
    let plans = [Plan::Metered(Metered {
        limits: LimitSet::Rule(&m.rule.limits),
        // A tag per test run, so a shared Redis could hold earlier runs' keys.
        tag: env.tag(&format!("{domain}{entries:?}")),
        cost,
        refund: false,
        shadow: false,
        quota: false,
        reference_key: None,
    })];
    let d: Decision = limiter::decide(
        &*env.store,
        Sources::default(),
        &plans,
        Modes::default(),
        None,
    )
    .await
    .expect("store error");
    match d.outcomes.first() {
        Some(Outcome::Metered(v)) => (v.clone(), d.results.clone()),
        other => panic!("not metered: {other:?}"),
    }
}

/// The README's promise: "a hit denied by the per-second burst does not use up the daily
/// quota". Fixed windows count denied hits only in `rate_limit`; in `rate_limits` nothing
/// is charged unless every limit allows (2 allowed + 3 denied hits leave 3 of 5 per day).
pub async fn rate_limits_charge_all_or_nothing_by_default<S: Store>(env: &Env<S>) {
    let c = config(
        "domain: m\ndescriptors:\n  - key: k\n    rate_limits:\n      - { name: burst, unit: second, requests_per_unit: 2 }\n      - { name: daily, unit: day, requests_per_unit: 5 }\n",
    );
    env.align(86_400_000, 10_000);
    let mut codes = Vec::new();
    for _ in 0..5 {
        codes.push(ask(env, &c, "m", &[("k", "a")], 1).await.0.code);
    }
    use Code::{Ok as OK, OverLimit as OVER};
    assert_eq!(codes, [OK, OK, OVER, OVER, OVER]);
    env.advance(1_000);
    let (v, results) = ask(env, &c, "m", &[("k", "a")], 1).await;
    assert_eq!(
        v.code,
        Code::Ok,
        "the daily quota was used up by denied hits"
    );
    assert_eq!(results[1].remaining, 2, "daily: 3 of 5 used");
    let (v, _) = ask(env, &c, "m", &[("k", "a")], 1).await;
    assert_eq!(v.code, Code::Ok);
    // The fifth hit of the day passes; the sixth is denied by the daily limit alone: the
    // status names it, and the wait runs to midnight.
    env.advance(1_000);
    let (v, _) = ask(env, &c, "m", &[("k", "a")], 1).await;
    assert_eq!(v.code, Code::Ok);
    let (v, _) = ask(env, &c, "m", &[("k", "a")], 1).await;
    assert_eq!(
        (v.code, v.reported, v.duration_ms),
        (Code::OverLimit, 1, 86_400_000 - 12_000)
    );
    // `overdraft: true` set explicitly keeps charging denied hits on that limit.
    let c = config(
        "domain: m\ndescriptors:\n  - key: k\n    rate_limits:\n      - { unit: second, requests_per_unit: 1 }\n      - { unit: day, requests_per_unit: 5, overdraft: true }\n",
    );
    for _ in 0..3 {
        ask(env, &c, "m", &[("k", "b")], 1).await;
    }
    env.advance(1_000);
    let (_, results) = ask(env, &c, "m", &[("k", "b")], 1).await;
    assert_eq!(results[1].remaining, 1, "overdraft: every hit charged");
}

/// The README's worked example (config/extensions.yaml, `api_key`), as shipped: the 5 hits
/// the token bucket denies leave the daily count at 20.
pub async fn shipped_rate_limits_example_holds<S: Store>(env: &Env<S>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/extensions.yaml");
    let file = ConfigFile {
        name: "extensions.yaml".into(),
        path: path.into(),
        content: std::fs::read_to_string(path).expect("config/extensions.yaml"),
    };
    let c = RateLimitConfig::build(&[file], &LoadOptions::default()).expect("shipped config");
    env.align(86_400_000, 60_000);
    let mut allowed = 0;
    for _ in 0..25 {
        allowed += u32::from(ask(env, &c, "api", &[("api_key", "k1")], 1).await.0.code == Code::Ok);
    }
    assert_eq!(allowed, 20, "burst of 20");
    let (v, results) = ask(env, &c, "api", &[("api_key", "k1")], 0).await;
    assert_eq!(v.code, Code::Ok, "a peek of cost 0 fits");
    assert_eq!(
        results[1].remaining,
        10_000 - 20,
        "only admitted hits use the daily quota"
    );
}

/// Denied by 1/second and by 1/hour: the client must be told to wait for the hour, not
/// retry after a second into another denial.
pub async fn over_limit_waits_for_the_longest_denial<S: Store>(env: &Env<S>) {
    let c = config(
        "domain: m\ndescriptors:\n  - key: k\n    rate_limits:\n      - { unit: second, requests_per_unit: 1 }\n      - { unit: hour, requests_per_unit: 1, algorithm: sliding_log }\n      - { unit: minute, requests_per_unit: 5, algorithm: gcra, penalty_seconds: 7200 }\n",
    );
    env.align(MIN, 0);
    let (v, _) = ask(env, &c, "m", &[("k", "a")], 1).await;
    assert_eq!(v.code, Code::Ok);
    let (v, results) = ask(env, &c, "m", &[("k", "a")], 1).await;
    assert_eq!((v.code, v.reported), (Code::OverLimit, 0));
    assert!(!results[1].allowed && results[2].allowed);
    assert_eq!(
        v.duration_ms, 3_600_000,
        "the sliding log frees its entry in an hour"
    );
    // Penalties count too: denied by 1/second and by a gcra limit that locks the
    // descriptor out for two hours.
    let c = config(
        "domain: m\ndescriptors:\n  - key: k\n    rate_limits:\n      - { unit: second, requests_per_unit: 1 }\n      - { unit: minute, requests_per_unit: 1, algorithm: gcra, penalty_seconds: 7200 }\n",
    );
    let (v, _) = ask(env, &c, "m", &[("k", "b")], 1).await;
    assert_eq!(v.code, Code::Ok);
    let (v, results) = ask(env, &c, "m", &[("k", "b")], 1).await;
    assert_eq!(results[1].retry_ms, Some(7_200_000));
    assert_eq!(
        (v.code, v.reported, v.duration_ms),
        (Code::OverLimit, 0, 7_200_000)
    );
}

/// All allow: the status reports the limit with the least remaining; on a tie, the one
/// that takes longest to come back.
pub async fn ok_reports_the_binding_limit<S: Store>(env: &Env<S>) {
    let c = config(
        "domain: m\ndescriptors:\n  - key: k\n    rate_limits:\n      - { name: fast, unit: second, requests_per_unit: 3, algorithm: token_bucket }\n      - { name: slow, unit: hour, requests_per_unit: 3, algorithm: token_bucket }\n      - { name: big, unit: minute, requests_per_unit: 100 }\n",
    );
    env.align(MIN, 0);
    let (v, results) = ask(env, &c, "m", &[("k", "a")], 1).await;
    assert_eq!((results[0].remaining, results[1].remaining), (2, 2));
    assert_eq!((v.code, v.reported, v.remaining), (Code::Ok, 1, 2));
    assert_eq!(
        v.duration_ms, 1_200_000,
        "one token of 3/hour comes back in 20 minutes"
    );
}

/// An overdrafted bucket can owe more time than protobuf `Duration` can say (2^52 ms is
/// 7.2e11 s; the type stops at 315 576 000 000 s): the answer is clamped, not invalid.
pub async fn durations_fit_protobuf<S: Store>(env: &Env<S>) {
    let c = config(
        "domain: m\ndescriptors:\n  - key: k\n    rate_limit: { unit: year, requests_per_unit: 1, algorithm: token_bucket, overdraft: true }\n",
    );
    env.align(MIN, 0);
    for _ in 0..3 {
        let (v, _) = ask(env, &c, "m", &[("k", "a")], 1_000_000_000).await;
        assert!(v.duration_ms <= MAX_DURATION_MS);
    }
    let (v, results) = ask(env, &c, "m", &[("k", "a")], 1).await;
    assert!(results[0].reset_ms > MAX_DURATION_MS, "{results:?}");
    assert_eq!((v.code, v.duration_ms), (Code::OverLimit, MAX_DURATION_MS));
}
