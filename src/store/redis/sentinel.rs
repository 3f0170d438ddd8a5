//! Redis Sentinel: which master to connect to, and when to stop using it.
//!
//! - **Resolving**: the sentinels are asked in turn, starting with the last one that
//!   answered, `SENTINEL get-master-addr-by-name`; the master is then connected to with the
//!   store's TLS settings and the master's auth, and checked with `ROLE` (`connect.rs`).
//!   TLS (`rediss://` sentinel URLs) applies to the sentinels and to the master alike.
//! - **Failover**: one watcher per sentinel subscribes to its events. On `+try-failover`
//!   for our master every connection is dropped and none is made (requests fail fast with
//!   `UNAVAILABLE`) until `+switch-master` names the new master, an abort event arrives, or
//!   [`PAUSE_MAX`] passes. Why pause instead of writing on: the old master keeps accepting
//!   writes until the sentinels reconfigure it (seconds after the switch), and every write it
//!   takes after the replica's promotion is lost with it. Stopping at the start of the
//!   failover leaves only the requests already in flight exposed. Without events (pub/sub
//!   unreachable) the store still moves over: the sentinels kill the old master's clients
//!   when they demote it, and `READONLY` drops a connection at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::{self, Client, ConnectionInfo};
use tokio_util::sync::CancellationToken;

use super::config::{
    ConnectError, RedisConfig, RedisConfigError, RedisTls, SentinelConfig, SentinelMiss,
    async_config, connection_info,
};
use super::conn::Ring;

/// Longest pause after `+try-failover` without an end event (a lost event must not stop the
/// store for good); after it the sentinels' answer is trusted again.
pub const PAUSE_MAX: Duration = Duration::from_secs(10);

/// Sentinel events the watchers act on.
const EVENTS: [&str; 6] = [
    "+try-failover",
    "+switch-master",
    "-failover-abort-not-elected",
    "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout",
    "+failover-end-for-timeout",
];

pub(crate) struct Resolver {
    master: String,
    sentinels: Vec<(String, ConnectionInfo)>,
    /// TLS to the master (the sentinels' URLs are `rediss://`).
    tls: bool,
    tls_settings: RedisTls,
    master_auth: Option<String>,
    db: i64,
    connect_timeout: Duration,
    /// The sentinel asked first: the last one that answered.
    first: AtomicUsize,
    /// Set on `+try-failover`: connect to nothing before this instant.
    paused_until: Mutex<Option<Instant>>,
}

impl Resolver {
    pub fn new(s: &SentinelConfig, cfg: &RedisConfig) -> Result<Resolver, RedisConfigError> {
        if s.master.trim().is_empty() {
            return Err(RedisConfigError::Sentinel("no master name"));
        }
        if s.sentinels.is_empty() {
            return Err(RedisConfigError::Sentinel("no sentinel address"));
        }
        let sentinels = s
            .sentinels
            .iter()
            .map(|u| Ok((redact(u), connection_info(u, &cfg.tls)?)))
            .collect::<Result<Vec<_>, RedisConfigError>>()?;
        let tls = s.sentinels.iter().any(|u| u.starts_with("rediss:"));
        if tls && !s.sentinels.iter().all(|u| u.starts_with("rediss:")) {
            return Err(RedisConfigError::Sentinel(
                "mixed redis:// and rediss:// sentinel addresses",
            ));
        }
        Ok(Resolver {
            master: s.master.clone(),
            sentinels,
            tls,
            tls_settings: cfg.tls.clone(),
            master_auth: s.master_auth.clone(),
            db: s.db,
            connect_timeout: cfg.connect_timeout,
            first: AtomicUsize::new(0),
            paused_until: Mutex::new(None),
        })
    }

