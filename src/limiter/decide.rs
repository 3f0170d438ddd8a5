//! [`decide`]: one request's decision. Each metered descriptor is answered by a source, in
//! order: the local over-limit cache (a denial it holds), the local view (a `batched`
//! descriptor while its room is large), else the store; every descriptor left for the store
//! goes in ONE call, behind the hits the view holds for it. When that call fails, or cannot
//! be made in time, and the fallback is on (`--store-failure-mode local`), the view answers
//! for the store. Then the status rules ([`compose`]).
//!
//! A call that carries hits written ahead (batched descriptors), or whose descriptors the
//! fallback would decide here if it failed, is sent under an id ([`Ids::Request`]) and held
//! by the view from before it is sent until it is answered ([`LocalView::hold`]): failed
//! or left unanswered, the next write-back sends it again under that id, so whether or not
//! the store ran the first send, every hit is counted once (`local_view/write_back.rs`).
//!
//! Overload, with the fallback: a call that cannot get a timely store answer is decided by
//! the view too, counted apart ([`Why::Overload`]), without making the view degraded (the
//! store is busy, not failing: a dead one is found by its connections' breaker, whose
//! errors do). Two cases:
//! - no time left for a round trip (admission refused the call, or its deadline is spent):
//!   nothing is sent, and the hits admitted are pending, written back by the next batch
//!   like any local hit;
//! - the round trip timed out at the caller's deadline: the call was sent under an id and
//!   may still run in Redis. It is held under that id with the hits admitted here, exactly
//!   as a failed call is, so the write-back resends it under the same id: if the original
//!   ran, its own charges stand and the resend only reports; if not, the resend applies the
//!   hits admitted here and fences the original off. Either way each hit is counted once.
//!   The resend is skipped when the store knows the call's fate (the Redis store's `fate`:
//!   the connection saw it run, or dropped it unsent), as under overload it mostly does.

use std::sync::Arc;
use std::time::Instant;

use super::local_view::{Answer, Asked, Held, Keep, Local, LocalView, Why};
use super::{Decision, Metered, Modes, Outcome, OverLimitCache, Plan, compose, run_counted};
use crate::limit::{Charge, Check, LimitResult, LimitSpec};
use crate::store::{Call, Ids, Store, StoreError};

/// What answers descriptors before the store. Both optional; the view is consulted only
/// when the request has a batched descriptor or the fallback is on.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sources<'a> {
    /// The local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`).
    pub cache: Option<&'a OverLimitCache>,
    /// The local view (batched rules, the store-failure fallback).
    pub view: Option<&'a LocalView>,
    /// `batched[i]`: `plans[i]` is decided in batched mode (missing: strict).
    pub batched: &'a [bool],
}

