//! A Redis Cluster with replicas for the fault tests (`integration/faults/`): 3 primaries and
//! 3 replicas, each a real `redis-server` on free loopback ports, a short
//! `cluster-node-timeout` so a killed primary's replica takes over in about two seconds,
//! and the slot and replication queries those tests need (who owns a slot, node ids, a
//! slot moved by hand with `CLUSTER SETSLOT` and `MIGRATE`).

use std::time::{Duration, Instant};

use redis;

use super::redis::{RedisServer, cluster_create, free_port};

/// `cluster-node-timeout` (ms): a primary silent this long is suspected, then failed over.
/// Short for speed, long enough that a loaded test machine does not fail nodes at random.
pub const NODE_TIMEOUT_MS: u64 = 1000;

pub struct FaultCluster {
    /// Index `i` < `primaries` started as a primary; the rest as replicas.
    pub nodes: Vec<RedisServer>,
    /// Nodes killed by the test (kept so their ports stay theirs until the end).
    pub killed: Vec<usize>,
}

impl FaultCluster {
    /// `primaries` primaries with one replica each, every slot assigned, replicas synced.
    pub fn start(primaries: usize) -> FaultCluster {
        let timeout = NODE_TIMEOUT_MS.to_string();
        let nodes: Vec<RedisServer> = (0..primaries * 2)
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
                    "--cluster-node-timeout",
                    &timeout,
                    // A replica may always take over, however long it was disconnected.
                    "--cluster-replica-validity-factor",
                    "0",
                    // The other primaries keep serving their slots while one is down.
                    "--cluster-require-full-coverage",
                    "no",
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect();
        // `--cluster create` makes the first `primaries` addresses primaries.
        cluster_create(&addrs, 1);
        let cluster = FaultCluster {
            nodes,
            killed: Vec::new(),
        };
        cluster.wait_settled(Duration::from_secs(30));
        cluster
    }

    fn live(&self) -> impl Iterator<Item = (usize, &RedisServer)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.killed.contains(i))
    }

    /// Every live node says `cluster_state:ok` and knows every other live node, and every
    /// live replica's link to its primary is up.
    pub fn wait_settled(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let ok = self.live().all(|(_, s)| {
                let info: String = s.query(&["CLUSTER", "INFO"]);
                let repl: String = s.query(&["INFO", "replication"]);
                info.contains("cluster_state:ok")
                    && (repl.contains("role:master") || repl.contains("master_link_status:up"))
            });
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "cluster never settled");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Seed URLs (every node: a client must find the cluster whichever node is down).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|s| s.url()).collect()
    }

    /// Any live node, for cluster-wide queries.
    pub fn any(&self) -> &RedisServer {
        self.live().next().expect("a live node").1
    }

    /// The node whose port is `port`.
    pub fn by_port(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|s| s.port() == port)
            .expect("node of port")
    }

    pub fn id(&self, node: usize) -> String {
        self.nodes[node].query(&["CLUSTER", "MYID"])
    }

    pub fn slot_of(&self, key: &str) -> u16 {
        self.any().query::<i64>(&["CLUSTER", "KEYSLOT", key]) as u16
    }

    /// The node serving `slot` according to a live node's view (`CLUSTER SHARDS` would
    /// need 7.0.0+ fields; `CLUSTER NODES` is stable).
    pub fn owner(&self, slot: u16) -> usize {
        let nodes: String = self.any().query(&["CLUSTER", "NODES"]);
        for line in nodes.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 9 || !f[2].contains("master") || f[2].contains("fail") {
                continue;
            }
            let owns = f[8..].iter().any(|r| {
                if r.starts_with('[') {
                    return false; // a migration in progress, not ownership
                }
                let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&slot))
            });
            if owns {
                let port = f[1]
                    .split('@')
                    .next()
                    .and_then(|a| a.rsplit(':').next())
                    .and_then(|p| p.parse().ok())
                    .expect("node address");
                return self.by_port(port);
            }
        }
        panic!("no owner of slot {slot}: {nodes}");
    }

    /// The replica of primary `node` (its own `CLUSTER NODES` line names the primary).
    pub fn replica_of(&self, node: usize) -> usize {
        let id = self.id(node);
        self.live()
            .find(|(_, s)| {
                let nodes: String = s.query(&["CLUSTER", "NODES"]);
                nodes
                    .lines()
                    .any(|l| l.contains("myself") && l.contains("slave") && l.contains(&id))
            })
            .map(|(i, _)| i)
            .expect("a replica of the node")
    }

    /// Whether node `n` is a primary now.
    pub fn is_primary(&self, n: usize) -> bool {
        let info: String = self.nodes[n].query(&["INFO", "replication"]);
        info.contains("role:master")
    }

    /// SIGKILL a node.
    pub fn kill(&mut self, node: usize) {
        self.nodes[node].kill();
        self.killed.push(node);
    }

    /// Keys (of the whole cluster, primaries only) containing `needle`.
    pub fn keys_matching(&self, needle: &str) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for (i, s) in self.live() {
            let role: String = s.query(&["INFO", "replication"]);
            if !role.contains("role:master") {
                continue;
            }
            let keys: Vec<String> = s.query(&["KEYS", "*"]);
            out.extend(
                keys.into_iter()
                    .filter(|k| k.contains(needle))
                    .map(|k| (i, k)),
            );
        }
        out
    }

    /// Start moving `slot` from node `from` to node `to`: `IMPORTING` on the target, then
    /// `MIGRATING` on the source (the order redis-cli uses, so no request is ever refused
    /// by both).
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) {
        let s = slot.to_string();
        let (from_id, to_id) = (self.id(from), self.id(to));
        let _: () = self.nodes[to].query(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]);
        let _: () = self.nodes[from].query(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]);
    }

    /// `MIGRATE` every key of `slot` still on `from` to `to`; returns how many moved.
    pub fn migrate_keys(&self, slot: u16, from: usize, to: usize) -> usize {
        let s = slot.to_string();
        let port = self.nodes[to].port().to_string();
        let mut moved = 0;
        loop {
            let keys: Vec<String> =
                self.nodes[from].query(&["CLUSTER", "GETKEYSINSLOT", &s, "100"]);
            if keys.is_empty() {
                return moved;
            }
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let _: redis::Value = self.nodes[from].query(&args);
            moved += keys.len();
        }
    }

    /// End the move: `SETSLOT NODE` on the target, the source, then every other primary.
    pub fn end_migration(&self, slot: u16, from: usize, to: usize) {
        let s = slot.to_string();
        let to_id = self.id(to);
        let mut order = vec![to, from];
        order.extend(
            self.live()
                .map(|(i, _)| i)
                .filter(|i| *i != to && *i != from),
        );
        for n in order {
            // A replica refuses SETSLOT; it learns the change from its primary.
            let r: redis::RedisResult<()> = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(&s)
                .arg("NODE")
                .arg(&to_id)
                .query(&mut self.nodes[n].conn());
            if let Err(e) = r {
                assert!(n != to && n != from, "SETSLOT NODE on node {n}: {e}");
            }
        }
    }

    /// Calls of `command` (e.g. "asking") served by node `n`.
    pub fn command_calls(&self, n: usize, command: &str) -> u64 {
        self.nodes[n].command_calls(command)
    }
}
