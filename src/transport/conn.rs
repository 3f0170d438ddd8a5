//! One connection, start to end: TLS handshake and HTTP/2 preface under the header deadline,
//! then hyper (on HTTP/2, reading through `authority.rs`), watched by the idle timer, the maximum age and the drain signal.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::{http1, http2};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::AsyncReadExt;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::activity::{Activity, IdleWatch, Tracked};
use super::authority::LenientAuthority;
use super::io::{Prefixed, Stream};
use super::socket::Accepted;
use super::{ConnLimits, Protocol};
use crate::tls::ServerTls;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What every connection of a listener shares.
pub(super) struct Shared<S> {
    pub(super) name: &'static str,
    protocol: Protocol,
    tls: Option<Arc<ServerTls>>,
    pub(super) limits: ConnLimits,
    service: S,
    h1: http1::Builder,
    h2: http2::Builder<TokioExecutor>,
}

impl<S> Shared<S> {
    pub(super) fn new(
        name: &'static str,
        protocol: Protocol,
        tls: Option<Arc<ServerTls>>,
        limits: ConnLimits,
        service: S,
    ) -> Self {
        let mut h1 = http1::Builder::new();
        // hyper restarts this deadline whenever it waits for a request's head, so it also
        // bounds the wait between kept-alive requests.
        h1.timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .keep_alive(true);
        let mut h2 = http2::Builder::new(TokioExecutor::new());
        h2.timer(TokioTimer::new())
            .max_concurrent_streams(limits.max_concurrent_streams)
            .max_pending_accept_reset_streams(reset_allowance(limits.max_concurrent_streams))
            .keep_alive_interval(limits.keepalive_interval)
            .keep_alive_timeout(limits.keepalive_timeout);
        Shared {
            name,
            protocol,
            tls,
            limits,
            service,
            h1,
            h2,
        }
    }
}

/// How many streams a client may reset before this side has accepted them, before the
/// connection is closed with `ENHANCE_YOUR_CALM` (h2's guard against "rapid reset" floods,
/// 20 by default). A legitimate client resets every call it gives up on, and opens the next
/// at once (a reset stream frees its place under the stream limit): under overload, with this
/// side's accept loop short of CPU, hundreds can be reset before one is accepted. At 20, and
/// still at 64, every overload tore connections down one after another (measured at 2×
/// capacity, 16 streams per connection: 306 in 4 s), each failing every call on it and
/// reconnecting. The guard stays, at a size that only a flood reaches: a reset stream waiting
/// to be accepted costs a few hundred bytes, and is refused without store work once accepted.
fn reset_allowance(max_concurrent_streams: u32) -> usize {
    (max_concurrent_streams as usize)
        .saturating_mul(4)
        .clamp(1024, 4096)
}

/// Serve one accepted connection; the permit is its place under the connection cap.
pub(super) async fn serve<S, B>(
    conn: Accepted,
    shared: Arc<Shared<S>>,
    drain: CancellationToken,
    permit: OwnedSemaphorePermit,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let _permit = permit;
    let started = Instant::now();
    let deadline = started + shared.limits.header_timeout;
    let io = tokio::select! {
        // Half-open connections do not hold a drain up.
        _ = drain.cancelled() => return,
        r = tokio::time::timeout_at(deadline, handshake(conn, &shared)) => match r {
            Ok(Ok(io)) => io,
            Ok(Err(e)) => {
                tracing::debug!(listener = shared.name, error = %e, "connection closed before its first request");
                return;
            }
            Err(_) => {
                tracing::debug!(listener = shared.name, "handshake timed out; closing");
                return;
            }
        },
    };
    let activity = Arc::new(Activity::default());
    let service = Tracked::new(shared.service.clone(), activity.clone());
    match shared.protocol {
        Protocol::Http1 => {
            let conn = shared.h1.serve_connection(TokioIo::new(io), service);
            drive(
                conn,
                |c| c.graceful_shutdown(),
                &shared,
                &activity,
                &drain,
                started,
            )
            .await;
        }
        Protocol::Http2 => {
            let io = TokioIo::new(LenientAuthority::new(H2_PREFACE.len(), io));
            let conn = shared.h2.serve_connection(io, service);
            drive(
                conn,
                |c| c.graceful_shutdown(),
                &shared,
                &activity,
                &drain,
                started,
            )
            .await;
        }
    }
}

