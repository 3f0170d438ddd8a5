//! The check protocol of docs/explanation/algorithms.md ("One check") over the native states:
//! [`evaluate`] loads every limit (read-only), applies penalties, decides, charges all or
//! nothing (honoring each limit's `overdraft`), locks, saves and reports. Per-algorithm
//! arithmetic lives in the algorithm files; this file only dispatches to it.

use super::scaled::Level;
use super::{
    FixedWindow, Gcra, LeakyBucket, LimitState, Params, SlidingLog, SlidingWindow, State,
    TokenBucket, sliding_log, sliding_window,
};
use crate::limit::{Algorithm, Check, LimitResult, LimitSpec};

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
        Algorithm::FixedWindow => Loaded::Fixed(FixedWindow::load(
            stored!(st, now, FixedWindow),
            p.window(now).0,
        )),
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
        Algorithm::TokenBucket | Algorithm::LeakyBucket | Algorithm::Gcra if p.r == 0 => {
            Loaded::Inert
        }
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
            Loaded::Fixed(f) => f.until_end_ms(p, now),
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
            Loaded::Fixed(f) => Some(f.until_end_ms(p, now)),
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
            // A count refunded to 0 is deleted (a charge always leaves `c ≥ 1`). The report
            // still answers this window's end.
            let state = if f.is_empty() {
                State::Empty
            } else {
                State::FixedWindow(f)
            };
            (state, f.end_ms(p, now), Loaded::Fixed(f))
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
                Algorithm::Gcra => Gcra::save(&l, p, now).map(State::Gcra),
                // Only the buckets load a level.
                Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => None,
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
    held: bool,
) -> LimitResult {
    let p = Params::new(spec, now);
    let (loaded, penalized, ok) = decide(spec, &p, st, n, now);
    let (all_ok, any_penalized) = verdict.unwrap_or((ok, penalized));
    // Held (stop-increment, the request has a denial): an admitted check is not charged.
    let acts = n > 0 && !any_penalized && !(held && all_ok);
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
    let p = Params::new(spec, now);
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

/// Evaluates one check at `now_ms` (docs/explanation/algorithms.md, "One check"), appending one result
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
    evaluate_held(check, now_ms, states, false, out);
}

/// [`evaluate`] for a request under stop-increment ([`crate::limit::Charge`]) that has a
/// denied check (`held`): the check is decided and reported as usual, but if it is admitted
/// nothing is charged.
pub fn evaluate_held(
    check: &Check<'_>,
    now_ms: u64,
    states: &mut [LimitState],
    held: bool,
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
                let (_, penalized, ok) = decide(spec, &Params::new(spec, now_ms), st, n, now_ms);
                (all && ok, pen || penalized)
            })
    });
    let limits = check.limits.iter().zip(states.iter_mut());
    out.extend(limits.map(|(spec, st)| hit(spec, st, n, now_ms, verdict, held)));
}

/// Whether `check` would be admitted at `now_ms`, reading only (`states[i]`: the state of
/// `check.limits[i]`, `None` when missing). A refund is always admitted.
pub fn admits<'s>(
    check: &Check<'_>,
    now_ms: u64,
    states: impl Iterator<Item = Option<&'s LimitState>>,
) -> bool {
    if check.refund {
        return true;
    }
    let empty = LimitState::default();
    check.limits.iter().zip(states).all(|(spec, st)| {
        let st = st.unwrap_or(&empty);
        decide(spec, &Params::new(spec, now_ms), st, check.cost, now_ms).2
    })
}
