//! What the tasks count: answers by overall code, gRPC errors by status code, and the
//! latency of answered requests in an HdrHistogram. Each task keeps its own (no shared
//! counters on the hot path); they are merged once the load ends.

use std::time::{Duration, Instant};

use anyhow::Context;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as RlCode;
use hdrhistogram::Histogram;

/// Highest latency the histograms hold; slower answers are recorded as this.
const MAX_LATENCY_US: u64 = 60_000_000;

/// One slot per gRPC status code (0..=16).
const GRPC_CODES: usize = 17;

/// Results of one task, or of all of them once merged.
pub struct Stats {
    pub latency_us: Histogram<u64>,
    pub ok: u64,
    pub over_limit: u64,
    /// Answers whose overall code is neither OK nor OVER_LIMIT (a server bug).
    pub unknown_code: u64,
    pub errors: [u64; GRPC_CODES],
    /// Open loop with `--max-outstanding`: calls failed by the client itself, never sent.
    pub overflow: u64,
    /// The first error's message, to tell why requests fail.
    pub error_sample: Option<String>,
    pub last_done: Option<Instant>,
}

impl Stats {
    pub fn new() -> anyhow::Result<Stats> {
        Ok(Stats {
            latency_us: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
                .context("creating a latency histogram")?,
            ok: 0,
            over_limit: 0,
            unknown_code: 0,
            errors: [0; GRPC_CODES],
            overflow: 0,
            error_sample: None,
            last_done: None,
        })
    }

    pub fn record(
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

    pub fn merge(&mut self, other: Stats) -> anyhow::Result<()> {
        self.latency_us
            .add(&other.latency_us)
            .context("merging latency histograms")?;
        self.ok += other.ok;
        self.over_limit += other.over_limit;
        self.unknown_code += other.unknown_code;
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        self.overflow += other.overflow;
        if self.error_sample.is_none() {
            self.error_sample = other.error_sample;
        }
        self.last_done = self.last_done.max(other.last_done);
        Ok(())
    }

    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    pub fn requests(&self) -> u64 {
        self.ok + self.over_limit + self.unknown_code + self.error_total() + self.overflow
    }

    /// `(name, count)` for every code that occurred.
    pub fn errors_by_code(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.errors
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (format!("{:?}", tonic::Code::from(code as i32)), *n))
    }
}
