//! Tasks that live as long as the process: the health refresher, the memory store's sweep,
//! and the config sources (file watcher and SIGHUP, or the xDS client). Each stops when its
//! cancellation token fires.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::LoadOptions;
use crate::metrics::Metrics;
use crate::reload::{self, Reloader};
use crate::service::RateLimitService;
use crate::service::health::Health;
use crate::settings::{ConfigSource, Settings};
use crate::store::Backend;
use crate::xds::{self, XdsError};

/// How often health is re-evaluated (store connectivity can change at any time).
const HEALTH_INTERVAL: Duration = Duration::from_millis(250);

/// Every tick: probe Redis stores that refuse writes (so recovery is seen without
/// traffic), publish each store's connections, readiness and dropped connections, and the
/// admission gauges, and re-evaluate health; at once when woken (decisions went local or
/// back to the store).
pub(super) fn spawn_health_refresh(
    health: Arc<Health>,
    service: Arc<RateLimitService>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(HEALTH_INTERVAL);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                () = health.woken() => health.refresh().await,
                _ = tick.tick() => {
                    let store = service.store();
                    store.probe().await;
                    let metrics = service.metrics();
                    for (name, connected, ready, dropped) in store.redis_pools() {
                        metrics.store_connections.with_label_values(&[name]).set(connected as i64);
                        metrics.store_ready.with_label_values(&[name]).set(i64::from(ready));
                        let counted = metrics.store_connections_dropped.with_label_values(&[name]);
                        counted.inc_by(dropped.saturating_sub(counted.get()));
                    }
                    let admission = service.admission();
                    metrics.admission_limit.set(admission.limit() as i64);
                    metrics.admission_in_flight.set(admission.in_flight() as i64);
                    metrics.admission_queued.set(admission.queued() as i64);
                    health.refresh().await;
                }
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
                _ => None,
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

/// Every `--batch-interval`: write the local view's hits back to the store (one call) and
/// publish its metrics. Nothing is sent while no hit waits.
pub(super) fn spawn_batch_flush(
    service: Arc<RateLimitService>,
    interval: Duration,
    stop: CancellationToken,
) {
    let Some(view) = service.local_view().cloned() else {
        return;
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let store = service.store();
            if let Err(e) = view.flush(store, |id| store.fate(id)).await {
                service.count_store_error(e.store(), e.kind());
                tracing::debug!(error = %e, "write-back of local hits failed; kept for the next one");
            }
            service.publish_view_metrics();
        }
    });
}

/// Start the configured config source. For xDS, the receiver turns `true` at the first
/// valid config.
pub(super) fn spawn_config_sources(
    settings: &Settings,
    opts: LoadOptions,
    service: Arc<RateLimitService>,
    stop: CancellationToken,
) -> Result<Option<tokio::sync::watch::Receiver<bool>>, XdsError> {
    match &settings.config_source {
        ConfigSource::Files => {
            spawn_config_reloading(settings, opts, service, stop);
            Ok(None)
        }
        ConfigSource::Xds(x) => {
            let loaded = xds::spawn(x, opts, service, stop.clone())?;
            // Installed anyway: SIGHUP's default action would end the process.
            spawn_sighup(None, stop);
            Ok(Some(loaded))
        }
    }
}

/// Reload on file changes (when watching is on) and on SIGHUP.
fn spawn_config_reloading(
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
    spawn_sighup(Some(reloader), stop);
}

#[cfg(unix)]
fn spawn_sighup(reloader: Option<Arc<Reloader>>, stop: CancellationToken) {
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
                    let Some(r) = reloader.clone() else {
                        tracing::info!("SIGHUP ignored: the rules come from xDS");
                        continue;
                    };
                    tracing::info!("SIGHUP: reloading config");
                    // Detached: a load stuck on a read must not hold SIGHUP or exit.
                    let _ = r.reload_detached().await;
                }
            }
        }
    });
}

#[cfg(not(unix))]
fn spawn_sighup(_: Option<Arc<Reloader>>, _: CancellationToken) {}
