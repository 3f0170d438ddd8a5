//! Admission of calls to store work: an in-flight limit that follows the store's measured
//! round trip (`limit.rs`), and in front of it a queue that refuses what has waited too long
//! (`codel.rs`). Refusing is the cheap answer to overload: a call refused here has had its
//! headers read and nothing else, no message decoded, no store round trip.
//!
//! One [`Admission`] per process, shared by every gRPC connection. A call asks for a
//! [`Permit`] with the instant it arrived and its deadline; it is admitted at once while
//! fewer calls than the limit hold one, else it queues, and is refused when it has waited as
//! long as the queue allows or as its deadline leaves. The service reports each store call's
//! round trip ([`Admission::observe`]); samples are averaged per window of at least
//! [`WINDOW`] and `WINDOW_SAMPLES` samples, and each window moves the limit. The memory
//! store makes no round trip: its limit is the ceiling, and only the queue's delays apply.
//!
//! The state is one mutex, taken three times per call (admit, observe, release), each for a
//! few arithmetic operations: uncontended, tens of nanoseconds, next to the ~20 µs a call
//! costs in the transport. Waiting calls (only while the limit is reached) get a oneshot
//! channel each.
//!
//! Time is tokio's (`tokio::time::Instant`, the clock its timers wait on): instants, ages and
//! the queue's waits all read it, so the tests pause it and move it exactly
//! (`tokio::time::advance`) instead of sleeping. It measures durations only; the wall clock
//! of limits is `limit::Clock`.
//!
//! Depends on nothing else of the crate: `service` asks it and reports to it.

mod codel;
mod limit;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use codel::Codel;
pub use codel::{INTERVAL, TARGET};
use limit::{Bounds, Gradient};

/// Shortest window of round-trip samples; also how often the limit may move.
pub const WINDOW: Duration = Duration::from_millis(10);
/// Fewest samples in a window (so a lone slow call does not move the limit) …
const WINDOW_SAMPLES: u32 = 8;
/// … unless the window has lasted this long (a light load still moves it).
const WINDOW_MAX: Duration = Duration::from_millis(100);
/// The limit before any sample (a remote store): room for a few dozen concurrent round trips,
/// which is more than one instance keeps busy below its capacity; it grows while the store
/// keeps up.
const INITIAL_LIMIT: usize = 32;
/// The limit never falls below this: a few calls always go through, so round trips keep
/// being measured and recovery is seen.
const MIN_LIMIT: usize = 4;
/// With `--max-in-flight 0` (no ceiling), the ceiling of the adaptive limit and the queue.
const UNBOUNDED: usize = 1 << 16;

/// Why a call was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// As many calls are waiting as the ceiling allows.
    QueueFull { limit: usize },
    /// It waited (in the runtime, then in the queue) as long as the queue or its deadline
    /// allows.
    Waited { waited: Duration, limit: usize },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::QueueFull { limit } => write!(
                f,
                "overloaded: {limit} calls in flight (adaptive limit, at most --max-in-flight) \
                 and as many waiting"
            ),
            Refusal::Waited { waited, limit } => write!(
                f,
                "overloaded: waited {:.1}ms for one of {limit} in-flight slots (adaptive \
                 limit, at most --max-in-flight)",
                waited.as_secs_f64() * 1000.0
            ),
        }
    }
}

/// The gate. See the module documentation.
pub struct Admission {
    state: Mutex<State>,
    /// Most calls waiting at once.
    max_queue: usize,
}

struct State {
    in_flight: usize,
    gradient: Gradient,
    codel: Codel,
    /// Served from the front; newcomers go to the back, or to the front while the queue is
    /// congested (adaptive LIFO).
    queue: VecDeque<Waiter>,
    next_id: u64,
    window: Window,
}

struct Waiter {
    id: u64,
    grant: oneshot::Sender<()>,
}

/// Round-trip samples since the window opened.
struct Window {
    start: Instant,
    sum: f64,
    count: u32,
    max_in_flight: usize,
}

impl Window {
    fn new(start: Instant) -> Window {
        Window {
            start,
            sum: 0.0,
            count: 0,
            max_in_flight: 0,
        }
    }
}

impl Admission {
    /// A gate whose adaptive limit never exceeds `max_in_flight` (0: no ceiling); as many
    /// calls may wait. Without a `remote` store (the memory store) there is no round trip to
    /// follow: the limit is the ceiling, and only the queue's delays apply.
    pub fn new(max_in_flight: usize, remote: bool) -> Admission {
        let max = if max_in_flight == 0 {
            UNBOUNDED
        } else {
            max_in_flight
        };
        let initial = if remote { INITIAL_LIMIT } else { max };
        let now = Instant::now();
        Admission {
            state: Mutex::new(State {
                in_flight: 0,
                gradient: Gradient::new(Bounds {
                    initial: initial as f64,
                    min: MIN_LIMIT as f64,
                    max: max as f64,
                }),
                codel: Codel::new(now),
                queue: VecDeque::new(),
                next_id: 0,
                window: Window::new(now),
            }),
            max_queue: max,
        }
    }

