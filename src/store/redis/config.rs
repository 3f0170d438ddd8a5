//! Settings of the Redis store, the errors of building one and of connecting it, and what
//! they become for redis-rs (connection info with TLS applied, connection timeouts), which
//! the connector and the sentinel resolver both use.

use std::time::Duration;

use redis::{
    AsyncConnectionConfig, Client, ClientTlsConfig, ConnectionAddr, ConnectionInfo,
    IntoConnectionInfo, RedisError, TlsCertificates,
};

/// Where the script's `now` comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeSource {
    /// `TIME` inside the script: one clock for every sluice instance.
    #[default]
    Redis,
    /// The injected [`Clock`](crate::limit::Clock), passed as an argument: for Redis deployments that forbid
    /// `TIME` in scripts, and for exact tests. Instances' clocks need NTP.
    Local,
}

/// The key prefix when none is configured (`--cache-key-prefix`).
pub const DEFAULT_KEY_PREFIX: &str = "sluice:";

/// Default silence after which a connection is dead: longer than the stalls of a Redis that is
/// alive (a fork for a snapshot, a slow fsync, a long command of another client: well under a
/// second on a healthy server), short enough that a connection black-holed by a partition or a
/// failover behind a proxy is replaced within seconds.
pub const DEFAULT_DEAD_AFTER: Duration = Duration::from_secs(2);

/// How TLS connections (`rediss://`) are verified and which identity they present. Applies
/// to every TLS connection of the store: the node, every cluster node, the sentinels and the
/// master they name.
#[derive(Clone, Default, PartialEq)]
pub struct RedisTls {
    /// PEM bundle of the CAs that sign the servers' certificates (a private CA). `None`: the
    /// webpki (Mozilla) roots.
    pub ca_pem: Option<Vec<u8>>,
    /// PEM certificate chain and PEM private key presented to servers that require client
    /// certificates (`tls-auth-clients yes`).
    pub client_identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Accept a certificate whose names do not match the host connected to. The chain is
    /// still verified against the roots (a certificate from another CA is refused); only the
    /// name check is skipped. For servers reached by IP (sentinel answers, cluster maps).
    pub skip_hostname_verification: bool,
}

impl std::fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTls")
            .field("ca", &self.ca_pem.is_some())
            .field("client_identity", &self.client_identity.is_some())
            .field(
                "skip_hostname_verification",
                &self.skip_hostname_verification,
            )
            .finish()
    }
}

/// A master found through Redis Sentinel.
#[derive(Clone, Debug, PartialEq)]
pub struct SentinelConfig {
    /// The name the sentinels monitor the master under.
    pub master: String,
    /// The sentinels, `redis://[user:pass@]host:port` or `rediss://…` (TLS to the sentinels
    /// and to the master), asked in turn.
    pub sentinels: Vec<String>,
    /// Password, or `user:password`, of the master (the sentinels' own go in their URLs).
    pub master_auth: Option<String>,
    /// Database of the master.
    pub db: i64,
}

/// Settings of [`RedisStore`](super::RedisStore). Its `Default` is the settings' defaults
/// (`settings/redis.rs`), so a store made without settings (tests, tools) is the one `serve`
/// makes when none is given.
#[derive(Clone, Debug, PartialEq)]
pub struct RedisConfig {
    /// Which store this is in logs (`redis`, or `redis_per_second` for the per-second one).
    pub name: &'static str,
    /// `redis://[user:pass@]host:port/db`, `rediss://…` (TLS) or `unix:///path`. Used when
    /// `cluster_nodes` is empty and `sentinel` is `None`.
    pub url: String,
    /// Seed nodes of a Redis Cluster (same URL forms). Non-empty = cluster mode.
    pub cluster_nodes: Vec<String>,
    /// Find the master through these sentinels (and again after every failover).
    pub sentinel: Option<SentinelConfig>,
    /// Verification and client identity of TLS connections.
    pub tls: RedisTls,
    /// How long Redis may refuse every write (OOM, READONLY, MISCONF…) before the store
    /// reports itself not ready; see `health.rs`.
    pub refusal_grace: Duration,
    /// Connections kept open (cluster mode: cluster connections, each multiplexing over every
    /// node, used round-robin). On a single node the size of the deadpool pool that dials
    /// them (`connect.rs`); the first carries every request until its forming batch is full,
    /// then the next (`conn.rs`, `Ring::pick`).
    pub pool_size: usize,
    /// Bound of one connection attempt (including the script preload).
    pub connect_timeout: Duration,
    /// Bound of one `run()` made without a caller's deadline (`Call::deadline`); with one,
    /// the deadline bounds it instead.
    pub request_timeout: Duration,
    /// Prepended to every key. Must not contain `{` or `}` (it would change the hash slot).
    pub key_prefix: String,
    pub time_source: TimeSource,
    /// Extra TTL on every key. `None`: 0 with Redis `TIME`, 2000 ms in local mode (absorbs
    /// clock skew between instances).
    pub ttl_slack_ms: Option<u64>,
    /// First and longest pause between reconnect attempts (doubling in between).
    pub reconnect_backoff_min: Duration,
    pub reconnect_backoff_max: Duration,
    /// A connection that has answered nothing at all, to a call sent on it, for this long is
    /// dead and is replaced (`conn.rs`); replies that arrive late still count as answers.
    pub dead_after: Duration,
    /// `--redis-reference-keys`, with envoyproxy/ratelimit's `CACHE_KEY_PREFIX`: checks that
    /// qualify are counted as theirs are, under their keys (see `reference.rs`). Local time
    /// source only: with `TimeSource::Redis` it is ignored.
    pub reference_prefix: Option<String>,
}

