//! TLS plumbing shared by every TLS connection sluice makes or accepts (Redis, gRPC).
//!
//! rustls 0.23 needs a process-wide `CryptoProvider` when more than one could be compiled
//! in or none is selected by features; without it, the first TLS handshake panics inside
//! the connection task. [`install_crypto_provider`] selects ring once, before anything
//! connects (`server::run`, and every Redis store, so embedders and tests get it too).
//!
//! PEM loading: each function reads one file and fails with an error naming it when the
//! file is unreadable or holds nothing of the expected kind, so a bad path is a startup
//! error rather than a handshake failure later. [`read_pem`] keeps the file's bytes (the
//! Redis client takes PEM) after checking they parse.

use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Install ring as the process-wide rustls provider. Idempotent: a provider installed
/// earlier (by this function or by an embedding program) is kept.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A certificate or key file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", .path.display())]
    Invalid { path: PathBuf, message: String },
}

/// What a PEM file must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PemKind {
    /// One or more certificates (a chain, or a CA bundle).
    Certificates,
    /// One private key (PKCS#8, PKCS#1 or SEC1).
    PrivateKey,
}

fn invalid(path: &Path, message: impl Into<String>) -> TlsError {
    TlsError::Invalid {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn parse_certs(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(path, format!("not a PEM certificate file ({e})")))?;
    if certs.is_empty() {
        return Err(invalid(path, "no PEM certificate found"));
    }
    Ok(certs)
}

fn parse_key(path: &Path, pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem)
        .map_err(|e| invalid(path, format!("no PEM private key found ({e})")))
}

/// The certificates of a PEM file (a chain, leaf first, or a CA bundle).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    parse_certs(path, &read(path)?)
}

/// The private key of a PEM file.
pub fn load_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    parse_key(path, &read(path)?)
}

/// A trust store holding exactly the certificates of a PEM CA bundle.
pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| invalid(path, format!("not a usable CA certificate ({e})")))?;
    }
    Ok(roots)
}

/// The bytes of a PEM file, once they are known to hold `kind`.
pub fn read_pem(path: &Path, kind: PemKind) -> Result<Vec<u8>, TlsError> {
    let pem = read(path)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing.pem");
        let e = load_certs(&missing).expect_err("missing");
        assert!(e.to_string().contains("missing.pem"), "{e}");

        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "hello").expect("write");
        let e = read_pem(&junk, PemKind::Certificates).expect_err("no certificate");
        assert!(
            e.to_string().contains("junk.pem: no PEM certificate"),
            "{e}"
        );
        let e = read_pem(&junk, PemKind::PrivateKey).expect_err("no key");
        assert!(
            e.to_string().contains("junk.pem: no PEM private key"),
            "{e}"
        );
        assert!(load_roots(&junk).is_err());
        assert!(load_private_key(&junk).is_err());
    }

    #[test]
    fn loads_generated_pem() {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .and_then(|p| p.self_signed(&key))
            .expect("cert");
        let dir = tempfile::tempdir().expect("tempdir");
        let (c, k) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&c, cert.pem()).expect("write");
        std::fs::write(&k, key.serialize_pem()).expect("write");
        assert_eq!(load_certs(&c).expect("certs").len(), 1);
        assert_eq!(load_roots(&c).expect("roots").len(), 1);
        load_private_key(&k).expect("key");
        assert_eq!(
            read_pem(&c, PemKind::Certificates).expect("pem"),
            cert.pem().as_bytes()
        );
    }
}
