//! Certificates the TLS tests make (rcgen): a private CA, and server or client certificates
//! it signs, in memory ([`Ca::leaf`]) or written as PEM files ([`Ca::issue`]), and a
//! directory laid out like a Kubernetes Secret mount whose files rotate.

#![allow(dead_code)]

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

/// A certificate authority of the test's own.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// What a leaf certificate may be used for (its extended key usage).
#[derive(Clone, Copy)]
pub enum Usage {
    Server,
    Client,
    /// No extended key usage: valid for both (Redis server and client certificates).
    Any,
}

/// A certificate and its key, as PEM, and the certificate's DER (to compare with what a
/// server presents).
pub struct Leaf {
    pub cert: String,
    pub key: String,
    pub der: Vec<u8>,
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
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        Ca {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Write the CA certificate to `dir/<file>`.
    pub fn write(&self, dir: &Path, file: &str) -> PathBuf {
        write(dir, file, &self.pem())
    }

    /// A certificate for `names` (DNS names or IP addresses) signed by this CA.
    pub fn leaf(&self, names: &[&str], usage: Usage) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("leaf"));
        for n in names {
            params.subject_alt_names.push(match n.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*n).try_into().expect("dns name")),
            });
        }
        match usage {
            Usage::Server => {
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            }
            Usage::Client => {
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
                params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            }
            Usage::Any => {}
        }
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign leaf");
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }

    /// A certificate for `names`, valid for servers and clients, written as
    /// `dir/<stem>.crt` and `dir/<stem>.key`.
    pub fn issue(&self, dir: &Path, stem: &str, names: &[&str]) -> Pair {
        let leaf = self.leaf(names, Usage::Any);
        Pair {
            cert: write(dir, &format!("{stem}.crt"), &leaf.cert),
            key: write(dir, &format!("{stem}.key"), &leaf.key),
        }
    }
}

pub fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).expect("write PEM");
    p
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

/// A directory laid out like a Kubernetes Secret volume: `tls.crt` and `tls.key` are
/// symlinks through `..data`, which points at a timestamped directory; [`SecretMount::rotate`]
/// swaps `..data` atomically, as the kubelet does.
pub struct SecretMount {
    pub dir: PathBuf,
    generation: u32,
}

impl SecretMount {
    pub fn new(dir: &Path, leaf: &Leaf) -> SecretMount {
        let mut m = SecretMount {
            dir: dir.to_path_buf(),
            generation: 0,
        };
        m.rotate(leaf);
        for name in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).expect("symlink");
        }
        m
    }

    pub fn cert(&self) -> PathBuf {
        self.dir.join("tls.crt")
    }

    pub fn key(&self) -> PathBuf {
        self.dir.join("tls.key")
    }

    /// Write `leaf` into a new timestamped directory and point `..data` at it.
    pub fn rotate(&mut self, leaf: &Leaf) {
        self.generation += 1;
        let data = format!("..2024_01_01_00_00_{:02}", self.generation);
        let target = self.dir.join(&data);
        std::fs::create_dir(&target).expect("data dir");
        write(&target, "tls.crt", &leaf.cert);
        write(&target, "tls.key", &leaf.key);
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&data, &tmp).expect("symlink ..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swap ..data");
    }
}
