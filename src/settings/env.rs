//! Reading the environment: the one place that turns a variable into a value, used by
//! `compat.rs` (which dispatches) and by each group of settings it dispatches to. Kept apart
//! so the groups do not import the dispatcher that imports them.

use std::net::SocketAddr;

use super::parse::{SettingsError, err, parse_addr, parse_bool};

pub(super) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

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
        .map(|v| {
            v.trim()
                .parse::<T>()
                .map_err(|_| err(name, format!("'{v}' is not a valid number")))
        })
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
