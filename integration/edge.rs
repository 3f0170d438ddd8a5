//! The listeners and the transport against the real binary: gRPC TLS and mutual TLS with
//! certificates the tests generate (and rotate), connection hygiene (timeouts, caps, drain,
//! file-descriptor exhaustion), the maximum connection age, the debug listener, and
//! `sluice query`.

use std::path::Path;
use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use sluice::client::{Target, TlsTarget};
use sluice::tls::ClientTlsFiles;
use tokio::net::TcpStream;

use crate::support::sluice::*;

mod age;
mod authority;
mod debug;
mod fds;
mod hygiene;
mod query;
mod tls;

const RULES: &str = r#"
domain: t
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: one
    rate_limit: {unit: hour, requests_per_unit: 1}
"#;

const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

fn ask() -> RateLimitRequest {
    req("t", vec![desc(&[("k", "v")])])
}

/// The client files for a TLS call: the server's CA, and a client certificate or not.
fn client_files(ca: &Path, cert: Option<(&Path, &Path)>) -> ClientTlsFiles {
    ClientTlsFiles {
        ca: Some(ca.to_path_buf()),
        cert: cert.map(|c| c.0.to_path_buf()),
        key: cert.map(|c| c.1.to_path_buf()),
    }
}

/// One ShouldRateLimit call over TLS (server name `localhost`); any failure as text.
async fn tls_call(s: &Sluice, files: ClientTlsFiles) -> Result<(), String> {
    let target = Target {
        authority: s.grpc.to_string(),
        tls: Some(TlsTarget {
            files,
            server_name: "localhost".into(),
        }),
    };
    let channel = sluice::client::connect(&target, std::time::Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    RateLimitServiceClient::new(channel)
        .should_rate_limit(ask())
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A raw TLS connection to the gRPC port (ALPN h2), to see the certificate it presents.
async fn tls_connect(
    s: &Sluice,
    files: &ClientTlsFiles,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let config = sluice::tls::client_config(files, &[b"h2"]).expect("client config");
    let tcp = TcpStream::connect(s.grpc).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

fn presented(s: &tokio_rustls::client::TlsStream<TcpStream>) -> Vec<u8> {
    s.get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .unwrap_or_default()
}
