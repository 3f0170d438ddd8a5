//! What to send: the command line (its help text and flag names are the interface
//! scripts/bench.sh and BENCHMARKS.md rely on) and the requests it describes, built
//! ahead of the load so that the client spends its CPU on sending, not on building.

use std::time::Duration;

use clap::{Parser, ValueEnum};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;

const RULE_HINT: &str = "\
The defaults (--domain bench --key key) need this rule loaded in sluice
(examples/loadgen-config/bench.yaml has it, plus a tiny `limited` rule for seeing OVER_LIMIT):

  domain: bench
  descriptors:
    - key: key
      rate_limit: {unit: second, requests_per_unit: 1000000000}

Without a matching rule sluice answers OK without touching its store.

Example:
  cargo run --release -- serve --config examples/loadgen-config
  cargo run --release --example loadgen -- --connections 4 --concurrency 16 --duration 10s --descriptors 1";

#[derive(Clone, Debug, Parser)]
#[command(
    name = "loadgen",
    about = "Closed-loop gRPC load generator for sluice's ShouldRateLimit",
    after_help = RULE_HINT
)]
pub struct Args {
    /// gRPC endpoint of the server under test; several, comma-separated, share the
    /// connections in turn (instances behind one store)
    #[arg(long, default_value = "http://127.0.0.1:8081")]
    pub target: String,
    /// HTTP/2 connections (one tonic Channel each)
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: u32,
    /// Requests in flight per connection (closed-loop tasks sharing it)
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Measured run time, after the warm-up
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Stop after this many measured requests instead of after --duration
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Load sent before measuring starts (connections, caches, allocator); not in the results
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Distinct descriptor values (limiter keys) the load is spread over: v0..v{K-1}
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub keys: u32,
    /// How each request's first key is chosen
    #[arg(long, value_enum, default_value_t = KeyOrder::Random)]
    pub key_order: KeyOrder,
    /// Descriptors per request, each with a different value (at most --keys)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub descriptors: u32,
    /// Rate limit domain sent
    #[arg(long, default_value = "bench")]
    pub domain: String,
    /// Descriptor entry key sent (values are v0..v{K-1}); a comma-separated list spreads
    /// the keys over them (key i of the list for value i, modulo the list's length)
    #[arg(long, default_value = "key")]
    pub key: String,
    /// Key churn: values become v{i}.{unix second}, so new limiter keys appear every second
    /// and the previous second's go idle (their state must expire: scripts/soak.sh)
    #[arg(long)]
    pub churn: bool,
    /// Request-level hits_addend (0: not sent, the server counts 1 hit)
    #[arg(long, default_value_t = 0)]
    pub hits_addend: u32,
    /// Tokio worker threads for the client
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: u32,
    /// Per-request deadline (also sent as grpc-timeout); a slower request counts as a
    /// Cancelled or DeadlineExceeded error
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Open loop: start requests at this fixed rate (req/s, over all connections) whatever
    /// the answers, instead of closed-loop tasks; latency counts from when each request
    /// was due, and each carries --timeout as its grpc-timeout (--concurrency is unused)
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Open loop: at most this many calls outstanding (sent, or waiting for a connection's
    /// stream); a call past it fails at once, counted apart (`client_overflow`), as Envoy
    /// fails a call past its cluster's circuit breakers (`max_requests` +
    /// `max_pending_requests`, `upstream_rq_pending_overflow`) [default: no bound]
    #[arg(long, requires = "rate", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_outstanding: Option<u64>,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
    /// Ignore --target and load an in-process stand-in server on its own thread (OK for
    /// every descriptor, OVER_LIMIT for key `limited`, INVALID_ARGUMENT for an empty domain):
    /// checks the load generator itself
    #[arg(long)]
    pub self_test: bool,
    /// Stand-in server: wait this long before answering each request
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, requires = "self_test")]
    pub self_test_delay: Duration,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 1.0 => Ok(r),
        _ => Err(format!(
            "'{s}' is not a rate of at least 1 request per second"
        )),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KeyOrder {
    /// Uniformly random (xorshift64*, seeded per task: reproducible)
    Random,
    /// Walk the key space, each task starting at a different offset
    RoundRobin,
}

