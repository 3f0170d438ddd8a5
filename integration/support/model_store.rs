//! The document model as a [`Store`]: the check protocol of `docs/explanation/algorithms.md` ("One
//! check") over the per-algorithm functions of `model.rs`, with whole-state copies.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use sluice::limit::{Charge, Check, Clock, LimitResult, LimitSpec, StateIdentity, StateTag};
use sluice::store::{Call, Store, StoreError};

use super::model::{P, St, Work, fits, load, remaining, reset, retry, save, used_before};
use super::model::{charge, refund};

type Key = (StateTag, StateIdentity);

/// The oracle store.
pub struct ModelStore {
    clock: Arc<dyn Clock>,
    state: Mutex<HashMap<Key, St>>,
    locks: Mutex<HashMap<Key, i128>>,
}

impl ModelStore {
    pub fn new(clock: Arc<dyn Clock>) -> ModelStore {
        ModelStore {
            clock,
            state: Mutex::new(HashMap::new()),
            locks: Mutex::new(HashMap::new()),
        }
    }

    fn check(&self, now: i128, check: &Check<'_>, out: &mut Vec<LimitResult>) {
        let mut state = self.state.lock();
        let mut locks = self.locks.lock();
        let n = i128::from(check.cost);
        let ps: Vec<P> = check.limits.iter().map(P::of).collect();
        let keys: Vec<Key> = check
            .limits
            .iter()
            .map(|s| (check.tag, s.identity()))
            .collect();
        let mut ws: Vec<Work> = ps
            .iter()
            .zip(&keys)
            .map(|(p, k)| load(p, state.get(k), now))
            .collect();
        let used: Vec<i128> = ws.iter().zip(&ps).map(|(w, p)| used_before(w, p)).collect();
        let k = ps.len();
        let mut ok = vec![true; k];
        let mut lock_left: Vec<Option<i128>> = vec![None; k];
        let mut locked = vec![false; k];
        // Step 6. An inert bucket (`R = 0`) saves nothing: its stored state is left alone
        // (it applies again once `R > 0`), not deleted.
        let put = |state: &mut HashMap<Key, St>, key: Key, w: &Work, p: &P| match w {
            Work::Inert => {}
            _ => match save(w, p, now) {
                Some(s) => {
                    state.insert(key, s);
                }
                None => {
                    state.remove(&key);
                }
            },
        };
        if check.refund {
            if n > 0 {
                for i in 0..k {
                    refund(&mut ws[i], &ps[i], n);
                    put(&mut state, keys[i].clone(), &ws[i], &ps[i]);
                }
            }
        } else {
            for i in 0..k {
                if check.limits[i].penalty_ms > 0
                    && let Some(until) = locks.get(&keys[i])
                    && *until > now
                {
                    lock_left[i] = Some(until - now);
                }
            }
            let any_pen = lock_left.iter().any(Option::is_some);
            for i in 0..k {
                ok[i] = lock_left[i].is_none() && fits(&ws[i], &ps[i], n);
            }
            let all_ok = ok.iter().all(|o| *o);
            if n > 0 && !any_pen {
                for i in 0..k {
                    if all_ok || check.limits[i].overdraft {
                        charge(&mut ws[i], &ps[i], n, now);
                        put(&mut state, keys[i].clone(), &ws[i], &ps[i]);
                    }
                }
                if !all_ok {
                    for i in 0..k {
                        let pen = i128::from(check.limits[i].penalty_ms);
                        if pen > 0 && !ok[i] {
                            locks.insert(keys[i].clone(), now + pen);
                            locked[i] = true;
                        }
                    }
                }
            }
        }
        for i in 0..k {
            let (p, w) = (&ps[i], &ws[i]);
            let (remaining, retry_ms, penalized) = if ok[i] {
                (remaining(w, p), None, false)
            } else if let Some(left) = lock_left[i] {
                (0, Some(left), true)
            } else {
                let pen = i128::from(check.limits[i].penalty_ms);
                let r = retry(w, p, n, now).map(|r| if locked[i] { r.max(pen) } else { r });
                (0, r, false)
            };
            out.push(LimitResult {
                allowed: ok[i],
                remaining: remaining as u64,
                reset_ms: reset(w, p, now) as u64,
                retry_ms: retry_ms.map(|r| r as u64),
                used_before: used[i] as u64,
                penalized,
            });
        }
    }
}

impl Store for ModelStore {
    /// The model knows only [`Charge::Each`]; stop-increment is held equal between the two
    /// real stores by the conformance suite.
    async fn run(&self, call: &Call<'_>, out: &mut Vec<LimitResult>) -> Result<(), StoreError> {
        assert_eq!(
            call.charge,
            Charge::Each,
            "the document model has no stop-increment"
        );
        let now = i128::from(self.clock.now_ms());
        for c in call.checks {
            self.check(now, c, out);
        }
        Ok(())
    }

    async fn reset(&self, tag: StateTag, limits: &[LimitSpec]) -> Result<u64, StoreError> {
        let (mut state, mut locks) = (self.state.lock(), self.locks.lock());
        let mut removed = 0;
        for key in limits.iter().map(|s| (tag, s.identity())) {
            removed += u64::from(state.remove(&key).is_some());
            removed += u64::from(locks.remove(&key).is_some());
        }
        Ok(removed)
    }
}
