//! [`decide_with_view`]: one request's decision when the service keeps a [`LocalView`]
//! (a rule may be `batched`, or `--store-failure-mode local` is on). Strict descriptors go
//! to the store as in [`super::decide`]; batched ones are answered by the view when it
//! allows, otherwise sent to the store behind the hits the view holds for them; when the
//! store fails and the fallback is on, every descriptor of the call is decided by the view.
//! Still one store call per request.
//!
//! A call that carries hits written ahead (batched descriptors), or whose descriptors the
//! fallback would decide here if it failed, is sent under an id ([`Store::run_once`]): if it
//! fails, the view holds it, with the hits admitted for each of its checks, and the next
//! write-back sends it again under that id, so whether or not the store ran the first send,
//! every hit is counted once (`local_view/write_back.rs`).
//!
//! Overload, with the fallback: a call that cannot get a timely store answer is decided by
//! the view too, counted apart ([`Why::Overload`]), without making the view degraded (the
//! store is busy, not failing: a dead one is found by its connections' breaker, whose
//! errors do). Two cases:
//! - no time left for a round trip (admission refused the call, or its deadline is spent:
//!   `store::deadline::passed`): nothing is sent, and the hits admitted are pending, written
//!   back by the next batch like any local hit;
//! - the round trip timed out at the caller's deadline: the call was sent under an id and
//!   may still run in Redis. It is held under that id with the hits admitted here, exactly
//!   as a failed call is, so the write-back resends it under the same id: if the original
//!   ran, its own charges stand and the resend only reports; if not, the resend applies the
//!   hits admitted here and fences the original off. Either way each hit is counted once.
//!   The resend is skipped when the store knows the call's fate ([`Store::fate`]: the
//!   connection saw it run, or dropped it unsent), as under overload it mostly does.

use std::sync::Arc;

use super::local_view::{Answer, Asked, Held, Keep, Local, LocalView, Why};
use super::{Decision, Modes, OverLimitCache, Plan, compose};
use crate::limit::{Charge, Check, LimitResult, LimitSpec};
use crate::store::{CallId, Store, StoreError, deadline};

/// How one metered descriptor is answered.
enum Via {
    /// From memory (the over-limit cache, or the view): its results.
    Memory {
        results: Vec<LimitResult>,
        cache: bool,
    },
    /// By the store, behind `carry` hits of its own written back first.
    Store { carry: u64 },
}

/// A request call under an id, while it is in flight. Dropped there (the caller's deadline
/// passed, the client went away: the request's future is dropped mid-call), it holds the
/// call as a failed one is held: its carried hits sent again under its id, its checks with
/// none (nobody was answered), so the call, if the store runs it after all, counts once.
struct Unanswered<'a, 'm> {
    view: &'a LocalView,
    id: Option<CallId>,
    metered: &'a [(usize, &'a super::Metered<'m>)],
    via: &'a [Via],
    forced: &'a [Option<Arc<[LimitSpec]>>],
}

impl Drop for Unanswered<'_, '_> {
    fn drop(&mut self) {
        let Some(id) = self.id else {
            return;
        };
        let mut held = Vec::new();
        for (((_, m), v), f) in self.metered.iter().zip(self.via).zip(self.forced) {
            if let Via::Store { carry } = v {
                if let Some(f) = f {
                    held.push(Held {
                        tag: m.tag,
                        limits: f.clone(),
                        hits: *carry,
                    });
                }
                held.push(Held {
                    tag: m.tag,
                    limits: self.view.forced_limits(m.tag, m.limits.as_slice()),
                    hits: 0,
                });
            }
        }
        self.view.hold(id, held);
    }
}

