//! What each overlay of `examples/kubernetes/` is for, checked on its `kubectl kustomize`
//! rendering: every rendering passes kubernetes-validate (strict); `memory` is one
//! replica on the in-memory store; `redis` adds Redis, a PodDisruptionBudget, an
//! autoscaler and the prometheus-operator objects; `redis-tls` puts Redis behind mutual
//! TLS with certificates from mounted Secrets.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_yaml::Value;

use super::{K8S, OVERLAYS, object_of, objects_of, rendered, service_port, sluice_pod_of};
use crate::deploy::files::{at, port_at, root, seq_at, str_at, strings};

/// Custom resources the overlays may render: kubernetes-validate has no schema for them,
/// so their shape is checked by the tests below instead.
const CUSTOM_KINDS: [&str; 2] = ["ServiceMonitor", "PrometheusRule"];

fn kubernetes_validate(yaml: &str) -> (bool, String) {
    // As a module: pip may put the console script outside PATH.
    let mut child = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict", "--quiet", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("running kubernetes-validate (scripts/test.sh installs it from PyPI): {e}")
        });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(yaml.as_bytes())
        .expect("write to kubernetes-validate");
    let out = child.wait_with_output().expect("kubernetes-validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn kubernetes_every_overlay_passes_kubernetes_validate_strict() {
    for overlay in OVERLAYS {
        let (ok, text) = kubernetes_validate(rendered(overlay));
        assert!(ok, "{overlay}: kubernetes-validate failed:\n{text}");
        // The only warnings allowed are the missing schemas of the known custom kinds.
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                CUSTOM_KINDS
                    .iter()
                    .any(|k| line.contains(&format!("schema for kind {k} "))),
                "{overlay}: kubernetes-validate says: {line}"
            );
        }
    }
}

#[test]
fn kubernetes_overlays_render_only_known_custom_resources() {
    for overlay in OVERLAYS {
        for (kind, name) in objects_of(overlay).keys() {
            let api = str_at(
                &objects_of(overlay)[&(kind.clone(), name.clone())],
                "apiVersion",
            );
            if api.contains(".coreos.com") {
                assert!(
                    CUSTOM_KINDS.contains(&kind.as_str()),
                    "{overlay}: unexpected custom resource {kind}/{name}"
                );
            }
        }
    }
}

#[test]
fn kubernetes_memory_overlay_runs_one_replica_on_the_memory_store() {
    let pod = sluice_pod_of("memory");
    assert!(
        pod.settings.redis.is_none(),
        "the memory overlay must not configure Redis"
    );
    assert_eq!(
        at(pod.deployment, "spec.replicas").as_u64(),
        Some(1),
        "each in-memory replica counts on its own: one replica keeps limits exact"
    );
}

#[test]
fn kubernetes_memory_overlay_has_no_autoscaler_and_no_redis() {
    let objects = objects_of("memory");
    for (kind, name) in objects.keys() {
        assert_ne!(
            kind, "HorizontalPodAutoscaler",
            "memory overlay: an autoscaler would split the counts"
        );
        assert!(
            !name.starts_with("redis"),
            "memory overlay renders {kind}/{name}"
        );
    }
}

#[test]
fn kubernetes_redis_overlays_share_one_redis_across_replicas() {
    for overlay in ["redis", "redis-tls"] {
        let pod = sluice_pod_of(overlay);
        assert!(pod.settings.redis.is_some(), "{overlay}: sluice uses Redis");
        assert!(
            at(pod.deployment, "spec.replicas").as_u64() >= Some(2),
            "{overlay}: at least two replicas"
        );
        assert!(
            object_of(overlay, "Deployment", "redis").is_some(),
            "{overlay}: renders the Redis Deployment"
        );
    }
}

#[test]
fn kubernetes_redis_overlays_autoscale_the_sluice_deployment_on_cpu() {
    for overlay in ["redis", "redis-tls"] {
        let hpa = object_of(overlay, "HorizontalPodAutoscaler", "sluice")
            .unwrap_or_else(|| panic!("{overlay}: no HorizontalPodAutoscaler sluice"));
        let target = at(hpa, "spec.scaleTargetRef");
        assert_eq!(str_at(target, "kind"), "Deployment");
        assert_eq!(str_at(target, "name"), "sluice");
        let min = at(hpa, "spec.minReplicas").as_u64().unwrap_or(1);
        let max = at(hpa, "spec.maxReplicas").as_u64().expect("maxReplicas");
        assert!(min >= 2 && max > min, "{overlay}: replicas {min}..{max}");
        let metric = &seq_at(hpa, "spec.metrics")[0];
        assert_eq!(str_at(metric, "resource.name"), "cpu");
        // Utilization is relative to the request: without one the HPA cannot act.
        let pod = sluice_pod_of(overlay);
        assert!(
            !at(pod.container, "resources.requests.cpu").is_null(),
            "{overlay}: CPU utilization needs a CPU request"
        );
    }
}

