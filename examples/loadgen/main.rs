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
//! # Open loop (`--rate`)
//!
//! `--rate R` replaces the closed-loop tasks with a fixed offered rate: request `i` is due
//! at `i/R` seconds and is sent then, whatever the earlier ones' fate (see `open.rs`).
//! Latency counts from when a request was due, each carries `--timeout` as `grpc-timeout`
//! and counts as `DeadlineExceeded` unless answered within it of when it was due, and
//! errors (shed with RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED) are counted by code.
//! `--max-outstanding N` fails calls at once past N outstanding, as Envoy's circuit
//! breakers do (`client_overflow`). This is how overload is measured
//! (`scripts/overload.sh`, RELIABILITY.md).
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
//!
//! # Layout
//!
//! `args` is what to send (the command line and the requests it describes), `run` how it
//! is sent and timed, `stats` what each task counts, `report` what is printed, and
//! `standin` the `--self-test` server.

mod args;
mod open;
mod report;
mod run;
mod standin;
mod stats;
#[cfg(test)]
mod tests;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Args;

// The client shares the machine with the server under test: every microsecond it spends
// allocating is taken from the server (mimalloc is also what the server binary uses).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    match run::run(&args) {
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
