//! Exactly once through a store that stalls (`src/limiter/local_view/tests/stalling.rs`):
//! after any order of stalls, resumes and resends, the store holds exactly the hits answered
//! OK.

mod overload;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::super::tests::{Lab, hourly, lab};
use crate::limiter::{Metered, Modes, Outcome, Plan, Sources, decide};

impl Lab {
    async fn hits(&self, tag: u128, limits: &[crate::limit::LimitSpec], n: usize) {
        for _ in 0..n {
            let _ = self.hit(tag, limits, false).await;
        }
    }

    /// Flush until nothing is left to write.
    async fn settle(&self) {
        for _ in 0..4 {
            self.flush().await.expect("store up");
        }
        assert_eq!(self.view.unwritten(), 0);
    }

    /// The stalled store comes back and the resends reach it before the calls it took while
    /// stalled (another connection): those then run, and find their ids taken.
    async fn resends_before_the_late_calls(&self) {
        let late = std::mem::take(&mut *self.store.queue.lock());
        self.store.resume(false).await;
        self.settle().await;
        *self.store.queue.lock() = late;
        self.store.stall();
        self.store.resume(true).await;
    }
}

#[tokio::test]
async fn a_stall_counts_each_admitted_hit_once_when_the_queue_runs_first() {
    let l = lab(true);
    let limits = hourly(1_000_000);
    l.hits(1, &limits, 5).await;
    l.store.stall();
    // The request in flight is lost (decided here, held under its id), then the view
    // decides; two write-backs fail, the second resending the first's batch.
    l.hits(1, &limits, 20).await;
    assert!(l.view.degraded());
    assert!(l.flush().await.is_err());
    l.hits(1, &limits, 20).await;
    assert!(l.flush().await.is_err());
    l.hits(1, &limits, 20).await;
    // Redis resumes: everything it took runs, then the resends find their ids.
    l.store.resume(true).await;
    l.settle().await;
    assert!(!l.view.degraded());
    assert_eq!(l.admitted(), 65);
    assert_eq!(l.store.used(1, &limits).await, 65);
}

#[tokio::test]
async fn a_stall_counts_each_admitted_hit_once_when_the_resends_run_first() {
    let l = lab(true);
    let limits = hourly(1_000_000);
    l.hits(1, &limits, 5).await;
    l.store.stall();
    l.hits(1, &limits, 10).await;
    assert!(l.flush().await.is_err());
    l.hits(1, &limits, 10).await;
    l.resends_before_the_late_calls().await;
    assert_eq!(l.admitted(), 25);
    assert_eq!(l.store.used(1, &limits).await, 25);
}

#[tokio::test]
async fn calls_lost_with_a_stalled_store_are_written_back() {
    let l = lab(true);
    let limits = hourly(1_000_000);
    l.hits(1, &limits, 5).await;
    l.store.stall();
    l.hits(1, &limits, 10).await;
    assert!(l.flush().await.is_err());
    l.hits(2, &limits, 10).await;
    // Killed: what it took never runs.
    l.store.resume(false).await;
    l.settle().await;
    assert_eq!(l.store.used(1, &limits).await, 15);
    assert_eq!(l.store.used(2, &limits).await, 10);
}

#[tokio::test]
async fn a_denial_decided_here_fences_the_lost_call_off() {
    let l = lab(true);
    // Never seen: the share (5 of 10) once the store fails, so 6 hits are denied here,
    // where the store, had it answered, would have admitted them.
    let limits = hourly(10);
    l.store.stall();
    assert!(!l.hit_n(3, &limits, false, 6).await.expect("answered"));
    l.hits(3, &limits, 8).await;
    assert_eq!(l.admitted(), 5);
    // Resent first, the held call (no hits: a denial) fences the original off.
    l.resends_before_the_late_calls().await;
    assert_eq!(l.store.used(3, &limits).await, 5);
}

