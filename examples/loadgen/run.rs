//! How the load is sent and timed: one HTTP/2 connection per `--connections`, closed-loop
//! tasks sharing each, a schedule that separates the warm-up from the measured window,
//! and the client's own CPU use over that window (to tell a CPU-bound client from a
//! slow server).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::{Channel, Endpoint};

use crate::args::{Args, KeyPicker, Workload};
use crate::report::Report;
use crate::standin;
use crate::stats::Stats;

/// Pause after a failed request. A dead or refusing server answers in microseconds, and
/// without a pause the client would spin and take the CPU the server needs to recover.
/// (Runs with errors are not valid benchmarks anyway; their throughput is paced by this.)
const ERROR_BACKOFF: Duration = Duration::from_millis(10);

pub fn run(args: &Args) -> anyhow::Result<Report> {
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
    // `--target a,b,c`: connections go to the targets in turn (several sluice instances
    // sharing one store, as behind a load balancer).
    let endpoints = target
        .split(',')
        .map(|t| {
            Endpoint::from_shared(t.trim().to_owned())
                .with_context(|| format!("invalid target '{t}'"))
                .map(|e| {
                    e.tcp_nodelay(true)
                        .connect_timeout(Duration::from_secs(5))
                        .timeout(args.timeout)
                })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Each `connect` is its own HTTP/2 connection; clones of a Channel share it.
    let mut clients = Vec::with_capacity(args.connections as usize);
    for i in 0..args.connections as usize {
        let endpoint = &endpoints[i % endpoints.len()];
        let channel = endpoint
            .connect()
            .await
            .with_context(|| format!("connecting to {}", endpoint.uri()))?;
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
    let shape = match args.rate {
        Some(rate) => format!(
            "{} connections, open loop at {rate} req/s",
            args.connections
        ),
        None => format!(
            "{} connections x {} in flight",
            args.connections, args.concurrency
        ),
    };
    eprintln!(
        "loadgen: {target}: {shape}, warm-up {}, then {}",
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
    let mut total = Stats::new()?;
    if let Some(rate) = args.rate {
        total = crate::open::load(args, rate, &clients, work.clone(), schedule.clone()).await?;
    }
    let mut set = tokio::task::JoinSet::new();
    for (c, client) in clients.iter().enumerate() {
        if args.rate.is_some() {
            break;
        }
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

/// When measuring starts and stops.
pub struct Schedule {
    pub measure_start: Instant,
    /// `--duration` mode: no request is sent at or after this.
    pub deadline: Option<Instant>,
    /// `--requests` mode: measured requests to send in total (shared by all tasks).
    pub limit: Option<u64>,
    pub issued: AtomicU64,
}

impl Schedule {
    /// May a measured request be sent at `now`? Claims one of `--requests` when limited.
    pub fn admit(&self, now: Instant) -> bool {
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
