//! How the Kubernetes objects refer to each other and to the other example files: the
//! kustomization lists the manifests, Services and the PodDisruptionBudget select the
//! sluice pods and target ports the container declares, the Redis URL names a Service,
//! and the ConfigMap holds the compose demo's rules, which limit what
//! `examples/envoy.yaml` sends when it runs in-cluster.

use std::collections::BTreeSet;

use serde_yaml::Value;

use super::{K8S, k8s_rules, labels_match, object, objects, service_port, sluice_pod, target_port};
use crate::deploy::binary::assert_rules_cover;
use crate::deploy::envoy::{ENVOY_YAML, envoy_bootstrap};
use crate::deploy::files::{at, port_at, root, seq_at, str_at, strings, yaml};
use crate::support::cli::rule_files;

/// Each kustomization directory (base, overlays, components) uses every manifest beside
/// it, as a resource or a patch, and names only files or directories that exist.
#[test]
fn kubernetes_every_manifest_is_used_by_its_kustomization() {
    let mut dirs = Vec::new();
    let mut stack = vec![root().join(K8S)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "kustomization.yaml") {
                dirs.push(d.clone());
            }
        }
    }
    assert!(
        dirs.len() >= 5,
        "base, three overlays and a component: {dirs:?}"
    );
    for dir in dirs {
        let rel = dir.strip_prefix(root()).unwrap().to_path_buf();
        let k = yaml(rel.join("kustomization.yaml"));
        let mut used: BTreeSet<String> = strings(at(&k, "resources")).into_iter().collect();
        used.extend(
            seq_at(&k, "patches")
                .iter()
                .map(|p| str_at(p, "path").to_string()),
        );
        for u in &used {
            assert!(
                dir.join(u).exists(),
                "{}: `{u}` does not exist",
                rel.display()
            );
        }
        for c in strings(at(&k, "components")) {
            assert!(
                dir.join(&c).is_dir(),
                "{}: component `{c}` missing",
                rel.display()
            );
        }
        let present: BTreeSet<String> = rule_files(&dir)
            .iter()
            .filter(|f| f.parent() == Some(dir.as_path()))
            .map(|f| f.file_name().unwrap().to_str().unwrap().to_string())
            .filter(|f| f != "kustomization.yaml")
            .collect();
        let unused: Vec<_> = present.difference(&used).collect();
        assert!(
            unused.is_empty(),
            "{}: not in the kustomization: {unused:?}",
            rel.display()
        );
    }
}

#[test]
fn kubernetes_redis_url_names_a_service_with_its_port() {
    let s = &sluice_pod().settings;
    let redis = s.redis.as_ref().expect("the Deployment uses Redis");
    for url in redis.main.urls() {
        let hostport = url
            .split("://")
            .nth(1)
            .unwrap()
            .split(['/', '?'])
            .next()
            .unwrap();
        let hostport = hostport.rsplit('@').next().unwrap();
        let (host, port) = hostport.split_once(':').unwrap_or((hostport, "6379"));
        let svc = object("Service", host);
        assert!(
            seq_at(svc, "spec.ports")
                .iter()
                .any(|p| port_at(p, "port").to_string() == port),
            "Service {host} has no port {port} (Redis URL {url})"
        );
    }
}

#[test]
fn kubernetes_sluice_service_exposes_every_listener() {
    let s = &sluice_pod().settings;
    let want: Vec<u16> = [
        Some(s.http_addr.port()),
        Some(s.grpc_addr.port()),
        s.metrics_addr.map(|a| a.port()),
    ]
    .into_iter()
    .flatten()
    .collect();
    for port in &want {
        assert!(
            service_port("sluice", *port).is_some(),
            "Service sluice does not expose container port {port}"
        );
    }
}

/// Every port of every Service selecting the pods targets a declared container port
/// (`container_port` panics otherwise), and there is such a Service.
#[test]
fn kubernetes_services_target_declared_container_ports() {
    let pod = sluice_pod();
    let mut checked = 0;
    for ((kind, _), svc) in objects() {
        if kind == "Service" && labels_match(at(svc, "spec.selector"), pod.labels()) {
            for p in seq_at(svc, "spec.ports") {
                pod.container_port(target_port(p));
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no Service port selects the sluice pods");
}

/// There is a PodDisruptionBudget, and each one selects the sluice pods.
#[test]
fn kubernetes_pod_disruption_budget_selects_sluice_pods() {
    let pod = sluice_pod();
    let mut budgets = 0;
    for ((kind, name), o) in objects() {
        if kind == "PodDisruptionBudget" {
            assert!(
                labels_match(at(o, "spec.selector.matchLabels"), pod.labels()),
                "PodDisruptionBudget {name} selects no sluice pod"
            );
            budgets += 1;
        }
    }
    assert!(budgets > 0, "no PodDisruptionBudget");
}

/// The ConfigMap mounted at the config directory holds rules `sluice check` accepts.
#[test]
fn kubernetes_config_map_rules_are_valid() {
    k8s_rules();
}

#[test]
fn kubernetes_config_map_rules_limit_every_descriptor_envoy_sends() {
    let boot = envoy_bootstrap();
    assert_rules_cover(k8s_rules(), &boot.domain, &boot.descriptors, "ConfigMap");
}

/// examples/envoy.yaml also works in-cluster: `sluice` is the Service's name.
#[test]
fn kubernetes_envoy_yaml_rate_limit_cluster_is_the_sluice_service_grpc_port() {
    let grpc = sluice_pod().settings.grpc_addr.port();
    for (host, port) in &envoy_bootstrap().rls {
        assert_eq!(
            service_port(host, grpc),
            Some(*port),
            "{ENVOY_YAML}: {host}:{port} is not sluice's gRPC port in Kubernetes"
        );
    }
}

/// The ConfigMap holds the compose demo's rules (its header says so).
#[test]
fn kubernetes_config_map_matches_the_demo_rules() {
    let pod = sluice_pod();
    let demo_dir = root().join("examples/demo/config");
    for f in rule_files(&demo_dir) {
        let name = f.file_name().unwrap().to_str().unwrap();
        let cm = object("ConfigMap", &pod.config_maps()[0]);
        assert_eq!(
            at(cm, "data").get(name).and_then(Value::as_str),
            Some(std::fs::read_to_string(&f).unwrap().as_str()),
            "ConfigMap {name} differs from examples/demo/config/{name}"
        );
    }
}
