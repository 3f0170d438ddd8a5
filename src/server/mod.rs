//! Wiring: build the store, service, health and config sources, serve the listeners until
//! `shutdown`, then drain.
//!
//! [`run`] takes already-bound listeners, so tests bind port 0 and read the addresses, and
//! the clock every part reads time from (the binary passes the system clock; tests a
//! `limit::ManualClock` they move). It reads as its steps: load the config, build the store
//! and the service, start health and the background tasks (config sources among them),
//! serve, and drain on shutdown (`shutdown.rs`). Protocol types stay in `service`: this
//! module only adds the services it is given to its routers.
//!
//! The initial config, as envoyproxy/ratelimit loads it: rule files with an error do not
//! stop the server; it serves, every call fails with "no rate limit configuration loaded"
//! until a valid config appears (file watch, SIGHUP). With xDS the gRPC, HTTP, debug and
//! admin sockets are bound at startup but listen only after the first valid response
//! (connections are refused until then), unless `FORCE_START_WITHOUT_INITIAL_CONFIG`; the
//! metrics listener serves from the start, as envoyproxy/ratelimit's Prometheus sink does.

mod background;
mod listeners;
mod shutdown;
mod store;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use listeners::{Bound, Listeners};

use crate::config::{LoadOptions, RateLimitConfig};
use crate::http::HttpState;
use crate::limit::Clock;
use crate::limiter::{LocalView, OverLimitCache, ViewOptions};
use crate::metrics::Metrics;
use crate::metrics::mapper::Mapper;
use crate::reload;
use crate::service::health::Health;
use crate::service::{RateLimitService, grpc, rlqs};
use crate::settings::{ConfigSource, Settings};
use crate::telemetry::Telemetry;
use crate::top::{TopHitters, TopOptions};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Xds(#[from] crate::xds::XdsError),
    #[error(transparent)]
    Redis(#[from] crate::store::redis::RedisConfigError),
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("gRPC server: {0}")]
    Grpc(#[from] tonic::transport::Error),
    #[error(transparent)]
    Mapper(#[from] crate::metrics::mapper::MapperError),
    #[error(transparent)]
    Telemetry(#[from] crate::telemetry::TelemetryError),
}

/// Serve until `shutdown` is cancelled, then stop accepting, let in-flight requests finish
/// (at most `settings.shutdown_grace`) and return. `clock` is the time of every window,
/// cache entry, local view and quota assignment (timeouts and intervals are tokio's).
pub async fn run(
    settings: Settings,
    listeners: Listeners,
    shutdown: CancellationToken,
    clock: Arc<dyn Clock>,
) -> Result<(), ServerError> {
    for note in &settings.notes {
        tracing::warn!("{note}");
    }
    crate::tls::install_crypto_provider();
    let metrics = Arc::new(build_metrics(&settings)?);
    let telemetry = Telemetry::start(&settings.telemetry, &metrics)?;
    let opts = LoadOptions {
        merge_domains: settings.merge_domains,
        max_file_bytes: settings.caps.max_config_file_bytes,
        sanitize_metric_dots: settings.sanitize_metric_dots,
    };
    let config = match settings.config_source {
        ConfigSource::Files => load_initial_config(&settings, &opts, &metrics),
        ConfigSource::Xds(_) => None,
    };
    let store = Arc::new(store::build(&settings, &clock)?);
    for (name, ..) in store.redis_pools() {
        metrics.add_store(name);
    }
    tracing::info!(store = store.name(), addr = %store.shown(), "store configured");
    let cache = OverLimitCache::new(settings.local_cache_bytes, clock.clone());
    if cache.is_some() {
        tracing::info!(
            bytes = settings.local_cache_bytes,
            "local over-limit cache enabled"
        );
    }
    let view = local_view(&settings, &clock);
    let top = heavy_hitters(&settings, &clock);
    let service = Arc::new(
        RateLimitService::new(
            config,
            store.clone(),
            metrics.clone(),
            settings.decision.clone(),
        )
        .with_local_cache(cache)
        .with_local_view(
            view,
            settings.consistency.default,
            settings.consistency.unhealthy_when_degraded,
        )
        .with_tracer(telemetry.tracer())
        .with_top(top, settings.top.metrics),
    );
    let (health, grpc_routes) = grpc::routes(service.clone(), settings.healthy_requires_config);
    observe_degraded(&service, &health);
    // Listeners drain when `drain` fires, after health has gone NOT_SERVING; quota streams
    // then send TTL-0 assignments and end.
    let drain = CancellationToken::new();
    let grpc_routes = grpc_routes.add_routes(|routes| {
        rlqs::add_route(
            routes,
            service.clone(),
            settings.rlqs.clone(),
            drain.clone(),
            clock,
        )
    });
    health.refresh().await;

    // Tasks that end with the process, not with the listeners.
    let background = CancellationToken::new();
    background::spawn_health_refresh(health.clone(), service.clone(), background.clone());
    background::spawn_memory_sweep(store, metrics, background.clone());
    background::spawn_batch_flush(
        service.clone(),
        settings.consistency.batch_interval,
        background.clone(),
    );
    let loaded =
        background::spawn_config_sources(&settings, opts, service.clone(), background.clone())?;

    // Metrics are served from the start; the other sockets listen only once serving starts.
    let mut listeners = listeners;
    let state = HttpState {
        service: service.clone(),
        health: health.clone(),
    };
    let metrics_server = listeners.serve_metrics(&settings, state, &drain)?;
    if let Some(loaded) = loaded
        && !settings.force_start_without_initial_config
        && !wait_for_first_config(loaded, &listeners, &metrics_server, &shutdown).await?
    {
        drain.cancel();
        background.cancel();
        telemetry.shutdown().await;
        return Ok(());
    }

    let servers = listeners.serve(
        &settings,
        &service,
        &health,
        grpc_routes,
        metrics_server,
        &drain,
    )?;
    let result = shutdown::supervise(servers, &settings, &shutdown, &health, &drain).await;
    background.cancel();
    telemetry.shutdown().await;
    result
}

/// The local view every instance keeps (cheap while unused: rules may turn `batched` on a
/// reload), with the store-failure fallback when asked.
fn local_view(settings: &Settings, clock: &Arc<dyn Clock>) -> Option<Arc<LocalView>> {
    let c = &settings.consistency;
    let opts = ViewOptions {
        interval_ms: u64::try_from(c.batch_interval.as_millis()).unwrap_or(u64::MAX),
        fallback: c.local_fallback(),
        unseen_share: c.store_failure_share,
        max_keys: c.local_view_max_keys,
    };
    if opts.fallback {
        tracing::info!(
            share = opts.unseen_share,
            max_keys = opts.max_keys,
            "store-failure fallback: decisions go local while the store fails"
        );
    }
    Some(Arc::new(LocalView::new(opts, clock.clone())))
}

/// The heavy hitters (`--top-capacity`, 0: none), on the clock every window reads.
fn heavy_hitters(settings: &Settings, clock: &Arc<dyn Clock>) -> Option<Arc<TopHitters>> {
    let t = &settings.top;
    if t.capacity == 0 {
        return None;
    }
    let opts = TopOptions {
        capacity: t.capacity,
        window_ms: u64::try_from(t.window.as_millis()).unwrap_or(u64::MAX),
    };
    Some(Arc::new(TopHitters::new(opts, clock.clone())))
}

/// The degraded state told at the moment it changes, before the first local decision: its
/// gauge and periods counter, and health (evaluated at once, not at the next tick).
fn observe_degraded(service: &Arc<RateLimitService>, health: &Arc<Health>) {
    let Some(view) = service.local_view() else {
        return;
    };
    let gauge = service.metrics().local.degraded.clone();
    let periods = service.metrics().local.degraded_periods.clone();
    let health = Arc::downgrade(health);
    view.observe_degraded(Box::new(move |degraded| {
        gauge.set(i64::from(degraded));
        if degraded {
            periods.inc();
        }
        if let Some(h) = health.upgrade() {
            h.wake();
        }
    }));
}

/// The registry, with statsd timings when statsd is on and the mapping file when given.
fn build_metrics(settings: &Settings) -> Result<Metrics, ServerError> {
    let store = if settings.redis.is_some() {
        "redis"
    } else {
        "memory"
    };
    let mut metrics = Metrics::new(
        settings.decision.near_limit_ratio,
        settings.metrics_max_series,
        store,
    );
    if settings.telemetry.statsd.is_some() {
        metrics.enable_statsd_timings();
    }
    if settings.telemetry.response_time_ms {
        if settings.telemetry.metrics_mapper.is_some() {
            tracing::warn!(
                "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS is ignored with PROMETHEUS_MAPPER_YAML \
                 (as theirs: the mapping file says how the response time is scaled)"
            );
        } else {
            metrics.response_time_in_milliseconds();
        }
    }
    if let Some(path) = &settings.telemetry.metrics_mapper {
        let mapper = Mapper::load(path)?;
        if !mapper.ignored.is_empty() {
            tracing::warn!(
                path = %path.display(),
                fields = ?mapper.ignored,
                "PROMETHEUS_MAPPER_YAML: these fields are not applied (sluice keeps its \
                 histogram in seconds and exports no summaries)"
            );
        }
        tracing::info!(path = %path.display(), "PROMETHEUS_MAPPER_YAML applied to /metrics");
        metrics.set_mapper(mapper);
    }
    Ok(metrics)
}

/// The rule files at startup, or `None` when they have errors (logged with file and line;
/// the server starts anyway and the reloader loads the first valid version).
fn load_initial_config(
    settings: &Settings,
    opts: &LoadOptions,
    metrics: &Metrics,
) -> Option<RateLimitConfig> {
    match RateLimitConfig::load(&settings.config_paths, opts) {
        Ok(config) => {
            metrics.config_load_success.inc();
            tracing::info!(
                domains = config.domain_count(),
                rules = config.rules().len(),
                paths = ?settings.config_paths,
                from = %settings.config_from,
                "config loaded"
            );
            Some(config)
        }
        Err(errors) => {
            metrics.config_load_error.inc();
            reload::log_config_errors(
                &errors,
                "config rejected at startup; serving without rules until a valid config loads \
                 (every call fails with \"no rate limit configuration loaded\")",
            );
            None
        }
    }
}

/// Their order under xDS: no listener but the metrics one serves before the first config
/// (unless forced); the gRPC and HTTP ports refuse connections meanwhile. `false` when
/// shutdown came first.
async fn wait_for_first_config(
    mut loaded: tokio::sync::watch::Receiver<bool>,
    listeners: &Listeners,
    metrics: &Option<(std::net::SocketAddr, tokio::task::JoinHandle<()>)>,
    shutdown: &CancellationToken,
) -> Result<bool, ServerError> {
    let debug_addr = match &listeners.debug {
        Some(d) => d.shown()?,
        None => "off".into(),
    };
    let metrics_addr = match metrics {
        Some((a, _)) => a.to_string(),
        None => "off".into(),
    };
    tracing::info!(
        grpc = %listeners.grpc.shown()?,
        http = %listeners.http.shown()?,
        debug = %debug_addr,
        metrics = %metrics_addr,
        "waiting for the first xDS config before serving"
    );
    tokio::select! {
        _ = shutdown.cancelled() => Ok(false),
        _ = loaded.wait_for(|l| *l) => Ok(true),
    }
}
