//! Redis address forms: sluice's URLs (`redis://`, `rediss://`, `unix://`), and
//! envoyproxy/ratelimit's `REDIS_URL` (`host:port` or a socket path, with auth, TLS and
//! socket type in separate variables; `master,host:port,...` for sentinel) turned into URLs.

use super::env::{Env, bool_var, var};
use super::*;

/// Which kind of Redis the URLs name (`--redis-type`, `REDIS_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RedisType {
    Single,
    Cluster,
    Sentinel,
}

/// Where one Redis deployment's settings come from: the flags given, and the prefix of its
/// flags (`--redis`, `--redis-per-second`) and of their variables (`REDIS`,
/// `REDIS_PERSECOND`).
pub(super) struct Target<'a> {
    pub flag: &'static str,
    pub env: &'static str,
    pub url: Option<&'a str>,
    pub redis_type: Option<RedisType>,
    pub auth: Option<&'a str>,
    pub tls: Option<bool>,
    pub sentinel_auth: Option<&'a str>,
    /// Their default address when the backend is Redis but no URL is set.
    pub default_socket: &'static str,
}

/// A deployment's addresses, resolved.
pub(super) struct Urls {
    pub urls: Vec<String>,
    pub redis_type: RedisType,
    pub sentinel_master: Option<String>,
    pub master_auth: Option<String>,
}

const SENTINEL_FORMAT: &str = "Expected master name and a list of urls for the sentinels, in the format: <redis master name>,<sentinel1>,...,<sentineln>";

/// The deployment's URLs; `None` when no URL is set and `use_default` is false.
pub(super) fn target_urls(
    t: &Target<'_>,
    env: Env<'_>,
    use_default: bool,
) -> Result<Option<Urls>, SettingsError> {
    let name = |suffix: &str| format!("{}_{suffix}", t.env);
    let url_flag = format!("{}-url", t.flag);
    let redis_type = match t.redis_type {
        Some(r) => r,
        None => match var(env, &name("TYPE")).map(|t| t.trim().to_ascii_lowercase()) {
            None => RedisType::Single,
            Some(t) if t == "single" => RedisType::Single,
            Some(t) if t == "cluster" => RedisType::Cluster,
            Some(t) if t == "sentinel" => RedisType::Sentinel,
            Some(other) => {
                return Err(err(
                    &name("TYPE"),
                    format!("Unrecognized redis type {other}"),
                ));
            }
        },
    };
    let (raw, from_flag) = if let Some(u) = t.url {
        (u.to_owned(), true)
    } else if let Some(u) = var(env, &name("URL")) {
        (u, false)
    } else if use_default {
        (t.default_socket.to_owned(), false)
    } else {
        return Ok(None);
    };
    let tls = match t.tls {
        Some(b) => b,
        None => bool_var(env, &name("TLS"))?.unwrap_or(false),
    };
    let auth = t
        .auth
        .map(str::to_owned)
        .or_else(|| var(env, &name("AUTH")));
    let items = split_urls(&raw);

    if redis_type == RedisType::Sentinel {
        let setting = if from_flag { url_flag } else { name("URL") };
        let [master, sentinels @ ..] = items.as_slice() else {
            return Err(err(&setting, SENTINEL_FORMAT));
        };
        if sentinels.is_empty() {
            return Err(err(&setting, SENTINEL_FORMAT));
        }
        let sentinel_auth = t
            .sentinel_auth
            .map(str::to_owned)
            .or_else(|| var(env, &name("SENTINEL_AUTH")));
        let scheme = if tls { "rediss" } else { "redis" };
        let urls = sentinels
            .iter()
            .map(|a| {
                if a.contains("://") {
                    a.clone()
                } else {
                    format!("{scheme}://{}{a}", userinfo(sentinel_auth.as_deref()))
                }
            })
            .collect();
        return Ok(Some(Urls {
            urls,
            redis_type,
            sentinel_master: Some(master.clone()),
            master_auth: auth,
        }));
    }

    let socket = var(env, &name("SOCKET_TYPE")).map(|t| t.trim().to_ascii_lowercase());
    let urls: Vec<String> = if from_flag {
        items
    } else {
        items
            .iter()
            .map(|u| {
                compat_url(
                    u,
                    &name("SOCKET_TYPE"),
                    socket.as_deref(),
                    tls,
                    auth.as_deref(),
                )
            })
            .collect::<Result<_, _>>()?
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
                "several URLs given; set {}-type cluster ({}=cluster) for a cluster",
                t.flag,
                name("TYPE")
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

/// Their `REDIS_URL` is `host:port` (tcp) or a socket path (unix), with auth and TLS in
/// separate variables. Build the equivalent URL.
fn compat_url(
    raw: &str,
    socket_var: &str,
    socket: Option<&str>,
    tls: bool,
    auth: Option<&str>,
) -> Result<String, SettingsError> {
    if raw.contains("://") {
        return Ok(raw.to_string());
    }
    let unix = match socket {
        Some("tcp") => false,
        Some("unix") => true,
        // Their default is unix; a value that looks like host:port is tcp either way.
        None => raw.starts_with('/'),
        Some(other) => {
            return Err(err(socket_var, format!("'{other}' is not tcp or unix")));
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
    Ok(format!("{scheme}://{}{raw}", userinfo(auth)))
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
