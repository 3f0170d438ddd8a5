//! Hot reload: rebuild the whole config from its paths and swap it in atomically, or keep
//! the last good one and say why.
//!
//! Triggers: file-system events under the config paths (debounced), events on their parent
//! directories that touch the path itself (a Kubernetes ConfigMap or `RUNTIME_ROOT` symlink
//! swap), and `SIGHUP`. Watches are re-established after every reload, because a swapped
//! symlink leaves the old watch on the old directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, LoadOptions, RateLimitConfig};
use crate::service::RateLimitService;

/// Default quiet time before a burst of file events triggers one reload.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);

pub struct Reloader {
    paths: Vec<PathBuf>,
    opts: LoadOptions,
    service: Arc<RateLimitService>,
}

impl Reloader {
    pub fn new(paths: Vec<PathBuf>, opts: LoadOptions, service: Arc<RateLimitService>) -> Reloader {
        Reloader {
            paths,
            opts,
            service,
        }
    }

    /// Rebuild and swap. On error the active config stays and every error is logged with
    /// its file and line.
    pub fn reload(&self) -> Result<(), Vec<ConfigError>> {
        let metrics = self.service.metrics();
        match RateLimitConfig::load(&self.paths, &self.opts) {
            Ok(config) => {
                tracing::info!(
                    domains = config.domain_count(),
                    rules = config.rules().len(),
                    "config reloaded"
                );
                self.service.set_config(config);
                metrics.config_load_success.inc();
                Ok(())
            }
            Err(errors) => {
                metrics.config_load_error.inc();
                for e in &errors {
                    tracing::error!(
                        error = %e,
                        file = e.path.as_ref().map(|p| tracing::field::display(p.display())),
                        line = e.line.map(|l| l as u64),
                        "config rejected; the previous config keeps serving"
                    );
                }
                Err(errors)
            }
        }
    }

    /// Watch the config paths until `shutdown`, reloading after each quiet burst of events.
    pub fn spawn_watcher(
        self: Arc<Self>,
        debounce: Duration,
        shutdown: CancellationToken,
    ) -> Result<(), notify::Error> {
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        let targets = self.paths.clone();
        let ancestors: Vec<PathBuf> = targets.iter().flat_map(|p| ancestors_of(p)).collect();
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                let Ok(ev) = res else { return };
                if matches!(ev.kind, EventKind::Access(_)) {
                    return;
                }
                // Events in an ancestor directory matter only when they touch our path (a
                // symlink swap); events inside the config paths always do.
                let relevant = ev.paths.iter().any(|p| {
                    targets.iter().any(|t| p.starts_with(t) || t.starts_with(p))
                        || ancestors.iter().any(|a| p == a)
                });
                if relevant {
                    let _ = tx.send(());
                }
            })?;
        let mut watched = BTreeSet::new();
        rewatch(&mut watcher, &self.paths, &mut watched);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    got = rx.recv() => if got.is_none() { break },
                }
                // Debounce: wait until no event arrived for `debounce`.
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(debounce) => break,
                        got = rx.recv() => if got.is_none() { return },
                    }
                }
                let this = self.clone();
                let _ = tokio::task::spawn_blocking(move || this.reload()).await;
                rewatch(&mut watcher, &self.paths, &mut watched);
            }
        });
        Ok(())
    }
}

/// Directories whose entries can replace a config path: its parent (editors rename files
/// over it) and the parent of every symlink on the way to it (a Kubernetes `..data` link, or
/// envoyproxy/ratelimit's `RUNTIME_ROOT` pointing at a `current` link that is swapped).
fn ancestors_of(path: &Path) -> Vec<PathBuf> {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut dirs = Vec::new();
    if let Some(parent) = abs.parent() {
        dirs.push(parent.to_path_buf());
    }
    for a in abs.ancestors().skip(1) {
        let is_link = std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink());
        if let (true, Some(parent)) = (is_link, a.parent())
            && !dirs.iter().any(|d| d == parent)
        {
            dirs.push(parent.to_path_buf());
        }
    }
    dirs
}

/// (Re)establish watches: each config path recursively, its ancestors non-recursively.
fn rewatch(
    watcher: &mut RecommendedWatcher,
    paths: &[PathBuf],
    watched: &mut BTreeSet<(PathBuf, bool)>,
) {
    for (p, _) in std::mem::take(watched) {
        let _ = watcher.unwatch(&p);
    }
    for path in paths {
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        match watcher.watch(&abs, RecursiveMode::Recursive) {
            Ok(()) => {
                watched.insert((abs.clone(), true));
            }
            Err(e) => tracing::warn!(path = %abs.display(), error = %e, "cannot watch config path"),
        }
        for a in ancestors_of(&abs) {
            if watcher.watch(&a, RecursiveMode::NonRecursive).is_ok() {
                watched.insert((a, false));
            }
        }
    }
}
