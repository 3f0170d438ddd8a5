//! sluice in the test's own process: `server::run` on 127.0.0.1 listeners bound to port 0,
//! a private rule directory, and a [`ManualClock`] the test moves instead of waiting for
//! windows to pass on the wall clock.
//!
//! Behaviour tests use this; tests whose subject is the binary itself (startup, signals,
//! environment variables, TLS files, deployment) run the real process (`support::sluice`).
//! With Redis, the scripts read the injected clock (`--redis-time-source local`), so a test
//! decides where in a window it stands; only tests about Redis's own clock keep `TIME`
//! ([`Builder::redis_time`]). Redis expires keys on its own clock whatever the time source:
//! a clock moved hours ahead still finds the keys of the window it left, which the scripts
//! treat as an earlier window's state, as they do after a real wait.
//!
//! The settings come from an argument vector resolved as the binary resolves it
//! ([`settings`]), with the builder's own map as the environment, never this process's.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use sluice::limit::Clock;
pub use sluice::limit::ManualClock;
use sluice::server::{self, Listeners};
use sluice::settings::Settings;
use tempfile::TempDir;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tracing::Dispatch;
use tracing_subscriber::EnvFilter;

use super::http::{http_request, metric_value};
use super::sluice::{Client, HEALTHY_WITHIN};

/// Where a test's clock starts: the first second of a UTC day (2023-11-15), so every window
/// up to a day long has just begun and no test straddles a boundary it did not choose.
pub const T0_MS: u64 = 1_700_006_400_000 + 1_000;

/// The settings `sluice serve <args>` resolves with `env` as its whole environment
/// (`SLUICE_*` and envoyproxy/ratelimit's variables alike): the one place the harness turns
/// a command line into [`Settings`].
pub fn settings(args: &[String], env: &BTreeMap<String, String>) -> Result<Settings, String> {
    Settings::resolve(args, &|name| env.get(name).cloned()).map_err(|e| e.to_string())
}

/// A clock at [`T0_MS`], to share between instances ([`Builder::clock`]).
pub fn test_clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(T0_MS))
}

/// Time passing at the wall clock's pace, starting at [`T0_MS`] when made.
pub struct RunningClock(Instant);

pub fn running_clock() -> Arc<RunningClock> {
    Arc::new(RunningClock(Instant::now()))
}

impl Clock for RunningClock {
    fn now_ms(&self) -> u64 {
        T0_MS + u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX / 2)
    }
}

pub struct Builder {
    files: Vec<(String, String)>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    clock: Arc<dyn Clock>,
    /// The same clock when it is one the test moves.
    manual: Option<Arc<ManualClock>>,
    redis_time: bool,
}

/// An in-process sluice with the default listeners on loopback port 0 (the admin one too),
/// and its own clock at [`T0_MS`].
pub fn in_process() -> Builder {
    let clock = test_clock();
    Builder {
        files: Vec::new(),
        args: Vec::new(),
        env: BTreeMap::new(),
        clock: clock.clone(),
        manual: Some(clock),
        redis_time: false,
    }
}

impl Builder {
    /// Add a rule file to the private config directory.
    pub fn file(mut self, name: &str, content: &str) -> Self {
        self.files.push((name.into(), content.into()));
        self
    }

    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// A variable of the server's environment (`SLUICE_*` or one of envoyproxy/ratelimit's):
    /// the server reads these and nothing of this process's environment.
    pub fn env(mut self, k: &str, v: impl Into<String>) -> Self {
        self.env.insert(k.into(), v.into());
        self
    }

    /// Use the Redis store at `url` with the injected clock (`--redis-time-source local`)
    /// and an operation deadline (`--redis-timeout 2s`) a loaded test machine always meets.
    pub fn redis(self, url: impl Into<String>) -> Self {
        self.args(["--redis-url".to_owned(), url.into()])
            .args(["--redis-timeout", "2s"])
    }

    /// Keep Redis's own clock (`TIME` in the scripts): for the tests whose subject it is.
    pub fn redis_time(mut self) -> Self {
        self.redis_time = true;
        self
    }

    /// Share `clock` (several instances on one Redis see the same time).
    pub fn clock(mut self, clock: Arc<ManualClock>) -> Self {
        self.clock = clock.clone();
        self.manual = Some(clock);
        self
    }

    /// Share a clock that runs at the wall clock's pace from [`T0_MS`] ([`running_clock`]):
    /// for tests whose subject needs time to pass (rates measured by the local view) but
    /// must not meet a window boundary.
    pub fn running(mut self, clock: Arc<RunningClock>) -> Self {
        self.clock = clock;
        self.manual = None;
        self
    }

