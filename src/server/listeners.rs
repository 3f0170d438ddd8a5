//! The bound sockets and what serves them: gRPC (rate limit + health, optionally over TLS)
//! on one (TCP, or a unix socket with `--grpc-uds`), the HTTP endpoints on another, optionally Prometheus and the debug endpoints on
//! their own, and the admin listener (loopback by default, unless disabled). Every listener
//! is served by `transport` with the connection limits of `settings.listen`; the gRPC one
//! adds HTTP/2 stream caps and the maximum connection age.
//!
//! The HTTP, metrics, debug and admin listeners stay plaintext even when gRPC uses TLS: they
//! serve kubelet probes, Prometheus scrapes and loopback tools, which speak plain HTTP, and
//! envoyproxy/ratelimit's `GRPC_SERVER_USE_TLS` covers gRPC only as well.
//!
//! Every address is bound at startup (a port in use is reported at once, and the port stays
//! reserved), but only the metrics socket listens from the start, as their Prometheus sink
//! does. The gRPC, HTTP, debug and admin sockets listen when serving starts: until then a
//! connection is refused, so neither Envoy nor a TCP probe mistakes an instance waiting for
//! its first xDS config for one that serves.
//!
//! The admin listener is sluice's own, on a fixed default port no variable of theirs names:
//! when that default is taken (a second instance on the host) sluice logs a warning and runs
//! without it; an address set with `--admin-addr` that cannot be used stops startup.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpSocket;
use tokio_util::sync::CancellationToken;

use super::ServerError;
use crate::admin;
use crate::http::{self, HttpState};
use crate::service::RateLimitService;
use crate::service::grpc::RateLimitRoutes;
use crate::service::health::Health;
use crate::settings::{ListenSettings, Settings};
use crate::tls::{ServerTls, ServerTlsFiles};
use crate::transport::{self, ConnLimits, Listener, Protocol, Socket, UnixBound};

/// How often the gRPC certificate files are checked for rotation.
const CERT_POLL: Duration = Duration::from_secs(1);

/// Pending connections per listener (tokio's `TcpListener::bind` uses the same).
const BACKLOG: u32 = 1024;

/// A socket bound to its address (which it reserves) that does not listen yet: connections
/// to it are refused until serving starts. TCP, or for gRPC a unix socket (`--grpc-uds`).
pub struct Bound(BoundKind);

enum BoundKind {
    Tcp { socket: TcpSocket, addr: SocketAddr },
    Unix(UnixBound),
}

impl Bound {
    /// Bind `addr` (port 0: the kernel picks one; [`Bound::local_addr`] tells which).
    pub fn bind(addr: SocketAddr) -> std::io::Result<Bound> {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        };
        let bound = socket.and_then(|s| {
            // As `TcpListener::bind`: a restart binds while old connections are in TIME_WAIT.
            #[cfg(unix)]
            s.set_reuseaddr(true)?;
            s.bind(addr)?;
            Ok(s)
        });
        match bound {
            Ok(socket) => Ok(Bound(BoundKind::Tcp { socket, addr })),
            Err(e) => Err(cannot_listen(addr, e)),
        }
    }

    /// Bind a unix socket at `path` (see `transport::UnixBound`).
    pub fn bind_unix(path: &std::path::Path, mode: Option<u32>) -> std::io::Result<Bound> {
        UnixBound::bind(path, mode).map(|u| Bound(BoundKind::Unix(u)))
    }

    /// The TCP address (a unix socket has none).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match &self.0 {
            BoundKind::Tcp { socket, .. } => socket.local_addr(),
            BoundKind::Unix(u) => Err(std::io::Error::other(format!(
                "unix:{} has no TCP address",
                u.path().display()
            ))),
        }
    }

    /// The address as logs show it: `host:port`, or `unix:PATH`.
    pub fn shown(&self) -> std::io::Result<String> {
        match &self.0 {
            BoundKind::Tcp { socket, .. } => Ok(socket.local_addr()?.to_string()),
            BoundKind::Unix(u) => Ok(format!("unix:{}", u.path().display())),
        }
    }

    /// Start listening: from now on connections are accepted.
    pub fn listen(self) -> std::io::Result<Socket> {
        match self.0 {
            BoundKind::Tcp { socket, addr } => socket
                .listen(BACKLOG)
                .map(Socket::Tcp)
                .map_err(|e| cannot_listen(addr, e)),
            BoundKind::Unix(u) => u.listen().map(Socket::Unix),
        }
    }
}

