//! Certificates made by the test: a CA, and server or client certificates it signs, written
//! as PEM files (and laid out like a Kubernetes Secret mount when asked).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM, and the certificate's DER (to compare with what a
/// server presents).
pub struct Leaf {
    pub cert: String,
    pub key: String,
    pub der: Vec<u8>,
}

#[derive(Clone, Copy)]
pub enum Usage {
    Server,
    Client,
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

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses) signed by this CA.
    pub fn leaf(&self, names: &[&str], usage: Usage) -> Leaf {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("leaf"));
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign leaf");
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

pub fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).expect("write PEM");
    p
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
