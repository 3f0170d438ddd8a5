//! One scenario's stack, as envoyproxy/ratelimit's compose file
//! (`integration-test/docker-compose-integration-test.yml` at f2fb157) starts theirs, with
//! sluice in the place of their service; and what the scenarios do with it: requests
//! through the proxy with the answer each must get, the exporter's metrics, Envoy's count
//! of its checks' outcomes, and a failure message holding every part's logs.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tempfile::TempDir;

use super::proxy::{self, Ports};
use super::rules;
use crate::support::envoy::{Envoy, Response, http1};
use crate::support::redis::{RedisServer, free_port};
use crate::support::sluice::*;
use crate::support::statsd_exporter::StatsdExporter;

/// The mapping our statsd exporter applies: for the one name a scenario reads, the name
/// and labels (the domain, then the descriptor's key) their exporter's mapping gives it.
const STATSD_MAPPING: &str = r#"
mappings:
  - match: "ratelimit.service.rate_limit.*.*.over_limit"
    name: "ratelimit_service_rate_limit_over_limit"
    labels: {domain: "$1", key1: "$2"}
"#;

/// How long the exporter may take to show sluice's stats: sluice sends them every 10 s
/// (their default too), and a loaded machine may be slow.
const STATS_WITHIN: Duration = Duration::from_secs(30);

/// How long sluice may take to count a report Envoy sends when a response is done.
const REPORT_WITHIN: Duration = Duration::from_secs(10);

/// The `environment` their compose file gives their service, by name and value, with the
/// compose host names and fixed ports this test cannot have replaced (theirs in the
/// comments): statsd, Redis, and the directory their rule files are mounted in.
fn compose_environment(
    redis: &RedisServer,
    statsd: SocketAddr,
    runtime_root: &Path,
) -> Vec<(&'static str, String)> {
    vec![
        ("USE_STATSD", "true".into()),
        // statsd
        ("STATSD_HOST", statsd.ip().to_string()),
        // 9125
        ("STATSD_PORT", statsd.port().to_string()),
        ("LOG_LEVEL", "debug".into()),
        ("REDIS_SOCKET_TYPE", "tcp".into()),
        // redis:6379
        ("REDIS_URL", format!("127.0.0.1:{}", redis.port())),
        // /data, where the rule files are mounted as /data/ratelimit/config
        ("RUNTIME_ROOT", runtime_root.display().to_string()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit".into()),
        ("RUNTIME_WATCH_ROOT", "false".into()),
        ("RESPONSE_DYNAMIC_METADATA", "true".into()),
    ]
}

/// How the proxy's checks ended, as Envoy counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcomes {
    pub ok: u64,
    pub over_limit: u64,
    /// Checks that got no answer (Envoy then lets the request through).
    pub error: u64,
    pub failure_mode_allowed: u64,
}

impl Outcomes {
    /// Every check answered: `ok` allowed, `over_limit` not.
    pub fn answered(ok: u64, over_limit: u64) -> Outcomes {
        Outcomes {
            ok,
            over_limit,
            ..Outcomes::default()
        }
    }
}

/// What their compose file starts, on this test's ports.
pub struct Stack {
    pub sluice: Sluice,
    proxy: Envoy,
    /// The proxy's listener (their `envoy-proxy:8888`).
    front: SocketAddr,
    statsd: StatsdExporter,
    _redis: RedisServer,
    /// `RUNTIME_ROOT`, holding the rule file, and the link the binary is run as.
    _dir: TempDir,
}

impl Stack {
    /// Start everything, then wait, if need be, until at least 15 s of the wall clock's
    /// minute are left (see the suite's module comment).
    pub async fn start() -> Stack {
        let dir = TempDir::new().expect("tempdir");
        let runtime_root = dir.path().join("data");
        let config = runtime_root.join("ratelimit/config");
        std::fs::create_dir_all(&config).expect("create the rule directory");
        std::fs::write(config.join(rules::FILE), rules::RULES).expect("write the rules");
        let redis = RedisServer::start();
        let statsd = StatsdExporter::start(STATSD_MAPPING);
        // Their `command: /bin/ratelimit`: the binary under that name, no arguments.
        let link = dir.path().join("ratelimit");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sluice"), &link).expect("link");
        // Their listeners (8080, 8081: their defaults, which the compose file publishes) on
        // free ports.
        let mut builder = sluice().run_as(link).their_listeners();
        for (k, v) in compose_environment(&redis, statsd.statsd, &runtime_root) {
            builder = builder.env(k, v);
        }
        let sluice = builder.start_healthy().await;
        let ports = Ports {
            front: free_port(),
            service_1: free_port(),
            service_2: free_port(),
        };
        let proxy = Envoy::start(proxy::bootstrap(sluice.grpc, &ports)).await;
        let stack = Stack {
            sluice,
            proxy,
            front: SocketAddr::from(([127, 0, 0, 1], ports.front)),
            statsd,
            _redis: redis,
            _dir: dir,
        };
        a_minute_ahead().await;
        stack
    }

