//! Where the rules come from: files (the default), or an xDS management server over
//! state-of-the-world ADS, with envoyproxy/ratelimit's variables and meanings
//! (`CONFIG_TYPE=GRPC_XDS_SOTW`, `CONFIG_GRPC_XDS_*`, `XDS_CLIENT_*`), and whether serving
//! waits for the first config (`FORCE_START_WITHOUT_INITIAL_CONFIG`).

use super::env::{Env, bool_var, num_var, var};
use super::*;

/// Rules from files (`--config`) or from an xDS server.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum ConfigSource {
    #[default]
    Files,
    // Boxed: far larger than `Files`, and read once at startup.
    Xds(Box<XdsSettings>),
}

/// The xDS client (`CONFIG_TYPE=GRPC_XDS_SOTW`).
#[derive(Clone, Debug, PartialEq)]
pub struct XdsSettings {
    /// `host:port`, `http(s)://host:port` or `dns:///host:port` (CONFIG_GRPC_XDS_SERVER_URL).
    pub server_url: String,
    /// CONFIG_GRPC_XDS_NODE_ID: the management server keys its snapshots by it.
    pub node_id: String,
    /// CONFIG_GRPC_XDS_NODE_METADATA (`k=v,k2=v2`): string fields of the node's metadata.
    pub node_metadata: Vec<(String, String)>,
    /// CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS (`k:v,k2:v2`): gRPC metadata on the stream.
    pub headers: Vec<(String, String)>,
    /// CONFIG_GRPC_XDS_SERVER_USE_TLS and its files.
    pub tls: Option<XdsTls>,
    pub backoff: XdsBackoff,
    /// XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: largest response accepted (gRPC's default: 4 MiB).
    pub max_message_bytes: Option<usize>,
}

impl Default for XdsSettings {
    fn default() -> Self {
        XdsSettings {
            server_url: "localhost:18000".into(),
            node_id: "default".into(),
            node_metadata: Vec::new(),
            headers: Vec::new(),
            tls: None,
            backoff: XdsBackoff::default(),
            max_message_bytes: None,
        }
    }
}

/// TLS to the xDS server. Files are read at each connection, so rotated certificates are
/// picked up on the next reconnect.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct XdsTls {
    /// CONFIG_GRPC_XDS_CLIENT_TLS_CERT / _KEY: the client certificate (mutual TLS).
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// CONFIG_GRPC_XDS_SERVER_TLS_CACERT: the CA that signs the server's certificate
    /// (the public web roots when unset).
    pub ca_cert: Option<PathBuf>,
    /// CONFIG_GRPC_XDS_SERVER_TLS_SAN: the name to verify instead of the URL's host.
    pub server_name: Option<String>,
}

/// Reconnect delays, as their client computes them (jpillora/backoff): attempt `n` waits
/// `initial × factor^n`, at least `initial` and at most `max`; with jitter, a uniform
/// draw between `initial` and that. A factor below 1 therefore keeps every delay at
/// `initial` (their default 0.5 does).
#[derive(Clone, Debug, PartialEq)]
pub struct XdsBackoff {
    pub initial: Duration,
    pub max: Duration,
    pub factor: f64,
    pub jitter: bool,
}

impl Default for XdsBackoff {
    fn default() -> Self {
        XdsBackoff {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(60),
            factor: 0.5,
            jitter: true,
        }
    }
}

impl XdsBackoff {
    /// The delay before reconnect attempt `attempt` (0 for the first), given a uniform
    /// draw `unit` in [0, 1) for the jitter.
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let min = self.initial.as_secs_f64();
        let max = self.max.as_secs_f64();
        if min >= max {
            return self.max;
        }
        let mut d = min * self.factor.powi(attempt.min(64) as i32);
        if self.jitter {
            d = unit * (d - min) + min;
        }
        Duration::from_secs_f64(d.clamp(min, max))
    }
}