impl KeyOrder {
    pub fn name(self) -> &'static str {
        match self {
            KeyOrder::Random => "random",
            KeyOrder::RoundRobin => "round-robin",
        }
    }
}

/// The descriptors and request fields shared by every task.
pub struct Workload {
    domain: String,
    /// One pre-built descriptor per key, cloned into requests: tonic takes the message by
    /// value, so a clone of finished descriptors is the cheapest way to a fresh request.
    descriptors: Vec<RateLimitDescriptor>,
    per_request: usize,
    hits_addend: u32,
    /// `--churn`: the keys of the list, for building descriptors per request.
    churn_keys: Option<Vec<String>>,
}

impl Workload {
    pub fn new(args: &Args) -> Workload {
        let names: Vec<String> = args.key.split(',').map(str::to_owned).collect();
        let descriptors = (0..args.keys)
            .map(|i| RateLimitDescriptor {
                entries: vec![Entry {
                    key: names[i as usize % names.len()].clone(),
                    value: format!("v{i}"),
                }],
                ..Default::default()
            })
            .collect();
        Workload {
            domain: args.domain.clone(),
            descriptors,
            per_request: args.descriptors as usize,
            hits_addend: args.hits_addend,
            churn_keys: args.churn.then_some(names),
        }
    }

    /// The request for keys `first, first+1, …` (wrapping); distinct while D <= K.
    pub fn request(&self, first: usize) -> RateLimitRequest {
        let keys = self.descriptors.len();
        let mut descriptors = Vec::with_capacity(self.per_request);
        let mut i = first;
        let second = self.churn_keys.as_ref().map(|_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
        for _ in 0..self.per_request {
            match (&self.churn_keys, second) {
                (Some(names), Some(s)) => descriptors.push(RateLimitDescriptor {
                    entries: vec![Entry {
                        key: names[i % names.len()].clone(),
                        value: format!("v{i}.{s}"),
                    }],
                    ..Default::default()
                }),
                _ => descriptors.push(self.descriptors[i].clone()),
            }
            i += 1;
            if i == keys {
                i = 0;
            }
        }
        RateLimitRequest {
            domain: self.domain.clone(),
            descriptors,
            hits_addend: self.hits_addend,
        }
    }
}

/// Picks the first key of each request.
pub enum KeyPicker {
    Random {
        state: u64,
        keys: u64,
    },
    RoundRobin {
        next: usize,
        step: usize,
        keys: usize,
    },
}

impl KeyPicker {
    pub fn new(order: KeyOrder, keys: usize, step: usize, task: usize, tasks: usize) -> KeyPicker {
        match order {
            KeyOrder::Random => KeyPicker::Random {
                // xorshift must not start at 0.
                state: splitmix64(task as u64 + 1) | 1,
                keys: keys as u64,
            },
            KeyOrder::RoundRobin => KeyPicker::RoundRobin {
                // Spread out so that tasks do not hit the same keys in lockstep.
                next: ((task as u128 * keys as u128) / tasks.max(1) as u128) as usize,
                step,
                keys,
            },
        }
    }

    pub fn next(&mut self) -> usize {
        match self {
            KeyPicker::Random { state, keys } => {
                // xorshift64*: a handful of instructions, plenty for spreading keys.
                let mut x = *state;
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                *state = x;
                let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
                // Multiply-shift maps to 0..keys without a division.
                ((u128::from(r) * u128::from(*keys)) >> 64) as usize
            }
            KeyPicker::RoundRobin { next, step, keys } => {
                let k = *next;
                *next = (*next + *step) % *keys;
                k
            }
        }
    }
}

fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
