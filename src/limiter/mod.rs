//! One request's decision: every metered descriptor answered by the store in one call, or
//! from memory, then envoyproxy/ratelimit's status rules (per-rule shadow mode, quota mode,
//! overall code, global shadow mode).
//!
//! Vocabulary, in the order a request meets it:
//! - [`Plan`]: what one descriptor asks for after matching: no limit, unlimited, or
//!   [`Metered`] (held to a [`LimitSet`] with a state tag and a cost).
//! - [`Outcome`]: what was decided for one descriptor; a metered one carries a [`Verdict`]
//!   (code, remaining, duration, which limit is reported).
//! - [`Decision`]: the whole request: every outcome, the store's raw results, the overall
//!   [`Code`].
//!
//! The limiter does no I/O except through [`Store`]. [`decide()`] answers each descriptor from
//! a source: the local over-limit cache ([`local_cache`]: descriptors known to be over their
//! limit), the local view ([`local_view`]: `batched` descriptors, and the store-failure
//! fallback), else the store, in one call.

use std::ops::Range;

use crate::limit::{Algorithm, LimitResult, LimitSpec, StateTag};
use crate::store::{Call, Store, StoreError};

mod decide;
pub mod local_cache;
pub mod local_view;
pub use decide::{Sources, decide};
pub use local_cache::OverLimitCache;
pub use local_view::{DegradedObserver, LocalView, ViewOptions, Why};

/// The limits a metered descriptor is held to, and where they came from.
#[derive(Clone, Debug)]
pub enum LimitSet<'a> {
    /// From a rule of the loaded config.
    Rule(&'a [LimitSpec]),
    /// From the request's `limit` override (a fixed window).
    Override(LimitSpec),
}

impl LimitSet<'_> {
    pub fn as_slice(&self) -> &[LimitSpec] {
        match self {
            LimitSet::Rule(l) => l,
            LimitSet::Override(l) => std::slice::from_ref(l),
        }
    }
}

/// What one request descriptor asks for, after matching.
#[derive(Clone, Debug)]
pub enum Plan<'a> {
    /// No rule (unknown domain, no match, or replaced): a bare OK.
    NoLimit,
    /// An `unlimited` rule: OK with `limit_remaining` = u32::MAX, nothing counted.
    Unlimited,
    Metered(Metered<'a>),
}

/// A descriptor held to limits: which state to charge, how much, and how to report it.
#[derive(Clone, Debug)]
pub struct Metered<'a> {
    pub limits: LimitSet<'a>,
    pub tag: StateTag,
    pub cost: u64,
    pub refund: bool,
    /// Per-rule `shadow_mode`: OVER_LIMIT is reported as OK (still counted).
    pub shadow: bool,
    /// Per-rule `quota_mode` (or global quota mode).
    pub quota: bool,
    /// With `--redis-reference-keys`: envoyproxy/ratelimit's cache key of the descriptor,
    /// without prefix and window start (see [`Call::keys`]); `None` otherwise.
    pub reference_key: Option<Box<[u8]>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Ok,
    OverLimit,
}

/// What was decided for one descriptor (mirrors its [`Plan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    NoLimit,
    Unlimited,
    Metered(Verdict),
}

/// The decision for one metered descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Code after the per-rule shadow rewrite.
    pub code: Code,
    /// The store said OVER_LIMIT (before the shadow rewrite).
    pub over_limit: bool,
    /// Shadow mode turned OVER_LIMIT into OK.
    pub shadowed: bool,
    /// Index (within the plan's limits) of the limit the status reports: the first denying
    /// one, else the binding one (least remaining; on a tie, the longest reset).
    pub reported: usize,
    /// `limit_remaining` (0 when OVER_LIMIT), exact (the response clamps it to the
    /// protocol's `uint32`; decision metadata carries this).
    pub remaining: u64,
    /// `duration_until_reset` in milliseconds (whole seconds for fixed windows): when OVER_LIMIT
    /// the longest wait among the denying limits, else the reported limit's reset; never
    /// above [`MAX_DURATION_MS`].
    pub duration_ms: u64,
    /// This descriptor's results in [`Decision::results`].
    pub results: Range<usize>,
    /// Answered from the local over-limit cache, without the store.
    pub cached: bool,
}

/// The decision for a whole request.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    pub overall: Option<Code>,
    /// One per request descriptor, in request order.
    pub outcomes: Vec<Outcome>,
    /// Every limit's store result, in plan order (see `Verdict::results`).
    pub results: Vec<LimitResult>,
    /// Global shadow mode turned the overall OVER_LIMIT into OK.
    pub global_shadowed: bool,
    /// The store call failed and the fallback decided instead: what failed, for the store
    /// error metrics (the labels a failed request would have counted).
    pub store_failure: Option<StoreFailure>,
    /// Decided without a store round trip although descriptors were metered (the fallback
    /// decided them all: the store is down, or the call had no time left for it), so there
    /// is no round trip to measure.
    pub skipped_store: bool,
}

/// A store failure the fallback answered for ([`Decision::store_failure`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreFailure {
    /// [`StoreError::store`]: the store that failed when not the configured one.
    pub store: Option<&'static str>,
    /// [`StoreError::kind`].
    pub kind: &'static str,
}

