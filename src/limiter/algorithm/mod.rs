//! Native (in-process) implementations of every algorithm and of the check protocol; the
//! contract is `docs/algorithms.md`, which the Redis Lua scripts implement too, so this code
//! follows it literally (same integer arithmetic, rounding, clamps and order).
//!
//! One file per algorithm holds its state type and formulas; `token_bucket`, `leaky_bucket`
//! and `gcra` share their decision arithmetic through [`scaled::Level`]. This file holds the
//! per-limit state the memory store keeps ([`LimitState`]) and [`evaluate`], the whole check
//! protocol (load, penalty, decide, all-or-nothing charge with overdraft, lock, save,
//! report) over the states of one check. Nothing here reads a clock, locks or does I/O:
//! `now_ms` is passed in, and the common path does not allocate.

pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
pub mod scaled;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;

#[cfg(test)]
mod tests;

pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use leaky_bucket::LeakyBucket;
pub use scaled::Level;
pub use sliding_log::SlidingLog;
pub use sliding_window::{Geometry, SlidingWindow};
pub use token_bucket::TokenBucket;

use super::{Algorithm, BUCKETS_RANGE, Check, LimitResult, LimitSpec, MAX_EXACT_SCALED};

/// Largest usage any state holds (`2^53`, in requests or scaled units): overdraft charges
/// saturate here so every value stays exact in Lua's doubles.
pub const USAGE_MAX: u64 = MAX_EXACT_SCALED;

/// The numbers of one [`LimitSpec`] as the doc names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// `R`: requests per unit (refill / leak rate in scaled units per ms).
    pub r: u64,
    /// `W`: the unit in ms.
    pub w: u64,
    /// `C`: capacity.
    pub c: u64,
    /// `B`: sub-windows of a `sliding_window` (clamped to [`BUCKETS_RANGE`]), else 0.
    pub b: u64,
    /// `Cs = C·W`.
    pub cs: u128,
}

impl Params {
    pub fn new(spec: &LimitSpec) -> Params {
        let w = spec.unit.millis();
        let c = spec.capacity();
        let b = if spec.algorithm == Algorithm::SlidingWindow {
            u64::from(
                spec.buckets
                    .clamp(*BUCKETS_RANGE.start(), *BUCKETS_RANGE.end()),
            )
        } else {
            0
        };
        Params {
            r: u64::from(spec.requests_per_unit),
            w,
            c,
            b,
            cs: u128::from(c) * u128::from(w),
        }
    }

    pub fn geometry(&self) -> Geometry {
        Geometry {
            w: self.w,
            b: self.b,
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
    /// When nothing of this limit is left: the later of the state's expiry and the lock.
    pub fn expires_at_ms(&self) -> u64 {
        let state = match self.state {
            State::Empty => 0,
            _ => self.state_expires_ms,
        };
        state.max(self.lock_until_ms)
    }

    /// Whether the store must keep it at `now`.
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.expires_at_ms() > now_ms
    }
}

/// The stored state of the wanted variant if it has not expired.
macro_rules! stored {
    ($st:expr, $now:expr, $variant:ident) => {
        match &$st.state {
            State::$variant(s) if $st.state_expires_ms > $now => Some(s),
            _ => None,
        }
    };
}

/// A limit after step 1. `Copy`: the deque algorithms keep a view into the stored state.
#[derive(Clone, Copy, Debug)]
enum Loaded {
    Fixed(FixedWindow),
    SlidingWindow(sliding_window::View),
    SlidingLog(sliding_log::View),
    Level(Level),
    /// A bucket algorithm with `R = 0`: no state, capacity 0 (only peeks are admitted).
    Inert,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Charge(u64),
    Refund(u64),
}

/// Step 1: load and bring to `now`, without changing anything.
fn load(spec: &LimitSpec, p: &Params, st: &LimitState, now: u64) -> Loaded {
    match spec.algorithm {
        Algorithm::FixedWindow => {
            Loaded::Fixed(FixedWindow::load(stored!(st, now, FixedWindow), p.w, now))
        }
        Algorithm::SlidingWindow => {
            let g = p.geometry();
            Loaded::SlidingWindow(match stored!(st, now, SlidingWindow) {
                Some(s) => s.view(&g, now),
                None => SlidingWindow::default().view(&g, now),
            })
        }
        Algorithm::SlidingLog => Loaded::SlidingLog(match stored!(st, now, SlidingLog) {
            Some(s) => s.view(p.w, now),
            None => SlidingLog::default().view(p.w, now),
        }),
        _ if p.r == 0 => Loaded::Inert,
        Algorithm::TokenBucket => {
            Loaded::Level(TokenBucket::load(stored!(st, now, TokenBucket), p, now))
        }
        Algorithm::LeakyBucket => {
            Loaded::Level(LeakyBucket::load(stored!(st, now, LeakyBucket), p, now))
        }
        Algorithm::Gcra => Loaded::Level(Gcra::load(stored!(st, now, Gcra), p, now)),
    }
}

impl Loaded {
    /// `used_before`: `U` rounded up to whole requests.
    fn used(&self, p: &Params) -> u64 {
        match self {
            Loaded::Fixed(f) => f.c,
            Loaded::SlidingWindow(v) => v.usage,
            Loaded::SlidingLog(v) => v.usage,
            Loaded::Level(l) => l.used(p),
            Loaded::Inert => 0,
        }
    }

