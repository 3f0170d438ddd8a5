//! The Redis settings: `--redis-url` and `SLUICE_REDIS_*`, or envoyproxy/ratelimit's
//! `REDIS_*` variables (their URL format, socket type, auth and TLS flags) turned into URLs.

use super::compat::{Env, bool_var, num_var, var};
use super::*;

pub(super) fn resolve_redis(
    args: &ServeArgs,
    env: Env<'_>,
    notes: &mut Vec<String>,
) -> Result<Option<RedisSettings>, SettingsError> {
    match var(env, "BACKEND_TYPE").map(|b| b.trim().to_ascii_lowercase()) {
        None => {}
        Some(b) if b == "redis" || b == "memory" => {}
        Some(b) if b == "memcache" => {
            return Err(err(
                "BACKEND_TYPE",
                "memcache is not supported by sluice; use redis (REDIS_URL) or the in-memory store",
            ));
        }
        Some(b) => {
            return Err(err(
                "BACKEND_TYPE",
                format!("unknown backend '{b}' (redis or memory)"),
            ));
        }
    }
    let redis_type = match args.redis_type {
        Some(t) => t,
        None => match var(env, "REDIS_TYPE").map(|t| t.trim().to_ascii_lowercase()) {
            None => RedisType::Single,
            Some(t) if t == "single" => RedisType::Single,
            Some(t) if t == "cluster" => RedisType::Cluster,
            Some(t) if t == "sentinel" => {
                return Err(err(
                    "REDIS_TYPE",
                    "sentinel is not supported yet; use single or cluster",
                ));
            }
            Some(t) => return Err(err("REDIS_TYPE", format!("Unrecognized redis type {t}"))),
        },
    };

    let urls: Vec<String> = if let Some(url) = &args.redis_url {
        split_urls(url)
    } else if let Some(url) = var(env, "REDIS_URL") {
        let socket = var(env, "REDIS_SOCKET_TYPE").map(|t| t.trim().to_ascii_lowercase());
        let tls = bool_var(env, "REDIS_TLS")?.unwrap_or(false);
        let auth = var(env, "REDIS_AUTH");
        split_urls(&url)
            .into_iter()
            .map(|u| compat_url(&u, socket.as_deref(), tls, auth.as_deref()))
            .collect::<Result<_, _>>()?
    } else if var(env, "BACKEND_TYPE").is_some_and(|b| b.trim().eq_ignore_ascii_case("redis")) {
        // Their default: a twemproxy socket.
        vec!["unix:///var/run/nutcracker/ratelimit.sock".into()]
    } else {
        return Ok(None);
    };
    if urls.is_empty() {
        return Err(err("--redis-url", "no Redis URL given"));
    }
    for u in &urls {
        if !(u.starts_with("redis://") || u.starts_with("rediss://") || u.starts_with("unix://")) {
            return Err(err(
                "--redis-url",
                format!("'{u}' must start with redis://, rediss:// or unix://"),
            ));
        }
    }
    if redis_type == RedisType::Single && urls.len() > 1 {
        return Err(err(
            "--redis-url",
            "several URLs given; set --redis-type cluster (REDIS_TYPE=cluster) for a cluster",
        ));
    }
    let pool_size = match args.redis_pool_size {
        Some(n) => n,
        None => num_var(env, "REDIS_POOL_SIZE")?.unwrap_or(4),
    };
    if pool_size == 0 {
        return Err(err("--redis-pool-size", "must be at least 1"));
    }
    let request_timeout = match &args.redis_timeout {
        Some(t) => parse_duration("--redis-timeout", t)?,
        None => Duration::from_millis(10),
    };
    if request_timeout.is_zero() {
        return Err(err("--redis-timeout", "must be greater than 0"));
    }
    let connect_timeout = match &args.redis_connect_timeout {
        Some(t) => parse_duration("--redis-connect-timeout", t)?,
        // Their REDIS_TIMEOUT is a dial timeout, so it maps here, not to the request deadline.
        None => match var(env, "REDIS_TIMEOUT") {
            Some(t) => parse_duration("REDIS_TIMEOUT", &t)?,
            None => Duration::from_secs(1),
        },
    };
    let key_prefix = args
        .cache_key_prefix
        .clone()
        .or_else(|| var(env, "CACHE_KEY_PREFIX"));
    if key_prefix
        .as_deref()
        .is_some_and(|p| p.contains(['{', '}']))
    {
        return Err(err(
            "--cache-key-prefix",
            "must not contain '{' or '}' (it would change the Redis Cluster hash slot)",
        ));
    }
    if var(env, "REDIS_PERSECOND")
        .is_some_and(|v| parse_bool("REDIS_PERSECOND", &v).unwrap_or(false))
    {
        notes.push(
            "REDIS_PERSECOND is ignored: all limits use the one Redis given by REDIS_URL".into(),
        );
    }
    Ok(Some(RedisSettings {
        urls,
        redis_type,
        pool_size,
        request_timeout,
        connect_timeout,
        time_source: args.redis_time_source.unwrap_or(TimeSource::Redis),
        key_prefix,
    }))
}

fn split_urls(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(String::from)
        .collect()
}

/// Their `REDIS_URL` is `host:port` (tcp) or a socket path (unix), with auth and TLS in
/// separate variables. Build the equivalent URL.
fn compat_url(
    raw: &str,
    socket: Option<&str>,
    tls: bool,
    auth: Option<&str>,
) -> Result<String, SettingsError> {
    if raw.contains("://") {
        return Ok(raw.to_string());
    }
    let userinfo = auth.map(|a| match a.split_once(':') {
        Some((user, pass)) => format!("{}:{}@", pct(user), pct(pass)),
        None => format!(":{}@", pct(a)),
    });
    let unix = match socket {
        Some("tcp") => false,
        Some("unix") => true,
        // Their default is unix; a value that looks like host:port is tcp either way.
        None => raw.starts_with('/'),
        Some(other) => {
            return Err(err(
                "REDIS_SOCKET_TYPE",
                format!("'{other}' is not tcp or unix"),
            ));
        }
    };
    if unix {
        let mut url = format!("unix://{raw}");
        if let Some(a) = auth {
            let (user, pass) = a.split_once(':').unwrap_or(("", a));
            if !user.is_empty() {
                url.push_str(&format!("?user={}&pass={}", pct(user), pct(pass)));
            } else {
                url.push_str(&format!("?pass={}", pct(pass)));
            }
        }
        return Ok(url);
    }
    let scheme = if tls { "rediss" } else { "redis" };
    Ok(format!("{scheme}://{}{raw}", userinfo.unwrap_or_default()))
}

/// Percent-encode a URL userinfo component.
fn pct(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
