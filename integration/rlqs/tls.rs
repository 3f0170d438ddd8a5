//! RLQS on the gRPC listener's mutual TLS: the same server, the same certificates.

use std::path::Path;

use sluice::client::{Target, TlsTarget};
use sluice::tls::ClientTlsFiles;

use super::*;
use crate::support::certs::{Ca, Usage, write};

#[tokio::test]
async fn rlqs_is_served_over_mutual_tls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path();
    let ca = Ca::new("server CA");
    let server = ca.leaf(&["localhost", "127.0.0.1"], Usage::Server);
    let clients = Ca::new("client CA");
    let client = clients.leaf(&["envoy"], Usage::Client);
    let path = |name: &str, pem: &str| write(p, name, pem).display().to_string();
    let (ca_pem, cert, key) = (
        path("ca.crt", &ca.pem()),
        path("tls.crt", &server.cert),
        path("tls.key", &server.key),
    );
    let client_ca = path("client-ca.crt", &clients.pem());
    let (ccert, ckey) = (
        path("envoy.crt", &client.cert),
        path("envoy.key", &client.key),
    );
    let s = sluice()
        .file("rlqs.yaml", RULES)
        .args(["--grpc-tls-cert", &cert, "--grpc-tls-key", &key])
        .args(["--grpc-tls-client-ca", &client_ca])
        .start()
        .await;
    let target = Target {
        authority: s.grpc.to_string(),
        tls: Some(TlsTarget {
            files: ClientTlsFiles {
                ca: Some(Path::new(&ca_pem).to_path_buf()),
                cert: Some(Path::new(&ccert).to_path_buf()),
                key: Some(Path::new(&ckey).to_path_buf()),
            },
            server_name: "localhost".into(),
        }),
    };
    let channel = sluice::client::connect(&target, Duration::from_secs(5))
        .await
        .expect("a mutual TLS channel");
    let mut e = Envoy::on(channel, "rlqs").await;
    let closed = bucket(&[("name", "closed")]);
    assert!(matches!(got(&e.report(&closed, 0, 1).await).0, Got::Deny));
}
