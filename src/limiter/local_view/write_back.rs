//! Writing the view's hits back so that the store counts each exactly once, whatever it
//! runs late.
//!
//! A store call can fail without its outcome being known: a timeout, or a connection
//! dropped mid-call, while Redis is stalled (`BGSAVE`'s fork, a paused VM, a failover) or
//! killed with the call applied and written to its append-only file. Sending its hits again
//! would count them twice if the first send runs after all; not sending them would lose
//! them if it never does. So every call that carries hits that may be sent again has an id
//! ([`CallId`]), which the store records atomically with the hits it applies
//! ([`Ids`]): whichever send of an id arrives first is applied, the others only report the
//! state.
//!
//! **What an id covers: one call, resent unchanged.** A call that failed is kept here as it
//! was sent, its checks in order with the hits of each (an [`Unsettled`] record), and every
//! write-back sends it again under its id until one send is answered:
//! - a write-back of pending hits that failed keeps its batch: its hits stay in flight, not
//!   pending, so they are never re-batched with newer hits under another id. While it is
//!   unsettled, newer hits wait (pending) for the next batch: one batch at a time, so a long
//!   outage resends one batch, not one per interval;
//! - a request call (`limiter::decide`) that carries hits of batched descriptors written
//!   ahead of their check, or whose descriptors the fallback would decide here: held from
//!   before it is sent ([`LocalView::hold`]) until it is answered, and not resent while its
//!   caller waits for it. Failed, it is sent again with the same checks in the same order,
//!   each now carrying the hits this instance admitted for it (its carried hits, then what
//!   the fallback admitted; 0 for a denial); left unanswered (the caller's future dropped at
//!   its deadline), with what it carried when sent, 0 for each check (nobody was answered). If the request ran in the store after all, its own charges stand and
//!   the resend only reports; if not, the resend applies what was admitted here and fences
//!   the request off: should it arrive later, it only reports. The same checks in the same
//!   order are split into the same script calls, so on a cluster each resend carries the
//!   id key of the original's call for its slot.
//!
//! **Most held calls are settled without a resend.** A request call stays held when its
//! caller stopped waiting (a timeout under overload, mostly); the store may know what became
//! of it (the Redis store's `fate`, which the flush is given): seen to run (its charges
//! stand: done), or never sent (its hits go back to pending, for the next batch). Only a
//! call whose fate is unknown (its connection failed with it in flight; a cluster call) is
//! resent, and one still in flight waits.
//!
//! Ids cost one key write per script call that carries one (`docs/explanation/consistency.md`); Redis
//! keeps them for a while (`store/redis/mod.rs`), longer than a stall or a restart takes.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use indexmap::IndexMap;

use super::{Answer, Asked, LocalView};
use crate::limit::hash::FoldBuild;
use crate::limit::{Check, LimitSpec, StateTag};
use crate::store::redis::Fate;
use crate::store::{Call, CallId, Ids, Store, StoreError};

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
/// one is answered, unless its caller still waits for it.
#[derive(Clone, Debug)]
pub(super) struct Unsettled {
    /// A batch of pending hits (of which at most one is unsettled at a time), or a request.
    batch: bool,
    checks: Vec<Held>,
    /// A request call's caller, while it waits for the answer ([`Holding`]).
    caller: Option<Weak<()>>,
}

impl Unsettled {
    /// Its caller still waits: the call is in flight, not to be sent again.
    fn waited_for(&self) -> bool {
        self.caller.as_ref().is_some_and(|c| c.strong_count() > 0)
    }
}

/// A request call held under its id while its caller waits ([`LocalView::hold`]). Settled
/// by [`LocalView::answered`] or [`LocalView::failed`]; dropped with the caller's future
/// (its deadline passed, the client went away), it leaves the call held as it was sent.
#[derive(Debug)]
pub struct Holding {
    id: CallId,
    _caller: Arc<()>,
}

impl Holding {
    /// The id the call is sent under.
    pub fn id(&self) -> CallId {
        self.id
    }
}

impl LocalView {
    /// A request call is about to be sent under a fresh id ([`Holding::id`]): hold it,
    /// `(tag, forced limits, hits)` per check in the order it sends them (the hits it
    /// carries, 0 for its own checks), so that, if its caller leaves before an answer, the
    /// write-back sends it again under its id (its hits counted once, whether or not the
    /// store ran it).
    pub fn hold(&self, checks: Vec<Held>) -> Holding {
        let id = CallId::fresh();
        let caller = Arc::new(());
        let call = Unsettled {
            batch: false,
            checks,
            caller: Some(Arc::downgrade(&caller)),
        };
        self.unsettled.lock().insert(id, call);
        Holding {
            id,
            _caller: caller,
        }
    }

