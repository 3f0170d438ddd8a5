//! The Envoy configurations of `examples/` in a real Envoy: every one is accepted by
//! `envoy --mode validate`, and the two bootstraps are served end to end, loaded from their
//! files with only the addresses rewritten (`support::example_bootstrap`), each limiting a
//! request as its comments say.
//!
//! What holds an Envoy configuration in `examples/`:
//! - `envoy.yaml` (RLS, the compose demo's) and `rlqs/envoy.yaml` (RLQS): whole bootstraps,
//!   validated as they are and served;
//! - `istio/envoyfilter.yaml`: patches Istio applies to the gateway's generated config. The
//!   patches' contents (the filter, the cluster, the route's descriptors) are put where Istio
//!   puts them in a minimal bootstrap and validated; the rest of that config is Istio's, made
//!   at run time from the mesh, and cannot be validated here;
//! - `envoy-gateway/`: no Envoy configuration at all. Envoy Gateway generates its Envoys'
//!   config from Gateway API resources; these files only swap the image of the rate limit
//!   Deployment it creates, which `deploy::envoy_gateway` checks.
//!
//! [`every_envoy_config_in_examples_is_covered`] keeps the list true as files are added.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::envoy::{Envoy, hcm, http1, validate};
use crate::support::example_bootstrap::{self, Addresses};
use crate::support::redis::free_port;
use crate::support::sluice::*;
use crate::support::upstream::{self, Upstream};

const ENVOY_YAML: &str = "examples/envoy.yaml";
const RLQS_YAML: &str = "examples/rlqs/envoy.yaml";
const ISTIO: &str = "examples/istio/envoyfilter.yaml";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `envoy --mode validate` on a bootstrap value, written to a temporary file.
fn validate_value(bootstrap: &Value, what: &str) {
    let dir = tempfile::TempDir::new().expect("tempdir");
    let path = dir.path().join("envoy.json");
    std::fs::write(&path, serde_json::to_vec_pretty(bootstrap).expect("JSON")).expect("write");
    if let Err(e) = validate(&path) {
        panic!("{what}: Envoy refuses it:\n{e}");
    }
}

#[test]
fn envoy_yaml_passes_envoy_validate() {
    validate(&root().join(ENVOY_YAML)).unwrap_or_else(|e| panic!("{ENVOY_YAML}:\n{e}"));
}

#[test]
fn rlqs_envoy_yaml_passes_envoy_validate() {
    validate(&root().join(RLQS_YAML)).unwrap_or_else(|e| panic!("{RLQS_YAML}:\n{e}"));
}

/// The EnvoyFilter's patches, in a minimal bootstrap of the shape they are applied to: the
/// rate limit filter inserted before the router of a gateway listener's HTTP connection
/// manager, the cluster added, and the virtual host merged with the patch's `rate_limits`.
#[test]
fn istio_envoyfilter_patches_pass_envoy_validate() {
    let filter = example_bootstrap::read(ISTIO);
    let patches = filter["spec"]["configPatches"]
        .as_array()
        .expect("configPatches");
    let value = |apply: &str| -> Vec<Value> {
        patches
            .iter()
            .filter(|p| p["applyTo"] == apply)
            .map(|p| p["patch"]["value"].clone())
            .collect()
    };
    let [http_filter] = &value("HTTP_FILTER")[..] else {
        panic!("{ISTIO}: one HTTP_FILTER patch")
    };
    let clusters = value("CLUSTER");
    assert!(!clusters.is_empty(), "{ISTIO}: a CLUSTER patch");
    let mut vhost = json!({
        "name": "gateway", "domains": ["*"],
        "routes": [{ "match": { "prefix": "/" }, "route": { "cluster": clusters[0]["name"] } }],
    });
    for merge in value("VIRTUAL_HOST") {
        crate::support::envoy::merge(&mut vhost, &merge);
    }
    let bootstrap = json!({
        "static_resources": {
            "listeners": [{
                "name": "gateway",
                "address": { "socket_address": { "address": "127.0.0.1", "port_value": 0 } },
                "filter_chains": [{ "filters": [
                    hcm("gateway", json!({ "virtual_hosts": [vhost] }), vec![http_filter.clone()], None)
                ]}],
            }],
            "clusters": clusters,
        }
    });
    validate_value(&bootstrap, ISTIO);
}