    pub async fn start(self) -> Server {
        self.try_start().await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Start, then wait until `/healthcheck` answers 200 (with Redis: once it is connected).
    pub async fn start_healthy(self) -> Server {
        let s = self.start().await;
        assert!(
            s.wait_healthy(HEALTHY_WITHIN).await,
            "not healthy within {HEALTHY_WITHIN:?}"
        );
        s
    }

    pub async fn try_start(self) -> Result<Server, String> {
        let dir = TempDir::new().map_err(|e| e.to_string())?;
        let config = dir.path().join("config");
        std::fs::create_dir_all(&config).map_err(|e| e.to_string())?;
        for (name, content) in &self.files {
            let p = config.join(name);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            std::fs::write(p, content).map_err(|e| e.to_string())?;
        }
        // Loopback port 0 for every listener, unless the test says otherwise.
        let given = |flag: &str| {
            self.args
                .iter()
                .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
        };
        let mut args: Vec<String> = vec!["--config".into(), config.display().to_string()];
        for flag in ["--grpc-addr", "--http-addr", "--admin-addr"] {
            if !given(flag) {
                args.extend([flag.into(), "127.0.0.1:0".into()]);
            }
        }
        let uses_redis = given("--redis-url")
            || ["REDIS_URL", "SLUICE_REDIS_URL"]
                .iter()
                .any(|k| self.env.contains_key(*k));
        if uses_redis && !self.redis_time && !given("--redis-time-source") {
            args.extend(["--redis-time-source".into(), "local".into()]);
        }
        args.extend(self.args);
        let settings = settings(&args, &self.env)?;
        let logs = Logs::default();
        let runtime = ServerRuntime(Some(runtime(&settings, &logs)?));
        let shutdown = CancellationToken::new();
        let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
        let task = runtime.handle().spawn({
            let shutdown = shutdown.clone();
            let clock = self.clock.clone();
            async move {
                let listeners = match Listeners::bind(&settings).await {
                    Ok(l) => l,
                    Err(e) => {
                        let message = format!("bind: {e}");
                        let _ = bound_tx.send(Err(message.clone()));
                        return Err(message);
                    }
                };
                let _ = bound_tx.send(addresses(&listeners));
                server::run(settings, listeners, shutdown, clock)
                    .await
                    .map_err(|e| e.to_string())
            }
        });
        let addrs = bound_rx
            .await
            .map_err(|_| "the server task ended before binding".to_string())??;
        let mut s = Server {
            grpc: addrs.grpc,
            http: addrs.http,
            admin: addrs.admin,
            debug: addrs.debug,
            metrics: addrs.metrics,
            config_dir: config,
            clock: self.manual,
            logs,
            shutdown,
            task: Some(task),
            _runtime: runtime,
            _dir: dir,
        };
        s.wait_serving().await?;
        Ok(s)
    }
}

struct Addresses {
    grpc: SocketAddr,
    http: SocketAddr,
    admin: Option<SocketAddr>,
    debug: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
}

fn addresses(l: &Listeners) -> Result<Addresses, String> {
    let addr = |b: &server::Bound| b.local_addr().map_err(|e| e.to_string());
    Ok(Addresses {
        grpc: addr(&l.grpc)?,
        http: addr(&l.http)?,
        admin: l.admin.as_ref().map(addr).transpose()?,
        debug: l.debug.as_ref().map(addr).transpose()?,
        metrics: match &l.metrics {
            Some(m) => Some(m.local_addr().map_err(|e| e.to_string())?),
            None => None,
        },
    })
}

/// The server's own runtime, as the binary has one: the test's calls and the server's work
/// run concurrently, a test blocking its thread does not stop the server, and the
/// server's log (JSON lines, at its `--log-level`) is kept for the test, from every thread of
/// this runtime and no other.
fn runtime(settings: &Settings, logs: &Logs) -> Result<tokio::runtime::Runtime, String> {
    let filter = EnvFilter::new(format!("warn,sluice={}", settings.log_level));
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_env_filter(filter)
        .with_writer(move || sink.clone())
        .finish();
    let dispatch = Dispatch::new(subscriber);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            // The thread's default for its whole life (it belongs to this runtime only).
            std::mem::forget(tracing::dispatcher::set_default(&dispatch));
        })
        .build()
        .map_err(|e| format!("runtime: {e}"))
}