    /// The held call was answered: nothing of it to send again.
    pub fn answered(&self, call: Holding) {
        self.unsettled.lock().swap_remove(&call.id);
    }

    /// The held call failed: keep `checks` (as [`LocalView::hold`] says, each with the hits
    /// admitted for it: carried, then what the fallback admitted with [`super::Keep::InCall`]),
    /// to be sent again under the same id by the next write-back.
    pub fn failed(&self, call: Holding, checks: Vec<Held>) {
        if let Some(u) = self.unsettled.lock().get_mut(&call.id) {
            u.checks = checks;
            u.caller = None;
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

    /// Ask `fate` what became of each request call held here whose caller left, and
    /// settle those the store knows without sending them: one that ran is done (its own
    /// charges stand), one never sent has its hits pending again (written back with the
    /// next batch, under its id). Returns the ids of calls still in flight: not sent this
    /// time, as the original may still run (sending would be safe, under the id, but costs
    /// Redis a call when it is busiest).
    fn settle(
        &self,
        fate: impl Fn(CallId) -> Fate,
        unsettled: &mut IndexMap<CallId, Unsettled, FoldBuild>,
    ) -> Vec<CallId> {
        let mut waiting = Vec::new();
        unsettled.retain(|&id, u| {
            if u.batch || u.waited_for() {
                return true;
            }
            let settle: fn(&LocalView, StateTag, u64) = match fate(id) {
                Fate::Applied => LocalView::landed,
                Fate::NotSent => LocalView::unsent,
                Fate::InFlight => {
                    waiting.push(id);
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

    /// Send every unsettled call again (but those whose callers still wait), and the
    /// pending hits as a new batch unless one is still unsettled, in one store call under
    /// their ids ([`Ids::WriteBack`]: one round trip; per node, per slot on a cluster);
    /// refresh the view from the answers and leave the degraded state when it succeeds.
    /// Returns the hits the calls carried.
    pub(super) async fn write_back<S: Store + ?Sized>(
        &self,
        store: &S,
        fate: impl Fn(CallId) -> Fate,
    ) -> Result<u64, StoreError> {
        let sending: Vec<(CallId, Vec<Held>)> = {
            let mut unsettled = self.unsettled.lock();
            let waiting = self.settle(fate, &mut unsettled);
            if !unsettled.values().any(|u| u.batch) {
                let checks = self.take_batch();
                if !checks.is_empty() {
                    let batch = Unsettled {
                        batch: true,
                        checks,
                        caller: None,
                    };
                    unsettled.insert(CallId::fresh(), batch);
                }
            }
            unsettled
                .iter()
                .filter(|(id, u)| !u.waited_for() && !waiting.contains(id))
                .map(|(&id, u)| (id, u.checks.clone()))
                .collect()
        };
        if sending.is_empty() {
            if self.degraded() && store.is_ready() {
                self.leave_degraded();
            }
            return Ok(0);
        }
        let segments: Vec<(CallId, usize)> = sending.iter().map(|(id, c)| (*id, c.len())).collect();
        let held = || sending.iter().flat_map(|(_, checks)| checks);
        let checks: Vec<Check<'_>> = held()
            .map(|h| Check {
                tag: h.tag,
                limits: &h.limits,
                cost: h.hits,
                refund: false,
            })
            .collect();
        let call = Call {
            ids: Ids::WriteBack(&segments),
            ..Call::new(&checks)
        };
        let seq = self.next_seq();
        let sent = self.now_ms();
        let mut out = Vec::with_capacity(call.results());
        let result = crate::limiter::run_counted(store, &call, &mut out).await;
        if let Err(e) = result {
            // Kept as they are, to be sent again under the same ids.
            self.stats.flush_errors.fetch_add(1, Ordering::Relaxed);
            self.enter_degraded(&e);
            return Err(e);
        }
        self.observe_latency(self.now_ms().saturating_sub(sent));
        {
            let mut unsettled = self.unsettled.lock();
            for (id, _) in &sending {
                unsettled.swap_remove(id);
            }
        }
        let mut at = 0;
        let mut hits = 0;
        for h in held() {
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
