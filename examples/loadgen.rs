//! Load generator for sluice's gRPC `ShouldRateLimit`: the source of the BENCHMARKS.md
//! latency and throughput figures.
//!
//! # Usage
//!
//! ```text
//! # 1. A server with the benchmark rules (in-memory store; add
//! #    `--redis-url redis://127.0.0.1:6379` to benchmark the Redis store):
//! cargo run --release -- serve --config examples/loadgen-config
//!
//! # 2. The load, from another terminal:
//! cargo run --release --example loadgen -- \
//!     --connections 4 --concurrency 16 --duration 10s --warmup 2s \
//!     --keys 1000 --descriptors 1
//!
//! # The same, as one JSON object (for scripts that build the tables):
//! cargo run --release --example loadgen -- --connections 4 --concurrency 16 --json
//!
//! # OVER_LIMIT accounting, against the tiny `limited` rule:
//! cargo run --release --example loadgen -- --key limited --duration 3s
//!
//! # The load generator alone, against an in-process stand-in server:
//! cargo run --release --example loadgen -- --self-test --duration 3s
//! ```
//!
//! The defaults (`--domain bench --key key`) need a rule for descriptor key `key` in
//! domain `bench` with a limit nothing reaches; `examples/loadgen-config/bench.yaml` has one.
//! Without a matching rule sluice answers OK without touching its store, and the figures
//! would describe only the RPC path.
//!
//! # What is measured
//!
//! `--connections` HTTP/2 connections (one tonic `Channel` each, `TCP_NODELAY`), each shared
//! by `--concurrency` tasks. Every task is a *closed loop*: it sends a request, waits for the
//! answer, sends the next. Throughput is therefore what the server sustains with
//! `connections × concurrency` requests in flight, and latency is the time from handing the
//! request to tonic until its response is decoded. There is no open-loop pacing, so the
//! percentiles suffer from coordinated omission: while the server stalls no new requests
//! are sent, and the stall shows up once per in-flight task rather than once per request
//! that an open-loop client would have sent meanwhile. Compare configurations at equal
//! settings; do not read the tail as a latency-at-fixed-rate SLO.
//!
//! Requests sent during `--warmup` are not counted. After it, the run ends at `--duration`
//! (requests already in flight finish and are counted; the elapsed time runs to the last
//! answer) or after `--requests` requests. Latency goes into one HdrHistogram per task
//! (microsecond resolution, 3 significant digits), merged at the end. Only answered requests
//! (OK, OVER_LIMIT, or an unknown overall code) are in the histogram; gRPC errors are
//! counted by status code but not timed, since a refused connection fails in microseconds
//! and would flatter the percentiles. After an error a task pauses 10 ms (so a dead server
//! does not turn the client into a busy loop); a run with errors is not a valid benchmark.
//!
//! Each request carries `--descriptors D` descriptors `[(KEY, vN)]` with D consecutive
//! values `vN` out of `v0..v{K-1}` (`--keys K`), so it touches D distinct limiter keys. The
//! first value is drawn per request with xorshift64* (`--key-order random`, seeded per task,
//! so runs are reproducible) or walks the key space (`round-robin`, tasks starting spread
//! out).
//!
//! # Sharing 2 cores with the server
//!
//! The client runs on `--threads` tokio workers (default 1) so that most CPU is left to the
//! server, and builds each request by cloning pre-built descriptors. Still, tonic's client
//! stack costs about 25 µs of CPU per request (measured: one client thread saturates at
//! roughly 40k req/s), about what the server's RPC layer costs: on a shared 2-core box the
//! figures are a lower bound for the server and move with `--threads`. The report therefore
//! includes the client's own CPU use over the measured window (`client cpu`, Linux only) and
//! flags a client that kept its workers busy. Report the settings next to the numbers and,
//! where possible, pin the two processes to different cores (e.g. `taskset -c 0 sluice …`
//! and `taskset -c 1 loadgen …`).
//!
//! The exit status is non-zero when setup fails, when nothing was measured, or when every
//! measured request failed.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as RlCode;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use hdrhistogram::Histogram;
use tonic::transport::{Channel, Endpoint};

// The client shares the machine with the server under test: every microsecond it spends
// allocating is taken from the server (mimalloc is also what the server binary uses).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// Highest latency the histograms hold; slower answers are recorded as this.
const MAX_LATENCY_US: u64 = 60_000_000;

