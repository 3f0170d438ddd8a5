//! The local view: what this instance knows of each descriptor's global state (the store's
//! last answer) plus the hits it admitted since. It serves two features (README,
//! "Consistency: strict, batched, and the store-failure fallback").
//!
//! Why this file is long: one type whose decisions (batched, fallback), bookkeeping (answers,
//! carried hits) and write-back all read and move the same per-descriptor counts; apart,
//! the rules for pending and in-flight hits would be spread over files.
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
//! Memory: at most `max_keys` descriptors (sharded, one `parking_lot` mutex per shard, never
//! held across an await). Past it, new descriptors are decided by the store (batched) or,
//! while the store is down, from the share without keeping their hits (counted in
//! [`ViewStats::overflow`], logged). No I/O except through [`Store`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use super::local_cache::cacheable_for;
use crate::limit::{Algorithm, Check, Clock, LimitResult, LimitSpec, StateTag};
use crate::store::{Store, StoreError};

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
    /// `--local-view-max-keys`.
    pub max_keys: usize,
}

/// Counters the service publishes as metrics (monotonic unless said otherwise).
#[derive(Debug, Default)]
pub struct ViewStats {
    /// Decisions made here for `batched` descriptors.
    pub batched_decisions: AtomicU64,
    /// Decisions made here because the store failed.
    pub fallback_decisions: AtomicU64,
    /// Hits not kept for write-back: the view was full.
    pub overflow: AtomicU64,
    /// Write-backs that succeeded, and hits they carried.
    pub flushes: AtomicU64,
    pub written_back: AtomicU64,
    /// Write-backs that failed (their hits stay for the next one).
    pub flush_errors: AtomicU64,
}

/// See the module documentation.
pub struct LocalView {
    clock: Arc<dyn Clock>,
    opts: ViewOptions,
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    degraded: AtomicBool,
    /// Orders store answers: an answer older than the state it would replace is dropped.
    seq: AtomicU64,
    /// The store's recent latency, in milliseconds (the `d` of the bound).
    latency_ms: AtomicU64,
    /// Overflow is logged once per degraded period.
    overflow_logged: AtomicBool,
    pub stats: ViewStats,
}

#[derive(Default)]
struct Shard {
    map: HashMap<u128, Key>,
    /// Tags with hits to write back (may hold tags whose hits have gone since).
    dirty: Vec<u128>,
}

struct Key {
    fingerprint: u64,
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
    /// send them first ([`LocalView::forced_limits`]) and settle them with
    /// [`LocalView::landed`] or [`LocalView::failed`].
    Store { carry: u64 },
}

/// Every parameter of `limits` but `overdraft` (a write-back forces it on the same state).
fn fingerprint(limits: &[LimitSpec]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for l in limits {
        h.update(&[l.algorithm.code(), l.slot]);
        h.update(&l.requests_per_unit.to_le_bytes());
        h.update(&l.burst.to_le_bytes());
        h.update(&l.buckets.to_le_bytes());
        h.update(&l.window_ms().to_le_bytes());
        h.update(&l.penalty_ms.to_le_bytes());
    }
    h.digest()
}

/// When a fresh window of `l` would end, counted from `now` (fixed windows are
/// epoch-aligned; the other algorithms are back to empty one window after their last hit).
fn reset_in(l: &LimitSpec, now: u64) -> u64 {
    let w = l.window_ms().max(1);
    if l.algorithm == Algorithm::FixedWindow {
        w - now % w
    } else {
        w
    }
}

