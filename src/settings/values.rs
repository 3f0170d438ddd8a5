//! The syntaxes of setting values: each a `fn(&str) -> Result<T, String>` that clap runs on
//! a flag and resolution runs on a variable (the error is then named after whichever was
//! set). Booleans, durations and addresses as envoyproxy/ratelimit's Go code reads them.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// Go's `strconv.ParseBool`, which their settings use.
pub fn boolean(s: &str) -> Result<bool, String> {
    match s.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(format!(
            "'{other}' is not a boolean: use true or false (also accepted, as Go's \
             strconv.ParseBool reads them: 1, t, T, TRUE, True, 0, f, F, FALSE, False)"
        )),
    }
}

/// A boolean that may be left unset (their `USE_STATSD`: unset means "if a host is set").
pub fn some_boolean(s: &str) -> Result<Option<bool>, String> {
    boolean(s).map(Some)
}

pub fn number<T: FromStr>(s: &str) -> Result<T, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a valid number"))
}

/// A count of at least 1.
pub fn positive<T: FromStr + PartialOrd + From<u8>>(s: &str) -> Result<T, String> {
    let n: T = number(s)?;
    if n < T::from(1) {
        return Err("must be at least 1".into());
    }
    Ok(n)
}

/// A fraction, 0 to 1.
pub fn ratio<T: FromStr + PartialOrd + From<u8>>(s: &str) -> Result<T, String> {
    let r: T = number(s)?;
    if !(T::from(0)..=T::from(1)).contains(&r) {
        return Err("must be between 0 and 1".into());
    }
    Ok(r)
}

/// Go (`10ms`, `1.5s`, `1h30m`) or humantime syntax; a bare `0` is zero.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("'{s}' is not a duration ({e}); use e.g. 10ms, 2s, 1m"))
}

pub fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d.is_zero() {
        return Err("must be more than 0".into());
    }
    Ok(d)
}

/// A duration where 0 means never.
pub fn duration_or_never(s: &str) -> Result<Option<Duration>, String> {
    duration(s).map(|d| (!d.is_zero()).then_some(d))
}

pub fn some_duration(s: &str) -> Result<Option<Duration>, String> {
    duration(s).map(Some)
}

/// `0.0.0.0:8081`, `[::]:8081`, `localhost:8081` or `:8081`.
pub fn address(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    let full = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => s.to_string(),
    };
    if let Ok(a) = full.parse::<SocketAddr>() {
        return Ok(a);
    }
    full.to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| format!("'{s}' is not a listen address (host:port)"))
}

pub fn some_address(s: &str) -> Result<Option<SocketAddr>, String> {
    address(s).map(Some)
}

/// An address, or `off`.
pub fn address_or_off(s: &str) -> Result<Option<SocketAddr>, String> {
    match s.trim() {
        "off" => Ok(None),
        a => address(a).map(Some),
    }
}

pub fn text(s: &str) -> Result<String, String> {
    Ok(s.to_owned())
}

pub fn some_text(s: &str) -> Result<Option<String>, String> {
    Ok(Some(s.to_owned()))
}

/// Text with the spaces around it removed.
pub fn some_trimmed(s: &str) -> Result<Option<String>, String> {
    Ok(Some(s.trim().to_owned()))
}

pub fn some_path(s: &str) -> Result<Option<PathBuf>, String> {
    Ok(Some(PathBuf::from(s.trim())))
}

/// Paths separated by commas.
pub fn paths(s: &str) -> Result<Vec<PathBuf>, String> {
    Ok(s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect())
}

/// `k<sep>v,k2<sep>v2`; empty entries are skipped, an entry without `sep` is an error.
pub fn pairs(s: &str, sep: char) -> Result<Vec<(String, String)>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once(sep) {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().into(), v.trim().into())),
            _ => Err(format!(
                "'{e}' is not key{sep}value (expected k{sep}v,k2{sep}v2)"
            )),
        })
        .collect()
}

/// One of `names` (any case) → its value.
pub fn one_of<T: Copy>(s: &str, names: &[(&str, T)]) -> Option<T> {
    let s = s.trim();
    names
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|(_, v)| *v)
}

/// A value of none of the syntaxes: for settings only the reference's variables set, through a
/// mapping that reads them itself.
pub fn none<T>(s: &str) -> Result<T, String> {
    Err(format!("'{s}': this setting has no syntax of its own"))
}