#[tokio::test]
async fn carried_hits_of_a_lost_call_are_counted_once_without_fallback() {
    let l = lab(false);
    let limits = hourly(1_000_000);
    // Warm: two answers, then local decisions (pending).
    assert!(l.hit(4, &limits, true).await.expect("up"));
    l.clock.advance(60);
    assert!(l.hit(4, &limits, true).await.expect("up"));
    for _ in 0..30 {
        assert!(l.hit(4, &limits, true).await.expect("local"));
    }
    assert_eq!(
        l.view
            .stats
            .batched_decisions
            .load(std::sync::atomic::Ordering::Relaxed),
        30
    );
    // Stale: the next request carries the 30 ahead of its check, and is lost.
    l.clock.advance(2_000);
    l.store.stall();
    assert!(l.hit(4, &limits, true).await.is_err());
    assert_eq!(l.view.unwritten(), 30);
    l.store.resume(true).await;
    l.settle().await;
    // The lost call ran: its carried hits counted once, its check too (not answered, but
    // charged by the store as any call that ran; the resend found the id and only reported).
    assert_eq!(l.admitted(), 32);
    assert_eq!(l.store.used(4, &limits).await, 33);
}

#[tokio::test]
async fn a_request_dropped_mid_call_holds_its_carried_hits() {
    let l = lab(false);
    let limits = hourly(1_000_000);
    assert!(l.hit(5, &limits, true).await.expect("up"));
    l.clock.advance(60);
    assert!(l.hit(5, &limits, true).await.expect("up"));
    for _ in 0..30 {
        assert!(l.hit(5, &limits, true).await.expect("local"));
    }
    l.clock.advance(2_000);
    // The next request carries the 30 and never gets an answer: its caller gives up (a
    // grpc-timeout), dropping it mid-call.
    l.store.hang();
    let gave_up = tokio::time::timeout(Duration::from_millis(20), l.hit(5, &limits, true)).await;
    assert!(gave_up.is_err());
    assert_eq!(l.view.unwritten(), 30, "held, not lost");
    // The call never ran: the 30 are written under its id, its own hit (never answered)
    // fenced off.
    l.store.resume(false).await;
    l.settle().await;
    assert_eq!(l.admitted(), 32);
    assert_eq!(l.store.used(5, &limits).await, 32);
}

/// Many requests at once, each a strict and a batched descriptor, while every store call
/// may run and answer, run and lose its answer, wait to run late, or be refused; write-backs
/// meanwhile. Then the calls still waiting run (or never do): each descriptor holds the hits
/// answered OK.
async fn chaos(seed: u64, run_late: bool) {
    let l = Arc::new(lab(true));
    let limits = hourly(1_000_000_000);
    // Warm: the batched descriptor's rate known.
    l.hits(2, &limits, 1).await;
    l.clock.advance(60);
    l.hits(2, &limits, 1).await;
    let ok = Arc::new([AtomicU64::new(0), AtomicU64::new(2)]);
    l.store.chaos(seed);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flusher = {
        let (l, done) = (l.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let _ = l.flush().await;
                l.clock.advance(40);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (l, ok, limits) = (l.clone(), ok.clone(), limits.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..300 {
                let plans = [1, 2].map(|tag| Plan::Metered(Metered::charge(&limits, tag, 1)));
                let sources = Sources {
                    cache: None,
                    view: Some(&l.view),
                    batched: &[false, true],
                };
                let d = decide(&l.store, sources, &plans, Modes::default(), None).await;
                if let Ok(d) = d {
                    for (i, o) in d.outcomes.iter().enumerate() {
                        if matches!(o, Outcome::Metered(v) if !v.over_limit) {
                            ok[i].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    done.store(true, Ordering::Relaxed);
    flusher.await.expect("flusher");
    l.store.stall();
    l.store.resume(run_late).await;
    l.settle().await;
    let admitted = [ok[0].load(Ordering::Relaxed), ok[1].load(Ordering::Relaxed)];
    let held = [
        l.store.used(1, &limits).await,
        l.store.used(2, &limits).await,
    ];
    assert_eq!(held, admitted, "seed {seed}, late calls run: {run_late}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_counts_each_admitted_hit_once() {
    for seed in 1..=60 {
        chaos(seed * 7919, seed % 2 == 0).await;
    }
}