#[test]
fn kubernetes_servicemonitor_scrapes_the_metrics_listener_through_the_sluice_service() {
    let sm = object_of("redis", "ServiceMonitor", "sluice").expect("ServiceMonitor sluice");
    let pod = sluice_pod_of("redis");
    let svc = object_of("redis", "Service", "sluice").expect("Service sluice");
    let selector = at(sm, "spec.selector.matchLabels");
    assert!(
        super::labels_match(selector, at(svc, "metadata.labels")),
        "the ServiceMonitor selects the sluice Service"
    );
    let endpoint = &seq_at(sm, "spec.endpoints")[0];
    let port_name = str_at(endpoint, "port");
    let metrics_addr = pod.settings.metrics_addr.expect("a metrics listener");
    let by_port = service_port("sluice", metrics_addr.port()).expect("a Service port for it");
    let named = seq_at(svc, "spec.ports")
        .iter()
        .find(|p| str_at(p, "name") == port_name)
        .unwrap_or_else(|| panic!("the sluice Service has no port `{port_name}`"));
    assert_eq!(
        port_at(named, "port"),
        by_port,
        "endpoint port is the metrics listener"
    );
    assert_eq!(str_at(endpoint, "path"), pod.settings.metrics_path);
}

#[test]
fn kubernetes_prometheus_rule_is_examples_prometheus_prometheusrule() {
    let component = root()
        .join(K8S)
        .join("components/prometheus-operator/prometheusrule.yaml");
    let example = root().join("examples/prometheus/prometheusrule.yaml");
    assert_eq!(
        std::fs::read_to_string(&component).unwrap(),
        std::fs::read_to_string(&example).unwrap(),
        "the component's PrometheusRule must be a copy of examples/prometheus/prometheusrule.yaml"
    );
    assert!(
        objects_of("redis")
            .keys()
            .any(|(k, _)| k == "PrometheusRule"),
        "the redis overlay renders the PrometheusRule"
    );
}

/// The container's environment value `name`, when set literally.
fn env(container: &Value, name: &str) -> Option<String> {
    seq_at(container, "env")
        .iter()
        .find(|e| str_at(e, "name") == name)
        .and_then(|e| at(e, "value").as_str().map(String::from))
}

/// The Secret mounted at the directory holding `path`, if any.
fn secret_behind(pod: &Value, container: &Value, path: &str) -> Option<String> {
    let mount = seq_at(container, "volumeMounts")
        .iter()
        .find(|m| path.starts_with(&format!("{}/", str_at(m, "mountPath"))))?;
    let volume = seq_at(pod, "spec.volumes")
        .iter()
        .find(|v| at(v, "name") == at(mount, "name"))?;
    at(volume, "secret.secretName").as_str().map(String::from)
}

#[test]
fn kubernetes_redis_tls_overlay_connects_over_tls() {
    let pod = sluice_pod_of("redis-tls");
    let redis = pod.settings.redis.as_ref().expect("Redis");
    for url in redis.main.urls() {
        assert!(url.starts_with("rediss://"), "{url}: not TLS");
    }
}

#[test]
fn kubernetes_redis_tls_overlay_resolves_the_private_ca_and_client_certificate() {
    let pod = sluice_pod_of("redis-tls");
    let tls = &pod.settings.redis.as_ref().expect("Redis").tls;
    let path = |p: &Option<std::path::PathBuf>, what: &str| {
        p.as_ref()
            .unwrap_or_else(|| panic!("the binary resolves no {what}"))
            .display()
            .to_string()
    };
    assert_eq!(path(&tls.ca_cert, "CA"), "/etc/sluice/redis-tls/ca.crt");
    assert_eq!(
        path(&tls.client_cert, "client certificate"),
        "/etc/sluice/redis-tls/tls.crt"
    );
    assert_eq!(
        path(&tls.client_key, "client key"),
        "/etc/sluice/redis-tls/tls.key"
    );
    assert!(
        !tls.skip_hostname_verification,
        "the Redis certificate names `redis`: verify it"
    );
}

#[test]
fn kubernetes_redis_tls_overlay_reads_ca_and_client_certificate_from_a_secret() {
    let pod = sluice_pod_of("redis-tls");
    let template = at(pod.deployment, "spec.template");
    for var in [
        "REDIS_TLS_CACERT",
        "REDIS_TLS_CLIENT_CERT",
        "REDIS_TLS_CLIENT_KEY",
    ] {
        let path = env(pod.container, var).unwrap_or_else(|| panic!("{var} unset"));
        let secret = secret_behind(template, pod.container, &path)
            .unwrap_or_else(|| panic!("{var}={path}: no Secret mounted there"));
        assert_eq!(secret, "sluice-redis-tls", "{var}");
    }
}

#[test]
fn kubernetes_redis_tls_overlay_redis_serves_only_tls_and_requires_client_certificates() {
    let redis = object_of("redis-tls", "Deployment", "redis").expect("Deployment redis");
    let template = at(redis, "spec.template");
    let container = &seq_at(template, "spec.containers")[0];
    let args = strings(at(container, "args"));
    let arg = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .unwrap_or_else(|| panic!("redis-server {flag} missing: {args:?}"))
            .clone()
    };
    assert_eq!(arg("--port"), "0", "no plaintext port");
    assert_eq!(arg("--tls-port"), "6379", "TLS on the port REDIS_URL names");
    assert_eq!(
        arg("--tls-auth-clients"),
        "yes",
        "client certificates required"
    );
    for flag in ["--tls-cert-file", "--tls-key-file", "--tls-ca-cert-file"] {
        let path = arg(flag);
        assert_eq!(
            secret_behind(template, container, &path).as_deref(),
            Some("redis-tls"),
            "{flag} {path}"
        );
    }
    // The readiness probe must speak TLS too, or the pod never becomes ready.
    let probe = strings(at(container, "readinessProbe.exec.command"));
    assert!(probe.contains(&"--tls".to_string()), "{probe:?}");
}
