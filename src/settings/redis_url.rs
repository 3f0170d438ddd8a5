//! Redis address forms: sluice's URLs (`redis://`, `rediss://`, `unix://`), and
//! envoyproxy/ratelimit's `REDIS_URL` (`host:port` or a socket path, with auth, TLS and
//! socket type in separate variables; `master,host:port,...` for sentinel) turned into URLs.

use super::parse::{SettingsError, err};
use super::resolver::{Given, Value};
use super::values::one_of;

/// Which kind of Redis the URLs name (`--redis-type`, `REDIS_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisType {
    Single,
    Cluster,
    Sentinel,
}

/// How their `REDIS_URL` is read (`REDIS_SOCKET_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SocketType {
    Tcp,
    Unix,
}

impl Value for RedisType {}
impl Value for SocketType {}

/// `single`, `cluster` or `sentinel`, in any case; their message otherwise.
pub(super) fn redis_type(s: &str) -> Result<Option<RedisType>, String> {
    let names = [
        ("single", RedisType::Single),
        ("cluster", RedisType::Cluster),
        ("sentinel", RedisType::Sentinel),
    ];
    one_of(s, &names)
        .map(Some)
        .ok_or_else(|| format!("Unrecognized redis type {}", s.trim().to_ascii_lowercase()))
}

pub(super) fn socket_type(s: &str) -> Result<Option<SocketType>, String> {
    let names = [("tcp", SocketType::Tcp), ("unix", SocketType::Unix)];
    one_of(s, &names)
        .map(Some)
        .ok_or_else(|| format!("'{}' is not tcp or unix", s.trim().to_ascii_lowercase()))
}

/// One Redis deployment's settings, resolved: the prefix of its flags (`--redis`,
/// `--redis-per-second`) and of the reference's variables (`REDIS`, `REDIS_PERSECOND`) for messages,
/// its URL as given (sluice's URLs, or their forms), and what reads their forms.
pub(super) struct Target {
    pub flag: &'static str,
    pub env: &'static str,
    pub url: Given<Option<String>>,
    pub redis_type: RedisType,
    pub auth: Option<String>,
    pub tls: bool,
    pub sentinel_auth: Option<String>,
    pub socket: Option<SocketType>,
}

/// A deployment's addresses, resolved.
pub(super) struct Urls {
    pub urls: Vec<String>,
    pub redis_type: RedisType,
    pub sentinel_master: Option<String>,
    pub master_auth: Option<String>,
}

const SENTINEL_FORMAT: &str = "Expected master name and a list of urls for the sentinels, in the format: <redis master name>,<sentinel1>,...,<sentineln>";

/// The deployment's URLs; `None` when no URL is set.
pub(super) fn target_urls(t: Target) -> Result<Option<Urls>, SettingsError> {
    let url_flag = format!("{}-url", t.flag);
    let from_flag = t.url.by_sluice();
    let Some(raw) = t.url.value else {
        return Ok(None);
    };
    let redis_type = t.redis_type;
    let items = split_urls(&raw);

    if redis_type == RedisType::Sentinel {
        let setting = if from_flag { &url_flag } else { &t.url.name };
        let [master, sentinels @ ..] = items.as_slice() else {
            return Err(err(setting, SENTINEL_FORMAT));
        };
        if sentinels.is_empty() {
            return Err(err(setting, SENTINEL_FORMAT));
        }
        let scheme = if t.tls { "rediss" } else { "redis" };
        let urls = sentinels
            .iter()
            .map(|a| {
                if a.contains("://") {
                    a.clone()
                } else {
                    format!("{scheme}://{}{a}", userinfo(t.sentinel_auth.as_deref()))
                }
            })
            .collect();
        return Ok(Some(Urls {
            urls,
            redis_type,
            sentinel_master: Some(master.clone()),
            master_auth: t.auth,
        }));
    }

    let urls: Vec<String> = if from_flag {
        items
    } else {
        items
            .iter()
            .map(|u| compat_url(u, t.socket, t.tls, t.auth.as_deref()))
            .collect()
    };
    if urls.is_empty() {
        return Err(err(&url_flag, "no Redis URL given"));
    }
    for u in &urls {
        if !(u.starts_with("redis://") || u.starts_with("rediss://") || u.starts_with("unix://")) {
            return Err(err(
                &url_flag,
                format!("'{u}' must start with redis://, rediss:// or unix://"),
            ));
        }
    }
    if redis_type == RedisType::Single && urls.len() > 1 {
        return Err(err(
            &url_flag,
            format!(
                "several URLs given; set {}-type cluster ({}_TYPE=cluster) for a cluster",
                t.flag, t.env
            ),
        ));
    }
    Ok(Some(Urls {
        urls,
        redis_type,
        sentinel_master: None,
        master_auth: None,
    }))
}

/// Refuse `#insecure`: redis-rs would turn off every certificate check for it.
pub(super) fn check_url(u: &str) -> Result<(), SettingsError> {
    if u.contains("#insecure") {
        return Err(err(
            "--redis-url",
            format!(
                "'{u}': #insecure turns off all certificate verification and is refused; \
                 to accept a certificate issued for another name use \
                 --redis-tls-skip-hostname-verification (REDIS_TLS_SKIP_HOSTNAME_VERIFICATION)"
            ),
        ));
    }
    Ok(())
}

fn split_urls(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(String::from)
        .collect()
}

/// `user:pass@`, `:pass@` or nothing, percent-encoded.
fn userinfo(auth: Option<&str>) -> String {
    match auth {
        None => String::new(),
        Some(a) => match a.split_once(':') {
            Some((user, pass)) => format!("{}:{}@", pct(user), pct(pass)),
            None => format!(":{}@", pct(a)),
        },
    }
}

/// The reference's `REDIS_URL` is `host:port` (tcp) or a socket path (unix), with auth and TLS in
/// separate variables. Build the equivalent URL.
fn compat_url(raw: &str, socket: Option<SocketType>, tls: bool, auth: Option<&str>) -> String {
    if raw.contains("://") {
        return raw.to_string();
    }
    let unix = match socket {
        Some(SocketType::Tcp) => false,
        Some(SocketType::Unix) => true,
        // The reference's default is unix; a value that looks like host:port is tcp either way.
        None => raw.starts_with('/'),
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
        return url;
    }
    let scheme = if tls { "rediss" } else { "redis" };
    format!("{scheme}://{}{raw}", userinfo(auth))
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
