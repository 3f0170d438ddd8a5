//! Listener settings: gRPC TLS and mutual TLS, the debug listener, and connection hygiene
//! (timeouts, caps, HTTP/2 keepalive, maximum connection age), as flags with `SLUICE_*`
//! variables and as envoyproxy/ratelimit's `GRPC_SERVER_*`, `GRPC_CLIENT_TLS_*`,
//! `GRPC_MAX_CONNECTION_AGE*`, `GRPC_MAX_CONCURRENT_STREAMS` and `DEBUG_HOST`/`DEBUG_PORT`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::decl::{RefVar, Setting};
use super::declare::settings;
use super::env::{Env, host_port, num_var};
use super::parse::{SettingsError, err};
use super::resolver::{Given, Group, Resolver, Source};
use super::values::{
    duration, duration_or_never, positive, positive_duration, some_address, some_path, some_trimmed,
};

const GRPC_TLS: &[(&str, &str)] = &[
    ("GRPC_SERVER_USE_TLS", "true"),
    ("GRPC_SERVER_TLS_CERT", "/certs/tls.crt"),
    ("GRPC_SERVER_TLS_KEY", "/certs/tls.key"),
];
const GRPC_TLS_FILES: &[(&str, &str)] = &[
    ("GRPC_SERVER_TLS_CERT", "/certs/tls.crt"),
    ("GRPC_SERVER_TLS_KEY", "/certs/tls.key"),
];
const GRPC_MTLS: &[(&str, &str)] = &[
    ("GRPC_SERVER_USE_TLS", "true"),
    ("GRPC_SERVER_TLS_CERT", "/certs/tls.crt"),
    ("GRPC_SERVER_TLS_KEY", "/certs/tls.key"),
    ("GRPC_CLIENT_TLS_CACERT", "/certs/ca.crt"),
];

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

