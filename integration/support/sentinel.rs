//! Real `redis-sentinel` processes for tests (Debian package `redis-sentinel`): each
//! monitors one master named `mymaster` with a quorum of 1 and short timeouts, on free
//! loopback ports, with its own writable config file (sentinels rewrite it). Killed on drop.

#![allow(dead_code)]

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis;

use super::redis::free_port;

pub const MASTER: &str = "mymaster";

pub struct Sentinel {
    child: Child,
    port: u16,
    tls_port: Option<u16>,
    _dir: tempfile::TempDir,
}

impl Sentinel {
    /// Monitor the master at `127.0.0.1:master_port`, with `extra` config lines (auth,
    /// certificate files, `tls-replication yes`) and, when `tls`, a TLS port beside the plain
    /// one.
    pub fn start(master_port: u16, extra: &str, tls: bool) -> Sentinel {
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("tempdir");
            let port = free_port();
            let tls_port = tls.then(free_port);
            let mut conf = format!(
                "bind 127.0.0.1\nport {port}\ndir {}\n\
                 sentinel monitor {MASTER} 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 5000\n{extra}\n",
                dir.path().display()
            );
            if let Some(t) = tls_port {
                conf.push_str(&format!("tls-port {t}\n"));
            }
            let path = dir.path().join("sentinel.conf");
            std::fs::write(&path, conf).expect("write sentinel.conf");
            let mut child = Command::new("redis-sentinel")
                .arg(&path)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-sentinel not installed? (apt-get install redis-sentinel)");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok()
                    && tls_port.is_none_or(|t| TcpStream::connect(("127.0.0.1", t)).is_ok())
                {
                    return Sentinel {
                        child,
                        port,
                        tls_port,
                        _dir: dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start redis-sentinel");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn tls_port(&self) -> u16 {
        self.tls_port.expect("started with TLS")
    }

    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?
            .get_connection_with_timeout(Duration::from_secs(2))?;
        cmd.query(&mut conn)
    }

    /// The master's port as this sentinel names it.
    pub fn master_port(&self) -> Option<u16> {
        self.query::<Option<(String, u16)>>(&["SENTINEL", "get-master-addr-by-name", MASTER])
            .ok()
            .flatten()
            .map(|(_, p)| p)
    }

    /// Wait until the sentinel knows a healthy replica (a failover needs one).
    pub fn wait_replica(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let replicas: redis::RedisResult<Vec<Vec<String>>> =
                self.query(&["SENTINEL", "replicas", MASTER]);
            let healthy = replicas.unwrap_or_default().iter().any(|fields| {
                fields
                    .chunks(2)
                    .any(|kv| kv.len() == 2 && kv[0] == "flags" && kv[1] == "slave")
            });
            if healthy {
                return;
            }
            assert!(Instant::now() < deadline, "sentinel never saw the replica");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