    /// `GET path` through the proxy with these headers.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        match http1(self.front, "GET", path, headers, "").await {
            Ok(r) => r,
            Err(e) => self.fail(&format!("GET {path} {headers:?}: {e}")),
        }
    }

    /// A request that must pass (`curl -f` succeeds): the upstream's 200.
    pub async fn passes(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.answered(path, headers, 200).await
    }

    /// A request that must be rate limited: Envoy's 429.
    pub async fn limited(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.answered(path, headers, 429).await
    }

    async fn answered(&self, path: &str, headers: &[(&str, &str)], status: u16) -> Response {
        let r = self.get(path, headers).await;
        if r.status != status {
            self.fail(&format!(
                "GET {path} {headers:?}: {} where envoyproxy/ratelimit answers {status}: {r:?}",
                r.status
            ));
        }
        r
    }

    /// A request that must pass, answered by the service whose body contains `from`.
    pub async fn served_by(&self, path: &str, headers: &[(&str, &str)], from: &str) {
        let r = self.passes(path, headers).await;
        if !r.body.contains(from) {
            self.fail(&format!(
                "GET {path} {headers:?}: answered {:?}, not by {from:?}",
                r.body
            ));
        }
    }

    /// What a script waits for when it sleeps a minute: a real one, on Redis's clock.
    pub async fn wait_a_minute(&self) {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }

    /// The exporter's `/metrics` (their `statsd:9102/metrics`), once it has a line for
    /// which `wanted` holds, or as it is after [`STATS_WITHIN`].
    pub async fn exporter_metrics(&self, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + STATS_WITHIN;
        loop {
            let body = match http1(self.statsd.web, "GET", "/metrics", &[], "").await {
                Ok(r) if r.status == 200 => r.body,
                Ok(r) => self.fail(&format!("exporter /metrics: {r:?}")),
                Err(e) => self.fail(&format!("exporter /metrics: {e}")),
            };
            if body.lines().any(&wanted) || Instant::now() > deadline {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Wait until sluice has counted `n` hits in all (their reports at stream end add one
    /// each; the checks of the routes that report add none): the next check must see them.
    pub async fn wait_reports(&self, n: u64) {
        let deadline = Instant::now() + REPORT_WITHIN;
        loop {
            let (_, body) = self.sluice.http_get("/metrics").await;
            let hits: f64 = body
                .lines()
                .filter(|l| l.starts_with("ratelimit_service_rate_limit_total_hits{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            if hits >= n as f64 {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "sluice counted {hits} hits, not the {n} Envoy's reports at stream end make"
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The proxy's count of its checks' outcomes must reach `expected` (the filter counts
    /// on the route's cluster: `cluster.mock.ratelimit.ok`, …): Envoy counts a check when
    /// its answer arrives, before the response it decides, but a loaded machine may be slow
    /// to show it, so a few seconds are allowed.
    pub async fn finish(&self, expected: Outcomes) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let seen = self.outcomes().await;
            if seen == expected {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "Envoy counted {seen:?} where envoyproxy/ratelimit answers {expected:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn outcomes(&self) -> Outcomes {
        let stats = self
            .proxy
            .admin_get("/stats?filter=^cluster%5C.[^.]%2B%5C.ratelimit%5C.")
            .await;
        let mut seen = Outcomes::default();
        for (name, v) in stats.lines().filter_map(|l| l.split_once(": ")) {
            let n: u64 = v.trim().parse().unwrap_or(0);
            match name.rsplit('.').next() {
                Some("ok") => seen.ok += n,
                Some("over_limit") => seen.over_limit += n,
                Some("error") => seen.error += n,
                Some("failure_mode_allowed") => seen.failure_mode_allowed += n,
                _ => {}
            }
        }
        seen
    }

    /// Panic with `what` and what every part of the stack logged.
    pub fn fail(&self, what: &str) -> ! {
        let logs = self.sluice.logs();
        panic!(
            "{what}\n--- sluice, last log lines\n{}\n--- proxy Envoy\n{}\n\
             --- statsd exporter\n{}\n(lines that were not statsd: {:?})",
            logs[logs.len().saturating_sub(60)..].join("\n"),
            self.proxy.log(),
            self.statsd.metrics(),
            self.statsd.bad_lines(),
        );
    }
}

/// Wait, if need be, until at least 15 s of the wall clock's minute are left: longer than
/// any scenario's calls before a sleep take on a loaded machine.
async fn a_minute_ahead() {
    let into_minute = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64()
        % 60.0;
    if into_minute > 45.0 {
        tokio::time::sleep(Duration::from_secs_f64(60.2 - into_minute)).await;
    }
}
