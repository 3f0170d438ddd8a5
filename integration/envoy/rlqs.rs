//! Envoy's `rate_limit_quota` filter (RLQS) against sluice: real Envoys (one worker each),
//! sharing one rule through sluice, on the memory store and on two replicas sharing one
//! Redis.
//!
//! Envoy 1.40 reports every 5 s (whatever `reporting_interval` says), so every test has
//! the same timeline: the Envoys open the bucket together (their first request, denied:
//! no assignment yet, and their first report, which gets them the floor); they report
//! their demand 5 s later, and sluice settles the shares within a tick (a second) of those
//! reports. Counts are taken once converged, from 9 s on, with tolerances a loaded machine
//! keeps. What the Envoys admit in all is held **exactly** to what the rule allows them:
//! its rate over the test, plus what their buckets may bank ([`bound`]); on Redis, the
//! shares the replicas recorded never add up to more than the limit.

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

use crate::support::redis::RedisServer;
use crate::support::sluice::*;

mod quota_front;

use quota_front::{Answers, QuotaEnvoy, QuotaFront, offer};

/// 1 200 requests a minute (20 a second) for every `name=api,tier=<x>` bucket of domain
/// `fair`.
const RULES: &str = "\
domain: fair
descriptors:
  - key: name
    value: api
    descriptors:
      - key: tier
        rate_limit: {unit: minute, requests_per_unit: 1200}
";
const LIMIT_PER_MINUTE: u64 = 1_200;

/// When what passes follows the converged shares: the first reports (5 s), two ticks, the
/// second's worth a raised share may mint spent, and room for a loaded machine.
const CONVERGED: Duration = Duration::from_secs(9);
/// When the offered load stops.
const END: Duration = Duration::from_millis(13_500);

/// One sluice, or two replicas sharing one Redis (Envoy `i` asking replica `i % 2`).
struct Sluices {
    servers: Vec<Sluice>,
    redis: Option<RedisServer>,
}

impl Sluices {
    async fn start(replicas: usize, rules: &str, args: &[&str]) -> Sluices {
        let redis = (replicas > 1).then(RedisServer::start);
        let mut servers = Vec::new();
        for _ in 0..replicas {
            let mut b = sluice()
                .file("rules.yaml", rules)
                .args(args.iter().copied());
            if let Some(r) = &redis {
                b = b.redis(r.url());
            }
            servers.push(b.start_healthy().await);
        }
        Sluices { servers, redis }
    }

    /// A counter summed over the replicas.
    async fn metric(&self, series: &str) -> f64 {
        let mut sum = 0.0;
        for s in &self.servers {
            sum += s.metric(series).await;
        }
        sum
    }

    fn for_envoy(&self, i: usize) -> SocketAddr {
        self.servers[i % self.servers.len()].grpc
    }

    /// `n` Envoys for domain `domain`, started together.
    async fn envoys(&self, domain: &str, n: usize) -> Vec<QuotaEnvoy> {
        let fronts: Vec<QuotaFront> = (0..n)
            .map(|i| QuotaFront::new(domain, self.for_envoy(i)))
            .collect();
        futures::future::join_all(fronts.iter().map(QuotaFront::start)).await
    }
}

/// Every Envoy's first request in `tier`, together: denied (no assignment yet), and the
/// bucket subscribed. The test's time starts here.
async fn open(envoys: &[QuotaEnvoy], tier: &str) -> Instant {
    let t0 = Instant::now();
    let first = futures::future::join_all(envoys.iter().map(|e| e.get(tier))).await;
    assert!(
        first.iter().all(|&s| s == 429),
        "nothing passes before sluice decides: {first:?}"
    );
    t0
}

/// Offer each Envoy its rate in `tier` until `t0 + END`, all at once.
async fn load(envoys: &[QuotaEnvoy], tier: &str, rates: &[u32], t0: Instant) -> Vec<Answers> {
    futures::future::join_all(
        envoys
            .iter()
            .zip(rates)
            .map(|(e, &r)| offer(e, tier, r, t0 + END)),
    )
    .await
}

/// The most `envoys` Envoys may admit between `t0` and now under a rule of `per_minute`,
/// `assignments` token buckets having been sent to them: the rule's rate over that time
/// (the shares add up to at most the limit), plus, per assignment, the most its bucket may
/// hold (one second of a share, so of the limit at most: Envoy fills a bucket when it first
/// gets one, and a raise can fill it again), plus a token each for rounding. Exact: no
/// tolerance.
fn bound(per_minute: u64, t0: Instant, envoys: u64, assignments: u64) -> u64 {
    let ms = t0.elapsed().as_millis() as u64;
    (per_minute * ms).div_ceil(60_000) + assignments * per_minute.div_ceil(60) + envoys
}