fn cannot_listen(addr: SocketAddr, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"))
}

/// The bound sockets.
pub struct Listeners {
    pub grpc: Bound,
    pub http: Bound,
    /// Listening from the start (see the file's comment).
    pub metrics: Option<Socket>,
    pub debug: Option<Bound>,
    pub admin: Option<Bound>,
    /// The admin address was chosen, not the default: failing to use it is an error.
    pub admin_explicit: bool,
}

impl Listeners {
    pub async fn bind(settings: &Settings) -> std::io::Result<Listeners> {
        let metrics = match settings.metrics_addr {
            Some(a) => Some(Bound::bind(a)?.listen()?),
            None => None,
        };
        let admin_explicit = settings.admin_addr_explicit;
        let admin = match settings.admin_addr {
            Some(a) => admin_socket(Bound::bind(a), admin_explicit)?,
            None => None,
        };
        let grpc = match &settings.grpc_uds {
            Some(path) => Bound::bind_unix(path, settings.listen.grpc_uds_mode)?,
            None => Bound::bind(settings.grpc_addr)?,
        };
        Ok(Listeners {
            grpc,
            http: Bound::bind(settings.http_addr)?,
            metrics,
            debug: settings.listen.debug_addr.map(Bound::bind).transpose()?,
            admin,
            admin_explicit,
        })
    }

    /// Serve the metrics listener now (before the first xDS config, as theirs does), until
    /// `drain` fires: its address and the task, which ends when its connections are done.
    pub(super) fn serve_metrics(
        &mut self,
        settings: &Settings,
        state: HttpState,
        drain: &CancellationToken,
    ) -> std::io::Result<Option<(SocketAddr, tokio::task::JoinHandle<()>)>> {
        let Some(socket) = self.metrics.take() else {
            return Ok(None);
        };
        let addr = match &socket {
            Socket::Tcp(l) => l.local_addr()?,
            Socket::Unix(_) => return Err(std::io::Error::other("metrics listen on TCP")),
        };
        let task = tokio::spawn(transport::serve(
            http_listener("metrics", socket, conn_limits(&settings.listen)),
            http::metrics_router(state, &settings.metrics_path),
            drain.clone(),
        ));
        Ok(Some((addr, task)))
    }

    /// Serve every listener until `drain` fires and its connections finish. The returned
    /// future does nothing until polled.
    pub(super) fn serve(
        self,
        settings: &Settings,
        service: &Arc<RateLimitService>,
        health: &Arc<Health>,
        grpc_routes: RateLimitRoutes,
        metrics: Option<(SocketAddr, tokio::task::JoinHandle<()>)>,
        drain: &CancellationToken,
    ) -> Result<impl Future<Output = Result<(), ServerError>> + use<>, ServerError> {
        // The HTTP port (health) listens last: whoever can connect to it can connect to
        // every other listener (the tests' harness waits for exactly that).
        let grpc = self.grpc.listen()?;
        let debug = self.debug.map(Bound::listen).transpose()?;
        let admin = match self.admin {
            Some(a) => admin_socket(a.listen(), self.admin_explicit)?,
            None => None,
        };
        let http = self.http.listen()?;
        let grpc_addr = grpc.shown()?;
        let http_addr = http.shown()?;
        let shown = |l: &Option<Socket>| -> std::io::Result<String> {
            Ok(match l {
                Some(l) => l.shown()?,
                None => "off".into(),
            })
        };
        let (debug_addr, admin_addr) = (shown(&debug)?, shown(&admin)?);
        let (metrics_addr, metrics_server) = match metrics {
            Some((a, task)) => (a.to_string(), Some(task)),
            None => ("off".to_string(), None),
        };

        let grpc_tls = grpc_tls(&settings.listen)?;
        if let Some(tls) = &grpc_tls {
            spawn_cert_reload(tls.clone(), drain.clone());
        }
        let http_limits = conn_limits(&settings.listen);
        let grpc_limits = ConnLimits {
            max_concurrent_streams: settings.listen.grpc_max_concurrent_streams,
            max_age: settings.listen.grpc_max_connection_age,
            max_age_grace: settings.listen.grpc_max_connection_age_grace,
            ..http_limits.clone()
        };
        let http_listener = |name, socket| http_listener(name, socket, http_limits.clone());

        let tls_on = grpc_tls.is_some();
        let grpc = transport::serve(
            Listener {
                name: "grpc",
                socket: grpc,
                protocol: Protocol::Http2,
                tls: grpc_tls,
                limits: grpc_limits,
            },
            grpc_routes,
            drain.clone(),
        );
        let state = HttpState {
            service: service.clone(),
            health: health.clone(),
        };
        let http_server = transport::serve(
            http_listener("http", http),
            http::router(state.clone()),
            drain.clone(),
        );
        let debug_server = debug.map(|l| {
            transport::serve(
                http_listener("debug", l),
                http::debug_router(state),
                drain.clone(),
            )
        });
        let admin_server = admin.map(|l| {
            transport::serve(
                http_listener("admin", l),
                admin::router(service.clone()),
                drain.clone(),
            )
        });
        tracing::info!(
            grpc = %grpc_addr,
            grpc_tls = tls_on,
            http = %http_addr,
            metrics = %metrics_addr,
            debug = %debug_addr,
            admin = %admin_addr,
            "serving"
        );
        Ok(async move {
            let optional = |f: Option<_>| async {
                if let Some(f) = f {
                    f.await
                }
            };
            let metrics = async {
                if let Some(task) = metrics_server {
                    // A panic of the task is the only error, and was logged by tokio.
                    let _ = task.await;
                }
            };
            tokio::join!(
                grpc,
                http_server,
                metrics,
                optional(debug_server),
                optional(admin_server)
            );
            Ok(())
        })
    }
}

