//! TLS to the management server (`CONFIG_GRPC_XDS_SERVER_USE_TLS`), with certificates the
//! test makes: the server's chains to `CONFIG_GRPC_XDS_SERVER_TLS_CACERT` under the name
//! `CONFIG_GRPC_XDS_SERVER_TLS_SAN`; under mutual TLS sluice presents
//! `CONFIG_GRPC_XDS_CLIENT_TLS_CERT`/`_KEY`, and without it the server refuses the stream.

use super::*;
use crate::support::certs::Ca;
use crate::support::xds_server::{ServerTls, XdsServer};

fn tls_sluice(xds: &XdsServer, ca_cert: &std::path::Path) -> Builder {
    xds_sluice(xds)
        .env("FORCE_START_WITHOUT_INITIAL_CONFIG", "true")
        .env("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true")
        .env(
            "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
            ca_cert.display().to_string(),
        )
        // The server's certificate names xds.test, not the loopback address dialled.
        .env("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds.test")
}

#[tokio::test]
async fn mutual_tls_loads_the_config_and_a_client_without_a_certificate_is_refused() {
    sluice::tls::install_crypto_provider();
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("xds-ca");
    let ca_cert = ca.write(dir.path(), "ca.crt");
    let server = ca.issue(dir.path(), "server", &["xds.test"]);
    let client = ca.issue(dir.path(), "client", &["sluice.test"]);
    let xds = XdsServer::start_tls(ServerTls {
        cert: server.cert_pem(),
        key: server.key_pem(),
        client_ca: Some(ca.pem().into_bytes()),
    });
    xds.set("v1", vec![rules("r", "edge", 3)]);

    let anonymous = tls_sluice(&xds, &ca_cert).start().await;
    let with_cert = tls_sluice(&xds, &ca_cert)
        .env(
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
            client.cert.display().to_string(),
        )
        .env(
            "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
            client.key.display().to_string(),
        )
        .start()
        .await;

    let mut c = with_cert.client().await;
    assert!(
        wait_limit(&mut c, "edge", Some(3)).await,
        "{:?}",
        with_cert.logs()
    );

    // The anonymous client retried (its handshake or stream fails) and never loaded.
    assert!(
        anonymous.wait_log("xDS stream failed", WAIT).await,
        "{:?}",
        anonymous.logs()
    );
    let mut a = anonymous.client().await;
    let e = a
        .should_rate_limit(req("edge", vec![desc(&[("k", "v")])]))
        .await
        .expect_err("no config over a refused stream");
    assert_eq!(e.message(), "no rate limit configuration loaded");
    assert_eq!(
        xds.streams(),
        1,
        "only the client with a certificate got a stream"
    );
}

#[tokio::test]
async fn a_server_certificate_from_another_ca_is_refused() {
    sluice::tls::install_crypto_provider();
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_cert = Ca::new("xds-ca").write(dir.path(), "ca.crt");
    let rogue = Ca::new("rogue-ca");
    let server = rogue.issue(dir.path(), "server", &["xds.test"]);
    let xds = XdsServer::start_tls(ServerTls {
        cert: server.cert_pem(),
        key: server.key_pem(),
        client_ca: None,
    });
    xds.set("v1", vec![rules("r", "edge", 3)]);
    let s = tls_sluice(&xds, &ca_cert).start().await;
    assert!(
        s.wait_log("xDS stream failed", WAIT).await,
        "{:?}",
        s.logs()
    );
    assert!(
        s.logs().iter().any(|l| l.contains("certificate")),
        "the failure names the certificate: {:?}",
        s.logs()
    );
    assert_eq!(xds.streams(), 0);
}

#[tokio::test]
async fn unreadable_tls_files_stop_startup_with_their_name() {
    let xds = XdsServer::start();
    let e = xds_sluice(&xds)
        .env("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true")
        .env("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/nonexistent/ca.crt")
        .try_start()
        .await
        .err()
        .expect("must not start");
    // The file and why, as every PEM file sluice reads (`crate::tls`).
    assert!(
        e.contains("xDS TLS: /nonexistent/ca.crt: No such file"),
        "{e}"
    );
}
