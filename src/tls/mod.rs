//! TLS plumbing shared by every TLS connection sluice makes or accepts (Redis, gRPC, the
//! `query` client, the xDS client): the process-wide crypto provider, PEM loading, the
//! reloadable server config (`server`), client configs (`client`) and the connector gRPC
//! clients dial through (`connector`).
//!
//! rustls 0.23 needs a process-wide `CryptoProvider` when more than one could be compiled
//! in or none is selected by features; without it, the first TLS handshake panics inside
//! the connection task. [`install_crypto_provider`] selects ring once, before anything
//! connects; the configs built here name ring explicitly, so they never depend on it.
//!
//! The loaders read only regular files (a FIFO or a device at a certificate path would
//! block or never end) of bounded size, and every error names the file, so a bad path is a
//! startup error rather than a handshake failure later. [`read_pem`] keeps the file's bytes
//! (the Redis client takes PEM) after checking they parse.

mod client;
mod connector;
mod server;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub use client::{ClientTlsFiles, client_config};
pub use connector::{Connector, error_chain};
pub use server::{ServerTls, ServerTlsFiles};

/// Largest PEM file read (a certificate bundle of a few hundred CAs is well under this).
const MAX_PEM_BYTES: u64 = 4 << 20;

/// A TLS setup error; names the file when one is at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    #[error("{0}")]
    Config(String),
}

fn file_err(path: &Path, message: impl Into<String>) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Install ring as the process-wide rustls provider. Idempotent: a provider installed
/// earlier (by this function or by an embedding program) is kept.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The provider every config built here uses.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What a PEM file must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PemKind {
    /// One or more certificates (a chain, or a CA bundle).
    Certificates,
    /// One private key (PKCS#8, PKCS#1 or SEC1).
    PrivateKey,
}

/// The bytes of a PEM file, once they are known to hold `kind`.
pub fn read_pem(path: &Path, kind: PemKind) -> Result<Vec<u8>, TlsError> {
    let pem = read_file(path)?;
    match kind {
        PemKind::Certificates => {
            parse_certs(path, &pem)?;
        }
        PemKind::PrivateKey => {
            parse_key(path, &pem)?;
        }
    }
    Ok(pem)
}

/// Read a whole PEM file: a regular file (symlinks followed) of bounded size.
fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    let meta = std::fs::metadata(path).map_err(|e| file_err(path, e.to_string()))?;
    if !meta.is_file() {
        return Err(file_err(path, "not a regular file"));
    }
    if meta.len() > MAX_PEM_BYTES {
        return Err(file_err(
            path,
            format!("larger than {MAX_PEM_BYTES} bytes; not a PEM file"),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_PEM_BYTES).read_to_end(&mut bytes))
        .map_err(|e| file_err(path, e.to_string()))?;
    Ok(bytes)
}

fn parse_certs(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(path, format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(file_err(path, "no CERTIFICATE block found"));
    }
    Ok(certs)
}

fn parse_key(path: &Path, pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => file_err(path, "no PRIVATE KEY block found"),
        e => file_err(path, format!("bad PEM: {e}")),
    })
}

/// Every certificate of a PEM file (a chain: leaf first), at least one.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    parse_certs(path, &read_file(path)?)
}

/// The first private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    parse_key(path, &read_file(path)?)
}

/// Trust anchors from a PEM file of CA certificates, at least one.
pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| file_err(path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

#[cfg(test)]
mod tests;
