//! What became of a request call under an id whose caller stopped waiting
//! ([`RedisStore::fate`](super::RedisStore::fate)): the Redis store's own knowledge, which
//! the local view asks before it sends such a call again.
//!
//! A request call under an id that times out (its caller's deadline, under overload) is
//! held by the local view and would be resent under its id by the next write-back: safe
//! (the id makes Redis apply it once) but a second script call for every timed-out call,
//! at the moment Redis is busiest. Most of them need none: the batcher knows what the
//! caller could not. A call still queued when its caller left is never sent (`batch.rs`
//! drops it): its hits can simply be written back with the next batch. A call sent is
//! answered to the batcher, however late: it ran, its charges stand, nothing to resend.
//! Only a call whose pipeline failed (an error, a connection given up) has an unknown fate,
//! and is resent under its id as before.
//!
//! Each call carries a [`Tracker`] (one atomic, set by the batcher); if the call does not
//! end answered, the store keeps the tracker under the call's id until the view asks.
//! Cluster calls go through redis-rs, which tells nothing of a call it was given: they get
//! no tracker, so their fate is [`Fate::Unknown`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::Mutex;

use crate::store::CallId;

/// What became of a call under an id that did not end answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Never sent, and never will be: its hits may be written back like any others.
    NotSent,
    /// Sent (or about to be), not answered yet: it may still run.
    InFlight,
    /// It ran: its charges stand, and nothing of it needs sending again.
    Applied,
    /// Not known: it may or may not have run (resend it under its id).
    Unknown,
}

/// Not handed to a connection yet.
const IDLE: u8 = 0;
/// In a connection's queue.
const QUEUED: u8 = 1;
/// In a pipeline, not answered yet.
const SENT: u8 = 2;
/// Answered: the script ran.
const APPLIED: u8 = 3;
/// Dropped from the queue unsent.
const DROPPED: u8 = 4;
/// Its pipeline failed: it may or may not have run.
const LOST: u8 = 5;

/// Most trackers kept at once: past it, a call's fate is not kept (it is then unknown and
/// resent, as without trackers). Each is an id and a pointer.
const MAX_KEPT: usize = 1 << 16;

/// Where one call is, shared by the caller and the connection's batcher.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tracker(Arc<AtomicU8>);

impl Tracker {
    pub fn queued(&self) {
        self.0.store(QUEUED, Ordering::Release);
    }

    pub fn sent(&self) {
        self.0.store(SENT, Ordering::Release);
    }

    pub fn applied(&self) {
        self.0.store(APPLIED, Ordering::Release);
    }

    pub fn lost(&self) {
        self.0.store(LOST, Ordering::Release);
    }

    fn fate(&self) -> Fate {
        match self.0.load(Ordering::Acquire) {
            IDLE | DROPPED => Fate::NotSent,
            QUEUED | SENT => Fate::InFlight,
            APPLIED => Fate::Applied,
            _ => Fate::Unknown,
        }
    }
}

/// The connection's side of a tracker, carried by the queued job. The batcher says when the
/// job is sent and when it is answered; a job dropped before that says so as it goes:
/// queued, never sent (its caller left before the batch took it, or the connection's task
/// ended first); sent, lost (its pipeline failed).
#[derive(Debug)]
pub(crate) struct Carried(pub Tracker);

impl Drop for Carried {
    fn drop(&mut self) {
        let state = &self.0.0;
        let _ = state.compare_exchange(QUEUED, DROPPED, Ordering::AcqRel, Ordering::Acquire);
        let _ = state.compare_exchange(SENT, LOST, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The trackers of calls that did not end answered, by id.
#[derive(Default)]
pub(crate) struct Fates(Mutex<HashMap<CallId, Tracker>>);

impl Fates {
    fn keep(&self, id: CallId, tracker: Tracker) {
        let mut map = self.0.lock();
        if map.len() < MAX_KEPT {
            map.insert(id, tracker);
        }
    }

    /// The fate of the call under `id`, if its tracker is kept.
    pub fn peek(&self, id: CallId) -> Option<Fate> {
        self.0.lock().get(&id).map(Tracker::fate)
    }

    pub fn forget(&self, id: CallId) {
        self.0.lock().remove(&id);
    }

    /// The fate of the call under `id`; forgotten once settled (anything but in flight).
    pub fn take(&self, id: CallId) -> Fate {
        let fate = self.peek(id).unwrap_or(Fate::Unknown);
        if fate != Fate::InFlight {
            self.forget(id);
        }
        fate
    }

    /// Watch the call under `id`.
    pub fn watch(&self, id: CallId) -> Watch<'_> {
        Watch {
            fates: self,
            id,
            tracker: Some(Tracker::default()),
        }
    }
}

/// A call in progress: unless [`Watch::answered`], its tracker is kept when this drops
/// (the call failed, or its future was dropped at the caller's deadline).
pub(crate) struct Watch<'a> {
    fates: &'a Fates,
    id: CallId,
    tracker: Option<Tracker>,
}

impl Watch<'_> {
    pub fn tracker(&self) -> Option<&Tracker> {
        self.tracker.as_ref()
    }

    pub fn answered(mut self) {
        self.tracker = None;
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.tracker.take() {
            self.fates.keep(self.id, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call under `id` whose caller left: its tracker, kept.
    fn left(fates: &Fates, id: u64) -> Tracker {
        let w = fates.watch(CallId(id));
        let t = w.tracker().expect("tracker").clone();
        drop(w);
        t
    }

    #[test]
    fn a_call_answered_keeps_nothing_and_one_left_is_kept_until_settled() {
        let fates = Fates::default();
        let w = fates.watch(CallId(1));
        w.tracker().expect("tracker").applied();
        w.answered();
        assert_eq!(fates.take(CallId(1)), Fate::Unknown, "nothing kept");

        left(&fates, 2);
        assert_eq!(fates.take(CallId(2)), Fate::NotSent, "never handed over");
        assert_eq!(
            fates.take(CallId(2)),
            Fate::Unknown,
            "forgotten once settled"
        );

        let t = left(&fates, 3);
        t.queued();
        assert_eq!(fates.take(CallId(3)), Fate::InFlight);
        t.sent();
        assert_eq!(
            fates.take(CallId(3)),
            Fate::InFlight,
            "kept while in flight"
        );
        t.applied();
        assert_eq!(fates.take(CallId(3)), Fate::Applied);

        let t = left(&fates, 5);
        t.queued();
        t.sent();
        t.lost();
        assert_eq!(fates.take(CallId(5)), Fate::Unknown, "its script failed");
        // A job dropped queued (its caller left, or the connection's task ended), or sent
        // (its pipeline failed).
        for (id, sent, fate) in [(7, false, Fate::NotSent), (8, true, Fate::Unknown)] {
            let t = left(&fates, id);
            t.queued();
            if sent {
                t.sent();
            }
            drop(Carried(t));
            assert_eq!(fates.take(CallId(id)), fate);
        }
        let t = left(&fates, 9);
        t.queued();
        t.sent();
        t.applied();
        drop(Carried(t));
        assert_eq!(fates.take(CallId(9)), Fate::Applied, "an end set stays");
        assert_eq!(
            fates.take(CallId(6)),
            Fate::Unknown,
            "never watched (a cluster call): unknown"
        );
    }
}