/// The admin socket, or `None` with a warning when the default address cannot be used.
fn admin_socket<S>(socket: std::io::Result<S>, explicit: bool) -> std::io::Result<Option<S>> {
    match socket {
        Ok(s) => Ok(Some(s)),
        Err(e) if explicit => Err(std::io::Error::new(
            e.kind(),
            format!("admin listener (--admin-addr / SLUICE_ADMIN_ADDR): {e}"),
        )),
        Err(e) => {
            tracing::warn!(
                error = %e,
                "the admin listener's default address is not available (another instance on \
                 this host?); running without the admin listener (choose one with \
                 --admin-addr / SLUICE_ADMIN_ADDR, or turn it off with `off`)"
            );
            Ok(None)
        }
    }
}

fn http_listener(name: &'static str, socket: Socket, limits: ConnLimits) -> Listener {
    Listener {
        name,
        socket,
        protocol: Protocol::Http1,
        tls: None,
        limits,
    }
}

fn conn_limits(l: &ListenSettings) -> ConnLimits {
    ConnLimits {
        max_connections: l.max_connections,
        header_timeout: l.header_timeout,
        idle_timeout: l.idle_timeout,
        max_concurrent_streams: l.grpc_max_concurrent_streams,
        keepalive_interval: l.http2_keepalive_interval,
        keepalive_timeout: l.http2_keepalive_timeout,
        max_age: None,
        max_age_grace: l.grpc_max_connection_age_grace,
    }
}

fn grpc_tls(l: &ListenSettings) -> Result<Option<Arc<ServerTls>>, ServerError> {
    let Some(t) = &l.grpc_tls else {
        return Ok(None);
    };
    let files = ServerTlsFiles {
        cert: t.cert.clone(),
        key: t.key.clone(),
        client_ca: t.client_ca.clone(),
        client_san: t.client_san.clone(),
    };
    let tls = ServerTls::new(files, &[b"h2"])?;
    tracing::info!(
        cert = %t.cert.display(),
        mutual = t.client_ca.is_some(),
        client_san = t.client_san.as_deref().unwrap_or(""),
        "gRPC TLS configured"
    );
    Ok(Some(Arc::new(tls)))
}

/// Poll the certificate files; a rotation applies to the connections that follow.
fn spawn_cert_reload(tls: Arc<ServerTls>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(CERT_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            // File reads stay off the async workers (a slow mount must not stall requests).
            let t = tls.clone();
            match tokio::task::spawn_blocking(move || t.reload_if_changed()).await {
                Ok(Ok(true)) => tracing::info!(
                    cert = %tls.files().cert.display(),
                    "gRPC TLS files changed: new connections use the new certificate"
                ),
                Ok(Ok(false)) | Err(_) => {}
                Ok(Err(e)) => tracing::warn!(
                    error = %e,
                    "gRPC TLS files changed but do not load; keeping the previous certificate"
                ),
            }
        }
    });
}