impl From<&StoreError> for StoreFailure {
    fn from(e: &StoreError) -> StoreFailure {
        StoreFailure {
            store: e.store(),
            kind: e.kind(),
        }
    }
}

impl Decision {
    pub fn overall(&self) -> Code {
        self.overall.unwrap_or(Code::Ok)
    }
}

/// Request-wide modes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Modes {
    pub global_shadow: bool,
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`: when any descriptor of the request is over
    /// its limit, no other descriptor of it is charged ([`Charge::StopWhenOver`](crate::limit::Charge::StopWhenOver)).
    pub stop_increment: bool,
}

/// `store.run(call)`, its results counted: a store that answers another number than one
/// per limit has failed (a partial answer cannot be matched to its checks).
pub(crate) async fn run_counted<S: Store + ?Sized>(
    store: &S,
    call: &Call<'_>,
    out: &mut Vec<LimitResult>,
) -> Result<(), StoreError> {
    let first = out.len();
    store.run(call, out).await?;
    let (got, want) = (out.len() - first, call.results());
    if got != want {
        return Err(StoreError::Backend(
            format!("store returned {got} results for {want} limits").into(),
        ));
    }
    Ok(())
}

/// Turn store results into outcomes and the overall code. Pure; tested directly.
pub fn compose(plans: &[Plan<'_>], results: Vec<LimitResult>, modes: Modes) -> Decision {
    let mut outcomes = Vec::with_capacity(plans.len());
    let mut at = 0;
    let mut any_over = false;
    let mut quota_seen = false;
    let mut all_quota_over = true;
    for plan in plans {
        let status = match plan {
            Plan::NoLimit => Outcome::NoLimit,
            Plan::Unlimited => Outcome::Unlimited,
            Plan::Metered(l) => {
                let limits = l.limits.as_slice();
                let range = at..at + limits.len();
                at += limits.len();
                let s = limited_status(limits, &results[range.clone()], range, l);
                if l.quota {
                    quota_seen = true;
                    all_quota_over &= s.code == Code::OverLimit;
                } else if s.code == Code::OverLimit {
                    any_over = true;
                }
                Outcome::Metered(s)
            }
        };
        outcomes.push(status);
    }
    // Their quota mode: quota descriptors only deny together.
    let over = any_over || (quota_seen && all_quota_over);
    let global_shadowed = over && modes.global_shadow;
    Decision {
        overall: Some(if over && !global_shadowed {
            Code::OverLimit
        } else {
            Code::Ok
        }),
        outcomes,
        results,
        global_shadowed,
        store_failure: None,
        skipped_store: false,
    }
}

fn limited_status(
    limits: &[LimitSpec],
    results: &[LimitResult],
    range: Range<usize>,
    plan: &Metered<'_>,
) -> Verdict {
    let denied = !plan.refund && results.iter().any(|r| !r.allowed);
    let (reported, duration_ms) = if denied {
        // The status names the first denying limit, but the hit can pass only once every
        // denying limit lets it: the wait is the longest among them (penalties included).
        // Allowing limits were not charged (all-or-nothing) and only recover meanwhile.
        let first = results.iter().position(|r| !r.allowed).unwrap_or(0);
        let wait = limits
            .iter()
            .zip(results)
            .filter(|(_, r)| !r.allowed)
            // "Never" (cost above capacity): the time until the limit is fully replenished.
            .map(|(l, r)| reported_ms(l, r.retry_ms.unwrap_or(r.reset_ms)))
            .max()
            .unwrap_or(0);
        (first, wait)
    } else {
        // The binding limit: least remaining; on a tie the one that takes longest to
        // reset (the first of equals wins).
        let mut best = 0;
        for (i, r) in results.iter().enumerate().skip(1) {
            let b = &results[best];
            let longer =
                reported_ms(&limits[i], r.reset_ms) > reported_ms(&limits[best], b.reset_ms);
            if r.remaining < b.remaining || (r.remaining == b.remaining && longer) {
                best = i;
            }
        }
        (best, reported_ms(&limits[best], results[best].reset_ms))
    };
    let r = results[reported];
    let shadowed = denied && plan.shadow;
    Verdict {
        code: if denied && !shadowed {
            Code::OverLimit
        } else {
            Code::Ok
        },
        over_limit: denied,
        shadowed,
        reported,
        remaining: if denied { 0 } else { r.remaining },
        duration_ms,
        results: range,
        cached: false,
    }
}

/// Largest `duration_until_reset` a response can carry: protobuf `Duration`'s range
/// (315 576 000 000 s, 10 000 years). An overdrafted bucket can owe more than that.
pub const MAX_DURATION_MS: u64 = 315_576_000_000_000;

/// A store duration as reported: whole seconds for `fixed_window` (their value,
/// `unit − now % unit`), milliseconds otherwise; clamped to [`MAX_DURATION_MS`].
fn reported_ms(limit: &LimitSpec, raw_ms: u64) -> u64 {
    let ms = if limit.algorithm == Algorithm::FixedWindow {
        raw_ms.div_ceil(1000).saturating_mul(1000)
    } else {
        raw_ms
    };
    ms.min(MAX_DURATION_MS)
}

#[cfg(test)]
mod tests;
