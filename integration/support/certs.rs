//! Certificates generated per test with the `openssl` command (scripts/test.sh installs it
//! when missing): a private CA and leaf certificates it signs, for a DNS name, usable by
//! servers and clients (P-256 keys, PKCS#8 PEM).

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

pub struct Ca {
    dir: TempDir,
    pub cert: PathBuf,
    key: PathBuf,
}

pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Leaf {
    pub fn cert_pem(&self) -> Vec<u8> {
        std::fs::read(&self.cert).expect("read cert")
    }
    pub fn key_pem(&self) -> Vec<u8> {
        std::fs::read(&self.key).expect("read key")
    }
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (install the Debian package openssl)");
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let dir = TempDir::new().expect("temp dir");
        let (cert, key) = (format!("{name}.crt"), format!("{name}.key"));
        openssl(
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &cert,
                "-days",
                "2",
                "-subj",
                &format!("/CN={name}"),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
            dir.path(),
        );
        Ca {
            cert: dir.path().join(cert),
            key: dir.path().join(key),
            dir,
        }
    }

    pub fn cert_pem(&self) -> Vec<u8> {
        std::fs::read(&self.cert).expect("read CA cert")
    }

    /// A certificate for `dns_name`, valid for TLS servers and clients.
    pub fn leaf(&self, file: &str, dns_name: &str) -> Leaf {
        let dir = self.dir.path();
        let (cert, key, csr, ext) = (
            format!("{file}.crt"),
            format!("{file}.key"),
            format!("{file}.csr"),
            format!("{file}.ext"),
        );
        std::fs::write(
            dir.join(&ext),
            format!(
                "subjectAltName=DNS:{dns_name}\nbasicConstraints=CA:FALSE\n\
                 keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
            ),
        )
        .expect("write extensions");
        openssl(
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                &format!("/CN={dns_name}"),
            ],
            dir,
        );
        openssl(
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &self.cert.display().to_string(),
                "-CAkey",
                &self.key.display().to_string(),
                "-CAcreateserial",
                "-out",
                &cert,
                "-days",
                "2",
                "-extfile",
                &ext,
            ],
            dir,
        );
        Leaf {
            cert: dir.join(cert),
            key: dir.join(key),
        }
    }
}
