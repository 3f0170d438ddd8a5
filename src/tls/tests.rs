//! PEM loading errors name their file; the server config follows its files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{CertificateParams, KeyPair};

use super::*;

/// A self-signed certificate for `name` and its key, as PEM.
fn self_signed(name: &str) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    (cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

fn message(e: TlsError) -> String {
    e.to_string()
}

#[test]
fn loaders_name_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    assert!(message(load_certs(&missing).unwrap_err()).starts_with(&missing.display().to_string()));
    assert!(message(load_certs(dir.path()).unwrap_err()).ends_with("not a regular file"));

    let (cert, key) = self_signed("localhost");
    let cert_path = write(dir.path(), "cert.pem", &cert);
    let key_path = write(dir.path(), "key.pem", &key);
    assert_eq!(load_certs(&cert_path).unwrap().len(), 1);
    assert!(load_private_key(&key_path).is_ok());
    assert_eq!(load_roots(&cert_path).unwrap().len(), 1);

    let e = message(load_certs(&key_path).unwrap_err());
    assert!(e.ends_with("no CERTIFICATE block found"), "{e}");
    let e = message(load_private_key(&cert_path).unwrap_err());
    assert!(e.ends_with("no PRIVATE KEY block found"), "{e}");
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("cert.pem");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let e = message(load_certs(&fifo).unwrap_err());
    assert!(e.ends_with("not a regular file"), "{e}");
}

fn files(dir: &Path) -> ServerTlsFiles {
    ServerTlsFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        client_ca: None,
        client_san: None,
    }
}

#[test]
fn a_key_that_does_not_fit_its_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, _) = self_signed("a");
    let (_, other_key) = self_signed("b");
    write(dir.path(), "tls.crt", &cert);
    write(dir.path(), "tls.key", &other_key);
    let e = ServerTls::new(files(dir.path()), &[b"h2"])
        .err()
        .expect("mismatched key refused")
        .to_string();
    assert!(e.contains("tls.key") && e.contains("does not fit"), "{e}");
}

#[test]
fn the_config_follows_its_files_and_keeps_serving_through_a_bad_set() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed("one");
    write(dir.path(), "tls.crt", &cert);
    write(dir.path(), "tls.key", &key);
    let tls = ServerTls::new(files(dir.path()), &[b"h2"]).unwrap();
    let first = tls.config();
    assert_eq!(first.alpn_protocols, vec![b"h2".to_vec()]);
    assert!(!tls.reload_if_changed().unwrap(), "nothing changed");
    assert!(Arc::ptr_eq(&first, &tls.config()));

    // Halfway through a rotation: a new certificate next to the old key.
    let (cert2, key2) = self_signed("two");
    write(dir.path(), "tls.crt.new", &cert2);
    std::fs::rename(dir.path().join("tls.crt.new"), dir.path().join("tls.crt")).unwrap();
    assert!(tls.reload_if_changed().is_err());
    assert!(
        Arc::ptr_eq(&first, &tls.config()),
        "the old config keeps serving"
    );
    assert!(
        !tls.reload_if_changed().unwrap(),
        "a failed set is not retried until a file changes again"
    );

    // The key lands: the new pair loads.
    write(dir.path(), "tls.key.new", &key2);
    std::fs::rename(dir.path().join("tls.key.new"), dir.path().join("tls.key")).unwrap();
    assert!(tls.reload_if_changed().unwrap());
    assert!(!Arc::ptr_eq(&first, &tls.config()));
}

#[test]
fn a_client_san_must_be_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed("s");
    write(dir.path(), "tls.crt", &cert);
    write(dir.path(), "tls.key", &key);
    let ca = write(dir.path(), "ca.crt", &cert);
    let mut f = files(dir.path());
    f.client_ca = Some(ca);
    f.client_san = Some("not a name!".into());
    let e = ServerTls::new(f, &[b"h2"])
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("is not a DNS name or IP address"), "{e}");
}

#[test]
fn a_client_config_needs_both_halves_of_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, _) = self_signed("c");
    let cert = write(dir.path(), "c.crt", &cert);
    let e = client_config(
        &ClientTlsFiles {
            ca: None,
            cert: Some(cert),
            key: None,
        },
        &[],
    )
    .expect_err("refused")
    .to_string();
    assert!(e.contains("both a certificate and a key"), "{e}");
    assert!(client_config(&ClientTlsFiles::default(), &[b"h2"]).is_ok());
}

#[test]
fn read_pem_checks_what_the_file_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "hello").expect("write");
    let e = read_pem(&junk, PemKind::Certificates).expect_err("no certificate");
    assert!(e.to_string().contains("junk.pem: no CERTIFICATE"), "{e}");
    let e = read_pem(&junk, PemKind::PrivateKey).expect_err("no key");
    assert!(e.to_string().contains("junk.pem: no PRIVATE KEY"), "{e}");

    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .and_then(|p| p.self_signed(&key))
        .expect("cert");
    let c = dir.path().join("c.pem");
    std::fs::write(&c, cert.pem()).expect("write");
    assert_eq!(
        read_pem(&c, PemKind::Certificates).expect("pem"),
        cert.pem().as_bytes()
    );
}