    pub fn paused(&self) -> bool {
        let mut guard = self.paused_until.lock();
        match *guard {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                *guard = None;
                tracing::warn!(master = %self.master, "no end of the sentinel failover seen; resolving again");
                false
            }
            None => false,
        }
    }

    /// Ask the sentinels for the master and connect to it.
    pub async fn connect_master(&self) -> Result<MultiplexedConnection, ConnectError> {
        if self.paused() {
            return Err(ConnectError::FailoverPaused(self.master.clone()));
        }
        let (host, port) = self.master_addr().await?;
        let client = Client::open(self.master_info(&host, port)?)?;
        client
            .get_multiplexed_async_connection_with_config(&async_config(self.connect_timeout))
            .await
            .map_err(|source| ConnectError::Master {
                master: self.master.clone(),
                host,
                port,
                source,
            })
    }

    async fn master_addr(&self) -> Result<(String, u16), ConnectError> {
        let n = self.sentinels.len();
        let first = self.first.load(Ordering::Relaxed);
        let mut misses = Vec::new();
        for i in 0..n {
            let idx = (first + i) % n;
            let (name, info) = &self.sentinels[idx];
            let miss = match tokio::time::timeout(self.connect_timeout, self.ask(info)).await {
                Ok(Ok(Some(addr))) => {
                    self.first.store(idx, Ordering::Relaxed);
                    return Ok(addr);
                }
                Ok(Ok(None)) => SentinelMiss::Unknown,
                Ok(Err(e)) => SentinelMiss::Failed(e),
                Err(_) => SentinelMiss::TimedOut,
            };
            misses.push((name.clone(), miss));
        }
        Err(ConnectError::NoMaster {
            master: self.master.clone(),
            misses,
        })
    }

    async fn ask(&self, sentinel: &ConnectionInfo) -> redis::RedisResult<Option<(String, u16)>> {
        let client = Client::open(sentinel.clone())?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&async_config(self.connect_timeout))
            .await?;
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.master)
            .query_async(&mut conn)
            .await
    }

    fn master_info(&self, host: &str, port: u16) -> Result<ConnectionInfo, RedisConfigError> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        let url = format!("{scheme}://{host}:{port}/{}", self.db);
        let info = connection_info(&url, &self.tls_settings)?;
        let Some(auth) = &self.master_auth else {
            return Ok(info);
        };
        let mut settings = info.redis_settings().clone();
        settings = match auth.split_once(':') {
            Some((user, pass)) if !user.is_empty() => {
                settings.set_username(user).set_password(pass)
            }
            Some((_, pass)) => settings.set_password(pass),
            None => settings.set_password(auth),
        };
        Ok(info.set_redis_settings(settings))
    }

    /// One watcher per sentinel; they end when `stop` fires.
    pub fn spawn_watchers(self: &Arc<Self>, ring: &Arc<Ring>, stop: &CancellationToken) {
        for idx in 0..self.sentinels.len() {
            tokio::spawn(self.clone().watch(idx, ring.clone(), stop.clone()));
        }
    }

    async fn watch(self: Arc<Self>, idx: usize, ring: Arc<Ring>, stop: CancellationToken) {
        let mut delay = Duration::from_millis(100);
        loop {
            let session = self.subscribe(idx, &ring);
            let result = tokio::select! {
                () = stop.cancelled() => return,
                r = session => r,
            };
            if let Err(e) = result {
                tracing::debug!(sentinel = %self.sentinels[idx].0, error = %e, "sentinel events unavailable");
            } else {
                delay = Duration::from_millis(100);
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }

    /// Follow one sentinel's events until its connection ends.
    async fn subscribe(&self, idx: usize, ring: &Ring) -> redis::RedisResult<()> {
        let client = Client::open(self.sentinels[idx].1.clone())?;
        let mut pubsub = tokio::time::timeout(self.connect_timeout, client.get_async_pubsub())
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        pubsub.subscribe(&EVENTS[..]).await?;
        tracing::info!(sentinel = %self.sentinels[idx].0, master = %self.master, "sentinel events followed");
        let mut messages = pubsub.on_message();
        while let Some(msg) = messages.next().await {
            let payload: String = msg.get_payload().unwrap_or_default();
            self.event(msg.get_channel_name(), &payload, ring);
        }
        Ok(())
    }

    fn event(&self, channel: &str, payload: &str, ring: &Ring) {
        let mut words = payload.split_whitespace();
        // `+switch-master <name> <old ip> <old port> <new ip> <new port>`; the others are
        // `master <name> <ip> <port>`.
        let name = if channel == "+switch-master" {
            words.next()
        } else {
            words.nth(1)
        };
        if name != Some(self.master.as_str()) {
            return;
        }
        match channel {
            "+try-failover" => {
                *self.paused_until.lock() = Some(Instant::now() + PAUSE_MAX);
                tracing::warn!(master = %self.master, "sentinel failover started; redis unavailable until it ends");
                ring.drop_all();
            }
            "+switch-master" => {
                *self.paused_until.lock() = None;
                tracing::warn!(master = %self.master, to = %payload, "sentinel switched the master; reconnecting");
                ring.drop_all();
            }
            _ => {
                *self.paused_until.lock() = None;
                tracing::warn!(master = %self.master, event = %channel, "sentinel failover ended without a switch");
                ring.wake();
            }
        }
    }
}

/// A sentinel URL for logs, without its password.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}{}", &url[..s + 3], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("redis://:pw@h:1"), "redis://h:1");
        assert_eq!(redact("rediss://u:pw@h:1"), "rediss://h:1");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }
}
