//! Hot reload: rebuild the whole config from its paths and swap it in atomically, or keep
//! the last good one and say why.
//!
//! Triggers: file-system events under the config paths (debounced), events on their parent
//! directories that touch the path itself (a Kubernetes ConfigMap or `RUNTIME_ROOT` symlink
//! swap), and `SIGHUP`. Watches are re-established after every reload, because a swapped
//! symlink leaves the old watch on the old directory.
//!
//! Events alone can miss a change: a file written into a directory created an instant
//! before (its watch is added only once the directory's own event is seen), or any change
//! while the watches are being re-established. So each load also records the tree's
//! [`fingerprint`] (which rule files, with their metadata) as it found it, and after the
//! watches are back the tree is fingerprinted again: any difference is a change no event
//! may report, and reloads. Every change before that second look is caught by it, every
//! change after it by a watch that is in place.
//!
//! Paths are watched absolute (`./config` becomes `/cwd/config`, `..` resolved), because
//! file events always name absolute paths: a relative watch list would match none of them.
//! Each load runs on a thread of its own and is awaited at most [`LOAD_TIMEOUT`]: a read
//! that never returns (a hung network file system) costs that thread, never the watcher,
//! SIGHUP or process exit. Loads are serialized, so configs are swapped in the order they
//! were read, and a load that finishes after its timeout is discarded.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, Fingerprint, LoadOptions, RateLimitConfig, fingerprint};
use crate::service::RateLimitService;

/// Why a detached load (or look at the tree) gave no result.
#[derive(Debug, thiserror::Error)]
enum NoResult {
    #[error("{0} config loads are still stuck reading files; not starting another")]
    Stuck(usize),
    #[error("cannot start a config load: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("config load ended without a result")]
    Lost,
    #[error("config load did not finish within {0:?} (a file read is stuck); it is abandoned")]
    TimedOut(Duration),
}

/// Default quiet time before a burst of file events triggers one reload.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);

/// Longest wait for one load (discovery, reads, parsing) before it is given up.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Loads still running after their timeout beyond which no new one is started (each holds
/// a thread).
const MAX_STUCK_LOADS: usize = 4;

/// How a config is loaded from its paths ([`RateLimitConfig::load`]).
pub type Load = fn(&[PathBuf], &LoadOptions) -> Result<RateLimitConfig, Vec<ConfigError>>;

pub struct Reloader {
    paths: Vec<PathBuf>,
    opts: LoadOptions,
    service: Arc<RateLimitService>,
    /// One load at a time.
    serial: Mutex<()>,
    /// Load threads still running (stuck ones included).
    running: Arc<AtomicUsize>,
    load: Load,
    load_timeout: Duration,
    /// The tree as the last load found it (`None` before the first one, and after one that
    /// did not finish).
    loaded: parking_lot::Mutex<Option<Fingerprint>>,
}

impl Reloader {
    pub fn new(paths: Vec<PathBuf>, opts: LoadOptions, service: Arc<RateLimitService>) -> Reloader {
        Reloader {
            paths,
            opts,
            service,
            serial: Mutex::new(()),
            running: Arc::new(AtomicUsize::new(0)),
            load: RateLimitConfig::load,
            load_timeout: LOAD_TIMEOUT,
            loaded: parking_lot::Mutex::new(None),
        }
    }

    /// A reloader with its own load function and load timeout (tests use it to stand in
    /// for a file system that hangs).
    pub fn with_loader(
        paths: Vec<PathBuf>,
        opts: LoadOptions,
        service: Arc<RateLimitService>,
        load: Load,
        load_timeout: Duration,
    ) -> Reloader {
        Reloader {
            load,
            load_timeout,
            ..Reloader::new(paths, opts, service)
        }
    }

    /// Rebuild and swap, on this thread. On error the active config stays and every error
    /// is logged with its file and line.
    pub fn reload(&self) -> Result<(), Vec<ConfigError>> {
        let (seen, result) = load_with_fingerprint(self.load, &self.paths, &self.opts);
        *self.loaded.lock() = Some(seen);
        self.apply(result)
    }

    /// [`Reloader::reload`] with the load on a thread of its own, awaited at most the load
    /// timeout (see the module documentation).
    pub async fn reload_detached(&self) -> Result<(), Vec<ConfigError>> {
        let _one_at_a_time = self.serial.lock().await;
        let (paths, opts, load) = (self.paths.clone(), self.opts.clone(), self.load);
        match self
            .detached(move || load_with_fingerprint(load, &paths, &opts))
            .await
        {
            Ok((seen, result)) => {
                *self.loaded.lock() = Some(seen);
                self.apply(result)
            }
            Err(e) => {
                // Unknown what a stuck load saw: no second look until a load finishes (else
                // every look would find a difference and start another stuck load).
                *self.loaded.lock() = None;
                self.apply(Err(vec![ConfigError::general(e.to_string())]))
            }
        }
    }

