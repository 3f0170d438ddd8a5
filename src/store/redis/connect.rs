//! How connections are made: a URL plus the TLS settings become redis-rs connection info
//! (private CA, client certificate, hostname check), and the three connectors (single node
//! through the deadpool pool, cluster, sentinel) make the connections the ring uses.
//!
//! Every single-node or sentinel connection is checked with `ROLE` before use: a replica
//! (a demoted primary, a stale sentinel answer, a node turned `REPLICAOF`) would answer
//! every write with `READONLY`, so it is refused like an unreachable node and the reconnect
//! task keeps trying. Health then says NOT_SERVING instead of serving errors.

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{Script, Value};

use super::batch::Batcher;
use super::config::{
    ConnectError, RedisConfig, RedisConfigError, async_config, certificates, connection_info,
};
use super::conn::{Conn, Dial, Dialed, Ring};
use super::sentinel::Resolver;

/// How new connections are made, and how long a single-node connection may answer nothing
/// before its batcher gives it up.
pub(crate) struct Connector {
    how: How,
    dead_after: std::time::Duration,
}

enum How {
    /// Single node: deadpool dials it (address, TLS, auth, connect timeout) and bounds the
    /// connections to `pool_size` (`REDIS_POOL_SIZE`); each is one object checked out for its
    /// whole life, held by its ring slot (`conn.rs`).
    Single(deadpool_redis::Pool),
    /// Not through deadpool: one `ClusterConnection` already multiplexes every node, follows
    /// the cluster's map and reconnects per node itself, where deadpool-redis's cluster
    /// pool would lend a connection per call.
    Cluster(Box<ClusterClient>),
    /// Ask the sentinels for the master, then connect to it. Not through deadpool: a
    /// deadpool manager dials one fixed address, and the master's changes with each
    /// failover (deadpool-redis's sentinel pool resolves it its own way, without the
    /// failover pause of `sentinel.rs`).
    Sentinel(Arc<Resolver>),
}

impl Connector {
    pub fn new(cfg: &RedisConfig, pool_size: usize) -> Result<Connector, RedisConfigError> {
        Ok(Connector {
            how: How::new(cfg, pool_size)?,
            dead_after: cfg.dead_after,
        })
    }

    /// The single-node pool (its status counts the connections).
    pub fn pool(&self) -> Option<deadpool_redis::Pool> {
        match &self.how {
            How::Single(pool) => Some(pool.clone()),
            How::Cluster(_) | How::Sentinel(_) => None,
        }
    }
}

impl How {
    fn new(cfg: &RedisConfig, pool_size: usize) -> Result<How, RedisConfigError> {
        if let Some(s) = &cfg.sentinel {
            return Ok(How::Sentinel(Arc::new(Resolver::new(s, cfg)?)));
        }
        if !cfg.cluster_nodes.is_empty() {
            for url in &cfg.cluster_nodes {
                connection_info(url, &cfg.tls)?;
            }
            let mut builder = ClusterClientBuilder::new(cfg.cluster_nodes.clone())
                .connection_timeout(cfg.connect_timeout)
                .retries(3);
            if cfg.cluster_nodes.iter().any(|u| u.starts_with("rediss:")) {
                // The nodes the cluster map names are reached with the same TLS settings.
                builder = builder
                    .certs(certificates(&cfg.tls))
                    .danger_accept_invalid_hostnames(cfg.tls.skip_hostname_verification);
            }
            let client = builder.build().map_err(|source| RedisConfigError::Url {
                url: cfg.shown_address(),
                source,
            })?;
            return Ok(How::Cluster(Box::new(client)));
        }
        let info = connection_info(&cfg.url, &cfg.tls)?;
        let manager =
            deadpool_redis::Manager::new_with_config(info, async_config(cfg.connect_timeout))
                .map_err(|source| RedisConfigError::Url {
                    url: super::config::shown_url(&cfg.url),
                    source,
                })?;
        let pool = deadpool_redis::Pool::builder(manager)
            .max_size(pool_size)
            .runtime(deadpool_redis::Runtime::Tokio1)
            .create_timeout(Some(cfg.connect_timeout))
            .wait_timeout(Some(cfg.connect_timeout))
            .build()
            .map_err(RedisConfigError::Pool)?;
        Ok(How::Single(pool))
    }
}

impl Connector {
    /// Background duties of the connector: the sentinel watcher, which drops connections
    /// when a failover starts.
    pub fn spawn_watchers(&self, ring: &Arc<Ring>, stop: &tokio_util::sync::CancellationToken) {
        if let How::Sentinel(resolver) = &self.how {
            resolver.spawn_watchers(ring, stop);
        }
    }

    /// Whether the ring should wait rather than connect (a failover is under way).
    pub fn paused(&self) -> bool {
        match &self.how {
            How::Sentinel(r) => r.paused(),
            _ => false,
        }
    }

    /// Connect and preload the script, so the first requests do not pay for `NOSCRIPT` (on
    /// a cluster connection `SCRIPT LOAD` is sent to every primary). `source` is `script`'s
    /// text, which a single connection reloads after `NOSCRIPT` (`Script` does not expose it).
    pub async fn connect(
        &self,
        script: &Script,
        source: &'static str,
    ) -> Result<Dialed, ConnectError> {
        let (mut conn, object) = match &self.how {
            How::Single(pool) => {
                let object = pool.get().await.map_err(ConnectError::from_pool)?;
                (MultiplexedConnection::clone(&object), Some(object))
            }
            How::Cluster(client) => {
                let mut conn = client.get_async_connection().await?;
                script
                    .load_async(&mut conn)
                    .await
                    .map_err(ConnectError::ScriptLoad)?;
                return Ok(Dialed {
                    conn: Conn::Cluster(conn),
                    object: None,
                });
            }
            How::Sentinel(resolver) => (resolver.connect_master().await?, None),
        };
        let ready = async {
            ensure_primary(&mut conn).await?;
            script
                .load_async(&mut conn)
                .await
                .map_err(ConnectError::ScriptLoad)
        };
        if let Err(e) = ready.await {
            // Not returned to the pool, which would hand it out again.
            if let Some(object) = object {
                drop(deadpool_redis::Connection::take(object));
            }
            return Err(e);
        }
        let batcher = Batcher::spawn(conn, script.get_hash().to_owned(), source, self.dead_after);
        Ok(Dialed {
            conn: Conn::Single(batcher),
            object,
        })
    }
}

impl Dial for Connector {
    fn paused(&self) -> bool {
        Connector::paused(self)
    }

    fn connect(
        &self,
        script: &Script,
        source: &'static str,
    ) -> impl Future<Output = Result<Dialed, ConnectError>> + Send {
        Connector::connect(self, script, source)
    }
}

/// Refuse a replica: the first element of `ROLE` is `master` on a primary. A server that
/// does not allow `ROLE` (ACLs) is taken as it is.
async fn ensure_primary(conn: &mut MultiplexedConnection) -> Result<(), ConnectError> {
    match redis::cmd("ROLE").query_async::<Value>(conn).await {
        Ok(Value::Array(items)) => match items.first() {
            Some(Value::BulkString(role)) if role.as_slice() != b"master" => Err(
                ConnectError::NotPrimary(String::from_utf8_lossy(role).into_owned()),
            ),
            _ => Ok(()),
        },
        Ok(_) => Ok(()),
        Err(e) if e.is_io_error() || e.is_connection_dropped() => Err(e.into()),
        Err(_) => Ok(()),
    }
}
