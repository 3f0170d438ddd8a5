//! Listener settings: gRPC TLS and mutual TLS, the debug listener, and connection hygiene
//! (timeouts, caps, HTTP/2 keepalive, maximum connection age), as flags with `SLUICE_*`
//! variables and as envoyproxy/ratelimit's `GRPC_SERVER_*`, `GRPC_CLIENT_TLS_*`,
//! `GRPC_MAX_CONNECTION_AGE*`, `GRPC_MAX_CONCURRENT_STREAMS` and `DEBUG_HOST`/`DEBUG_PORT`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::env::{Env, bool_var, host_port, num_var, var};
use super::parse::{SettingsError, err, parse_addr, parse_duration};

/// Default `--grpc-max-concurrent-streams`. Under overload a call the server reads and then
/// refuses costs it about 0.8 of one it answers (the transport is most of a call's CPU), so
/// refusing after reading cannot keep goodput; a call past the stream limit is never read: it
/// waits at the client, where its deadline (and the client's circuit breakers) end it for
/// free. 16 per connection keeps a busy Envoy worker (10k calls/s at 1 ms: 10 in flight) on
/// one connection, and Redis batches full, while one connection can make the server read
/// at most half a millisecond of work ahead.
pub const DEFAULT_GRPC_MAX_CONCURRENT_STREAMS: u32 = 16;

#[derive(Debug, Default, Args)]
pub struct ListenArgs {
    /// Serve gRPC over TLS [default: false; on when --grpc-tls-cert is given]
    /// (also GRPC_SERVER_USE_TLS)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_GRPC_TLS")]
    pub grpc_tls: Option<bool>,
    /// gRPC TLS certificate chain, PEM; reloaded when it changes (also GRPC_SERVER_TLS_CERT)
    #[arg(long, value_name = "PATH", env = "SLUICE_GRPC_TLS_CERT")]
    pub grpc_tls_cert: Option<PathBuf>,
    /// gRPC TLS private key, PEM; reloaded when it changes (also GRPC_SERVER_TLS_KEY)
    #[arg(long, value_name = "PATH", env = "SLUICE_GRPC_TLS_KEY")]
    pub grpc_tls_key: Option<PathBuf>,
    /// CA certificates for client certificates: clients must present one that chains to
    /// them (mutual TLS) (also GRPC_CLIENT_TLS_CACERT)
    #[arg(long, value_name = "PATH", env = "SLUICE_GRPC_TLS_CLIENT_CA")]
    pub grpc_tls_client_ca: Option<PathBuf>,
    /// Name (DNS or IP) every client certificate must be valid for (also GRPC_CLIENT_TLS_SAN)
    #[arg(long, value_name = "NAME", env = "SLUICE_GRPC_TLS_CLIENT_SAN")]
    pub grpc_tls_client_san: Option<String>,
    /// Send GOAWAY to a gRPC connection after this age, ±10% (0: never), so clients
    /// reconnect and spread over new instances [default: 24h] (also GRPC_MAX_CONNECTION_AGE)
    #[arg(long, value_name = "DURATION", env = "SLUICE_GRPC_MAX_CONNECTION_AGE")]
    pub grpc_max_connection_age: Option<String>,
    /// After that GOAWAY, close the connection this long after, in-flight requests or not
    /// [default: 1h] (also GRPC_MAX_CONNECTION_AGE_GRACE)
    #[arg(
        long,
        value_name = "DURATION",
        env = "SLUICE_GRPC_MAX_CONNECTION_AGE_GRACE"
    )]
    pub grpc_max_connection_age_grace: Option<String>,
    /// Concurrent requests (HTTP/2 streams) per gRPC connection, advertised to clients: the
    /// calls past it wait at the client, unread, which is the cheapest refusal under
    /// overload [default: 16] (also GRPC_MAX_CONCURRENT_STREAMS, where 0 means no cap)
    #[arg(long, value_name = "N", env = "SLUICE_GRPC_MAX_CONCURRENT_STREAMS")]
    pub grpc_max_concurrent_streams: Option<u32>,
    /// Debug listener: /rlconfig and an index, as envoyproxy/ratelimit's debug port
    /// [default: off] (also DEBUG_HOST/DEBUG_PORT)
    #[arg(long, value_name = "ADDR", env = "SLUICE_DEBUG_ADDR")]
    pub debug_addr: Option<String>,
    /// Most open connections per listener; accepting pauses at the cap [default: 10000]
    #[arg(long, value_name = "N", env = "SLUICE_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// A new connection must complete its TLS handshake and send the HTTP/2 preface, and an
    /// HTTP/1 client each request's headers, within this [default: 10s]
    #[arg(long, value_name = "DURATION", env = "SLUICE_HEADER_TIMEOUT")]
    pub header_timeout: Option<String>,
    /// Close connections with no request in flight for this long (0: never) [default: 5m]
    #[arg(long, value_name = "DURATION", env = "SLUICE_IDLE_TIMEOUT")]
    pub idle_timeout: Option<String>,
    /// HTTP/2 keepalive: PING a connection this often (0: never) [default: 60s]
    #[arg(long, value_name = "DURATION", env = "SLUICE_HTTP2_KEEPALIVE_INTERVAL")]
    pub http2_keepalive_interval: Option<String>,
    /// HTTP/2 keepalive: close a connection whose PING is not answered within this
    /// [default: 20s]
    #[arg(long, value_name = "DURATION", env = "SLUICE_HTTP2_KEEPALIVE_TIMEOUT")]
    pub http2_keepalive_timeout: Option<String>,
}