/// Decide a request: every metered descriptor the `sources` do not answer in one store
/// call, ending by `deadline` (what the caller's deadline leaves for store work; `None`:
/// the store's own timeout), then the status rules.
pub async fn decide<S: Store + ?Sized>(
    store: &S,
    sources: Sources<'_>,
    plans: &[Plan<'_>],
    modes: Modes,
    deadline: Option<Instant>,
) -> Result<Decision, StoreError> {
    let view = sources
        .view
        .filter(|v| v.options().fallback || sources.batched.contains(&true));
    let fallback = view.is_some_and(|v| v.options().fallback);
    let mut r = Request {
        plans,
        modes,
        via: Vec::new(),
        sources,
        now: sources
            .cache
            .map(OverLimitCache::now_ms)
            .unwrap_or_default(),
    };
    if let Some(view) = view {
        // Degraded: every descriptor here until the store answers again. No time left for a
        // round trip: nothing is sent, the hits wait as pending.
        if view.degraded() {
            return Ok(r.all_local(view, Why::StoreFailure));
        }
        if fallback && deadline.is_some_and(|d| d <= Instant::now()) {
            return Ok(r.all_local(view, Why::Overload));
        }
    }
    // Without a cache or a view every descriptor goes to the store: no sources to keep.
    if sources.cache.is_some() || view.is_some() {
        let via = r.metered().map(|(i, m)| r.source(view, i, m));
        r.via = via.collect();
    }
    // The call: each store-bound descriptor's carried hits, then its check.
    let mut checks = Vec::with_capacity(plans.len());
    for (m, carried) in r.store_bound() {
        if let Some(c) = carried {
            checks.push(Check {
                tag: m.tag,
                limits: &c.limits,
                cost: c.hits,
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
    let denied_here = r.via.iter().any(|v| match v {
        Source::Memory { results, .. } => results.iter().any(|r| !r.allowed),
        Source::Store(_) => false,
    });
    // envoyproxy/ratelimit's key of each check, when a descriptor has one.
    let keys: Option<Vec<Option<&[u8]>>> = r
        .metered()
        .any(|(_, m)| m.reference_key.is_some())
        .then(|| {
            let each = r.store_bound().flat_map(|(m, carried)| {
                let carry = carried.map(|_| None);
                carry.into_iter().chain([m.reference_key.as_deref()])
            });
            each.collect()
        });
    // Held under an id when a failure would leave hits to send again: carried ones, or
    // the fallback's.
    let carries = r.store_bound().any(|(_, c)| c.is_some());
    let held = view
        .filter(|_| !checks.is_empty() && (fallback || carries))
        .map(|view| view.hold(r.held(view, std::iter::repeat(0))));
    let call = Call {
        checks: &checks,
        charge: match (modes.stop_increment, denied_here) {
            (false, _) => Charge::Each,
            (true, false) => Charge::StopWhenOver,
            (true, true) => Charge::Held,
        },
        ids: held.as_ref().map_or(Ids::Unnamed, |h| Ids::Request(h.id())),
        deadline,
        keys: keys.as_deref(),
    };
    let sent = view.map(|v| (v, v.next_seq(), v.now_ms()));
    let mut fresh = Vec::with_capacity(call.results());
    let outcome = if checks.is_empty() {
        Ok(())
    } else {
        run_counted(store, &call, &mut fresh).await
    };

    let Some((view, seq, sent_ms)) = sent else {
        outcome?;
        return Ok(r.answered(fresh, None));
    };
    let Err(e) = outcome else {
        if !fresh.is_empty() {
            view.observe_latency(view.now_ms().saturating_sub(sent_ms));
        }
        if let Some(h) = held {
            view.answered(h);
        }
        return Ok(r.answered(fresh, Some((view, seq, sent_ms))));
    };
    // A timeout at the caller's deadline says the store is busy (or this process is); a
    // dead store is the breaker's to find, and its errors make the view degraded.
    let why = if e.kind() == "timeout" && deadline.is_some() {
        Why::Overload
    } else {
        Why::StoreFailure
    };
    if fallback && why == Why::StoreFailure {
        view.enter_degraded(&e);
    }
    let (results, admitted) = r.fallback(view, fallback.then_some(why));
    if let Some(h) = held {
        view.failed(h, r.held(view, admitted.into_iter()));
    }
    if !fallback {
        return Err(e);
    }
    let mut decision = compose(plans, results, modes);
    decision.store_failure = Some((&e).into());
    Ok(decision)
}

/// Where one metered descriptor's answer comes from.
enum Source {
    /// Memory (the over-limit cache, or the view): its results.
    Memory {
        results: Vec<LimitResult>,
        cached: bool,
    },
    /// The store, behind hits of its own the view carries (written back first).
    Store(Option<Carried>),
}

/// Hits admitted by the view, carried ahead of their descriptor's check, and the limits
/// (with `overdraft`) they are charged with.
struct Carried {
    hits: u64,
    limits: Arc<[LimitSpec]>,
}

/// The source of a descriptor when there are no others (no cache, no view).
static STORE: Source = Source::Store(None);

/// One request on its way: its plans and the source of each metered descriptor (none kept
/// when all go to the store).
struct Request<'a, 'p> {
    plans: &'a [Plan<'p>],
    modes: Modes,
    via: Vec<Source>,
    sources: Sources<'a>,
    /// The cache's clock when the request was looked up.
    now: u64,
}

impl<'p> Request<'_, 'p> {
    /// The metered descriptors, with their index among the plans.
    fn metered(&self) -> impl Iterator<Item = (usize, &Metered<'p>)> {
        let plans = self.plans.iter().enumerate();
        plans.filter_map(|(i, p)| match p {
            Plan::Metered(m) => Some((i, m)),
            _ => None,
        })
    }

    /// Each metered descriptor with its index among the plans and its source.
    fn each(&self) -> impl Iterator<Item = (usize, &Metered<'p>, &Source)> {
        let via = self.via.iter().chain(std::iter::repeat(&STORE));
        self.metered().zip(via).map(|((i, m), v)| (i, m, v))
    }

    fn is_batched(&self, i: usize) -> bool {
        self.sources.batched.get(i).copied().unwrap_or(false)
    }

    /// Descriptor `i`'s source: the cache's denial, the view's answer (batched), the store.
    fn source(&self, view: Option<&LocalView>, i: usize, m: &Metered<'_>) -> Source {
        let limits = m.limits.as_slice();
        let cache = self.sources.cache;
        if m.refund {
            if let Some(c) = cache {
                c.forget(m.tag);
            }
            return Source::Store(None);
        }
        let mut results = Vec::new();
        if let Some(c) = cache
            && c.lookup(m.tag, limits, m.cost, self.now, &mut results)
        {
            let cached = true;
            return Source::Memory { results, cached };
        }
        let Some(view) = view.filter(|_| self.is_batched(i)) else {
            return Source::Store(None);
        };
        // With stop-increment the carried hits would go uncharged beside a denial.
        let carry_ok = !self.modes.stop_increment;
        match view.batched(m.tag, limits, m.cost, carry_ok, &mut results) {
            Local::Answered => Source::Memory {
                results,
                cached: false,
            },
            Local::Store { carry: 0 } => Source::Store(None),
            Local::Store { carry } => Source::Store(Some(Carried {
                hits: carry,
                limits: view.forced_limits(m.tag, limits),
            })),
        }
    }

    /// Each metered descriptor decided by the view, nothing sent (the store is down, or
    /// there is no time for it): the hits admitted wait as pending.
    fn all_local(&self, view: &LocalView, why: Why) -> Decision {
        let mut results = Vec::new();
        let mut metered = 0;
        for (_, m) in self.metered() {
            let limits = m.limits.as_slice();
            view.fallback(m.tag, limits, m.cost, m.refund, Keep::Pending, &mut results);
            metered += 1;
        }
        view.count_fallback(why, metered);
        let mut decision = compose(self.plans, results, self.modes);
        decision.skipped_store = metered > 0;
        decision
    }

    /// The store-bound descriptors, with the hits the view carries ahead of each.
    fn store_bound(&self) -> impl Iterator<Item = (&Metered<'_>, Option<&Carried>)> {
        self.each().filter_map(|(_, m, v)| match v {
            Source::Store(carried) => Some((m, carried.as_ref())),
            Source::Memory { .. } => None,
        })
    }

    /// The call's checks as [`LocalView::hold`] takes them: the carried hits, then each
    /// check with the `hits` admitted for it.
    fn held(&self, view: &LocalView, mut hits: impl Iterator<Item = u64>) -> Vec<Held> {
        let mut held = Vec::with_capacity(self.plans.len());
        for (m, carried) in self.store_bound() {
            if let Some(c) = carried {
                let (limits, hits) = (c.limits.clone(), c.hits);
                held.push(Held {
                    tag: m.tag,
                    limits,
                    hits,
                });
            }
            held.push(Held {
                tag: m.tag,
                limits: view.forced_limits(m.tag, m.limits.as_slice()),
                hits: hits.next().unwrap_or(0),
            });
        }
        held
    }

    /// The call failed: every descriptor's results, the store-bound ones decided by the view
    /// when the fallback is on (`why`; in flight: held under the call's id, never pending,
    /// so the write-back sends their hits only with that id), and the hits admitted for
    /// each store-bound descriptor.
    fn fallback(&self, view: &LocalView, why: Option<Why>) -> (Vec<LimitResult>, Vec<u64>) {
        let mut results = Vec::new();
        let mut admitted = Vec::with_capacity(self.plans.len());
        for (_, m, v) in self.each() {
            match (v, why) {
                (Source::Memory { results: r, .. }, _) => results.extend_from_slice(r),
                (Source::Store(_), Some(why)) => {
                    view.count_fallback(why, 1);
                    let (limits, keep) = (m.limits.as_slice(), Keep::InCall);
                    let out = &mut results;
                    admitted.push(view.fallback(m.tag, limits, m.cost, m.refund, keep, out));
                }
                (Source::Store(_), None) => admitted.push(0),
            }
        }
        (results, admitted)
    }

    /// The store answered `fresh` for the call's checks: tell the view (`told`: it, the
    /// call's [`LocalView::next_seq`] and when it was sent) and the cache what they learn,
    /// and compose the decision from every source's results.
    fn answered(self, fresh: Vec<LimitResult>, told: Option<(&LocalView, u64, u64)>) -> Decision {
        // The fallback decides strict descriptors too when the store fails: keep them all.
        let keep_all = told.is_some_and(|(v, ..)| v.options().fallback);
        // In plan order the store's results are, unless memory answered some descriptors or
        // the call carried hits.
        let only_store = self.via.iter().all(|v| matches!(v, Source::Store(None)));
        let mut results = Vec::with_capacity(if only_store { 0 } else { fresh.len() });
        let mut at = 0;
        for (i, m, v) in self.each() {
            let carried = match v {
                Source::Memory { results: r, .. } => {
                    results.extend_from_slice(r);
                    continue;
                }
                Source::Store(carried) => carried,
            };
            if let Some(c) = carried {
                let r = &fresh[at..at + c.limits.len()];
                if let Some((view, seq, sent_ms)) = told {
                    view.landed(m.tag, c.hits);
                    let asked = Asked::WriteBack;
                    let (tag, limits) = (m.tag, &*c.limits);
                    view.record(&Answer {
                        tag,
                        limits,
                        results: r,
                        seq,
                        sent_ms,
                        asked,
                    });
                }
                at += c.limits.len();
            }
            let limits = m.limits.as_slice();
            let r = &fresh[at..at + limits.len()];
            at += limits.len();
            let batched = self.is_batched(i);
            if let Some((view, seq, sent_ms)) = told.filter(|_| keep_all || batched) {
                let cost = if m.refund { 0 } else { m.cost };
                let asked = Asked::Check {
                    cost,
                    keep_new: true,
                };
                view.record(&Answer {
                    tag: m.tag,
                    limits,
                    results: r,
                    seq,
                    sent_ms,
                    asked,
                });
            }
            if let Some(c) = self.sources.cache
                && !m.refund
                && !batched
            {
                c.insert(m.tag, limits, m.cost, self.now, r);
            }
            if !only_store {
                results.extend_from_slice(r);
            }
        }
        let results = if only_store { fresh } else { results };
        let mut decision = compose(self.plans, results, self.modes);
        let verdicts = decision.outcomes.iter_mut().filter_map(|o| match o {
            Outcome::Metered(v) => Some(v),
            _ => None,
        });
        for (v, (_, _, s)) in verdicts.zip(self.each()) {
            v.cached = matches!(s, Source::Memory { cached: true, .. });
        }
        decision
    }
}
