//! The accept loop: a permit per open connection (the cap), back-off when `accept` fails
//! for lack of resources, a task per connection; on drain, the listening socket closes and
//! the loop waits until every permit is back.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::socket::{Accepted, Socket};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// First pause after a failed accept; doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// While accepts keep failing, say so at most this often.
const REPEAT_LOG: Duration = Duration::from_secs(10);

/// Accept until `drain`; `spawn` starts a connection's task, which holds the permit.
pub(super) async fn run(
    listener: Socket,
    name: &'static str,
    max_connections: usize,
    spawn: impl Fn(Accepted, CancellationToken, OwnedSemaphorePermit),
    drain: CancellationToken,
) {
    // acquire_many below takes a u32.
    let cap = max_connections.clamp(1, (u32::MAX as usize).min(Semaphore::MAX_PERMITS));
    let permits = Arc::new(Semaphore::new(cap));
    let mut failures = Failures::default();
    let mut at_cap_logged = false;
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => {
                at_cap_logged = false;
                p
            }
            Err(_) => {
                if !at_cap_logged {
                    tracing::warn!(
                        listener = name,
                        max_connections = cap,
                        "connection cap reached; accepting again when one closes"
                    );
                    at_cap_logged = true;
                }
                tokio::select! {
                    _ = drain.cancelled() => break,
                    p = permits.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                }
            }
        };
        let accepted = tokio::select! {
            _ = drain.cancelled() => break,
            r = listener.accept() => r,
        };
        match accepted {
            Ok(conn) => {
                failures.recovered(name);
                spawn(conn, drain.clone(), permit);
            }
            // The peer gave up between SYN and accept: nothing to wait for.
            Err(e) if per_connection(&e) => {
                tracing::debug!(listener = name, error = %e, "accept: connection dropped");
            }
            Err(e) => {
                let pause = failures.failed(name, &e);
                tokio::select! {
                    _ = drain.cancelled() => break,
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
    // Closes the socket (and removes a unix socket's file).
    drop(listener);
    // Every connection task holds a permit until it ends.
    let _ = permits.acquire_many(cap as u32).await;
}

/// Errors that concern one connection, not the listener.
fn per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// A run of failed accepts (EMFILE, ENFILE, ENOBUFS, ENOMEM …): how long to pause, and
/// when to log.
#[derive(Default)]
struct Failures {
    count: u64,
    backoff: Duration,
    last_log: Option<Instant>,
}

impl Failures {
    fn failed(&mut self, name: &str, e: &io::Error) -> Duration {
        self.count += 1;
        self.backoff = if self.count == 1 {
            MIN_BACKOFF
        } else {
            (self.backoff * 2).min(MAX_BACKOFF)
        };
        let now = Instant::now();
        if self
            .last_log
            .is_none_or(|t| now.duration_since(t) >= REPEAT_LOG)
        {
            self.last_log = Some(now);
            tracing::warn!(
                listener = name,
                error = %e,
                failures = self.count,
                retry_in = ?self.backoff,
                "accept failed; backing off (out of file descriptors? raise `ulimit -n` or \
                 lower --max-connections)"
            );
        }
        self.backoff
    }

    fn recovered(&mut self, name: &str) {
        if self.count > 0 {
            tracing::info!(
                listener = name,
                failures = self.count,
                "accepting connections again"
            );
            *self = Failures::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_resets_on_success() {
        let mut f = Failures::default();
        let e = io::Error::from_raw_os_error(24);
        let pauses: Vec<_> = (0..10).map(|_| f.failed("t", &e)).collect();
        assert_eq!(pauses[0], MIN_BACKOFF);
        assert_eq!(pauses[1], MIN_BACKOFF * 2);
        assert_eq!(*pauses.last().unwrap(), MAX_BACKOFF);
        f.recovered("t");
        assert_eq!(f.failed("t", &e), MIN_BACKOFF);
    }

    #[test]
    fn emfile_is_a_listener_error_and_a_reset_is_not() {
        assert!(!per_connection(&io::Error::from_raw_os_error(24)));
        assert!(per_connection(&io::Error::from(
            io::ErrorKind::ConnectionAborted
        )));
    }
}