    /// Step 3: `U + n ≤ C`.
    fn fits(&self, n: u64, p: &Params) -> bool {
        let within = |u: u64| u128::from(u) + u128::from(n) <= u128::from(p.c);
        match self {
            Loaded::Fixed(f) => f.fits(n, p.c),
            Loaded::SlidingWindow(v) => within(v.usage),
            Loaded::SlidingLog(v) => within(v.usage),
            Loaded::Level(l) => l.fits(n, p),
            Loaded::Inert => n == 0,
        }
    }

    /// `remaining` of an admitted hit: `max(0, C − U_after)`.
    fn remaining(&self, p: &Params) -> u64 {
        match self {
            Loaded::Fixed(f) => f.remaining(p.c),
            Loaded::SlidingWindow(v) => p.c.saturating_sub(v.usage),
            Loaded::SlidingLog(v) => p.c.saturating_sub(v.usage),
            Loaded::Level(l) => l.remaining(p),
            Loaded::Inert => 0,
        }
    }

    fn reset_ms(&self, st: &LimitState, p: &Params, now: u64) -> u64 {
        match self {
            Loaded::Fixed(f) => f.until_end_ms(p.w, now),
            Loaded::SlidingWindow(v) => {
                stored!(st, now, SlidingWindow).map_or(0, |s| s.reset_ms(v, &p.geometry(), now))
            }
            Loaded::SlidingLog(v) => {
                stored!(st, now, SlidingLog).map_or(0, |s| s.reset_ms(v, p.w, now))
            }
            Loaded::Level(l) => l.reset_ms(p),
            Loaded::Inert => 0,
        }
    }

