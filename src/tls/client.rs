//! The client side: a rustls `ClientConfig` trusting a CA file (or the webpki roots), with an
//! optional client certificate for mutual TLS.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls::RootCertStore;

use super::{TlsError, load_certs, load_private_key, load_roots, provider};

/// Files a TLS client is built from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTlsFiles {
    /// CA certificates the server's chain must end in; `None`: the webpki (Mozilla) roots.
    pub ca: Option<PathBuf>,
    /// Client certificate chain and key, for mutual TLS.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// A client config offering `alpn` (e.g. `h2` for gRPC).
pub fn client_config(files: &ClientTlsFiles, alpn: &[&[u8]]) -> Result<ClientConfig, TlsError> {
    let roots = match &files.ca {
        Some(ca) => load_roots(ca)?,
        None => RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        },
    };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(Arc::new(roots));
    let mut config = match (&files.cert, &files.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(load_certs(cert)?, load_private_key(key)?)
            .map_err(|e| super::file_err(key, format!("does not fit {}: {e}", cert.display())))?,
        _ => {
            return Err(TlsError::Config(
                "a client certificate needs both a certificate and a key file".into(),
            ));
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}
