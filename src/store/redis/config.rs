//! Settings of the Redis store and the errors of building one.

use std::time::Duration;

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

/// Settings of [`RedisStore`](super::RedisStore).
#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// `redis://[user:pass@]host:port/db`, `rediss://…` (TLS) or `unix:///path`. Used when
    /// `cluster_nodes` is empty.
    pub url: String,
    /// Seed nodes of a Redis Cluster (same URL forms). Non-empty = cluster mode.
    pub cluster_nodes: Vec<String>,
    /// Connections kept open and used round-robin (cluster mode: cluster connections, each
    /// multiplexing over every node).
    pub pool_size: usize,
    /// Bound of one connection attempt (including the script preload).
    pub connect_timeout: Duration,
    /// Bound of one `run()`; keep it well under Envoy's 20 ms filter timeout.
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
    /// Consecutive request timeouts after which a connection is considered dead, provided
    /// nothing was answered on it for `breaker_timeouts × request_timeout` either.
    pub breaker_timeouts: u32,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            url: "redis://127.0.0.1:6379".to_owned(),
            cluster_nodes: Vec::new(),
            pool_size: 4,
            connect_timeout: Duration::from_millis(500),
            request_timeout: Duration::from_millis(10),
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            time_source: TimeSource::Redis,
            ttl_slack_ms: None,
            reconnect_backoff_min: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(2),
            breaker_timeouts: 3,
        }
    }
}

/// A key prefix must not move the hash slot: no `{` or `}`.
pub fn check_prefix(prefix: &str) -> Result<(), RedisConfigError> {
    if prefix.contains(['{', '}']) {
        return Err(RedisConfigError::PrefixBraces(prefix.to_owned()));
    }
    Ok(())
}

impl RedisConfig {
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
    #[error("invalid redis url: {0}")]
    Url(String),
    #[error("redis pool: {0}")]
    Pool(String),
    #[error("the redis store must be created inside a tokio runtime")]
    NoRuntime,
}
