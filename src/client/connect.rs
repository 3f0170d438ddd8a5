//! A gRPC channel to a server: plaintext HTTP/2, or TLS (optionally with a client
//! certificate) through a rustls connector, so no TLS feature of tonic is needed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint, Uri};

use super::ClientError;
use crate::tls::{ClientTlsFiles, client_config};

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

/// Connect within `timeout`; each call on the channel also gets `timeout`.
pub async fn connect(target: &Target, timeout: Duration) -> Result<Channel, ClientError> {
    // Always `http://`: TLS, when asked, is done by our own connector below. An `https://`
    // endpoint would make tonic's own TLS layer (compiled in for the xDS client) demand a
    // `ClientTlsConfig` and refuse the connection.
    let endpoint = Endpoint::from_shared(format!("http://{}", target.authority))
        .map_err(|e| ClientError::Address(e.to_string()))?
        .connect_timeout(timeout)
        .timeout(timeout)
        .tcp_nodelay(true);
    let channel = match &target.tls {
        None => endpoint.connect().await,
        Some(t) => {
            let config = client_config(&t.files, &[b"h2"])?;
            let name = ServerName::try_from(t.server_name.clone()).map_err(|_| {
                ClientError::Address(format!(
                    "'{}' is not a DNS name or IP address",
                    t.server_name
                ))
            })?;
            endpoint
                .connect_with_connector(TlsConnector {
                    tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
                    name,
                })
                .await
        }
    };
    channel.map_err(|e| ClientError::Connect {
        addr: target.authority.clone(),
        message: super::chain(&e),
    })
}

/// TCP, then TLS with the configured name, for each connection tonic opens.
#[derive(Clone)]
struct TlsConnector {
    tls: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

type Io = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;

impl tower_service::Service<Uri> for TlsConnector {
    type Response = Io;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<Io>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tls = self.tls.clone();
        let name = self.name.clone();
        Box::pin(async move {
            let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
            let port = uri.port_u16().unwrap_or(443);
            let tcp = TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            Ok(TokioIo::new(tls.connect(name, tcp).await?))
        })
    }
}
