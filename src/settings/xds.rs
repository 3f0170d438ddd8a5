//! Where the rules come from: files (the default), or an xDS management server over
//! state-of-the-world ADS, with envoyproxy/ratelimit's variables and meanings
//! (`CONFIG_TYPE=GRPC_XDS_SOTW`, `CONFIG_GRPC_XDS_*`, `XDS_CLIENT_*`). The xDS settings are
//! read only when `CONFIG_TYPE` asks for xDS, as theirs.

use std::path::PathBuf;
use std::time::Duration;

use super::decl::{RefVar, Setting};
use super::declare::settings;
use super::parse::{SettingsError, err};
use super::resolver::{Group, Resolver, Value};
use super::rules::CONFIG;
use super::values::{
    boolean, duration, number, one_of, pairs, positive, positive_duration, some_path, some_trimmed,
};

/// Rules from files (`--config`) or from an xDS server.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum ConfigSource {
    #[default]
    Files,
    // Boxed: far larger than `Files`, and read once at startup.
    Xds(Box<XdsSettings>),
}

/// The values of `CONFIG_TYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConfigType {
    File,
    Xds,
}

impl Value for ConfigType {}

fn config_type(s: &str) -> Result<ConfigType, String> {
    let names = [
        ("FILE", ConfigType::File),
        ("GRPC_XDS_SOTW", ConfigType::Xds),
    ];
    one_of(s, &names).ok_or_else(|| {
        format!(
            "'{}' is not FILE or GRPC_XDS_SOTW",
            s.trim().to_ascii_uppercase()
        )
    })
}

const XDS: &[(&str, &str)] = &[("CONFIG_TYPE", "GRPC_XDS_SOTW")];
const XDS_TLS: &[(&str, &str)] = &[
    ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
    ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
];
const XDS_MTLS: &[(&str, &str)] = &[
    ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
    ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
    ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/xds/tls.crt"),
    ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/xds/tls.key"),
];

settings! {
    /// The choice of rule source.
    pub(super) struct SourceInput {
        /// `FILE` (rule files) or `GRPC_XDS_SOTW` (rules from an xDS server,
        /// [rules over xDS](../how-to/rules-over-xds.md))
        config_type: ConfigType = setting(
            Setting::ref_only(config_type)
                .default("FILE")
                .same(RefVar::new("CONFIG_TYPE", "GRPC_XDS_SOTW").does(
                    "`FILE` (rule files) or `GRPC_XDS_SOTW` (rules from an xDS server)",
                ))
        ),
    }
}