/// The log lines of one server.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<String>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The formatter writes each event whole.
        let text = String::from_utf8_lossy(buf);
        let mut lines = self.0.lock().unwrap();
        lines.extend(text.lines().map(String::from));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A running in-process server; shut down when dropped.
pub struct Server {
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    pub admin: Option<SocketAddr>,
    pub debug: Option<SocketAddr>,
    pub metrics: Option<SocketAddr>,
    pub config_dir: PathBuf,
    clock: Option<Arc<ManualClock>>,
    logs: Logs,
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), String>>>,
    /// Dropped after the shutdown token is cancelled (fields drop after `drop`).
    _runtime: ServerRuntime,
    _dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The server's runtime, let go without blocking: it is dropped in the test's async
/// context (also when a start fails), where a runtime may not wait for its threads.
struct ServerRuntime(Option<tokio::runtime::Runtime>);

impl ServerRuntime {
    fn handle(&self) -> &tokio::runtime::Handle {
        self.0.as_ref().expect("runtime").handle()
    }
}

impl Drop for ServerRuntime {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.shutdown_background();
        }
    }
}

impl Server {
    /// The sockets listen once serving starts, the HTTP port last: wait for that, or for
    /// `run` to fail.
    async fn wait_serving(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + HEALTHY_WITHIN;
        while Instant::now() < deadline {
            if tokio::net::TcpStream::connect(self.http).await.is_ok() {
                return Ok(());
            }
            if self.task.as_ref().is_some_and(|t| t.is_finished()) {
                let ended = self.stop().await;
                return Err(format!(
                    "server::run ended: {ended:?}\n{}",
                    self.logs().join("\n")
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(format!("not serving within {HEALTHY_WITHIN:?}"))
    }

    /// The clock the server reads (unless it runs on a [`RunningClock`]).
    pub fn clock(&self) -> &Arc<ManualClock> {
        self.clock
            .as_ref()
            .expect("a manual clock (not a RunningClock)")
    }

    /// Move the server's time forward.
    pub fn advance(&self, by: Duration) {
        self.clock()
            .advance(u64::try_from(by.as_millis()).expect("ms"));
    }

    /// The server's time, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock().now_ms()
    }

    /// Every log line so far (JSON, as the binary writes with `--log-format json`).
    pub fn logs(&self) -> Vec<String> {
        self.logs.0.lock().unwrap().clone()
    }

    /// Wait until a log line contains `needle`.
    pub async fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.logs().iter().any(|l| l.contains(needle)) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Shut down (drain as on SIGTERM) and return what `run` returned.
    pub async fn stop(&mut self) -> Result<(), String> {
        self.shutdown.cancel();
        match self.task.take() {
            Some(t) => match t.await {
                Ok(r) => r,
                Err(e) => Err(format!("server task: {e}")),
            },
            None => Ok(()),
        }
    }

    pub async fn client(&self) -> Client {
        RateLimitServiceClient::connect(format!("http://{}", self.grpc))
            .await
            .expect("connect to sluice")
    }

    pub async fn channel(&self) -> Channel {
        tonic::transport::Endpoint::from_shared(format!("http://{}", self.grpc))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect to sluice")
    }

    pub fn config_path(&self, name: &str) -> PathBuf {
        self.config_dir.join(name)
    }

    pub async fn http_get(&self, path: &str) -> (u16, String) {
        http_request(self.http, "GET", path, "").await
    }

    pub async fn http_post(&self, path: &str, body: &str) -> (u16, String) {
        http_request(self.http, "POST", path, body).await
    }

    /// Wait until `/healthcheck` answers 200.
    pub async fn wait_healthy(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.http_get("/healthcheck").await.0 == 200 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Read one Prometheus sample (exact name including labels), 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let (_, body) = self.http_get("/metrics").await;
        metric_value(&body, series).unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that cannot start is an error for the test to read, not a panic (its
    /// runtime is let go from the test's async context).
    #[tokio::test]
    async fn a_failed_start_is_an_error() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap().to_string();
        let e = in_process()
            .args(["--admin-addr", &addr])
            .try_start()
            .await
            .err()
            .expect("the admin address is taken");
        assert!(e.contains(&format!("cannot listen on {addr}")), "{e}");
        let e = in_process()
            .args(["--redis-timeout", "soon"])
            .try_start()
            .await
            .err()
            .expect("not a duration");
        assert!(e.contains("--redis-timeout"), "{e}");
    }
}
