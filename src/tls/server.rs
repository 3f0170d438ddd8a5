//! The server side: a rustls `ServerConfig` built from certificate, key and (for mutual
//! TLS) client CA files, rebuilt when those files change on disk.
//!
//! Rotation (cert-manager, a Kubernetes Secret mount swapping its `..data` symlink, or files
//! renamed over the old ones) is noticed by [`ServerTls::reload_if_changed`], which compares
//! each file's identity (device, inode, size, modification time, symlinks followed) with the
//! last one seen; the caller polls it. A new config is swapped in whole: a handshake uses the
//! config current when it starts, connections already established keep theirs. A set of
//! files that does not load (a key that does not match its certificate, halfway through a
//! two-file rotation) keeps the previous config serving and is retried when a file changes
//! again.
//!
//! Client certificates, when a CA is given, are required and verified against it (chain,
//! validity, `clientAuth` usage); with a required SAN, the certificate must also be valid for
//! that name (DNS name, wildcards as in server certificates, or IP address), as with
//! envoyproxy/ratelimit's `GRPC_CLIENT_TLS_SAN`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::{TlsError, file_err, load_certs, load_private_key, load_roots, provider};

/// The files a TLS listener is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// Certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// Private key of the leaf (PEM).
    pub key: PathBuf,
    /// CA certificates that client certificates must chain to; `Some` makes them required.
    pub client_ca: Option<PathBuf>,
    /// A name every client certificate must be valid for (needs `client_ca`).
    pub client_san: Option<String>,
}

/// A server config that follows its files.
pub struct ServerTls {
    files: ServerTlsFiles,
    alpn: Vec<Vec<u8>>,
    current: ArcSwap<ServerConfig>,
    /// Identity of the files behind `current`, or of the last set that failed to load.
    seen: Mutex<Vec<Option<FileStamp>>>,
}

/// What changes when a file is rewritten, renamed over or swapped behind a symlink.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl ServerTls {
    /// Load the files and build the first config. `alpn`: the protocols offered, in
    /// preference order (`h2` for gRPC).
    pub fn new(files: ServerTlsFiles, alpn: &[&[u8]]) -> Result<ServerTls, TlsError> {
        let stamps = stamps(&files);
        let config = build(&files, alpn)?;
        Ok(ServerTls {
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            current: ArcSwap::from_pointee(config),
            seen: Mutex::new(stamps),
            files,
        })
    }

    /// The config a new handshake should use.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.current.load_full()
    }

    pub fn files(&self) -> &ServerTlsFiles {
        &self.files
    }

    /// Rebuild the config when a file changed since the last call. `Ok(true)`: a new config
    /// is in place; `Ok(false)`: nothing changed; `Err`: the changed files do not load and the
    /// previous config keeps serving. Reads files: call it off the async workers.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let now = stamps(&self.files);
        {
            let mut seen = self.seen.lock();
            if *seen == now {
                return Ok(false);
            }
            *seen = now;
        }
        let alpn: Vec<&[u8]> = self.alpn.iter().map(Vec::as_slice).collect();
        let config = build(&self.files, &alpn)?;
        self.current.store(Arc::new(config));
        Ok(true)
    }
}

fn stamps(files: &ServerTlsFiles) -> Vec<Option<FileStamp>> {
    [
        Some(&files.cert),
        Some(&files.key),
        files.client_ca.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|p| stamp(p))
    .collect()
}

#[cfg(unix)]
fn stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        modified: m.modified().ok(),
    })
}

#[cfg(not(unix))]
fn stamp(path: &Path) -> Option<FileStamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        dev: 0,
        ino: 0,
        len: m.len(),
        modified: m.modified().ok(),
    })
}

fn build(files: &ServerTlsFiles, alpn: &[&[u8]]) -> Result<ServerConfig, TlsError> {
    let provider = provider();
    let chain = load_certs(&files.cert)?;
    let key = load_private_key(&files.key)?;
    let certified = CertifiedKey::from_der(chain, key, &provider).map_err(|e| {
        file_err(
            &files.key,
            format!("does not fit {}: {e}", files.cert.display()),
        )
    })?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let roots = Arc::new(load_roots(ca)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| file_err(ca, e.to_string()))?;
            let verifier: Arc<dyn ClientCertVerifier> = match &files.client_san {
                None => verifier,
                Some(san) => Arc::new(SanVerifier {
                    inner: verifier,
                    name: ServerName::try_from(san.clone()).map_err(|_| {
                        TlsError::Config(format!("'{san}' is not a DNS name or IP address"))
                    })?,
                }),
            };
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(Arc::new(Fixed(Arc::new(certified))));
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// One certified key for every handshake (a resolver, so the key is parsed once per load).
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl rustls::server::ResolvesServerCert for Fixed {
    fn resolve(&self, _: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The WebPKI client verifier, then: the certificate must be valid for `name`.
#[derive(Debug)]
struct SanVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    name: ServerName<'static>,
}

impl ClientCertVerifier for SanVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let cert = webpki::EndEntityCert::try_from(end_entity)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        cert.verify_is_valid_for_subject_name(&self.name)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::NotValidForName))?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
