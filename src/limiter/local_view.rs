//! The local view: what this instance knows of each descriptor's global state (the store's
//! last answer) plus the hits it admitted since. It serves two features
//! (`docs/explanation/consistency.md`).
//!
//! Why this file is long: one type whose decisions (batched, fallback) and bookkeeping
//! (answers, carried hits) all read and move the same per-descriptor counts; apart, the rules
//! for pending and in-flight hits would be spread over files. Writing the hits back (ids,
//! resends) is `local_view/write_back.rs`.
//!
//! The two features:
//!
//! - **Batched consistency**: a `batched` descriptor is decided here while its remaining
//!   room is large against what every instance can admit before the next answer; its hits
//!   go to the store in one write-back per interval ([`LocalView::flush`]). Near its limit,
//!   with no fresh answer, or for a descriptor never seen, it is decided by the store again
//!   (its hits not yet written go first, in the same call), so batching costs accuracy only
//!   where there is room to spare. A denial the store gave is kept until its retry time
//!   (the over-limit cache's rule, `local_cache::cacheable_for`).
//! - **Store-failure fallback** (`--store-failure-mode local`): when a store call fails,
//!   every descriptor is decided here (last known state, or a share of the limit for one
//!   never seen), the hits kept and written back when the store answers again.
//!
//! Why local decisions stay within the bound: a descriptor's room `R` (the store's last
//! answer) misses the hits other instances admitted and have not written back, at most
//! `(N−1)·r·2(I+d)` (their hits from one write-back before our answer to now). A decision is
//! local only while `R − p ≥ cost + X`, `X ≈ 2·ĝ·(I+d)` with `ĝ` the descriptor's global rate
//! measured between two answers (every instance's hits) and `d` the store's latency (in
//! full, `X = ĝ·(a + 2(I+d))` with `a` the answer's age, since the unseen hits grow with
//! it): under steady traffic `ĝ ≈ N·r`, so the room covers the unseen hits and nothing is
//! admitted over the limit; a surge from idle can pass it by at most `2(N−1)·r·(I+d)` once.
//!
//! A descriptor's hits are `pending` (admitted here, not sent yet) or `inflight` (sent, in a
//! call whose answer has not come back, or in an unsettled call: see `write_back.rs`); both
//! count against its room.
//!
//! Memory: at most `max_keys` descriptors in all (sharded by tag, `limit::sharded`; the
//! bound is one count over every shard). Past it,
//! new descriptors are decided by the store (batched) or, while the store is down, from the
//! share without keeping their hits (counted in [`ViewStats::overflow`], logged). No I/O
//! except through [`Store`].

mod write_back;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use indexmap::IndexMap;
use parking_lot::Mutex;

use super::local_cache::cacheable_for;
use crate::limit::hash::FoldBuild;
use crate::limit::sharded::Sharded;
use crate::limit::{Algorithm, Clock, LimitResult, LimitSpec, StateTag};
use crate::store::redis::Fate;
use crate::store::{CallId, Store, StoreError};

use write_back::Unsettled;
pub use write_back::{Held, Holding};

const SHARDS: usize = 16;

/// How the view decides; from the settings.
#[derive(Clone, Debug)]
pub struct ViewOptions {
    /// `--batch-interval` in milliseconds.
    pub interval_ms: u64,
    /// `--store-failure-mode local`.
    pub fallback: bool,
    /// `--store-failure-share`: the part of a limit a descriptor never seen gets while the
    /// store is down.
    pub unseen_share: f64,
    /// `--local-view-max-keys`: descriptors held, in all.
    pub max_keys: usize,
}

/// Counters the service publishes as metrics (monotonic unless said otherwise).
#[derive(Debug, Default)]
pub struct ViewStats {
    /// Decisions made here for `batched` descriptors.
    pub batched_decisions: AtomicU64,
    /// Decisions made here because the store failed.
    pub fallback_decisions: AtomicU64,
    /// Decisions made here because the call could not get a timely store answer (overload).
    pub overload_decisions: AtomicU64,
    /// Hits not kept for write-back: the view was full.
    pub overflow: AtomicU64,
    /// Write-backs that succeeded, and hits they carried.
    pub flushes: AtomicU64,
    pub written_back: AtomicU64,
    /// Write-backs that failed (their hits stay for the next one).
    pub flush_errors: AtomicU64,
    /// Calls left unanswered that the store said ran, or were never sent: settled without
    /// being sent again (`write_back.rs`).
    pub settled: AtomicU64,
}