/// Every file of `examples/` that holds Envoy configuration (an Envoy type URL) is one of
/// those this module loads into Envoy; the module comment says why the rest hold none.
#[test]
fn every_envoy_config_in_examples_is_covered() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read examples/").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            ) && std::fs::read_to_string(&path)
                .is_ok_and(|t| t.contains("type.googleapis.com/envoy."))
            {
                out.push(
                    path.strip_prefix(root())
                        .expect("under the root")
                        .to_path_buf(),
                );
            }
        }
    }
    let mut found = Vec::new();
    walk(&root().join("examples"), &mut found);
    found.sort();
    let covered: Vec<PathBuf> = [ENVOY_YAML, ISTIO, RLQS_YAML]
        .iter()
        .map(PathBuf::from)
        .collect();
    assert_eq!(
        found, covered,
        "a new Envoy configuration in examples/: load it into Envoy in this module"
    );
}

/// sluice as the image runs it: the bundled rules (`config/`), the in-memory store, and the
/// decision in the response's metadata as the compose demo sets it (the example's access
/// log prints it).
async fn sluice_with_bundled_rules() -> Sluice {
    sluice()
        .no_default_args()
        .arg("--config")
        .arg(root().join("config").display().to_string())
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .env("SLUICE_DECISION_METADATA", "true")
        .start_healthy()
        .await
}

/// An example bootstrap running in Envoy, with the upstream its `demo_upstream` reaches.
struct Served {
    envoy: Envoy,
    /// Its `ingress` listener.
    front: SocketAddr,
    /// Kept for as long as Envoy routes to it.
    _upstream: Upstream,
}

/// `file` as it is, but for its addresses: the listener `ingress` on a free port, the
/// cluster `sluice_cluster` at sluice's gRPC address, `demo_upstream` at a test upstream
/// (both examples name their listener and upstream cluster alike).
async fn serve(file: &str, sluice_cluster: &str, grpc: SocketAddr) -> Served {
    let upstream = Upstream::start().await;
    let port = free_port();
    let bootstrap = Addresses::default()
        .listener("ingress", port)
        .cluster(sluice_cluster, &[grpc])
        .cluster("demo_upstream", &[upstream.addr])
        .apply(example_bootstrap::read(file));
    Served {
        envoy: Envoy::start(bootstrap).await,
        front: SocketAddr::from(([127, 0, 0, 1], port)),
        _upstream: upstream,
    }
}

/// Requests to `path` (with `headers`) through `front` until the first 429, at most `max`:
/// the statuses before it, and the 429's response.
async fn until_429(
    front: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    max: usize,
) -> (Vec<u16>, Option<crate::support::envoy::Response>) {
    let mut before = Vec::new();
    for _ in 0..max {
        let r = http1(front, method, path, headers, "")
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        if r.status == 429 {
            return (before, Some(r));
        }
        before.push(r.status);
    }
    (before, None)
}

