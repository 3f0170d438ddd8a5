//! The environment as a lookup, and reading one variable of it: the resolver
//! (`resolver.rs`) and the mappings of envoyproxy/ratelimit's variables use these, and
//! nothing else in the crate reads the environment for settings.

use std::net::SocketAddr;

use super::parse::{SettingsError, err, parse_addr, parse_bool};

/// The environment: the process's ([`process`]) in the binary, a map in tests.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment (a value that is not UTF-8 reads as unset).
pub fn process(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// A non-empty environment value.
pub(super) fn var(env: Env<'_>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.trim().is_empty())
}

pub(super) fn bool_var(env: Env<'_>, name: &str) -> Result<Option<bool>, SettingsError> {
    var(env, name).map(|v| parse_bool(name, &v)).transpose()
}

pub(super) fn num_var<T: std::str::FromStr>(
    env: Env<'_>,
    name: &str,
) -> Result<Option<T>, SettingsError> {
    var(env, name)
        .map(|v| super::values::number(&v).map_err(|m| err(name, m)))
        .transpose()
}

/// `HOST`/`PORT`-style pair → address, when either is set.
pub(super) fn host_port(
    env: Env<'_>,
    host_var: &str,
    port_var: &str,
    default_port: u16,
) -> Result<Option<SocketAddr>, SettingsError> {
    let host = var(env, host_var);
    let port = var(env, port_var);
    if host.is_none() && port.is_none() {
        return Ok(None);
    }
    let host = host.unwrap_or_else(|| "0.0.0.0".into());
    let port: u16 = match port {
        Some(p) => p
            .trim()
            .parse()
            .map_err(|_| err(port_var, format!("'{p}' is not a port number")))?,
        None => default_port,
    };
    let joined = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    parse_addr(host_var, &joined).map(Some)
}
