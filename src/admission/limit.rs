//! The adaptive in-flight limit: a gradient controller over the store's round-trip time,
//! after Netflix concurrency-limits' `Gradient2Limit`. Pure arithmetic on samples; the
//! caller ([`super::Admission`]) owns the clock and the lock.
//!
//! Why a gradient and not Vegas or plain AIMD:
//! - Vegas compares each sample with the *minimum* round trip ever seen, which a remote store
//!   on a shared machine cannot give reliably: one lucky sample makes every later one look
//!   queued, and a move to a farther Redis (a failover) looks like permanent congestion until
//!   the minimum is re-probed by forcing the limit down (Envoy's adaptive concurrency filter
//!   does that every minute, refusing calls while it measures).
//! - AIMD needs a latency threshold or a drop signal to back off on; the right threshold is
//!   the store's normal latency, which is what is unknown.
//! - The gradient compares the recent round trip (windows of ~10 ms, averaged over ~40 ms)
//!   with a long average (~1 s of windows). The limit shrinks, by at most half per window,
//!   while the recent one is worse than the long one by more than the tolerance, and grows
//!   by an allowance (√limit) while it is not. A store that stalls is met at once; a lasting change of
//!   baseline (a farther Redis) is absorbed by the long average without a probe.
//!
//! Gradient2's known weakness is that a sustained overload lifts the long average to the
//! overloaded round trip within its span, after which nothing looks worse than usual and the
//! limit creeps back up (measured: Redis and sluice sharing a saturated CPU kept 64 calls in
//! flight at 12 ms each, and every call answered was late). Here the long average follows a
//! *slower* round trip at full speed only while the limit is not in use (at most half of it
//! busy: the load, not the store, sets the round trip then); while it is in use, a slower
//! round trip moves it at a thirtieth of that weight (~30 s). So an overload of seconds keeps
//! the limit down, near where the store answers at its usual speed, and a lasting change is
//! still taken in, within half a minute under load. A faster round trip always moves it at
//! full speed.

/// Limits of the controller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    /// The limit before any sample.
    pub initial: f64,
    pub min: f64,
    /// The hard ceiling (`--max-in-flight`).
    pub max: f64,
}

/// The recent round trip may be this much worse than the long average before the limit
/// shrinks (Gradient2's `rttTolerance`): batching and scheduling make round trips vary by
/// tens of percent at a steady load.
const TOLERANCE: f64 = 1.5;
/// Weight of a window's proposal in the new limit (Gradient2's `smoothing`).
const SMOOTHING: f64 = 0.2;
/// Windows the recent round trip spans (an exponential average, weight `2 / (n + 1)`):
/// ~40 ms. One window alone would say too much: a CPU quota (a container's limit) stalls the
/// process for part of every period, so at a steady load the windows that span a stall are
/// several times slower than the others, and judged one by one, each of them halved the
/// limit (measured: a 1 ms quota every 4 ms held strict Redis's limit near 8, and a fifth of
/// the calls were refused at its capacity). A stall of the store still moves it at once: a
/// window ten times slower than usual makes it nearly five times slower.
const SHORT_WINDOWS: f64 = 4.0;
/// Windows the long average spans: about a second at one window per 10 ms.
const LONG_WINDOWS: f64 = 100.0;
/// … and when a slower round trip comes while the limit is in use: about 30 s.
const LONG_WINDOWS_BUSY: f64 = 3000.0;

/// The limit and the long average round trip it is judged against.
#[derive(Clone, Debug)]
pub struct Gradient {
    limit: f64,
    /// Recent round trip: short exponential average of the windows', in seconds.
    short: Option<f64>,
    /// Long exponential average of the recent round trip, in seconds (`None`: no sample yet).
    long: Option<f64>,
    bounds: Bounds,
}

impl Gradient {
    pub fn new(bounds: Bounds) -> Gradient {
        let max = bounds.max.max(1.0);
        let min = bounds.min.clamp(1.0, max);
        Gradient {
            limit: bounds.initial.clamp(min, max),
            short: None,
            long: None,
            bounds: Bounds {
                initial: bounds.initial,
                min,
                max,
            },
        }
    }

    /// The current limit, whole.
    pub fn limit(&self) -> usize {
        self.limit as usize
    }

    /// The long average round trip in seconds (0 before any sample).
    pub fn long_rtt(&self) -> f64 {
        self.long.unwrap_or(0.0)
    }