/// The gRPC listener's TLS files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrpcTlsSettings {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Client certificates required and verified against this CA (mutual TLS).
    pub client_ca: Option<PathBuf>,
    /// Name every client certificate must be valid for.
    pub client_san: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ListenSettings {
    /// `None`: plaintext gRPC.
    pub grpc_tls: Option<GrpcTlsSettings>,
    pub debug_addr: Option<SocketAddr>,
    pub max_connections: usize,
    pub header_timeout: Duration,
    /// `None`: never.
    pub idle_timeout: Option<Duration>,
    pub grpc_max_concurrent_streams: u32,
    /// `None`: no keepalive PINGs.
    pub http2_keepalive_interval: Option<Duration>,
    pub http2_keepalive_timeout: Duration,
    /// `None`: never.
    pub grpc_max_connection_age: Option<Duration>,
    pub grpc_max_connection_age_grace: Duration,
}

impl Default for ListenSettings {
    fn default() -> Self {
        ListenSettings {
            grpc_tls: None,
            debug_addr: None,
            max_connections: 10_000,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Some(Duration::from_secs(300)),
            grpc_max_concurrent_streams: DEFAULT_GRPC_MAX_CONCURRENT_STREAMS,
            http2_keepalive_interval: Some(Duration::from_secs(60)),
            http2_keepalive_timeout: Duration::from_secs(20),
            // envoyproxy/ratelimit's defaults.
            grpc_max_connection_age: Some(Duration::from_secs(24 * 3600)),
            grpc_max_connection_age_grace: Duration::from_secs(3600),
        }
    }
}

/// A duration flag, else a compatibility variable, else `default`.
fn duration(
    flag: (&str, &Option<String>),
    compat: Option<&str>,
    env: Env<'_>,
    default: Duration,
) -> Result<Duration, SettingsError> {
    if let Some(v) = flag.1 {
        return parse_duration(flag.0, v);
    }
    match compat.and_then(|name| var(env, name).map(|v| (name, v))) {
        Some((name, v)) => parse_duration(name, &v),
        None => Ok(default),
    }
}

/// Zero means "never".
fn never_if_zero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

