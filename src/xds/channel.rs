//! The gRPC channel to the management server: the URL forms their setting accepts, TLS with
//! the configured files, HTTP/2 keep-alive so a silent server is noticed.
//!
//! TLS is `tls::Connector`, as for `sluice query`: the same PEM loading (regular files of
//! bounded size, errors naming the file), the CA file or the public web roots, the client
//! certificate, and the name verified (`CONFIG_GRPC_XDS_SERVER_TLS_SAN`, else the URL's
//! host). Files are read at every connection attempt, so certificates rotated on disk (by
//! cert-manager, or Envoy Gateway's certgen) are used from the next reconnect.

use std::time::Duration;

use tonic::transport::{Channel, Endpoint, Uri};

use super::XdsError;
use crate::settings::XdsSettings;
use crate::tls::{self, ClientTlsFiles};

/// How long one connection attempt (TCP and the TLS handshake) may take before it counts
/// as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 pings on an idle stream, and how long a ping may go unanswered: a management
/// server that vanished without closing the connection is noticed within ~40 s.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) struct Connector {
    /// The server as logs name it (`https://` with TLS).
    uri: String,
    /// What tonic dials: always `http://`, the TLS being `tls::Connector`'s, below tonic.
    dial: String,
    tls: Option<Tls>,
}

struct Tls {
    files: ClientTlsFiles,
    /// The name the server's certificate must be valid for (and the SNI).
    server_name: String,
}

impl Connector {
    /// Check the URL and, when TLS is on, that its files read and parse, so a mistake
    /// stops startup instead of looping in the reconnect backoff.
    pub fn new(settings: &XdsSettings) -> Result<Connector, XdsError> {
        let uri = uri(&settings.server_url, settings.tls.is_some())?;
        let authority = uri.split_once("://").map_or(uri.as_str(), |(_, a)| a);
        let dial = format!("http://{authority}");
        let tls = settings.tls.as_ref().map(|t| Tls {
            files: ClientTlsFiles {
                ca: t.ca_cert.clone(),
                cert: t.client_cert.clone(),
                key: t.client_key.clone(),
            },
            server_name: t.server_name.clone().unwrap_or_else(|| host(&dial)),
        });
        let c = Connector { uri, dial, tls };
        c.endpoint()?;
        if let Some(t) = &c.tls {
            tls_connector(t)?;
        }
        Ok(c)
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    pub async fn connect(&self) -> Result<Channel, XdsError> {
        let endpoint = self.endpoint()?;
        let channel = match &self.tls {
            None => endpoint.connect().await,
            Some(t) => endpoint.connect_with_connector(tls_connector(t)?).await,
        };
        channel.map_err(|e| XdsError::Connect(format!("{}: {}", self.uri, tls::error_chain(&e))))
    }

    fn endpoint(&self) -> Result<Endpoint, XdsError> {
        Ok(Endpoint::from_shared(self.dial.clone())
            .map_err(|err| XdsError::Url(format!("{}: {err}", self.uri)))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true))
    }
}

/// Reads the files now (see the module documentation).
fn tls_connector(t: &Tls) -> Result<tls::Connector, XdsError> {
    tls::Connector::new(&t.files, &t.server_name).map_err(|e| XdsError::Tls(e.to_string()))
}

/// The host of `http://host:port`, without IPv6 brackets.
fn host(uri: &str) -> String {
    uri.parse::<Uri>()
        .ok()
        .and_then(|u| u.host().map(|h| h.trim_matches(['[', ']']).to_string()))
        .unwrap_or_default()
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

    fn connector(url: &str, tls: Option<crate::settings::XdsTls>) -> Connector {
        Connector::new(&XdsSettings {
            server_url: url.into(),
            tls,
            ..XdsSettings::default()
        })
        .expect("connector")
    }

    #[test]
    fn tls_is_dialled_through_our_connector_under_the_san_or_the_host() {
        let c = connector("dns:///eg.svc:18001", Some(Default::default()));
        assert_eq!(c.uri(), "https://eg.svc:18001");
        assert_eq!(c.dial, "http://eg.svc:18001", "tonic dials plaintext");
        let t = c.tls.as_ref().expect("tls");
        assert_eq!(t.server_name, "eg.svc");
        assert_eq!(t.files, ClientTlsFiles::default(), "the web roots");
        let c = connector("[::1]:18001", Some(Default::default()));
        assert_eq!(c.tls.as_ref().expect("tls").server_name, "::1");
        let san = crate::settings::XdsTls {
            server_name: Some("xds.test".into()),
            ..Default::default()
        };
        let c = connector("127.0.0.1:18001", Some(san));
        assert_eq!(c.tls.as_ref().expect("tls").server_name, "xds.test");
        let c = connector("localhost:18000", None);
        assert_eq!(
            (c.uri(), c.dial.as_str()),
            ("http://localhost:18000", "http://localhost:18000")
        );
        assert!(c.tls.is_none());
    }
}