/// Told when decisions go local because the store failed (`true`) and when they go back to
/// the store (`false`), at the moment it happens (the service's gauge and health).
pub type DegradedObserver = Box<dyn Fn(bool) + Send + Sync>;

/// See the module documentation.
pub struct LocalView {
    clock: Arc<dyn Clock>,
    opts: ViewOptions,
    shards: Sharded<Shard>,
    /// Descriptors held over every shard: the one bound of `max_keys`.
    keys: AtomicUsize,
    degraded: AtomicBool,
    observer: OnceLock<DegradedObserver>,
    /// Held while the degraded state changes and the observer is told, so that it is told
    /// the changes in the order they happen (its gauge ends as the state does).
    transition: Mutex<()>,
    /// Orders store answers: an answer older than the state it would replace is dropped.
    seq: AtomicU64,
    /// The store's recent latency, in milliseconds (the `d` of the bound).
    latency_ms: AtomicU64,
    /// Overflow is logged once per degraded period.
    overflow_logged: AtomicBool,
    /// Calls under an id not answered yet: in flight, or whose answer was lost, resent under
    /// their ids (`write_back.rs`). In the order they were held.
    unsettled: Mutex<IndexMap<CallId, Unsettled, FoldBuild>>,
    pub stats: ViewStats,
}

#[derive(Default)]
struct Shard {
    map: HashMap<u128, Key, FoldBuild>,
    /// Tags with hits to write back (may hold tags whose hits have gone since).
    dirty: Vec<u128>,
}

struct Key {
    /// [`LimitSpec::fingerprint`] of the limits, and of `forced` (what write-backs send).
    fingerprint: u64,
    forced_fingerprint: u64,
    /// The limits with `overdraft`: a write-back charges hits that were already admitted.
    forced: Arc<[LimitSpec]>,
    /// Per limit: room after the last answer, and when its usage resets (local ms).
    remaining: Box<[u64]>,
    reset_at: Box<[u64]>,
    /// The store has answered for this descriptor (otherwise `remaining` is a share).
    known: bool,
    seq: u64,
    /// When the call that answered was sent (local ms).
    answered_at: u64,
    /// Hits admitted here and not yet sent, and hits being written back.
    pending: u64,
    inflight: u64,
    dirty: bool,
    /// The previous answer's usage per limit, for the rate.
    sample: Option<(u64, Box<[u64]>)>,
    /// Global hits per millisecond on this descriptor (every instance's), once measured.
    rate: Option<f64>,
    denial: Option<Denial>,
}

/// A denial the store gave, answered here until it ends.
struct Denial {
    until: u64,
    at: u64,
    cost: u64,
    results: Box<[LimitResult]>,
}

/// What the view says about one descriptor.
#[derive(Debug, PartialEq, Eq)]
pub enum Local {
    /// Decided here; its results were appended.
    Answered,
    /// Ask the store. `carry` hits of this descriptor, admitted here, are now in flight:
    /// send them first ([`LocalView::forced_limits`]), in a call held under its id
    /// ([`LocalView::hold`]), and settle them with [`LocalView::landed`] once answered.
    Store { carry: u64 },
}

/// A store answer for one descriptor ([`LocalView::record`]).
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub tag: StateTag,
    /// The limits the store was asked about (a write-back's are the forced ones).
    pub limits: &'a [LimitSpec],
    pub results: &'a [LimitResult],
    /// The call that answered: [`LocalView::next_seq`] when it was sent, and when (local ms).
    pub seq: u64,
    pub sent_ms: u64,
    pub asked: Asked,
}

/// What the store was asked, in an [`Answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// Hits already admitted, written back: the answer refreshes a descriptor kept here.
    WriteBack,
    /// A check of `cost` (0 for a refund, which carries no denial): its denial may be kept,
    /// and with `keep_new` a descriptor not kept yet starts being kept.
    Check { cost: u64, keep_new: bool },
}

/// Why the fallback decides a descriptor ([`LocalView::fallback`]); counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The store failed, or decisions are local since it did (degraded).
    StoreFailure,
    /// The store is busy, not failing: the call could not get a timely answer (admission
    /// refused it, its deadline left no time for a round trip, or the round trip timed out
    /// at that deadline). Does not make the view degraded.
    Overload,
}