settings! {
    /// Listener settings, resolved.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ListenSettings {
        /// `None`: plaintext gRPC.
        pub grpc_tls: Option<GrpcTlsSettings> = with(resolve_tls, GrpcTlsInput),
        /// Send GOAWAY to a gRPC connection after this age, ±10% (0: never), so clients
        /// reconnect and spread over new instances
        pub grpc_max_connection_age: Option<Duration> = setting(
            Setting::value("grpc-max-connection-age", "DURATION", duration_or_never)
                .default("24h")
                .same(RefVar::new("GRPC_MAX_CONNECTION_AGE", "1h").does(
                    "GOAWAY to a gRPC connection after this age ±10% \
                     (`--grpc-max-connection-age`), 24h; `0`: never",
                ))
        ),
        /// After that GOAWAY, close the connection this long after, requests in flight or not
        pub grpc_max_connection_age_grace: Duration = setting(
            Setting::value("grpc-max-connection-age-grace", "DURATION", duration)
                .default("1h")
                .same(RefVar::new("GRPC_MAX_CONNECTION_AGE_GRACE", "5m").does(
                    "after that GOAWAY, close the connection this much later, requests in \
                     flight or not (`--grpc-max-connection-age-grace`), 1h",
                ))
        ),
        // Why 16: under overload a call the server reads and then refuses costs it about 0.8
        // of one it answers (the transport is most of a call's CPU), so refusing after
        // reading cannot keep goodput; a call never read costs nothing, its deadline or the
        // client's circuit breakers end it. 16 keeps a busy Envoy worker (10k calls/s at 1
        // ms: 10 in flight) on one connection, and Redis batches full, while one connection
        // can make the server read at most half a millisecond of work ahead.
        /// Concurrent requests (HTTP/2 streams) per gRPC connection, advertised to clients as
        /// `SETTINGS_MAX_CONCURRENT_STREAMS`; the calls past it wait, unread, at the client:
        /// raise it and an overloaded instance reads, and pays for, calls it can only refuse
        pub grpc_max_concurrent_streams: u32 = setting(
            Setting::value("grpc-max-concurrent-streams", "N", positive)
                .default("16")
                .map(ref_stream_cap)
                .shown_vars("`GRPC_MAX_CONCURRENT_STREAMS` (`0`: no cap)")
                .see("[Overload](../how-to/overload-and-tuning.md)")
                .ref_var(RefVar::new("GRPC_MAX_CONCURRENT_STREAMS", "32").does(
                    "requests in flight per gRPC connection (`--grpc-max-concurrent-streams`); \
                     `0`: no cap; unset: 16 (their settings do not read it: their pull \
                     request #1189, which proposed it, was closed)",
                ))
        ),
        /// With `--grpc-uds`: the socket file's permissions, octal (`660`: owner and group
        /// may connect); unset, the process's umask decides, as theirs
        pub grpc_uds_mode: Option<u32> = setting(
            Setting::value("grpc-uds-mode", "MODE", file_mode).shown_default("from the umask")
        ),
        /// Debug listener: /rlconfig and an index, as envoyproxy/ratelimit's debug port
        pub debug_addr: Option<SocketAddr> = setting(
            Setting::value("debug-addr", "ADDR", some_address)
                .shown_default("off")
                .map(|env| Ok(host_port(env, "DEBUG_HOST", "DEBUG_PORT", 6070)?.map(Some)))
                .shown_vars("`DEBUG_HOST`, `DEBUG_PORT` (`0.0.0.0`, 6070)")
                .ref_var(RefVar::new("DEBUG_HOST", "127.0.0.1").does(
                    "host of the debug listener (`--debug-addr`: `/rlconfig`); off unless it or \
                     `DEBUG_PORT` is set (theirs always listens)",
                ))
                .ref_var(RefVar::new("DEBUG_PORT", "6071").does(
                    "port of the debug listener (`--debug-addr`), 6070; off unless it or \
                     `DEBUG_HOST` is set",
                ))
        ),
        /// Most open connections per listener; accepting pauses at the cap
        pub max_connections: usize = setting(
            Setting::value("max-connections", "N", positive)
                .default("10000")
                .shown_default("10 000")
        ),
        /// A new connection must complete its TLS handshake and send the HTTP/2 preface, and
        /// an HTTP/1 client each request's headers, within this
        pub header_timeout: Duration = setting(
            Setting::value("header-timeout", "DURATION", positive_duration).default("10s")
        ),
        /// Close connections with no request in flight for this long (0: never)
        pub idle_timeout: Option<Duration> = setting(
            Setting::value("idle-timeout", "DURATION", duration_or_never).default("5m")
        ),
        /// HTTP/2 keepalive: PING a connection this often (0: never)
        pub http2_keepalive_interval: Option<Duration> = setting(
            Setting::value("http2-keepalive-interval", "DURATION", duration_or_never)
                .default("60s")
        ),
        /// HTTP/2 keepalive: close a connection whose PING is not answered within this
        pub http2_keepalive_timeout: Duration = setting(
            Setting::value("http2-keepalive-timeout", "DURATION", positive_duration)
                .default("20s")
        ),
    }
}

settings! {
    /// The gRPC TLS flags and the reference's variables, before deciding whether TLS is on.
    struct GrpcTlsInput {
        /// Serve gRPC over TLS (1.2 and 1.3, ALPN `h2`); on when --grpc-tls-cert is given
        tls: Given<bool> = setting(
            Setting::switch("grpc-tls")
                .shown_default("false; true when `--grpc-tls-cert` is given")
                .same(RefVar::new("GRPC_SERVER_USE_TLS", "true").with(GRPC_TLS_FILES).does(
                    "gRPC over TLS (`--grpc-tls`); `GRPC_SERVER_TLS_*` and `GRPC_CLIENT_TLS_*` \
                     count only when it is true, as theirs",
                ))
        ),
        /// gRPC TLS certificate chain, PEM, leaf first; reloaded when it changes
        cert: Given<Option<PathBuf>> = setting(
            Setting::value("grpc-tls-cert", "PATH", some_path)
                .same(RefVar::new("GRPC_SERVER_TLS_CERT", "/certs/other.crt").with(GRPC_TLS).does(
                    "gRPC certificate chain, PEM (`--grpc-tls-cert`), reloaded when it changes",
                ))
        ),
        /// gRPC TLS private key, PEM (PKCS#8, PKCS#1 or SEC1); reloaded when it changes
        key: Given<Option<PathBuf>> = setting(
            Setting::value("grpc-tls-key", "PATH", some_path)
                .same(RefVar::new("GRPC_SERVER_TLS_KEY", "/certs/other.key").with(GRPC_TLS).does(
                    "private key of the gRPC certificate, PEM (`--grpc-tls-key`), reloaded when \
                     it changes",
                ))
        ),
        /// Mutual TLS: clients must present a certificate that chains to these CA
        /// certificates
        client_ca: Given<Option<PathBuf>> = setting(
            Setting::value("grpc-tls-client-ca", "PATH", some_path)
                .shown_default("none")
                .same(RefVar::new("GRPC_CLIENT_TLS_CACERT", "/certs/ca.crt").with(GRPC_TLS).does(
                    "mutual TLS: client certificates must chain to this CA \
                     (`--grpc-tls-client-ca`), reloaded too",
                ))
        ),
        /// Name (DNS or IP) every client certificate must be valid for (wildcards allowed in
        /// the certificate)
        client_san: Given<Option<String>> = setting(
            Setting::value("grpc-tls-client-san", "NAME", some_trimmed)
                .shown_default("none")
                .same(RefVar::new("GRPC_CLIENT_TLS_SAN", "envoy.example").with(GRPC_MTLS).does(
                    "name every client certificate must be valid for (`--grpc-tls-client-san`)",
                ))
        ),
    }
}