/// Passed, per Envoy, from `t0 + CONVERGED` to the end.
fn converged(answers: &[Answers], t0: Instant) -> Vec<u64> {
    answers
        .iter()
        .map(|a| a.passed(t0 + CONVERGED, t0 + END))
        .collect()
}

/// Everything answered 200 or 429, and what passed is within [`bound`]; on Redis, the
/// shares recorded for every bucket add up to at most `per_minute`.
async fn assert_within_the_rule(
    s: &Sluices,
    domain: &str,
    answers: &[Answers],
    per_minute: u64,
    t0: Instant,
) {
    for a in answers {
        assert_eq!(a.broken(), 0, "every request answered 200 or 429");
    }
    let passed: u64 = answers.iter().map(Answers::all_passed).sum();
    let sent = s
        .metric(&format!(
            "sluice_rlqs_assignments_total{{action=\"token_bucket\",domain=\"{domain}\"}}"
        ))
        .await;
    let most = bound(per_minute, t0, answers.len() as u64, sent as u64);
    assert!(passed <= most, "{passed} passed, the rule allows {most}");
    if let Some(redis) = &s.redis {
        let keys: Vec<String> = redis.query(&["KEYS", "*{rlqs}*"]);
        assert!(!keys.is_empty(), "the shares live in Redis");
        for key in keys {
            let fields: std::collections::HashMap<String, String> = redis.query(&["HGETALL", &key]);
            let shares: u64 = fields
                .iter()
                .filter(|(f, _)| f.starts_with("a:"))
                .map(|(_, v)| v.parse::<u64>().expect("a share"))
                .sum();
            assert!(shares <= per_minute, "{key}: {shares} recorded");
        }
    }
}

/// `examples/rlqs/rules.yaml` through an Envoy shaped as `examples/rlqs/envoy.yaml`: the
/// gold tier held to its 600 a minute, the others to 60, health checks never limited.
#[tokio::test]
async fn one_envoy_is_held_to_the_rule() {
    let s = Sluices::start(1, include_str!("../../examples/rlqs/rules.yaml"), &[]).await;
    let e = QuotaFront::new("rlqs-demo", s.for_envoy(0)).start().await;
    assert_eq!(e.health().await, 429, "no assignment yet");
    let t0 = open(std::slice::from_ref(&e), "gold").await;
    assert_eq!(e.get("free").await, 429);
    let (gold, free) = tokio::join!(
        offer(&e, "gold", 20, t0 + END),
        offer(&e, "free", 5, t0 + END)
    );
    assert_eq!(e.health().await, 200, "unlimited: ALLOW_ALL");
    assert_within_the_rule(&s, "rlqs-demo", std::slice::from_ref(&gold), 600, t0).await;
    assert_within_the_rule(&s, "rlqs-demo", std::slice::from_ref(&free), 60, t0).await;
    // Once its demand is known, the Envoy gets all but the floor kept free: 570 a minute
    // (9.5 a second), at least half of which it admits while offered twice the limit.
    let span = (END - CONVERGED).as_secs_f64();
    let got = gold.passed(t0 + CONVERGED, t0 + END);
    assert!(got as f64 >= 9.5 / 2.0 * span, "{got} in {span} s");
    // 57 a minute: about 4 in those 4.5 s.
    let got = free.passed(t0 + CONVERGED, t0 + END);
    assert!(got >= 2, "{got} in {span} s");
}

/// Envoys opening the bucket `shared` together, each offering its rate (requests a second)
/// until [`END`], held to the rule: what passed at each in all, and once converged.
async fn shared(replicas: usize, rates: &[u32]) -> (Vec<u64>, Vec<u64>) {
    let s = Sluices::start(replicas, RULES, &[]).await;
    let envoys = s.envoys("fair", rates.len()).await;
    let t0 = open(&envoys, "shared").await;
    let answers = load(&envoys, "shared", rates, t0).await;
    assert_within_the_rule(&s, "fair", &answers, LIMIT_PER_MINUTE, t0).await;
    let all = answers.iter().map(Answers::all_passed).collect();
    (all, converged(&answers, t0))
}

/// Envoys offering the same load (`rates`): none gets less than one `starved`th of what
/// passes, and once converged each one's part of what passes is within `part`.
async fn equal_demand(replicas: usize, rates: &[u32], starved: u64, part: RangeInclusive<f64>) {
    let (all, c) = shared(replicas, rates).await;
    let total: u64 = all.iter().sum();
    for &n in &all {
        assert!(starved * n >= total, "{all:?}: one of them starved");
    }
    let sum: u64 = c.iter().sum();
    for &n in &c {
        assert!(part.contains(&(n as f64 / sum as f64)), "converged: {c:?}");
    }
}