/// Decide a request with the local view. `batched[i]` says whether `plans[i]` is decided in
/// batched mode.
pub async fn decide_with_view<S: Store + ?Sized>(
    store: &S,
    cache: Option<&OverLimitCache>,
    view: &LocalView,
    batched: &[bool],
    plans: &[Plan<'_>],
    modes: Modes,
) -> Result<Decision, StoreError> {
    let metered: Vec<(usize, &super::Metered<'_>)> = plans
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Plan::Metered(m) => Some((i, m)),
            _ => None,
        })
        .collect();
    let is_batched = |i: usize| batched.get(i).copied().unwrap_or(false);
    let fallback = view.options().fallback;
    // Degraded: every descriptor here until the store answers again. No time left for a
    // round trip (see the module documentation): nothing is sent, the hits wait as pending.
    let why = if view.degraded() {
        Some(Why::StoreFailure)
    } else if fallback && deadline::passed() {
        Some(Why::Overload)
    } else {
        None
    };
    if let Some(why) = why {
        let mut results = Vec::new();
        for (_, m) in &metered {
            let limits = m.limits.as_slice();
            view.fallback(m.tag, limits, m.cost, m.refund, Keep::Pending, &mut results);
        }
        view.count_fallback(why, metered.len());
        let mut decision = compose(plans, results, modes);
        decision.skipped_store = !metered.is_empty();
        return Ok(decision);
    }
    let now = cache.map(OverLimitCache::now_ms).unwrap_or_default();
    let mut via: Vec<Via> = Vec::with_capacity(metered.len());
    for &(i, m) in &metered {
        let limits = m.limits.as_slice();
        if m.refund {
            if let Some(c) = cache {
                c.forget(m.tag);
            }
            via.push(Via::Store { carry: 0 });
            continue;
        }
        if let Some(c) = cache {
            let mut r = Vec::new();
            if c.lookup(m.tag, limits, m.cost, now, &mut r) {
                via.push(Via::Memory {
                    results: r,
                    cache: true,
                });
                continue;
            }
        }
        if is_batched(i) {
            let mut r = Vec::with_capacity(limits.len());
            // With stop-increment the carried hits would go uncharged beside a denial.
            match view.batched(m.tag, limits, m.cost, !modes.stop_increment, &mut r) {
                Local::Answered => via.push(Via::Memory {
                    results: r,
                    cache: false,
                }),
                Local::Store { carry } => via.push(Via::Store { carry }),
            }
            continue;
        }
        via.push(Via::Store { carry: 0 });
    }
    let any_denied_here = via.iter().any(|v| match v {
        Via::Memory { results, .. } => results.iter().any(|r| !r.allowed),
        Via::Store { .. } => false,
    });
    // The write-backs' limits, owned for the call.
    let forced: Vec<Option<Arc<[LimitSpec]>>> = metered
        .iter()
        .zip(&via)
        .map(|((_, m), v)| match v {
            Via::Store { carry } if *carry > 0 => {
                Some(view.forced_limits(m.tag, m.limits.as_slice()))
            }
            _ => None,
        })
        .collect();
    let mut checks: Vec<Check<'_>> = Vec::new();
    for (((_, m), v), f) in metered.iter().zip(&via).zip(&forced) {
        if let Via::Store { carry } = v {
            if let Some(f) = f {
                checks.push(Check {
                    tag: m.tag,
                    limits: f,
                    cost: *carry,
                    refund: false,
                });
            }
            checks.push(Check {
                tag: m.tag,
                limits: m.limits.as_slice(),
                cost: m.cost,
                refund: m.refund,
            });
        }
    }
    let charge = match (modes.stop_increment, any_denied_here) {
        (false, _) => Charge::Each,
        (true, false) => Charge::StopWhenOver,
        (true, true) => Charge::Held,
    };
    let sent_len: usize = checks.iter().map(|c| c.limits.len()).sum();
    let mut fresh = Vec::with_capacity(sent_len);
    let seq = view.next_seq();
    let sent = view.now_ms();
    // An id when a failure would leave hits to send again: carried ones, or the fallback's.
    let id = (view.options().fallback || forced.iter().any(Option::is_some)).then(CallId::fresh);
    let unanswered = Unanswered {
        view,
        id: id.filter(|_| !checks.is_empty()),
        metered: &metered,
        via: &via,
        forced: &forced,
    };
    let outcome = match id {
        _ if checks.is_empty() => Ok(()),
        Some(id) => store.run_once(&checks, charge, id, &mut fresh).await,
        None => store.run_with(&checks, charge, &mut fresh).await,
    };
    // Answered (or failed): the caller is still here.
    std::mem::forget(unanswered);
    let outcome = outcome.and_then(|()| {
        if fresh.len() == sent_len {
            Ok(())
        } else {
            Err(StoreError::Backend(
                format!(
                    "store returned {} results for {sent_len} limits",
                    fresh.len()
                )
                .into(),
            ))
        }
    });
    if let Err(e) = outcome {
        // A timeout at the caller's deadline says the store is busy (or this process is);
        // a dead store is the breaker's to find, and its errors make the view degraded.
        let why = if e.kind() == "timeout" && deadline::is_callers() {
            Why::Overload
        } else {
            Why::StoreFailure
        };
        if fallback && why == Why::StoreFailure {
            view.enter_degraded(&e);
        }
        // The call as it was sent, each check with the hits admitted for it: its carried
        // hits, then what the fallback admits now (nothing without it).
        let mut held = Vec::with_capacity(checks.len());
        let mut results = Vec::new();
        for (((_, m), v), f) in metered.iter().zip(via).zip(&forced) {
            match v {
                Via::Memory { results: r, .. } => results.extend(r),
                Via::Store { carry } => {
                    if let Some(f) = f {
                        held.push(Held {
                            tag: m.tag,
                            limits: f.clone(),
                            hits: carry,
                        });
                    }
                    let limits = m.limits.as_slice();
                    // In flight: held under the call's id below, never pending, so the
                    // write-back sends them only with that id (counted once).
                    let hits = if fallback {
                        view.count_fallback(why, 1);
                        view.fallback(m.tag, limits, m.cost, m.refund, Keep::InCall, &mut results)
                    } else {
                        0
                    };
                    held.push(Held {
                        tag: m.tag,
                        limits: view.forced_limits(m.tag, limits),
                        hits,
                    });
                }
            }
        }
        if let Some(id) = id {
            view.hold(id, held);
        }
        if !fallback {
            return Err(e);
        }
        let mut decision = compose(plans, results, modes);
        decision.store_failure = Some((&e).into());
        return Ok(decision);
    }
    if !checks.is_empty() {
        view.observe_latency(view.now_ms().saturating_sub(sent));
    }
    let keep_strict = view.options().fallback;
    let mut results =
        Vec::with_capacity(metered.iter().map(|(_, m)| m.limits.as_slice().len()).sum());
    let mut from_memory = Vec::with_capacity(metered.len());
    let mut at = 0;
    for (((i, m), v), f) in metered.iter().zip(via).zip(&forced) {
        let limits = m.limits.as_slice();
        match v {
            Via::Memory { results: r, cache } => {
                results.extend(r);
                from_memory.push(cache);
            }
            Via::Store { carry } => {
                if let Some(f) = f {
                    view.landed(m.tag, carry);
                    view.record(&Answer {
                        tag: m.tag,
                        limits: f,
                        results: &fresh[at..at + f.len()],
                        seq,
                        sent_ms: sent,
                        asked: Asked::WriteBack,
                    });
                    at += f.len();
                }
                let r = &fresh[at..at + limits.len()];
                at += limits.len();
                if is_batched(*i) || keep_strict {
                    view.record(&Answer {
                        tag: m.tag,
                        limits,
                        results: r,
                        seq,
                        sent_ms: sent,
                        asked: Asked::Check {
                            cost: if m.refund { 0 } else { m.cost },
                            keep_new: true,
                        },
                    });
                }
                if let Some(c) = cache
                    && !m.refund
                    && !is_batched(*i)
                {
                    c.insert(m.tag, limits, m.cost, now, r);
                }
                results.extend_from_slice(r);
                from_memory.push(false);
            }
        }
    }
    let mut decision = compose(plans, results, modes);
    let verdicts = decision.outcomes.iter_mut().filter_map(|o| match o {
        super::Outcome::Metered(v) => Some(v),
        _ => None,
    });
    for (v, c) in verdicts.zip(from_memory) {
        v.cached = c;
    }
    Ok(decision)
}
