//! Real `redis-server` processes for tests: each test owns its servers (a free loopback port,
//! no persistence, a temporary directory), killed on drop. No shared 6379, no ordering
//! between tests. Requires `redis-server` and `redis-cli` on PATH
//! (`apt-get install -y redis-server`).

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis;

/// A free loopback port, taken from below the kernel's ephemeral range. A port the kernel
/// hands out for port 0 is one it also hands out as the local end of outgoing connections:
/// with hundreds of tests connecting in parallel, one of those can take it between this
/// call and the server's bind (or while a server restarts on it), and the server fails to
/// start. Below the range only listeners take ports. A counter (started at an offset drawn
/// from the process id) keeps two calls of one run apart; callers still retry.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FIRST: u32 = 10_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let span = ephemeral_low.saturating_sub(FIRST);
    if span > 1_000 {
        let start = std::process::id().wrapping_mul(7_919);
        for _ in 0..span {
            let port = FIRST + start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % span;
            if TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
                return port as u16;
            }
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

fn spawn(port: u16, tls_port: Option<u16>, dir: &Path, extra: &[String]) -> std::io::Result<Child> {
    let mut cmd = Command::new("redis-server");
    if let Some(t) = tls_port {
        cmd.arg("--tls-port").arg(t.to_string());
    }
    cmd.arg("--bind")
        .arg("127.0.0.1")
        .arg("--port")
        .arg(port.to_string())
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// Wait until `port` accepts and answers PING, or the child exits, or 5 s pass.
fn wait_accepting(child: &mut Child, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false; // exited: port taken, most likely
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            let ping = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            // NOAUTH also proves it is serving (a server started with --requirepass).
            if ping.is_ok() || ping.is_err_and(|e| e.code() == Some("NOAUTH")) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// One redis-server.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    /// A TLS listener beside the plain one (which tests use to inspect the server).
    tls_port: Option<u16>,
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Start with extra `redis-server` arguments, on a fresh free port (retrying a few times
    /// if the port was taken meanwhile).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        RedisServer::start_inner(extra, false)
    }

    /// Start with a TLS port too (`extra` names the certificate files); the plain port
    /// stays for inspection.
    pub fn start_tls(extra: &[&str]) -> RedisServer {
        RedisServer::start_inner(extra, true)
    }

    fn start_inner(extra: &[&str], tls: bool) -> RedisServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for _ in 0..5 {
            let port = free_port();
            let tls_port = tls.then(free_port);
            let mut child =
                spawn(port, tls_port, dir.path(), &extra).expect("redis-server not installed?");
            if wait_accepting(&mut child, port) {
                return RedisServer {
                    child: Some(child),
                    port,
                    tls_port,
                    dir,
                    extra,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start redis-server");
    }

    /// Start on a given port (e.g. one a store was already pointed at).
    pub fn start_on(port: u16) -> RedisServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut server = RedisServer {
            child: None,
            port,
            tls_port: None,
            dir,
            extra: Vec::new(),
        };
        server.restart();
        server
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `rediss://127.0.0.1:<tls port>/` of a server started with [`RedisServer::start_tls`].
    pub fn tls_url(&self) -> String {
        format!(
            "rediss://127.0.0.1:{}/",
            self.tls_port.expect("started with TLS")
        )
    }

    pub fn tls_port(&self) -> u16 {
        self.tls_port.expect("started with TLS")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Freeze the process (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Undo [`RedisServer::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {pid}");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A plain synchronous connection for inspecting state.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("connect to test redis")
    }

    /// Run one command and return its reply.
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut self.conn())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// Number of calls of `command` (lower case, e.g. "evalsha") in INFO commandstats.
    pub fn command_calls(&self, command: &str) -> u64 {
        let info: String = self.query(&["INFO", "commandstats"]);
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Stop the server (SIGKILL), keeping the port for [`RedisServer::restart`].
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start again on the same port (empty: no persistence).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut child =
                spawn(self.port, self.tls_port, self.dir.path(), &self.extra).expect("spawn");
            if wait_accepting(&mut child, self.port) {
                self.child = Some(child);
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            assert!(Instant::now() < deadline, "could not restart redis-server");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A Redis Cluster of `n` primaries (no replicas), each node its own process and directory.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start(n: usize) -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..n)
            .map(|_| {
                // The bus port defaults to port + 10000, which may be taken or above 65535.
                let bus = free_port().to_string();
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-port",
                    &bus,
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect();
        cluster_create(&addrs, 0);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let all_ok = nodes.iter().all(|s| {
                let info: String = s.query(&["CLUSTER", "INFO"]);
                info.contains("cluster_state:ok")
            });
            if all_ok {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "cluster never reached cluster_state:ok"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        RedisCluster { nodes }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|s| s.url()).collect()
    }

    /// How many nodes hold any key (whether keys spread over the cluster).
    pub fn nodes_holding_keys(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.query::<i64>(&["DBSIZE"]) > 0)
            .count()
    }

    /// The node serving `key`'s slot.
    pub fn node_for(&self, key: &str) -> &RedisServer {
        let slot: i64 = self.nodes[0].query(&["CLUSTER", "KEYSLOT", key]);
        let slots: redis::Value = self.nodes[0].query(&["CLUSTER", "SLOTS"]);
        let port = owner_port(&slots, slot).expect("slot owner");
        self.nodes
            .iter()
            .find(|s| i64::from(s.port()) == port)
            .expect("node of slot")
    }
}

/// Port of the primary owning `slot` in a `CLUSTER SLOTS` reply.
fn owner_port(slots: &redis::Value, slot: i64) -> Option<i64> {
    let redis::Value::Array(ranges) = slots else {
        return None;
    };
    ranges.iter().find_map(|r| {
        let redis::Value::Array(r) = r else {
            return None;
        };
        match (r.first()?, r.get(1)?, r.get(2)?) {
            (redis::Value::Int(lo), redis::Value::Int(hi), redis::Value::Array(node))
                if (*lo..=*hi).contains(&slot) =>
            {
                match node.get(1)? {
                    redis::Value::Int(p) => Some(*p),
                    _ => None,
                }
            }
            _ => None,
        }
    })
}

/// `redis-cli --cluster create` over `addrs` with `replicas` replicas per primary (the first
/// addresses become the primaries).
pub fn cluster_create(addrs: &[String], replicas: u32) {
    let status = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(addrs)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("redis-cli not installed?");
    assert!(status.success(), "redis-cli --cluster create failed");
}
