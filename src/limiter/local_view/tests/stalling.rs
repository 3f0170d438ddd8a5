//! The store the local view's tests run against: a memory store behind a switch that, while
//! stalled, queues every call and fails it (the answer lost), or hangs it, then runs the
//! queue when it resumes (or drops it: killed), honouring ids as the Redis script does: the
//! first send of an id applies, later ones only report; or, while down, refuses every call.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::limit::{Charge, Check, LimitResult, LimitSpec, ManualClock, StateTag};
use crate::store::memory::MemoryStore;
use crate::store::{Call, CallId, Ids, Store, StoreError};

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Up,
    /// Every call refused, nothing run.
    Down,
    /// Calls are taken, not answered: queued, failed with a timeout.
    Stalled,
    /// Calls are taken and never answered: queued, and the caller waits until it gives up.
    Hung,
    /// Each call, at random: run and answered; run with its answer lost; queued with its
    /// answer lost (run on resume, or never); refused without running.
    Chaos,
}

/// A call as the store received it.
pub struct Queued {
    id: Option<CallId>,
    checks: Vec<(StateTag, Vec<LimitSpec>, u64, bool)>,
    charge: Charge,
}

pub struct Stalling {
    store: MemoryStore,
    state: Mutex<State>,
    seen: Mutex<HashSet<CallId>>,
    pub queue: Mutex<Vec<Queued>>,
    /// xorshift state for [`State::Chaos`].
    rng: AtomicU64,
}

impl Stalling {
    pub fn new(clock: Arc<ManualClock>) -> Stalling {
        Stalling {
            store: MemoryStore::new(clock),
            state: Mutex::new(State::Up),
            seen: Mutex::new(HashSet::new()),
            queue: Mutex::new(Vec::new()),
            rng: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
        }
    }

    /// One of 10, at random (deterministic per seed).
    fn roll(&self) -> u64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        x % 10
    }

    /// Every call from now on at random (see [`State::Chaos`]), from `seed`.
    pub fn chaos(&self, seed: u64) {
        self.rng.store(seed.max(1), Ordering::Relaxed);
        *self.state.lock() = State::Chaos;
    }

    /// Run a call: once per id (a repeated id only reports).
    async fn apply(
        &self,
        id: Option<CallId>,
        checks: &[Check<'_>],
        charge: Charge,
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        let first = id.is_none_or(|id| self.seen.lock().insert(id));
        if first {
            let call = Call {
                charge,
                ..Call::new(checks)
            };
            return self.store.run(&call, out).await;
        }
        let peeks: Vec<Check<'_>> = checks
            .iter()
            .map(|c| Check {
                cost: 0,
                refund: false,
                ..*c
            })
            .collect();
        self.store.run(&Call::new(&peeks), out).await
    }

    /// Take a call: run it, or queue it and lose its answer.
    async fn take(
        &self,
        id: Option<CallId>,
        checks: &[Check<'_>],
        charge: Charge,
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        let state = *self.state.lock();
        if state == State::Down {
            return Err(StoreError::Unavailable("switched off".into()));
        }
        if state == State::Chaos {
            match self.roll() {
                0..=5 => return self.apply(id, checks, charge, out).await,
                6 => {
                    let mut lost = Vec::new();
                    self.apply(id, checks, charge, &mut lost).await?;
                    return Err(StoreError::Timeout(Duration::from_millis(10)));
                }
                9 => return Err(StoreError::Unavailable("refused".into())),
                // The calls waiting so far run now (a stall ends), this one waits.
                8 => self.run_queue().await,
                _ => {}
            }
        }
        if state == State::Up {
            return self.apply(id, checks, charge, out).await;
        }
        self.queue.lock().push(Queued {
            id,
            checks: checks
                .iter()
                .map(|c| (c.tag, c.limits.to_vec(), c.cost, c.refund))
                .collect(),
            charge,
        });
        if state == State::Hung {
            std::future::pending::<()>().await;
        }
        Err(StoreError::Timeout(Duration::from_millis(10)))
    }

    pub fn stall(&self) {
        *self.state.lock() = State::Stalled;
    }

    pub fn down(&self) {
        *self.state.lock() = State::Down;
    }

    pub fn hang(&self) {
        *self.state.lock() = State::Hung;
    }

    /// Answer again; the calls taken meanwhile run now, in order (`run_queue`), or never.
    pub async fn resume(&self, run_queue: bool) {
        *self.state.lock() = State::Up;
        if run_queue {
            self.run_queue().await;
        } else {
            self.queue.lock().clear();
        }
    }

    /// Run the calls taken so far, in order.
    async fn run_queue(&self) {
        let queue = std::mem::take(&mut *self.queue.lock());
        for q in queue {
            let checks: Vec<Check<'_>> = q
                .checks
                .iter()
                .map(|(tag, limits, cost, refund)| Check {
                    tag: *tag,
                    limits,
                    cost: *cost,
                    refund: *refund,
                })
                .collect();
            let mut out = Vec::new();
            self.apply(q.id, &checks, q.charge, &mut out)
                .await
                .expect("memory");
        }
    }

    /// What the store holds for `tag`: the usage a peek reports.
    pub async fn used(&self, tag: u128, limits: &[LimitSpec]) -> u64 {
        self.peek(tag, limits).await.used_before
    }

    /// What the store holds for `tag`: the room a peek reports.
    pub async fn remaining(&self, tag: u128, limits: &[LimitSpec]) -> u64 {
        self.peek(tag, limits).await.remaining
    }

    async fn peek(&self, tag: u128, limits: &[LimitSpec]) -> LimitResult {
        let mut out = Vec::new();
        let check = [Check {
            tag: StateTag(tag),
            limits,
            cost: 0,
            refund: false,
        }];
        let call = Call::new(&check);
        self.store.run(&call, &mut out).await.expect("memory");
        out[0]
    }
}

impl Store for Stalling {
    /// A write-back's batches are taken one by one, each under its id.
    async fn run(&self, call: &Call<'_>, out: &mut Vec<LimitResult>) -> Result<(), StoreError> {
        let batches = match call.ids {
            Ids::Unnamed => return self.take(None, call.checks, call.charge, out).await,
            Ids::Request(id) => return self.take(Some(id), call.checks, call.charge, out).await,
            Ids::WriteBack(batches) => batches,
        };
        let mut failed = None;
        let mut rest = call.checks;
        for &(id, n) in batches {
            let (checks, after) = rest.split_at(n);
            rest = after;
            if let Err(e) = self.take(Some(id), checks, Charge::Each, out).await {
                failed = Some(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    async fn reset(&self, tag: StateTag, limits: &[LimitSpec]) -> Result<u64, StoreError> {
        self.store.reset(tag, limits).await
    }

    fn is_ready(&self) -> bool {
        *self.state.lock() == State::Up
    }
}