    /// One window closed: its average round trip `rtt` (seconds) and the most calls that
    /// were in flight during it.
    pub fn update(&mut self, rtt: f64, max_in_flight: usize) {
        if !(rtt.is_finite() && rtt > 0.0) {
            return;
        }
        // Fewer calls than half the limit: the load, not the store, decides the round trip;
        // it says nothing about how many calls the store could take.
        let busy = (max_in_flight as f64) >= self.limit / 2.0;
        let rtt = match self.short {
            None => rtt,
            Some(s) => s + (rtt - s) * 2.0 / (SHORT_WINDOWS + 1.0),
        };
        self.short = Some(rtt);
        let long = match self.long {
            None => rtt,
            Some(l) => {
                let span = if busy && rtt > l {
                    LONG_WINDOWS_BUSY
                } else {
                    LONG_WINDOWS
                };
                l + (rtt - l) * 2.0 / (span + 1.0)
            }
        };
        // Latency back to normal after a long overload: let the long average come down
        // faster than its weight alone would, so the limit grows again soon.
        let long = if long / rtt > 2.0 { long * 0.95 } else { long };
        self.long = Some(long);
        if !busy {
            return;
        }
        let gradient = (TOLERANCE * long / rtt).clamp(0.5, 1.0);
        // Room to grow: √limit, as Envoy's adaptive concurrency filter allows (Gradient2's
        // fixed 4 is slow at a limit of hundreds and keeps it from falling below 8).
        let allowance = self.limit.sqrt();
        let proposed = self.limit * gradient + allowance;
        self.limit = (self.limit * (1.0 - SMOOTHING) + proposed * SMOOTHING)
            .clamp(self.bounds.min, self.bounds.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient() -> Gradient {
        Gradient::new(Bounds {
            initial: 32.0,
            min: 4.0,
            max: 1024.0,
        })
    }

    /// `windows` windows of round trip `rtt` (seconds), every slot in use.
    fn busy(g: &mut Gradient, rtt: f64, windows: usize) {
        for _ in 0..windows {
            let busy = g.limit();
            g.update(rtt, busy);
        }
    }

    #[test]
    fn a_steady_busy_store_lets_the_limit_grow_to_the_ceiling() {
        let mut g = gradient();
        busy(&mut g, 0.001, 2000);
        assert_eq!(g.limit(), 1024);
    }

    #[test]
    fn an_idle_store_leaves_the_limit_alone() {
        let mut g = gradient();
        for i in 0..1000 {
            // Round trips all over the place, but never more than 2 calls in flight.
            g.update(if i % 2 == 0 { 0.001 } else { 0.050 }, 2);
        }
        assert_eq!(g.limit(), 32);
    }

    #[test]
    fn a_store_that_slows_down_shrinks_the_limit_then_it_recovers() {
        let mut g = gradient();
        busy(&mut g, 0.001, 300);
        let before = g.limit();
        // Ten times slower: at most half per window, smoothed.
        busy(&mut g, 0.010, 20);
        let slowed = g.limit();
        assert!(slowed < before / 2, "{before} -> {slowed}");
        // Back to normal: the limit grows again.
        busy(&mut g, 0.001, 300);
        assert!(g.limit() > slowed * 2, "{slowed} -> {}", g.limit());
    }

    #[test]
    fn round_trips_that_alternate_at_a_steady_load_leave_the_limit_up() {
        // A CPU quota (a container's limit) stalls the process for part of every period:
        // windows that span a stall are several times slower than the others, whatever the
        // load. That is not the store queueing.
        let mut g = gradient();
        for i in 0..3000 {
            let busy = g.limit();
            g.update(if i % 2 == 1 { 0.004 } else { 0.0005 }, busy);
        }
        assert!(g.limit() >= 32, "{}", g.limit());
    }

    #[test]
    fn a_sustained_overload_keeps_the_limit_down_and_a_lasting_change_is_taken_in() {
        let mut g = gradient();
        busy(&mut g, 0.001, 300);
        // Five seconds of round trips ten times the usual, every slot in use.
        busy(&mut g, 0.010, 500);
        assert!(g.limit() <= 8, "{}", g.limit());
        // A minute of it: the new round trip is the usual one now, the limit grows.
        let low = g.limit();
        busy(&mut g, 0.010, 6000);
        assert!(g.limit() > low * 4, "{low} -> {}", g.limit());
    }

    #[test]
    fn bounds_hold_and_bad_samples_are_ignored() {
        let mut g = Gradient::new(Bounds {
            initial: 100.0,
            min: 0.0,
            max: 8.0,
        });
        assert_eq!(g.limit(), 8, "initial within the bounds");
        let mut rtt = 0.001;
        for i in 0..1000 {
            // Slower and slower, then faster and faster.
            rtt *= if i < 500 { 1.1 } else { 0.9 };
            g.update(rtt, 8);
            assert!((1..=8).contains(&g.limit()), "{}", g.limit());
        }
        let before = g.limit();
        g.update(f64::NAN, 8);
        g.update(0.0, 8);
        g.update(-1.0, 8);
        g.update(f64::INFINITY, 8);
        assert_eq!(g.limit(), before);
    }
}
