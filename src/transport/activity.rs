//! Whether a connection is idle: requests started and finished on it, counted by a thin
//! wrapper around the service, and read by the connection's idle timer.
//!
//! Per request: one increment when it starts and one when its response future completes or
//! is dropped (plus the `Arc` clone that carries the counters into the future), all on the
//! connection's own cache line. The timer never touches the request path: it samples the
//! counters every quarter of the idle timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

#[derive(Default)]
pub(super) struct Activity {
    started: AtomicU64,
    finished: AtomicU64,
}

/// A hyper service that counts its requests into an [`Activity`].
pub(super) struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    pub(super) fn new(inner: S, activity: Arc<Activity>) -> Self {
        Tracked { inner, activity }
    }
}

impl<S, R> hyper::service::Service<R> for Tracked<S>
where
    S: hyper::service::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    fn call(&self, req: R) -> Self::Future {
        self.activity.started.fetch_add(1, Relaxed);
        TrackedFuture {
            inner: self.inner.call(req),
            _done: Done(self.activity.clone()),
        }
    }
}

/// Counts the request finished when dropped (completed, failed or cancelled alike).
struct Done(Arc<Activity>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.finished.fetch_add(1, Relaxed);
    }
}

pin_project_lite::pin_project! {
    pub(super) struct TrackedFuture<F> {
        #[pin]
        inner: F,
        _done: Done,
    }
}

impl<F: Future> Future for TrackedFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}

/// The idle timer's view: quiet since when.
pub(super) struct IdleWatch {
    timeout: Duration,
    last_started: u64,
    quiet_since: Instant,
}

impl IdleWatch {
    pub(super) fn new(timeout: Duration, now: Instant) -> Self {
        IdleWatch {
            timeout,
            last_started: 0,
            quiet_since: now,
        }
    }

    /// How often to sample: the timeout is overshot by at most this.
    pub(super) fn period(&self) -> Duration {
        (self.timeout / 4).max(Duration::from_millis(5))
    }

    /// Sample the counters; true once nothing was in flight or started for `timeout`.
    pub(super) fn idle(&mut self, activity: &Activity, now: Instant) -> bool {
        let started = activity.started.load(Relaxed);
        let finished = activity.finished.load(Relaxed);
        if started != self.last_started || started != finished {
            self.last_started = started;
            self.quiet_since = now;
            return false;
        }
        now.duration_since(self.quiet_since) >= self.timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_only_after_a_quiet_timeout() {
        let a = Activity::default();
        let t0 = Instant::now();
        let mut w = IdleWatch::new(Duration::from_secs(10), t0);
        assert!(!w.idle(&a, t0 + Duration::from_secs(9)));
        assert!(w.idle(&a, t0 + Duration::from_secs(10)));

        // A request in flight keeps it busy however long it takes.
        a.started.fetch_add(1, Relaxed);
        assert!(!w.idle(&a, t0 + Duration::from_secs(11)));
        assert!(!w.idle(&a, t0 + Duration::from_secs(100)));
        // Finished: quiet since the last sample that saw it busy.
        a.finished.fetch_add(1, Relaxed);
        assert!(!w.idle(&a, t0 + Duration::from_secs(105)));
        assert!(w.idle(&a, t0 + Duration::from_secs(110)));

        // A request that started and finished between two samples counts as activity.
        a.started.fetch_add(1, Relaxed);
        a.finished.fetch_add(1, Relaxed);
        assert!(!w.idle(&a, t0 + Duration::from_secs(200)));
        assert!(w.idle(&a, t0 + Duration::from_secs(210)));
    }
}