/// Two Envoys opening the bucket together and offering the same load: neither gets less
/// than a quarter of what passes (the first one no longer takes the limit before the
/// second one's demand is known), and once converged each gets about half.
async fn two_envoys_with_equal_demand(replicas: usize) {
    equal_demand(replicas, &[15, 15], 4, 0.35..=0.65).await;
}

#[tokio::test]
async fn two_envoys_with_equal_demand_share_equally() {
    two_envoys_with_equal_demand(1).await;
}

#[tokio::test]
async fn two_envoys_with_equal_demand_share_equally_across_replicas() {
    two_envoys_with_equal_demand(2).await;
}

/// Two Envoys offering 3:1: once converged, what passes is 3:1 within 15 %, with the default
/// floor (a minimum, so it does not bend a split where both demands are above it).
async fn three_to_one(replicas: usize) {
    let (_, c) = shared(replicas, &[24, 8]).await;
    let ratio = c[0] as f64 / c[1].max(1) as f64;
    assert!((2.55..=3.45).contains(&ratio), "converged: {c:?}");
}

#[tokio::test]
async fn shares_follow_demand_three_to_one() {
    three_to_one(1).await;
}

#[tokio::test]
async fn shares_follow_demand_three_to_one_across_replicas() {
    three_to_one(2).await;
}

/// Three Envoys offering the same load: each about a third once converged, none starved
/// (none below a fifth of what passes).
async fn three_envoys(replicas: usize) {
    equal_demand(replicas, &[10, 10, 10], 5, 0.25..=0.42).await;
}

#[tokio::test]
async fn three_envoys_share_one_rule() {
    three_envoys(1).await;
}

#[tokio::test]
async fn three_envoys_share_one_rule_across_replicas() {
    three_envoys(2).await;
}

/// `tier=closed` is denied by the rule (0 a minute, DENY_ALL), and an expired assignment
/// falls back to ALLOW_ALL: which of the two an Envoy applies tells whether its assignment
/// is still alive.
const CLOSED: &str = "\
domain: fair
descriptors:
  - key: name
    value: api
    descriptors:
      - key: tier
        value: closed
        rate_limit: {unit: minute, requests_per_unit: 0}
";

/// sluice serving [`CLOSED`] with `args`, and an Envoy whose bucket holds sluice's DENY_ALL
/// (sent at its first report).
async fn denied_by_sluice(args: &[&str]) -> (Sluice, QuotaEnvoy) {
    let s = sluice()
        .file("rules.yaml", CLOSED)
        .args(args.iter().copied())
        .start_healthy()
        .await;
    let e = QuotaFront::new("fair", s.grpc)
        .allow_all_when_expired()
        .start()
        .await;
    assert_eq!(e.get("closed").await, 429);
    let deadline = Instant::now() + Duration::from_secs(15);
    while s
        .metric("sluice_rlqs_assignments_total{action=\"deny_all\",domain=\"fair\"}")
        .await
        < 1.0
    {
        assert!(Instant::now() < deadline, "no assignment sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (s, e)
}

/// Wait until requests in `tier=closed` pass (the assignment expired); how many were denied
/// before.
async fn denied_until_expired(e: &QuotaEnvoy) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut denied = 0;
    loop {
        match e.get("closed").await {
            200 => return denied,
            _ => denied += 1,
        }
        assert!(Instant::now() < deadline, "the assignment never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// sluice killed (no drain): the Envoy keeps its assignment, still denying, until its TTL
/// runs out; then it applies its `expired_assignment_behavior`.
#[tokio::test]
async fn an_assignment_outlives_a_killed_sluice_until_its_ttl() {
    let (s, e) = denied_by_sluice(&["--rlqs-assignment-ttl", "6s"]).await;
    s.signal("KILL");
    // At least 3 s of the TTL are left (an unchanged assignment is sent again at half of
    // it): requests go on being denied, then pass.
    assert_eq!(e.get("closed").await, 429, "the assignment outlives sluice");
    assert!(denied_until_expired(&e).await >= 1);
}

/// sluice draining (SIGTERM, no shutdown delay): it sends every assignment again with TTL
/// 0, and the Envoy falls back at once, long before the TTL (60 s).
#[tokio::test]
async fn a_draining_sluice_expires_assignments_at_once() {
    let (s, e) = denied_by_sluice(&["--shutdown-delay", "0s"]).await;
    s.signal("TERM");
    denied_until_expired(&e).await;
}
