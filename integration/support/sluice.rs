//! Runs the real `sluice` binary for black-box tests: ports chosen by the kernel (the
//! binary binds port 0 and logs the addresses), a private config directory, and a gRPC
//! client built from envoy-types.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tonic::transport::Channel;

pub use super::http::{http_request, metric_value};

/// How long a started server may take to become healthy (connect to Redis…): generous, as
/// a loaded machine needs, and only waited out when something is wrong.
pub const HEALTHY_WITHIN: Duration = Duration::from_secs(20);

// Request builders and helpers live beside, re-exported so `sluice::*` brings them.
pub use super::requests::*;
pub use super::unix::{unix_channel, unix_tls_channel};

impl Sluice {
    /// A client of the gRPC unix socket (`--grpc-uds`).
    pub async fn unix_client(&self) -> Client {
        Client::new(self.unix_channel().await)
    }

    /// A channel to the gRPC unix socket (`--grpc-uds`): HTTP/2 with prior knowledge over
    /// the socket, as Envoy's `pipe` address speaks it.
    pub async fn unix_channel(&self) -> Channel {
        let path = self
            .grpc_unix
            .clone()
            .expect("sluice serves gRPC on a unix socket");
        unix_channel(path)
            .await
            .expect("connect to sluice's unix socket")
    }
}

pub struct Builder {
    files: Vec<(String, String)>,
    config_args: bool,
    relative: bool,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    ready: String,
    /// Run the binary under this path (a link to it), without the `serve` subcommand.
    program: Option<PathBuf>,
    nofile: Option<u32>,
}