/// Where a fallback decision's admitted hits go ([`LocalView::fallback`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Pending: written back by the next write-back.
    Pending,
    /// In flight: the call that failed carries them, settled under its id
    /// ([`LocalView::failed`]).
    InCall,
}

/// When a fresh window of `l` would end, counted from `now` (fixed windows are
/// epoch-aligned, or calendar periods; the other algorithms are back to empty one window
/// after their last hit: a calendar `sliding_window`, one period of the current length).
fn reset_in(l: &LimitSpec, now: u64) -> u64 {
    let w = l.window_ms().max(1);
    let fixed = l.algorithm == Algorithm::FixedWindow;
    match l.periods(now).map(|p| p.period(now)) {
        Some((_, end)) if fixed => end.saturating_sub(now).max(1),
        Some((start, end)) => end.saturating_sub(start).max(1),
        None if fixed => w - now % w,
        None => w,
    }
}

/// `limits` with `overdraft`: how a write-back charges hits already admitted.
fn forced(limits: &[LimitSpec]) -> Arc<[LimitSpec]> {
    limits
        .iter()
        .map(|l| LimitSpec {
            overdraft: true,
            ..l.clone()
        })
        .collect()
}

impl Key {
    fn new(limits: &[LimitSpec], now: u64, share: f64) -> Key {
        let forced = forced(limits);
        Key {
            fingerprint: LimitSpec::fingerprint(limits),
            forced_fingerprint: LimitSpec::fingerprint(&forced),
            forced,
            remaining: limits
                .iter()
                .map(|l| (l.capacity() as f64 * share).floor() as u64)
                .collect(),
            reset_at: limits.iter().map(|l| now + reset_in(l, now)).collect(),
            known: false,
            seq: 0,
            answered_at: now,
            pending: 0,
            inflight: 0,
            dirty: false,
            sample: None,
            rate: None,
            denial: None,
        }
    }

    /// Start over for new limits (a reload), keeping the hits this instance still owes.
    fn renew(&mut self, limits: &[LimitSpec], now: u64, share: f64) {
        *self = Key {
            pending: self.pending,
            inflight: self.inflight,
            dirty: self.dirty,
            seq: self.seq,
            ..Key::new(limits, now, share)
        };
    }

    /// Room left for this instance: the last answer's, less what it admitted since.
    fn avail(&self, i: usize) -> u64 {
        self.remaining[i]
            .saturating_sub(self.pending)
            .saturating_sub(self.inflight)
    }

    /// `hits` admitted here, to write back: pending, and the descriptor listed among its
    /// shard's dirty ones (once).
    fn pend(&mut self, hits: u64, tag: StateTag, dirty: &mut Vec<u128>) {
        self.pending += hits;
        if !std::mem::replace(&mut self.dirty, true) {
            dirty.push(tag.0);
        }
    }

    fn take_pending(&mut self) -> u64 {
        let carry = self.pending;
        self.inflight += carry;
        self.pending = 0;
        carry
    }

    fn results(
        &self,
        limits: &[LimitSpec],
        cost: u64,
        now: u64,
        admitted: bool,
    ) -> Vec<LimitResult> {
        limits
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let avail = self.avail(i);
                let reset_ms = self.reset_at[i].saturating_sub(now);
                LimitResult {
                    allowed: admitted || avail >= cost,
                    remaining: if admitted {
                        avail.saturating_sub(cost)
                    } else {
                        0
                    },
                    reset_ms,
                    retry_ms: (!admitted).then_some(reset_ms.max(1)),
                    used_before: l.capacity().saturating_sub(avail),
                    penalized: false,
                }
            })
            .collect()
    }
}

impl LocalView {
    pub fn new(opts: ViewOptions, clock: Arc<dyn Clock>) -> LocalView {
        LocalView {
            clock,
            opts,
            shards: Sharded::new(SHARDS, Shard::default),
            keys: AtomicUsize::new(0),
            degraded: AtomicBool::new(false),
            observer: OnceLock::new(),
            transition: Mutex::new(()),
            seq: AtomicU64::new(1),
            latency_ms: AtomicU64::new(0),
            overflow_logged: AtomicBool::new(false),
            unsettled: Mutex::new(IndexMap::default()),
            stats: ViewStats::default(),
        }
    }

