//! Open-loop mode (`--rate R`): request `i` is due at `start + i/R`, whatever became of the
//! earlier ones, as real traffic arrives (Envoy does not wait for one check to answer
//! before sending the next). The closed loop cannot show overload: its in-flight count is
//! fixed, so a slow server just slows the client down. Here a server past capacity sees the
//! queue grow, and must shed or time out; each request carries `--timeout` as its
//! `grpc-timeout` (what Envoy sends), and its latency is measured from when it was *due*,
//! not when it was sent, so a stalled client or server cannot hide its delay (no
//! coordinated omission).
//!
//! The deadline counts from when a request was due too, as Envoy's filter timeout counts
//! from when the request was made, waiting for a connection or a stream included: an answer
//! later than `--timeout` after that is counted as `DeadlineExceeded`, not as an answer.
//! (tonic's own timeout starts only when its buffer hands the request to the connection, so
//! a request queued behind a server's stream limit would otherwise be answered, and counted,
//! long after its caller gave up.)
//!
//! With `--max-outstanding N`, a call due while N are outstanding (sent, or queued for a
//! stream behind the server's stream limit) fails at once, as Envoy fails calls past its
//! cluster's circuit breakers: the queue a caller keeps in front of a busy server stays
//! short, and what waits in it still has time left when it is sent. Without it the queue
//! grows until its head has waited the whole deadline, and every call sent is already late.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

use crate::args::{Args, KeyPicker, Workload};
use crate::run::Schedule;
use crate::stats::Stats;

/// Send at `rate` requests per second on `clients` (round-robin) until the schedule ends;
/// returns every measured result once all answers are in.
pub async fn load(
    args: &Args,
    rate: f64,
    clients: &[RateLimitServiceClient<Channel>],
    work: Arc<Workload>,
    schedule: Arc<Schedule>,
) -> anyhow::Result<Stats> {
    let total = Arc::new(Mutex::new(Stats::new()?));
    let mut picker = KeyPicker::new(args.key_order, args.keys as usize, 1, 0, 1);
    let mut set = tokio::task::JoinSet::new();
    let start = Instant::now();
    let period = Duration::from_secs_f64(1.0 / rate);
    let mut i: u64 = 0;
    let outstanding = Arc::new(AtomicU64::new(0));
    let max_outstanding = args.max_outstanding.unwrap_or(u64::MAX);
    'send: loop {
        let now = Instant::now();
        // Everything due by now goes out now (the timer ticks in milliseconds; at high
        // rates each tick releases a batch).
        loop {
            let due = start + period.mul_f64(i as f64);
            if due > now {
                break;
            }
            let measured = due >= schedule.measure_start;
            if measured && !schedule.admit(due) {
                break 'send;
            }
            let mut client = clients[i as usize % clients.len()].clone();
            let key = picker.next();
            i += 1;
            if outstanding.load(Ordering::Relaxed) >= max_outstanding {
                if measured {
                    let mut t = total.lock().unwrap_or_else(|e| e.into_inner());
                    t.overflow += 1;
                    t.last_done = t.last_done.max(Some(Instant::now()));
                }
                continue;
            }
            outstanding.fetch_add(1, Ordering::Relaxed);
            let mut request = tonic::Request::new(work.request(key));
            request.set_timeout(args.timeout);
            let total = total.clone();
            let give_up = due + args.timeout;
            let outstanding = outstanding.clone();
            set.spawn(async move {
                let call = client.should_rate_limit(request);
                let result = tokio::time::timeout_at(give_up.into(), call).await;
                let done = Instant::now();
                outstanding.fetch_sub(1, Ordering::Relaxed);
                // An answer this task sees only after the deadline (its worker was busy) is
                // late all the same: the caller would have given up.
                let result = match result {
                    Ok(r) if done <= give_up => r,
                    _ => Err(tonic::Status::deadline_exceeded(
                        "no answer within --timeout of when the request was due",
                    )),
                };
                if measured {
                    let mut t = total.lock().unwrap_or_else(|e| e.into_inner());
                    t.record(result, done.saturating_duration_since(due));
                    t.last_done = t.last_done.max(Some(done));
                }
            });
        }
        // Reap finished tasks so the set holds only those in flight.
        while set.try_join_next().is_some() {}
        let next = start + period.mul_f64(i as f64);
        tokio::time::sleep_until(next.into()).await;
    }
    while set.join_next().await.is_some() {}
    let stats = std::mem::replace(
        &mut *total.lock().unwrap_or_else(|e| e.into_inner()),
        Stats::new()?,
    );
    Ok(stats)
}
