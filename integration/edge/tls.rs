//! gRPC over TLS: plaintext refused, mutual TLS with a required SAN, rotation.

use std::time::{Duration, Instant};

use super::*;
use crate::support::certs::{Ca, SecretMount, Usage, write};
use crate::support::h2raw;

/// A server certificate for localhost and a client CA with certificates of its own.
struct Pki {
    dir: tempfile::TempDir,
    ca: Ca,
}

impl Pki {
    fn new() -> Pki {
        Pki {
            dir: tempfile::tempdir().expect("temp dir"),
            ca: Ca::new("server CA"),
        }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    /// Write the server CA, a server certificate and key; return their paths' names.
    fn server(&self) -> (String, String, String) {
        let leaf = self.ca.leaf(&["localhost", "127.0.0.1"], Usage::Server);
        let p = self.dir.path();
        (
            write(p, "ca.crt", &self.ca.pem()).display().to_string(),
            write(p, "tls.crt", &leaf.cert).display().to_string(),
            write(p, "tls.key", &leaf.key).display().to_string(),
        )
    }
}

#[tokio::test]
async fn tls_serves_grpc_and_refuses_plaintext() {
    let pki = Pki::new();
    let (ca, cert, key) = pki.server();
    let s = sluice()
        .file("t.yaml", RULES)
        .arg("--grpc-tls-cert")
        .arg(&cert)
        .arg("--grpc-tls-key")
        .arg(&key)
        .start()
        .await;
    tls_call(&s, client_files(Path::new(&ca), None))
        .await
        .expect("a TLS client that trusts the CA is served");

    // Plaintext HTTP/2 to the TLS port: no answer.
    let plain = match RateLimitServiceClient::connect(format!("http://{}", s.grpc)).await {
        Err(_) => true,
        Ok(mut c) => c.should_rate_limit(ask()).await.is_err(),
    };
    assert!(plain, "a plaintext client is refused");

    // A client that does not trust the server's CA.
    let other = Ca::new("someone else");
    let other_ca = write(pki.dir.path(), "other-ca.crt", &other.pem());
    assert!(tls_call(&s, client_files(&other_ca, None)).await.is_err());
    // The HTTP port stays plaintext.
    assert!(s.wait_healthy(HEALTHY_WITHIN).await);
}

#[tokio::test]
async fn mutual_tls_requires_a_certificate_from_the_client_ca_with_the_san() {
    let pki = Pki::new();
    let (ca, cert, key) = pki.server();
    let clients = Ca::new("client CA");
    let p = pki.dir.path();
    let client_ca = write(p, "client-ca.crt", &clients.pem());
    let issue = |name: &str, ca: &Ca, san: &str, usage| {
        let leaf = ca.leaf(&[san], usage);
        (
            write(p, &format!("{name}.crt"), &leaf.cert),
            write(p, &format!("{name}.key"), &leaf.key),
        )
    };
    let good = issue("envoy", &clients, "envoy.internal", Usage::Client);
    let wrong_san = issue("intruder", &clients, "other.internal", Usage::Client);
    let wrong_ca = issue(
        "stranger",
        &Ca::new("rogue CA"),
        "envoy.internal",
        Usage::Client,
    );
    let server_only = issue("server-usage", &clients, "envoy.internal", Usage::Server);

    // envoyproxy/ratelimit's variable names, as Envoy Gateway sets them.
    let s = sluice()
        .file("t.yaml", RULES)
        .env("GRPC_SERVER_USE_TLS", "true")
        .env("GRPC_SERVER_TLS_CERT", &cert)
        .env("GRPC_SERVER_TLS_KEY", &key)
        .env("GRPC_CLIENT_TLS_CACERT", client_ca.display().to_string())
        .env("GRPC_CLIENT_TLS_SAN", "envoy.internal")
        .start()
        .await;
    let ca = Path::new(&ca);
    tls_call(&s, client_files(ca, Some((&good.0, &good.1))))
        .await
        .expect("the right client certificate is served");
    for (what, c) in [
        ("no client certificate", None),
        ("the wrong SAN", Some((&wrong_san.0, &wrong_san.1))),
        ("another CA", Some((&wrong_ca.0, &wrong_ca.1))),
        (
            "no clientAuth usage",
            Some((&server_only.0, &server_only.1)),
        ),
    ] {
        let r = tls_call(
            &s,
            client_files(ca, c.map(|(a, b)| (a.as_path(), b.as_path()))),
        )
        .await;
        assert!(r.is_err(), "a client with {what} is refused");
    }
    // Still serving after the refusals.
    tls_call(&s, client_files(ca, Some((&good.0, &good.1))))
        .await
        .expect("served");
}

#[tokio::test]
async fn a_rotated_certificate_serves_new_connections_and_old_ones_stay() {
    let pki = Pki::new();
    let ca_path = write(pki.dir.path(), "ca.crt", &pki.ca.pem());
    let mount_dir = pki.path("secret");
    std::fs::create_dir(&mount_dir).expect("mount dir");
    let first = pki.ca.leaf(&["localhost"], Usage::Server);
    let mut mount = SecretMount::new(&mount_dir, &first);
    let s = sluice()
        .file("t.yaml", RULES)
        .arg("--grpc-tls-cert")
        .arg(mount.cert().display().to_string())
        .arg("--grpc-tls-key")
        .arg(mount.key().display().to_string())
        .start()
        .await;
    let files = client_files(&ca_path, None);

    // A connection made before the rotation, kept open across it.
    let old = tls_connect(&s, &files).await.expect("TLS");
    assert_eq!(presented(&old), first.der);
    let (mut send, conn) = h2raw::handshake(old).await;
    tokio::spawn(conn);
    let (_, status, _) = h2raw::call(&mut send, SHOULD_RATE_LIMIT, &ask())
        .await
        .expect("call before rotation");
    assert_eq!(status.as_deref(), Some("0"));

    // cert-manager renews: the kubelet swaps ..data.
    let second = pki.ca.leaf(&["localhost"], Usage::Server);
    mount.rotate(&second);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let new = tls_connect(&s, &files).await.expect("TLS after rotation");
        if presented(&new) == second.der {
            break;
        }
        assert_eq!(presented(&new), first.der);
        assert!(Instant::now() < deadline, "new certificate not served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tls_call(&s, files)
        .await
        .expect("served with the new certificate");

    // The old connection was not dropped.
    let (_, status, _) = h2raw::call(&mut send, SHOULD_RATE_LIMIT, &ask())
        .await
        .expect("call on the old connection after rotation");
    assert_eq!(status.as_deref(), Some("0"));
    assert!(
        s.wait_log(
            "new connections use the new certificate",
            Duration::from_secs(5)
        )
        .await
    );
}

#[tokio::test]
async fn unreadable_certificate_files_stop_startup_with_their_name() {
    let pki = Pki::new();
    let (_, cert, _) = pki.server();
    let missing = pki.path("missing.key").display().to_string();
    let err = sluice()
        .file("t.yaml", RULES)
        .arg("--grpc-tls-cert")
        .arg(&cert)
        .arg("--grpc-tls-key")
        .arg(&missing)
        .try_start()
        .await
        .err()
        .expect("startup refused");
    assert!(err.contains("missing.key"), "{err}");
}
