//! The bound sockets and what serves them: gRPC (rate limit + health, optionally over TLS)
//! on one, the HTTP endpoints on another, optionally Prometheus and the debug endpoints on
//! their own, and the admin listener (loopback by default, unless disabled). Every listener
//! is served by `transport` with the connection limits of `settings.listen`; the gRPC one
//! adds HTTP/2 stream caps and the maximum connection age.
//!
//! The HTTP, metrics, debug and admin listeners stay plaintext even when gRPC uses TLS: they
//! serve kubelet probes, Prometheus scrapes and loopback tools, which speak plain HTTP, and
//! envoyproxy/ratelimit's `GRPC_SERVER_USE_TLS` covers gRPC only as well.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;

use super::ServerError;
use crate::admin;
use crate::http::{self, HttpState};
use crate::service::RateLimitService;
use crate::service::health::Health;
use crate::settings::{ListenSettings, Settings};
use crate::tls::{ServerTls, ServerTlsFiles};
use crate::transport::{self, ConnLimits, Listener, Protocol};

/// How often the gRPC certificate files are checked for rotation.
const CERT_POLL: Duration = Duration::from_secs(1);

/// The bound sockets.
pub struct Listeners {
    pub grpc: TcpListener,
    pub http: TcpListener,
    pub metrics: Option<TcpListener>,
    pub debug: Option<TcpListener>,
    pub admin: Option<TcpListener>,
}

impl Listeners {
    pub async fn bind(settings: &Settings) -> std::io::Result<Listeners> {
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))
        };
        let optional = |addr: Option<SocketAddr>| async move {
            match addr {
                Some(a) => bind(a).await.map(Some),
                None => Ok(None),
            }
        };
        Ok(Listeners {
            grpc: bind(settings.grpc_addr).await?,
            http: bind(settings.http_addr).await?,
            metrics: optional(settings.metrics_addr).await?,
            debug: optional(settings.listen.debug_addr).await?,
            admin: optional(settings.admin_addr).await?,
        })
    }

    /// Serve every listener until `drain` fires and its connections finish. The returned
    /// future does nothing until polled.
    pub(super) fn serve(
        self,
        settings: &Settings,
        service: &Arc<RateLimitService>,
        health: &Arc<Health>,
        grpc_routes: Routes,
        drain: &CancellationToken,
    ) -> Result<impl Future<Output = Result<(), ServerError>> + use<>, ServerError> {
        let addr = |l: &TcpListener| l.local_addr();
        let grpc_addr = addr(&self.grpc)?;
        let http_addr = addr(&self.http)?;
        let shown = |l: &Option<TcpListener>| -> std::io::Result<String> {
            Ok(match l {
                Some(l) => addr(l)?.to_string(),
                None => "off".into(),
            })
        };
        let (metrics_addr, debug_addr, admin_addr) = (
            shown(&self.metrics)?,
            shown(&self.debug)?,
            shown(&self.admin)?,
        );

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
        let http_listener = |name, socket| Listener {
            name,
            socket,
            protocol: Protocol::Http1,
            tls: None,
            limits: http_limits.clone(),
        };

        let tls_on = grpc_tls.is_some();
        let grpc = transport::serve(
            Listener {
                name: "grpc",
                socket: self.grpc,
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
            http_listener("http", self.http),
            http::router(state.clone()),
            drain.clone(),
        );
        let metrics_server = self.metrics.map(|l| {
            transport::serve(
                http_listener("metrics", l),
                http::metrics_router(state.clone(), &settings.metrics_path),
                drain.clone(),
            )
        });
        let debug_server = self.debug.map(|l| {
            transport::serve(
                http_listener("debug", l),
                http::debug_router(state),
                drain.clone(),
            )
        });
        let admin_server = self.admin.map(|l| {
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
            tokio::join!(
                grpc,
                http_server,
                optional(metrics_server),
                optional(debug_server),
                optional(admin_server)
            );
            Ok(())
        })
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
