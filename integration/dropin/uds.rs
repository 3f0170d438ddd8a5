//! `GRPC_UDS`: gRPC (rate limit and health) on a unix socket instead of TCP, with TLS when
//! theirs would, the socket file replaced when stale and removed on shutdown.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic_health::pb::health_check_response::ServingStatus;

use super::*;
use crate::support::certs::{Ca, Usage, write};
use crate::support::health::grpc_health;

fn socket_in(dir: &Path) -> String {
    dir.join("ratelimit.sock").display().to_string()
}

#[tokio::test]
async fn grpc_uds_serves_rate_limit_and_health_on_the_socket_and_removes_it_on_shutdown() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = socket_in(dir.path());
    let mut s = sluice()
        .file("d.yaml", RULES)
        .env("GRPC_UDS", &path)
        .start()
        .await;
    assert_eq!(s.grpc_unix.as_deref(), Some(Path::new(&path)));
    let mut c = s.unix_client().await;
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(call(&mut c, ask()).await.overall_code);
    }
    assert_eq!(
        got,
        [Code::Ok as i32, Code::Ok as i32, Code::OverLimit as i32],
        "the rule's limit of 2 applies over the socket"
    );
    let channel = s.unix_channel().await;
    for service in ["", "ratelimit"] {
        assert_eq!(
            grpc_health(channel.clone(), service).await,
            ServingStatus::Serving,
            "over the socket, for {service:?}"
        );
    }
    s.signal("TERM");
    assert!(s.wait_exit(Duration::from_secs(20)).await.is_some());
    assert!(
        !Path::new(&path).exists(),
        "the socket file is removed on shutdown"
    );
}

#[tokio::test]
async fn a_stale_socket_is_replaced_and_the_mode_applies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = socket_in(dir.path());
    // What a killed instance leaves behind: a socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("stale socket"));
    let s = sluice()
        .file("d.yaml", RULES)
        .env("GRPC_UDS", &path)
        .env("SLUICE_GRPC_UDS_MODE", "600")
        .start()
        .await;
    let mode = std::fs::metadata(&path)
        .expect("socket")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let mut c = s.unix_client().await;
    assert_eq!(call(&mut c, ask()).await.overall_code, Code::Ok as i32);
    assert!(
        s.logs()
            .iter()
            .any(|l| l.contains("removing a stale gRPC unix socket")),
        "{:?}",
        s.logs()
    );
}

#[tokio::test]
async fn a_socket_in_use_stops_startup() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = socket_in(dir.path());
    let _live = std::os::unix::net::UnixListener::bind(&path).expect("live socket");
    let e = sluice()
        .file("d.yaml", RULES)
        .env("GRPC_UDS", &path)
        .try_start()
        .await
        .err()
        .expect("startup fails");
    assert!(e.contains("another process is listening on it"), "{e}");
    assert!(
        Path::new(&path).exists(),
        "the other process's socket is left alone"
    );
}

#[tokio::test]
async fn their_tls_variables_apply_on_the_socket() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new("server CA");
    let leaf = ca.leaf(&["localhost"], Usage::Server);
    let p = dir.path();
    let ca_file = write(p, "ca.crt", &ca.pem());
    let cert = write(p, "tls.crt", &leaf.cert);
    let key = write(p, "tls.key", &leaf.key);
    let path = socket_in(p);
    let _s = sluice()
        .file("d.yaml", RULES)
        .env("GRPC_UDS", &path)
        .env("GRPC_SERVER_USE_TLS", "true")
        .env("GRPC_SERVER_TLS_CERT", cert.display().to_string())
        .env("GRPC_SERVER_TLS_KEY", key.display().to_string())
        .start()
        .await;
    let files = sluice::tls::ClientTlsFiles {
        ca: Some(ca_file),
        cert: None,
        key: None,
    };
    let channel = unix_tls_channel(path.clone().into(), &files, "localhost")
        .await
        .expect("a TLS client that trusts the CA connects");
    let mut c = RateLimitServiceClient::new(channel);
    assert_eq!(call(&mut c, ask()).await.overall_code, Code::Ok as i32);
    // Plaintext HTTP/2 on the TLS socket gets no answer.
    let plain = match unix_channel(path.into()).await {
        Err(_) => true,
        Ok(ch) => RateLimitServiceClient::new(ch)
            .should_rate_limit(ask())
            .await
            .is_err(),
    };
    assert!(plain, "a plaintext client is refused");
}
