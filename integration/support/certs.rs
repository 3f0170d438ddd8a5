//! Certificates the TLS tests generate (rcgen): a private CA, server and client
//! certificates it signs, written as PEM files in a temporary directory.

#![allow(dead_code)]

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SanType,
};

/// A certificate authority of the test's own.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM files.
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pair {
    pub fn cert_pem(&self) -> Vec<u8> {
        std::fs::read(&self.cert).expect("read cert")
    }
    pub fn key_pem(&self) -> Vec<u8> {
        std::fs::read(&self.key).expect("read key")
    }
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("key");
        Ca {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> Vec<u8> {
        self.issuer.pem().into_bytes()
    }

    /// Write the CA certificate to `dir/<file>`.
    pub fn write(&self, dir: &Path, file: &str) -> PathBuf {
        let p = dir.join(file);
        std::fs::write(&p, self.issuer.pem()).expect("write CA");
        p
    }

    /// A certificate for `names` (DNS names or IP addresses), signed by this CA, written as
    /// `dir/<stem>.crt` and `dir/<stem>.key`.
    pub fn issue(&self, dir: &Path, stem: &str, names: &[&str]) -> Pair {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, stem);
        for n in names {
            params.subject_alt_names.push(match n.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*n).try_into().expect("dns name")),
            });
        }
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        let pair = Pair {
            cert: dir.join(format!("{stem}.crt")),
            key: dir.join(format!("{stem}.key")),
        };
        std::fs::write(&pair.cert, cert.pem()).expect("write cert");
        std::fs::write(&pair.key, key.serialize_pem()).expect("write key");
        pair
    }
}

/// `redis-server` arguments for TLS with `server`'s certificate, trusting `ca` for clients.
pub fn redis_tls_args(server: &Pair, ca: &Path, auth_clients: bool) -> Vec<String> {
    let s = |p: &Path| p.to_str().expect("utf-8 path").to_owned();
    vec![
        "--tls-cert-file".into(),
        s(&server.cert),
        "--tls-key-file".into(),
        s(&server.key),
        "--tls-ca-cert-file".into(),
        s(ca),
        "--tls-auth-clients".into(),
        if auth_clients { "yes" } else { "no" }.into(),
    ]
}