/// A file mode in octal (`660`, `0660`), permission bits only.
fn file_mode(s: &str) -> Result<Option<u32>, String> {
    let t = s.trim();
    match u32::from_str_radix(t, 8) {
        Ok(m) if m <= 0o777 => Ok(Some(m)),
        _ => Err(format!(
            "'{t}' is not an octal file mode of permission bits (e.g. 660)"
        )),
    }
}

/// As their closed pull request #1189 had it: 0 leaves grpc-go's default, no cap.
fn ref_stream_cap(env: Env<'_>) -> Result<Option<u32>, SettingsError> {
    Ok(num_var::<u32>(env, "GRPC_MAX_CONCURRENT_STREAMS")?
        .map(|n| if n == 0 { u32::MAX } else { n }))
}

/// TLS is on when asked for (flag or variable), or when certificate flags are given; their
/// files count only with their `GRPC_SERVER_USE_TLS=true` (or sluice's switch).
fn resolve_tls(r: &Resolver<'_>) -> Result<Option<GrpcTlsSettings>, SettingsError> {
    let i = GrpcTlsInput::from_resolver(r)?;
    let flag_files = i.cert.by_sluice() || i.key.by_sluice();
    let enabled = match i.tls.source {
        Source::Flag | Source::Var => i.tls.value,
        _ if flag_files => true,
        _ => i.tls.value,
    };
    if !enabled {
        if i.client_ca.by_sluice() || i.client_san.by_sluice() {
            return Err(err(
                "--grpc-tls-client-ca",
                "mutual TLS needs TLS: add --grpc-tls-cert and --grpc-tls-key",
            ));
        }
        // The reference's semantics: the files are ignored unless GRPC_SERVER_USE_TLS is true.
        let ref_vars = [
            (i.cert.source, &i.cert.name),
            (i.key.source, &i.key.name),
            (i.client_ca.source, &i.client_ca.name),
            (i.client_san.source, &i.client_san.name),
        ];
        for (_, name) in ref_vars.iter().filter(|(s, _)| *s == Source::RefVar) {
            r.note(format!(
                "{name} ignored: GRPC_SERVER_USE_TLS is not true, gRPC is plaintext"
            ));
        }
        return Ok(None);
    }
    let (Some(cert), Some(key)) = (i.cert.value, i.key.value) else {
        return Err(err(
            "--grpc-tls-cert",
            "gRPC TLS needs a certificate and a key (--grpc-tls-cert and --grpc-tls-key, \
             or GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY)",
        ));
    };
    if i.client_san.value.is_some() && i.client_ca.value.is_none() {
        return Err(err(
            "--grpc-tls-client-san",
            "a required client SAN needs client certificates: set --grpc-tls-client-ca \
             (GRPC_CLIENT_TLS_CACERT)",
        ));
    }
    Ok(Some(GrpcTlsSettings {
        cert,
        key,
        client_ca: i.client_ca.value,
        client_san: i.client_san.value,
    }))
}

#[cfg(test)]
mod tests;