pub(super) fn resolve_config_source(
    args: &ServeArgs,
    env: Env<'_>,
    notes: &mut Vec<String>,
) -> Result<ConfigSource, SettingsError> {
    let xds = match var(env, "CONFIG_TYPE").map(|t| t.trim().to_ascii_uppercase()) {
        None => false,
        Some(t) if t == "FILE" => false,
        Some(t) if t == "GRPC_XDS_SOTW" => true,
        Some(t) => {
            return Err(err(
                "CONFIG_TYPE",
                format!("'{t}' is not FILE or GRPC_XDS_SOTW"),
            ));
        }
    };
    if !xds {
        return Ok(ConfigSource::Files);
    }
    if !args.config.is_empty() {
        notes.push("--config ignored: CONFIG_TYPE=GRPC_XDS_SOTW takes the rules from xDS".into());
    }
    let mut x = XdsSettings::default();
    if let Some(u) = var(env, "CONFIG_GRPC_XDS_SERVER_URL") {
        x.server_url = u.trim().to_string();
    }
    if let Some(id) = var(env, "CONFIG_GRPC_XDS_NODE_ID") {
        x.node_id = id.trim().to_string();
    }
    if let Some(m) = var(env, "CONFIG_GRPC_XDS_NODE_METADATA") {
        x.node_metadata = pairs("CONFIG_GRPC_XDS_NODE_METADATA", &m, '=')?;
    }
    if let Some(h) = var(env, "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS") {
        x.headers = pairs("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", &h, ':')?;
        for (k, _) in &mut x.headers {
            // gRPC metadata keys are lower case on the wire.
            *k = k.to_ascii_lowercase();
        }
    }
    x.tls = xds_tls(env)?;
    let b = &mut x.backoff;
    if let Some(d) = var(env, "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL") {
        b.initial = parse_duration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", &d)?;
    }
    if let Some(d) = var(env, "XDS_CLIENT_BACKOFF_MAX_INTERVAL") {
        b.max = parse_duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL", &d)?;
    }
    if let Some(f) = num_var::<f64>(env, "XDS_CLIENT_BACKOFF_RANDOM_FACTOR")? {
        if !(f.is_finite() && f > 0.0) {
            return Err(err(
                "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
                format!("{f} must be a positive number (the delay's growth factor)"),
            ));
        }
        b.factor = f;
    }
    if let Some(j) = bool_var(env, "XDS_CLIENT_BACKOFF_JITTER")? {
        b.jitter = j;
    }
    if b.initial.is_zero() {
        return Err(err(
            "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
            "must be above zero",
        ));
    }
    x.max_message_bytes = num_var::<usize>(env, "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES")?;
    if x.max_message_bytes == Some(0) {
        return Err(err(
            "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
            "must be above zero",
        ));
    }
    if x.server_url.is_empty() {
        return Err(err("CONFIG_GRPC_XDS_SERVER_URL", "must not be empty"));
    }
    Ok(ConfigSource::Xds(Box::new(x)))
}

fn xds_tls(env: Env<'_>) -> Result<Option<XdsTls>, SettingsError> {
    if !bool_var(env, "CONFIG_GRPC_XDS_SERVER_USE_TLS")?.unwrap_or(false) {
        return Ok(None);
    }
    let path = |name| var(env, name).map(|p| PathBuf::from(p.trim()));
    let tls = XdsTls {
        client_cert: path("CONFIG_GRPC_XDS_CLIENT_TLS_CERT"),
        client_key: path("CONFIG_GRPC_XDS_CLIENT_TLS_KEY"),
        ca_cert: path("CONFIG_GRPC_XDS_SERVER_TLS_CACERT"),
        server_name: var(env, "CONFIG_GRPC_XDS_SERVER_TLS_SAN").map(|s| s.trim().to_string()),
    };
    if tls.client_cert.is_some() != tls.client_key.is_some() {
        return Err(err(
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together",
        ));
    }
    Ok(Some(tls))
}

/// `k<sep>v,k2<sep>v2`; empty entries are skipped, an entry without `sep` is an error.
fn pairs(name: &str, s: &str, sep: char) -> Result<Vec<(String, String)>, SettingsError> {
    s.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once(sep) {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().into(), v.trim().into())),
            _ => Err(err(
                name,
                format!("'{e}' is not key{sep}value (expected k{sep}v,k2{sep}v2)"),
            )),
        })
        .collect()
}
