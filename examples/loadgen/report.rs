//! What a run prints: the settings next to the figures, as the text BENCHMARKS.md
//! quotes or as one JSON object (`--json`) that scripts/bench.sh builds its tables from.
//! Both are read by people and scripts, so their wording and keys are kept stable.

use std::time::Duration;

use crate::args::Args;
use crate::stats::Stats;

pub struct Report {
    /// Where the load went (the stand-in's address under `--self-test`).
    pub target: String,
    /// The settings, repeated next to the numbers.
    pub args: Args,
    /// From the end of the warm-up to the last measured answer.
    pub elapsed: Duration,
    /// CPU used by this process over the measured window (with `--self-test`, the stand-in's
    /// too); `None` where it cannot be read.
    pub client_cpu: Option<Duration>,
    pub stats: Stats,
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
    pub fn succeeded(&self) -> bool {
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

    /// Answers (OK or OVER_LIMIT, not errors) per second.
    fn answered_per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        let s = &self.stats;
        if secs > 0.0 {
            (s.ok + s.over_limit + s.unknown_code) as f64 / secs
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

    pub fn to_text(&self) -> String {
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
        match a.rate {
            Some(rate) => {
                let _ = writeln!(
                    out,
                    "load         {} connections, {} client thread(s), open loop at {rate} req/s offered (timeout {:?})",
                    a.connections, a.threads, a.timeout
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "load         {} connections x {} in flight, {} client thread(s), closed loop",
                    a.connections, a.concurrency, a.threads
                );
            }
        }
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
        if a.rate.is_some() {
            let _ = writeln!(out, "answered     {:.1} req/s", self.answered_per_second());
        }
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
        if s.overflow > 0 {
            let _ = writeln!(
                out,
                "overflow     {} calls failed by the client (--max-outstanding)",
                s.overflow
            );
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

    pub fn to_json(&self) -> serde_json::Value {
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
            "offered_rate": a.rate,
            "answered_per_second": (self.answered_per_second() * 10.0).round() / 10.0,
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
            "client_overflow": s.overflow,
            "error_sample": s.error_sample,
            "latency_ms": latency,
        })
    }
}