impl Key {
    fn new(limits: &[LimitSpec], now: u64, share: f64) -> Key {
        Key {
            fingerprint: fingerprint(limits),
            forced: limits
                .iter()
                .map(|l| LimitSpec {
                    overdraft: true,
                    ..l.clone()
                })
                .collect(),
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

    /// Room left for this instance: the last answer's, less what it admitted since.
    fn avail(&self, i: usize) -> u64 {
        self.remaining[i]
            .saturating_sub(self.pending)
            .saturating_sub(self.inflight)
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
        let per_shard = opts.max_keys.div_ceil(SHARDS).max(1);
        LocalView {
            clock,
            per_shard,
            opts,
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            degraded: AtomicBool::new(false),
            seq: AtomicU64::new(1),
            latency_ms: AtomicU64::new(0),
            overflow_logged: AtomicBool::new(false),
            stats: ViewStats::default(),
        }
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
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hits admitted here and not yet in the store (pending and in flight).
    pub fn unwritten(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .map
                    .values()
                    .map(|k| k.pending + k.inflight)
                    .sum::<u64>()
            })
            .sum()
    }

    fn shard(&self, tag: StateTag) -> &Mutex<Shard> {
        &self.shards[(tag.0 as usize) % SHARDS]
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
        let mut shard = self.shard(tag).lock();
        let Some(k) = shard.map.get_mut(&tag.0) else {
            return Local::Store { carry: 0 };
        };
        let carry = |k: &mut Key| Local::Store {
            carry: if carry_ok { k.take_pending() } else { 0 },
        };
        if k.fingerprint != fingerprint(limits) {
            // A reload changed the limits: start over from the store's answer.
            *k = Key {
                pending: k.pending,
                inflight: k.inflight,
                dirty: k.dirty,
                seq: k.seq,
                ..Key::new(limits, now, 0.0)
            };
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
        k.pending += cost;
        let newly_dirty = !k.dirty;
        k.dirty = true;
        if newly_dirty {
            shard.dirty.push(tag.0);
        }
        self.stats.batched_decisions.fetch_add(1, Ordering::Relaxed);
        Local::Answered
    }

    /// The limits a write-back of `tag`'s carried hits is charged with (`overdraft`: they
    /// were admitted already).
    pub fn forced_limits(&self, tag: StateTag, limits: &[LimitSpec]) -> Arc<[LimitSpec]> {
        let shard = self.shard(tag).lock();
        match shard.map.get(&tag.0) {
            Some(k) if k.forced.len() == limits.len() => k.forced.clone(),
            _ => limits
                .iter()
                .map(|l| LimitSpec {
                    overdraft: true,
                    ..l.clone()
                })
                .collect(),
        }
    }

    /// `carry` hits of `tag` reached the store.
    pub fn landed(&self, tag: StateTag, carry: u64) {
        if carry == 0 {
            return;
        }
        if let Some(k) = self.shard(tag).lock().map.get_mut(&tag.0) {
            k.inflight = k.inflight.saturating_sub(carry);
        }
        self.stats.written_back.fetch_add(carry, Ordering::Relaxed);
    }

    /// `carry` hits of `tag` did not reach the store: they wait for the next write-back.
    pub fn failed(&self, tag: StateTag, carry: u64) {
        if carry == 0 {
            return;
        }
        let mut shard = self.shard(tag).lock();
        let shard = &mut *shard;
        if let Some(k) = shard.map.get_mut(&tag.0) {
            k.inflight = k.inflight.saturating_sub(carry);
            k.pending += carry;
            if !k.dirty {
                k.dirty = true;
                shard.dirty.push(tag.0);
            }
        }
    }

    /// The store answered `results` for a check of `tag` (sent as call `seq` at `sent_ms`):
    /// refresh the view. `insert`: start keeping this descriptor if it is not kept yet.
    /// `cost`: the check's cost, for the denial it may carry (0: a write-back, no denial).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        tag: StateTag,
        limits: &[LimitSpec],
        cost: u64,
        seq: u64,
        sent_ms: u64,
        results: &[LimitResult],
        insert: bool,
    ) {
        if results.len() != limits.len() {
            return;
        }
        let mut shard = self.shard(tag).lock();
        let shard = &mut *shard;
        if !shard.map.contains_key(&tag.0) {
            if !insert || shard.map.len() >= self.per_shard {
                return;
            }
            shard.map.insert(tag.0, Key::new(limits, sent_ms, 0.0));
        }
        let Some(k) = shard.map.get_mut(&tag.0) else {
            return;
        };
        if seq < k.seq {
            return;
        }
        if k.fingerprint != fingerprint(limits) {
            *k = Key {
                pending: k.pending,
                inflight: k.inflight,
                dirty: k.dirty,
                ..Key::new(limits, sent_ms, 0.0)
            };
        }
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

    /// The store failed: decide `cost` hits of `tag` here from the last known state (or the
    /// unseen share), keeping admitted hits for write-back. Returns whether admitted.
    pub fn fallback(
        &self,
        tag: StateTag,
        limits: &[LimitSpec],
        cost: u64,
        refund: bool,
        out: &mut Vec<LimitResult>,
    ) -> bool {
        let now = self.now_ms();
        self.stats
            .fallback_decisions
            .fetch_add(1, Ordering::Relaxed);
        let mut shard = self.shard(tag).lock();
        let shard = &mut *shard;
        if !shard.map.contains_key(&tag.0) {
            if shard.map.len() >= self.per_shard {
                self.overflowed(cost);
                out.extend(
                    Key::new(limits, now, self.opts.unseen_share).results(limits, cost, now, true),
                );
                return true;
            }
            shard
                .map
                .insert(tag.0, Key::new(limits, now, self.opts.unseen_share));
        }
        let Some(k) = shard.map.get_mut(&tag.0) else {
            return false;
        };
        if k.fingerprint != fingerprint(limits) {
            *k = Key {
                pending: k.pending,
                inflight: k.inflight,
                dirty: k.dirty,
                ..Key::new(limits, now, self.opts.unseen_share)
            };
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
            // Nothing to charge; the store hears of refunds only from the store path.
            out.extend(k.results(limits, 0, now, true));
            return true;
        }
        let admitted = (0..limits.len()).all(|i| k.avail(i) >= cost);
        out.extend(k.results(limits, cost, now, admitted));
        if admitted && cost > 0 {
            k.pending += cost;
            if !k.dirty {
                k.dirty = true;
                shard.dirty.push(tag.0);
            }
        }
        admitted
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

    /// The store failed and decisions go local (fallback only); logs the transition.
    pub fn enter_degraded(&self, error: &StoreError) {
        if self.opts.fallback && !self.degraded.swap(true, Ordering::Relaxed) {
            tracing::warn!(error = %error, "store failed: deciding locally until it answers (--store-failure-mode local)");
        }
    }

    fn leave_degraded(&self) {
        if self.degraded.swap(false, Ordering::Relaxed) {
            self.overflow_logged.store(false, Ordering::Relaxed);
            tracing::info!("store answers again: decisions go back to it, local hits written back");
        }
    }

    /// Write every kept hit back to the store in one call (one script call per node, per
    /// slot on a cluster), refresh the view from the answer, and leave the degraded state
    /// when it succeeds. Run every `--batch-interval`.
    pub async fn flush<S: Store + ?Sized>(&self, store: &S) -> Result<u64, StoreError> {
        let mut items: Vec<(StateTag, Arc<[LimitSpec]>, u64)> = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let shard = &mut *shard;
            for tag in std::mem::take(&mut shard.dirty) {
                if let Some(k) = shard.map.get_mut(&tag) {
                    k.dirty = false;
                    let carry = k.take_pending();
                    if carry > 0 {
                        items.push((StateTag(tag), k.forced.clone(), carry));
                    }
                }
            }
        }
        if items.is_empty() {
            if self.degraded() && store.is_ready() {
                self.leave_degraded();
            }
            return Ok(0);
        }
        let checks: Vec<Check<'_>> = items
            .iter()
            .map(|(tag, limits, carry)| Check {
                tag: *tag,
                limits,
                cost: *carry,
                refund: false,
            })
            .collect();
        let seq = self.next_seq();
        let sent = self.now_ms();
        let mut out = Vec::with_capacity(items.iter().map(|i| i.1.len()).sum());
        let result = store.write_back(&checks, &mut out).await;
        let sent_len: usize = checks.iter().map(|c| c.limits.len()).sum();
        let result = result.and_then(|()| {
            if out.len() == sent_len {
                Ok(())
            } else {
                Err(StoreError::Backend(
                    format!("store returned {} results for {sent_len} limits", out.len()).into(),
                ))
            }
        });
        match result {
            Ok(()) => {
                self.observe_latency(self.now_ms().saturating_sub(sent));
                let mut at = 0;
                let mut hits = 0;
                for (tag, limits, carry) in &items {
                    let k = limits.len();
                    self.landed(*tag, *carry);
                    self.record(*tag, limits, 0, seq, sent, &out[at..at + k], false);
                    at += k;
                    hits += carry;
                }
                self.stats.flushes.fetch_add(1, Ordering::Relaxed);
                self.leave_degraded();
                Ok(hits)
            }
            Err(e) => {
                for (tag, _, carry) in &items {
                    self.failed(*tag, *carry);
                }
                self.stats.flush_errors.fetch_add(1, Ordering::Relaxed);
                self.enter_degraded(&e);
                Err(e)
            }
        }
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
