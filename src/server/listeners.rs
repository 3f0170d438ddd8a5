//! The bound sockets and what serves them: gRPC (rate limit + health) on one, the HTTP
//! endpoints on another, optionally Prometheus on a third, and the admin listener (unless
//! disabled) on a fourth.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;

use super::ServerError;
use crate::admin;
use crate::http::{self, HttpState};
use crate::service::RateLimitService;
use crate::service::health::Health;
use crate::settings::Settings;

/// The bound sockets.
pub struct Listeners {
    pub grpc: TcpListener,
    pub http: TcpListener,
    pub metrics: Option<TcpListener>,
    pub admin: Option<TcpListener>,
}

impl Listeners {
    pub async fn bind(settings: &Settings) -> std::io::Result<Listeners> {
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))
        };
        Ok(Listeners {
            grpc: bind(settings.grpc_addr).await?,
            http: bind(settings.http_addr).await?,
            metrics: match settings.metrics_addr {
                Some(a) => Some(bind(a).await?),
                None => None,
            },
            admin: match settings.admin_addr {
                Some(a) => Some(bind(a).await?),
                None => None,
            },
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
        let grpc_addr = self.grpc.local_addr()?;
        let http_addr = self.http.local_addr()?;
        let grpc = tonic::transport::Server::builder()
            .add_routes(grpc_routes)
            .serve_with_incoming_shutdown(
                // Without TCP_NODELAY small responses wait for the peer's delayed ACK (~40 ms).
                TcpIncoming::from(self.grpc).with_nodelay(Some(true)),
                drain.clone().cancelled_owned(),
            );
        let state = HttpState {
            service: service.clone(),
            health: health.clone(),
        };
        let http_server = serve_http(self.http, http::router(state.clone()), drain.clone());
        let metrics_server = self.metrics.map(|l| {
            serve_http(
                l,
                http::metrics_router(state, &settings.metrics_path),
                drain.clone(),
            )
        });
        let admin_addr = match &self.admin {
            Some(l) => Some(l.local_addr()?),
            None => None,
        };
        let admin_server = self
            .admin
            .map(|l| serve_http(l, admin::router(service.clone()), drain.clone()));
        match admin_addr {
            Some(admin) => {
                tracing::info!(grpc = %grpc_addr, http = %http_addr, admin = %admin, "serving")
            }
            None => tracing::info!(grpc = %grpc_addr, http = %http_addr, "serving"),
        }
        Ok(async move {
            let optional = |f: Option<_>| async {
                match f {
                    Some(f) => f.await,
                    None => Ok(()),
                }
            };
            let (g, h, m, a) = tokio::join!(
                grpc,
                http_server,
                optional(metrics_server),
                optional(admin_server)
            );
            g?;
            h?;
            m?;
            a?;
            Ok(())
        })
    }
}

async fn serve_http(
    listener: TcpListener,
    router: axum::Router,
    drain: CancellationToken,
) -> Result<(), ServerError> {
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(drain.cancelled_owned())
        .await?;
    Ok(())
}
