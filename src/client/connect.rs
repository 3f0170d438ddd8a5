//! A gRPC channel to a server: plaintext HTTP/2, or TLS (optionally with a client
//! certificate) through `tls::Connector`, so no TLS feature of tonic is needed.

use std::time::Duration;

use tonic::transport::{Channel, Endpoint, Uri};

use super::ClientError;
use crate::tls::{self, ClientTlsFiles};

/// Where to connect and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `host:port` (IPv6 hosts in brackets).
    pub authority: String,
    pub tls: Option<TlsTarget>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsTarget {
    pub files: ClientTlsFiles,
    /// Name the server's certificate must be valid for; also sent as SNI.
    pub server_name: String,
}

impl Target {
    /// `host:port`, `http://host:port` or `https://host:port` (the last implies TLS with the
    /// default roots unless `tls` is given).
    pub fn parse(addr: &str, tls: Option<TlsTarget>) -> Result<Target, ClientError> {
        let (authority, https) = if let Some(rest) = addr.strip_prefix("https://") {
            (rest, true)
        } else {
            (addr.strip_prefix("http://").unwrap_or(addr), false)
        };
        let authority = authority.trim_end_matches('/');
        let uri: Uri = format!("http://{authority}")
            .parse()
            .map_err(|_| ClientError::Address(format!("'{addr}' is not host:port")))?;
        let (Some(host), Some(_)) = (uri.host(), uri.port_u16()) else {
            return Err(ClientError::Address(format!(
                "'{addr}' needs a host and a port, e.g. localhost:8081"
            )));
        };
        let tls = match (tls, https) {
            (Some(t), _) => Some(t),
            (None, true) => Some(TlsTarget {
                files: ClientTlsFiles::default(),
                server_name: host.trim_matches(['[', ']']).to_string(),
            }),
            (None, false) => None,
        };
        Ok(Target {
            authority: authority.to_string(),
            tls,
        })
    }

    /// The host part, without IPv6 brackets (the default TLS server name).
    pub fn host(&self) -> String {
        let uri: Option<Uri> = format!("http://{}", self.authority).parse().ok();
        uri.and_then(|u| u.host().map(|h| h.trim_matches(['[', ']']).to_string()))
            .unwrap_or_default()
    }
}

/// Connect within `timeout` (TCP and, with TLS, the handshake); each call on the channel
/// also gets `timeout`.
pub async fn connect(target: &Target, timeout: Duration) -> Result<Channel, ClientError> {
    // Always `http://`: TLS, when asked, is done by `tls::Connector` below tonic.
    let endpoint = Endpoint::from_shared(format!("http://{}", target.authority))
        .map_err(|e| ClientError::Address(e.to_string()))?
        .connect_timeout(timeout)
        .timeout(timeout)
        .tcp_nodelay(true);
    let channel = match &target.tls {
        None => endpoint.connect().await,
        Some(t) => {
            let connector = tls::Connector::new(&t.files, &t.server_name)?;
            endpoint.connect_with_connector(connector).await
        }
    };
    channel.map_err(|e| ClientError::Connect {
        addr: target.authority.clone(),
        message: tls::error_chain(&e),
    })
}