/// Pause after a failed request. A dead or refusing server answers in microseconds, and
/// without a pause the client would spin and take the CPU the server needs to recover.
/// (Runs with errors are not valid benchmarks anyway; their throughput is paced by this.)
const ERROR_BACKOFF: Duration = Duration::from_millis(10);

/// One slot per gRPC status code (0..=16).
const GRPC_CODES: usize = 17;

#[derive(Clone, Debug, Parser)]
#[command(
    name = "loadgen",
    about = "Closed-loop gRPC load generator for sluice's ShouldRateLimit",
    after_help = RULE_HINT
)]
struct Args {
    /// gRPC endpoint of the server under test
    #[arg(long, default_value = "http://127.0.0.1:8081")]
    target: String,
    /// HTTP/2 connections (one tonic Channel each)
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    connections: u32,
    /// Requests in flight per connection (closed-loop tasks sharing it)
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: u32,
    /// Measured run time, after the warm-up
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Stop after this many measured requests instead of after --duration
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    requests: Option<u64>,
    /// Load sent before measuring starts (connections, caches, allocator); not in the results
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Distinct descriptor values (limiter keys) the load is spread over: v0..v{K-1}
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    keys: u32,
    /// How each request's first key is chosen
    #[arg(long, value_enum, default_value_t = KeyOrder::Random)]
    key_order: KeyOrder,
    /// Descriptors per request, each with a different value (at most --keys)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    descriptors: u32,
    /// Rate limit domain sent
    #[arg(long, default_value = "bench")]
    domain: String,
    /// Descriptor entry key sent (values are v0..v{K-1})
    #[arg(long, default_value = "key")]
    key: String,
    /// Request-level hits_addend (0: not sent, the server counts 1 hit)
    #[arg(long, default_value_t = 0)]
    hits_addend: u32,
    /// Tokio worker threads for the client
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// Per-request deadline (also sent as grpc-timeout); a slower request counts as a
    /// Cancelled or DeadlineExceeded error
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
    /// Ignore --target and load an in-process stand-in server on its own thread (OK for
    /// every descriptor, OVER_LIMIT for key `limited`, INVALID_ARGUMENT for an empty domain):
    /// checks the load generator itself
    #[arg(long)]
    self_test: bool,
    /// Stand-in server: wait this long before answering each request
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, requires = "self_test")]
    self_test_delay: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum KeyOrder {
    /// Uniformly random (xorshift64*, seeded per task: reproducible)
    Random,
    /// Walk the key space, each task starting at a different offset
    RoundRobin,
}

