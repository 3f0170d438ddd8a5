//! Redis over TLS with a private CA: the right CA works, another is refused, client
//! certificates, and skipping only the hostname check; single node, cluster and the binary
//! configured with envoyproxy/ratelimit's variables.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice::store::redis::{RedisConfigError, RedisStore, RedisTls};
use tempfile::TempDir;

use super::{config, connects, hit, store};
use crate::support::certs::{Ca, Pair, redis_tls_args};
use crate::support::redis::{RedisServer, free_port};
use crate::support::sluice::{call, desc, req, sluice};

pub struct Pki {
    pub _dir: TempDir,
    pub ca: PathBuf,
    pub ca_pem: Vec<u8>,
    pub other_ca_pem: Vec<u8>,
    /// For `localhost` and `127.0.0.1`.
    pub server: Pair,
    /// For `other.example` only.
    pub misnamed: Pair,
    pub client: Pair,
}

pub fn pki() -> Pki {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("sluice test CA");
    let other = Ca::new("another CA");
    let ca_path = ca.write(dir.path(), "ca.crt");
    let other_path = other.write(dir.path(), "other-ca.crt");
    Pki {
        ca_pem: std::fs::read(&ca_path).expect("read"),
        other_ca_pem: std::fs::read(&other_path).expect("read"),
        server: ca.issue(dir.path(), "server", &["localhost", "127.0.0.1"]),
        misnamed: ca.issue(dir.path(), "misnamed", &["other.example"]),
        client: ca.issue(dir.path(), "client", &["sluice-client"]),
        ca: ca_path,
        _dir: dir,
    }
}

pub fn tls(ca: &[u8], client: Option<&Pair>, skip_hostname_verification: bool) -> RedisTls {
    RedisTls {
        ca_pem: Some(ca.to_vec()),
        client_identity: client.map(|p| {
            (
                std::fs::read(&p.cert).expect("read"),
                std::fs::read(&p.key).expect("read"),
            )
        }),
        skip_hostname_verification,
    }
}

pub fn server(cert: &Pair, pki: &Pki, auth_clients: bool) -> RedisServer {
    let args = redis_tls_args(cert, &pki.ca, auth_clients);
    RedisServer::start_tls(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn cfg(url: String, tls: RedisTls) -> sluice::store::redis::RedisConfig {
    sluice::store::redis::RedisConfig {
        tls,
        ..config(&url)
    }
}

#[tokio::test]
async fn rediss_with_the_private_ca_works_and_another_ca_is_refused() {
    let pki = pki();
    let redis = server(&pki.server, &pki, false);
    let url = redis.tls_url();
    assert!(connects(cfg(url.clone(), tls(&pki.ca_pem, None, false)), true).await);
    assert!(!connects(cfg(url.clone(), tls(&pki.other_ca_pem, None, false)), false).await);
    // Without a CA, the public roots: a private CA's certificate is refused.
    assert!(!connects(cfg(url, RedisTls::default()), false).await);
}

#[tokio::test]
async fn a_client_certificate_is_presented_when_the_server_requires_one() {
    let pki = pki();
    let redis = server(&pki.server, &pki, true);
    let url = redis.tls_url();
    assert!(!connects(cfg(url.clone(), tls(&pki.ca_pem, None, false)), false).await);
    assert!(connects(cfg(url, tls(&pki.ca_pem, Some(&pki.client), false)), true).await);
}

#[tokio::test]
async fn skipping_hostname_verification_still_verifies_the_chain() {
    let pki = pki();
    let redis = server(&pki.misnamed, &pki, false);
    let url = redis.tls_url();
    assert!(
        !connects(cfg(url.clone(), tls(&pki.ca_pem, None, false)), false).await,
        "a certificate for other.example is refused for 127.0.0.1"
    );
    assert!(connects(cfg(url.clone(), tls(&pki.ca_pem, None, true)), true).await);
    assert!(
        !connects(cfg(url, tls(&pki.other_ca_pem, None, true)), false).await,
        "another CA is still refused with the hostname check off"
    );
}

#[tokio::test]
async fn the_insecure_fragment_is_refused() {
    let e = RedisStore::new(
        config("rediss://127.0.0.1:1/#insecure"),
        std::sync::Arc::new(sluice::limit::SystemClock),
    )
    .expect_err("#insecure");
    assert!(matches!(e, RedisConfigError::Insecure(_)), "{e}");
}

#[tokio::test]
async fn a_cluster_over_tls() {
    let pki = pki();
    let mut args = redis_tls_args(&pki.server, &pki.ca, false);
    args.extend(["--tls-cluster", "yes", "--cluster-enabled", "yes"].map(String::from));
    args.extend(["--cluster-config-file", "nodes.conf"].map(String::from));
    let nodes: Vec<RedisServer> = (0..3)
        .map(|_| {
            let bus = free_port().to_string();
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            a.extend(["--cluster-port", &bus]);
            RedisServer::start_tls(&a)
        })
        .collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.tls_port()))
        .collect();
    let ok = Command::new("redis-cli")
        .args(["--tls", "--cacert"])
        .arg(&pki.ca)
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("redis-cli");
    assert!(ok.success(), "redis-cli --cluster create over TLS");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !nodes.iter().all(|n| {
        n.query::<String>(&["CLUSTER", "INFO"])
            .contains("cluster_state:ok")
    }) {
        assert!(Instant::now() < deadline, "cluster never became ok");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cfg = sluice::store::redis::RedisConfig {
        cluster_nodes: nodes.iter().map(RedisServer::tls_url).collect(),
        tls: tls(&pki.ca_pem, None, false),
        ..config("")
    };
    let s = store(cfg);
    assert!(
        s.wait_ready(Duration::from_secs(10)).await,
        "cluster over TLS"
    );
    for name in ["a", "b", "c", "d", "e", "f"] {
        let r = hit(&s, name).await.expect("decided on the TLS cluster");
        assert_eq!(r[0].remaining, 999, "{name}");
    }
}

#[tokio::test]
async fn the_binary_with_their_tls_variables_and_mutual_tls() {
    let pki = pki();
    let redis = server(&pki.server, &pki, true);
    let path = |p: &PathBuf| p.to_str().expect("utf-8").to_owned();
    let s = sluice()
        .file(
            "tls.yaml",
            "domain: tls\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5}\n",
        )
        .env("REDIS_SOCKET_TYPE", "tcp")
        .env("REDIS_URL", format!("127.0.0.1:{}", redis.tls_port()))
        .env("REDIS_TLS", "true")
        .env("REDIS_TLS_CACERT", path(&pki.ca))
        .env("REDIS_TLS_CLIENT_CERT", path(&pki.client.cert))
        .env("REDIS_TLS_CLIENT_KEY", path(&pki.client.key))
        // A deadline the shared test machine always meets.
        .arg("--redis-timeout")
        .arg("1s")
        .start_healthy()
        .await;
    let mut c = s.client().await;
    let r = call(&mut c, req("tls", vec![desc(&[("k", "v")])])).await;
    assert_eq!(r.statuses[0].limit_remaining, 4);
    // The key is in the TLS server (inspected through its plain port).
    let keys: Vec<String> = redis.query(&["KEYS", "*"]);
    assert_eq!(keys.len(), 1, "{keys:?}");
}
