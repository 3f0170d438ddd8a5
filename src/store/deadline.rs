//! The caller's deadline, as the store sees it: a store call made inside [`within`] is bounded
//! by the instant given there (what the caller's `grpc-timeout` leaves, less a margin to
//! answer), one made outside it by the store's own timeout (`--redis-timeout`).
//!
//! Why a task-local and not a parameter: between the service, which knows the deadline, and
//! the Redis store, which needs it, are the limiter, the local view and the per-second split,
//! none of which reads it; a parameter through each would change every `Store` method for one
//! store's benefit. A task-local is how a request's context travels with it (as a tracing span
//! does): futures joined in the request's task see it, and off-request work (write-backs,
//! health probes, admin commands) never has one.

use std::future::Future;
use std::time::{Duration, Instant};

tokio::task_local! {
    static DEADLINE: Instant;
}

/// Run `f` with its store calls bounded by `deadline` (none: each store's own timeout).
pub async fn within<F: Future>(deadline: Option<Instant>, f: F) -> F::Output {
    match deadline {
        Some(d) => DEADLINE.scope(d, f).await,
        None => f.await,
    }
}

/// When a store call starting now must end: the deadline of the enclosing [`within`], else
/// `default` from now.
pub fn of_call(default: Duration) -> Instant {
    DEADLINE
        .try_with(|d| *d)
        .unwrap_or_else(|_| Instant::now() + default)
}

/// Whether store calls made now are bounded by a caller's deadline (inside [`within`] with
/// one), rather than by the store's own timeout.
pub fn is_callers() -> bool {
    DEADLINE.try_with(|_| ()).is_ok()
}

/// The caller's deadline (of the enclosing [`within`]) has passed: a store call made now
/// would make no round trip. False without a caller's deadline.
pub fn passed() -> bool {
    DEADLINE.try_with(|d| *d <= Instant::now()).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn inside_the_scope_the_callers_deadline_outside_the_default() {
        let d = Instant::now() + Duration::from_millis(7);
        let inside = within(Some(d), async { of_call(Duration::from_secs(60)) }).await;
        assert_eq!(inside, d);
        let before = Instant::now();
        let outside = within(None, async { of_call(Duration::from_secs(60)) }).await;
        assert!(outside >= before + Duration::from_secs(60));
        let joined = within(Some(d), async {
            let (a, b) = futures::join!(async { of_call(Duration::ZERO) }, async {
                of_call(Duration::ZERO)
            });
            (a, b)
        })
        .await;
        assert_eq!(
            joined,
            (d, d),
            "joined futures share the request's deadline"
        );
        assert!(within(Some(d), async { is_callers() }).await);
        assert!(!within(None, async { is_callers() }).await);
        let gone = Instant::now();
        assert!(within(Some(gone), async { passed() }).await);
        assert!(!within(Some(d + Duration::from_secs(60)), async { passed() }).await);
        assert!(!within(None, async { passed() }).await);
    }
}