    /// Tell `observer` of every change of [`LocalView::degraded`] from now on (once: later
    /// calls are ignored).
    pub fn observe_degraded(&self, observer: DegradedObserver) {
        let _ = self.observer.set(observer);
    }

    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    pub fn options(&self) -> &ViewOptions {
        &self.opts
    }

    /// Decisions are local because the store failed (fallback only).
    pub fn degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    /// Descriptors held.
    pub fn len(&self) -> usize {
        self.keys.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hits admitted here and not yet in the store (pending and in flight).
    pub fn unwritten(&self) -> u64 {
        self.shards
            .sum(|s| s.map.values().map(|k| k.pending + k.inflight).sum::<u64>())
    }

    /// Room for one more descriptor under `max_keys` (taken if so). Called with the shard
    /// locked, just before inserting: descriptors are never dropped, so the count only grows.
    fn take_room(&self) -> bool {
        self.keys
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.opts.max_keys).then_some(n + 1)
            })
            .is_ok()
    }

    /// A sequence number for a store call about to be sent.
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// A store call took `ms`: the `d` of the reserve (a slow moving maximum-biased mean).
    pub fn observe_latency(&self, ms: u64) {
        let old = self.latency_ms.load(Ordering::Relaxed);
        let new = if ms > old { ms } else { (old * 7 + ms) / 8 };
        self.latency_ms.store(new, Ordering::Relaxed);
    }

    /// A view this old is not used at all, whatever its room: the write-back that should
    /// have refreshed it is long overdue.
    fn stale_after(&self) -> u64 {
        10 * self.opts.interval_ms
    }

    /// Batched mode: decide `cost` hits of `tag` here if the view allows it (see the module
    /// documentation), appending results to `out`; otherwise say what to send the store.
    /// `carry_ok`: the caller can write this descriptor's hits ahead of its check.
    pub fn batched(
        &self,
        tag: StateTag,
        limits: &[LimitSpec],
        cost: u64,
        carry_ok: bool,
        out: &mut Vec<LimitResult>,
    ) -> Local {
        let now = self.now_ms();
        let mut shard = self.shards.of(tag).lock();
        let shard = &mut *shard;
        let Some(k) = shard.map.get_mut(&tag.0) else {
            return Local::Store { carry: 0 };
        };
        let carry = |k: &mut Key| Local::Store {
            carry: if carry_ok { k.take_pending() } else { 0 },
        };
        if k.fingerprint != LimitSpec::fingerprint(limits) {
            // A reload changed the limits: start over from the store's answer.
            k.renew(limits, now, 0.0);
            return carry(k);
        }
        if let Some(d) = &k.denial {
            if now < d.until && cost >= d.cost {
                let elapsed = now.saturating_sub(d.at);
                out.extend(d.results.iter().map(|r| LimitResult {
                    reset_ms: r.reset_ms.saturating_sub(elapsed),
                    retry_ms: r.retry_ms.map(|t| t.saturating_sub(elapsed).max(1)),
                    ..*r
                }));
                self.stats.batched_decisions.fetch_add(1, Ordering::Relaxed);
                return Local::Answered;
            }
            if now >= d.until {
                k.denial = None;
            }
        }
        let age = now.saturating_sub(k.answered_at);
        let stale = !k.known || age >= self.stale_after() || k.reset_at.iter().any(|&r| r <= now);
        let Some(rate) = k.rate.filter(|_| !stale) else {
            return carry(k);
        };
        // The hits this view cannot have seen: every instance's since one write-back before
        // the answer (`age + I + d`), with as much again for a rate that grows meanwhile.
        let cycle = self.opts.interval_ms + self.latency_ms.load(Ordering::Relaxed);
        let reserve = (rate * (age + 2 * cycle) as f64).ceil() as u64;
        let need = cost.saturating_add(reserve);
        if (0..limits.len()).any(|i| k.avail(i) < need) {
            return carry(k);
        }
        out.extend(k.results(limits, cost, now, true));
        k.pend(cost, tag, &mut shard.dirty);
        self.stats.batched_decisions.fetch_add(1, Ordering::Relaxed);
        Local::Answered
    }

    /// The limits a write-back of `tag`'s hits is charged with (`overdraft`: they were
    /// admitted already).
    pub fn forced_limits(&self, tag: StateTag, limits: &[LimitSpec]) -> Arc<[LimitSpec]> {
        let shard = self.shards.of(tag).lock();
        match shard.map.get(&tag.0) {
            Some(k) if k.fingerprint == LimitSpec::fingerprint(limits) => k.forced.clone(),
            _ => forced(limits),
        }
    }

    /// `carry` hits of `tag` reached the store.
    pub fn landed(&self, tag: StateTag, carry: u64) {
        if carry == 0 {
            return;
        }
        if let Some(k) = self.shards.of(tag).lock().map.get_mut(&tag.0) {
            k.inflight = k.inflight.saturating_sub(carry);
        }
        self.stats.written_back.fetch_add(carry, Ordering::Relaxed);
    }

    /// `hits` of `tag` were in a call that was never sent: pending again, for the next
    /// batch.
    pub(super) fn unsent(&self, tag: StateTag, hits: u64) {
        if hits == 0 {
            return;
        }
        let mut shard = self.shards.of(tag).lock();
        let shard = &mut *shard;
        if let Some(k) = shard.map.get_mut(&tag.0) {
            k.inflight = k.inflight.saturating_sub(hits);
            k.pend(hits, tag, &mut shard.dirty);
        }
    }

    /// The store answered `a.results` for `a.tag`: refresh the view (see [`Answer`]).
    pub fn record(&self, a: &Answer<'_>) {
        let Answer {
            tag,
            limits,
            results,
            seq,
            sent_ms,
            asked,
        } = *a;
        if results.len() != limits.len() {
            return;
        }
        let mut shard = self.shards.of(tag).lock();
        let k = match shard.map.entry(tag.0) {
            Entry::Occupied(k) => k.into_mut(),
            Entry::Vacant(v) => {
                if !matches!(asked, Asked::Check { keep_new: true, .. }) || !self.take_room() {
                    return;
                }
                v.insert(Key::new(limits, sent_ms, 0.0))
            }
        };
        if seq < k.seq {
            return;
        }
        let cost = match asked {
            // A write-back's answer is for the forced limits it was sent with; one for other
            // limits (a reload since) says nothing of the current ones.
            Asked::WriteBack if k.forced_fingerprint != LimitSpec::fingerprint(limits) => return,
            Asked::WriteBack => 0,
            Asked::Check { cost, .. } => {
                if k.fingerprint != LimitSpec::fingerprint(limits) {
                    k.renew(limits, sent_ms, 0.0);
                }
                cost
            }
        };
        k.seq = seq;
        k.known = true;
        k.answered_at = sent_ms;
        for (i, r) in results.iter().enumerate() {
            k.remaining[i] = if r.allowed { r.remaining } else { 0 };
            k.reset_at[i] = sent_ms + r.reset_ms;
        }
        let used: Box<[u64]> = limits
            .iter()
            .zip(results)
            .map(|(l, r)| {
                l.capacity()
                    .saturating_sub(if r.allowed { r.remaining } else { 0 })
            })
            .collect();
        match &k.sample {
            Some((t0, u0)) if sent_ms >= t0 + (self.opts.interval_ms / 2).max(1) => {
                let dt = (sent_ms - t0) as f64;
                let grew = used
                    .iter()
                    .zip(u0.iter())
                    .filter(|(u, u0)| u >= u0)
                    .map(|(u, u0)| (u - u0) as f64 / dt)
                    .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
                if let Some(g) = grew {
                    // A quiet interval halves the estimate, no more: traffic comes back.
                    k.rate = Some(k.rate.map_or(g, |old| g.max(old / 2.0)));
                }
                k.sample = Some((sent_ms, used));
            }
            Some(_) => {}
            None => k.sample = Some((sent_ms, used)),
        }
        if cost > 0 && results.iter().any(|r| !r.allowed) {
            if let Some(until) = cacheable_for(limits, results) {
                k.denial = Some(Denial {
                    until: sent_ms + until,
                    at: sent_ms,
                    cost,
                    results: results.into(),
                });
            }
        } else if cost > 0 {
            k.denial = None;
        }
    }

    /// `n` descriptors were decided by [`LocalView::fallback`] for `why` (counted apart in
    /// `sluice_local_decisions_total{reason}`).
    pub fn count_fallback(&self, why: Why, n: usize) {
        let counter = match why {
            Why::StoreFailure => &self.stats.fallback_decisions,
            Why::Overload => &self.stats.overload_decisions,
        };
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The store failed or is overloaded: decide `cost` hits of `tag` here from the last
    /// known state (or the unseen share), keeping admitted hits for write-back as `keep`
    /// says. Returns the hits kept: `cost` when admitted and kept, 0 when denied, a refund
    /// (nothing to charge; the store hears of refunds only from the store path) or the view
    /// is full. The caller counts the decision ([`LocalView::count_fallback`]).
    pub fn fallback(
        &self,
        tag: StateTag,
        limits: &[LimitSpec],
        cost: u64,
        refund: bool,
        keep: Keep,
        out: &mut Vec<LimitResult>,
    ) -> u64 {
        let now = self.now_ms();
        let mut shard = self.shards.of(tag).lock();
        let shard = &mut *shard;
        let k = match shard.map.entry(tag.0) {
            Entry::Occupied(k) => k.into_mut(),
            Entry::Vacant(v) => {
                let new = Key::new(limits, now, self.opts.unseen_share);
                if !self.take_room() {
                    if !refund {
                        self.overflowed(cost);
                    }
                    out.extend(new.results(limits, cost, now, true));
                    return 0;
                }
                v.insert(new)
            }
        };
        if k.fingerprint != LimitSpec::fingerprint(limits) {
            k.renew(limits, now, self.opts.unseen_share);
        }
        // A window that ended while the store was away starts again from the state a new
        // window has: full (known) or the share (never seen).
        for (i, l) in limits.iter().enumerate() {
            if k.reset_at[i] <= now {
                let share = if k.known { 1.0 } else { self.opts.unseen_share };
                k.remaining[i] = (l.capacity() as f64 * share).floor() as u64;
                k.reset_at[i] = now + reset_in(l, now);
            }
        }
        if refund {
            out.extend(k.results(limits, 0, now, true));
            return 0;
        }
        let admitted = (0..limits.len()).all(|i| k.avail(i) >= cost);
        out.extend(k.results(limits, cost, now, admitted));
        if !admitted || cost == 0 {
            return 0;
        }
        match keep {
            Keep::InCall => k.inflight += cost,
            Keep::Pending => k.pend(cost, tag, &mut shard.dirty),
        }
        cost
    }

    fn overflowed(&self, hits: u64) {
        self.stats.overflow.fetch_add(hits, Ordering::Relaxed);
        if !self.overflow_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                max_keys = self.opts.max_keys,
                "local view full (--local-view-max-keys): hits of descriptors not yet kept are \
                 admitted from the share and will not be written back to the store"
            );
        }
    }

    /// The store failed and decisions go local (fallback only); logs the transition and
    /// tells the observer before the first local decision is made.
    pub fn enter_degraded(&self, error: &StoreError) {
        if !self.opts.fallback || self.degraded() {
            return;
        }
        let _order = self.transition.lock();
        if !self.degraded.swap(true, Ordering::Relaxed) {
            tracing::warn!(error = %error, "store failed: deciding locally until it answers (--store-failure-mode local)");
            if let Some(o) = self.observer.get() {
                o(true);
            }
        }
    }

    fn leave_degraded(&self) {
        if !self.degraded() {
            return;
        }
        let _order = self.transition.lock();
        if self.degraded.swap(false, Ordering::Relaxed) {
            self.overflow_logged.store(false, Ordering::Relaxed);
            tracing::info!("store answers again: decisions go back to it, local hits written back");
            if let Some(o) = self.observer.get() {
                o(false);
            }
        }
    }

    /// Write every kept hit back to the store (see `write_back.rs`), asking `fate` what
    /// became of the request calls held here whose callers left. Run every
    /// `--batch-interval`.
    pub async fn flush<S: Store + ?Sized>(
        &self,
        store: &S,
        fate: impl Fn(CallId) -> Fate,
    ) -> Result<u64, StoreError> {
        self.write_back(store, fate).await
    }
}

impl std::fmt::Debug for LocalView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalView")
            .field("keys", &self.len())
            .field("degraded", &self.degraded())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