impl KeyOrder {
    fn name(self) -> &'static str {
        match self {
            KeyOrder::Random => "random",
            KeyOrder::RoundRobin => "round-robin",
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(report) => {
            if args.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_text());
            }
            if report.succeeded() {
                ExitCode::SUCCESS
            } else {
                if report.stats.requests() == 0 {
                    eprintln!("loadgen: nothing was measured");
                } else {
                    eprintln!("loadgen: every request failed");
                }
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("loadgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> anyhow::Result<Report> {
    if args.descriptors > args.keys {
        bail!(
            "--descriptors ({}) exceeds --keys ({}): a request's descriptors must be distinct keys",
            args.descriptors,
            args.keys
        );
    }
    let target = if args.self_test {
        format!("http://{}", standin::spawn(args.self_test_delay)?)
    } else {
        args.target.clone()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads as usize)
        .enable_all()
        .build()
        .context("starting the client runtime")?;
    runtime.block_on(load(args, target))
}

/// Connect, run the tasks, merge their results.
async fn load(args: &Args, target: String) -> anyhow::Result<Report> {
    let endpoint = Endpoint::from_shared(target.clone())
        .with_context(|| format!("invalid target '{target}'"))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .timeout(args.timeout);
    // Each `connect` is its own HTTP/2 connection; clones of a Channel share it.
    let mut clients = Vec::with_capacity(args.connections as usize);
    for _ in 0..args.connections {
        let channel = endpoint
            .connect()
            .await
            .with_context(|| format!("connecting to {target}"))?;
        clients.push(RateLimitServiceClient::new(channel));
    }

    let work = Arc::new(Workload::new(args));
    let measure_start = Instant::now() + args.warmup;
    let schedule = Arc::new(Schedule {
        measure_start,
        deadline: args
            .requests
            .is_none()
            .then(|| measure_start + args.duration),
        limit: args.requests,
        issued: AtomicU64::new(0),
    });
    let tasks = args.connections as usize * args.concurrency as usize;
    eprintln!(
        "loadgen: {target}: {} connections x {} in flight, warm-up {}, then {}",
        args.connections,
        args.concurrency,
        humantime::format_duration(args.warmup),
        match args.requests {
            Some(n) => format!("{n} requests"),
            None => humantime::format_duration(args.duration).to_string(),
        }
    );

    // The client's own CPU use over the measured window tells whether the client, not the
    // server, was the bottleneck.
    let cpu_at_start = tokio::spawn(async move {
        tokio::time::sleep_until(measure_start.into()).await;
        process_cpu()
    });
    let mut set = tokio::task::JoinSet::new();
    for (c, client) in clients.iter().enumerate() {
        for j in 0..args.concurrency as usize {
            let task = c * args.concurrency as usize + j;
            let picker = KeyPicker::new(
                args.key_order,
                args.keys as usize,
                args.descriptors as usize,
                task,
                tasks,
            );
            set.spawn(worker(
                client.clone(),
                work.clone(),
                schedule.clone(),
                picker,
            ));
        }
    }
    let mut total = Stats::new()?;
    while let Some(joined) = set.join_next().await {
        total.merge(joined.context("load task failed")??)?;
    }
    let cpu_at_end = process_cpu();
    let client_cpu = match (cpu_at_start.await, cpu_at_end) {
        (Ok(Some(start)), Some(end)) => Some(end.saturating_sub(start)),
        _ => None,
    };
    let elapsed = total.last_done.map_or(Duration::ZERO, |t| {
        t.saturating_duration_since(measure_start)
    });
    Ok(Report {
        target,
        args: args.clone(),
        elapsed,
        client_cpu,
        stats: total,
    })
}

/// CPU time (user + system, all threads) this process has used so far. Linux only
/// (`/proc/self/stat`, 10 ms resolution); `None` elsewhere.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the parenthesised command name (which may contain spaces and parentheses) come
    // field 3 (state) onwards; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // In clock ticks of USER_HZ, which is 100 on every mainstream Linux ABI whatever the
    // kernel's HZ (reading sysconf(_SC_CLK_TCK) would need libc).
    Some(Duration::from_millis((utime + stime).saturating_mul(10)))
}

/// The descriptors and request fields shared by every task.
struct Workload {
    domain: String,
    /// One pre-built descriptor per key, cloned into requests: tonic takes the message by
    /// value, so a clone of finished descriptors is the cheapest way to a fresh request.
    descriptors: Vec<RateLimitDescriptor>,
    per_request: usize,
    hits_addend: u32,
}

impl Workload {
    fn new(args: &Args) -> Workload {
        let descriptors = (0..args.keys)
            .map(|i| RateLimitDescriptor {
                entries: vec![Entry {
                    key: args.key.clone(),
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
        }
    }

    /// The request for keys `first, first+1, …` (wrapping); distinct while D <= K.
    fn request(&self, first: usize) -> RateLimitRequest {
        let keys = self.descriptors.len();
        let mut descriptors = Vec::with_capacity(self.per_request);
        let mut i = first;
        for _ in 0..self.per_request {
            descriptors.push(self.descriptors[i].clone());
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
enum KeyPicker {
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
    fn new(order: KeyOrder, keys: usize, step: usize, task: usize, tasks: usize) -> KeyPicker {
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

    fn next(&mut self) -> usize {
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

/// When measuring starts and stops.
struct Schedule {
    measure_start: Instant,
    /// `--duration` mode: no request is sent at or after this.
    deadline: Option<Instant>,
    /// `--requests` mode: measured requests to send in total (shared by all tasks).
    limit: Option<u64>,
    issued: AtomicU64,
}

impl Schedule {
    /// May a measured request be sent at `now`? Claims one of `--requests` when limited.
    fn admit(&self, now: Instant) -> bool {
        if self.deadline.is_some_and(|d| now >= d) {
            return false;
        }
        match self.limit {
            // Relaxed: only the count matters, it orders nothing else.
            Some(limit) => self.issued.fetch_add(1, Ordering::Relaxed) < limit,
            None => true,
        }
    }
}

async fn worker(
    mut client: RateLimitServiceClient<Channel>,
    work: Arc<Workload>,
    schedule: Arc<Schedule>,
    mut picker: KeyPicker,
) -> anyhow::Result<Stats> {
    let mut stats = Stats::new()?;
    loop {
        let request = work.request(picker.next());
        let sent = Instant::now();
        let measured = sent >= schedule.measure_start;
        if measured && !schedule.admit(sent) {
            break;
        }
        let result = client.should_rate_limit(request).await;
        let done = Instant::now();
        let failed = result.is_err();
        if measured {
            stats.record(result, done.saturating_duration_since(sent));
            stats.last_done = Some(done);
        }
        if failed {
            tokio::time::sleep(ERROR_BACKOFF).await;
        }
    }
    Ok(stats)
}

/// Results of one task, or of all of them once merged.
struct Stats {
    latency_us: Histogram<u64>,
    ok: u64,
    over_limit: u64,
    /// Answers whose overall code is neither OK nor OVER_LIMIT (a server bug).
    unknown_code: u64,
    errors: [u64; GRPC_CODES],
    /// The first error's message, to tell why requests fail.
    error_sample: Option<String>,
    last_done: Option<Instant>,
}

impl Stats {
    fn new() -> anyhow::Result<Stats> {
        Ok(Stats {
            latency_us: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
                .context("creating a latency histogram")?,
            ok: 0,
            over_limit: 0,
            unknown_code: 0,
            errors: [0; GRPC_CODES],
            error_sample: None,
            last_done: None,
        })
    }

    fn record(
        &mut self,
        result: Result<
            tonic::Response<envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse>,
            tonic::Status,
        >,
        latency: Duration,
    ) {
        match result {
            Ok(response) => {
                match response.get_ref().overall_code() {
                    RlCode::Ok => self.ok += 1,
                    RlCode::OverLimit => self.over_limit += 1,
                    RlCode::Unknown => self.unknown_code += 1,
                }
                let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
                self.latency_us.saturating_record(us);
            }
            Err(status) => {
                let code = status.code() as usize;
                // Codes are 0..=16; anything else is filed under Unknown (2).
                let slot = if code < GRPC_CODES { code } else { 2 };
                self.errors[slot] += 1;
                if self.error_sample.is_none() {
                    self.error_sample = Some(format!("{:?}: {}", status.code(), status.message()));
                }
            }
        }
    }

    fn merge(&mut self, other: Stats) -> anyhow::Result<()> {
        self.latency_us
            .add(&other.latency_us)
            .context("merging latency histograms")?;
        self.ok += other.ok;
        self.over_limit += other.over_limit;
        self.unknown_code += other.unknown_code;
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        if self.error_sample.is_none() {
            self.error_sample = other.error_sample;
        }
        self.last_done = self.last_done.max(other.last_done);
        Ok(())
    }

    fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    fn requests(&self) -> u64 {
        self.ok + self.over_limit + self.unknown_code + self.error_total()
    }

    /// `(name, count)` for every code that occurred.
    fn errors_by_code(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.errors
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (format!("{:?}", tonic::Code::from(code as i32)), *n))
    }
}

struct Report {
    /// Where the load went (the stand-in's address under `--self-test`).
    target: String,
    /// The settings, repeated next to the numbers.
    args: Args,
    /// From the end of the warm-up to the last measured answer.
    elapsed: Duration,
    /// CPU used by this process over the measured window (with `--self-test`, the stand-in's
    /// too); `None` where it cannot be read.
    client_cpu: Option<Duration>,
    stats: Stats,
}

/// Latency summary in milliseconds (µs resolution, so 3 decimals are exact).
struct Latency {
    samples: u64,
    min: f64,
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl Report {
    /// Something was measured and not all of it failed.
    fn succeeded(&self) -> bool {
        let n = self.stats.requests();
        n > 0 && self.stats.error_total() < n
    }

    fn requests_per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.stats.requests() as f64 / secs
        } else {
            0.0
        }
    }

    /// Client CPU as cores kept busy on average over the measured window.
    fn client_cores(&self) -> Option<f64> {
        let secs = self.elapsed.as_secs_f64();
        match self.client_cpu {
            Some(cpu) if secs > 0.0 => Some(cpu.as_secs_f64() / secs),
            _ => None,
        }
    }

    fn latency(&self) -> Option<Latency> {
        let h = &self.stats.latency_us;
        if h.is_empty() {
            return None;
        }
        Some(Latency {
            samples: h.len(),
            min: us_to_ms(h.min()),
            mean: h.mean().round() / 1000.0,
            p50: us_to_ms(h.value_at_quantile(0.50)),
            p90: us_to_ms(h.value_at_quantile(0.90)),
            p99: us_to_ms(h.value_at_quantile(0.99)),
            p999: us_to_ms(h.value_at_quantile(0.999)),
            max: us_to_ms(h.max()),
        })
    }

    fn to_text(&self) -> String {
        use std::fmt::Write;
        let a = &self.args;
        let s = &self.stats;
        let mut out = String::new();
        let target = if a.self_test {
            format!("{} (self-test stand-in)", self.target)
        } else {
            self.target.clone()
        };
        let _ = writeln!(out, "target       {target}");
        let _ = writeln!(
            out,
            "load         {} connections x {} in flight, {} client thread(s), closed loop",
            a.connections, a.concurrency, a.threads
        );
        let _ = writeln!(
            out,
            "workload     domain {}, key {}, {} keys ({}), {} descriptor(s)/request, hits_addend {}",
            a.domain,
            a.key,
            a.keys,
            a.key_order.name(),
            a.descriptors,
            if a.hits_addend == 0 {
                "unset".to_string()
            } else {
                a.hits_addend.to_string()
            }
        );
        let _ = writeln!(
            out,
            "requests     {} in {:.3} s (warm-up {:.3} s excluded)",
            s.requests(),
            self.elapsed.as_secs_f64(),
            a.warmup.as_secs_f64()
        );
        let _ = writeln!(out, "throughput   {:.1} req/s", self.requests_per_second());
        let _ = writeln!(
            out,
            "responses    OK {}, OVER_LIMIT {}, unknown code {}, errors {}",
            s.ok,
            s.over_limit,
            s.unknown_code,
            s.error_total()
        );
        match self.latency() {
            Some(l) => {
                let _ = writeln!(
                    out,
                    "latency ms   p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}  (min {:.3}, mean {:.3}, {} samples)",
                    l.p50, l.p90, l.p99, l.p999, l.max, l.min, l.mean, l.samples
                );
            }
            None => {
                let _ = writeln!(out, "latency ms   no answered requests");
            }
        }
        if let (Some(cpu), Some(cores)) = (self.client_cpu, self.client_cores()) {
            let _ = writeln!(
                out,
                "client cpu   {:.2} s = {:.2} cores{}",
                cpu.as_secs_f64(),
                cores,
                if a.self_test {
                    " (includes the stand-in server)"
                } else {
                    ""
                }
            );
            // Tokio's workers are the client's only busy threads; near their capacity the
            // figures describe the client, not the server.
            if !a.self_test && cores >= 0.9 * f64::from(a.threads) {
                let _ = writeln!(
                    out,
                    "note         the client was CPU-bound: throughput is a lower bound (try --threads)"
                );
            }
        }
        if s.error_total() > 0 {
            let codes: Vec<String> = s
                .errors_by_code()
                .map(|(code, n)| format!("{code} {n}"))
                .collect();
            let _ = writeln!(out, "errors       {}", codes.join(", "));
            if let Some(sample) = &s.error_sample {
                let _ = writeln!(out, "first error  {sample}");
            }
        }
        out
    }

    fn to_json(&self) -> serde_json::Value {
        let a = &self.args;
        let s = &self.stats;
        let errors_by_code: serde_json::Map<String, serde_json::Value> =
            s.errors_by_code().map(|(c, n)| (c, n.into())).collect();
        let latency = self.latency().map(|l| {
            serde_json::json!({
                "samples": l.samples,
                "min": l.min,
                "mean": l.mean,
                "p50": l.p50,
                "p90": l.p90,
                "p99": l.p99,
                "p99_9": l.p999,
                "max": l.max,
            })
        });
        serde_json::json!({
            "target": self.target,
            "self_test": a.self_test,
            "connections": a.connections,
            "concurrency": a.concurrency,
            "threads": a.threads,
            "domain": a.domain,
            "key": a.key,
            "keys": a.keys,
            "key_order": a.key_order.name(),
            "descriptors": a.descriptors,
            "hits_addend": a.hits_addend,
            "warmup_s": a.warmup.as_secs_f64(),
            "requested_duration_s": a.requests.is_none().then_some(a.duration.as_secs_f64()),
            "requested_requests": a.requests,
            "duration_s": self.elapsed.as_secs_f64(),
            "client_cpu_s": self.client_cpu.map(|c| c.as_secs_f64()),
            "client_cpu_cores": self.client_cores().map(|c| (c * 100.0).round() / 100.0),
            "requests": s.requests(),
            "requests_per_second": (self.requests_per_second() * 10.0).round() / 10.0,
            "ok": s.ok,
            "over_limit": s.over_limit,
            "unknown_code": s.unknown_code,
            "errors": s.error_total(),
            "errors_by_code": errors_by_code,
            "error_sample": s.error_sample,
            "latency_ms": latency,
        })
    }
}

/// The `--self-test` stand-in: a tonic server with the real service definition and no
/// limiter, for checking the load generator's measurement and reporting on its own.
mod standin {
    use std::net::SocketAddr;
    use std::time::Duration;

    use anyhow::Context;
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
        Code, DescriptorStatus,
    };
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
        RateLimitService, RateLimitServiceServer,
    };
    use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
    use tonic::transport::server::TcpIncoming;
    use tonic::{Request, Response, Status};

    struct StandIn {
        delay: Duration,
    }

    #[tonic::async_trait]
    impl RateLimitService for StandIn {
        async fn should_rate_limit(
            &self,
            request: Request<RateLimitRequest>,
        ) -> Result<Response<RateLimitResponse>, Status> {
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            let request = request.into_inner();
            if request.domain.is_empty() {
                // What sluice answers too.
                return Err(Status::invalid_argument(
                    "rate limit domain must not be empty",
                ));
            }
            let mut overall = Code::Ok;
            let statuses = request
                .descriptors
                .iter()
                .map(|d| {
                    let code = if d.entries.iter().any(|e| e.key == "limited") {
                        overall = Code::OverLimit;
                        Code::OverLimit
                    } else {
                        Code::Ok
                    };
                    DescriptorStatus {
                        code: code as i32,
                        ..Default::default()
                    }
                })
                .collect();
            Ok(Response::new(RateLimitResponse {
                overall_code: overall as i32,
                statuses,
                ..Default::default()
            }))
        }
    }

    /// Start the stand-in on 127.0.0.1 (kernel-chosen port) on a thread of its own, so it
    /// does not share the client's runtime workers. Runs until the process exits.
    pub fn spawn(delay: Duration) -> anyhow::Result<SocketAddr> {
        // Bound before returning, so the client can connect at once.
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").context("binding the stand-in server")?;
        listener
            .set_nonblocking(true)
            .context("binding the stand-in server")?;
        let addr = listener
            .local_addr()
            .context("binding the stand-in server")?;
        std::thread::Builder::new()
            .name("standin".into())
            .spawn(move || {
                let served = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("starting the stand-in runtime")
                    .and_then(|rt| {
                        rt.block_on(async move {
                            let listener = tokio::net::TcpListener::from_std(listener)?;
                            tonic::transport::Server::builder()
                                .add_service(RateLimitServiceServer::new(StandIn { delay }))
                                .serve_with_incoming(
                                    TcpIncoming::from(listener).with_nodelay(Some(true)),
                                )
                                .await?;
                            anyhow::Ok(())
                        })
                    });
                if let Err(e) = served {
                    eprintln!("loadgen: stand-in server: {e:#}");
                }
            })
            .context("starting the stand-in thread")?;
        Ok(addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ) -> tonic::Response<envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse>
        {
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

        let failed = run(&args(&[&common[..], &["--domain", ""]].concat()))
            .expect("run against the stand-in");
        assert_eq!(
            failed.stats.errors[tonic::Code::InvalidArgument as usize],
            300
        );
        assert!(!failed.succeeded());
        assert!(failed.to_json()["latency_ms"].is_null());
        assert!(failed.to_text().contains("InvalidArgument 300"));
    }
}
