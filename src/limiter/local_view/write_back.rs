//! Writing the view's hits back so that the store counts each exactly once, whatever it
//! runs late.
//!
//! A store call can fail without its outcome being known: a timeout, or a connection
//! dropped mid-call, while Redis is stalled (`BGSAVE`'s fork, a paused VM, a failover) or
//! killed with the call applied and written to its append-only file. Sending its hits again
//! would count them twice if the first send runs after all; not sending them would lose
//! them if it never does. So every call that carries hits that may be sent again has an id
//! ([`CallId`]), which the store records atomically with the hits it applies
//! ([`Store::run_once`]): whichever send of an id arrives first is applied, the others only
//! report the state.
//!
//! **What an id covers: one call, resent unchanged.** A call that failed is kept here as it
//! was sent, its checks in order with the hits of each (an [`Unsettled`] record), and every
//! write-back sends it again under its id until one send is answered:
//! - a write-back of pending hits that failed keeps its batch: its hits stay in flight, not
//!   pending, so they are never re-batched with newer hits under another id. While it is
//!   unsettled, newer hits wait (pending) for the next batch: one batch at a time, so a long
//!   outage resends one batch, not one per interval;
//! - a request call that failed (`decide_with_view`), which carried hits of batched
//!   descriptors written ahead of their check, or whose descriptors the fallback then
//!   decided here: sent again with the same checks in the same order, each now carrying the
//!   hits this instance admitted for it (its carried hits, then what the fallback admitted;
//!   0 for a denial). If the request ran in the store after all, its own charges stand and
//!   the resend only reports; if not, the resend applies what was admitted here and fences
//!   the request off: should it arrive later, it only reports. The same checks in the same
//!   order are split into the same script calls, so on a cluster each resend carries the
//!   id key of the original's call for its slot.
//!
//! **Most held calls are settled without a resend.** A request call is held when its caller
//! stopped waiting (a timeout under overload, mostly); the store may know what became of
//! it ([`Store::fate`]): seen to run (its charges stand: done), or never sent (its hits go
//! back to pending, for the next batch). Only a call whose fate is unknown (its connection
//! failed with it in flight; a cluster call) is resent, and one still in flight waits.
//!
//! Ids cost one key write per script call that carries one (`docs/explanation/consistency.md`); Redis
//! keeps them for a while (`store/redis/mod.rs`), longer than a stall or a restart takes.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Answer, Asked, LocalView};
use crate::limit::{Check, LimitSpec, StateTag};
use crate::store::{Batch, CallId, Fate, Store, StoreError};

/// One check of a held call: the descriptor, the limits with `overdraft` its hits are
/// written with, and the hits this instance admitted for it (0: none, sent anyway so the
/// call is resent as it was).
#[derive(Clone, Debug)]
pub struct Held {
    pub tag: StateTag,
    pub limits: Arc<[LimitSpec]>,
    pub hits: u64,
}

/// A call whose outcome is not known yet, sent again under its id by every write-back until
/// one is answered.
#[derive(Clone, Debug)]
pub(super) struct Unsettled {
    id: CallId,
    /// A batch of pending hits (of which at most one is unsettled at a time), or a request.
    batch: bool,
    checks: Vec<Held>,
}

impl Unsettled {
    pub(super) fn call(id: CallId, checks: Vec<Held>) -> Unsettled {
        Unsettled {
            id,
            batch: false,
            checks,
        }
    }
}

