//! gRPC channels over a unix socket (`--grpc-uds`), plain or TLS: the connector tonic's
//! `Endpoint` dials through, as Envoy's `pipe` address would.

use std::path::PathBuf;
use std::sync::Arc;

use tonic::transport::Channel;

/// A tonic channel over the unix socket at `path` (the URI is only a placeholder).
pub async fn unix_channel(path: PathBuf) -> Result<Channel, tonic::transport::Error> {
    tonic::transport::Endpoint::from_static("http://unix.invalid")
        .connect_with_connector(UnixConnector { path, tls: None })
        .await
}

/// The same over TLS, trusting `files`' CA, for a server certificate valid for `name`.
pub async fn unix_tls_channel(
    path: PathBuf,
    files: &sluice::tls::ClientTlsFiles,
    name: &str,
) -> Result<Channel, String> {
    sluice::tls::install_crypto_provider();
    let config = sluice::tls::client_config(files, &[b"h2"]).map_err(|e| e.to_string())?;
    let name =
        rustls::pki_types::ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
    let tls = Some((tokio_rustls::TlsConnector::from(Arc::new(config)), name));
    tonic::transport::Endpoint::from_static("http://unix.invalid")
        .connect_with_connector(UnixConnector { path, tls })
        .await
        .map_err(|e| sluice::tls::error_chain(&e))
}

#[derive(Clone)]
struct UnixConnector {
    path: PathBuf,
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
}

/// Plain or TLS over the socket.
type UnixIo = hyper_util::rt::TokioIo<Box<dyn UnixStreamish>>;

trait UnixStreamish: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> UnixStreamish for T {}

impl tower_service::Service<hyper::Uri> for UnixConnector {
    type Response = UnixIo;
    type Error = std::io::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<UnixIo>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: hyper::Uri) -> Self::Future {
        let (path, tls) = (self.path.clone(), self.tls.clone());
        Box::pin(async move {
            let unix = tokio::net::UnixStream::connect(path).await?;
            let io: Box<dyn UnixStreamish> = match tls {
                None => Box::new(unix),
                Some((connector, name)) => Box::new(connector.connect(name, unix).await?),
            };
            Ok(hyper_util::rt::TokioIo::new(io))
        })
    }
}