    /// Whether the tree differs from what the last load found (a change no event
    /// reported). Looked at on a thread of its own, like a load; `false` when there was no
    /// load yet or the look did not finish in time (nothing to compare, or a file system
    /// that hangs, which the next load reports).
    async fn changed_since_load(&self) -> bool {
        let Some(loaded) = self.loaded.lock().clone() else {
            return false;
        };
        let paths = self.paths.clone();
        match self.detached(move || fingerprint(&paths)).await {
            Ok(now) => now != loaded,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for config changes");
                false
            }
        }
    }

    /// Run `work` (a load, or a look at the tree) on a thread of its own, awaited at most
    /// the load timeout: a read that never returns costs that thread only. The error says
    /// why there is no result.
    async fn detached<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, NoResult> {
        let stuck = self.running.load(Ordering::SeqCst);
        if stuck >= MAX_STUCK_LOADS {
            return Err(NoResult::Stuck(stuck));
        }
        let (tx, rx) = oneshot::channel();
        let running = RunningGuard::enter(&self.running);
        std::thread::Builder::new()
            .name("sluice-config-load".into())
            .spawn(move || {
                let _running = running;
                let _ = tx.send(work());
            })
            .map_err(NoResult::Spawn)?;
        match tokio::time::timeout(self.load_timeout, rx).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(_)) => Err(NoResult::Lost),
            Err(_) => Err(NoResult::TimedOut(self.load_timeout)),
        }
    }

    fn apply(
        &self,
        result: Result<RateLimitConfig, Vec<ConfigError>>,
    ) -> Result<(), Vec<ConfigError>> {
        let metrics = self.service.metrics();
        match result {
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
                log_config_errors(
                    &errors,
                    "config rejected; the previous config keeps serving",
                );
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
        let missed = tx.clone();
        let targets: Vec<PathBuf> = self.paths.iter().map(|p| watch_path(p)).collect();
        let ancestors: Vec<PathBuf> = targets.iter().flat_map(|p| ancestors_of(p)).collect();
        let filter = targets.clone();
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                let Ok(ev) = res else { return };
                if matches!(ev.kind, EventKind::Access(_)) {
                    return;
                }
                // Events in an ancestor directory matter only when they touch our path (a
                // symlink swap); events inside the config paths always do.
                let relevant = ev.paths.iter().any(|p| {
                    filter.iter().any(|t| p.starts_with(t) || t.starts_with(p))
                        || ancestors.iter().any(|a| p == a)
                });
                if relevant {
                    let _ = tx.send(());
                }
            })?;
        let mut watched = BTreeSet::new();
        rewatch(&mut watcher, &targets, &mut watched);
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
                let _ = self.reload_detached().await;
                rewatch(&mut watcher, &targets, &mut watched);
                // Changes no event reported (see the module documentation) reload too.
                if self.changed_since_load().await {
                    tracing::debug!("config changed without a file event; reloading");
                    let _ = missed.send(());
                }
            }
        });
        Ok(())
    }
}

/// Log each error of a rejected config with its file and line (as fields, for JSON logs),
/// under `message`: a reload's and the startup load's.
pub fn log_config_errors(errors: &[ConfigError], message: &str) {
    for e in errors {
        tracing::error!(
            error = %e,
            file = e.path.as_ref().map(|p| tracing::field::display(p.display())),
            line = e.line.map(|l| l as u64),
            "{message}"
        );
    }
}

/// The tree's fingerprint as the load is about to read it, and the load. Taken first: a
/// change during the load then shows up as a difference afterwards, never the reverse.
fn load_with_fingerprint(
    load: Load,
    paths: &[PathBuf],
    opts: &LoadOptions,
) -> (Fingerprint, Result<RateLimitConfig, Vec<ConfigError>>) {
    let seen = fingerprint(paths);
    (seen, load(paths, opts))
}

/// Counts a load thread from its start to its end, however it ends.
struct RunningGuard(Arc<AtomicUsize>);

impl RunningGuard {
    fn enter(counter: &Arc<AtomicUsize>) -> RunningGuard {
        counter.fetch_add(1, Ordering::SeqCst);
        RunningGuard(counter.clone())
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The path as it is watched and as file events name it: absolute (relative paths are
/// taken from the working directory), with `..` resolved against the real directories
/// (the kernel's meaning of `..`), and the symlinks after the last `..` kept: swapping them
/// is what the ancestor watches see.
pub fn watch_path(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let parts: Vec<Component<'_>> = abs.components().collect();
    let Some(last_up) = parts.iter().rposition(|c| *c == Component::ParentDir) else {
        return abs;
    };
    let head: PathBuf = parts[..=last_up].iter().collect();
    let tail: PathBuf = parts[last_up + 1..].iter().collect();
    match std::fs::canonicalize(&head) {
        Ok(real) => real.join(tail),
        Err(_) => abs,
    }
}

/// Directories whose entries can replace a config path: its parent (editors rename files
/// over it) and the parent of every symlink on the way to it (a Kubernetes `..data` link, or
/// envoyproxy/ratelimit's `RUNTIME_ROOT` pointing at a `current` link that is swapped).
fn ancestors_of(abs: &Path) -> Vec<PathBuf> {
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

/// (Re)establish watches: each config path (as [`watch_path`] gives it) recursively, its
/// ancestors non-recursively.
fn rewatch(
    watcher: &mut RecommendedWatcher,
    targets: &[PathBuf],
    watched: &mut BTreeSet<(PathBuf, bool)>,
) {
    for (p, _) in std::mem::take(watched) {
        let _ = watcher.unwatch(&p);
    }
    for abs in targets {
        match watcher.watch(abs, RecursiveMode::Recursive) {
            Ok(()) => {
                watched.insert((abs.clone(), true));
            }
            Err(e) => tracing::warn!(path = %abs.display(), error = %e, "cannot watch config path"),
        }
        for a in ancestors_of(abs) {
            if watcher.watch(&a, RecursiveMode::NonRecursive).is_ok() {
                watched.insert((a, false));
            }
        }
    }
}
