//! How connections are made: a URL plus the TLS settings become redis-rs connection info
//! (private CA, client certificate, hostname check), and the three connectors (single node,
//! cluster, sentinel) make the connections the ring uses.
//!
//! Every single-node or sentinel connection is checked with `ROLE` before use: a replica
//! (a demoted primary, a stale sentinel answer, a node turned `REPLICAOF`) would answer
//! every write with `READONLY`, so it is refused like an unreachable node and the reconnect
//! task keeps trying. Health then says NOT_SERVING instead of serving errors.

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{Client, Script, Value};

use super::batch::Batcher;
use super::config::{
    ConnectError, RedisConfig, RedisConfigError, async_config, certificates, connection_info,
};
use super::conn::{Conn, Dial, Ring};
use super::sentinel::Resolver;

/// How new connections are made, and how long a single-node connection may answer nothing
/// before its batcher gives it up.
pub(crate) struct Connector {
    how: How,
    connect_timeout: std::time::Duration,
    dead_after: std::time::Duration,
}

enum How {
    /// Single node: its address, TLS and auth.
    Single(Box<Client>),
    Cluster(Box<ClusterClient>),
    /// Ask the sentinels for the master, then connect to it.
    Sentinel(Arc<Resolver>),
}

impl Connector {
    pub fn new(cfg: &RedisConfig) -> Result<Connector, RedisConfigError> {
        Ok(Connector {
            how: How::new(cfg)?,
            connect_timeout: cfg.connect_timeout,
            dead_after: cfg.dead_after,
        })
    }
}

impl How {
    fn new(cfg: &RedisConfig) -> Result<How, RedisConfigError> {
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
        let client = Client::open(info).map_err(|source| RedisConfigError::Url {
            url: super::config::shown_url(&cfg.url),
            source,
        })?;
        Ok(How::Single(Box::new(client)))
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
    ) -> Result<Conn, ConnectError> {
        let dead_after = self.dead_after;
        let mut conn = match &self.how {
            How::Single(client) => {
                let config = async_config(self.connect_timeout);
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?
            }
            How::Cluster(client) => {
                let mut conn = client.get_async_connection().await?;
                script
                    .load_async(&mut conn)
                    .await
                    .map_err(ConnectError::ScriptLoad)?;
                return Ok(Conn::Cluster(conn));
            }
            How::Sentinel(resolver) => resolver.connect_master().await?,
        };
        ensure_primary(&mut conn).await?;
        script
            .load_async(&mut conn)
            .await
            .map_err(ConnectError::ScriptLoad)?;
        Ok(single(conn, script, source, dead_after))
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
    ) -> impl Future<Output = Result<Conn, ConnectError>> + Send {
        Connector::connect(self, script, source)
    }
}

fn single(
    conn: MultiplexedConnection,
    script: &Script,
    source: &'static str,
    dead_after: std::time::Duration,
) -> Conn {
    Conn::Single(Batcher::spawn(
        conn,
        script.get_hash().to_owned(),
        source,
        dead_after,
    ))
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
