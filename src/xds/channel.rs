//! The gRPC channel to the management server: the URL forms their setting accepts, TLS with
//! the configured files, HTTP/2 keep-alive so a silent server is noticed.
//!
//! TLS files are read at every connection attempt, so certificates rotated on disk (by
//! cert-manager, or Envoy Gateway's certgen) are used from the next reconnect. PEM parsing
//! is tonic's (`ClientTlsConfig`); `crate::tls` gains its own PEM loading for the gRPC
//! server on another branch, and the two can share it once both are merged.

use std::path::Path;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::XdsError;
use crate::settings::{XdsSettings, XdsTls};

/// How long one connection attempt may take before it counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 pings on an idle stream, and how long a ping may go unanswered: a management
/// server that vanished without closing the connection is noticed within ~40 s.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) struct Connector {
    uri: String,
    tls: Option<XdsTls>,
}

impl Connector {
    /// Check the URL and, when TLS is on, that its files read and parse, so a mistake
    /// stops startup instead of looping in the reconnect backoff.
    pub fn new(settings: &XdsSettings) -> Result<Connector, XdsError> {
        let c = Connector {
            uri: uri(&settings.server_url, settings.tls.is_some())?,
            tls: settings.tls.clone(),
        };
        c.endpoint()?;
        Ok(c)
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    pub async fn connect(&self) -> Result<Channel, XdsError> {
        self.endpoint()?
            .connect()
            .await
            .map_err(|e| XdsError::Connect(format!("{}: {}", self.uri, error_chain(&e))))
    }

    fn endpoint(&self) -> Result<Endpoint, XdsError> {
        let mut e = Endpoint::from_shared(self.uri.clone())
            .map_err(|err| XdsError::Url(format!("{}: {err}", self.uri)))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        if let Some(t) = &self.tls {
            e = e
                .tls_config(tls_config(t)?)
                .map_err(|err| XdsError::Tls(error_chain(&err)))?;
        }
        Ok(e)
    }
}

/// `CONFIG_GRPC_XDS_SERVER_URL` → a URI tonic dials. Their value is a gRPC target:
/// `host:port`, or `dns:///host:port`; a scheme is accepted too.
fn uri(url: &str, tls: bool) -> Result<String, XdsError> {
    let target = url
        .strip_prefix("dns:///")
        .or_else(|| url.strip_prefix("dns:"))
        .unwrap_or(url);
    let host_port = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))
        .unwrap_or(target);
    if host_port.is_empty() || host_port.contains('/') && !host_port.ends_with('/') {
        return Err(XdsError::Url(format!(
            "'{url}' is not host:port (CONFIG_GRPC_XDS_SERVER_URL)"
        )));
    }
    let scheme = if tls { "https" } else { "http" };
    Ok(format!("{scheme}://{}", host_port.trim_end_matches('/')))
}

fn tls_config(t: &XdsTls) -> Result<ClientTlsConfig, XdsError> {
    let mut c = ClientTlsConfig::new();
    c = match &t.ca_cert {
        Some(ca) => c.ca_certificate(Certificate::from_pem(read(ca)?)),
        // Their default: the system's roots; ours are the public web roots, compiled in
        // (the runtime image carries no CA bundle of its own worth trusting more).
        None => c.with_webpki_roots(),
    };
    if let (Some(cert), Some(key)) = (&t.client_cert, &t.client_key) {
        c = c.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    if let Some(name) = &t.server_name {
        c = c.domain_name(name.clone());
    }
    Ok(c)
}

fn read(path: &Path) -> Result<Vec<u8>, XdsError> {
    std::fs::read(path).map_err(|e| XdsError::Tls(format!("cannot read {}: {e}", path.display())))
}

/// An error with its sources: tonic's transport errors say little at the top level.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn their_url_forms() {
        assert_eq!(
            uri("localhost:18000", false).unwrap(),
            "http://localhost:18000"
        );
        assert_eq!(
            uri("envoy-gateway:18001", true).unwrap(),
            "https://envoy-gateway:18001"
        );
        assert_eq!(
            uri("dns:///eg.svc:18001", true).unwrap(),
            "https://eg.svc:18001"
        );
        assert_eq!(uri("http://x:1", true).unwrap(), "https://x:1");
        assert!(uri("", false).is_err());
        assert!(uri("x:1/path", false).is_err());
    }
}
