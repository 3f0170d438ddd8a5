//! Values as envoyproxy/ratelimit's Go code parses them (durations, booleans, addresses),
//! and the one error type every setting reports through.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// A settings error: names the setting and the offending value.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {name}: {message}")]
pub struct SettingsError {
    pub name: String,
    pub message: String,
}

pub(super) fn err(name: &str, message: impl Into<String>) -> SettingsError {
    SettingsError {
        name: name.to_string(),
        message: message.into(),
    }
}

/// Parse an address such as `0.0.0.0:8081`, `[::]:8081`, `localhost:8081` or `:8081`.
pub fn parse_addr(name: &str, s: &str) -> Result<SocketAddr, SettingsError> {
    let s = s.trim();
    let full = if let Some(port) = s.strip_prefix(':') {
        format!("0.0.0.0:{port}")
    } else {
        s.to_string()
    };
    if let Ok(a) = full.parse::<SocketAddr>() {
        return Ok(a);
    }
    full.to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| err(name, format!("'{s}' is not a listen address (host:port)")))
}

/// Parse a duration in Go (`10ms`, `1.5s`, `1h30m`) or humantime syntax.
pub fn parse_duration(name: &str, s: &str) -> Result<Duration, SettingsError> {
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(t).map_err(|e| {
        err(
            name,
            format!("'{s}' is not a duration ({e}); use e.g. 10ms, 2s, 1m"),
        )
    })
}

/// Parse a boolean the way Go's `strconv.ParseBool` does (what envoyproxy/ratelimit uses).
pub fn parse_bool(name: &str, s: &str) -> Result<bool, SettingsError> {
    match s.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(err(
            name,
            format!("'{other}' is not a boolean (true/false)"),
        )),
    }
}