/// A key prefix must not move the hash slot: no `{` or `}`.
pub fn check_prefix(prefix: &str) -> Result<(), RedisConfigError> {
    if prefix.contains(['{', '}']) {
        return Err(RedisConfigError::PrefixBraces(prefix.to_owned()));
    }
    Ok(())
}

impl RedisConfig {
    /// The URLs the store dials first: the node, the cluster's seed nodes, or the sentinels.
    pub fn urls(&self) -> Vec<&String> {
        match &self.sentinel {
            Some(s) => s.sentinels.iter().collect(),
            None if !self.cluster_nodes.is_empty() => self.cluster_nodes.iter().collect(),
            None => vec![&self.url],
        }
    }

    /// The slack actually applied: the explicit value, else the time source's default.
    pub fn effective_slack_ms(&self) -> u64 {
        self.ttl_slack_ms.unwrap_or(match self.time_source {
            TimeSource::Redis => 0,
            TimeSource::Local => 2000,
        })
    }
}

/// Why a [`RedisStore`](super::RedisStore) could not be built. Connection problems are not errors here: the
/// store starts disconnected and connects in the background.
#[derive(Debug, thiserror::Error)]
pub enum RedisConfigError {
    #[error("redis key prefix {0:?} must not contain '{{' or '}}' (it would change the hash slot)")]
    PrefixBraces(String),
    #[error("invalid redis url {url:?}: {source}")]
    Url {
        url: String,
        #[source]
        source: RedisError,
    },
    #[error(
        "redis url {0:?}: '#insecure' turns off all certificate verification and is refused; \
         use skip_hostname_verification (REDIS_TLS_SKIP_HOSTNAME_VERIFICATION) to accept a \
         certificate for another name"
    )]
    Insecure(String),
    #[error("redis tls: {0}")]
    Tls(#[source] RedisError),
    #[error("redis sentinel: {0}")]
    Sentinel(&'static str),
    #[error("redis connection pool: {0}")]
    Pool(#[source] deadpool_redis::BuildError),
    #[error("the redis store must be created inside a tokio runtime")]
    NoRuntime,
}

/// `url` without its credentials or query (`redis://user:secret@host:6379/0` →
/// `redis://host:6379/0`): how logs, health and errors name a Redis, so none shows a
/// password.
pub fn shown_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else {
        return url
            .rsplit_once('@')
            .map_or(url, |(_, host)| host)
            .to_owned();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}{path}")
}

impl RedisConfig {
    /// Where this store connects, credentials left out: the URL, the cluster's seed nodes,
    /// or the sentinels and the master's name.
    pub fn shown_address(&self) -> String {
        if let Some(s) = &self.sentinel {
            let sentinels: Vec<String> = s.sentinels.iter().map(|u| shown_url(u)).collect();
            return format!(
                "master '{}' via sentinels {}",
                s.master,
                sentinels.join(",")
            );
        }
        if !self.cluster_nodes.is_empty() {
            let nodes: Vec<String> = self.cluster_nodes.iter().map(|u| shown_url(u)).collect();
            return format!("cluster {}", nodes.join(","));
        }
        shown_url(&self.url)
    }
}

/// Why a connection was not made; the reconnect task logs it and tries again.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Dialing, the handshake or a command of the connection's setup failed.
    #[error("{0}")]
    Redis(#[from] RedisError),
    /// The single-node pool gave no connection (all checked out, or it timed out dialing;
    /// Redis's own errors are [`ConnectError::Redis`]).
    #[error("redis connection pool: {0}")]
    Pool(#[source] deadpool_redis::PoolError),
    #[error("SCRIPT LOAD failed: {0}")]
    ScriptLoad(#[source] RedisError),
    /// `ROLE` names another role than `master`.
    #[error("the server is a {0} (read-only); waiting for a primary")]
    NotPrimary(String),
    #[error("failover of {0:?} in progress")]
    FailoverPaused(String),
    #[error("{0}")]
    Config(#[from] RedisConfigError),
    #[error("master {master:?} at {host}:{port}: {source}")]
    Master {
        master: String,
        host: String,
        port: u16,
        #[source]
        source: RedisError,
    },
    /// Every sentinel was asked; what each said.
    #[error("no sentinel named the master {master:?}: {}", list(.misses))]
    NoMaster {
        master: String,
        misses: Vec<(String, SentinelMiss)>,
    },
}

impl ConnectError {
    /// A pool's error, Redis's own kept as it is.
    pub(crate) fn from_pool(e: deadpool_redis::PoolError) -> ConnectError {
        match e {
            deadpool_redis::PoolError::Backend(e) => ConnectError::Redis(e),
            e => ConnectError::Pool(e),
        }
    }
}

/// What a sentinel answered instead of the master's address.
#[derive(Debug, thiserror::Error)]
pub enum SentinelMiss {
    #[error("unknown master")]
    Unknown,
    #[error("timed out")]
    TimedOut,
    #[error("{0}")]
    Failed(#[from] RedisError),
}

fn list(misses: &[(String, SentinelMiss)]) -> String {
    let each: Vec<String> = misses.iter().map(|(s, m)| format!("{s}: {m}")).collect();
    each.join("; ")
}

/// Connection info for `url`, with the TLS settings applied when the URL is `rediss://`.
/// Refuses `#insecure` (it turns off all verification).
pub(crate) fn connection_info(
    url: &str,
    tls: &RedisTls,
) -> Result<ConnectionInfo, RedisConfigError> {
    let info = url
        .into_connection_info()
        .map_err(|source| RedisConfigError::Url {
            url: shown_url(url),
            source,
        })?;
    let ConnectionAddr::TcpTls { insecure, .. } = info.addr() else {
        return Ok(info);
    };
    if *insecure {
        return Err(RedisConfigError::Insecure(url.to_owned()));
    }
    let client = Client::build_with_tls(info, certificates(tls)).map_err(RedisConfigError::Tls)?;
    let mut info = client.get_connection_info().clone();
    if tls.skip_hostname_verification {
        // redis-rs wraps the webpki verifier and forgives only `NotValidForName`: the chain
        // is still checked against the roots.
        let mut addr = info.addr().clone();
        addr.set_danger_accept_invalid_hostnames(true);
        info = info.set_addr(addr);
    }
    Ok(info)
}

pub(crate) fn certificates(tls: &RedisTls) -> TlsCertificates {
    TlsCertificates {
        client_tls: tls
            .client_identity
            .as_ref()
            .map(|(cert, key)| ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
        root_cert: tls.ca_pem.clone(),
    }
}

/// Connection settings of every single-node connection: no response timeout on the
/// connection itself, since every request is bounded by `request_timeout` around it, and
/// the connect (with the script preload) by `connect_timeout`.
pub(crate) fn async_config(connect_timeout: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(None)
}

#[cfg(test)]
mod shown_tests {
    use super::shown_url;

    #[test]
    fn shown_urls_carry_no_credentials() {
        for (url, shown) in [
            ("redis://redis:6379", "redis://redis:6379"),
            ("redis://:s3cret@redis:6379/2", "redis://redis:6379/2"),
            (
                "rediss://user:s3cret@cache.internal:6380",
                "rediss://cache.internal:6380",
            ),
            (
                "redis://redis:6379/0?password=s3cret",
                "redis://redis:6379/0",
            ),
            ("unix:///run/redis.sock", "unix:///run/redis.sock"),
            ("user:s3cret@redis:6379", "redis:6379"),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
    }
}