const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// TLS (when configured), then for HTTP/2 the client's connection preface.
async fn handshake<S>(conn: Accepted, shared: &Shared<S>) -> std::io::Result<Prefixed<Stream>> {
    let acceptor = || {
        shared
            .tls
            .as_ref()
            .map(|t| tokio_rustls::TlsAcceptor::from(t.config()))
    };
    let mut stream = match (conn, acceptor()) {
        (Accepted::Tcp(tcp), None) => Stream::Plain(tcp),
        (Accepted::Tcp(tcp), Some(a)) => Stream::Tls(Box::new(a.accept(tcp).await?)),
        (Accepted::Unix(unix), None) => Stream::Unix(unix),
        (Accepted::Unix(unix), Some(a)) => Stream::UnixTls(Box::new(a.accept(unix).await?)),
    };
    let prefix = match shared.protocol {
        Protocol::Http1 => Vec::new(),
        Protocol::Http2 => {
            let mut preface = vec![0u8; H2_PREFACE.len()];
            stream.read_exact(&mut preface).await?;
            if preface != H2_PREFACE {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "not an HTTP/2 connection preface",
                ));
            }
            preface
        }
    };
    Ok(Prefixed::new(prefix, stream))
}

/// On drain, a connection with nothing in flight for this long is dropped: an HTTP/1
/// client halfway through its headers, or an HTTP/2 peer that never answers the GOAWAY's
/// PING, must not hold the process for the whole grace period.
const DRAIN_LINGER: Duration = Duration::from_millis(500);

/// Run a hyper connection to its end. Closing starts (GOAWAY on HTTP/2, close after the
/// current response on HTTP/1) on drain, after the idle timeout, or at the maximum age; a
/// connection that started closing on its own timers is dropped after a deadline (the age
/// grace, or the header timeout for an idle one whose peer does not finish the exchange),
/// and a draining one as soon as nothing is in flight for [`DRAIN_LINGER`].
async fn drive<C, S>(
    conn: C,
    graceful: impl Fn(Pin<&mut C>),
    shared: &Shared<S>,
    activity: &Activity,
    drain: &CancellationToken,
    started: Instant,
) where
    C: Future<Output = hyper::Result<()>>,
{
    let limits = &shared.limits;
    let mut conn = pin!(conn);
    let now = Instant::now();
    // The quiet-time watch: the idle timeout, or DRAIN_LINGER once draining.
    let mut quiet = limits.idle_timeout.map(|t| IdleWatch::new(t, now));
    let mut quiet_check = quiet.as_ref().map(|w| now + w.period());
    let mut age_at = match shared.protocol {
        Protocol::Http2 => limits.max_age.map(|age| started + jittered(age)),
        Protocol::Http1 => None,
    };
    let mut force_at: Option<Instant> = None;
    let mut closing = false;
    let mut draining = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(listener = shared.name, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = drain.cancelled(), if !draining => {
                if !closing {
                    graceful(conn.as_mut());
                    closing = true;
                }
                draining = true;
                let now = Instant::now();
                let w = IdleWatch::new(DRAIN_LINGER, now);
                quiet_check = Some(now + w.period());
                quiet = Some(w);
            }
            _ = at(age_at), if !closing => {
                tracing::debug!(listener = shared.name, "maximum connection age: GOAWAY");
                graceful(conn.as_mut());
                closing = true;
                age_at = None;
                force_at = Some(Instant::now() + limits.max_age_grace);
            }
            _ = at(quiet_check) => {
                let now = Instant::now();
                let Some(w) = quiet.as_mut() else { continue };
                if !w.idle(activity, now) {
                    quiet_check = Some(now + w.period());
                } else if draining {
                    tracing::debug!(listener = shared.name, "draining: nothing in flight; closing");
                    return;
                } else {
                    tracing::debug!(listener = shared.name, "idle timeout: closing");
                    if !closing {
                        graceful(conn.as_mut());
                        closing = true;
                    }
                    quiet_check = None;
                    let deadline = now + limits.header_timeout;
                    force_at = Some(force_at.map_or(deadline, |f| f.min(deadline)));
                }
            }
            _ = at(force_at) => {
                tracing::debug!(listener = shared.name, "closing deadline passed; dropping the connection");
                return;
            }
        }
    }
}

/// Sleep until `t`, or forever.
async fn at(t: Option<Instant>) {
    match t {
        Some(t) => sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// `age` ±10%, so connections opened together (a fleet of Envoys after a rollout) do not
/// all reconnect together.
fn jittered(age: Duration) -> Duration {
    age.mul_f64(0.9 + 0.2 * crate::limit::random::random_unit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_allowance_follows_the_stream_limit_within_bounds() {
        assert_eq!(reset_allowance(16), 1024);
        assert_eq!(reset_allowance(512), 2048);
        assert_eq!(reset_allowance(u32::MAX), 4096);
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        let age = Duration::from_secs(100);
        for _ in 0..1000 {
            let j = jittered(age);
            assert!(
                j >= Duration::from_secs(90) && j <= Duration::from_secs(110),
                "{j:?}"
            );
        }
    }
}
