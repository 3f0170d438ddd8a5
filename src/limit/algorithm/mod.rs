//! Native (in-process) implementations of every algorithm and of the check protocol; the
//! contract is `docs/explanation/algorithms.md`, which the Redis Lua scripts implement too, so this code
//! follows it literally (same integer arithmetic, rounding, clamps and order).
//!
//! One file per algorithm holds its state type and formulas; `token_bucket`, `leaky_bucket`
//! and `gcra` share their decision arithmetic through [`scaled::Level`], `sliding_log` and
//! `sliding_window` their run-length counts through `runs::Runs`. This file holds the
//! per-limit state the memory store keeps ([`LimitState`]); `check.rs` holds [`evaluate`],
//! the whole check protocol (load, penalty, decide, all-or-nothing charge with overdraft,
//! lock, save, report) over the states of one check. Nothing here reads a clock, locks or does I/O:
//! `now_ms` is passed in, and the common path does not allocate.

mod check;
pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
mod runs;
pub mod scaled;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;

#[cfg(test)]
mod tests;

pub use check::{admits, evaluate, evaluate_held};
pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use leaky_bucket::LeakyBucket;
pub use scaled::Level;
pub use sliding_log::SlidingLog;
pub use sliding_window::{Geometry, SlidingWindow};
pub use token_bucket::TokenBucket;

use super::{Algorithm, LimitSpec, MAX_EXACT_SCALED, Periods};

/// Largest count a window state holds (`2^53` requests): `fixed_window`'s count and
/// `sliding_window`'s total saturate here so every value stays exact in Lua's doubles. The
/// bucket algorithms saturate at [`lmax`] instead.
pub const USAGE_MAX: u64 = MAX_EXACT_SCALED;

/// `Lmax = min(2^53, 2^52·R)`: the largest scaled usage `token_bucket`, `leaky_bucket` and
/// `gcra` hold (clamped when loaded and when charged), so that `reset_ms ≤ lag + 2^52` and
/// `gcra`'s `TAT = now + level/R` stay exact in Lua's doubles. 0 for `R = 0` (inert buckets).
pub const fn lmax(r: u64) -> u128 {
    let half = (1u128 << 52) * r as u128;
    let exact = MAX_EXACT_SCALED as u128;
    if half < exact { half } else { exact }
}

/// The numbers of one [`LimitSpec`] as the doc names them, at one instant (a calendar
/// limit's periods are those around it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// `R`: requests per unit (refill / leak rate in scaled units per ms).
    pub r: u64,
    /// `W`: the window (`unit × unit_multiplier`) in ms (a calendar limit's nominal length:
    /// its windows are `cal`'s).
    pub w: u64,
    /// `C`: capacity.
    pub c: u64,
    /// `B`: sub-windows of a `sliding_window` (as given: config keeps it in
    /// [`BUCKETS_RANGE`](crate::limit::BUCKETS_RANGE); at least 1, the doc's precondition), else 0.
    pub b: u64,
    /// `Cs = C·W`.
    pub cs: u128,
    /// `Lmax = min(2^53, 2^52·R)` ([`lmax`]): the buckets' scaled usage cap.
    pub lmax: u128,
    /// A calendar limit's periods around the instant ([`LimitSpec::periods`]).
    pub cal: Option<Periods>,
}

impl Params {
    pub fn new(spec: &LimitSpec, now_ms: u64) -> Params {
        let w = spec.window_ms();
        let c = spec.capacity();
        // The Lua script uses `B` verbatim (and refuses `B = 0`, which config never produces):
        // so does this, with `B = 0` read as 1 so that no input can divide by zero.
        let b = if spec.algorithm == Algorithm::SlidingWindow {
            u64::from(spec.buckets.max(1))
        } else {
            0
        };
        let r = spec.requests_per_unit;
        Params {
            r,
            w,
            c,
            b,
            cs: u128::from(c) * u128::from(w),
            lmax: lmax(r),
            cal: spec.periods(now_ms),
        }
    }

    pub fn geometry(&self) -> Geometry {
        Geometry {
            w: self.w,
            b: self.b,
            cal: self.cal,
        }
    }

    /// The fixed window holding `now`: `(ws, end)`, epoch-aligned (`ws = now − now mod W`)
    /// or the calendar period holding it.
    pub fn window(&self, now: u64) -> (u64, u64) {
        match &self.cal {
            Some(p) => p.period(now),
            None => {
                let ws = now - now % self.w.max(1);
                (ws, ws.saturating_add(self.w))
            }
        }
    }

    /// The end of the fixed window that starts at `ws` (`ws + W`; a calendar period's end).
    pub fn window_end(&self, ws: u64, now: u64) -> u64 {
        match &self.cal {
            Some(p) => p.end_of(ws, now),
            None => ws.saturating_add(self.w),
        }
    }
}

/// The stored state of one limit, by algorithm. `Empty` = missing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum State {
    #[default]
    Empty,
    FixedWindow(FixedWindow),
    SlidingWindow(SlidingWindow),
    SlidingLog(SlidingLog),
    TokenBucket(TokenBucket),
    LeakyBucket(LeakyBucket),
    Gcra(Gcra),
}

/// Everything the memory store keeps for one limit of one descriptor: the algorithm state
/// with its expiry (the doc's TTL, slack 0) and the penalty lock (a separate key in Redis).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitState {
    pub state: State,
    /// From this instant on, `state` is missing (as an expired Redis key is).
    pub state_expires_ms: u64,
    /// Penalty lock, active while `lock_until_ms > now`.
    pub lock_until_ms: u64,
}

impl LimitState {
    /// Bytes this state holds on the heap: the sub-windows of a `sliding_window`, the runs
    /// of a `sliding_log`; nothing for the others.
    pub fn heap_bytes(&self) -> usize {
        match &self.state {
            State::SlidingWindow(s) => s.heap_bytes(),
            State::SlidingLog(s) => s.heap_bytes(),
            State::Empty
            | State::FixedWindow(_)
            | State::TokenBucket(_)
            | State::LeakyBucket(_)
            | State::Gcra(_) => 0,
        }
    }

    /// When nothing of this limit is left: the later of the state's expiry and the lock.
    pub fn expires_at_ms(&self) -> u64 {
        let state = if self.state == State::Empty {
            0
        } else {
            self.state_expires_ms
        };
        state.max(self.lock_until_ms)
    }

    /// Whether the store must keep it at `now`.
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.expires_at_ms() > now_ms
    }
}