    /// The current limit on calls in flight.
    pub fn limit(&self) -> usize {
        self.state.lock().gradient.limit()
    }

    /// Calls holding a permit now.
    pub fn in_flight(&self) -> usize {
        self.state.lock().in_flight
    }

    /// Calls waiting for one.
    pub fn queued(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Admit a call that arrived at `arrived` (its headers read) and must be answered by
    /// `deadline`, now or after waiting; or refuse it.
    pub async fn admit(
        self: &Arc<Self>,
        arrived: Instant,
        deadline: Option<Instant>,
    ) -> Result<Permit, Refusal> {
        let now = Instant::now();
        let sojourn = now.saturating_duration_since(arrived);
        let (id, rx, patience) = {
            let mut s = self.state.lock();
            let limit = s.gradient.limit();
            if s.queue.is_empty() && s.in_flight < limit {
                s.in_flight += 1;
                return Ok(Permit(self.clone()));
            }
            let len = s.queue.len();
            s.codel.seen(len, now);
            let congested = s.codel.congested(now);
            let mut patience = s.codel.patience(sojourn, now);
            if let Some(d) = deadline {
                // No use waiting for a slot the call could not finish in.
                let round_trip = Duration::from_secs_f64(s.gradient.long_rtt());
                let left = d.saturating_duration_since(now).saturating_sub(round_trip);
                patience = patience.min(left);
            }
            if patience.is_zero() {
                return Err(Refusal::Waited {
                    waited: sojourn,
                    limit,
                });
            }
            if s.queue.len() >= self.max_queue {
                return Err(Refusal::QueueFull { limit });
            }
            let id = s.next_id;
            s.next_id += 1;
            let (grant, rx) = oneshot::channel();
            let waiter = Waiter { id, grant };
            if congested {
                s.queue.push_front(waiter);
            } else {
                s.queue.push_back(waiter);
            }
            (id, rx, patience)
        };
        let mut waiting = Waiting {
            admission: self,
            id,
            rx,
            settled: false,
        };
        let granted = tokio::time::timeout(patience, &mut waiting.rx).await;
        let granted = match granted {
            Ok(r) => r.is_ok(),
            // Out of patience, unless a grant came in meanwhile.
            Err(_) => !self.state.lock().remove(id) && waiting.rx.try_recv().is_ok(),
        };
        waiting.settled = true;
        if granted {
            Ok(Permit(self.clone()))
        } else {
            Err(Refusal::Waited {
                waited: arrived.elapsed(),
                limit: self.limit(),
            })
        }
    }

    /// A store round trip of a call holding a permit took `rtt`.
    pub fn observe(&self, rtt: Duration) {
        let now = Instant::now();
        let mut s = self.state.lock();
        let in_flight = s.in_flight;
        let w = &mut s.window;
        w.sum += rtt.as_secs_f64();
        w.count += 1;
        w.max_in_flight = w.max_in_flight.max(in_flight);
        let age = now.saturating_duration_since(w.start);
        if (w.count >= WINDOW_SAMPLES && age >= WINDOW) || age >= WINDOW_MAX {
            let (avg, busy) = (w.sum / f64::from(w.count), w.max_in_flight);
            s.window = Window::new(now);
            s.gradient.update(avg, busy);
            s.hand_off();
        }
    }

    /// A permit came back.
    fn release(&self) {
        let mut s = self.state.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        s.hand_off();
    }
}

impl State {
    /// Grant slots to waiters, from the front, while the limit allows.
    fn hand_off(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        while self.in_flight < self.gradient.limit() {
            let Some(w) = self.queue.pop_front() else {
                break;
            };
            // Fails only when the waiter is gone (its call was cancelled): next one.
            if w.grant.send(()).is_ok() {
                self.in_flight += 1;
            }
        }
        self.codel.seen(self.queue.len(), Instant::now());
    }

    /// Take waiter `id` out of the queue; false when it is not there (already granted).
    fn remove(&mut self, id: u64) -> bool {
        match self.queue.iter().position(|w| w.id == id) {
            Some(i) => {
                self.queue.remove(i);
                self.codel.seen(self.queue.len(), Instant::now());
                true
            }
            None => false,
        }
    }
}

/// A queued call's place; if the call is dropped while waiting (its client went away), the
/// place is given up, and a slot granted meanwhile is passed on.
struct Waiting<'a> {
    admission: &'a Admission,
    id: u64,
    rx: oneshot::Receiver<()>,
    settled: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let removed = self.admission.state.lock().remove(self.id);
        if !removed && self.rx.try_recv().is_ok() {
            self.admission.release();
        }
    }
}

/// A call's slot among those in flight, given back when dropped.
pub struct Permit(Arc<Admission>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.release();
    }
}

#[cfg(test)]
mod tests;