impl LocalView {
    /// The pending hits of every dirty descriptor, now in flight, as one batch's checks.
    fn take_batch(&self) -> Vec<Held> {
        let mut checks = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let shard = &mut *shard;
            for tag in std::mem::take(&mut shard.dirty) {
                if let Some(k) = shard.map.get_mut(&tag) {
                    k.dirty = false;
                    let hits = k.take_pending();
                    if hits > 0 {
                        checks.push(Held {
                            tag: StateTag(tag),
                            limits: k.forced.clone(),
                            hits,
                        });
                    }
                }
            }
        }
        checks
    }

    /// Ask the store what became of each request call held here ([`Store::fate`]), and
    /// settle those it knows without sending them: one that ran is done (its own charges
    /// stand), one never sent has its hits pending again (written back with the next batch,
    /// under its id). Returns the ids of calls still in flight: not sent this time, as the
    /// original may still run (sending would be safe, under the id, but costs Redis a call
    /// when it is busiest).
    fn settle<S: Store + ?Sized>(&self, store: &S, unsettled: &mut Vec<Unsettled>) -> Vec<CallId> {
        let mut waiting = Vec::new();
        unsettled.retain(|u| {
            if u.batch {
                return true;
            }
            let settle: fn(&LocalView, StateTag, u64) = match store.fate(u.id) {
                Fate::Applied => LocalView::landed,
                Fate::NotSent => LocalView::unsent,
                Fate::InFlight => {
                    waiting.push(u.id);
                    return true;
                }
                Fate::Unknown => return true,
            };
            for h in &u.checks {
                settle(self, h.tag, h.hits);
            }
            self.stats.settled.fetch_add(1, Ordering::Relaxed);
            false
        });
        waiting
    }

    /// Send every unsettled call again, and the pending hits as a new batch unless one is
    /// still unsettled, in one [`Store::write_back`] (one round trip; per node, per slot on
    /// a cluster); refresh the view from the answers and leave the degraded state when it
    /// succeeds. Returns the hits the calls carried.
    pub(super) async fn write_back<S: Store + ?Sized>(&self, store: &S) -> Result<u64, StoreError> {
        let sending: Vec<Unsettled> = {
            let mut unsettled = self.unsettled.lock();
            let waiting = self.settle(store, &mut unsettled);
            if !unsettled.iter().any(|u| u.batch) {
                let checks = self.take_batch();
                if !checks.is_empty() {
                    unsettled.push(Unsettled {
                        id: CallId::fresh(),
                        batch: true,
                        checks,
                    });
                }
            }
            unsettled
                .iter()
                .filter(|u| !waiting.contains(&u.id))
                .cloned()
                .collect()
        };
        if sending.is_empty() {
            if self.degraded() && store.is_ready() {
                self.leave_degraded();
            }
            return Ok(0);
        }
        let checks: Vec<Vec<Check<'_>>> = sending
            .iter()
            .map(|u| {
                u.checks
                    .iter()
                    .map(|h| Check {
                        tag: h.tag,
                        limits: &h.limits,
                        cost: h.hits,
                        refund: false,
                    })
                    .collect()
            })
            .collect();
        let batches: Vec<Batch<'_>> = sending
            .iter()
            .zip(&checks)
            .map(|(u, checks)| Batch { id: u.id, checks })
            .collect();
        let seq = self.next_seq();
        let sent = self.now_ms();
        let sent_len: usize = checks.iter().flatten().map(|c| c.limits.len()).sum();
        let mut out = Vec::with_capacity(sent_len);
        let result = store.write_back(&batches, &mut out).await;
        let result = result.and_then(|()| {
            if out.len() == sent_len {
                Ok(())
            } else {
                Err(StoreError::Backend(
                    format!("store returned {} results for {sent_len} limits", out.len()).into(),
                ))
            }
        });
        if let Err(e) = result {
            // Kept as they are, to be sent again under the same ids.
            self.stats.flush_errors.fetch_add(1, Ordering::Relaxed);
            self.enter_degraded(&e);
            return Err(e);
        }
        self.observe_latency(self.now_ms().saturating_sub(sent));
        self.unsettled
            .lock()
            .retain(|u| !sending.iter().any(|s| s.id == u.id));
        let mut at = 0;
        let mut hits = 0;
        for h in sending.iter().flat_map(|u| &u.checks) {
            let k = h.limits.len();
            self.landed(h.tag, h.hits);
            self.record(&Answer {
                tag: h.tag,
                limits: &h.limits,
                results: &out[at..at + k],
                seq,
                sent_ms: sent,
                asked: Asked::WriteBack,
            });
            at += k;
            hits += h.hits;
        }
        self.stats.flushes.fetch_add(1, Ordering::Relaxed);
        self.leave_degraded();
        Ok(hits)
    }
}

#[cfg(test)]
mod tests;
