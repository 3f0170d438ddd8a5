//! How long a call may wait for admission: controlled delay as Facebook's "Fail at Scale"
//! applies CoDel to request queues, with adaptive LIFO. Pure: the caller passes `now`.
//!
//! A queue that has not been empty for a whole [`INTERVAL`] is a standing queue, not a burst:
//! it only adds delay to every call. While that lasts (*congested*) a call may wait for
//! admission at most [`TARGET`] from its arrival (its headers read, so the runtime's own
//! queue before the call was first polled counts too), and the queue is served newest first
//! (adaptive LIFO: the newest calls have the most of their deadline left; the oldest are the
//! ones to refuse). Otherwise a burst may wait up to [`INTERVAL`], first come first served.
//! Either way never past what the caller's deadline leaves (`super::Admission`).
//!
//! Emptiness, not the sojourn of the calls admitted: under adaptive LIFO the newest calls are
//! admitted within the target while older ones wait, so admitted sojourns would call a
//! standing queue drained and switch it back to first come first served.

use std::time::Duration;

use tokio::time::Instant;

/// How long a call may wait in a standing queue (CoDel's classic target, and Facebook's).
pub const TARGET: Duration = Duration::from_millis(5);
/// How long the queue may stay non-empty before it counts as standing; also the longest wait
/// of a burst.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// What the queue knows of its recent past.
#[derive(Clone, Debug)]
pub struct Codel {
    /// When the queue was last seen empty.
    last_empty: Instant,
}

impl Codel {
    pub fn new(now: Instant) -> Codel {
        Codel { last_empty: now }
    }

    /// The queue holds `len` calls now.
    pub fn seen(&mut self, len: usize, now: Instant) {
        if len == 0 {
            self.last_empty = self.last_empty.max(now);
        }
    }

    /// Whether the queue has been standing for an interval.
    pub fn congested(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_empty) >= INTERVAL
    }

    /// How much longer a call that arrived `sojourn` ago may wait for admission (zero:
    /// refuse it now).
    pub fn patience(&self, sojourn: Duration, now: Instant) -> Duration {
        let bound = if self.congested(now) {
            TARGET
        } else {
            INTERVAL
        };
        bound.saturating_sub(sojourn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_burst_may_wait_an_interval_a_standing_queue_only_the_target() {
        let t0 = Instant::now();
        let mut c = Codel::new(t0);
        c.seen(0, t0);
        c.seen(3, t0 + MS);
        assert!(!c.congested(t0 + 99 * MS));
        assert_eq!(c.patience(10 * MS, t0 + 50 * MS), 90 * MS);
        // Never empty for an interval: standing.
        c.seen(5, t0 + 60 * MS);
        assert!(c.congested(t0 + 100 * MS));
        assert_eq!(c.patience(MS, t0 + 100 * MS), 4 * MS);
        assert_eq!(c.patience(6 * MS, t0 + 100 * MS), Duration::ZERO);
        // Empty once: a burst again, for an interval.
        c.seen(0, t0 + 120 * MS);
        assert!(!c.congested(t0 + 150 * MS));
        assert!(c.congested(t0 + 220 * MS));
    }
}
