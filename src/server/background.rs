//! Tasks that live as long as the process: the health refresher, the memory store's sweep,
//! and the config sources (file watcher, SIGHUP). Each stops when its cancellation token
//! fires.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::LoadOptions;
use crate::metrics::Metrics;
use crate::reload::{self, Reloader};
use crate::service::RateLimitService;
use crate::service::health::Health;
use crate::settings::Settings;
use crate::store::Backend;

/// How often health is re-evaluated (store connectivity can change at any time).
const HEALTH_INTERVAL: Duration = Duration::from_millis(250);

pub(super) fn spawn_health_refresh(health: Arc<Health>, stop: CancellationToken) {
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

/// How often the memory store drops expired state (so memory comes back while idle) and
/// its gauges are refreshed.
const MEMORY_SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The memory store's periodic sweep, and its metrics.
pub(super) fn spawn_memory_sweep(
    store: Arc<Backend>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    if !matches!(&*store, Backend::Memory(_)) {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(MEMORY_SWEEP_INTERVAL);
        let mut counted = 0;
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            // A full sweep locks one shard at a time, briefly; off the async workers.
            let store = store.clone();
            let swept = tokio::task::spawn_blocking(move || match &*store {
                Backend::Memory(memory) => {
                    memory.sweep();
                    Some((memory.bytes(), memory.evictions()))
                }
                Backend::Redis(_) => None,
            });
            if let Ok(Some((bytes, evictions))) = swept.await {
                metrics
                    .memory_bytes
                    .set(i64::try_from(bytes).unwrap_or(i64::MAX));
                metrics
                    .memory_evictions
                    .inc_by(evictions.saturating_sub(counted));
                counted = evictions;
            }
        }
    });
}

/// Reload on file changes (when watching is on) and on SIGHUP.
pub(super) fn spawn_config_reloading(
    settings: &Settings,
    opts: LoadOptions,
    service: Arc<RateLimitService>,
    stop: CancellationToken,
) {
    let reloader = Arc::new(Reloader::new(settings.config_paths.clone(), opts, service));
    if settings.watch_config
        && let Err(e) = reloader
            .clone()
            .spawn_watcher(reload::DEFAULT_DEBOUNCE, stop.clone())
    {
        tracing::warn!(error = %e, "config watching unavailable; reload with SIGHUP");
    }
    spawn_sighup(reloader, stop);
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
                    // Detached: a load stuck on a read must not hold SIGHUP or exit.
                    let _ = reloader.reload_detached().await;
                }
            }
        }
    });
}

#[cfg(not(unix))]
fn spawn_sighup(_: Arc<Reloader>, _: CancellationToken) {}
