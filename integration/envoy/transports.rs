//! How Envoy reaches sluice: TCP, a unix socket, TLS and mutual TLS, each with Envoy's own
//! gRPC client (`envoy_grpc`) and with gRPC C-core (`google_grpc`). Every path is judged the
//! same way: the rule's limit of 2 holds (200, 200, 429) with `failure_mode_deny`, so a
//! call that fails would show as a 500.

use std::path::PathBuf;

use crate::support::certs::{Ca, Usage, write};
use crate::support::envoy::{Front, Rls, RlsTls, RunningFront};
use crate::support::sluice::*;

use super::setup;

fn rules() -> String {
    setup::rules("unit: minute, requests_per_unit: 2")
}

/// Three requests through `front`: the first two pass, the third is limited.
async fn limited_on_the_third(front: &RunningFront) {
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(front.get("/", &[]).await.status);
    }
    assert_eq!(got, [200, 200, 429], "{}", front.envoy.log());
}

fn on_tcp(google: bool, s: &Sluice) -> Front {
    Front::new("front", setup::rls(s, google)).deny_on_failure()
}

/// Rules on a unix socket in `dir`.
async fn sluice_on_socket(dir: &tempfile::TempDir) -> (Sluice, PathBuf) {
    let path = dir.path().join("rls.sock");
    let s = setup::serving(&rules())
        .arg("--grpc-uds")
        .arg(path.display().to_string())
        .start_healthy()
        .await;
    (s, path)
}

#[tokio::test]
async fn envoy_grpc_over_tcp() {
    let s = setup::serving(&rules()).start_healthy().await;
    limited_on_the_third(&on_tcp(false, &s).start().await).await;
}

#[tokio::test]
async fn google_grpc_over_tcp() {
    let s = setup::serving(&rules()).start_healthy().await;
    limited_on_the_third(&on_tcp(true, &s).start().await).await;
}

#[tokio::test]
async fn envoy_grpc_over_a_unix_socket() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_s, path) = sluice_on_socket(&dir).await;
    let front = Front::new("front", Rls::Uds(path))
        .deny_on_failure()
        .start()
        .await;
    limited_on_the_third(&front).await;
}

/// gRPC C-core sends the socket's path as `:authority` (percent-encoded): served all the same.
#[tokio::test]
async fn google_grpc_over_a_unix_socket() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_s, path) = sluice_on_socket(&dir).await;
    let front = Front::new("front", Rls::Google(format!("unix:{}", path.display())))
        .deny_on_failure()
        .start()
        .await;
    limited_on_the_third(&front).await;
    // The connection stays usable: more calls on it, each answered (429s now).
    for _ in 0..5 {
        assert_eq!(front.get("/", &[]).await.status, 429);
    }
}

/// sluice serving gRPC over TLS with a certificate of the test's CA for `localhost`
/// (mutual: requiring a client certificate of that CA), and the TLS settings Envoy needs.
async fn tls_pair(dir: &tempfile::TempDir, mutual: bool) -> (Sluice, RlsTls) {
    let ca = Ca::new("rls test CA");
    let p = dir.path();
    let ca_file = ca.write(p, "ca.crt");
    let server = ca.leaf(&["localhost", "127.0.0.1"], Usage::Server);
    let mut b = setup::serving(&rules())
        .arg("--grpc-tls-cert")
        .arg(write(p, "server.crt", &server.cert).display().to_string())
        .arg("--grpc-tls-key")
        .arg(write(p, "server.key", &server.key).display().to_string());
    let mut client = None;
    if mutual {
        b = b
            .arg("--grpc-tls-client-ca")
            .arg(ca_file.display().to_string());
        let leaf = ca.leaf(&["envoy"], Usage::Client);
        client = Some((
            write(p, "envoy.crt", &leaf.cert),
            write(p, "envoy.key", &leaf.key),
        ));
    }
    let tls = RlsTls {
        ca: ca_file,
        sni: "localhost".into(),
        client,
    };
    (b.start_healthy().await, tls)
}

async fn through_tls(google: bool, mutual: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (s, tls) = tls_pair(&dir, mutual).await;
    let front = on_tcp(google, &s).tls(tls).start().await;
    limited_on_the_third(&front).await;
}

#[tokio::test]
async fn envoy_grpc_over_tls() {
    through_tls(false, false).await;
}

#[tokio::test]
async fn google_grpc_over_tls() {
    through_tls(true, false).await;
}

#[tokio::test]
async fn envoy_grpc_over_mutual_tls() {
    through_tls(false, true).await;
}

#[tokio::test]
async fn google_grpc_over_mutual_tls() {
    through_tls(true, true).await;
}

/// Without the client certificate sluice requires, Envoy's calls fail: 500s under
/// `failure_mode_deny` (the mutual TLS above is what made them pass).
#[tokio::test]
async fn mutual_tls_without_envoys_certificate_fails_the_calls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (s, mut tls) = tls_pair(&dir, true).await;
    tls.client = None;
    for google in [false, true] {
        let front = on_tcp(google, &s).tls(tls.clone()).start().await;
        let r = front.get("/", &[]).await;
        assert_eq!(r.status, 500, "google_grpc: {google}: {r:?}");
    }
}