/// `examples/envoy.yaml` as written, in front of sluice serving the bundled rules: its
/// descriptors are limited as the rules' comments and the demo's README say, and its access
/// log names the rule that denied.
#[tokio::test]
async fn envoy_yaml_serves_the_bundled_rules_end_to_end() {
    let s = sluice_with_bundled_rules().await;
    let served = serve(ENVOY_YAML, "rate_limit_cluster", s.grpc).await;
    let (envoy, front) = (&served.envoy, served.front);
    // Envoy starts with sluice's host unchecked; its health check passes within a second.
    assert!(
        envoy
            .wait_healthy("rate_limit_cluster", 1, Duration::from_secs(20))
            .await,
        "{}",
        envoy.log()
    );

    // `curl -i localhost:10000/`: 200 from the upstream, with x-ratelimit-* headers. (The
    // file's filter timeout is 50 ms; a check a loaded machine answers later fails open and
    // carries no headers, so the first of a few that does is the one looked at.)
    let mut with_headers = None;
    for _ in 0..3 {
        let r = http1(front, "GET", "/", &[], "").await.expect("GET /");
        assert_eq!(r.status, 200, "{r:?}");
        if r.header("x-ratelimit-limit").is_some() {
            with_headers = Some(r);
            break;
        }
    }
    let r = with_headers.expect("x-ratelimit-limit on a 200");
    assert_eq!(r.body, upstream::BODY);
    assert!(r.header("x-ratelimit-remaining").is_some(), "{r:?}");
    assert!(r.header("x-ratelimit-reset").is_some(), "{r:?}");

    // /limited*: 2 per second, then 429 with the rule's JSON body and header.
    let (before, denied) = until_429(front, "GET", "/limited", &[], 8).await;
    let denied = denied.unwrap_or_else(|| panic!("no 429 on /limited: {before:?}"));
    assert!(
        before.len() >= 2 && before.iter().all(|s| *s == 200),
        "{before:?}"
    );
    assert_eq!(denied.header("x-envoy-ratelimited"), Some("true"));
    assert_eq!(denied.header("x-ratelimit-rule"), Some("limited"));
    assert_eq!(denied.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_str(&denied.body).expect("a JSON body");
    assert_eq!(body["rule"], "limited");

    // POSTs: 5 per client per minute, then 429.
    let (before, denied) = until_429(front, "POST", "/", &[], 7).await;
    assert!(denied.is_some(), "no 429 on the 7th POST: {before:?}");
    assert!(
        before.len() >= 5 && before.iter().all(|s| *s == 200),
        "{before:?}"
    );

    // The access log (Envoy's stdout) names the rule that denied the /limited 429.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !envoy
        .log()
        .contains(r#""ratelimit_rule":"demo.path_/limited*""#)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the access log never named the deciding rule:\n{}",
            envoy.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `examples/rlqs/envoy.yaml` as written, with sluice serving `examples/rlqs/rules.yaml`
/// over RLQS: a tier other than gold is held to its 60 a minute, gold gets ten times as
/// much, and `/healthz` (ALLOW_ALL) never is.
#[tokio::test]
async fn rlqs_envoy_yaml_serves_the_example_rules_end_to_end() {
    let rules = std::fs::read_to_string(root().join("examples/rlqs/rules.yaml")).expect("rules");
    let s = sluice().file("rules.yaml", &rules).start_healthy().await;
    let served = serve(RLQS_YAML, "sluice", s.grpc).await;
    let front = served.front;

    // A silver request opens its bucket (ALLOW_ALL until sluice's first assignment, the
    // file's no_assignment_behavior); sluice answers with a token bucket.
    let silver = [("x-tier", "silver")];
    assert_eq!(
        http1(front, "GET", "/", &silver, "")
            .await
            .expect("GET")
            .status,
        200
    );
    let assigned = r#"sluice_rlqs_assignments_total{action="token_bucket",domain="rlqs-demo"}"#;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while s.metric(assigned).await < 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no assignment: {:?}",
            s.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Then held to 60 a minute: a 429 (the file's deny_response_settings) within the rule,
    // give or take the few requests Envoy admits before it applies the assignment.
    let (admitted, denied) = until_429(front, "GET", "/", &silver, 200).await;
    let admitted = admitted.len() + 1;
    assert!(
        denied.is_some(),
        "silver never limited: {admitted} admitted"
    );
    assert!(
        admitted <= 60 + 5,
        "silver: {admitted} admitted of 60 a minute"
    );
    // Gold shares 600 a minute. A bucket runs at the floor until its demand is known (at
    // Envoy's next report, every 5 s), then holds a second of its share: 10 of 570 a
    // minute, where silver's holds 1 of 57. Four assignments: both floors, both raised.
    let gold = [("x-tier", "gold")];
    assert_eq!(
        http1(front, "GET", "/", &gold, "")
            .await
            .expect("GET")
            .status,
        200
    );
    while s.metric(assigned).await < 4.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no share after the first report: {:?}",
            s.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (gold, _) = until_429(front, "GET", "/", &gold, 100).await;
    assert!(gold.len() >= 9, "gold: {} passed at once", gold.len());
    // /healthz is ALLOW_ALL.
    let (health, denied) = until_429(front, "GET", "/healthz", &silver, 100).await;
    assert!(
        denied.is_none(),
        "/healthz limited after {} requests",
        health.len()
    );
}
