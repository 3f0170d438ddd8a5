//! Serving a listener: the accept loop and every connection's life, for any HTTP service
//! (tonic `Routes` on the gRPC port, axum routers on the HTTP, metrics and debug ports, or
//! any other listener that wants the same hygiene).
//!
//! One place holds what a listener facing untrusted clients needs:
//! - TCP or a unix domain socket (`socket.rs`, `unix.rs`: the socket file is created at
//!   bind, a stale one replaced, and removed when the listener closes);
//! - a cap on open connections (accepting pauses at the cap, so the kernel backlog absorbs
//!   bursts) and back-off with a log line when `accept` fails for lack of resources (EMFILE:
//!   the listening socket stays readable, so a loop that retries at once spins a core);
//! - TLS (optional, with the config current at each handshake, so rotated certificates
//!   apply to new connections only);
//! - a deadline for a new connection to finish its TLS handshake and send the HTTP/2
//!   preface (gRPC) or its request headers (HTTP/1, also between kept-alive requests);
//! - an idle timeout (no request in flight for that long: GOAWAY, or close);
//! - HTTP/2: `SETTINGS_MAX_CONCURRENT_STREAMS` (calls past it wait, unread, at the client),
//!   room for the resets of calls clients give up on, keepalive PINGs, and a maximum
//!   connection age (GOAWAY after the age ±10%, in-flight streams get a grace period) so
//!   clients behind a ClusterIP spread over new pods;
//! - graceful drain: when `drain` fires the listener closes, idle and half-open connections
//!   close at once, busy ones after their in-flight requests.
//!
//! The request path gains one wrapper per request (three uncontended atomic operations, see
//! `activity.rs`); everything else is per connection.

mod accept;
mod activity;
mod authority;
mod conn;
mod hpack;
mod huffman;
mod io;
mod socket;
mod unix;

pub use socket::Socket;
pub use unix::{UnixBound, UnixListener};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use tokio_util::sync::CancellationToken;

use crate::tls::ServerTls;

/// What a listener speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 only (the HTTP endpoints).
    Http1,
    /// HTTP/2 only, with prior knowledge or ALPN `h2` (gRPC).
    Http2,
}

/// Per-connection limits and timers of one listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Most connections open at once; accepting pauses at the cap.
    pub max_connections: usize,
    /// A new connection must finish its TLS handshake and send the HTTP/2 preface (or, on
    /// HTTP/1, each request's headers) within this.
    pub header_timeout: Duration,
    /// Close a connection with no request in flight for this long (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// HTTP/2: streams a client may open at once (advertised in SETTINGS).
    pub max_concurrent_streams: u32,
    /// HTTP/2: PING an idle peer this often (`None`: never) …
    pub keepalive_interval: Option<Duration>,
    /// … and close the connection when no answer comes within this.
    pub keepalive_timeout: Duration,
    /// HTTP/2: send GOAWAY after this age, ±10% (`None`: never) …
    pub max_age: Option<Duration>,
    /// … and close the connection this long after the GOAWAY, in-flight streams or not.
    pub max_age_grace: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: 10_000,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Some(Duration::from_secs(300)),
            max_concurrent_streams: 16,
            keepalive_interval: Some(Duration::from_secs(60)),
            keepalive_timeout: Duration::from_secs(20),
            max_age: None,
            max_age_grace: Duration::from_secs(3600),
        }
    }
}

/// One listener to serve.
pub struct Listener {
    /// Names the listener in logs (`grpc`, `http`, …).
    pub name: &'static str,
    pub socket: Socket,
    pub protocol: Protocol,
    pub tls: Option<Arc<ServerTls>>,
    pub limits: ConnLimits,
}

/// Serve `listener` with `service` until `drain` fires; the future then closes the
/// listening socket and completes when every connection has closed (callers bound that
/// wait with their grace period). Each request gets a clone of `service`.
pub fn serve<S, B>(
    listener: Listener,
    service: S,
    drain: CancellationToken,
) -> impl Future<Output = ()> + Send + 'static
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let name = listener.name;
    let max_connections = listener.limits.max_connections;
    let shared = Arc::new(conn::Shared::new(
        name,
        listener.protocol,
        listener.tls,
        listener.limits,
        hyper_util::service::TowerToHyperService::new(service),
    ));
    let spawn = move |conn, drain, permit| {
        tokio::spawn(conn::serve(conn, shared.clone(), drain, permit));
    };
    accept::run(listener.socket, name, max_connections, spawn, drain)
}
