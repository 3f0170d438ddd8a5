//! Unit and property tests of the algorithms and the check protocol, with hand-computed
//! expectations from docs/explanation/algorithms.md. [`Lab`] drives [`evaluate`] the way the memory
//! store does (one state per limit, dead states dropped) at an explicit `now`.

mod buckets;
mod fixed_window;
mod multiplier;
mod props;
mod protocol;
mod sliding_log;
mod sliding_window;

use super::{LimitState, evaluate};
use crate::limit::{Algorithm, Check, LimitResult, LimitSpec, StateTag, Unit};

/// A minute-aligned instant (so second and minute windows start here).
pub(super) const T0: u64 = 1_700_000_040_000;

pub(super) fn burst(mut s: LimitSpec, burst: u64) -> LimitSpec {
    s.burst = burst;
    s
}

pub(super) fn overdraft(mut s: LimitSpec, on: bool) -> LimitSpec {
    s.overdraft = on;
    s
}

pub(super) fn penalty(mut s: LimitSpec, ms: u64) -> LimitSpec {
    s.penalty_ms = ms;
    s
}

pub(super) fn slot(mut s: LimitSpec, slot: u8) -> LimitSpec {
    s.slot = slot;
    s
}

/// An admitted hit's result.
pub(super) fn ok(remaining: u64, reset_ms: u64, used_before: u64) -> LimitResult {
    LimitResult {
        allowed: true,
        remaining,
        reset_ms,
        retry_ms: None,
        used_before,
        penalized: false,
    }
}

/// A denied (unpenalized) hit's result.
pub(super) fn denied(reset_ms: u64, retry_ms: Option<u64>, used_before: u64) -> LimitResult {
    LimitResult {
        allowed: false,
        remaining: 0,
        reset_ms,
        retry_ms,
        used_before,
        penalized: false,
    }
}

/// The states of one descriptor's limits and a clock.
#[derive(Clone, Debug)]
pub(super) struct Lab {
    pub limits: Vec<LimitSpec>,
    pub states: Vec<LimitState>,
    pub now: u64,
}

impl Lab {
    pub fn new(limits: Vec<LimitSpec>) -> Lab {
        let states = vec![LimitState::default(); limits.len()];
        Lab {
            limits,
            states,
            now: T0,
        }
    }

    pub fn one(spec: LimitSpec) -> Lab {
        Lab::new(vec![spec])
    }

    pub fn at(&mut self, now: u64) -> &mut Lab {
        self.now = now;
        self
    }

    pub fn advance(&mut self, ms: u64) -> &mut Lab {
        self.now += ms;
        self
    }

    /// One check of every limit; the store's view: dead states are dropped afterwards.
    pub fn run(&mut self, cost: u64, refund: bool) -> Vec<LimitResult> {
        let check = Check {
            tag: StateTag(7),
            limits: &self.limits,
            cost,
            refund,
        };
        let mut out = Vec::new();
        evaluate(&check, self.now, &mut self.states, &mut out);
        assert_eq!(out.len(), self.limits.len());
        for st in &mut self.states {
            if !st.is_live(self.now) {
                *st = LimitState::default();
            }
        }
        out
    }

    pub fn hit(&mut self, n: u64) -> LimitResult {
        self.run(n, false)[0]
    }

    pub fn refund(&mut self, n: u64) -> LimitResult {
        self.run(n, true)[0]
    }

    pub fn peek(&mut self) -> LimitResult {
        self.run(0, false)[0]
    }

    /// `k` hits of cost 1; how many were allowed.
    pub fn burst(&mut self, k: u64) -> u64 {
        (0..k).filter(|_| self.hit(1).allowed).count() as u64
    }

    /// Asserts a peek changes nothing (but the eviction of what has expired) and returns it.
    pub fn peek_pure(&mut self) -> LimitResult {
        let mut before = self.states.clone();
        for st in &mut before {
            if !st.is_live(self.now) {
                *st = LimitState::default();
            }
        }
        let r = self.peek();
        assert_eq!(before, self.states, "a peek wrote");
        r
    }

    /// For a denied hit of cost `n` with `retry` at `now`: still denied at `now + retry − 1`,
    /// allowed at `now + retry` (on copies: the lab itself is unchanged).
    pub fn assert_retry_exact(&self, n: u64, retry: u64) {
        assert!(retry > 0, "retry 0");
        let mut early = self.clone();
        early.now += retry - 1;
        assert!(
            !early.run(n, false)[0].allowed,
            "allowed 1 ms before retry {retry}"
        );
        let mut on_time = self.clone();
        on_time.now += retry;
        assert!(on_time.run(n, false)[0].allowed, "denied at retry {retry}");
    }
}
