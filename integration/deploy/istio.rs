//! `examples/istio/envoyfilter.yaml`: the rate limit filter patched into Istio's
//! sidecars. It must configure the filter as `examples/envoy.yaml` does, reach sluice
//! through the Kubernetes example's Service, and send only descriptors the ConfigMap's
//! rules limit.

use std::sync::OnceLock;

use serde_yaml::Value;

use super::binary::assert_rules_cover;
use super::envoy::{
    RATELIMIT_FILTER, assert_checks_bounded_as_the_guide,
    assert_health_check_within_shutdown_delay, assert_ratelimit_filter_fails_open,
    assert_ratelimit_filter_sends_draft_03_headers, assert_ratelimit_filter_speaks_v3,
    cluster_endpoints, descriptors, ratelimit_filter_target, speaks_http2,
};
use super::files::{at, seq_at, str_at, yaml};
use super::kubernetes::{k8s_rules, service_port, sluice_pod};

const FILE: &str = "examples/istio/envoyfilter.yaml";

fn envoyfilter() -> &'static Value {
    static EF: OnceLock<Value> = OnceLock::new();
    EF.get_or_init(|| yaml(FILE))
}

/// The values of the patches applied to `apply` (`HTTP_FILTER`, `CLUSTER`, …).
fn patch(apply: &str) -> Vec<&'static Value> {
    seq_at(envoyfilter(), "spec.configPatches")
        .iter()
        .filter(|p| str_at(p, "applyTo") == apply)
        .map(|p| at(p, "patch.value"))
        .collect()
}

/// The rate limit filter's `typed_config`.
fn ratelimit_filter() -> &'static Value {
    let filter = patch("HTTP_FILTER")
        .into_iter()
        .find(|f| str_at(f, "name") == RATELIMIT_FILTER)
        .expect("an HTTP_FILTER patch adding the rate limit filter");
    at(filter, "typed_config")
}

/// The cluster the rate limit filter calls, and its name.
fn rls_cluster() -> (&'static Value, String) {
    let (_, cluster_name) = ratelimit_filter_target(ratelimit_filter());
    let cluster = patch("CLUSTER")
        .into_iter()
        .find(|c| str_at(c, "name") == cluster_name)
        .unwrap_or_else(|| panic!("{FILE}: no CLUSTER patch named `{cluster_name}`"));
    (cluster, cluster_name)
}

#[test]
fn istio_file_is_an_envoyfilter() {
    assert_eq!(str_at(envoyfilter(), "kind"), "EnvoyFilter");
}

#[test]
fn istio_ratelimit_filter_speaks_the_v3_api() {
    assert_ratelimit_filter_speaks_v3(ratelimit_filter(), FILE);
}

#[test]
fn istio_ratelimit_filter_fails_open() {
    assert_ratelimit_filter_fails_open(ratelimit_filter(), FILE);
}

#[test]
fn istio_ratelimit_filter_sends_draft_03_ratelimit_headers() {
    assert_ratelimit_filter_sends_draft_03_headers(ratelimit_filter(), FILE);
}

#[test]
fn istio_rate_limit_cluster_speaks_http2() {
    let (cluster, cluster_name) = rls_cluster();
    assert!(
        speaks_http2(cluster),
        "{FILE}: `{cluster_name}` must speak HTTP/2"
    );
}

#[test]
fn istio_rate_limit_cluster_targets_the_sluice_service_grpc_port() {
    let (cluster, _) = rls_cluster();
    let grpc = sluice_pod().settings.grpc_addr.port();
    for (host, port) in cluster_endpoints(cluster) {
        let service = host
            .strip_suffix(".svc.cluster.local")
            .and_then(|h| h.split('.').next())
            .unwrap_or_else(|| panic!("{FILE}: `{host}` is not a Service FQDN"));
        assert_eq!(
            service_port(service, grpc),
            Some(port),
            "{FILE}: {host}:{port} is not sluice's gRPC port"
        );
    }
}

#[test]
fn istio_rules_limit_every_descriptor_the_filter_sends() {
    let (domain, _) = ratelimit_filter_target(ratelimit_filter());
    let rate_limits: Vec<Value> = patch("VIRTUAL_HOST")
        .iter()
        .chain(patch("ROUTE_CONFIGURATION").iter())
        .flat_map(|v| seq_at(v, "rate_limits").to_vec())
        .collect();
    assert_rules_cover(k8s_rules(), &domain, &descriptors(&rate_limits, FILE), FILE);
}

/// In a rolling restart of the Deployment, the gateway takes a stopping pod out before the pod
/// stops answering.
#[test]
fn istio_health_check_notices_a_stopping_sluice_within_its_shutdown_delay() {
    let (cluster, _) = rls_cluster();
    assert_health_check_within_shutdown_delay(cluster, &sluice_pod().settings, FILE);
}

/// Under overload the gateway keeps no more checks on sluice than the overload guide allows
/// (Envoy's defaults queue them until they are late).
#[test]
fn istio_gateway_bounds_the_checks_it_keeps_on_sluice() {
    let (cluster, _) = rls_cluster();
    assert_checks_bounded_as_the_guide(cluster, &sluice_pod().settings, FILE);
}
