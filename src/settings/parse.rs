//! The one error type every setting reports through, and the value syntaxes of `values.rs`
//! with a setting's name, for code outside resolution (the deployment tests read durations
//! from manifests with them).

use std::net::SocketAddr;
use std::time::Duration;

use super::values;

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
    values::address(s).map_err(|m| err(name, m))
}

/// Parse a duration in Go (`10ms`, `1.5s`, `1h30m`) or humantime syntax.
pub fn parse_duration(name: &str, s: &str) -> Result<Duration, SettingsError> {
    values::duration(s).map_err(|m| err(name, m))
}

/// Parse a boolean the way Go's `strconv.ParseBool` does (what envoyproxy/ratelimit uses).
pub fn parse_bool(name: &str, s: &str) -> Result<bool, SettingsError> {
    values::boolean(s).map_err(|m| err(name, m))
}