settings! {
    /// The xDS client (`CONFIG_TYPE=GRPC_XDS_SOTW`).
    #[derive(Clone, Debug, PartialEq)]
    pub struct XdsSettings {
        /// The xDS server: `host:port`, `http(s)://host:port` or `dns:///host:port`
        pub server_url: String = setting(
            Setting::ref_only(trimmed)
                .default("localhost:18000")
                .same(RefVar::new("CONFIG_GRPC_XDS_SERVER_URL", "xds.example:18000").with(XDS))
        ),
        /// The node id the server keys its snapshots by
        pub node_id: String = setting(
            Setting::ref_only(trimmed)
                .default("default")
                .same(RefVar::new("CONFIG_GRPC_XDS_NODE_ID", "node-1").with(XDS))
        ),
        /// `k=v,k2=v2`: string fields of the node's metadata
        pub node_metadata: Vec<(String, String)> = setting(
            Setting::ref_only(|s| pairs(s, '='))
                .same(RefVar::new("CONFIG_GRPC_XDS_NODE_METADATA", "zone=a").with(XDS))
        ),
        /// `k:v,k2:v2`: gRPC metadata sent on the xDS stream
        pub headers: Vec<(String, String)> = setting(
            Setting::ref_only(headers)
                .same(RefVar::new("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "x-team:rl").with(XDS))
        ),
        /// CONFIG_GRPC_XDS_SERVER_USE_TLS and its files.
        pub tls: Option<XdsTls> = with(tls, XdsTlsSwitch, XdsTls),
        pub backoff: XdsBackoff = group(),
        /// Largest xDS response accepted, in bytes
        pub max_message_bytes: Option<usize> = setting(
            Setting::ref_only(|s| positive(s).map(Some))
                .shown_default("4 MiB (gRPC's)")
                .same(RefVar::new("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "1048576").with(XDS))
        ),
    }
}

settings! {
    /// Whether the xDS client uses TLS.
    struct XdsTlsSwitch {
        /// TLS to the xDS server; the `CONFIG_GRPC_XDS_*_TLS_*` files count only when it is true
        on: bool = setting(
            Setting::ref_only(boolean)
                .default("false")
                .same(RefVar::new("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true").with(XDS))
        ),
    }
}

settings! {
    /// TLS to the xDS server. Files are read at each connection, so rotated certificates are
    /// picked up on the next reconnect.
    #[derive(Clone, Debug, PartialEq)]
    pub struct XdsTls {
        /// Client certificate to the xDS server (mutual TLS), read at each connection
        pub client_cert: Option<PathBuf> = setting(
            Setting::ref_only(some_path)
                .same(RefVar::new("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/xds/other.crt").with(XDS_MTLS))
        ),
        /// Private key of that client certificate, read at each connection
        pub client_key: Option<PathBuf> = setting(
            Setting::ref_only(some_path)
                .same(RefVar::new("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/xds/other.key").with(XDS_MTLS))
        ),
        /// CA of the xDS server's certificate
        pub ca_cert: Option<PathBuf> = setting(
            Setting::ref_only(some_path)
                .shown_default("public web roots")
                .same(RefVar::new("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/xds/ca.crt").with(XDS_TLS))
        ),
        /// Name the xDS server's certificate must carry
        pub server_name: Option<String> = setting(
            Setting::ref_only(some_trimmed)
                .shown_default("the URL's host")
                .same(RefVar::new("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds.internal").with(XDS_TLS))
        ),
    }
}

settings! {
    /// Reconnect delays, as their client computes them (jpillora/backoff): attempt `n` waits
    /// `initial × factor^n`, at least `initial` and at most `max`; with jitter, a uniform
    /// draw between `initial` and that. A factor below 1 therefore keeps every delay at
    /// `initial` (their default 0.5 does).
    #[derive(Clone, Debug, PartialEq)]
    pub struct XdsBackoff {
        /// First xDS reconnect delay
        pub initial: Duration = setting(
            Setting::ref_only(positive_duration)
                .default("10s")
                .same(RefVar::new("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "1s").with(XDS))
        ),
        /// Longest xDS reconnect delay
        pub max: Duration = setting(
            Setting::ref_only(duration)
                .default("60s")
                .same(RefVar::new("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "2m").with(XDS))
        ),
        /// Growth factor of the delay (theirs: below 1 the delay stays at the first)
        pub factor: f64 = setting(
            Setting::ref_only(factor)
                .default("0.5")
                .same(RefVar::new("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "2").with(XDS))
        ),
        /// Randomize each reconnect delay
        pub jitter: bool = setting(
            Setting::ref_only(boolean)
                .default("true")
                .same(RefVar::new("XDS_CLIENT_BACKOFF_JITTER", "false").with(XDS))
        ),
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

/// The rule source; the xDS settings are read only when `CONFIG_TYPE` selects xDS.
pub(super) fn source(r: &Resolver<'_>) -> Result<ConfigSource, SettingsError> {
    if SourceInput::from_resolver(r)?.config_type == ConfigType::File {
        return Ok(ConfigSource::Files);
    }
    if r.given(&CONFIG)?.by_sluice() {
        r.note("--config ignored: CONFIG_TYPE=GRPC_XDS_SOTW takes the rules from xDS".into());
    }
    let x = XdsSettings::from_resolver(r)?;
    if x.server_url.is_empty() {
        return Err(err("CONFIG_GRPC_XDS_SERVER_URL", "must not be empty"));
    }
    Ok(ConfigSource::Xds(Box::new(x)))
}

/// The TLS files count only with `CONFIG_GRPC_XDS_SERVER_USE_TLS=true`, as theirs.
fn tls(r: &Resolver<'_>) -> Result<Option<XdsTls>, SettingsError> {
    if !XdsTlsSwitch::from_resolver(r)?.on {
        return Ok(None);
    }
    let tls = XdsTls::from_resolver(r)?;
    if tls.client_cert.is_some() != tls.client_key.is_some() {
        return Err(err(
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together",
        ));
    }
    Ok(Some(tls))
}

fn trimmed(s: &str) -> Result<String, String> {
    Ok(s.trim().to_owned())
}

/// gRPC metadata keys are lower case on the wire.
fn headers(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut h = pairs(s, ':')?;
    for (k, _) in &mut h {
        *k = k.to_ascii_lowercase();
    }
    Ok(h)
}

fn factor(s: &str) -> Result<f64, String> {
    let f: f64 = number(s)?;
    if !(f.is_finite() && f > 0.0) {
        return Err(format!(
            "{f} must be a positive number (the delay's growth factor)"
        ));
    }
    Ok(f)
}