    /// A denied, unpenalized hit: when it would be allowed (`None`: never).
    fn retry_ms(&self, st: &LimitState, n: u64, p: &Params, now: u64) -> Option<u64> {
        match self {
            Loaded::Fixed(f) => Some(f.until_end_ms(p.w, now)),
            Loaded::SlidingWindow(v) => match stored!(st, now, SlidingWindow) {
                Some(s) => s.retry_ms(v, n, p.c, &p.geometry(), now),
                None => SlidingWindow::default().retry_ms(v, n, p.c, &p.geometry(), now),
            },
            Loaded::SlidingLog(v) => match stored!(st, now, SlidingLog) {
                Some(s) => s.retry_ms(v, n, p.c, p.w, now),
                None => SlidingLog::default().retry_ms(v, n, p.c, p.w, now),
            },
            Loaded::Level(l) => l.retry_ms(n, p),
            Loaded::Inert => None,
        }
    }
}

/// Steps 4 and 6 for one limit: apply `op` and write the state (with its expiry) back.
/// Returns the limit as loaded after the change, for the report.
fn commit(
    spec: &LimitSpec,
    p: &Params,
    st: &mut LimitState,
    loaded: Loaded,
    op: Op,
    now: u64,
) -> Loaded {
    let (state, expires, after) = match loaded {
        Loaded::Fixed(mut f) => {
            match op {
                Op::Charge(n) => f.charge(n),
                Op::Refund(n) => f.refund(n),
            }
            (State::FixedWindow(f), f.end_ms(p.w), Loaded::Fixed(f))
        }
        Loaded::SlidingWindow(v) => {
            // An expired or missing state was viewed as empty: start from empty.
            let mut s = match std::mem::take(&mut st.state) {
                State::SlidingWindow(s) if st.state_expires_ms > now => s,
                _ => SlidingWindow::default(),
            };
            match op {
                Op::Charge(n) => s.charge(&v, n),
                Op::Refund(n) => s.refund(&v, n),
            }
            let g = p.geometry();
            let v = s.view(&g, now);
            let expires = now.saturating_add(s.reset_ms(&v, &g, now));
            let state = if s.is_empty() {
                State::Empty
            } else {
                State::SlidingWindow(s)
            };
            (state, expires, Loaded::SlidingWindow(v))
        }
        Loaded::SlidingLog(v) => {
            let mut s = match std::mem::take(&mut st.state) {
                State::SlidingLog(s) if st.state_expires_ms > now => s,
                _ => SlidingLog::default(),
            };
            match op {
                Op::Charge(n) => s.charge(&v, n, now),
                Op::Refund(n) => s.refund(&v, n),
            }
            let v = s.view(p.w, now);
            let expires = now.saturating_add(s.reset_ms(&v, p.w, now));
            let state = if s.is_empty() {
                State::Empty
            } else {
                State::SlidingLog(s)
            };
            (state, expires, Loaded::SlidingLog(v))
        }
        Loaded::Level(mut l) => {
            match op {
                Op::Charge(n) => l.charge(n, p),
                Op::Refund(n) => l.refund(n, p),
            }
            let state = match spec.algorithm {
                Algorithm::TokenBucket => TokenBucket::save(&l, p, now).map(State::TokenBucket),
                Algorithm::LeakyBucket => LeakyBucket::save(&l, now).map(State::LeakyBucket),
                _ => Gcra::save(&l, p, now).map(State::Gcra),
            };
            (
                state.unwrap_or_default(),
                l.expires_at(p, now),
                Loaded::Level(l),
            )
        }
        Loaded::Inert => return Loaded::Inert,
    };
    st.state = state;
    st.state_expires_ms = expires;
    after
}

/// Steps 1–3 for one limit: `(loaded, penalized, ok)`.
fn decide(spec: &LimitSpec, p: &Params, st: &LimitState, n: u64, now: u64) -> (Loaded, bool, bool) {
    let loaded = load(spec, p, st, now);
    let penalized = spec.penalty_ms > 0 && st.lock_until_ms > now;
    let ok = !penalized && loaded.fits(n, p);
    (loaded, penalized, ok)
}

/// What the other limits of the check decided: `(all_ok, any_penalized)`.
type Verdict = (bool, bool);

fn hit(
    spec: &LimitSpec,
    st: &mut LimitState,
    n: u64,
    now: u64,
    verdict: Option<Verdict>,
) -> LimitResult {
    let p = Params::new(spec);
    let (loaded, penalized, ok) = decide(spec, &p, st, n, now);
    let (all_ok, any_penalized) = verdict.unwrap_or((ok, penalized));
    let acts = n > 0 && !any_penalized;
    let after = if acts && (all_ok || spec.overdraft) {
        commit(spec, &p, st, loaded, Op::Charge(n), now)
    } else {
        loaded
    };
    let locks = acts && !all_ok && !ok && spec.penalty_ms > 0;
    if locks {
        st.lock_until_ms = now.saturating_add(spec.penalty_ms);
    }
    let retry_ms = if ok {
        None
    } else if penalized {
        Some(st.lock_until_ms.saturating_sub(now))
    } else {
        // A lock stretches a finite retry; "never" stays never.
        let retry = after.retry_ms(st, n, &p, now);
        if locks {
            retry.map(|r| r.max(spec.penalty_ms))
        } else {
            retry
        }
    };
    LimitResult {
        allowed: ok,
        remaining: if ok { after.remaining(&p) } else { 0 },
        reset_ms: after.reset_ms(st, &p, now),
        retry_ms,
        used_before: loaded.used(&p),
        penalized,
    }
}

fn refund(spec: &LimitSpec, st: &mut LimitState, n: u64, now: u64) -> LimitResult {
    let p = Params::new(spec);
    let loaded = load(spec, &p, st, now);
    let after = if n > 0 {
        commit(spec, &p, st, loaded, Op::Refund(n), now)
    } else {
        loaded
    };
    LimitResult {
        allowed: true,
        remaining: after.remaining(&p),
        reset_ms: after.reset_ms(st, &p, now),
        retry_ms: None,
        used_before: loaded.used(&p),
        penalized: false,
    }
}

/// Evaluates one check at `now_ms` (docs/algorithms.md, "One check"), appending one result
/// per limit to `out`. `states[i]` is the state of `check.limits[i]` (`LimitState::default()`
/// when missing) and is updated in place; afterwards the caller keeps those that are
/// [`LimitState::is_live`] and drops the others. Limits beyond `states.len()` are ignored,
/// so pass exactly one state per limit. Must run atomically with respect to other checks
/// on the same states (the memory store holds the shard lock).
pub fn evaluate(
    check: &Check<'_>,
    now_ms: u64,
    states: &mut [LimitState],
    out: &mut Vec<LimitResult>,
) {
    let n = check.cost;
    if check.refund {
        let limits = check.limits.iter().zip(states.iter_mut());
        out.extend(limits.map(|(spec, st)| refund(spec, st, n, now_ms)));
        return;
    }
    // With one limit its own decision is the check's; otherwise a read-only first pass
    // (loading is pure) learns whether every limit admits before anything is charged.
    let verdict = (check.limits.len() > 1).then(|| {
        check
            .limits
            .iter()
            .zip(states.iter())
            .fold((true, false), |(all, pen), (spec, st)| {
                let (_, penalized, ok) = decide(spec, &Params::new(spec), st, n, now_ms);
                (all && ok, pen || penalized)
            })
    });
    let limits = check.limits.iter().zip(states.iter_mut());
    out.extend(limits.map(|(spec, st)| hit(spec, st, n, now_ms, verdict)));
}
