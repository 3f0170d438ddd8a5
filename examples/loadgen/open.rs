//! Open-loop mode (`--rate R`): request `i` is due at `start + i/R`, whatever became of the
//! earlier ones, as real traffic arrives (Envoy does not wait for one check to answer
//! before sending the next). The closed loop cannot show overload: its in-flight count is
//! fixed, so a slow server just slows the client down. Here a server past capacity sees the
//! queue grow, and must shed or time out; each request carries `--timeout` as its
//! `grpc-timeout` (what Envoy sends), and its latency is measured from when it was *due*,
//! not when it was sent, so a stalled client or server cannot hide its delay (no
//! coordinated omission).

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
            let mut request = tonic::Request::new(work.request(picker.next()));
            request.set_timeout(args.timeout);
            let total = total.clone();
            set.spawn(async move {
                let result = client.should_rate_limit(request).await;
                let done = Instant::now();
                if measured {
                    let mut t = total.lock().unwrap_or_else(|e| e.into_inner());
                    t.record(result, done.saturating_duration_since(due));
                    t.last_done = t.last_done.max(Some(done));
                }
            });
            i += 1;
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