pub(super) fn resolve_listen(
    args: &ListenArgs,
    env: Env<'_>,
    notes: &mut Vec<String>,
) -> Result<ListenSettings, SettingsError> {
    let d = ListenSettings::default();
    let mut s = ListenSettings {
        grpc_tls: resolve_tls(args, env, notes)?,
        debug_addr: match &args.debug_addr {
            Some(a) => Some(parse_addr("--debug-addr", a)?),
            None => host_port(env, "DEBUG_HOST", "DEBUG_PORT", 6070)?,
        },
        ..d.clone()
    };
    s.max_connections = args.max_connections.unwrap_or(d.max_connections);
    if s.max_connections == 0 {
        return Err(err("--max-connections", "must be at least 1"));
    }
    s.header_timeout = duration(
        ("--header-timeout", &args.header_timeout),
        None,
        env,
        d.header_timeout,
    )?;
    if s.header_timeout.is_zero() {
        return Err(err("--header-timeout", "must be more than 0"));
    }
    s.idle_timeout = never_if_zero(duration(
        ("--idle-timeout", &args.idle_timeout),
        None,
        env,
        Duration::from_secs(300),
    )?);
    s.grpc_max_concurrent_streams = match args.grpc_max_concurrent_streams {
        Some(0) => return Err(err("--grpc-max-concurrent-streams", "must be at least 1")),
        Some(n) => n,
        // Theirs: 0 leaves grpc-go's default, no cap.
        None => match num_var::<u32>(env, "GRPC_MAX_CONCURRENT_STREAMS")? {
            Some(0) => u32::MAX,
            Some(n) => n,
            None => d.grpc_max_concurrent_streams,
        },
    };
    s.http2_keepalive_interval = never_if_zero(duration(
        ("--http2-keepalive-interval", &args.http2_keepalive_interval),
        None,
        env,
        Duration::from_secs(60),
    )?);
    s.http2_keepalive_timeout = duration(
        ("--http2-keepalive-timeout", &args.http2_keepalive_timeout),
        None,
        env,
        d.http2_keepalive_timeout,
    )?;
    if s.http2_keepalive_timeout.is_zero() {
        return Err(err("--http2-keepalive-timeout", "must be more than 0"));
    }
    s.grpc_max_connection_age = never_if_zero(duration(
        ("--grpc-max-connection-age", &args.grpc_max_connection_age),
        Some("GRPC_MAX_CONNECTION_AGE"),
        env,
        Duration::from_secs(24 * 3600),
    )?);
    s.grpc_max_connection_age_grace = duration(
        (
            "--grpc-max-connection-age-grace",
            &args.grpc_max_connection_age_grace,
        ),
        Some("GRPC_MAX_CONNECTION_AGE_GRACE"),
        env,
        d.grpc_max_connection_age_grace,
    )?;
    Ok(s)
}

fn resolve_tls(
    args: &ListenArgs,
    env: Env<'_>,
    notes: &mut Vec<String>,
) -> Result<Option<GrpcTlsSettings>, SettingsError> {
    let flag_files = args.grpc_tls_cert.is_some() || args.grpc_tls_key.is_some();
    let enabled = match args.grpc_tls {
        Some(b) => b,
        None if flag_files => true,
        None => bool_var(env, "GRPC_SERVER_USE_TLS")?.unwrap_or(false),
    };
    let path = |flag: &Option<PathBuf>, name: &str| {
        flag.clone().or_else(|| var(env, name).map(PathBuf::from))
    };
    let cert = path(&args.grpc_tls_cert, "GRPC_SERVER_TLS_CERT");
    let key = path(&args.grpc_tls_key, "GRPC_SERVER_TLS_KEY");
    let client_ca = path(&args.grpc_tls_client_ca, "GRPC_CLIENT_TLS_CACERT");
    let client_san = args
        .grpc_tls_client_san
        .clone()
        .or_else(|| var(env, "GRPC_CLIENT_TLS_SAN"))
        .map(|s| s.trim().to_string());
    if !enabled {
        if args.grpc_tls_client_ca.is_some() || args.grpc_tls_client_san.is_some() {
            return Err(err(
                "--grpc-tls-client-ca",
                "mutual TLS needs TLS: add --grpc-tls-cert and --grpc-tls-key",
            ));
        }
        // Their semantics: the files are ignored unless GRPC_SERVER_USE_TLS is true.
        for name in [
            "GRPC_SERVER_TLS_CERT",
            "GRPC_SERVER_TLS_KEY",
            "GRPC_CLIENT_TLS_CACERT",
            "GRPC_CLIENT_TLS_SAN",
        ] {
            if var(env, name).is_some() {
                notes.push(format!(
                    "{name} ignored: GRPC_SERVER_USE_TLS is not true, gRPC is plaintext"
                ));
            }
        }
        return Ok(None);
    }
    let (Some(cert), Some(key)) = (cert, key) else {
        return Err(err(
            "--grpc-tls-cert",
            "gRPC TLS needs a certificate and a key (--grpc-tls-cert and --grpc-tls-key, \
             or GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY)",
        ));
    };
    if client_san.is_some() && client_ca.is_none() {
        return Err(err(
            "--grpc-tls-client-san",
            "a required client SAN needs client certificates: set --grpc-tls-client-ca \
             (GRPC_CLIENT_TLS_CACERT)",
        ));
    }
    Ok(Some(GrpcTlsSettings {
        cert,
        key,
        client_ca,
        client_san,
    }))
}

#[cfg(test)]
mod tests;