pub fn sluice() -> Builder {
    // The admin listener's default port (8082) would collide between parallel tests: every
    // instance gets a kernel-chosen one unless a test says otherwise.
    let env = BTreeMap::from([("SLUICE_ADMIN_ADDR".to_owned(), "127.0.0.1:0".to_owned())]);
    Builder {
        files: Vec::new(),
        config_args: true,
        relative: false,
        args: Vec::new(),
        env,
        ready: "serving".into(),
        program: None,
        nofile: None,
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

    pub fn env(mut self, k: &str, v: impl Into<String>) -> Self {
        self.env.insert(k.into(), v.into());
        self
    }

    /// Use the Redis store at `url` (`--redis-url`, a comma-separated list for a cluster),
    /// with an operation deadline (`--redis-timeout 2s`) a loaded test machine always
    /// meets: the tests using it are about behaviour, not latency.
    pub fn redis(self, url: impl Into<String>) -> Self {
        self.args(["--redis-url".to_owned(), url.into()])
            .args(["--redis-timeout", "2s"])
    }

    /// Keep the admin listener's default address (`127.0.0.1:8082`) instead of a
    /// kernel-chosen port: for tests of what happens when it is taken.
    pub fn default_admin(mut self) -> Self {
        self.env.remove("SLUICE_ADMIN_ADDR");
        self
    }

    /// envoyproxy/ratelimit's listener variables (`GRPC_HOST`/`GRPC_PORT`, `HOST`/`PORT`)
    /// on loopback with kernel-chosen ports, for tests that set everything their way.
    pub fn their_listeners(self) -> Self {
        self.env("GRPC_HOST", "127.0.0.1")
            .env("GRPC_PORT", "0")
            .env("HOST", "127.0.0.1")
            .env("PORT", "0")
    }

    /// Consider the process started at the log line with this message (which must carry
    /// the `grpc` and `http` addresses) instead of `serving`.
    pub fn ready_on(mut self, message: &str) -> Self {
        self.ready = message.into();
        self
    }

    /// Run the binary as `path` (a symlink to it the test made), with no subcommand: how
    /// an image runs it under another name.
    pub fn run_as(mut self, path: PathBuf) -> Self {
        self.program = Some(path);
        self.config_args = false;
        self
    }

    /// Start the process with this many file descriptors at most (`ulimit -n`).
    pub fn nofile(mut self, n: u32) -> Self {
        self.nofile = Some(n);
        self
    }

    /// Do not pass `--config`/`--grpc-addr`/`--http-addr`: the test sets everything
    /// through the environment.
    pub fn no_default_args(mut self) -> Self {
        self.config_args = false;
        self
    }

    /// Run in the temporary directory with `--config ./config` (the README's default).
    pub fn relative_config(mut self) -> Self {
        self.relative = true;
        self
    }

    pub async fn start(self) -> Sluice {
        self.try_start().await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Start, then wait until `/healthcheck` answers 200 (with Redis: once it is
    /// connected); panics with the logs when it does not within [`HEALTHY_WITHIN`].
    pub async fn start_healthy(self) -> Sluice {
        let s = self.start().await;
        assert!(
            s.wait_healthy(HEALTHY_WITHIN).await,
            "not healthy within {HEALTHY_WITHIN:?}: {:?}",
            s.logs()
        );
        s
    }

    pub async fn try_start(self) -> Result<Sluice, String> {
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
        let program = match &self.program {
            Some(p) => p.clone(),
            None => PathBuf::from(env!("CARGO_BIN_EXE_sluice")),
        };
        let mut cmd = match self.nofile {
            None => Command::new(&program),
            Some(n) => {
                // The shell lowers the limit, then becomes sluice (same pid).
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(&program);
                c
            }
        };
        if self.program.is_none() {
            cmd.arg("serve");
        }
        if self.relative {
            cmd.current_dir(dir.path());
        }
        if self.config_args {
            let rel = self.relative.then(|| PathBuf::from("./config"));
            cmd.arg("--config")
                .arg(rel.unwrap_or(config.clone()))
                .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"]);
        }
        cmd.args(&self.args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("SLUICE_LOG_FORMAT", "json")
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("spawn sluice: {e}"))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let logs = logs.clone();
            let ready = self.ready.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let serving = serde_json::from_str::<serde_json::Value>(&line)
                        .ok()
                        .filter(|v| v["message"] == ready.as_str());
                    // Logged before the start is reported, so the line is there to read.
                    logs.lock().unwrap().push(line);
                    if let Some(v) = serving {
                        let _ = tx.send((
                            v["grpc"].as_str().map(String::from),
                            v["http"].as_str().map(String::from),
                            v["admin"]
                                .as_str()
                                .filter(|a| *a != "off")
                                .map(String::from),
                        ));
                    }
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let (grpc, http, admin) = loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok((Some(g), Some(h), a)) => break (g, h, a),
                Ok(_) => return Err("serving line without addresses".into()),
                Err(_) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        std::thread::sleep(Duration::from_millis(50));
                        return Err(format!(
                            "sluice exited with {status}: {}",
                            logs.lock().unwrap().join("\n")
                        ));
                    }
                    if Instant::now() > deadline {
                        let _ = child.kill();
                        return Err(format!(
                            "sluice did not start: {}",
                            logs.lock().unwrap().join("\n")
                        ));
                    }
                }
            }
        };
        // `--grpc-uds`: the line says `unix:PATH`; `grpc` is then unspecified.
        let grpc_unix = grpc.strip_prefix("unix:").map(PathBuf::from);
        let grpc = match grpc_unix {
            Some(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
            None => grpc.parse().map_err(|e| format!("grpc addr {grpc}: {e}"))?,
        };
        Ok(Sluice {
            child,
            grpc,
            grpc_unix,
            http: http.parse().map_err(|e| format!("http addr {http}: {e}"))?,
            admin: match admin {
                Some(a) => Some(a.parse().map_err(|e| format!("admin addr {a}: {e}"))?),
                None => None,
            },
            logs,
            config_dir: config,
            _dir: dir,
        })
    }
}

pub struct Sluice {
    child: Child,
    pub grpc: SocketAddr,
    /// With `--grpc-uds` (`GRPC_UDS`): the socket gRPC is served on (and `grpc` means
    /// nothing).
    pub grpc_unix: Option<PathBuf>,
    pub http: SocketAddr,
    /// The admin listener, unless disabled.
    pub admin: Option<SocketAddr>,
    logs: Arc<Mutex<Vec<String>>>,
    pub config_dir: PathBuf,
    _dir: TempDir,
}

impl Drop for Sluice {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sluice {
    pub async fn client(&self) -> Client {
        let url = format!("http://{}", self.grpc);
        Client::connect(url).await.expect("connect to sluice")
    }

    pub async fn channel(&self) -> Channel {
        tonic::transport::Endpoint::from_shared(format!("http://{}", self.grpc))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect to sluice")
    }

    /// Every log line so far (JSON).
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// A field of the "serving" log line (e.g. `debug`, `metrics`), as an address.
    pub fn serving_addr(&self, field: &str) -> Option<SocketAddr> {
        self.logs().iter().find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["message"] == "serving")
                .then(|| v[field].as_str()?.parse().ok())
                .flatten()
        })
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

    pub fn config_path(&self, name: &str) -> PathBuf {
        self.config_dir.join(name)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill -{sig} failed");
    }

    /// Wait for the process to exit.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
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
