//! Wiring: build the store, service, health, reloader and listeners, serve until
//! `shutdown`, then drain.
//!
//! [`run`] takes already-bound listeners, so tests bind port 0 and read the addresses.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;

use crate::config::{ConfigError, LoadOptions, RateLimitConfig};
use crate::http::{self, HttpState};
use crate::limit::SystemClock;
use crate::limiter::OverLimitCache;
use crate::metrics::Metrics;
use crate::reload::{self, Reloader};
use crate::service::RateLimitService;
use crate::service::grpc;
use crate::service::health::Health;
use crate::settings::{RedisType, Settings};
use crate::store::Backend;
use crate::store::memory::MemoryStore;
use crate::store::redis::{RedisConfig, RedisStore};

/// How often health is re-evaluated (store connectivity can change at any time).
const HEALTH_INTERVAL: Duration = Duration::from_millis(250);

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Config(Vec<ConfigError>),
    #[error(transparent)]
    Redis(#[from] crate::store::redis::RedisConfigError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("gRPC server: {0}")]
    Grpc(#[from] tonic::transport::Error),
}

/// The bound sockets.
pub struct Listeners {
    pub grpc: TcpListener,
    pub http: TcpListener,
    pub metrics: Option<TcpListener>,
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
        })
    }
}

/// Build the configured store (Redis connects in the background; health waits for it).
fn build_store(settings: &Settings) -> Result<Backend, ServerError> {
    match &settings.redis {
        None => Ok(Backend::Memory(MemoryStore::new(Arc::new(SystemClock)))),
        Some(r) => {
            let mut cfg = RedisConfig {
                pool_size: r.pool_size,
                connect_timeout: r.connect_timeout,
                request_timeout: r.request_timeout,
                time_source: r.time_source,
                ..RedisConfig::default()
            };
            if let Some(p) = &r.key_prefix {
                cfg.key_prefix = p.clone();
            }
            match r.redis_type {
                RedisType::Single => cfg.url = r.urls.first().cloned().unwrap_or_default(),
                RedisType::Cluster => cfg.cluster_nodes = r.urls.clone(),
            }
            RedisStore::new(cfg, Arc::new(SystemClock))
                .map(Backend::Redis)
                .map_err(ServerError::Redis)
        }
    }
}

/// Serve until `shutdown` is cancelled, then stop accepting, let in-flight requests finish
/// (at most `settings.shutdown_grace`) and return.
pub async fn run(
    settings: Settings,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    for note in &settings.notes {
        tracing::warn!("{note}");
    }
    let metrics = Arc::new(Metrics::new(
        settings.decision.near_limit_ratio,
        settings.metrics_max_series,
        if settings.redis.is_some() {
            "redis"
        } else {
            "memory"
        },
    ));
    let opts = LoadOptions {
        merge_domains: settings.merge_domains,
    };
    let config = RateLimitConfig::load(&settings.config_paths, &opts).map_err(|e| {
        metrics.config_load_error.inc();
        ServerError::Config(e)
    })?;
    metrics.config_load_success.inc();
    tracing::info!(
        domains = config.domain_count(),
        rules = config.rules().len(),
        paths = ?settings.config_paths,
        "config loaded"
    );

    let store = Arc::new(build_store(&settings)?);
    tracing::info!(store = store.name(), "store configured");
    let cache = OverLimitCache::new(settings.local_cache_bytes, Arc::new(SystemClock));
    if cache.is_some() {
        tracing::info!(
            bytes = settings.local_cache_bytes,
            "local over-limit cache enabled"
        );
    }
    let service = Arc::new(
        RateLimitService::new(config, store, metrics, settings.decision.clone())
            .with_local_cache(cache),
    );
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let health = Arc::new(Health::new(
        service.clone(),
        reporter,
        settings.healthy_requires_config,
    ));
    health.refresh().await;

    // Tasks that end with the process.
    let background = CancellationToken::new();
    {
        let (health, stop) = (health.clone(), background.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(HEALTH_INTERVAL);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => health.refresh().await,
                }
            }
        });
    }
    let reloader = Arc::new(Reloader::new(
        settings.config_paths.clone(),
        opts,
        service.clone(),
    ));
    if settings.watch_config
        && let Err(e) = reloader
            .clone()
            .spawn_watcher(reload::DEFAULT_DEBOUNCE, background.clone())
    {
        tracing::warn!(error = %e, "config watching unavailable; reload with SIGHUP");
    }
    spawn_sighup(reloader, background.clone());

    // Listeners drain when `drain` fires, after health has gone NOT_SERVING.
    let drain = CancellationToken::new();
    let grpc_addr = listeners.grpc.local_addr()?;
    let http_addr = listeners.http.local_addr()?;
    let grpc = tonic::transport::Server::builder()
        .add_service(grpc::server(service.clone()))
        .add_service(health_service)
        .serve_with_incoming_shutdown(
            // Without TCP_NODELAY small responses wait for the peer's delayed ACK (~40 ms).
            TcpIncoming::from(listeners.grpc).with_nodelay(Some(true)),
            drain.clone().cancelled_owned(),
        );
    let state = HttpState {
        service: service.clone(),
        health: health.clone(),
    };
    let http_server = serve_http(listeners.http, http::router(state.clone()), drain.clone());
    let metrics_server = listeners.metrics.map(|l| {
        serve_http(
            l,
            http::metrics_router(state, &settings.metrics_path),
            drain.clone(),
        )
    });
    tracing::info!(grpc = %grpc_addr, http = %http_addr, "serving");

    let servers = async {
        let metrics_fut = async {
            match metrics_server {
                Some(f) => f.await,
                None => Ok(()),
            }
        };
        let (g, h, m) = tokio::join!(grpc, http_server, metrics_fut);
        g?;
        h?;
        m?;
        Ok::<(), ServerError>(())
    };
    tokio::pin!(servers);
    let result = tokio::select! {
        r = &mut servers => r,
        _ = shutdown.cancelled() => {
            tracing::info!(
                delay = ?settings.shutdown_delay,
                grace = ?settings.shutdown_grace,
                "shutting down"
            );
            health.shutting_down().await;
            // Keep answering while load balancers notice the failing health checks.
            let early = tokio::select! {
                r = &mut servers => Some(r),
                _ = tokio::time::sleep(settings.shutdown_delay) => None,
            };
            if let Some(r) = early {
                background.cancel();
                return r;
            }
            drain.cancel();
            match tokio::time::timeout(settings.shutdown_grace, &mut servers).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::warn!("grace period over; closing remaining connections");
                    Ok(())
                }
            }
        }
    };
    background.cancel();
    result
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

#[cfg(unix)]
fn spawn_sighup(reloader: Arc<Reloader>, stop: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot install the SIGHUP handler");
        return;
    };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                got = hup.recv() => {
                    if got.is_none() { break }
                    tracing::info!("SIGHUP: reloading config");
                    let r = reloader.clone();
                    let _ = tokio::task::spawn_blocking(move || r.reload()).await;
                }
            }
        }
    });
}

#[cfg(not(unix))]
fn spawn_sighup(_: Arc<Reloader>, _: CancellationToken) {}
