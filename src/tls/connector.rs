//! The client side of a gRPC connection over TLS: a connector tonic's `Endpoint` dials
//! through (`connect_with_connector`): TCP, then a rustls handshake offering `h2`, verifying
//! the server's certificate under a configured name (also sent as SNI).
//!
//! Every gRPC client sluice has (`sluice query`, the xDS client) goes through it, so one
//! path reads the PEM files (`client_config`) and tonic needs no TLS feature of its own. The
//! endpoint is dialled as `http://`: the TLS is ours, below tonic.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::{ClientTlsFiles, TlsError, client_config};

/// TCP, then TLS under one name, for each connection the channel opens.
#[derive(Clone)]
pub struct Connector {
    tls: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

impl Connector {
    /// Reads `files` now: build one per connection attempt to follow files rotated on disk.
    /// `server_name` is what the server's certificate must be valid for (a DNS name or an
    /// IP address).
    pub fn new(files: &ClientTlsFiles, server_name: &str) -> Result<Connector, TlsError> {
        let name = ServerName::try_from(server_name.to_owned()).map_err(|_| {
            TlsError::Config(format!("'{server_name}' is not a DNS name or IP address"))
        })?;
        let config = client_config(files, &[b"h2"])?;
        Ok(Connector {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            name,
        })
    }
}

type Io = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;

impl tower_service::Service<Uri> for Connector {
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

/// A failed connection's error with its causes, joined: tonic's transport error says little
/// at the top ("transport error"); what failed (refused, a certificate not trusted) is in
/// its sources.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = inner.source();
    }
    out
}
