//! Wiring: build the store, service, health and config sources, serve the listeners until
//! `shutdown`, then drain.
//!
//! [`run`] takes already-bound listeners, so tests bind port 0 and read the addresses. It
//! reads as its steps: load the config, build the store and the service, start health and
//! the background tasks, serve, and drain on shutdown (`shutdown.rs`). Protocol types stay
//! in `service`: this module only adds the services it is given to its routers.

mod background;
mod listeners;
mod shutdown;
mod store;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use listeners::Listeners;

use crate::config::{ConfigError, LoadOptions, RateLimitConfig};
use crate::metrics::Metrics;
use crate::service::{RateLimitService, grpc};
use crate::settings::Settings;

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
    crate::tls::install_crypto_provider();
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
        max_file_bytes: settings.caps.max_config_file_bytes,
    };
    let config = load_initial_config(&settings, &opts, &metrics)?;
    let store = Arc::new(store::build(&settings)?);
    tracing::info!(store = store.name(), "store configured");
    let service = Arc::new(RateLimitService::new(
        config,
        store.clone(),
        metrics.clone(),
        settings.decision.clone(),
    ));
    let (health, grpc_routes) = grpc::routes(service.clone(), settings.healthy_requires_config);
    health.refresh().await;

    // Tasks that end with the process, not with the listeners.
    let background = CancellationToken::new();
    background::spawn_health_refresh(health.clone(), background.clone());
    background::spawn_memory_sweep(store, metrics, background.clone());
    background::spawn_config_reloading(&settings, opts, service.clone(), background.clone());

    // Listeners drain when `drain` fires, after health has gone NOT_SERVING.
    let drain = CancellationToken::new();
    let servers = listeners.serve(&settings, &service, &health, grpc_routes, &drain)?;
    let result = shutdown::supervise(servers, &settings, &shutdown, &health, &drain).await;
    background.cancel();
    result
}

fn load_initial_config(
    settings: &Settings,
    opts: &LoadOptions,
    metrics: &Metrics,
) -> Result<RateLimitConfig, ServerError> {
    let config = RateLimitConfig::load(&settings.config_paths, opts).map_err(|e| {
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
    Ok(config)
}
